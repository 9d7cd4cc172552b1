//! Group commit: committers share log writes and fsyncs.
//!
//! Two slots (buffers) alternate. One is *active*: committers join it by
//! reserving space with one compare-and-swap on its state word, copy their
//! records into their own ranges in parallel, and leave. A committer that
//! needs its record written (durability `Write` or `Fsync`) either finds it
//! already written, or becomes the *leader* if nobody is, or sleeps on its
//! slot's event until a leader wakes it. The leader closes the active
//! slot (one atomic OR), installs the other slot as active at once, so the
//! next group starts forming while this one is written, waits until the
//! joiners of the closed slot have finished copying, writes the slot with
//! one call, fsyncs if anyone in it asked for that, and wakes its whole
//! group with one call (a futex wake of every sleeper on the slot's event,
//! and no call at all when nobody sleeps there).
//!
//! One leader at a time: groups reach the file in stream order, so what a
//! crash leaves is always a prefix of the stream. While a leader writes
//! and fsyncs group `g`, group `g + 1` gathers every committer that
//! arrives; the next leader writes all of them with one call and one
//! fsync. This is what makes commits per fsync grow with the number of
//! threads instead of collapsing (seed 003).
//!
//! State word of a slot: `gen` (18 bits) | `closed` (1) | `joiners` (13) |
//! `offset` (32). The generation in the word makes a joiner's compare-and-
//! swap fail if the slot was closed and reinstalled since it looked.
//!
//! Nobody sleeps on a timer: joiners that find the slot closed or full wait
//! on the condition variable for the leader's install; the leader waits for
//! late joiners on it, woken by the last one out.
//!
//! A member waiting only for its group's *write* (durability `Write`), not
//! its fsync, first spins for up to [`WRITE_SPIN`] watching for the write
//! or a wake, then sleeps on its slot's event as any other member. Only
//! one member spins at a time (a token), so with many committers the
//! others sleep at once and the spinner takes at most one core from the
//! leader. A group's write takes microseconds, while a sleep and a wake
//! cost two context switches and, on a busy machine, a wait for a core
//! after the wake.

use crate::error::{Error, Result};

#[cfg(loom)]
use loom::sync::{
    atomic::{AtomicBool, AtomicU64, Ordering},
    Condvar, Mutex, MutexGuard,
};
// parking_lot's condition variable wakes nobody, with no system call,
// when nobody waits: a group's leader notifies it twice per group, and
// most groups have no one on it.
#[cfg(not(loom))]
use parking_lot::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use event::Event;

const OFFSET_BITS: u32 = 32;
const JOINER_SHIFT: u32 = OFFSET_BITS;
const JOINER_BITS: u32 = 13;
const CLOSED_SHIFT: u32 = JOINER_SHIFT + JOINER_BITS;
const GEN_SHIFT: u32 = CLOSED_SHIFT + 1;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
const JOINER_MASK: u64 = (1 << JOINER_BITS) - 1;
const CLOSED: u64 = 1 << CLOSED_SHIFT;
const ONE_JOINER: u64 = 1 << JOINER_SHIFT;
const GEN_MASK: u64 = (1 << (64 - GEN_SHIFT)) - 1;

/// Largest single reservation, in bytes.
pub(crate) const MAX_RESERVATION: u64 = 1 << 31;

/// How long one member waiting for its group's write spins before it
/// sleeps (see the module documentation). A group's `pwrite` takes a few
/// microseconds; 30 us covers it with room. Measured in BENCHMARKS.md,
/// "A member spins for its group's write".
const WRITE_SPIN: std::time::Duration = std::time::Duration::from_micros(30);

fn offset(st: u64) -> u64 {
    st & OFFSET_MASK
}
fn joiners(st: u64) -> u64 {
    (st >> JOINER_SHIFT) & JOINER_MASK
}
fn closed(st: u64) -> bool {
    st & CLOSED != 0
}
fn gen_of(st: u64) -> u64 {
    st >> GEN_SHIFT
}
fn open_state(gen: u64) -> u64 {
    (gen & GEN_MASK) << GEN_SHIFT
}

/// Where a group's bytes go.
pub(crate) trait Sink {
    /// Writes `bytes` at stream position `pos`.
    fn write(&self, pos: u64, bytes: &[u8]) -> Result<()>;
    /// Makes everything written so far durable.
    fn sync(&self) -> Result<()>;
}

/// Counters of the group commit.
#[derive(Default)]
pub(crate) struct GroupCounters {
    pub(crate) groups: AtomicU64,
    pub(crate) records: AtomicU64,
    pub(crate) max_group: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
    pub(crate) slot_wait_ns: AtomicU64,
    pub(crate) sync_wait_ns: AtomicU64,
    /// Spins for a group's write that saw it done (or a wake) in time.
    #[cfg_attr(loom, allow(dead_code))] // the spin is compiled out under loom
    pub(crate) write_spins_done: AtomicU64,
    /// Spins for a group's write that ran out and went to sleep.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) write_spins_given_up: AtomicU64,
}

struct Slot {
    state: AtomicU64,
    /// Stream position of offset 0 (set before the slot is installed).
    base: AtomicU64,
    /// Bytes joiners may reserve (set before the slot is installed).
    cap: AtomicU64,
    /// A joiner asked for an fsync of this group.
    sync: AtomicBool,
    records: AtomicU64,
    buf: buf::Buffer,
    /// Members of the slot's group sleep here; bumped when the group is
    /// done (or the log failed), and once to hand the lead to a member of
    /// the group forming in it.
    done: Event,
}

struct Ctl {
    leader: bool,
    failed: Option<String>,
}

pub(crate) struct GroupLog {
    slots: [Slot; 2],
    /// Generation of the active slot; the slot is `slots[gen % 2]`.
    active: AtomicU64,
    written: AtomicU64,
    synced: AtomicU64,
    /// Largest reservation that did not fit a slot; the next install
    /// makes room for it.
    big: AtomicU64,
    default_cap: u64,
    ctl: Mutex<Ctl>,
    /// Mirror of `ctl.failed.is_some()`, for waiters' lock-free checks.
    failed: AtomicBool,
    /// Held by the one member spinning for its group's write.
    #[cfg_attr(loom, allow(dead_code))] // the spin is compiled out under loom
    spinner: AtomicBool,
    /// How long that member spins ([`WRITE_SPIN`]; tests change it).
    #[cfg_attr(loom, allow(dead_code))]
    write_spin: std::time::Duration,
    /// Joiners waiting for an install, the leader waiting for joiners.
    cv: Condvar,
    pub(crate) counters: GroupCounters,
}

/// Space reserved in the active slot; fill it with [`GroupLog::with_bytes`]
/// and hand it back with [`GroupLog::release`].
pub(crate) struct Reservation {
    slot: usize,
    offset: u64,
    len: u64,
    /// Stream position of the first byte.
    pub(crate) pos: u64,
}

impl Reservation {
    /// Stream position just past the reservation.
    pub(crate) fn end(&self) -> u64 {
        self.pos + self.len
    }
    /// The slot the reservation is in (what to wait on).
    pub(crate) fn slot(&self) -> usize {
        self.slot
    }
}

fn lock(m: &Mutex<Ctl>) -> MutexGuard<'_, Ctl> {
    #[cfg(not(loom))]
    {
        m.lock()
    }
    // A panic while holding this lock cannot leave `Ctl` inconsistent (two
    // plain fields, each written in one step), so a poisoned lock is used.
    #[cfg(loom)]
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sleeps on `cv`, giving up the control lock meanwhile; returns with it
/// held again.
fn cv_wait<'a>(cv: &Condvar, g: MutexGuard<'a, Ctl>) -> MutexGuard<'a, Ctl> {
    #[cfg(not(loom))]
    {
        let mut g = g;
        cv.wait(&mut g);
        g
    }
    #[cfg(loom)]
    cv.wait(g).unwrap_or_else(|e| e.into_inner())
}

impl GroupLog {
    /// A log whose next byte goes at stream position `start` (everything
    /// before it counts as written and synced); slots of `cap` bytes.
    pub(crate) fn new(start: u64, cap: u64) -> GroupLog {
        let cap = cap.clamp(64, MAX_RESERVATION);
        let slot = |gen: u64| Slot {
            state: AtomicU64::new(if gen == 0 {
                open_state(0)
            } else {
                open_state(gen) | CLOSED
            }),
            base: AtomicU64::new(start),
            cap: AtomicU64::new(cap),
            sync: AtomicBool::new(false),
            records: AtomicU64::new(0),
            buf: buf::Buffer::new(cap as usize),
            done: Event::new(),
        };
        GroupLog {
            slots: [slot(0), slot(1)],
            active: AtomicU64::new(0),
            written: AtomicU64::new(start),
            synced: AtomicU64::new(start),
            big: AtomicU64::new(0),
            default_cap: cap,
            ctl: Mutex::new(Ctl {
                leader: false,
                failed: None,
            }),
            failed: AtomicBool::new(false),
            spinner: AtomicBool::new(false),
            write_spin: WRITE_SPIN,
            cv: Condvar::new(),
            counters: GroupCounters::default(),
        }
    }

    /// Stream position of the next reservation. Exact only while no
    /// reservation can start (the checkpoint reads it with the write gate
    /// closed).
    pub(crate) fn position(&self) -> u64 {
        let gen = self.active.load(Ordering::Acquire);
        let slot = &self.slots[(gen % 2) as usize];
        slot.base.load(Ordering::Acquire) + offset(slot.state.load(Ordering::Acquire))
    }

    /// Stream position up to which groups were handed to the OS.
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Stream position up to which the log is durable.
    pub(crate) fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// Joins the active group with `len` bytes (a multiple of 8). Lock-free
    /// unless the slot is full or being closed; then it waits for the next
    /// one, flushing the full one itself if no leader is at work.
    pub(crate) fn reserve(&self, len: u64, sink: &dyn Sink) -> Result<Reservation> {
        if len == 0 || len > MAX_RESERVATION {
            return Err(Error::InvalidOption(format!(
                "log record of {len} bytes is outside 1..={MAX_RESERVATION}"
            )));
        }
        let mut waited: Option<std::time::Instant> = None;
        loop {
            let gen = self.active.load(Ordering::Acquire);
            let idx = (gen % 2) as usize;
            let slot = &self.slots[idx];
            let st = slot.state.load(Ordering::Acquire);
            if gen_of(st) != gen & GEN_MASK || closed(st) {
                waited.get_or_insert_with(std::time::Instant::now);
                self.wait_install(gen)?;
                continue;
            }
            let cap = slot.cap.load(Ordering::Acquire);
            let off = offset(st);
            if off + len > cap || joiners(st) == JOINER_MASK {
                waited.get_or_insert_with(std::time::Instant::now);
                if len > cap {
                    self.big.fetch_max(len, Ordering::AcqRel);
                }
                // Get this group written so the next slot opens.
                let end = slot.base.load(Ordering::Acquire) + off;
                self.wait_for(end.max(self.written() + 1), false, sink, Some(gen), None)?;
                continue;
            }
            let next = st + ONE_JOINER + len;
            if slot
                .state
                .compare_exchange_weak(st, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if let Some(t) = waited {
                    self.counters
                        .slot_wait_ns
                        .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                return Ok(Reservation {
                    slot: idx,
                    offset: off,
                    len,
                    pos: slot.base.load(Ordering::Acquire) + off,
                });
            }
        }
    }

    /// Runs `f` on the reservation's bytes (to build a record in place).
    pub(crate) fn with_bytes<T>(&self, r: &Reservation, f: impl FnOnce(&mut [u8]) -> T) -> T {
        self.slots[r.slot]
            .buf
            .with_range(r.offset as usize, r.len as usize, f)
    }

    /// Leaves the group; `sync` asks for the group to be fsynced.
    pub(crate) fn release(&self, r: Reservation, sync: bool) {
        let slot = &self.slots[r.slot];
        if sync {
            slot.sync.store(true, Ordering::Relaxed);
        }
        slot.records.fetch_add(1, Ordering::Relaxed);
        // Release: the bytes copied above happen before the leader's read.
        let prev = slot.state.fetch_sub(ONE_JOINER, Ordering::AcqRel);
        if closed(prev) && joiners(prev) == 1 {
            let _g = lock(&self.ctl);
            self.cv.notify_all();
        }
    }

    /// Returns once the stream up to `end`, reserved in `slot`, is
    /// written (and synced when `sync`), leading the group write itself
    /// when no one else is.
    pub(crate) fn wait(&self, end: u64, slot: usize, sync: bool, sink: &dyn Sink) -> Result<()> {
        let t = std::time::Instant::now();
        let r = self.wait_for(end, sync, sink, None, Some(slot % 2));
        self.counters
            .sync_wait_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }

    /// Waits until `end` is written (synced if `sync`), or, when
    /// `until_gen` is given, until that generation is no longer active.
    ///
    /// A committer of slot `member` reads the slot's event, checks for
    /// completion, and sleeps on the event only while a leader is at work
    /// (seen under the control lock); woken, it checks for completion
    /// without taking that lock, so the members of a group wake in
    /// parallel instead of queueing on a mutex. A leader that wrote slot
    /// `s` first hands the lead to one sleeper of the group forming in the
    /// other slot, then wakes every member of `s` with one call. The
    /// event's value read before the checks makes a wake between the
    /// checks and the sleep impossible to miss. Joiners waiting for an
    /// install (`member` = `None`) use the condition variable.
    fn wait_for(
        &self,
        end: u64,
        sync: bool,
        sink: &dyn Sink,
        until_gen: Option<u64>,
        member: Option<usize>,
    ) -> Result<()> {
        let reached = || if sync { self.synced() } else { self.written() };
        loop {
            // Before the checks: a later bump makes the sleep below return.
            let seen = member.map(|s| (s, self.slots[s].done.value()));
            if !self.failed.load(Ordering::Acquire) && until_gen.is_none() && reached() >= end {
                return Ok(());
            }
            let mut g = lock(&self.ctl);
            if let Some(why) = &g.failed {
                return Err(Error::WritesStopped(why.clone()));
            }
            if let Some(gen) = until_gen {
                if self.active.load(Ordering::Acquire) != gen {
                    return Ok(());
                }
            }
            if reached() >= end {
                return Ok(());
            }
            if !g.leader {
                g.leader = true;
                drop(g);
                let r = self.lead(end, sync, sink);
                let mut g = lock(&self.ctl);
                g.leader = false;
                if let Err(e) = &r {
                    g.failed = Some(format!("log write failed: {e}"));
                    self.failed.store(true, Ordering::Release);
                }
                self.cv.notify_all();
                drop(g);
                match &r {
                    // The next leader first: it has the fsync pipeline to
                    // keep busy, and every thread woken before it would
                    // run ahead of it on a busy machine. Whoever sleeps on
                    // the other slot's event is a member of the group
                    // forming there: the members of that slot's previous
                    // group were all woken when it was done.
                    Ok(Some(s)) => {
                        self.slots[1 - s].done.notify_one();
                        self.slots[*s].done.notify_all();
                    }
                    // Nothing written, or the log failed: everyone checks.
                    _ => {
                        for slot in &self.slots {
                            slot.done.notify_all();
                        }
                    }
                }
                r?;
                continue;
            }
            match seen {
                Some((s, seen)) => {
                    drop(g);
                    // The model checker explores the sleep; the spin only
                    // adds checks before it.
                    #[cfg(not(loom))]
                    if !sync && self.spin_for_write(end, s, seen) {
                        continue;
                    }
                    self.slots[s].done.wait(seen);
                }
                None => {
                    drop(cv_wait(&self.cv, g));
                }
            }
        }
    }

    /// A member of slot `s` waiting for the stream to be written up to
    /// `end`, with `seen` read from the slot's event before its checks:
    /// spins for up to `write_spin` while a leader works, unless another
    /// member is spinning already. True if the write got there or the
    /// event moved (the caller checks again), false if the caller should
    /// sleep.
    #[cfg(not(loom))]
    fn spin_for_write(&self, end: u64, s: usize, seen: u32) -> bool {
        if self
            .spinner
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let t0 = std::time::Instant::now();
        let moved = loop {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
            if self.written() >= end
                || self.slots[s].done.value() != seen
                || self.failed.load(Ordering::Acquire)
            {
                break true;
            }
            if t0.elapsed() >= self.write_spin {
                break false;
            }
        };
        self.spinner.store(false, Ordering::Release);
        let c = if moved {
            &self.counters.write_spins_done
        } else {
            &self.counters.write_spins_given_up
        };
        c.fetch_add(1, Ordering::Relaxed);
        moved
    }

    /// Waits until generation `gen` is no longer the active one.
    fn wait_install(&self, gen: u64) -> Result<()> {
        let mut g = lock(&self.ctl);
        while self.active.load(Ordering::Acquire) == gen {
            if let Some(why) = &g.failed {
                return Err(Error::WritesStopped(why.clone()));
            }
            g = cv_wait(&self.cv, g);
        }
        Ok(())
    }

    /// The leader's work. Only one thread runs it at a time. Returns the
    /// slot it wrote, if it wrote one.
    fn lead(&self, end: u64, mut sync: bool, sink: &dyn Sink) -> Result<Option<usize>> {
        let mut flushed = None;
        if self.written() < end {
            let idx = (self.active.load(Ordering::Acquire) % 2) as usize;
            sync |= self.flush_active(sink)?;
            flushed = Some(idx);
        }
        if sync && self.synced() < self.written() {
            sink.sync()?;
            self.counters.fsyncs.fetch_add(1, Ordering::Relaxed);
            self.synced.store(self.written(), Ordering::Release);
        }
        Ok(flushed)
    }

    /// Closes the active slot, installs the other one, writes the closed
    /// one. Returns whether a joiner asked for an fsync.
    fn flush_active(&self, sink: &dyn Sink) -> Result<bool> {
        let gen = self.active.load(Ordering::Acquire);
        let slot = &self.slots[(gen % 2) as usize];
        let st = slot.state.fetch_or(CLOSED, Ordering::AcqRel);
        let len = offset(st);
        let base = slot.base.load(Ordering::Acquire);

        // Install the other slot. Its previous group was flushed by an
        // earlier leader (leaders run one at a time and always finish the
        // slot they close), so no thread touches its buffer now.
        let next = &self.slots[((gen + 1) % 2) as usize];
        let want = self.big.swap(0, Ordering::AcqRel).max(self.default_cap);
        next.buf.ensure(want as usize, self.default_cap as usize);
        next.cap.store(want, Ordering::Release);
        next.base.store(base + len, Ordering::Release);
        next.sync.store(false, Ordering::Relaxed);
        next.records.store(0, Ordering::Relaxed);
        next.state.store(open_state(gen + 1), Ordering::Release);
        self.active.store(gen + 1, Ordering::Release);
        {
            let _g = lock(&self.ctl);
            self.cv.notify_all();
        }

        // Wait for joiners still copying into the closed slot.
        #[cfg(not(loom))]
        for _ in 0..200 {
            if joiners(slot.state.load(Ordering::Acquire)) == 0 {
                break;
            }
            std::hint::spin_loop();
        }
        if joiners(slot.state.load(Ordering::Acquire)) != 0 {
            let mut g = lock(&self.ctl);
            while joiners(slot.state.load(Ordering::Acquire)) != 0 {
                g = cv_wait(&self.cv, g);
            }
        }
        let records = slot.records.load(Ordering::Relaxed);
        if len > 0 {
            slot.buf
                .with_range(0, len as usize, |bytes| sink.write(base, bytes))?;
        }
        self.written.store(base + len, Ordering::Release);
        let c = &self.counters;
        c.groups.fetch_add(1, Ordering::Relaxed);
        c.records.fetch_add(records, Ordering::Relaxed);
        c.max_group.fetch_max(records, Ordering::Relaxed);
        c.bytes.fetch_add(len, Ordering::Relaxed);
        Ok(slot.sync.load(Ordering::Relaxed))
    }

    /// Stops the log: later reservations and waits fail with `why`.
    pub(crate) fn fail(&self, why: &str) {
        let mut g = lock(&self.ctl);
        g.failed.get_or_insert_with(|| why.to_string());
        self.failed.store(true, Ordering::Release);
        self.cv.notify_all();
        drop(g);
        for slot in &self.slots {
            slot.done.notify_all();
        }
    }
}

/// An event count: a counter that waiters sleep on until it moves. A
/// waiter reads [`Event::value`], checks its condition, and calls
/// [`Event::wait`] with the value it read; a notifier makes the condition
/// true, then bumps the counter and wakes. A bump between the read and the
/// sleep makes the sleep return at once, so no wake is lost.
///
/// The word is a futex: the count in its upper 31 bits, and in bit 0 a
/// flag that someone may be asleep on it. A waiter sets the flag before it
/// sleeps, in the same word the bump changes, so a notifier that finds it
/// clear knows nobody sleeps and makes no system call (most groups have no
/// member asleep: they spin, or they find their write done). `notify_all`
/// clears the flag with its bump, since it wakes every sleeper;
/// `notify_one` leaves it, since others may still sleep.
mod event {
    use crate::sync::AtomicU32;
    use std::sync::atomic::Ordering;

    /// Bit 0: someone may sleep on the word.
    const SLEEPERS: u32 = 1;
    /// One step of the count.
    const STEP: u32 = 2;

    pub(super) struct Event {
        word: AtomicU32,
        #[cfg(loom)]
        park: futex::Park,
    }

    impl Event {
        pub(super) fn new() -> Event {
            Event {
                word: AtomicU32::new(0),
                #[cfg(loom)]
                park: futex::Park::new(),
            }
        }
        /// The current count (acquire: what the notifier did before its
        /// bump is visible after this read sees the bump).
        pub(super) fn value(&self) -> u32 {
            self.word.load(Ordering::Acquire) & !SLEEPERS
        }
        /// Sleeps while the count is `seen`; may return spuriously.
        pub(super) fn wait(&self, seen: u32) {
            let mut cur = self.word.load(Ordering::Acquire);
            loop {
                if cur & !SLEEPERS != seen {
                    return;
                }
                if cur & SLEEPERS != 0 {
                    break;
                }
                // The flag goes into the word the notifier's bump changes:
                // either this succeeds before the bump (which then sees
                // it), or it fails and the word it returns shows the moved
                // count (or another waiter's flag: then sleep as well).
                match self.word.compare_exchange_weak(
                    cur,
                    cur | SLEEPERS,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        cur |= SLEEPERS;
                        break;
                    }
                    Err(now) => cur = now,
                }
            }
            // Sleeps only if the word is still `cur`, checked atomically
            // with going to sleep: a bump since returns at once.
            self.sleep(cur);
        }
        /// Bumps the count and wakes one sleeper, if any may sleep. The
        /// flag stays: other sleepers may remain.
        pub(super) fn notify_one(&self) {
            let prev = self.word.fetch_add(STEP, Ordering::Release);
            if prev & SLEEPERS != 0 {
                self.wake(false);
            }
        }
        /// Bumps the count, clears the flag, and wakes every sleeper if
        /// any may sleep.
        pub(super) fn notify_all(&self) {
            let mut cur = self.word.load(Ordering::Relaxed);
            let prev = loop {
                let next = (cur & !SLEEPERS).wrapping_add(STEP);
                match self.word.compare_exchange_weak(
                    cur,
                    next,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(prev) => break prev,
                    Err(now) => cur = now,
                }
            };
            if prev & SLEEPERS != 0 {
                self.wake(true);
            }
        }

        #[cfg(not(loom))]
        fn sleep(&self, expect: u32) {
            atomic_wait::wait(&self.word, expect);
        }
        #[cfg(not(loom))]
        fn wake(&self, all: bool) {
            if all {
                atomic_wait::wake_all(&self.word);
            } else {
                atomic_wait::wake_one(&self.word);
            }
        }
        #[cfg(loom)]
        fn sleep(&self, expect: u32) {
            self.park.sleep(&self.word, expect);
        }
        #[cfg(loom)]
        fn wake(&self, all: bool) {
            self.park.wake(all);
        }
    }

    #[cfg(all(test, not(loom)))]
    mod tests {
        use super::*;
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::{Duration, Instant};

        fn flag(e: &Event) -> bool {
            e.word.load(Ordering::SeqCst) & SLEEPERS != 0
        }

        /// Waits (10 s at most) until `cond` holds.
        fn until(what: &str, cond: impl Fn() -> bool) {
            let t0 = Instant::now();
            while !cond() {
                assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
                std::thread::sleep(Duration::from_micros(200));
            }
        }

        /// A thread that sleeps on `e` until `go` is set.
        fn sleeper(e: &Arc<Event>, go: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
            let (e, go) = (e.clone(), go.clone());
            std::thread::spawn(move || loop {
                let seen = e.value();
                if go.load(Ordering::SeqCst) {
                    return;
                }
                e.wait(seen);
            })
        }

        #[test]
        fn notifies_with_nobody_asleep_count_and_leave_the_flag_clear() {
            let e = Event::new();
            e.notify_all();
            e.notify_one();
            assert!(!flag(&e));
            assert_eq!(e.value(), 2 * STEP);
            // A wait for a count that has moved returns without sleeping
            // and sets no flag.
            e.wait(0);
            assert!(!flag(&e));
        }

        #[test]
        fn a_sleeper_sets_the_flag_and_notify_all_wakes_it_and_clears_it() {
            let (e, go) = (Arc::new(Event::new()), Arc::new(AtomicBool::new(false)));
            let h = sleeper(&e, &go);
            until("the sleeper set no flag", || flag(&e));
            go.store(true, Ordering::SeqCst);
            e.notify_all();
            assert!(!flag(&e), "notify_all left the flag");
            until("the sleeper was not woken", || h.is_finished());
            h.join().unwrap();
        }

        #[test]
        fn notify_one_keeps_the_flag_for_the_sleepers_left() {
            let (e, go) = (Arc::new(Event::new()), Arc::new(AtomicBool::new(false)));
            let a = sleeper(&e, &go);
            let b = sleeper(&e, &go);
            until("no sleeper set the flag", || flag(&e));
            // Give both time to be asleep (either way the checks hold).
            std::thread::sleep(Duration::from_millis(20));
            go.store(true, Ordering::SeqCst);
            e.notify_one();
            assert!(flag(&e), "notify_one cleared the flag");
            until("notify_one woke nobody", || {
                a.is_finished() || b.is_finished()
            });
            e.notify_all();
            until("notify_all left a sleeper", || {
                a.is_finished() && b.is_finished()
            });
            assert!(!flag(&e));
        }

        /// Two threads hand a token back and forth through two events,
        /// each sleeping whenever the token is away: a wake lost between
        /// a flag and a sleep hangs it, and the deadline fails it.
        #[test]
        fn a_ping_pong_of_many_rounds_loses_no_wake() {
            const ROUNDS: u32 = 20_000;
            let ev = Arc::new([Event::new(), Event::new()]);
            let turn = Arc::new(crate::sync::AtomicU32::new(0));
            let player = |me: u32| {
                let (ev, turn) = (ev.clone(), turn.clone());
                std::thread::spawn(move || {
                    for r in 0..ROUNDS {
                        let want = 2 * r + me;
                        loop {
                            let seen = ev[me as usize].value();
                            if turn.load(Ordering::SeqCst) == want {
                                break;
                            }
                            ev[me as usize].wait(seen);
                        }
                        turn.store(want + 1, Ordering::SeqCst);
                        if r % 2 == 0 {
                            ev[1 - me as usize].notify_all();
                        } else {
                            ev[1 - me as usize].notify_one();
                        }
                    }
                })
            };
            let (a, b) = (player(0), player(1));
            until("a wake was lost", || a.is_finished() && b.is_finished());
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(turn.load(Ordering::SeqCst), 2 * ROUNDS);
        }
    }

    /// A futex for the model checker: a mutex makes the check of the word
    /// and the sleep one step against a waker, which changes the word
    /// before it takes the mutex, as the kernel does for a futex.
    #[cfg(loom)]
    mod futex {
        use loom::sync::atomic::AtomicU32;
        use loom::sync::{Condvar, Mutex};
        use std::sync::atomic::Ordering;

        pub(super) struct Park {
            lock: Mutex<()>,
            cv: Condvar,
        }

        impl Park {
            pub(super) fn new() -> Park {
                Park {
                    lock: Mutex::new(()),
                    cv: Condvar::new(),
                }
            }
            pub(super) fn sleep(&self, word: &AtomicU32, expect: u32) {
                let g = self.lock.lock().unwrap();
                if word.load(Ordering::Acquire) == expect {
                    drop(self.cv.wait(g).unwrap());
                }
            }
            pub(super) fn wake(&self, all: bool) {
                let _g = self.lock.lock().unwrap();
                if all {
                    self.cv.notify_all();
                } else {
                    self.cv.notify_one();
                }
            }
        }
    }
}

/// The slot buffer: joiners write disjoint ranges of it at once.
#[cfg(not(loom))]
mod buf {
    use std::cell::UnsafeCell;

    pub(super) struct Buffer {
        bytes: UnsafeCell<Box<[u8]>>,
    }

    // SAFETY: access to `bytes` follows the slot protocol in `GroupLog`:
    // while a slot is installed, each joiner touches only the range its
    // compare-and-swap reserved, disjoint from every other joiner's; the
    // leader reads the slot only after the joiner count of the closed slot
    // fell to zero (acquire, pairing with each joiner's release), and
    // replaces the box (`ensure`) only while the slot is not installed, when
    // no joiner can hold a reservation in it.
    #[allow(unsafe_code)]
    unsafe impl Sync for Buffer {}

    impl Buffer {
        pub(super) fn new(cap: usize) -> Buffer {
            Buffer {
                bytes: UnsafeCell::new(vec![0u8; cap].into_boxed_slice()),
            }
        }

        fn base(&self) -> (*mut u8, usize) {
            // SAFETY: reading the box's pointer and length; the box is only
            // replaced by `ensure`, never while a reservation or the
            // leader's read is in progress (see the `Sync` impl).
            #[allow(unsafe_code)]
            let b = unsafe { &mut *self.bytes.get() };
            (b.as_mut_ptr(), b.len())
        }

        pub(super) fn with_range<T>(
            &self,
            at: usize,
            len: usize,
            f: impl FnOnce(&mut [u8]) -> T,
        ) -> T {
            let (p, cap) = self.base();
            assert!(
                at <= cap && len <= cap - at,
                "range outside the slot buffer"
            );
            // SAFETY: `at..at + len` lies inside the buffer (checked above),
            // and the caller owns that range exclusively: a joiner its
            // reservation, the leader the whole closed slot after its
            // joiners left (see the `Sync` impl).
            #[allow(unsafe_code)]
            let s = unsafe { std::slice::from_raw_parts_mut(p.add(at), len) };
            f(s)
        }

        /// Makes the buffer `want` bytes if it is smaller, or shrinks it
        /// back to `normal` after a big group. Only for a slot that is not
        /// installed.
        pub(super) fn ensure(&self, want: usize, normal: usize) {
            let (_, cap) = self.base();
            if cap < want || (want == normal && cap > 4 * normal) {
                // SAFETY: the slot is not installed, so no other thread
                // reads or writes the buffer (see the `Sync` impl).
                #[allow(unsafe_code)]
                let b = unsafe { &mut *self.bytes.get() };
                *b = vec![0u8; want].into_boxed_slice();
            }
        }
    }
}

/// The slot buffer under loom: one tracked cell per byte, so the model
/// checker reports any two threads touching a byte without ordering.
#[cfg(loom)]
mod buf {
    use loom::cell::UnsafeCell;
    use loom::sync::Mutex;

    pub(super) struct Buffer {
        cells: Mutex<std::sync::Arc<Vec<UnsafeCell<u8>>>>,
    }

    // SAFETY: every access to a cell goes through loom's `with`/`with_mut`,
    // which is what the model checker watches: an access by two threads
    // without ordering fails the model instead of racing.
    #[allow(unsafe_code)]
    unsafe impl Sync for Buffer {}
    #[allow(unsafe_code)]
    unsafe impl Send for Buffer {}

    impl Buffer {
        pub(super) fn new(cap: usize) -> Buffer {
            Buffer {
                cells: Mutex::new(std::sync::Arc::new(
                    (0..cap).map(|_| UnsafeCell::new(0)).collect(),
                )),
            }
        }
        fn cells(&self) -> std::sync::Arc<Vec<UnsafeCell<u8>>> {
            self.cells.lock().unwrap().clone()
        }
        pub(super) fn with_range<T>(
            &self,
            at: usize,
            len: usize,
            f: impl FnOnce(&mut [u8]) -> T,
        ) -> T {
            let c = self.cells();
            #[allow(unsafe_code)]
            let mut v: Vec<u8> = (at..at + len)
                .map(|i| c[i].with(|p| unsafe { *p }))
                .collect();
            let r = f(&mut v);
            for (i, &b) in v.iter().enumerate() {
                #[allow(unsafe_code)]
                c[at + i].with_mut(|p| unsafe { *p = b });
            }
            r
        }
        pub(super) fn ensure(&self, want: usize, _normal: usize) {
            let mut g = self.cells.lock().unwrap();
            if g.len() < want {
                *g = std::sync::Arc::new((0..want).map(|_| UnsafeCell::new(0)).collect());
            }
        }
    }
}

/// Model checks of the slot protocol: `RUSTFLAGS="--cfg loom" cargo test
/// -p tidemark --release --lib wal::group` (see README, opt-in suites).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// The stream as the sink received it.
    struct MemSink {
        bytes: Mutex<Vec<u8>>,
        syncs: AtomicU64,
    }

    impl Sink for MemSink {
        fn write(&self, pos: u64, b: &[u8]) -> Result<()> {
            let mut v = self.bytes.lock().unwrap();
            let end = pos as usize + b.len();
            if v.len() < end {
                v.resize(end, 0);
            }
            v[pos as usize..end].copy_from_slice(b);
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    /// Each thread commits records of 8 bytes filled with its id; with a
    /// 16-byte slot the second commit of a thread may find the slot full.
    /// Every record must land at its reserved position, whole, and be
    /// written (and synced when asked) before its wait returns.
    fn run(threads: u8, per_thread: u8, sync: bool) {
        let mut model = loom::model::Builder::new();
        // Bounding preemptions keeps the search finite; bugs in protocols
        // like this one show up within two or three (loom's guidance).
        model.preemption_bound = Some(3);
        model.check(move || {
            let log = Arc::new(GroupLog::new(0, 16));
            let sink = Arc::new(MemSink {
                bytes: Mutex::new(Vec::new()),
                syncs: AtomicU64::new(0),
            });
            let handles: Vec<_> = (0..threads)
                .map(|id| {
                    let (log, sink) = (log.clone(), sink.clone());
                    loom::thread::spawn(move || {
                        let mut mine = Vec::new();
                        for _ in 0..per_thread {
                            let r = log.reserve(8, &*sink).unwrap();
                            log.with_bytes(&r, |b| b.fill(id + 1));
                            let (pos, end, slot) = (r.pos, r.end(), r.slot());
                            log.release(r, sync);
                            log.wait(end, slot, sync, &*sink).unwrap();
                            assert!(log.written() >= end);
                            if sync {
                                assert!(log.synced() >= end);
                            }
                            mine.push(pos);
                        }
                        mine
                    })
                })
                .collect();
            let mut all = Vec::new();
            for (id, h) in handles.into_iter().enumerate() {
                for pos in h.join().unwrap() {
                    let v = sink.bytes.lock().unwrap();
                    let rec = &v[pos as usize..pos as usize + 8];
                    assert!(rec.iter().all(|&b| b == id as u8 + 1), "record overwritten");
                    all.push(pos);
                }
            }
            all.sort_unstable();
            let want: Vec<u64> = (0..u64::from(threads * per_thread))
                .map(|i| i * 8)
                .collect();
            assert_eq!(all, want, "reservations overlap or leave holes");
        });
    }

    /// The event alone: `waiters` threads sleep on it until a flag is
    /// set; the notifier sets it and makes the given notifies. A lost
    /// wake leaves a thread asleep for ever, which loom reports.
    fn event_model(waiters: usize, notifies: &'static [bool]) {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(move || {
            let e = Arc::new(Event::new());
            let go = Arc::new(AtomicBool::new(false));
            let hs: Vec<_> = (0..waiters)
                .map(|_| {
                    let (e, go) = (e.clone(), go.clone());
                    loom::thread::spawn(move || loop {
                        let seen = e.value();
                        if go.load(Ordering::Acquire) {
                            return;
                        }
                        e.wait(seen);
                    })
                })
                .collect();
            go.store(true, Ordering::Release);
            for &all in notifies {
                if all {
                    e.notify_all();
                } else {
                    e.notify_one();
                }
            }
            for h in hs {
                h.join().unwrap();
            }
        });
    }

    #[test]
    fn event_notify_all_wakes_a_sleeper() {
        event_model(1, &[true]);
    }

    #[test]
    fn event_notify_one_wakes_a_sleeper() {
        event_model(1, &[false]);
    }

    #[test]
    fn event_notify_one_then_all_wakes_two_sleepers() {
        event_model(2, &[false, true]);
    }

    #[test]
    fn event_two_notify_ones_wake_two_sleepers() {
        event_model(2, &[false, false]);
    }

    #[test]
    fn two_writers_two_commits_each() {
        run(2, 2, false);
    }

    #[test]
    fn two_writers_with_fsync() {
        run(2, 1, true);
    }
}

/// Stress tests of the protocol on real threads: more committers than
/// cores, every durability mixed, a sink slow enough for groups to form,
/// and a sink that fails. A lost wake shows up as a hang, which the
/// watchdog turns into a failure.
#[cfg(all(test, not(loom)))]
mod stress_tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    /// The stream as written, the synced length, and a sync that takes a
    /// while and fails from the `fail_at`-th call on.
    struct SlowSink {
        bytes: std::sync::Mutex<Vec<u8>>,
        written: AtomicU64,
        synced: AtomicU64,
        syncs: AtomicU64,
        fail_at: u64,
    }

    impl Sink for SlowSink {
        fn write(&self, pos: u64, b: &[u8]) -> Result<()> {
            let mut v = self.bytes.lock().unwrap();
            let end = pos as usize + b.len();
            assert_eq!(v.len(), pos as usize, "groups written out of order");
            v.extend_from_slice(b);
            self.written.store(end as u64, Ordering::SeqCst);
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            let n = self.syncs.fetch_add(1, Ordering::SeqCst) + 1;
            std::thread::sleep(Duration::from_micros(50));
            if n >= self.fail_at {
                return Err(Error::Io(std::io::Error::other("injected fsync failure")));
            }
            self.synced
                .store(self.written.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(())
        }
    }

    /// Per thread, per commit: its stream position and how its wait ended.
    type Outcomes = Vec<Vec<(u64, Result<()>)>>;

    /// `threads` committers, `per` commits each, durability by turns;
    /// returns the sink and each commit's outcome.
    fn run(threads: u64, per: u64, fail_at: u64) -> (Arc<GroupLog>, Arc<SlowSink>, Outcomes) {
        let log = Arc::new(GroupLog::new(0, 4096));
        let sink = Arc::new(SlowSink {
            bytes: std::sync::Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            fail_at,
        });
        let (tx, rx) = mpsc::channel();
        for id in 0..threads {
            let (log, sink, tx) = (log.clone(), sink.clone(), tx.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for i in 0..per {
                    // 8 or 16 bytes filled with the thread's id + 1.
                    let len = 8 * (1 + (id + i) % 2);
                    let r = match log.reserve(len, &*sink) {
                        Ok(r) => r,
                        Err(e) => {
                            out.push((u64::MAX, Err(e)));
                            break;
                        }
                    };
                    log.with_bytes(&r, |b| b.fill(id as u8 + 1));
                    let (pos, end, slot) = (r.pos, r.end(), r.slot());
                    let mode = (id + i) % 3; // 0 none, 1 write, 2 fsync
                    log.release(r, mode == 2);
                    let res = match mode {
                        0 => Ok(()),
                        m => log.wait(end, slot, m == 2, &*sink),
                    };
                    if res.is_ok() && mode == 1 {
                        assert!(sink.written.load(Ordering::SeqCst) >= end);
                    }
                    if res.is_ok() && mode == 2 {
                        assert!(sink.synced.load(Ordering::SeqCst) >= end);
                    }
                    let failed = res.is_err();
                    out.push((pos, res));
                    if failed {
                        break;
                    }
                }
                tx.send((id, out)).unwrap();
            });
        }
        drop(tx);
        let mut all: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
        for _ in 0..threads {
            // A committer that never returns is a lost wake.
            let (id, out) = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("a committer hung: a wake was lost");
            all[id as usize] = out;
        }
        (log, sink, all)
    }

    #[test]
    fn many_committers_every_durability_all_records_land_whole() {
        let (threads, per) = (48, 400);
        let (_, sink, all) = run(threads, per, u64::MAX);
        let v = sink.bytes.lock().unwrap();
        let mut spans = Vec::new();
        for (id, outs) in all.iter().enumerate() {
            assert_eq!(outs.len() as u64, per);
            for (i, (pos, res)) in outs.iter().enumerate() {
                assert!(res.is_ok(), "{res:?}");
                let len = 8 * (1 + (id as u64 + i as u64) % 2);
                spans.push((*pos, len));
                // Records of mode `none` at the very end may be unwritten.
                if pos + len <= v.len() as u64 {
                    let rec = &v[*pos as usize..(pos + len) as usize];
                    assert!(rec.iter().all(|&b| b == id as u8 + 1), "record damaged");
                }
            }
        }
        // The reservations tile the stream from 0 with no overlap or hole,
        // and what was written is a prefix of them.
        spans.sort_unstable();
        let mut at = 0;
        for &(pos, len) in &spans {
            assert_eq!(pos, at, "reservations overlap or leave a hole");
            at += len;
        }
        assert!(v.len() as u64 <= at);
        assert!(sink.syncs.load(Ordering::SeqCst) > 0);
    }

    /// A sink whose writes block until the test opens it.
    #[derive(Default)]
    struct GateSink {
        open: std::sync::Mutex<bool>,
        cv: std::sync::Condvar,
        entered: AtomicU64,
        written: AtomicU64,
    }

    impl GateSink {
        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.cv.notify_all();
        }
        fn wait_entered(&self) {
            while self.entered.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    impl Sink for GateSink {
        fn write(&self, pos: u64, b: &[u8]) -> Result<()> {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
            self.written
                .fetch_max(pos + b.len() as u64, Ordering::SeqCst);
            Ok(())
        }
        fn sync(&self) -> Result<()> {
            Ok(())
        }
    }

    /// The log, the sink, the leader's wait and the member's, running.
    type HeldWrite = (
        Arc<GroupLog>,
        Arc<GateSink>,
        std::thread::JoinHandle<Result<()>>,
        std::thread::JoinHandle<Result<()>>,
    );

    /// Two committers in one group, durability `Write`: the second to wait
    /// finds the first leading (its write held at the gate) and is a
    /// member.
    fn member_behind_a_held_write(spin: Duration) -> HeldWrite {
        let mut log = GroupLog::new(0, 4096);
        log.write_spin = spin;
        let (log, sink) = (Arc::new(log), Arc::new(GateSink::default()));
        let join = |log: &GroupLog| {
            let r = log.reserve(8, &GateSink::default()).unwrap();
            let (end, slot) = (r.end(), r.slot());
            log.release(r, false);
            (end, slot)
        };
        let member = join(&log);
        let leader = join(&log);
        let (l, s) = (log.clone(), sink.clone());
        let lead = std::thread::spawn(move || l.wait(leader.0, leader.1, false, &*s));
        sink.wait_entered();
        let (l, s) = (log.clone(), sink.clone());
        let wait = std::thread::spawn(move || l.wait(member.0, member.1, false, &*s));
        (log, sink, lead, wait)
    }

    /// Lets the held write go; both waits must end well, with both
    /// records written and the spin token given back.
    fn open_and_finish(
        log: &GroupLog,
        sink: &GateSink,
        lead: std::thread::JoinHandle<Result<()>>,
        wait: std::thread::JoinHandle<Result<()>>,
    ) {
        sink.open();
        assert!(wait.join().unwrap().is_ok());
        assert!(lead.join().unwrap().is_ok());
        assert_eq!(sink.written.load(Ordering::SeqCst), 16);
        assert!(
            !log.spinner.load(Ordering::SeqCst),
            "the spin token was kept"
        );
    }

    #[test]
    fn a_member_waiting_for_its_groups_write_spins_and_sees_it_done() {
        let (log, sink, lead, wait) = member_behind_a_held_write(Duration::from_secs(30));
        let t0 = std::time::Instant::now();
        while !log.spinner.load(Ordering::SeqCst) {
            assert!(t0.elapsed() < Duration::from_secs(10), "no member spun");
            std::thread::yield_now();
        }
        open_and_finish(&log, &sink, lead, wait);
        let c = &log.counters;
        assert_eq!(c.write_spins_done.load(Ordering::SeqCst), 1);
        assert_eq!(c.write_spins_given_up.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_member_whose_spin_runs_out_sleeps_and_is_woken_by_the_write() {
        let (log, sink, lead, wait) = member_behind_a_held_write(WRITE_SPIN);
        let c = &log.counters;
        let t0 = std::time::Instant::now();
        while c.write_spins_given_up.load(Ordering::SeqCst) == 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no spin ran out");
            std::thread::sleep(Duration::from_micros(100));
        }
        // The member is asleep now (or about to be): only the leader's
        // wake can end its wait.
        std::thread::sleep(Duration::from_millis(20));
        assert!(!wait.is_finished(), "the member returned before its write");
        open_and_finish(&log, &sink, lead, wait);
    }

    #[test]
    fn a_failed_fsync_wakes_every_waiter_with_an_error() {
        let (log, sink, all) = run(32, 400, 20);
        let failures = all
            .iter()
            .filter(|outs| matches!(outs.last(), Some((_, Err(_)))))
            .count();
        // Every thread ends: those that reached the failure saw an error
        // (none hung).
        assert!(failures > 0);
        // Once failed, the log accepts nothing more: a new commit is
        // refused at its reservation or at its wait, whatever it asks.
        for sync in [false, true] {
            let refused = match log.reserve(8, &*sink) {
                Err(e) => matches!(e, Error::WritesStopped(_)),
                Ok(r) => {
                    let (end, slot) = (r.end(), r.slot());
                    log.release(r, sync);
                    matches!(
                        log.wait(end, slot, sync, &*sink),
                        Err(Error::WritesStopped(_))
                    )
                }
            };
            assert!(refused, "the log took a commit after a failed fsync");
        }
    }
}
