//! Choosing and evicting victims (CLOCK), and the background workers.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{BufferPool, Cleaned, Content, FrameData, FrameState};
use crate::error::Result;
use crate::pagemap::NO_FRAME;
use crate::pager::{Pager, Pending};
use crate::sync::RwLockWriteGuard;

/// Frames an application thread examines when it helps above a trigger:
/// bounded work per operation, whatever the cache size.
pub(crate) const APP_EXAMINE_MAX: usize = 64;
/// How long an idle worker sleeps before rechecking on its own.
const WORKER_IDLE: Duration = Duration::from_millis(50);
/// While usage is at or under [`paced_usage_limit`], a page is not
/// cleaned again within this long of being cleaned, nor before the next
/// checkpoint cut (see [`reduce_dirty`]).
pub(crate) const RECLEAN_GAP: Duration = Duration::from_secs(1);
/// How long the worker first waits when every dirty page it found was
/// cleaned within [`RECLEAN_GAP`] or in the current epoch. Each further lap
/// that finds the same doubles the wait, up to [`PACED_WAIT_MAX`]; a lap
/// that cleans or evicts a page starts again from here.
const PACED_WAIT: Duration = Duration::from_millis(10);
/// The longest wait between laps that find every dirty page hot: pages
/// held back by [`RECLEAN_GAP`] alone become eligible within it, and a
/// checkpoint's cut (which makes the others eligible) wakes the workers.
/// With a fixed 10 ms wait, the worker lapped every frame of the cache a
/// hundred times a second for as long as such pages stayed dirty: written
/// once after their cleaning and then left alone, they stay so until the
/// next cut. That was 10-13 % of a core in an idle 4 GiB cache holding
/// 2.3 GB of them; with the backoff, under 0.3 %.
const PACED_WAIT_MAX: Duration = RECLEAN_GAP;

/// Frames in use above which the worker cleans without [`RECLEAN_GAP`]:
/// seven eighths of `eviction_target`. Near the target the cache does not
/// hold the working set, pages are being evicted anyway, and a worker that
/// let hot pages stay dirty would spend its time walking past clean pages
/// to find dirty ones to evict (measured in cache-pressure: 5-6 frames
/// examined per eviction instead of 2.8).
pub(crate) fn paced_usage_limit(pool: &BufferPool) -> usize {
    pool.cfg.target / 8 * 7
}

/// One step of the worker for the dirty target (usage is under its own
/// target): cleans or evicts one dirty page, paced while usage is at or
/// under [`paced_usage_limit`]. Records in `pool.dirty_hot` whether a
/// paced step found every dirty page cleaned within [`RECLEAN_GAP`] or in
/// the current checkpoint epoch.
pub(crate) fn clean_step(pool: &BufferPool, pager: &Pager, used: usize) -> Result<Relief> {
    let paced = (used <= paced_usage_limit(pool)).then(Instant::now);
    let r = reduce_dirty(pool, pager, pool.clock_span(), paced);
    let hot = paced.is_some() && matches!(r, Ok(Relief::Nothing));
    if pool.dirty_hot.load(Ordering::Relaxed) != hot {
        pool.dirty_hot.store(hot, Ordering::Relaxed);
    }
    r
}

/// Runs the CLOCK hand over at most `max_examine` frames and evicts the
/// first page that is neither referenced nor latched. Returns the emptied frame, still counted as used and not
/// on the free list: the caller takes it or releases it.
pub(crate) fn evict_one(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
) -> Result<Option<u32>> {
    evict_counted(pool, pager, max_examine, false)
}

/// [`evict_one`] for the background worker: the victim's page (written
/// first if dirty) goes to standby, its frame free on the queue with the
/// page still readable (see the module's comment), instead of being
/// emptied for the caller. Whether a page was found.
pub(crate) fn evict_to_standby(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
) -> Result<bool> {
    evict_counted(pool, pager, max_examine, true).map(|fi| fi.is_some())
}

/// [`evict_one_counting`], adding the frames examined to the shared
/// counter once per call ([`counting_examined`]).
fn evict_counted(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
    standby: bool,
) -> Result<Option<u32>> {
    counting_examined(pool, |examined| {
        evict_one_counting(pool, pager, max_examine, standby, examined)
    })
}

/// Runs `sweep` with a local count of the frames it examines, added to
/// the shared counter once at the end: that counter's cache line is
/// written by every thread that evicts, so not once per frame.
fn counting_examined<T>(pool: &BufferPool, sweep: impl FnOnce(&mut u64) -> T) -> T {
    let mut examined = 0;
    let r = sweep(&mut examined);
    pool.counters
        .examined
        .fetch_add(examined, Ordering::Relaxed);
    r
}

/// [`evict_one`], or with `standby` [`evict_to_standby`] (the frame
/// returned is then already free), counting the frames examined in
/// `examined`.
fn evict_one_counting(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
    standby: bool,
    examined: &mut u64,
) -> Result<Option<u32>> {
    for i in Sweep::new(pool, max_examine, 1) {
        let frame = &pool.frames[i];
        // Read first: most frames are not referenced, and a plain load
        // leaves their cache line shared with the readers.
        if frame.referenced.load(Ordering::Relaxed) {
            frame.referenced.store(false, Ordering::Relaxed);
            *examined += 1;
            continue;
        }
        if frame.content() == Content::Empty {
            continue;
        }
        let Some(mut g) = try_page(pool, i, examined) else {
            continue;
        };
        if g.dirty {
            write_counted(pool, pager, i as u32, &mut g)?;
            pool.counters.evicted_dirty.fetch_add(1, Ordering::Relaxed);
        } else {
            pool.counters.evicted_clean.fetch_add(1, Ordering::Relaxed);
        }
        if standby {
            pool.stand_by(i as u32, g);
        } else {
            vacate(pool, pager, i as u32, &mut g);
        }
        return Ok(Some(i as u32));
    }
    Ok(None)
}

/// What [`reduce_dirty`] did.
pub(crate) enum Relief {
    /// A dirty page was written and evicted; the frame is still counted as
    /// used and not on the free list: the caller takes it or releases it.
    Evicted(u32),
    /// A dirty page was written and stays cached, clean.
    Cleaned,
    /// No dirty page was found in the frames examined.
    Nothing,
}

/// Brings the dirty pages down by one, for the dirty target or trigger.
/// Runs the CLOCK hand over at most `max_examine` frames: a dirty page
/// referenced since the hand last passed (touched again while cached)
/// loses its second chance as usual but is *cleaned*: written to a new
/// block exactly as eviction would write it, and kept cached at that
/// block, so a hot page is not read back after every write. A dirty page
/// not referenced since is evicted (written first), as a page touched once
/// is likely done with, unless `paced`: in a cache with room (usage at or
/// under [`paced_usage_limit`]) it is cleaned and kept too, since evicting
/// it frees a frame nobody needs and only makes its next use a read (a
/// random-insert load of a table a 1 GiB cache holds read back 84,000
/// leaves and wrote 2.6 times the bytes; usage eviction still takes such
/// pages, clean and cheap, once the cache nears its target). Clean pages
/// are passed over.
///
/// With `paced` (the time now), a referenced page cleaned less than
/// [`RECLEAN_GAP`] ago, or cleaned since the last checkpoint cut (in the
/// current epoch), is passed over too: a page written again after being
/// cleaned is dirty again at once, and cleaning it over and over lowers
/// neither the dirty pages nor the next checkpoint's work (the checkpoint
/// writes a page dirty at its cut once, however often it was cleaned
/// before); it only spends a core and the disk's bandwidth (a cached
/// table written at random is re-dirtied as fast as one worker can clean
/// it). Once a second was not enough: a 628 MB table of 4,000-byte
/// values in a 1 GiB cache, every leaf updated about once a second, was
/// still cleaned about 30,000 pages a second, and each checkpoint then
/// had to sync the gigabytes the cleaner had written since the last one
/// (4.3-7.9 s each after the first, against 1.1-2.1 s once a page is
/// cleaned at most once an epoch; BENCHMARKS.md, "versus checkpoint").
pub(crate) fn reduce_dirty(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
    paced: Option<Instant>,
) -> Result<Relief> {
    counting_examined(pool, |examined| {
        reduce_dirty_counting(pool, pager, max_examine, paced, examined)
    })
}

/// [`reduce_dirty`], counting the frames examined in `examined`.
fn reduce_dirty_counting(
    pool: &BufferPool,
    pager: &Pager,
    max_examine: usize,
    paced: Option<Instant>,
    examined: &mut u64,
) -> Result<Relief> {
    // Read once a sweep: a cut during the sweep only leaves a page cleaned
    // after it stamped with the epoch before, which lets it be cleaned
    // again one epoch early, never later.
    let epoch = pager.epoch.load(Ordering::Acquire);
    for i in Sweep::new(pool, max_examine, SWEEP_BATCH) {
        let frame = &pool.frames[i];
        let referenced = frame.referenced.load(Ordering::Relaxed);
        let content = frame.content();
        if content != Content::Dirty {
            // Nothing to write: the hand ages the frame and goes on
            // without its latch. Most frames are clean when the dirty
            // pages are a twentieth of the cache, and latching each one
            // made this sweep a tenth of a random-insert load's CPU.
            if content == Content::Clean {
                *examined += 1;
            }
            if referenced {
                frame.referenced.store(false, Ordering::Relaxed);
            }
            continue;
        }
        let Some(mut g) = try_page(pool, i, examined) else {
            if referenced {
                frame.referenced.store(false, Ordering::Relaxed);
            }
            continue;
        };
        if referenced && g.dirty {
            if let (Some(now), Some(c)) = (paced, g.cleaned) {
                if c.pid == g.pid
                    && (c.epoch == epoch || now.saturating_duration_since(c.at) < RECLEAN_GAP)
                {
                    // Passed over, not a pass of the hand: it keeps its
                    // reference bit, so a hot page is not evicted for
                    // being skipped.
                    continue;
                }
            }
        }
        if referenced {
            frame.referenced.store(false, Ordering::Relaxed);
        }
        if !g.dirty {
            continue;
        }
        write_counted(pool, pager, i as u32, &mut g)?;
        if referenced || paced.is_some() {
            g.cleaned = Some(Cleaned {
                pid: g.pid,
                at: paced.unwrap_or_else(Instant::now),
                epoch,
            });
            pool.counters.cleaned.fetch_add(1, Ordering::Relaxed);
            return Ok(Relief::Cleaned);
        }
        pool.counters.evicted_dirty.fetch_add(1, Ordering::Relaxed);
        vacate(pool, pager, i as u32, &mut g);
        return Ok(Relief::Evicted(i as u32));
    }
    Ok(Relief::Nothing)
}

/// Frames the sweep for dirty pages takes from the shared CLOCK hand at a
/// time. The worker and application threads over the dirty trigger sweep
/// at once, and one atomic add per frame on the hand's cache line, moving
/// between the cores, was half of the sweep's time in a random-insert
/// load. Positions a sweep claimed but did not reach are kept for the
/// thread's next sweep of the same pool ([`CLAIMED`]), so every position
/// the hand passes is still visited, in order: a sweep that dropped them
/// left those frames unaged, and in cache-pressure eviction then examined
/// 8.4 frames per page evicted instead of 2.8.
const SWEEP_BATCH: usize = 16;

thread_local! {
    /// Hand positions this thread claimed and has not visited: the pool
    /// (its address), the next position and how many follow it.
    static CLAIMED: std::cell::Cell<(usize, usize, usize)> =
        const { std::cell::Cell::new((0, 0, 0)) };
}

/// The frames one sweep visits: up to `max_examine` positions of the
/// CLOCK hand over `0..clock_span()`, claimed from the shared hand `batch`
/// at a time (with `batch` over 1, first those the thread claimed before
/// and did not reach).
struct Sweep<'a> {
    pool: &'a BufferPool,
    span: usize,
    batch: usize,
    /// Positions this sweep may still visit.
    left: usize,
    /// The next claimed position, and how many claimed ones remain.
    next: usize,
    in_batch: usize,
}

impl<'a> Sweep<'a> {
    fn new(pool: &'a BufferPool, max_examine: usize, batch: usize) -> Self {
        let span = pool.clock_span();
        // A sweep one frame at a time (eviction) leaves the claim alone
        // for the next batched sweep.
        let claimed = if batch > 1 {
            CLAIMED.with(|c| c.replace((0, 0, 0)))
        } else {
            (0, 0, 0)
        };
        let (next, in_batch) = match claimed {
            // The span only grows, so positions claimed under it are
            // frames still; the check guards a pool dropped and another
            // allocated at its address.
            (at, next, n) if at == pool_id(pool) && next < span => (next, n),
            _ => (0, 0),
        };
        Sweep {
            pool,
            span,
            batch: batch.max(1),
            left: max_examine,
            next,
            in_batch,
        }
    }
}

/// Tells pools apart in [`CLAIMED`] (a reference is never null, so 0 is
/// no pool).
fn pool_id(pool: &BufferPool) -> usize {
    std::ptr::from_ref(pool) as usize
}

impl Iterator for Sweep<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        if self.in_batch == 0 {
            let b = self.left.min(self.batch);
            self.in_batch = b;
            self.next = self.pool.hand.fetch_add(b, Ordering::Relaxed) % self.span;
        }
        let i = self.next;
        self.left -= 1;
        self.in_batch -= 1;
        self.next = if i + 1 == self.span { 0 } else { i + 1 };
        Some(i)
    }
}

impl Drop for Sweep<'_> {
    fn drop(&mut self) {
        if self.batch > 1 && self.in_batch > 0 {
            let kept = (pool_id(self.pool), self.next, self.in_batch);
            CLAIMED.with(|c| c.set(kept));
        }
    }
}

/// Latches frame `i` without waiting and returns it if it holds a page.
/// Counts it in `examined` if it holds a page or could not be latched.
fn try_page<'a>(
    pool: &'a BufferPool,
    i: usize,
    examined: &mut u64,
) -> Option<RwLockWriteGuard<'a, FrameData>> {
    let Some(g) = pool.frames[i].latch.try_write() else {
        *examined += 1;
        return None;
    };
    if g.state != FrameState::Page {
        return None;
    }
    *examined += 1;
    Some(g)
}

/// [`write_out`], counting a failure in `eviction_errors`.
fn write_counted(pool: &BufferPool, pager: &Pager, fi: u32, g: &mut FrameData) -> Result<()> {
    write_out(pool, pager, fi, g).inspect_err(|_| {
        pool.counters
            .eviction_errors
            .fetch_add(1, Ordering::Relaxed);
    })
}

/// Unmaps the page latched in `g` (frame `fi`) and marks the frame free
/// (it stays counted as used until the caller takes or releases it).
fn vacate(pool: &BufferPool, pager: &Pager, fi: u32, g: &mut FrameData) {
    pager.map.set_frame(g.pid, NO_FRAME);
    g.state = FrameState::Held;
    g.pid = 0;
    pool.frames[fi as usize].set_content(Content::Empty);
}

/// Writes a dirty page out and maps it there: over its own block if that
/// block is fresh (no checkpoint references it, [`Pager::rewrite_fresh`]),
/// else to a new block (copy-on-write: a block a checkpoint references is
/// never overwritten). If the page still holds content owed to the running
/// checkpoint, the checkpoint adopts the block written. `g` is frame `fi`,
/// latched exclusively.
pub(crate) fn write_out(
    pool: &BufferPool,
    pager: &Pager,
    fi: u32,
    g: &mut FrameData,
) -> Result<()> {
    debug_assert!(g.dirty && g.state == FrameState::Page);
    let own = pager.map.block(g.pid);
    let b = if pager.rewrite_fresh(&mut g.buf, own)? {
        own
    } else {
        pager.write_new_block(&mut g.buf, true)?
    };
    let mut st = pager.state.lock();
    let owed = g.dirty_epoch < st.epoch;
    if owed {
        pager.alloc.unfresh(b);
        if let Some(r) = st.running.as_mut() {
            r.pending.insert(g.pid, Pending::Written(b));
        }
    }
    pager.set_mapping_locked(&mut st, g.pid, b, owed);
    drop(st);
    pool.mark_clean(fi, g);
    Ok(())
}

/// Body of a background eviction worker: keeps usage under
/// `eviction_target` and dirty pages under `eviction_dirty_target`.
pub(crate) fn run_eviction_worker(pool: &BufferPool, pager: &Pager) {
    let mut paced_wait = PACED_WAIT;
    while !pool.shutdown.load(Ordering::Acquire) {
        let used = pool.used.load(Ordering::Relaxed);
        let dirty = pool.dirty.load(Ordering::Relaxed);
        let over_used = used > pool.cfg.target;
        if !over_used && dirty <= pool.cfg.dirty_target {
            paced_wait = PACED_WAIT;
            pool.sleep_until_woken(WORKER_IDLE);
            continue;
        }
        if !over_used {
            // Only the dirty pages are over their target. In a cache that
            // holds its working set with room to spare, each hot page is
            // cleaned at most once per RECLEAN_GAP and once per checkpoint
            // epoch, at every level of dirty pages: one written again after
            // its cleaning is dirty again at once, and is left for the
            // checkpoint.
            match clean_step(pool, pager, used) {
                Ok(Relief::Evicted(fi)) => {
                    let g = pool.frames[fi as usize].latch.write();
                    pool.release_frame(fi, g);
                    paced_wait = PACED_WAIT;
                }
                Ok(Relief::Cleaned) => paced_wait = PACED_WAIT,
                Ok(Relief::Nothing) if pool.dirty_hot.load(Ordering::Relaxed) => {
                    // Every dirty page seen was cleaned just now: wait,
                    // longer after each such lap (a checkpoint's cut, or an
                    // application thread over a trigger with the cache
                    // near its target, wakes us).
                    pool.sleep_until_woken(paced_wait);
                    paced_wait = (paced_wait * 2).min(PACED_WAIT_MAX);
                }
                Ok(Relief::Nothing) => std::thread::yield_now(),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            continue;
        }
        paced_wait = PACED_WAIT;
        match evict_to_standby(pool, pager, pool.clock_span()) {
            Ok(true) => {}
            Ok(false) => std::thread::yield_now(),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::testkit::setup;
    use super::*;

    /// A batched sweep claims positions from the hand 16 at a time and a
    /// later one on the same thread starts where it stopped, so no
    /// position is skipped; an eviction sweep between them takes one
    /// position at a time and leaves the claim alone; a claim on another
    /// pool is not used.
    #[test]
    fn sweeps_visit_every_position_they_claimed_in_order() {
        let (pool, _pager) = setup(64);
        while pool.clock_span() < 40 {
            pool.take_free(&_pager, crate::cache::Take::Spaced)
                .expect("64 frames");
        }
        pool.hand.store(0, Ordering::SeqCst);
        // Stops after 5, as a sweep does at a dirty page.
        let first: Vec<usize> = Sweep::new(&pool, 64, SWEEP_BATCH).take(5).collect();
        assert_eq!(first, (0..5).collect::<Vec<_>>());
        assert_eq!(pool.hand.load(Ordering::SeqCst), 16);
        let one: Vec<usize> = Sweep::new(&pool, 2, 1).collect();
        assert_eq!(one, [16, 17]);
        let second: Vec<usize> = Sweep::new(&pool, 20, SWEEP_BATCH).collect();
        // 5..16 from the first claim, then 9 of a new one at 18.
        let want: Vec<usize> = (5..16).chain(18..27).collect();
        assert_eq!(second, want);
        assert_eq!(pool.hand.load(Ordering::SeqCst), 27);
        // Wrapping at the span: positions 34..40, then 0..
        let (other, _) = setup(64);
        pool.hand.store(34, Ordering::SeqCst);
        let _ = Sweep::new(&other, 64, SWEEP_BATCH).take(1).count();
        let wrapped: Vec<usize> = Sweep::new(&pool, 10, SWEEP_BATCH).collect();
        assert_eq!(wrapped, [34, 35, 36, 37, 38, 39, 0, 1, 2, 3]);
    }
}
