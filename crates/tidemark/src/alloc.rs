//! Block allocation in the data file, with copy-on-write safety.
//!
//! A bitmap marks every block that must not be handed out: blocks 0 and 1
//! (meta), blocks referenced by the live page map, by a checkpoint being
//! written, or by the last durable checkpoint. Freeing is epoch-aware:
//!
//! * A block allocated since the last checkpoint cut and not adopted by a
//!   checkpoint ("fresh") is referenced by no checkpoint: freeing it makes it
//!   reusable at once. Steady eviction between checkpoints therefore recycles
//!   its own blocks instead of growing the file.
//! * Any other block goes to limbo, tagged with an epoch `e`; it is released
//!   when checkpoint `e` is durable, because no durable or running
//!   checkpoint can reference it after that (ARCHITECTURE.md, "Block
//!   lifetimes").
//!
//! While the data file is being written back to the device, the blocks of
//! the step in flight are handed out to no one and rewritten by no one
//! ([`BlockAlloc::set_writing_back`]): the operating system holds their
//! page-cache pages locked while it queues them, and a `pwrite` into one
//! waits for the device, holding the file's write lock that every other
//! writer needs.
//!
//! Free space is never written to disk as a separate structure: on open it
//! is rebuilt as the complement of the blocks the durable checkpoint
//! references, so it cannot disagree with the tree or leak.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Reserved meta blocks.
pub(crate) const META_BLOCKS: u64 = 2;

pub(crate) struct BlockAlloc {
    inner: Mutex<Inner>,
    /// `inner.used_count`, readable without the lock (the space check
    /// every commit makes must not queue behind a long `allocate` scan).
    used: AtomicU64,
}

struct Inner {
    used: Vec<u64>,
    fresh: Vec<u64>,
    /// One past the highest block ever handed out (the file's length in blocks).
    nblocks: u64,
    used_count: u64,
    /// Next-fit cursor (block index).
    hint: u64,
    /// Set bits in `fresh`.
    fresh_count: u64,
    /// Fresh blocks holding pages that are written once and never
    /// rewritten (overflow pages): a subset of `fresh`.
    once: Vec<u64>,
    /// Set bits in `once`.
    once_count: u64,
    limbo: Vec<(u64, u64)>,
    /// Blocks `[start, end)` of the write-back step in flight, if one is.
    writing_back: Option<(u64, u64)>,
}

/// The bits of word `w` (blocks `64 w ..`) that fall in `window`, a
/// block range `[start, end)`.
fn window_bits(window: Option<(u64, u64)>, w: u64) -> u64 {
    let Some((s, e)) = window else { return 0 };
    let (lo, hi) = (s.max(w * 64), e.min(w * 64 + 64));
    if lo >= hi {
        return 0;
    }
    let len = hi - lo;
    let ones = if len == 64 {
        u64::MAX
    } else {
        (1u64 << len) - 1
    };
    ones << (lo - w * 64)
}

/// What [`BlockAlloc::rewritable`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rewrite {
    /// The block may be written over.
    Yes,
    /// A checkpoint references the block (or it is not the page's).
    NotFresh,
    /// Fresh, but in the write-back step in flight.
    WritingBack,
}

fn bit(v: &[u64], b: u64) -> bool {
    v.get((b / 64) as usize)
        .is_some_and(|w| w & (1 << (b % 64)) != 0)
}
fn set(v: &mut Vec<u64>, b: u64, on: bool) {
    let w = (b / 64) as usize;
    if w >= v.len() {
        v.resize(w + 1, 0);
    }
    if on {
        v[w] |= 1 << (b % 64);
    } else {
        v[w] &= !(1 << (b % 64));
    }
}

impl Inner {
    /// Fresh block `b` is fresh no longer (nor written once).
    fn clear_fresh_bit(&mut self, b: u64) {
        set(&mut self.fresh, b, false);
        self.fresh_count -= 1;
        if bit(&self.once, b) {
            set(&mut self.once, b, false);
            self.once_count -= 1;
        }
    }
}

/// Snapshot of the allocator for statistics.
pub(crate) struct AllocStats {
    pub(crate) file_blocks: u64,
    pub(crate) free_blocks: u64,
    pub(crate) limbo_blocks: u64,
}

impl BlockAlloc {
    /// An allocator for a file whose used blocks are `used` (meta blocks are
    /// added). Returns the first block listed twice, which means two owners
    /// claim it: corruption.
    pub(crate) fn new(used: impl IntoIterator<Item = u64>) -> Result<Self, u64> {
        let mut inner = Inner {
            used: Vec::new(),
            fresh: Vec::new(),
            nblocks: META_BLOCKS,
            used_count: 0,
            hint: META_BLOCKS,
            fresh_count: 0,
            once: Vec::new(),
            once_count: 0,
            limbo: Vec::new(),
            writing_back: None,
        };
        for b in (0..META_BLOCKS).chain(used) {
            if bit(&inner.used, b) {
                return Err(b);
            }
            set(&mut inner.used, b, true);
            inner.used_count += 1;
            inner.nblocks = inner.nblocks.max(b + 1);
        }
        Ok(BlockAlloc {
            used: AtomicU64::new(inner.used_count),
            inner: Mutex::new(inner),
        })
    }

    /// [`BlockAlloc::allocate_noting`]'s block alone (the tests').
    #[cfg(test)]
    pub(crate) fn allocate(&self, fresh: bool) -> u64 {
        self.allocate_noting(fresh).0
    }

    /// Hands out a free block, one outside the write-back step in flight
    /// ([`BlockAlloc::set_writing_back`]) while the file has one; the file
    /// grows only when it has no free block at all, so a database with
    /// little room left is never pushed past it by a write-back. `fresh`
    /// blocks may be reused as soon as they are freed; checkpoint blocks
    /// are not fresh. Also says whether the block lies past every block
    /// handed out before (the file's high-water mark moved): its first
    /// write since open.
    pub(crate) fn allocate_noting(&self, fresh: bool) -> (u64, bool) {
        let mut g = self.inner.lock();
        let n = g.nblocks;
        let mut found = None;
        if g.used_count < n {
            // Scan 64 blocks per word from the hint, wrapping once; with
            // the step's blocks taken as used, then, if that finds none,
            // as they are.
            let words = n.div_ceil(64);
            let start = g.hint / 64;
            let windows = [g.writing_back, None];
            let scans = if g.writing_back.is_some() {
                &windows[..]
            } else {
                &windows[1..]
            };
            'scans: for window in scans {
                for k in 0..=words {
                    let w = (start + k) % words;
                    let word =
                        g.used.get(w as usize).copied().unwrap_or(0) | window_bits(*window, w);
                    if word != u64::MAX {
                        let b = w * 64 + u64::from((!word).trailing_zeros());
                        if b < n && b >= META_BLOCKS {
                            found = Some(b);
                            break 'scans;
                        }
                    }
                }
            }
        }
        let extended = found.is_none();
        let b = found.unwrap_or_else(|| {
            g.nblocks += 1;
            g.nblocks - 1
        });
        set(&mut g.used, b, true);
        if fresh {
            set(&mut g.fresh, b, true);
            g.fresh_count += 1;
        }
        g.used_count += 1;
        self.used.store(g.used_count, Ordering::Release);
        g.hint = b + 1;
        (b, extended)
    }

    /// Marks blocks `[start, end)` as the write-back step in flight, or
    /// (`None`) that no step is. Until the next call, [`allocate_noting`] hands
    /// none of them out and [`rewritable`] refuses them: a page bound for
    /// one of them is written to another block instead.
    ///
    /// [`allocate_noting`]: BlockAlloc::allocate_noting
    /// [`rewritable`]: BlockAlloc::rewritable
    pub(crate) fn set_writing_back(&self, range: Option<(u64, u64)>) {
        self.inner.lock().writing_back = range.filter(|(s, e)| s < e);
    }

    /// Whether a page may be written over its own block `b`: `b` is fresh
    /// (allocated since the last cut, adopted by no checkpoint) and not in
    /// the write-back step in flight.
    pub(crate) fn rewritable(&self, b: u64) -> Rewrite {
        let g = self.inner.lock();
        if !bit(&g.fresh, b) {
            Rewrite::NotFresh
        } else if g.writing_back.is_some_and(|(s, e)| (s..e).contains(&b)) {
            Rewrite::WritingBack
        } else {
            Rewrite::Yes
        }
    }

    /// Whether `b` is fresh: allocated since the last cut and adopted by
    /// no checkpoint, so no checkpoint references it.
    #[cfg(test)]
    pub(crate) fn is_fresh(&self, b: u64) -> bool {
        bit(&self.inner.lock().fresh, b)
    }

    /// The checkpoint adopted `b`: it is no longer reusable on free.
    pub(crate) fn unfresh(&self, b: u64) {
        let mut g = self.inner.lock();
        if bit(&g.fresh, b) {
            g.clear_fresh_bit(b);
        }
    }

    /// Fresh block `b` holds a page that is never rewritten (an overflow
    /// page): the next epoch needs no block for it
    /// ([`BlockAlloc::growth_ahead`]).
    pub(crate) fn written_once(&self, b: u64) {
        let mut g = self.inner.lock();
        if bit(&g.fresh, b) && !bit(&g.once, b) {
            set(&mut g.once, b, true);
            g.once_count += 1;
        }
    }

    /// Frees `b`, freed during epoch `epoch`.
    pub(crate) fn free(&self, b: u64, epoch: u64) {
        if b < META_BLOCKS {
            return;
        }
        let mut g = self.inner.lock();
        debug_assert!(bit(&g.used, b), "double free of block {b}");
        if bit(&g.fresh, b) {
            g.clear_fresh_bit(b);
            set(&mut g.used, b, false);
            g.used_count -= 1;
            self.used.store(g.used_count, Ordering::Release);
            g.hint = g.hint.min(b);
        } else {
            g.limbo.push((epoch, b));
        }
    }

    /// Checkpoint `epoch` is durable: blocks freed up to that epoch are free.
    pub(crate) fn release_through(&self, epoch: u64) {
        let mut g = self.inner.lock();
        let limbo = std::mem::take(&mut g.limbo);
        for (e, b) in limbo {
            if e <= epoch {
                set(&mut g.used, b, false);
                g.used_count -= 1;
                g.hint = g.hint.min(b);
            } else {
                g.limbo.push((e, b));
            }
        }
        self.used.store(g.used_count, Ordering::Release);
    }

    /// Called at a checkpoint cut: every block allocated so far is
    /// referenced by the image being checkpointed.
    pub(crate) fn clear_fresh(&self) {
        let mut g = self.inner.lock();
        g.fresh.fill(0);
        g.fresh_count = 0;
        g.once.fill(0);
        g.once_count = 0;
    }

    /// Blocks the epoch after this one is expected to need beyond what the
    /// next checkpoint gives back: the pages written to fresh blocks this
    /// epoch that did not send an older block to limbo (new pages, mostly).
    /// After the next cut, each such page's first write takes a block
    /// while its current one stays in the checkpoint until the one after.
    /// Pages written once (overflow pages) are left out: they are never
    /// written again. Counted, 128 MiB of new large values made the file
    /// keep as much again preallocated ahead of them.
    pub(crate) fn growth_ahead(&self) -> u64 {
        let g = self.inner.lock();
        (g.fresh_count - g.once_count).saturating_sub(g.limbo.len() as u64)
    }

    /// Makes the next allocations take the lowest free blocks.
    pub(crate) fn rewind(&self) {
        self.inner.lock().hint = META_BLOCKS;
    }

    /// One past the highest block ever handed out: where allocations
    /// that find no free block extend the file.
    pub(crate) fn high_water(&self) -> u64 {
        self.inner.lock().nblocks
    }

    /// Blocks in use (meta, referenced, and in limbo).
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Forgets the free blocks after the last block in use: the file may
    /// be cut to the returned length (in blocks). Blocks handed out later
    /// come from below it or extend it again.
    pub(crate) fn shrink(&self) -> u64 {
        let mut g = self.inner.lock();
        let mut n = g.nblocks;
        while n > META_BLOCKS && !bit(&g.used, n - 1) {
            n -= 1;
        }
        g.nblocks = n;
        g.hint = g.hint.min(n);
        n
    }

    pub(crate) fn stats(&self) -> AllocStats {
        let g = self.inner.lock();
        AllocStats {
            file_blocks: g.nblocks,
            free_blocks: g.nblocks - g.used_count,
            limbo_blocks: g.limbo.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of the write-back step in flight are not handed out, even
    /// where the scan would find them first, nor rewritten; once the step
    /// is over they are.
    #[test]
    fn the_write_back_step_in_flight_is_left_alone() {
        let a = BlockAlloc::new([]).unwrap();
        let got: Vec<u64> = (0..200).map(|_| a.allocate(true)).collect();
        assert_eq!(got, (2..202).collect::<Vec<_>>());
        // Free a run that spans a word boundary (blocks 60..70), and one
        // block past it.
        for b in (60..70).chain([100]) {
            a.free(b, 1);
        }
        a.set_writing_back(Some((62, 101)));
        assert_eq!(
            a.rewritable(61),
            Rewrite::NotFresh,
            "freed: no longer fresh"
        );
        assert_eq!(a.rewritable(150), Rewrite::Yes);
        assert_eq!(a.rewritable(70), Rewrite::WritingBack);
        assert_eq!(a.rewritable(101), Rewrite::Yes, "the window's end is open");
        let next: Vec<u64> = (0..2).map(|_| a.allocate(true)).collect();
        assert_eq!(next, [60, 61], "a block of the step was handed out");
        // Only blocks of the step are free now: one of them, rather than
        // growing the file.
        assert_eq!(a.allocate(true), 62, "the file grew past a free block");
        assert_eq!(a.high_water(), 202);
        a.free(62, 1);
        a.set_writing_back(None);
        assert_eq!(a.rewritable(70), Rewrite::Yes);
        let rest: Vec<u64> = (0..9).map(|_| a.allocate(true)).collect();
        assert_eq!(rest, [62, 63, 64, 65, 66, 67, 68, 69, 100]);
        // An empty window is no window.
        a.set_writing_back(Some((5, 5)));
        assert_eq!(a.rewritable(5), Rewrite::Yes);
    }

    /// `window_bits` marks exactly the blocks of the window in each word.
    #[test]
    fn window_bits_cover_the_window_and_nothing_else() {
        for (s, e) in [
            (0, 1),
            (3, 64),
            (0, 64),
            (63, 65),
            (10, 200),
            (64, 128),
            (130, 131),
        ] {
            for w in 0..4u64 {
                let bits = window_bits(Some((s, e)), w);
                for i in 0..64 {
                    let b = w * 64 + i;
                    assert_eq!(
                        bits & (1 << i) != 0,
                        (s..e).contains(&b),
                        "block {b} of ({s}, {e})"
                    );
                }
            }
        }
        assert_eq!(window_bits(None, 0), 0);
    }

    #[test]
    fn fresh_blocks_recycle_at_once_others_wait_for_their_checkpoint() {
        let a = BlockAlloc::new([2, 3]).unwrap();
        let f = a.allocate(true);
        assert_eq!(f, 4);
        a.free(f, 7);
        assert_eq!(a.allocate(true), 4, "fresh block reused immediately");
        a.free(2, 7);
        assert_eq!(a.allocate(false), 5, "durable block must wait in limbo");
        a.release_through(6);
        assert_eq!(a.allocate(false), 6);
        a.release_through(7);
        assert_eq!(a.allocate(false), 2);
    }

    /// Blocks written once leave the next epoch's expected growth; freed
    /// or adopted, they leave the count with their freshness.
    #[test]
    fn blocks_written_once_are_not_expected_to_grow_the_next_epoch() {
        let a = BlockAlloc::new([2, 3]).unwrap();
        let pages: Vec<u64> = (0..5).map(|_| a.allocate(true)).collect();
        let once: Vec<u64> = (0..4).map(|_| a.allocate(true)).collect();
        assert_eq!(a.growth_ahead(), 9);
        for &b in &once {
            a.written_once(b);
        }
        a.written_once(once[0]);
        assert_eq!(a.growth_ahead(), 5, "only rewritable pages count");
        a.free(once[0], 1);
        a.unfresh(once[1]);
        a.written_once(2);
        assert_eq!(a.growth_ahead(), 5, "not fresh: never written once");
        a.free(pages[0], 1);
        assert_eq!(a.growth_ahead(), 4);
        // A block freed while written once comes back as a plain one.
        assert_eq!(a.allocate(true), once[0].min(pages[0]));
        assert_eq!(a.growth_ahead(), 5);
        a.free(2, 1);
        assert_eq!(a.growth_ahead(), 4, "limbo gives back a block");
        a.clear_fresh();
        assert_eq!(a.growth_ahead(), 0);
        let b = a.allocate(true);
        assert_eq!(a.growth_ahead(), 0, "one limbo block still counted");
        a.written_once(b);
        a.allocate(true);
        assert_eq!(a.growth_ahead(), 0);
        a.release_through(1);
        assert_eq!(a.growth_ahead(), 1);
    }

    #[test]
    fn duplicate_owner_is_reported() {
        assert_eq!(BlockAlloc::new([5, 6, 5]).err(), Some(5));
        assert_eq!(BlockAlloc::new([1]).err(), Some(1));
    }
}
