//! Transactions: read snapshots ([`ReadTxn`]) and snapshot-isolated write
//! transactions ([`WriteTxn`]) with first-committer-wins conflicts. The
//! versions they read through live in `versions`.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::db::{check_key, check_name, check_value, Database, Range, Table};
use crate::error::{Error, Result};
use crate::stats::bump;
use crate::versions::SnapshotReg;
use crate::wal::record::LogOp;
use crate::wal::Durability;

/// A registered snapshot, released when dropped.
pub(crate) struct Snap {
    pub(crate) db: Database,
    pub(crate) reg: Arc<SnapshotReg>,
    /// Handles of the tables read so far (a catalog lookup per read would
    /// double its cost).
    tables: parking_lot::Mutex<HashMap<String, Table>>,
}

impl Snap {
    pub(crate) fn new(db: Database) -> Snap {
        let e = db.engine();
        let reg = e.versions.register(&e.gate);
        Snap {
            db,
            reg,
            tables: Default::default(),
        }
    }

    /// [`SnapshotReg::check`], counting refusals.
    pub(crate) fn check(&self) -> Result<()> {
        self.reg.check().inspect_err(|_| {
            self.db
                .engine()
                .versions
                .counters
                .too_old
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
    }

    /// The value of `key` in table `name` as of the snapshot.
    pub(crate) fn get(&self, name: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let table = self.table(name)?;
        let e = self.db.engine();
        bump(&e.ops.gets);
        bump(&table.ops.reads);
        let live = e.tree(table.root()).get(key);
        let live = table.map_dropped(live)?;
        let seen = e.versions.lookup(self.reg.ts, name.as_bytes(), key);
        self.check()?;
        Ok(match seen {
            Some(image) => image,
            None => live,
        })
    }

    /// A handle on table `name` as it exists now, if the snapshot can read
    /// it (not dropped since the snapshot began).
    pub(crate) fn table(&self, name: &str) -> Result<Table> {
        check_name(name)?;
        let e = self.db.engine();
        if e.versions.dropped_since(name.as_bytes(), self.reg.ts) {
            return Err(Error::TableDropped(name.to_string()));
        }
        if let Some(t) = self.tables.lock().get(name) {
            return Ok(t.clone());
        }
        let t = self.db.open_table(name)?;
        self.tables.lock().insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// Corrects one leaf's worth of tree entries covering `(from, to)` to
    /// what the snapshot sees. `forward`: `entries` ascend, else descend.
    pub(crate) fn merge(
        &self,
        table: &str,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        from: &Bound<Vec<u8>>,
        to: &Bound<Vec<u8>>,
        forward: bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let e = self.db.engine();
        let lo_ref = from.as_ref().map(Vec::as_slice);
        let hi_ref = to.as_ref().map(Vec::as_slice);
        let mut seen = e
            .versions
            .range(self.reg.ts, table.as_bytes(), lo_ref, hi_ref);
        self.check()?;
        if seen.is_empty() {
            return Ok(entries);
        }
        if !forward {
            seen.reverse();
        }
        // Both lists are in iteration order; a version decides its key.
        let before = |a: &[u8], b: &[u8]| if forward { a < b } else { a > b };
        let mut out = Vec::with_capacity(entries.len() + seen.len());
        let mut seen = seen.into_iter().peekable();
        for (k, v) in entries {
            while let Some((sk, _)) = seen.peek() {
                if !before(sk, &k) {
                    break;
                }
                if let Some((sk, Some(sv))) = seen.next() {
                    out.push((sk, sv));
                }
            }
            match seen.peek() {
                Some((sk, _)) if *sk == k => {
                    if let Some((sk, Some(sv))) = seen.next() {
                        out.push((sk, sv));
                    }
                }
                _ => out.push((k, v)),
            }
        }
        out.extend(seen.filter_map(|(k, v)| v.map(|v| (k, v))));
        Ok(out)
    }
}

impl Drop for Snap {
    fn drop(&mut self) {
        self.db.engine().versions.release(&self.reg);
    }
}

/// A read-only snapshot: every read sees the database as it was when
/// [`Database::begin_read`] was called, across all tables, for as long as
/// it lives; writers go on meanwhile and never wait for it.
///
/// A snapshot held while more changes pile up than the version budget
/// holds is invalidated; its reads then fail with [`Error::SnapshotTooOld`].
///
/// ```no_run
/// # let db = tidemark::Database::open("x")?;
/// let snap = db.begin_read();
/// let a = snap.get("accounts", b"alice")?;
/// for kv in snap.range::<&[u8], _>("accounts", ..)? { let (_k, _v) = kv?; }
/// # Ok::<(), tidemark::Error>(())
/// ```
pub struct ReadTxn {
    snap: Arc<Snap>,
}

impl std::fmt::Debug for ReadTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTxn")
            .field("ts", &self.snap.reg.ts)
            .finish_non_exhaustive()
    }
}

impl ReadTxn {
    pub(crate) fn new(db: Database) -> ReadTxn {
        ReadTxn {
            snap: Arc::new(Snap::new(db)),
        }
    }

    /// The value of `key` in `table` as of the snapshot.
    pub fn get(&self, table: &str, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.snap.get(table, key.as_ref())
    }

    /// Entries of `table` with keys in `range` as of the snapshot, in key
    /// order; iterate from both ends.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, table: &str, range: R) -> Result<Range> {
        let t = self.snap.table(table)?;
        Ok(t.range_in(range, Some(self.snap.clone())))
    }

    /// Collection `name` as of the snapshot: its documents, `_id` lookups
    /// and natural order as they were when the snapshot began.
    /// [`Error::CollectionNotFound`] if it did not exist then.
    pub fn get_collection(&self, name: &str) -> Result<crate::SnapshotCollection> {
        crate::docs::SnapshotCollection::open(self.snap.clone(), name)
    }

    /// Whether the snapshot is still readable (not invalidated).
    pub fn is_valid(&self) -> bool {
        self.snap.reg.check().is_ok()
    }
}

/// A write transaction under snapshot isolation.
///
/// Reads see the snapshot taken at [`Database::begin_write`] plus the
/// transaction's own writes. Writes are buffered until
/// [`WriteTxn::commit`], which applies all of them as one logged batch, or
/// fails with [`Error::Conflict`] and applies nothing when another
/// transaction that committed after this one began wrote one of the same
/// keys (first committer wins). Dropping an uncommitted transaction rolls
/// it back.
///
/// ```no_run
/// # let db = tidemark::Database::open("x")?;
/// let mut tx = db.begin_write();
/// let n = tx.get("counters", b"hits")?.map_or(0, |v| v[0]);
/// tx.put("counters", b"hits", [n + 1])?;
/// match tx.commit() {
///     Err(tidemark::Error::Conflict(_)) => { /* retry */ }
///     r => r?,
/// }
/// # Ok::<(), tidemark::Error>(())
/// ```
pub struct WriteTxn {
    snap: Arc<Snap>,
    /// (table, key) -> new value (`None`: delete).
    writes: BTreeMap<(String, Vec<u8>), Option<Vec<u8>>>,
}

impl std::fmt::Debug for WriteTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTxn")
            .field("ts", &self.snap.reg.ts)
            .field("writes", &self.writes.len())
            .finish_non_exhaustive()
    }
}

impl WriteTxn {
    pub(crate) fn new(db: Database) -> WriteTxn {
        WriteTxn {
            snap: Arc::new(Snap::new(db)),
            writes: BTreeMap::new(),
        }
    }

    /// The value of `key` in `table`: this transaction's own write, else
    /// the snapshot's.
    pub fn get(&self, table: &str, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        if let Some(v) = self.writes.get(&(table.to_string(), key.to_vec())) {
            return Ok(v.clone());
        }
        self.snap.get(table, key)
    }

    /// Sets `key` to `value` in `table` when the transaction commits.
    pub fn put(
        &mut self,
        table: &str,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        check_name(table)?;
        check_key(key)?;
        check_value(value)?;
        self.writes
            .insert((table.to_string(), key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    /// Removes `key` from `table` when the transaction commits.
    pub fn delete(&mut self, table: &str, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        check_name(table)?;
        check_key(key)?;
        self.writes.insert((table.to_string(), key.to_vec()), None);
        Ok(())
    }

    /// Entries of `table` in `range` as this transaction sees them (its
    /// snapshot overlaid with its own writes), in key order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        table: &str,
        range: R,
    ) -> Result<TxnRange> {
        let own = |b: Bound<&K>| b.map(|k| k.as_ref().to_vec());
        let (lo, hi) = (own(range.start_bound()), own(range.end_bound()));
        let t = self.snap.table(table)?;
        let base = t.range_in((lo.clone(), hi.clone()), Some(self.snap.clone()));
        let lo_key = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) => Bound::Included((table.to_string(), k.clone())),
            Bound::Excluded(k) => Bound::Excluded((table.to_string(), k.clone())),
            Bound::Unbounded => Bound::Included((table.to_string(), Vec::new())),
        };
        let writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = self
            .writes
            .range((lo_key(&lo), Bound::Unbounded))
            .take_while(|((t, k), _)| {
                t == table
                    && match &hi {
                        Bound::Included(h) => k <= h,
                        Bound::Excluded(h) => k < h,
                        Bound::Unbounded => true,
                    }
            })
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect();
        Ok(TxnRange {
            base: base.peekable(),
            writes: writes.into_iter().peekable(),
        })
    }

    /// Number of buffered writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Commits with the database's default durability.
    pub fn commit(self) -> Result<()> {
        let d = self.snap.db.default_durability();
        self.commit_with(d)
    }

    /// Commits all writes as one atomic batch with `durability`, or fails
    /// with [`Error::Conflict`] (or [`Error::SnapshotTooOld`]) and applies
    /// nothing.
    pub fn commit_with(self, durability: Durability) -> Result<()> {
        if self.writes.is_empty() {
            return self.snap.check();
        }
        let db = &self.snap.db;
        let e = db.engine();
        let s = self.snap.reg.ts;
        let mut ops = Vec::with_capacity(self.writes.len());
        let mut stripes = Vec::with_capacity(self.writes.len());
        for ((table, key), v) in &self.writes {
            ops.push(match v {
                Some(value) => LogOp::Put {
                    table: table.as_bytes(),
                    key,
                    value,
                },
                None => LogOp::Delete {
                    table: table.as_bytes(),
                    key,
                },
            });
            stripes.push(e.stripes.of(table.as_bytes(), key));
        }
        let r = db.commit(
            &ops,
            Some(stripes),
            durability,
            |e| {
                // Under the stripes: no other commit of these keys can
                // slip in between this check and the apply.
                let mut roots = BTreeMap::new();
                for (table, key) in self.writes.keys() {
                    if !roots.contains_key(table) {
                        if e.versions.dropped_since(table.as_bytes(), s) {
                            return Err(Error::Conflict(format!(
                                "table {table:?} was dropped after the transaction began"
                            )));
                        }
                        let root = e
                            .lookup_root(table.as_bytes())?
                            .ok_or_else(|| Error::TableNotFound(table.clone()))?;
                        roots.insert(table.clone(), root);
                    }
                    if e.versions.changed_since(s, table.as_bytes(), key) {
                        return Err(Error::Conflict(format!(
                            "key {:?} of table {table:?} was written by a transaction that committed first",
                            String::from_utf8_lossy(key)
                        )));
                    }
                }
                // Versions a conflict check needs may have been reclaimed.
                self.snap.check()?;
                Ok(roots)
            },
            |e, roots, ts| {
                for ((table, key), v) in &self.writes {
                    let root = roots[table];
                    let track = ts.map(|t| (t, table.as_bytes()));
                    match v {
                        Some(value) => e.apply_put(root, key, value, track)?,
                        None => {
                            e.apply_delete(root, key, track)?;
                        }
                    }
                }
                Ok(())
            },
        );
        if let Err(Error::Conflict(_)) = &r {
            e.versions
                .counters
                .conflicts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if r.is_ok() {
            let o = &e.ops;
            bump(&o.txn_commits);
            for ((table, _), v) in &self.writes {
                bump(if v.is_some() { &o.puts } else { &o.deletes });
                bump(&o.table(table).writes);
            }
        }
        r
    }

    /// Discards every write (also what dropping does).
    pub fn rollback(self) {}
}

/// Entries of a [`WriteTxn::range`]: the snapshot overlaid with the
/// transaction's own writes, in key order.
pub struct TxnRange {
    base: std::iter::Peekable<Range>,
    writes: std::iter::Peekable<std::vec::IntoIter<OwnWrite>>,
}

/// A transaction's own write of one key (`None`: a delete).
type OwnWrite = (Vec<u8>, Option<Vec<u8>>);

impl Iterator for TxnRange {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let base_key = match self.base.peek() {
                Some(Ok((k, _))) => Some(k.clone()),
                Some(Err(_)) => return self.base.next(),
                None => None,
            };
            let own_first = match (&base_key, self.writes.peek()) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(b), Some((w, _))) => w <= b,
            };
            if !own_first {
                return self.base.next();
            }
            let (k, v) = self.writes.next()?;
            if base_key.as_ref() == Some(&k) {
                self.base.next();
            }
            if let Some(v) = v {
                return Some(Ok((k, v)));
            }
        }
    }
}
