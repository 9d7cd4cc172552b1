//! The write gate: how a checkpoint takes a consistent cut without a
//! database-wide lock on the write path.
//!
//! A writer entering a write (a put, a delete, a whole batch) increments a
//! counter in one of several cache-line-padded slots (chosen per thread, so
//! writers on different cores do not share a line) and checks that no cut
//! is in progress. A checkpoint closes the gate, waits until every slot is
//! zero (at most the duration of the writes already inside), moves the
//! epoch on, and reopens it: a pause of microseconds, once per checkpoint,
//! after which writers run concurrently with the whole checkpoint write.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use crossbeam_utils::CachePadded;

use crate::sync::{relax, seqcst_point, AtomicBool, AtomicUsize, Condvar, Mutex};

/// Counter slots; more than the cores we expect, so threads rarely share.
const SLOTS: usize = 16;

pub(crate) struct Gate {
    slots: [CachePadded<AtomicUsize>; SLOTS],
    closing: AtomicBool,
    /// Closers at work (a checkpoint cut, a first snapshot's drain); the
    /// gate opens again when the last one is done. Under `lock`.
    lock: Mutex<usize>,
    cv: Condvar,
}

thread_local! {
    static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}
// Only spreads writers over slots (any slot is correct), so a plain
// atomic even under loom.
static NEXT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn my_slot() -> usize {
    SLOT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        s.get()
    })
}

/// Proof of being inside the gate; leaving is dropping it.
pub(crate) struct Inside<'a> {
    gate: &'a Gate,
    slot: usize,
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.gate.slots[self.slot].fetch_sub(1, Ordering::SeqCst);
    }
}

impl Gate {
    pub(crate) fn new() -> Self {
        Gate {
            slots: std::array::from_fn(|_| CachePadded::new(AtomicUsize::new(0))),
            closing: AtomicBool::new(false),
            lock: Mutex::new(0),
            cv: Condvar::new(),
        }
    }

    pub(crate) fn enter(&self) -> Inside<'_> {
        let slot = my_slot();
        loop {
            self.slots[slot].fetch_add(1, Ordering::SeqCst);
            seqcst_point();
            if !self.closing.load(Ordering::SeqCst) {
                return Inside { gate: self, slot };
            }
            self.slots[slot].fetch_sub(1, Ordering::SeqCst);
            let mut g = self.lock.lock();
            while self.closing.load(Ordering::SeqCst) {
                self.cv.wait(&mut g);
            }
        }
    }

    /// Closes the gate and waits until no writer is inside. Must not be
    /// called by a thread that is inside. Closers may overlap; each must
    /// call [`Gate::open`] once.
    pub(crate) fn close(&self) {
        {
            let mut closers = self.lock.lock();
            *closers += 1;
            self.closing.store(true, Ordering::SeqCst);
        }
        seqcst_point();
        let mut spins = 0u32;
        while self.slots.iter().any(|s| s.load(Ordering::SeqCst) != 0) {
            spins += 1;
            relax(spins);
        }
    }

    pub(crate) fn open(&self) {
        let mut closers = self.lock.lock();
        *closers = closers.saturating_sub(1);
        if *closers == 0 {
            self.closing.store(false, Ordering::SeqCst);
            self.cv.notify_all();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn close_waits_for_writers_inside_and_blocks_new_ones() {
        let gate = Arc::new(Gate::new());
        let inside = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (gate, inside, stop) = (gate.clone(), inside.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let _in = gate.enter();
                        inside.fetch_add(1, Ordering::SeqCst);
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for _ in 0..200 {
            gate.close();
            assert_eq!(
                inside.load(Ordering::SeqCst),
                0,
                "a writer is inside a closed gate"
            );
            gate.open();
        }
        stop.store(true, Ordering::Relaxed);
        for w in workers {
            w.join().unwrap();
        }
    }
}
