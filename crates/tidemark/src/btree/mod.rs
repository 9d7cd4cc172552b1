//! The B+tree: ordered byte-string keys and values over the buffer pool.
//!
//! Concurrency is latch coupling, top-down only: a thread latches a child
//! before releasing its parent and never latches upwards, so tree latches
//! cannot deadlock. A write first descends with shared latches and takes
//! only the leaf exclusively (optimistic); if the leaf must split, it
//! retries holding exclusive latches from the highest node that might have
//! to absorb a split down to the leaf (pessimistic). A table's root keeps
//! its page id forever: when it splits, its content moves to a new child.
//!
//! A leaf that a delete empties is unlinked from its parent and freed
//! (`unlink_empty_leaf`), unless it is its parent's only child or the root;
//! scans skip any empty leaf left. A node that a delete (or a merge below
//! it) takes below a quarter full is merged with a sibling under the same
//! parent when the two fit in three quarters of a page (`merge_underfull`),
//! and a root left with one child takes its content: the tree gets shorter.

pub(crate) mod node;
pub(crate) mod overflow;

use std::ops::Bound;
use std::sync::atomic::Ordering;

use crate::cache::{BufferPool, PageRead, PageWrite};
use crate::error::{Error, Result};
use crate::page;
use crate::pager::Pager;
use node::LeafValue;

/// Deepest tree we follow. A corrupted file with a cycle of branch pages
/// would otherwise loop forever; 16-KiB pages reach 2 TiB in 5 levels.
const MAX_DEPTH: usize = 32;
/// Worst-case separator cell a branch of `page_size` bytes may have to
/// take in a split.
const fn max_branch_cell(page_size: usize) -> usize {
    10 + page::max_key_size(page_size)
}

/// What an attempt to merge two siblings found.
enum Merge {
    /// They are one node now.
    Merged,
    /// The node on the deleting key's path is no longer under the mark.
    NotUnder,
    /// Together they would not fit.
    TooFull,
}

/// A value as stored in a leaf, detached from the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredValue {
    Inline(Vec<u8>),
    Overflow { len: u64, index_pid: u64 },
}

impl StoredValue {
    fn from_leaf(v: LeafValue<'_>) -> Self {
        match v {
            LeafValue::Inline(b) => StoredValue::Inline(b.to_vec()),
            LeafValue::Overflow { len, index_pid } => StoredValue::Overflow { len, index_pid },
        }
    }
    fn as_leaf(&self) -> LeafValue<'_> {
        match self {
            StoredValue::Inline(b) => LeafValue::Inline(b),
            StoredValue::Overflow { len, index_pid } => LeafValue::Overflow {
                len: *len,
                index_pid: *index_pid,
            },
        }
    }
}

/// One leaf's worth of a range scan, and where the next one starts.
pub(crate) struct LeafBatch {
    pub(crate) entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// For a forward fetch: the lowest key of the next leaf (its fence);
    /// for a backward fetch: this leaf's lowest possible key. `None` at the
    /// end of the tree, and when the fetch stopped at its `max`.
    pub(crate) fence: Option<Vec<u8>>,
    /// The fetch stopped at its `max` entries with more of the leaf within
    /// the bounds: the next fetch starts after the last entry, not at the
    /// fence.
    pub(crate) cut: bool,
}

/// Where a forward scan is, between two calls of [`Tree::fetch_forward`].
#[derive(Default)]
pub(crate) struct ScanHint {
    parent: Option<ScanPlace>,
}

struct ScanPlace {
    /// The branch (level 1) above the leaf last read.
    pid: u64,
    /// Its child to read next.
    next: usize,
    /// [`Pager::shape_changes`] when the branch was read.
    shapes: u64,
    /// The branch's own fence: the lowest key after its last child.
    upper: Option<Vec<u8>>,
    /// The fence the last call returned (set once that call completed):
    /// the next call must start there.
    fence: Option<Vec<u8>>,
}

pub(crate) struct Tree<'a> {
    pub(crate) pager: &'a Pager,
    pub(crate) pool: &'a BufferPool,
    pub(crate) root: u64,
}

pub(crate) fn in_lower(key: &[u8], lo: &Bound<Vec<u8>>) -> bool {
    match lo {
        Bound::Included(b) => key >= b.as_slice(),
        Bound::Excluded(b) => key > b.as_slice(),
        Bound::Unbounded => true,
    }
}
pub(crate) fn in_upper(key: &[u8], hi: &Bound<Vec<u8>>) -> bool {
    match hi {
        Bound::Included(b) => key <= b.as_slice(),
        Bound::Excluded(b) => key < b.as_slice(),
        Bound::Unbounded => true,
    }
}

fn check_child_level(parent: &[u8], child: &[u8], pid: u64) -> Result<()> {
    if page::level(child) + 1 != page::level(parent) {
        return Err(Error::corruption(
            pid,
            format!(
                "level {} under a level-{} branch",
                page::level(child),
                page::level(parent)
            ),
        ));
    }
    Ok(())
}

/// Receives a key's previous value before a put or delete changes it.
pub(crate) type Keep<'k> = Option<&'k mut dyn FnMut(Option<&[u8]>)>;

impl<'a> Tree<'a> {
    fn read_value(&self, v: LeafValue<'_>) -> Result<Vec<u8>> {
        match v {
            LeafValue::Inline(b) => Ok(b.to_vec()),
            LeafValue::Overflow { len, index_pid } => overflow::read(self.pager, index_pid, len),
        }
    }

    /// Descends with shared latches, choosing the child with `pick`, and
    /// returns the leaf. `pick` gets the branch bytes and returns a child index.
    fn descend_shared(&self, mut pick: impl FnMut(&[u8]) -> usize) -> Result<PageRead<'a>> {
        let mut g = self.pool.fix_shared(self.pager, self.root)?;
        for _ in 0..MAX_DEPTH {
            if node::is_leaf(g.bytes()) {
                return Ok(g);
            }
            let c = node::child(g.bytes(), pick(g.bytes()));
            let cg = self.pool.fix_shared(self.pager, c)?;
            check_child_level(g.bytes(), cg.bytes(), c)?;
            g = cg;
        }
        Err(Error::corruption(
            self.root,
            "tree deeper than the depth limit (cycle?)",
        ))
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let leaf = self.descend_shared(|b| node::child_index(b, key))?;
        match node::search(leaf.bytes(), key) {
            Ok(i) => Ok(Some(self.read_value(node::leaf_value(leaf.bytes(), i))?)),
            Err(_) => Ok(None),
        }
    }

    /// Inserts or replaces; returns the previous value as stored. `keep`,
    /// if given, receives the previous value (`None`: absent) once, under
    /// the leaf's exclusive latch, just before the leaf changes: a reader
    /// that sees the change can find what `keep` kept (snapshots).
    pub(crate) fn put(
        &self,
        key: &[u8],
        value: &StoredValue,
        mut keep: Keep<'_>,
    ) -> Result<Option<StoredValue>> {
        let cell = node::encode_leaf_cell(key, value.as_leaf());
        if let Some(old) = self.put_optimistic(key, &cell, &mut keep)? {
            return Ok(old);
        }
        self.put_pessimistic(key, &cell, &mut keep)
    }

    /// Hands the value at leaf index `i` (`None`: absent) to `keep`.
    fn keep_old(&self, b: &[u8], i: Option<usize>, keep: &mut Keep<'_>) -> Result<()> {
        if let Some(k) = keep.as_mut() {
            // An inline value is handed over from the leaf, not copied
            // here: the receiver copies what it keeps.
            match i.map(|i| node::leaf_value(b, i)) {
                None => k(None),
                Some(LeafValue::Inline(v)) => k(Some(v)),
                Some(v) => k(Some(&self.read_value(v)?)),
            }
        }
        Ok(())
    }

    /// Puts into the leaf if it fits: `Some(previous)`; `None` if it must split.
    fn leaf_put(
        &self,
        w: &mut PageWrite<'_>,
        key: &[u8],
        cell: &[u8],
        keep: &mut Keep<'_>,
    ) -> Result<Option<Option<StoredValue>>> {
        match node::search(w.bytes(), key) {
            Ok(i) => {
                let old = StoredValue::from_leaf(node::leaf_value(w.bytes(), i));
                if node::free_space(w.bytes()) + node::cell(w.bytes(), i).len() < cell.len() {
                    return Ok(None);
                }
                self.keep_old(w.bytes(), Some(i), keep)?;
                let b = w.bytes_mut()?;
                if !node::overwrite_cell(b, i, cell) {
                    node::remove(b, i);
                    let ok = node::insert_cell(b, i, cell);
                    debug_assert!(ok, "space was checked before removing");
                }
                Ok(Some(Some(old)))
            }
            Err(i) => {
                if !node::can_insert(w.bytes(), cell.len()) {
                    return Ok(None);
                }
                self.keep_old(w.bytes(), None, keep)?;
                let b = w.bytes_mut()?;
                let ok = node::insert_cell(b, i, cell);
                debug_assert!(ok, "space was checked");
                node::note_leaf_insert(b, i);
                Ok(Some(None))
            }
        }
    }

    fn leaf_fits(bytes: &[u8], key: &[u8], cell: &[u8]) -> bool {
        match node::search(bytes, key) {
            Ok(i) => node::free_space(bytes) + node::cell(bytes, i).len() >= cell.len(),
            Err(_) => node::can_insert(bytes, cell.len()),
        }
    }

    fn put_optimistic(
        &self,
        key: &[u8],
        cell: &[u8],
        keep: &mut Keep<'_>,
    ) -> Result<Option<Option<StoredValue>>> {
        let mut g = self.pool.fix_shared(self.pager, self.root)?;
        if node::is_leaf(g.bytes()) {
            drop(g);
            let mut w = self.pool.fix_exclusive(self.pager, self.root)?;
            if !node::is_leaf(w.bytes()) {
                return Ok(None);
            }
            return self.leaf_put(&mut w, key, cell, keep);
        }
        for _ in 0..MAX_DEPTH {
            let c = node::child(g.bytes(), node::child_index(g.bytes(), key));
            if page::level(g.bytes()) == 1 {
                let mut w = self.pool.fix_exclusive(self.pager, c)?;
                check_child_level(g.bytes(), w.bytes(), c)?;
                drop(g);
                return self.leaf_put(&mut w, key, cell, keep);
            }
            let cg = self.pool.fix_shared(self.pager, c)?;
            check_child_level(g.bytes(), cg.bytes(), c)?;
            g = cg;
        }
        Err(Error::corruption(
            self.root,
            "tree deeper than the depth limit (cycle?)",
        ))
    }

    fn put_pessimistic(
        &self,
        key: &[u8],
        cell: &[u8],
        keep: &mut Keep<'_>,
    ) -> Result<Option<StoredValue>> {
        // `path` holds the ancestors that may have to take a separator, each
        // with the index of the child we went down.
        let mut path: Vec<(PageWrite<'a>, usize)> = Vec::new();
        let mut w = self.pool.fix_exclusive(self.pager, self.root)?;
        let mut depth = 0;
        // Whether the leaf is at an edge of the key space (splits there
        // leave the inner part fuller: `node::split_leaf`).
        let mut edge = node::Edge {
            rightmost: true,
            leftmost: true,
        };
        while !node::is_leaf(w.bytes()) {
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(Error::corruption(
                    self.root,
                    "tree deeper than the depth limit (cycle?)",
                ));
            }
            let idx = node::child_index(w.bytes(), key);
            edge.rightmost &= idx == page::count(w.bytes());
            edge.leftmost &= idx == 0;
            let c = node::child(w.bytes(), idx);
            let cw = self.pool.fix_exclusive(self.pager, c)?;
            check_child_level(w.bytes(), cw.bytes(), c)?;
            let safe = if node::is_leaf(cw.bytes()) {
                Self::leaf_fits(cw.bytes(), key, cell)
            } else {
                node::can_insert(cw.bytes(), max_branch_cell(cw.bytes().len()))
            };
            path.push((w, idx));
            if safe {
                path.clear();
            }
            w = cw;
        }
        if let Some(old) = self.leaf_put(&mut w, key, cell, keep)? {
            return Ok(old);
        }
        // The leaf must split.
        let (i, replace, old) = match node::search(w.bytes(), key) {
            Ok(i) => (
                i,
                true,
                Some(StoredValue::from_leaf(node::leaf_value(w.bytes(), i))),
            ),
            Err(i) => (i, false, None),
        };
        self.keep_old(w.bytes(), replace.then_some(i), keep)?;
        self.split_upwards(w, path, i, cell.to_vec(), replace, edge)?;
        Ok(old)
    }

    /// Splits `cur`, which cannot take `pending` at index `i`, and carries
    /// separators up `path` until one ancestor absorbs it. `edge`: where
    /// the leaf `cur` sits.
    fn split_upwards(
        &self,
        mut cur: PageWrite<'a>,
        mut path: Vec<(PageWrite<'a>, usize)>,
        mut i: usize,
        mut pending: Vec<u8>,
        mut replace: bool,
        edge: node::Edge,
    ) -> Result<()> {
        // `path` holds the leaf's parent (it must take a separator), and
        // scans check the count under that parent's latch.
        self.pager.shape_changed();
        loop {
            if path.is_empty() {
                // `cur` is the root: move its content into a new child and
                // make the root a branch one level higher over it.
                debug_assert_eq!(cur.pid(), self.root);
                let lpid = self.pager.alloc_pid()?;
                let mut l = self.pool.new_page(self.pager, lpid)?;
                let lb = l.bytes_mut()?;
                lb.copy_from_slice(cur.bytes());
                page::set_id(lb, lpid);
                let level = page::level(cur.bytes());
                node::init_branch(cur.bytes_mut()?, self.root, level + 1, lpid);
                path.push((cur, 0));
                cur = l;
            }
            let rpid = self.pager.alloc_pid()?;
            let mut r = self.pool.new_page(self.pager, rpid)?;
            let sep = if node::is_leaf(cur.bytes()) {
                node::split_leaf(
                    cur.bytes_mut()?,
                    r.bytes_mut()?,
                    rpid,
                    i,
                    &pending,
                    replace,
                    edge,
                )
            } else {
                node::split_branch(cur.bytes_mut()?, r.bytes_mut()?, rpid, i, &pending)
            };
            drop(r);
            drop(cur);
            // `path` is non-empty: the root case above pushed onto it.
            let Some((mut parent, pidx)) = path.pop() else {
                unreachable!("split path lost its parent")
            };
            let pcell = node::encode_branch_cell(&sep, rpid);
            if node::can_insert(parent.bytes(), pcell.len()) {
                let ok = node::insert_cell(parent.bytes_mut()?, pidx, &pcell);
                debug_assert!(ok);
                return Ok(());
            }
            cur = parent;
            pending = pcell;
            i = pidx;
            replace = false;
        }
    }

    /// Removes `key`; returns the value as it was stored. `keep` as for
    /// [`Tree::put`] (called with `None` when the key is absent).
    pub(crate) fn delete(&self, key: &[u8], mut keep: Keep<'_>) -> Result<Option<StoredValue>> {
        let mut g = self.pool.fix_shared(self.pager, self.root)?;
        let mut w = if node::is_leaf(g.bytes()) {
            drop(g);
            let w = self.pool.fix_exclusive(self.pager, self.root)?;
            if !node::is_leaf(w.bytes()) {
                drop(w);
                return self.delete(key, keep);
            }
            w
        } else {
            let mut depth = 0;
            loop {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(Error::corruption(
                        self.root,
                        "tree deeper than the depth limit (cycle?)",
                    ));
                }
                let c = node::child(g.bytes(), node::child_index(g.bytes(), key));
                if page::level(g.bytes()) == 1 {
                    let w = self.pool.fix_exclusive(self.pager, c)?;
                    check_child_level(g.bytes(), w.bytes(), c)?;
                    // Coupled until the leaf is latched; no longer (an
                    // emptied leaf is unlinked from the top down).
                    drop(g);
                    break w;
                }
                let cg = self.pool.fix_shared(self.pager, c)?;
                check_child_level(g.bytes(), cg.bytes(), c)?;
                g = cg;
            }
        };
        match node::search(w.bytes(), key) {
            Ok(i) => {
                let old = StoredValue::from_leaf(node::leaf_value(w.bytes(), i));
                self.keep_old(w.bytes(), Some(i), &mut keep)?;
                let used_before = node::used(w.bytes());
                let b = w.bytes_mut()?;
                node::remove(b, i);
                node::note_leaf_remove(b, i);
                let root = w.pid() == self.root;
                if page::count(w.bytes()) == 0 && !root {
                    drop(w);
                    self.unlink_empty_leaf(key)?;
                } else if !root
                    && node::crossed_merge_mark(w.bytes().len(), used_before, node::used(w.bytes()))
                {
                    // Once per fall below a mark, not on every delete
                    // under it: a leaf draining from one end (a queue)
                    // beside a full sibling tries twice, then empties.
                    drop(w);
                    self.merge_underfull(key, 0)?;
                }
                Ok(Some(old))
            }
            Err(_) => {
                // Nothing changes, but the delete is still a write of the
                // key: a transaction that began earlier and writes it too
                // must conflict (snapshot isolation).
                self.keep_old(w.bytes(), None, &mut keep)?;
                Ok(None)
            }
        }
    }

    /// The branch at `level + 1` on `key`'s path (the parent of the node at
    /// `level` there), latched exclusively by a top-down descent with
    /// exclusive latch coupling (as a pessimistic split takes them), so no
    /// other thread is inside it or can reach its children; `None` when the
    /// tree is not that high.
    fn parent_exclusive(&self, key: &[u8], level: u8) -> Result<Option<PageWrite<'a>>> {
        let mut g = self.pool.fix_exclusive(self.pager, self.root)?;
        for _ in 0..MAX_DEPTH {
            let at = page::level(g.bytes());
            if at <= level {
                return Ok(None);
            }
            if at == level + 1 {
                return Ok(Some(g));
            }
            let c = node::child(g.bytes(), node::child_index(g.bytes(), key));
            let cw = self.pool.fix_exclusive(self.pager, c)?;
            check_child_level(g.bytes(), cw.bytes(), c)?;
            g = cw;
        }
        Err(Error::corruption(
            self.root,
            "tree deeper than the depth limit (cycle?)",
        ))
    }

    /// Removes the leaf on `key`'s path from its parent and frees it, if it
    /// is (still) empty and its parent has another child. Latches its
    /// parent as [`Self::parent_exclusive`] does, so no reader can reach
    /// the leaf once its parent no longer names it; a reader already on it
    /// finished before its latch was granted. Queue-like tables (keys added
    /// at one end, deleted at the other) would otherwise keep one empty
    /// leaf per leaf of keys ever deleted.
    fn unlink_empty_leaf(&self, key: &[u8]) -> Result<()> {
        let Some(mut g) = self.parent_exclusive(key, 0)? else {
            return Ok(());
        };
        let idx = node::child_index(g.bytes(), key);
        let c = node::child(g.bytes(), idx);
        let cw = self.pool.fix_exclusive(self.pager, c)?;
        check_child_level(g.bytes(), cw.bytes(), c)?;
        if page::count(cw.bytes()) != 0 || page::count(g.bytes()) == 0 {
            return Ok(());
        }
        let before = node::used(g.bytes());
        // Under the parent's exclusive latch, as scans expect.
        self.pager.shape_changed();
        let b = g.bytes_mut()?;
        if idx == 0 {
            // The next child becomes the leftmost: it takes the keys
            // below its separator, of which there are none.
            page::set_aux(b, node::child(b, 1));
            node::remove(b, 0);
        } else {
            node::remove(b, idx - 1);
        }
        drop(cw);
        self.pool.discard(self.pager, c)?;
        self.pager.free_pid(c);
        self.pager
            .counters
            .leaves_unlinked
            .fetch_add(1, Ordering::Relaxed);
        self.after_removal(g, before, key)
    }

    /// Merges the node at `level` on `key`'s path (a leaf at level 0) with
    /// a sibling under the same parent, if it is still under
    /// [`node::merge_below`] and the two fit in [`node::merge_fill_max`]:
    /// the next sibling first, else the one before. The right one's cells
    /// move to the left one (a branch's with the parent's separator between
    /// them), the separator leaves the parent, and the right page is freed.
    /// If that takes the parent under the mark in turn, it is merged the
    /// same way, one level up; a root left with one child takes its
    /// content (`collapse_root`). Latches the parent as
    /// [`Self::parent_exclusive`] does, then two siblings left to right
    /// under it; no other thread latches a sibling while holding one, and
    /// none can reach either without passing the parent.
    fn merge_underfull(&self, key: &[u8], level: u8) -> Result<()> {
        let Some(mut g) = self.parent_exclusive(key, level)? else {
            return Ok(());
        };
        let idx = node::child_index(g.bytes(), key);
        let before = node::used(g.bytes());
        // Children `li` and `li + 1`, separated by cell `li`: the node and
        // the next one, then the one before and the node.
        let n = page::count(g.bytes());
        for li in [Some(idx).filter(|&i| i < n), idx.checked_sub(1)]
            .into_iter()
            .flatten()
        {
            match self.merge_pair(&mut g, li, li == idx)? {
                Merge::Merged => return self.after_removal(g, before, key),
                Merge::NotUnder => return Ok(()),
                Merge::TooFull => {}
            }
        }
        Ok(())
    }

    /// After a child left branch `g` (whose used bytes were `before`):
    /// merges `g` with a sibling if that took it under a mark, and makes
    /// a root left with one child take its content.
    fn after_removal(&self, g: PageWrite<'a>, before: usize, key: &[u8]) -> Result<()> {
        if g.pid() == self.root {
            return if page::count(g.bytes()) == 0 {
                self.collapse_root(g)
            } else {
                Ok(())
            };
        }
        let level = page::level(g.bytes());
        if node::crossed_merge_mark(g.bytes().len(), before, node::used(g.bytes())) {
            drop(g);
            self.merge_underfull(key, level)?;
        }
        Ok(())
    }

    /// The root `g`, a branch with one child, takes that child's content
    /// and level (the root keeps its page id), and the child is freed;
    /// again while the root is a branch with one child. The tree gets one
    /// level shorter each time.
    fn collapse_root(&self, mut g: PageWrite<'a>) -> Result<()> {
        while !node::is_leaf(g.bytes()) && page::count(g.bytes()) == 0 {
            let c = node::child(g.bytes(), 0);
            let cw = self.pool.fix_exclusive(self.pager, c)?;
            check_child_level(g.bytes(), cw.bytes(), c)?;
            // Under the root's exclusive latch, as scans expect.
            self.pager.shape_changed();
            let b = g.bytes_mut()?;
            b.copy_from_slice(cw.bytes());
            page::set_id(b, self.root);
            drop(cw);
            self.pool.discard(self.pager, c)?;
            self.pager.free_pid(c);
            self.pager
                .counters
                .roots_collapsed
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Merges children `li` and `li + 1` of branch `g` if the one on the
    /// deleting key's path (the left one when `left_on_path`) is under
    /// [`node::merge_below`] and the two fit.
    fn merge_pair(&self, g: &mut PageWrite<'a>, li: usize, left_on_path: bool) -> Result<Merge> {
        let (lp, rp) = (node::child(g.bytes(), li), node::child(g.bytes(), li + 1));
        let mut lw = self.pool.fix_exclusive(self.pager, lp)?;
        check_child_level(g.bytes(), lw.bytes(), lp)?;
        let rw = self.pool.fix_exclusive(self.pager, rp)?;
        check_child_level(g.bytes(), rw.bytes(), rp)?;
        let on_path = if left_on_path { &lw } else { &rw };
        if node::used(on_path.bytes()) >= node::merge_below(on_path.bytes().len()) {
            return Ok(Merge::NotUnder);
        }
        if !node::can_merge(lw.bytes(), rw.bytes(), node::key(g.bytes(), li)) {
            return Ok(Merge::TooFull);
        }
        let sep = node::key(g.bytes(), li).to_vec();
        // Both pages made dirty (or shadowed for a running checkpoint, which
        // may fail) before either changes, so a failure leaves both as
        // they were.
        g.bytes_mut()?;
        let lb = lw.bytes_mut()?;
        // Under the parent's exclusive latch, as scans expect.
        self.pager.shape_changed();
        let merged = node::merge(lb, rw.bytes(), &sep);
        debug_assert!(merged, "the fit was checked above");
        let leaf = node::is_leaf(rw.bytes());
        node::remove(g.bytes_mut()?, li);
        drop(lw);
        drop(rw);
        self.pool.discard(self.pager, rp)?;
        self.pager.free_pid(rp);
        if leaf {
            self.pager
                .counters
                .leaves_merged
                .fetch_add(1, Ordering::Relaxed);
        } else {
            self.pager
                .counters
                .branches_merged
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(Merge::Merged)
    }

    /// Entries of the leaf holding the lowest keys within `lo`, up to `hi`,
    /// at most `max` of them (at least one is always taken).
    ///
    /// `hint` carries a forward scan's place from one call to the next: the
    /// branch above the leaf just read and the index of the next child.
    /// When `lo` starts at the fence that call returned and no tree changed
    /// shape since, the next leaf is found under that branch alone, without
    /// descending from the root again.
    pub(crate) fn fetch_forward(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        hint: &mut ScanHint,
        max: usize,
    ) -> Result<LeafBatch> {
        let (leaf, mut fence) = match self.next_leaf(lo, hint)? {
            Some(found) => found,
            None => self.descend_forward(lo, hint)?,
        };
        let b = leaf.bytes();
        let start = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) => node::search(b, k).unwrap_or_else(|i| i),
            Bound::Excluded(k) => node::search(b, k).map_or_else(|i| i, |i| i + 1),
        };
        let end = page::count(b);
        let max = max.max(1);
        let mut entries = Vec::with_capacity(end.saturating_sub(start).min(max));
        for i in start..end {
            let k = node::key(b, i);
            if !in_upper(k, hi) {
                hint.parent = None;
                return Ok(LeafBatch {
                    entries,
                    fence: None,
                    cut: false,
                });
            }
            if entries.len() == max {
                hint.parent = None;
                return Ok(LeafBatch {
                    entries,
                    fence: None,
                    cut: true,
                });
            }
            entries.push((k.to_vec(), self.read_value(node::leaf_value(b, i))?));
        }
        if fence.as_ref().is_some_and(|f| !in_upper(f, hi)) {
            fence = None;
        }
        match (&fence, hint.parent.as_mut()) {
            (Some(f), Some(p)) => p.fence = Some(f.clone()),
            _ => hint.parent = None,
        }
        Ok(LeafBatch {
            entries,
            fence,
            cut: false,
        })
    }

    /// The leaf after the one `hint` last returned, found under the branch
    /// it remembers; `None` when that does not apply or no longer holds.
    fn next_leaf(
        &self,
        lo: &Bound<Vec<u8>>,
        hint: &mut ScanHint,
    ) -> Result<Option<(PageRead<'a>, Option<Vec<u8>>)>> {
        let Some(p) = hint.parent.as_mut() else {
            return Ok(None);
        };
        if !matches!((lo, &p.fence), (Bound::Included(k), Some(f)) if k == f) {
            return Ok(None);
        }
        // Not loaded if it is not cached: a merge may have freed it since
        // (the count below then differs), and its id must not be read.
        let Some(g) = self.pool.fix_shared_cached(self.pager, p.pid) else {
            return Ok(None);
        };
        // Every shape change is counted while the branch whose children it
        // changes is latched exclusively: an equal count under our latch
        // means this branch still has the children it had.
        if self.pager.shape_changes.load(Ordering::Acquire) != p.shapes {
            return Ok(None);
        }
        let b = g.bytes();
        if node::is_leaf(b) || page::level(b) != 1 || p.next > page::count(b) {
            return Ok(None);
        }
        let c = node::child(b, p.next);
        let leaf = self.pool.fix_shared(self.pager, c)?;
        check_child_level(b, leaf.bytes(), c)?;
        let fence = if p.next < page::count(b) {
            Some(node::key(b, p.next).to_vec())
        } else {
            p.upper.clone()
        };
        p.next += 1;
        Ok(Some((leaf, fence)))
    }

    /// Descends from the root to the leaf holding the lowest keys within
    /// `lo`; returns it with its fence, and remembers its parent in `hint`.
    fn descend_forward(
        &self,
        lo: &Bound<Vec<u8>>,
        hint: &mut ScanHint,
    ) -> Result<(PageRead<'a>, Option<Vec<u8>>)> {
        let mut fence: Option<Vec<u8>> = None;
        hint.parent = None;
        let shapes = &self.pager.shape_changes;
        let leaf = self.descend_shared(|b| {
            let idx = match lo {
                Bound::Unbounded => 0,
                Bound::Included(k) | Bound::Excluded(k) => node::child_index(b, k),
            };
            if page::level(b) == 1 {
                hint.parent = Some(ScanPlace {
                    pid: page::id(b),
                    next: idx + 1,
                    // Read under this branch's latch, as `next_leaf` does.
                    shapes: shapes.load(Ordering::Acquire),
                    upper: fence.clone(),
                    fence: None,
                });
            }
            if idx < page::count(b) {
                fence = Some(node::key(b, idx).to_vec());
            }
            idx
        })?;
        Ok((leaf, fence))
    }

    /// Entries of the leaf holding the highest keys within `hi`, down to
    /// `lo`, highest first; at most `max` of them (at least one).
    pub(crate) fn fetch_backward(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        max: usize,
    ) -> Result<LeafBatch> {
        let mut fence: Option<Vec<u8>> = None;
        let leaf = self.descend_shared(|b| {
            let idx = match hi {
                Bound::Unbounded => page::count(b),
                Bound::Included(k) => node::child_index(b, k),
                Bound::Excluded(k) => node::child_index_below(b, k),
            };
            if idx > 0 {
                fence = Some(node::key(b, idx - 1).to_vec());
            }
            idx
        })?;
        let b = leaf.bytes();
        let end = match hi {
            Bound::Unbounded => page::count(b),
            Bound::Included(k) => node::search(b, k).map_or_else(|i| i, |i| i + 1),
            Bound::Excluded(k) => node::search(b, k).unwrap_or_else(|i| i),
        };
        let max = max.max(1);
        let mut entries = Vec::with_capacity(end.min(max));
        for i in (0..end).rev() {
            let k = node::key(b, i);
            if !in_lower(k, lo) {
                return Ok(LeafBatch {
                    entries,
                    fence: None,
                    cut: false,
                });
            }
            if entries.len() == max {
                return Ok(LeafBatch {
                    entries,
                    fence: None,
                    cut: true,
                });
            }
            entries.push((k.to_vec(), self.read_value(node::leaf_value(b, i))?));
        }
        // Every key of the next leaf is below the fence: stop once the fence
        // is at or below the lower bound.
        if let (Some(f), Bound::Included(l) | Bound::Excluded(l)) = (&fence, lo) {
            if f <= l {
                fence = None;
            }
        }
        Ok(LeafBatch {
            entries,
            fence,
            cut: false,
        })
    }

    /// Visits every page of the tree (and its overflow pages), children
    /// before parents, passing each page id to `f`.
    pub(crate) fn for_each_page(&self, f: &mut dyn FnMut(u64) -> Result<()>) -> Result<()> {
        self.walk(self.root, 0, f)
    }

    fn walk(&self, pid: u64, depth: usize, f: &mut dyn FnMut(u64) -> Result<()>) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::corruption(
                pid,
                "tree deeper than the depth limit (cycle?)",
            ));
        }
        let (children, overflows) = {
            let g = self.pool.fix_shared(self.pager, pid)?;
            let b = g.bytes();
            if node::is_leaf(b) {
                let ov = (0..page::count(b))
                    .filter_map(|i| match node::leaf_value(b, i) {
                        LeafValue::Overflow { len, index_pid } => Some((len, index_pid)),
                        LeafValue::Inline(_) => None,
                    })
                    .collect();
                (Vec::new(), ov)
            } else {
                (
                    (0..=page::count(b))
                        .map(|i| node::child(b, i))
                        .collect::<Vec<_>>(),
                    Vec::new(),
                )
            }
        };
        for c in children {
            self.walk(c, depth + 1, f)?;
        }
        for (len, index_pid) in overflows {
            for p in overflow::pages(self.pager, index_pid, len)? {
                f(p)?;
            }
        }
        f(pid)
    }

    /// Frees a value's overflow pages, if it had any.
    pub(crate) fn free_value(&self, v: &StoredValue) -> Result<()> {
        if let StoredValue::Overflow { len, index_pid } = v {
            overflow::free(self.pager, *index_pid, *len)?;
        }
        Ok(())
    }
}
