//! Multi-version reads: commit timestamps, snapshots and before-images.
//!
//! The tree always holds the newest committed value of every key. What a
//! snapshot needs beyond that lives here: for every key changed after some
//! live snapshot began, the value it had before each such change (its
//! *before-image*), tagged with the timestamp of the commit that replaced
//! it. A snapshot that began at `s` reads a key by reading the tree, then
//! looking for the first before-image of that key with a timestamp above
//! `s`: if there is one, that was the value at `s`; if not, the tree value
//! is. Range scans merge the tree's keys with the before-images' keys in
//! the same way, so keys deleted after `s` reappear and keys created after
//! it stay hidden.
//!
//! Ordering rules that make this exact:
//! - A commit takes its timestamp while holding its keys' stripes, so two
//!   commits of one key get timestamps in the order they apply, and each
//!   key's before-images are pushed in timestamp order.
//! - A commit saves a key's before-image *before* changing the tree, and a
//!   reader reads the tree *before* the before-images: a reader that sees
//!   a change in the tree finds its before-image.
//! - A snapshot's timestamp is the *visible* timestamp: every commit at or
//!   below it has finished applying, every commit above it is either still
//!   applying or saves before-images for what it changes.
//! - Commits save before-images only while a snapshot is registered. The
//!   first snapshot to register after none were drains the write gate
//!   (waits for commits already inside, which may have decided not to
//!   save) before taking its timestamp.
//!
//! Memory: before-images are kept only while a snapshot older than them is
//! live, and are reclaimed when the oldest snapshot ends. Their bytes are
//! limited to a budget carved out of `cache_size`. Past 80 % of it, a
//! background reclaimer invalidates the oldest snapshots (oldest first)
//! until reclaiming what only they needed brings the store back under 80 %;
//! a commit that finds the store over the budget itself (the reclaimer is
//! behind) does the same on its own thread, down to the budget. An invalidated
//! snapshot's next read fails with [`Error::SnapshotTooOld`]; writers never
//! wait for readers.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::gate::Gate;

use smallvec::SmallVec;

/// A commit timestamp. Snapshots see commits at or below theirs.
pub(crate) type Ts = u64;

/// Fixed bytes charged per kept version besides its key and value.
const VERSION_OVERHEAD: u64 = 64;

struct Version {
    /// Timestamp of the commit that replaced this value.
    ts: Ts,
    /// The value before that commit (`None`: the key was absent).
    before: Option<Vec<u8>>,
}

/// The versions of one key, oldest first. Most keys have one, kept inline.
type Chain = SmallVec<[Version; 1]>;

/// A store key (see [`compose`]), inline up to 46 bytes: the map's nodes
/// then hold their keys, and a lookup compares them without following a
/// pointer per key (the store can hold tens of thousands, more than the
/// CPU caches).
type StoreKey = SmallVec<[u8; 46]>;

/// The versions by store key, and the newest timestamp saved into it.
#[derive(Default)]
struct Store {
    keys: BTreeMap<StoreKey, Chain>,
    /// Largest timestamp of a version saved since the store was last
    /// emptied: a reclaim limit at or above it frees everything at once.
    newest: Ts,
}

/// A registered snapshot; dropping it does not release it (call
/// [`Versions::release`]).
pub(crate) struct SnapshotReg {
    pub(crate) ts: Ts,
    id: u64,
    valid: AtomicBool,
}

impl SnapshotReg {
    /// Fails with [`Error::SnapshotTooOld`] if the snapshot was
    /// invalidated. Call after reading: a read that raced with reclaiming
    /// is then reported, not returned.
    pub(crate) fn check(&self) -> Result<()> {
        if self.valid.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(Error::SnapshotTooOld)
        }
    }
}

struct Clock {
    next: Ts,
    /// Timestamps of commits that save before-images and have not
    /// finished applying.
    inflight: BTreeSet<Ts>,
}

impl Clock {
    fn visible(&self) -> Ts {
        self.inflight
            .first()
            .map_or(self.next - 1, |&first| first - 1)
    }
}

#[derive(Default)]
struct Registry {
    /// Valid snapshots by (timestamp, id).
    live: BTreeMap<(Ts, u64), (Instant, Arc<SnapshotReg>)>,
    next_id: u64,
}

/// Counters of the version store.
#[derive(Default)]
pub(crate) struct VersionCounters {
    pub(crate) conflicts: AtomicU64,
    pub(crate) too_old: AtomicU64,
    pub(crate) invalidated: AtomicU64,
}

pub(crate) struct Versions {
    budget: u64,
    reg: Mutex<Registry>,
    /// Number of valid registered snapshots; changed only under `reg`.
    active: AtomicUsize,
    clock: Mutex<Clock>,
    /// Ordered by store key, so range scans can merge it with the tree.
    /// Held for one insert, lookup or leaf-sized range at a time.
    map: RwLock<Store>,
    /// (timestamp, key) of every saved version, roughly in timestamp order.
    gc: Mutex<VecDeque<(Ts, StoreKey)>>,
    bytes: AtomicU64,
    count: AtomicU64,
    /// Timestamp of the last drop of each table.
    drops: RwLock<HashMap<Vec<u8>, Ts>>,
    /// (reclaim requested, stop) for the background reclaimer.
    wake: Mutex<(bool, bool)>,
    wake_cv: Condvar,
    pub(crate) counters: VersionCounters,
}

/// The store key of `key` in `table`: the name's length, the name, the key.
/// Keys of one table are contiguous and in key order.
fn compose(table: &[u8], key: &[u8]) -> StoreKey {
    let mut v = StoreKey::with_capacity(2 + table.len() + key.len());
    // Table names are at most 255 bytes (checked by the API).
    v.extend_from_slice(&(table.len() as u16).to_be_bytes());
    v.extend_from_slice(table);
    v.extend_from_slice(key);
    v
}

/// The smallest store key above every key of `table`.
fn table_end(table: &[u8]) -> StoreKey {
    let mut v = compose(table, &[]);
    while let Some(last) = v.pop() {
        if last != 0xFF {
            v.push(last + 1);
            return v;
        }
    }
    // Unreachable for names of at most 255 bytes (the length's high byte
    // is 0); an empty result still bounds correctly: it means no limit.
    v
}

/// Bytes charged for version `v` of store key `ck`.
fn version_size(ck: &[u8], v: &Version) -> u64 {
    VERSION_OVERHEAD + ck.len() as u64 + v.before.as_ref().map_or(0, |b| b.len() as u64)
}

/// What a snapshot sees for one key, if a version decides it.
pub(crate) type Seen = Option<Option<Vec<u8>>>;

impl Versions {
    pub(crate) fn new(budget: u64) -> Versions {
        Versions {
            budget,
            reg: Mutex::new(Registry::default()),
            active: AtomicUsize::new(0),
            clock: Mutex::new(Clock {
                next: 1,
                inflight: BTreeSet::new(),
            }),
            map: RwLock::new(Store::default()),
            gc: Mutex::new(VecDeque::new()),
            bytes: AtomicU64::new(0),
            count: AtomicU64::new(0),
            drops: RwLock::new(HashMap::new()),
            wake: Mutex::new((false, false)),
            wake_cv: Condvar::new(),
            counters: VersionCounters::default(),
        }
    }

    /// Bytes versions may use.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Registers a snapshot of everything committed so far.
    pub(crate) fn register(&self, gate: &Gate) -> Arc<SnapshotReg> {
        let mut r = self.reg.lock();
        if self.active.load(Ordering::SeqCst) == 0 {
            self.active.store(1, Ordering::SeqCst);
            // Commits inside the gate may have seen no snapshot and will
            // not save before-images: let them finish first.
            gate.close();
            gate.open();
        } else {
            self.active.fetch_add(1, Ordering::SeqCst);
        }
        let ts = self.clock.lock().visible();
        let id = r.next_id;
        r.next_id += 1;
        let reg = Arc::new(SnapshotReg {
            ts,
            id,
            valid: AtomicBool::new(true),
        });
        r.live.insert((ts, id), (Instant::now(), reg.clone()));
        reg
    }

    /// Ends a snapshot and reclaims what only it needed.
    pub(crate) fn release(&self, s: &SnapshotReg) {
        let mut r = self.reg.lock();
        if r.live.remove(&(s.ts, s.id)).is_some() {
            self.active.fetch_sub(1, Ordering::SeqCst);
        }
        let limit = self.reclaim_limit(&r);
        drop(r);
        self.reclaim(limit);
    }

    /// Versions at or below this timestamp no snapshot can read: the
    /// oldest live one's, or (none live) the visible timestamp, since any
    /// snapshot registered later starts at or above it. Computed under
    /// `reg`, which registration holds while taking its timestamp.
    fn reclaim_limit(&self, r: &Registry) -> Ts {
        match r.live.keys().next() {
            Some(&(oldest, _)) => oldest,
            None => self.clock.lock().visible(),
        }
    }

    /// A timestamp for a commit about to apply, if it must save
    /// before-images (some snapshot is registered). Call while holding
    /// the commit's stripes, inside the gate; pair with [`Versions::end`].
    pub(crate) fn begin(&self) -> Option<Ts> {
        if self.active.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut c = self.clock.lock();
        let ts = c.next;
        c.next += 1;
        c.inflight.insert(ts);
        Some(ts)
    }

    /// The commit with timestamp `ts` has applied (or failed).
    pub(crate) fn end(&self, ts: Ts) {
        self.clock.lock().inflight.remove(&ts);
    }

    /// Records that `table` is dropped by the commit with timestamp `ts`
    /// (`None`: an untracked commit, which takes a timestamp now).
    pub(crate) fn table_dropped(&self, table: &[u8], ts: Option<Ts>) {
        let ts = ts.unwrap_or_else(|| {
            let mut c = self.clock.lock();
            c.next += 1;
            c.next - 1
        });
        self.drops.write().insert(table.to_vec(), ts);
    }

    /// Whether `table` was dropped after snapshot `s` began.
    pub(crate) fn dropped_since(&self, table: &[u8], s: Ts) -> bool {
        self.drops.read().get(table).is_some_and(|&d| d > s)
    }

    /// Saves `before`, the value of `key` before the commit `ts` changes
    /// it. Must run before the tree changes.
    pub(crate) fn save(&self, ts: Ts, table: &[u8], key: &[u8], before: Option<Vec<u8>>) {
        let ck = compose(table, key);
        let v = Version { ts, before };
        let size = version_size(&ck, &v);
        // Charged before the version becomes visible to `reclaim`, which
        // may uncharge it at once: the counters never go below zero.
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        {
            let mut map = self.map.write();
            map.newest = map.newest.max(ts);
            map.keys.entry(ck.clone()).or_default().push(v);
        }
        self.gc.lock().push_back((ts, ck));
    }

    /// Bytes above which the background reclaimer is asked to bring the
    /// versions down (80 % of the budget).
    fn soft_limit(&self) -> u64 {
        self.budget / 5 * 4
    }

    /// Called by a committer once it has left the gate: past 80 % of the
    /// budget, wakes the background reclaimer; past the budget itself (the
    /// reclaimer is behind), enforces it on this thread.
    pub(crate) fn after_commit(&self) {
        let b = self.bytes.load(Ordering::Relaxed);
        if b > self.budget {
            self.enforce(self.budget);
        } else if b > self.soft_limit() {
            let mut w = self.wake.lock();
            if !w.0 {
                w.0 = true;
                self.wake_cv.notify_one();
            }
        }
    }

    /// The background reclaimer: keeps the versions under 80 % of the
    /// budget, so committers rarely do it. Returns when `stop` is set.
    pub(crate) fn run_reclaimer(&self) {
        loop {
            {
                let mut w = self.wake.lock();
                while !w.0 && !w.1 {
                    self.wake_cv.wait(&mut w);
                }
                if w.1 {
                    return;
                }
                w.0 = false;
            }
            self.enforce(self.soft_limit());
        }
    }

    /// Stops [`Versions::run_reclaimer`].
    pub(crate) fn stop_reclaimer(&self) {
        self.wake.lock().1 = true;
        self.wake_cv.notify_all();
    }

    /// Whether kept versions are over budget.
    #[cfg(all(test, not(loom)))]
    fn over_budget(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) > self.budget
    }

    /// What snapshot `s` sees for `key` if a version decides it.
    pub(crate) fn lookup(&self, s: Ts, table: &[u8], key: &[u8]) -> Seen {
        let map = self.map.read();
        map.keys
            .get(compose(table, key).as_slice())?
            .iter()
            .find(|v| v.ts > s)
            .map(|v| v.before.clone())
    }

    /// Whether a commit after `s` changed `key` (a write conflict).
    pub(crate) fn changed_since(&self, s: Ts, table: &[u8], key: &[u8]) -> bool {
        self.map
            .read()
            .keys
            .get(compose(table, key).as_slice())
            .is_some_and(|c| c.last().is_some_and(|v| v.ts > s))
    }

    /// Keys of `table` in `(lo, hi)` whose value at `s` a version decides,
    /// with that value, in key order.
    pub(crate) fn range(
        &self,
        s: Ts,
        table: &[u8],
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        if self.count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let prefix = 2 + table.len();
        let lo = match lo {
            Bound::Included(k) => Bound::Included(compose(table, k)),
            Bound::Excluded(k) => Bound::Excluded(compose(table, k)),
            Bound::Unbounded => Bound::Included(compose(table, &[])),
        };
        let hi = match hi {
            Bound::Included(k) => Bound::Included(compose(table, k)),
            Bound::Excluded(k) => Bound::Excluded(compose(table, k)),
            Bound::Unbounded => Bound::Excluded(table_end(table)),
        };
        // An empty or inverted interval holds nothing; BTreeMap::range
        // would panic on some of them (a user may ask for `b"m"..b"a"`).
        let empty = match (&lo, &hi) {
            (Bound::Included(l), Bound::Included(h)) => l > h,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
                l >= h
            }
            _ => false,
        };
        if empty {
            return Vec::new();
        }
        let mut out = Vec::new();
        let bounds = (
            lo.as_ref().map(StoreKey::as_slice),
            hi.as_ref().map(StoreKey::as_slice),
        );
        for (k, chain) in self.map.read().keys.range::<[u8], _>(bounds) {
            if let Some(v) = chain.iter().find(|v| v.ts > s) {
                out.push((k[prefix..].to_vec(), v.before.clone()));
            }
        }
        out
    }

    /// Invalidates the oldest snapshots until the kept versions fit the
    /// budget again. Never waits for a reader.
    #[cfg(all(test, not(loom)))]
    fn enforce_budget(&self) {
        self.enforce(self.budget)
    }

    /// [`Versions::enforce_budget`] against `limit` bytes.
    fn enforce(&self, limit: u64) {
        while self.bytes.load(Ordering::Relaxed) > limit {
            let mut r = self.reg.lock();
            let Some(&(oldest, _)) = r.live.keys().next() else {
                let limit = self.reclaim_limit(&r);
                drop(r);
                self.reclaim(limit);
                return;
            };
            // Every snapshot of that timestamp goes.
            let gone: Vec<(Ts, u64)> = r
                .live
                .range((oldest, 0)..=(oldest, u64::MAX))
                .map(|(k, _)| *k)
                .collect();
            for k in gone {
                if let Some((_, reg)) = r.live.remove(&k) {
                    reg.valid.store(false, Ordering::SeqCst);
                    self.active.fetch_sub(1, Ordering::SeqCst);
                    self.counters.invalidated.fetch_add(1, Ordering::Relaxed);
                }
            }
            let limit = self.reclaim_limit(&r);
            drop(r);
            self.reclaim(limit);
        }
    }

    /// Drops every version with a timestamp at or below `limit` (see
    /// [`Versions::reclaim_limit`]).
    fn reclaim(&self, limit: Ts) {
        /// Keys handled per hold of the map's write lock, so readers and
        /// committers wait at most that long.
        const BATCH: usize = 256;
        if self.reclaim_all(limit) {
            return;
        }
        loop {
            let keys: Vec<StoreKey> = {
                let mut gc = self.gc.lock();
                let mut keys = Vec::new();
                while keys.len() < BATCH {
                    match gc.front() {
                        Some(&(ts, _)) if ts <= limit => {}
                        _ => break,
                    }
                    if let Some((_, ck)) = gc.pop_front() {
                        keys.push(ck);
                    }
                }
                keys
            };
            if keys.is_empty() {
                return;
            }
            let (mut freed, mut n) = (0u64, 0u64);
            let mut map = self.map.write();
            for ck in keys {
                let Some(chain) = map.keys.get_mut(&ck) else {
                    continue;
                };
                let keep = chain
                    .iter()
                    .position(|v| v.ts > limit)
                    .unwrap_or(chain.len());
                freed += chain[..keep]
                    .iter()
                    .map(|v| version_size(&ck, v))
                    .sum::<u64>();
                n += keep as u64;
                chain.drain(..keep);
                if chain.is_empty() {
                    map.keys.remove(&ck);
                }
            }
            drop(map);
            self.bytes.fetch_sub(freed, Ordering::Relaxed);
            self.count.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// When every kept version is at or below `limit` (the usual case once
    /// the oldest snapshot is gone), empties the store in one step instead
    /// of key by key, and frees it outside the lock. Returns whether it
    /// did. No version at or below `limit` can be saved later: its commit
    /// has finished applying (see [`Versions::reclaim_limit`]).
    fn reclaim_all(&self, limit: Ts) -> bool {
        /// Queue entries dropped per hold of its lock.
        const BATCH: usize = 4096;
        let keys = {
            let mut map = self.map.write();
            if map.keys.is_empty() || map.newest > limit {
                return false;
            }
            std::mem::take(&mut map.keys)
        };
        let (mut freed, mut n) = (0u64, 0u64);
        for (ck, chain) in &keys {
            freed += chain.iter().map(|v| version_size(ck, v)).sum::<u64>();
            n += chain.len() as u64;
        }
        drop(keys);
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
        self.count.fetch_sub(n, Ordering::Relaxed);
        // Their queue entries name keys no longer stored.
        loop {
            let mut gc = self.gc.lock();
            let mut popped = 0;
            while popped < BATCH && gc.front().is_some_and(|&(ts, _)| ts <= limit) {
                gc.pop_front();
                popped += 1;
            }
            if popped < BATCH {
                return true;
            }
        }
    }

    /// Gauges for statistics: (live snapshots, age of the oldest in
    /// microseconds, versions kept, their bytes).
    pub(crate) fn gauges(&self) -> (u64, u64, u64, u64) {
        let r = self.reg.lock();
        let oldest = r
            .live
            .values()
            .map(|(t, _)| t.elapsed().as_micros() as u64)
            .max()
            .unwrap_or(0);
        (
            r.live.len() as u64,
            oldest,
            self.count.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_sees_the_value_before_the_first_later_change() {
        let gate = Gate::new();
        let v = Versions::new(1 << 20);
        assert_eq!(v.begin(), None, "no snapshot: nothing is saved");
        let s = v.register(&gate);
        let t1 = v.begin().unwrap();
        v.save(t1, b"t", b"k", Some(b"old".to_vec()));
        v.end(t1);
        let t2 = v.begin().unwrap();
        v.save(t2, b"t", b"k", Some(b"mid".to_vec()));
        v.save(t2, b"t", b"new", None);
        v.end(t2);
        assert_eq!(v.lookup(s.ts, b"t", b"k"), Some(Some(b"old".to_vec())));
        assert_eq!(v.lookup(s.ts, b"t", b"new"), Some(None));
        assert_eq!(v.lookup(s.ts, b"u", b"k"), None);
        let later = v.register(&gate);
        assert_eq!(later.ts, t2);
        assert_eq!(v.lookup(later.ts, b"t", b"k"), None);
        assert!(v.changed_since(s.ts, b"t", b"k"));
        assert!(!v.changed_since(later.ts, b"t", b"k"));
        let r = v.range(s.ts, b"t", Bound::Unbounded, Bound::Unbounded);
        assert_eq!(
            r,
            vec![
                (b"k".to_vec(), Some(b"old".to_vec())),
                (b"new".to_vec(), None)
            ]
        );
        v.release(&s);
        assert_eq!(v.gauges().2, 0, "the later snapshot needs none of them");
        v.release(&later);
        assert_eq!(v.gauges(), (0, 0, 0, 0));
    }

    #[test]
    fn reclaim_keeps_what_a_live_snapshot_needs_then_empties_at_once() {
        let gate = Gate::new();
        let v = Versions::new(1 << 20);
        let long = vec![7u8; 100]; // longer than a store key kept inline
        let first = v.register(&gate);
        let t1 = v.begin().unwrap();
        v.save(t1, b"t", b"a", Some(b"v0".to_vec()));
        v.end(t1);
        let second = v.register(&gate);
        let t2 = v.begin().unwrap();
        v.save(t2, b"t", b"a", Some(b"v1".to_vec()));
        v.save(t2, b"t", &long, None);
        v.end(t2);
        assert_eq!(v.gauges().2, 3);
        // The second snapshot still needs t2's versions: the store cannot
        // be emptied whole, only t1's version goes.
        v.release(&first);
        assert_eq!(v.gauges().2, 2);
        assert_eq!(v.lookup(second.ts, b"t", b"a"), Some(Some(b"v1".to_vec())));
        assert_eq!(v.lookup(second.ts, b"t", &long), Some(None));
        let r = v.range(second.ts, b"t", Bound::Unbounded, Bound::Unbounded);
        assert_eq!(r.len(), 2);
        v.release(&second);
        assert_eq!(v.gauges(), (0, 0, 0, 0));
        assert_eq!(v.bytes.load(Ordering::Relaxed), 0);
        assert!(v.gc.lock().is_empty(), "queue entries of freed keys go too");
    }

    #[test]
    fn going_over_budget_invalidates_the_oldest_snapshot_only() {
        let gate = Gate::new();
        let v = Versions::new(10_000);
        let old = v.register(&gate);
        let t = v.begin().unwrap();
        v.save(t, b"t", b"a", Some(vec![0; 6000]));
        v.end(t);
        let young = v.register(&gate);
        let t = v.begin().unwrap();
        v.save(t, b"t", b"b", Some(vec![0; 6000]));
        v.end(t);
        assert!(v.over_budget());
        v.enforce_budget();
        assert!(!v.over_budget());
        assert!(matches!(old.check(), Err(Error::SnapshotTooOld)));
        young.check().unwrap();
        assert_eq!(v.lookup(young.ts, b"t", b"b"), Some(Some(vec![0; 6000])));
        v.release(&old);
        v.release(&young);
    }
}

/// Model checks of the snapshot protocol with the real gate and version
/// store (run with `RUSTFLAGS="--cfg loom"`, see the README). The "tree"
/// is two cells a commit changes one after the other, as `apply` changes
/// the keys of a batch; a snapshot must see both as of one commit.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    struct World {
        gate: Gate,
        versions: Versions,
        tree: [AtomicU64; 2],
    }

    const KEYS: [&[u8]; 2] = [b"a", b"b"];

    /// One batch setting both keys to `v`, following `Database::commit`.
    fn commit(w: &World, v: u64) {
        let _in = w.gate.enter();
        let ts = w.versions.begin();
        for (cell, key) in w.tree.iter().zip(KEYS) {
            if let Some(ts) = ts {
                let old = cell.load(Ordering::SeqCst);
                w.versions
                    .save(ts, b"t", key, Some(old.to_le_bytes().to_vec()));
            }
            cell.store(v, Ordering::SeqCst);
        }
        if let Some(ts) = ts {
            w.versions.end(ts);
        }
    }

    /// Reads both keys through a new snapshot, as `Snap::get` does: the
    /// tree first, then the versions.
    fn snapshot_read(w: &World) -> [u64; 2] {
        let s = w.versions.register(&w.gate);
        let mut out = [0; 2];
        for (i, key) in KEYS.iter().enumerate() {
            let live = w.tree[i].load(Ordering::SeqCst);
            out[i] = match w.versions.lookup(s.ts, b"t", key) {
                Some(Some(b)) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
                Some(None) => panic!("the keys always exist"),
                None => live,
            };
        }
        s.check().expect("budget is large");
        w.versions.release(&s);
        out
    }

    fn world() -> Arc<World> {
        Arc::new(World {
            gate: Gate::new(),
            versions: Versions::new(1 << 20),
            tree: [AtomicU64::new(0), AtomicU64::new(0)],
        })
    }

    /// A commit racing the first snapshot (the drain) and a second one.
    #[test]
    fn snapshots_see_whole_batches() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let w = world();
            let w1 = w.clone();
            let writer = loom::thread::spawn(move || {
                commit(&w1, 1);
                commit(&w1, 2);
            });
            let [a, b] = snapshot_read(&w);
            assert_eq!(a, b, "a snapshot saw half a batch");
            writer.join().expect("writer");
        });
    }

    /// Two snapshots overlapping a commit: the second registers while the
    /// first is live (no drain), and releasing the first reclaims.
    #[test]
    fn overlapping_snapshots_and_reclaim() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let w = world();
            let w1 = w.clone();
            let w2 = w.clone();
            let writer = loom::thread::spawn(move || commit(&w1, 1));
            let reader = loom::thread::spawn(move || snapshot_read(&w2));
            let [a, b] = snapshot_read(&w);
            assert_eq!(a, b, "a snapshot saw half a batch");
            let [c, d] = reader.join().expect("reader");
            assert_eq!(c, d, "a snapshot saw half a batch");
            writer.join().expect("writer");
        });
    }
}
