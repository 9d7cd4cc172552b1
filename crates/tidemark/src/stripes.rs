//! Key stripes: make log order equal apply order for writes to one key.
//!
//! Every (table, key) hashes to one of [`STRIPES`] locks. A batch locks the
//! stripes of all its keys (sorted, deduplicated: no deadlock) before it
//! reserves its log record and holds them until it has applied itself to
//! the tree. Two batches that write a common key therefore reserve log
//! positions and apply in the same order, and replay rebuilds what readers
//! saw. Batches on different keys almost never share a stripe and run in
//! parallel. Dropping a table takes every stripe, so no write to it is
//! between its log record and its apply while the table goes away.
//!
//! Plain single-key reads share their key's stripe, so they see a batch
//! either not at all or whole: once a read sees one of its changes, every
//! later read sees all of them.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Number of stripe locks.
///
/// A batch conflicts with the others in flight when one of its stripes is
/// held, and with more threads than cores a holder is often preempted
/// between its reservation and its apply, so a conflict can cost a whole
/// scheduler slice. The chance grows with the stripes held over the number
/// of stripes: 64 threads writing batches of 10 keys made 0.5
/// `sched_yield` calls per commit (parking_lot's spin on a held stripe)
/// with 4096 stripes, 0.07 with 65536 (BENCHMARKS.md, "Sixteen times the
/// key stripes"). The locks are 8 bytes each: 512 KiB per database. The
/// cost falls on [`Stripes::lock_all`] (dropping a table): about 0.4 ms
/// to take them all, against 33 us with 4096.
pub(crate) const STRIPES: usize = 65536;

pub(crate) struct Stripes {
    locks: Box<[RwLock<()>]>,
    seed: u32,
}

/// Stripes held; dropping releases them.
pub(crate) struct Held<'a> {
    _guards: Vec<RwLockWriteGuard<'a, ()>>,
}

impl Stripes {
    pub(crate) fn new() -> Stripes {
        Stripes {
            locks: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            seed: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0u8,
            ) as u32,
        }
    }

    /// The stripe of `key` in `table`: a CRC-32C of both, seeded per
    /// database. The hash only spreads keys over locks, so it needs no
    /// resistance to chosen keys: the worst such keys can do is share a
    /// stripe, which serialises their writes.
    pub(crate) fn of(&self, table: &[u8], key: &[u8]) -> usize {
        crate::checksum::crc32c_append(self.seed, &[table, &[0xFF], key]) as usize % STRIPES
    }

    /// Locks `stripes` (any order, duplicates allowed).
    pub(crate) fn lock(&self, mut stripes: Vec<usize>) -> Held<'_> {
        stripes.sort_unstable();
        stripes.dedup();
        Held {
            _guards: stripes.into_iter().map(|s| self.locks[s].write()).collect(),
        }
    }

    /// Shares stripe `s` with other readers: no batch that writes a key of
    /// it is between its first and last change of the tree meanwhile, so a
    /// single-key read never sees part of a batch.
    pub(crate) fn read(&self, s: usize) -> RwLockReadGuard<'_, ()> {
        self.locks[s].read()
    }

    /// Locks every stripe.
    pub(crate) fn lock_all(&self) -> Held<'_> {
        self.lock((0..STRIPES).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_maps_to_one_stripe_and_keys_spread() {
        let s = Stripes::new();
        assert_eq!(s.of(b"t", b"k"), s.of(b"t", b"k"));
        let distinct: std::collections::HashSet<usize> =
            (0..1000u32).map(|i| s.of(b"t", &i.to_le_bytes())).collect();
        assert!(distinct.len() > 800, "only {} stripes used", distinct.len());
    }

    #[test]
    fn locking_duplicates_and_any_order_does_not_deadlock() {
        let s = Stripes::new();
        let a = s.lock(vec![5, 3, 5, 1]);
        drop(a);
        let _all = s.lock_all();
    }
}
