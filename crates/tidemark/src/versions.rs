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
//! Saving is cheap for the committer: it appends the before-image to a
//! short *pending* list, and the background thread (or the committer
//! itself, when the list has grown long) moves the list into the ordered
//! map in one step. Readers look in both, the map first, holding the map's
//! read lock while they look at the list, so an entry being moved is found
//! in one of the two. A key's versions are saved in timestamp order and
//! the list moves whole, so the map holds the older versions of a key and
//! the list the newer ones.
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

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::{Bound, RangeBounds};
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

/// Pending versions at which a save asks the background thread to move
/// them into the map.
const DRAIN_AT: usize = 512;

/// Pending versions at which a save moves them into the map itself (the
/// background thread is behind): bounds what a reader scans.
const SELF_DRAIN_AT: usize = 4096;

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
    /// An empty list with capacity, swapped with the pending list when it
    /// is moved in (no allocation per move).
    spare: Pending,
}

/// Where a before-image is in [`Pending::bytes`]: offset and length.
type Span = (usize, usize);

/// Versions saved but not yet in the map, in the order saved: store key,
/// timestamp, and where the before-image is in `bytes` (`None`: the key was
/// absent). A save copies the before-image into `bytes`, so the committer
/// allocates nothing per version; the move into the map does.
#[derive(Default)]
struct Pending {
    items: Vec<(StoreKey, Ts, Option<Span>)>,
    /// [`tag`] of each item's key: a reader looking for one key compares
    /// these first, so it holds the list's lock (which committers need)
    /// for a short scan.
    tags: Vec<u32>,
    bytes: Vec<u8>,
}

/// A 32-bit hash of a store key (multiply-rotate over 8-byte words).
fn tag(ck: &[u8]) -> u32 {
    let mut h = ck.len() as u64;
    for c in ck.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    (h >> 32) as u32
}

impl Pending {
    fn with_capacity() -> Pending {
        Pending {
            items: Vec::with_capacity(DRAIN_AT * 2),
            tags: Vec::with_capacity(DRAIN_AT * 2),
            bytes: Vec::with_capacity(DRAIN_AT * 128),
        }
    }

    fn before(&self, at: Option<Span>) -> Option<Vec<u8>> {
        at.map(|(o, l)| self.bytes[o..o + l].to_vec())
    }
}

/// Capacity of a spare list's bytes above which it is not kept (one large
/// before-image should not stay allocated after it moved).
const SPARE_BYTES_MAX: usize = 1 << 20;

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
    /// finished applying, ascending (taken in order under the clock's
    /// lock; as many as commits in flight).
    inflight: Vec<Ts>,
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
    /// Versions saved but not yet in `map`, in the order saved. Lock order:
    /// `map`, then `pending`, then `gc`.
    pending: Mutex<Pending>,
    /// (timestamp, key) of every version in `map`, roughly in timestamp
    /// order.
    gc: Mutex<VecDeque<(Ts, StoreKey)>>,
    bytes: AtomicU64,
    count: AtomicU64,
    /// Timestamp of the last drop of each table.
    drops: RwLock<HashMap<Vec<u8>, Ts>>,
    /// Requests to the background thread.
    wake: Mutex<Wake>,
    wake_cv: Condvar,
    pub(crate) counters: VersionCounters,
}

/// What the background thread is asked to do.
#[derive(Default)]
struct Wake {
    /// Bring the versions under 80 % of the budget.
    reclaim: bool,
    /// Move the pending versions into the map.
    drain: bool,
    stop: bool,
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
    charge(ck, v.before.as_deref())
}

/// Bytes charged for keeping `before` under store key `ck`.
fn charge(ck: &[u8], before: Option<&[u8]>) -> u64 {
    VERSION_OVERHEAD + ck.len() as u64 + before.map_or(0, |b| b.len() as u64)
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
                inflight: Vec::new(),
            }),
            map: RwLock::new(Store {
                spare: Pending::with_capacity(),
                ..Store::default()
            }),
            pending: Mutex::new(Pending::with_capacity()),
            gc: Mutex::new(VecDeque::new()),
            bytes: AtomicU64::new(0),
            count: AtomicU64::new(0),
            drops: RwLock::new(HashMap::new()),
            wake: Mutex::new(Wake::default()),
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
        c.inflight.push(ts);
        Some(ts)
    }

    /// The commit with timestamp `ts` has applied (or failed).
    pub(crate) fn end(&self, ts: Ts) {
        let mut c = self.clock.lock();
        if let Some(i) = c.inflight.iter().position(|&t| t == ts) {
            c.inflight.remove(i);
        }
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
    pub(crate) fn save(&self, ts: Ts, table: &[u8], key: &[u8], before: Option<&[u8]>) {
        let ck = compose(table, key);
        let tg = tag(&ck);
        let size = charge(&ck, before);
        // Charged before the version becomes visible to `reclaim`, which
        // may uncharge it at once: the counters never go below zero.
        self.bytes.fetch_add(size, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let n = {
            let mut p = self.pending.lock();
            let at = before.map(|b| {
                let o = p.bytes.len();
                p.bytes.extend_from_slice(b);
                (o, b.len())
            });
            p.tags.push(tg);
            p.items.push((ck, ts, at));
            p.items.len()
        };
        if n >= SELF_DRAIN_AT {
            self.drain();
        } else if n == DRAIN_AT {
            let mut w = self.wake.lock();
            if !w.drain {
                w.drain = true;
                self.wake_cv.notify_one();
            }
        }
    }

    /// Moves the pending versions into the map.
    fn drain(&self) {
        let mut map = self.map.write();
        self.drain_into(&mut map);
    }

    /// [`Versions::drain`] with the map's write lock held.
    fn drain_into(&self, map: &mut Store) {
        let mut list = std::mem::take(&mut map.spare);
        {
            let mut p = self.pending.lock();
            if p.items.is_empty() {
                map.spare = list;
                return;
            }
            std::mem::swap(&mut *p, &mut list);
        }
        let mut gc = self.gc.lock();
        let mut items = std::mem::take(&mut list.items);
        for (ck, ts, at) in items.drain(..) {
            map.newest = map.newest.max(ts);
            gc.push_back((ts, ck.clone()));
            let before = list.before(at);
            map.keys.entry(ck).or_default().push(Version { ts, before });
        }
        list.items = items;
        list.tags.clear();
        list.bytes.clear();
        if list.bytes.capacity() > SPARE_BYTES_MAX {
            list.bytes = Vec::with_capacity(DRAIN_AT * 128);
        }
        map.spare = list;
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
            if !w.reclaim {
                w.reclaim = true;
                self.wake_cv.notify_one();
            }
        }
    }

    /// The background thread: moves pending versions into the map and
    /// keeps the versions under 80 % of the budget, so committers rarely
    /// do either. Returns when `stop` is set.
    pub(crate) fn run_reclaimer(&self) {
        loop {
            let (drain, reclaim) = {
                let mut w = self.wake.lock();
                while !w.reclaim && !w.drain && !w.stop {
                    self.wake_cv.wait(&mut w);
                }
                if w.stop {
                    return;
                }
                (std::mem::take(&mut w.drain), std::mem::take(&mut w.reclaim))
            };
            if drain {
                self.drain();
            }
            if reclaim {
                self.enforce(self.soft_limit());
            }
        }
    }

    /// Stops [`Versions::run_reclaimer`].
    pub(crate) fn stop_reclaimer(&self) {
        self.wake.lock().stop = true;
        self.wake_cv.notify_all();
    }

    /// Whether kept versions are over budget.
    #[cfg(all(test, not(loom)))]
    fn over_budget(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) > self.budget
    }

    /// What snapshot `s` sees for `key` if a version decides it.
    pub(crate) fn lookup(&self, s: Ts, table: &[u8], key: &[u8]) -> Seen {
        let ck = compose(table, key);
        let map = self.map.read();
        // The map holds a key's older versions, the pending list its newer
        // ones: the first after `s` is in the map if any there is.
        if let Some(v) = map
            .keys
            .get(ck.as_slice())
            .and_then(|c| c.iter().find(|v| v.ts > s))
        {
            return Some(v.before.clone());
        }
        let tg = tag(&ck);
        let p = self.pending.lock();
        drop(map);
        p.tags
            .iter()
            .zip(&p.items)
            .find(|&(&t, (k, ts, _))| t == tg && *ts > s && *k == ck)
            .map(|(_, &(_, _, at))| p.before(at))
    }

    /// Whether a commit after `s` changed `key` (a write conflict): some
    /// version of it is tagged above `s`, which is what decides a lookup.
    pub(crate) fn changed_since(&self, s: Ts, table: &[u8], key: &[u8]) -> bool {
        self.lookup(s, table, key).is_some()
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
        let map = self.map.read();
        for (k, chain) in map.keys.range::<[u8], _>(bounds) {
            if let Some(v) = chain.iter().find(|v| v.ts > s) {
                out.push((k[prefix..].to_vec(), v.before.clone()));
            }
        }
        let p = self.pending.lock();
        drop(map);
        let mut more: BTreeMap<&[u8], Option<Span>> = BTreeMap::new();
        for (k, ts, at) in p.items.iter() {
            if *ts > s && bounds.contains(k.as_slice()) {
                more.entry(&k[prefix..]).or_insert(*at);
            }
        }
        if more.is_empty() {
            return out;
        }
        // A key the map decides keeps the map's (older) version; a key
        // whose map versions are all at or before `s` is decided here.
        let mut all: BTreeMap<Vec<u8>, Option<Vec<u8>>> = out.into_iter().collect();
        for (k, at) in more {
            all.entry(k.to_vec()).or_insert_with(|| p.before(at));
        }
        all.into_iter().collect()
    }

    /// [`Versions::enforce`] against the whole budget.
    #[cfg(all(test, not(loom)))]
    fn enforce_budget(&self) {
        self.enforce(self.budget)
    }

    /// Invalidates the oldest snapshots until the kept versions fit in
    /// `limit` bytes again. Never waits for a reader.
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

    /// Moves the pending versions into the map, then, when every kept
    /// version is at or below `limit` (the usual case once
    /// the oldest snapshot is gone), empties the store in one step instead
    /// of key by key, and frees it outside the lock. Returns whether it
    /// did. No version at or below `limit` can be saved later: its commit
    /// has finished applying (see [`Versions::reclaim_limit`]).
    fn reclaim_all(&self, limit: Ts) -> bool {
        /// Queue entries dropped per hold of its lock.
        const BATCH: usize = 4096;
        let keys = {
            let mut map = self.map.write();
            self.drain_into(&mut map);
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
        v.save(t1, b"t", b"k", Some(b"old"));
        v.end(t1);
        let t2 = v.begin().unwrap();
        v.save(t2, b"t", b"k", Some(b"mid"));
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
        v.save(t1, b"t", b"a", Some(b"v0"));
        v.end(t1);
        let second = v.register(&gate);
        let t2 = v.begin().unwrap();
        v.save(t2, b"t", b"a", Some(b"v1"));
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

    /// Which snapshot saw what, with versions split between the map and
    /// the pending list at every point: against a model that keeps every
    /// value each key ever had.
    mod split {
        use super::*;
        use proptest::prelude::*;

        const KEYS: u8 = 4;

        #[derive(Debug, Clone)]
        enum Step {
            /// Commit: set key to value (`None`: delete).
            Write(u8, Option<u8>),
            Snapshot,
            Drain,
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                6 => (0..KEYS, proptest::option::of(any::<u8>())).prop_map(|(k, v)| Step::Write(k, v)),
                1 => Just(Step::Snapshot),
                2 => Just(Step::Drain),
            ]
        }

        proptest! {
            #[test]
            fn reads_agree_with_the_model(steps in proptest::collection::vec(step(), 1..60)) {
                let gate = Gate::new();
                let v = Versions::new(1 << 30);
                let mut tree: [Option<u8>; KEYS as usize] = [None; KEYS as usize];
                // (snapshot, what it must see, keys written since)
                let mut snaps = Vec::new();
                for st in steps {
                    match st {
                        Step::Write(k, val) => {
                            let ts = v.begin();
                            if let Some(ts) = ts {
                                let old = tree[k as usize].map(|b| [b]);
                                v.save(ts, b"t", &[k], old.as_ref().map(|a| &a[..]));
                            }
                            tree[k as usize] = val;
                            for (_, _, written) in snaps.iter_mut() {
                                let written: &mut [bool; KEYS as usize] = written;
                                written[k as usize] = true;
                            }
                            if let Some(ts) = ts {
                                v.end(ts);
                            }
                        }
                        Step::Snapshot => snaps.push((v.register(&gate), tree, [false; KEYS as usize])),
                        Step::Drain => v.drain(),
                    }
                    for (s, seen, written) in &snaps {
                        let mut expect = Vec::new();
                        for k in 0..KEYS {
                            let got = match v.lookup(s.ts, b"t", &[k]) {
                                Some(b) => b.map(|b| b[0]),
                                None => tree[k as usize],
                            };
                            prop_assert_eq!(got, seen[k as usize], "key {} at {}", k, s.ts);
                            prop_assert_eq!(v.changed_since(s.ts, b"t", &[k]), written[k as usize]);
                            if seen[k as usize] != tree[k as usize] {
                                expect.push((vec![k], seen[k as usize].map(|b| vec![b])));
                            }
                        }
                        // The range's decided keys, where they differ from
                        // the tree, are exactly the changed ones.
                        let r: Vec<_> = v
                            .range(s.ts, b"t", Bound::Unbounded, Bound::Unbounded)
                            .into_iter()
                            .filter(|(k, b)| tree[k[0] as usize].map(|x| vec![x]) != *b)
                            .collect();
                        prop_assert_eq!(r, expect);
                        let mid: Vec<_> = v
                            .range(s.ts, b"t", Bound::Included(&[1u8][..]), Bound::Excluded(&[3u8][..]))
                            .into_iter()
                            .map(|(k, _)| k[0])
                            .collect();
                        prop_assert!(mid.iter().all(|k| (1..3).contains(k)));
                        prop_assert!(mid.windows(2).all(|w| w[0] < w[1]), "in key order: {:?}", mid);
                    }
                }
                for (s, _, _) in &snaps {
                    v.release(s);
                }
                prop_assert_eq!(v.gauges(), (0, 0, 0, 0));
                prop_assert!(v.pending.lock().items.is_empty());
            }
        }
    }

    #[test]
    fn a_long_pending_list_is_moved_by_the_committer() {
        let gate = Gate::new();
        let v = Versions::new(1 << 30);
        let s = v.register(&gate);
        for i in 0..SELF_DRAIN_AT as u32 {
            let ts = v.begin().unwrap();
            v.save(ts, b"t", &i.to_be_bytes(), None);
            v.end(ts);
        }
        assert!(
            v.pending.lock().items.is_empty(),
            "no background thread runs here"
        );
        assert_eq!(v.map.read().keys.len(), SELF_DRAIN_AT);
        assert_eq!(v.lookup(s.ts, b"t", &7u32.to_be_bytes()), Some(None));
        v.release(&s);
        assert_eq!(v.gauges(), (0, 0, 0, 0));
    }

    #[test]
    fn going_over_budget_invalidates_the_oldest_snapshot_only() {
        let gate = Gate::new();
        let v = Versions::new(10_000);
        let old = v.register(&gate);
        let t = v.begin().unwrap();
        v.save(t, b"t", b"a", Some(&[0; 6000]));
        v.end(t);
        let young = v.register(&gate);
        let t = v.begin().unwrap();
        v.save(t, b"t", b"b", Some(&[0; 6000]));
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
                w.versions.save(ts, b"t", key, Some(&old.to_le_bytes()));
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
        let out = read_through(w, &s);
        s.check().expect("budget is large");
        w.versions.release(&s);
        out
    }

    /// Reads both keys through snapshot `s`.
    fn read_through(w: &World, s: &SnapshotReg) -> [u64; 2] {
        let mut out = [0; 2];
        for (i, key) in KEYS.iter().enumerate() {
            let live = w.tree[i].load(Ordering::SeqCst);
            out[i] = match w.versions.lookup(s.ts, b"t", key) {
                Some(Some(b)) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
                Some(None) => panic!("the keys always exist"),
                None => live,
            };
        }
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

    /// A commit's versions moved into the map while a snapshot reads them:
    /// the reader finds each version in the map or in the pending list.
    #[test]
    fn a_drain_racing_reads() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let w = world();
            let s = w.versions.register(&w.gate);
            let w1 = w.clone();
            let writer = loom::thread::spawn(move || {
                commit(&w1, 1);
                w1.versions.drain();
            });
            let out = read_through(&w, &s);
            assert_eq!(out, [0, 0], "the snapshot predates the commit");
            writer.join().expect("writer");
            w.versions.release(&s);
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
