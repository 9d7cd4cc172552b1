//! Choosing and evicting victims (CLOCK), and the background workers.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{BufferPool, FrameData, FrameState};
use crate::error::Result;
use crate::pagemap::NO_FRAME;
use crate::pager::{Pager, Pending};

/// Frames an application thread examines when it helps above a trigger:
/// bounded work per operation, whatever the cache size.
pub(crate) const APP_EXAMINE_MAX: usize = 64;
/// Frames [`clean_one`] examines past the first (referenced) dirty page
/// it finds, looking for one not referenced.
const CLEAN_PATIENCE: usize = 32;
/// How long an idle worker sleeps before rechecking on its own.
const WORKER_IDLE: Duration = Duration::from_millis(50);

/// Runs the CLOCK hand over at most `max_examine` frames and evicts the
/// first page that is neither referenced nor latched (only dirty ones when
/// `dirty_only`). Returns the emptied frame, still counted as used and not
/// on the free list: the caller takes it or releases it.
pub(crate) fn evict_one(
    pool: &BufferPool,
    pager: &Pager,
    dirty_only: bool,
    max_examine: usize,
) -> Result<Option<u32>> {
    let n = pool.frames.len();
    for _ in 0..max_examine {
        let i = pool.hand.fetch_add(1, Ordering::Relaxed) % n;
        let frame = &pool.frames[i];
        // Read first: most frames are not referenced, and a plain load
        // leaves their cache line shared with the readers.
        if frame.referenced.load(Ordering::Relaxed) {
            frame.referenced.store(false, Ordering::Relaxed);
            pool.counters.examined.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let Some(mut g) = frame.latch.try_write() else {
            pool.counters.examined.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if g.state != FrameState::Page {
            continue;
        }
        pool.counters.examined.fetch_add(1, Ordering::Relaxed);
        if dirty_only && !g.dirty {
            continue;
        }
        if g.dirty {
            if let Err(e) = write_out(pool, pager, &mut g) {
                pool.counters
                    .eviction_errors
                    .fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
            pool.counters.evicted_dirty.fetch_add(1, Ordering::Relaxed);
        } else {
            pool.counters.evicted_clean.fetch_add(1, Ordering::Relaxed);
        }
        pager.map.set_frame(g.pid, NO_FRAME);
        g.state = FrameState::Free;
        g.pid = 0;
        return Ok(Some(i as u32));
    }
    Ok(None)
}

/// Writes back one dirty page and leaves it cached, clean: what bringing
/// the dirty pages under their target or trigger needs, without making the
/// next access to a hot page read it back. Runs its own hand over at most
/// `max_examine` frames and prefers a page not referenced since the hand
/// last passed (leaving the bit for eviction to use); if every dirty page
/// it met was referenced, it takes the first of them. Returns whether a
/// page was written.
pub(crate) fn clean_one(pool: &BufferPool, pager: &Pager, max_examine: usize) -> Result<bool> {
    let n = pool.frames.len();
    let mut fallback = None;
    // Once a referenced dirty page is in hand, look only this much further
    // for a better one: on a cached table whose pages are all hot, a search
    // of every frame for each write-back would cost more than the write.
    let mut patience = CLEAN_PATIENCE;
    for _ in 0..max_examine {
        if fallback.is_some() {
            if patience == 0 {
                break;
            }
            patience -= 1;
        }
        let i = pool.clean_hand.fetch_add(1, Ordering::Relaxed) % n;
        let frame = &pool.frames[i];
        let referenced = frame.referenced.load(Ordering::Relaxed);
        if referenced && fallback.is_some() {
            continue;
        }
        let Some(mut g) = frame.latch.try_write() else {
            continue;
        };
        if g.state != FrameState::Page || !g.dirty {
            continue;
        }
        if referenced {
            fallback = Some(i);
            continue;
        }
        return write_back(pool, pager, &mut g).map(|()| true);
    }
    let Some(i) = fallback else {
        return Ok(false);
    };
    match pool.frames[i].latch.try_write() {
        Some(mut g) if g.state == FrameState::Page && g.dirty => {
            write_back(pool, pager, &mut g).map(|()| true)
        }
        _ => Ok(false),
    }
}

/// Writes out the dirty page latched by `g` and counts it as cleaned.
fn write_back(pool: &BufferPool, pager: &Pager, g: &mut FrameData) -> Result<()> {
    if let Err(e) = write_out(pool, pager, g) {
        pool.counters
            .eviction_errors
            .fetch_add(1, Ordering::Relaxed);
        return Err(e);
    }
    pool.counters.cleaned.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Writes a dirty page to a new block and maps it there (copy-on-write:
/// the block it came from is never overwritten). If the page still holds
/// content owed to the running checkpoint, the checkpoint adopts this block.
pub(crate) fn write_out(pool: &BufferPool, pager: &Pager, g: &mut FrameData) -> Result<()> {
    debug_assert!(g.dirty && g.state == FrameState::Page);
    let b = pager.write_new_block(&mut g.buf, true)?;
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
    g.dirty = false;
    pool.dirty.fetch_sub(1, Ordering::AcqRel);
    Ok(())
}

/// Body of a background eviction worker: keeps usage under
/// `eviction_target` and dirty pages under `eviction_dirty_target`.
pub(crate) fn run_eviction_worker(pool: &BufferPool, pager: &Pager) {
    while !pool.shutdown.load(Ordering::Acquire) {
        let used = pool.used.load(Ordering::Relaxed);
        let dirty = pool.dirty.load(Ordering::Relaxed);
        let over_used = used > pool.cfg.target;
        if !over_used && dirty <= pool.cfg.dirty_target {
            let mut w = pool.wake.lock();
            if !*w {
                pool.wake_cv.wait_for(&mut w, WORKER_IDLE);
            }
            *w = false;
            continue;
        }
        if !over_used && used <= pool.cfg.clean_limit() {
            // Only the dirty pages are over their target, and the cache
            // has room: write one back and keep it cached.
            match clean_one(pool, pager, pool.frames.len()) {
                Ok(true) => {}
                Ok(false) => std::thread::yield_now(),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            continue;
        }
        match evict_one(pool, pager, !over_used, pool.frames.len()) {
            Ok(Some(fi)) => {
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
            }
            Ok(None) => std::thread::yield_now(),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}
