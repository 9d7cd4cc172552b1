//! The buffer pool: a fixed set of page frames, read and written with
//! `pread`/`pwrite` through the pager. Nothing is memory mapped.
//!
//! * **Bounded memory.** There are exactly `cache_size / PAGE_SIZE` frames;
//!   a frame's buffer is allocated the first time it is used and never
//!   freed. Pages, and the shadow copies a checkpoint needs, live only in
//!   frames, so page memory never exceeds `cache_size`.
//! * **Latches.** Each frame has a reader-writer latch; holding it pins the
//!   page. Tree code couples latches top-down; eviction only ever
//!   *tries* a latch, so it never waits on, or deadlocks with, a reader,
//!   a writer or a checkpoint.
//! * **Victim choice.** CLOCK over the frames: the hand visits each frame
//!   once per sweep; a referenced page gets a second chance, a latched
//!   one is skipped without waiting. A page is marked referenced when it is
//!   found already cached, not when it is loaded, so pages touched once
//!   (the random-insert workload) are evicted on first visit. Work per
//!   victim is bounded by the sweep, never by the size of the tree.
//! * **Thresholds** (percent of the frames): background workers keep usage
//!   below `eviction_target` and dirty pages below `eviction_dirty_target`;
//!   above `eviction_trigger` / `eviction_dirty_trigger` an application
//!   thread evicts one page (bounded work) before its operation goes on.

mod evict;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_queue::ArrayQueue;
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};
use crate::page::{PageKind, PAGE_SIZE};
use crate::pagemap::NO_FRAME;
use crate::pager::{Pager, Pending};

pub(crate) use evict::run_eviction_worker;

/// Smallest cache, in frames: enough for a few threads each holding a
/// root-to-leaf path (4-5 latches) plus split pages, with room to evict.
pub(crate) const MIN_FRAMES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameState {
    Free,
    Page,
    Shadow,
}

pub(crate) struct FrameData {
    pub(crate) state: FrameState,
    pub(crate) pid: u64,
    pub(crate) dirty: bool,
    /// Epoch in which the current unsaved changes began.
    pub(crate) dirty_epoch: u64,
    /// Bumped on every modification.
    pub(crate) modcount: u64,
    pub(crate) buf: Vec<u8>,
}

pub(crate) struct Frame {
    pub(crate) latch: RwLock<FrameData>,
    referenced: AtomicBool,
}

/// Thresholds, already converted to frame counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolConfig {
    pub(crate) frames: usize,
    pub(crate) target: usize,
    pub(crate) trigger: usize,
    pub(crate) dirty_target: usize,
    pub(crate) dirty_trigger: usize,
}

#[derive(Default)]
pub(crate) struct PoolCounters {
    pub(crate) evicted_clean: AtomicU64,
    pub(crate) evicted_dirty: AtomicU64,
    pub(crate) examined: AtomicU64,
    pub(crate) app_evictions: AtomicU64,
    pub(crate) app_eviction_ns: AtomicU64,
    pub(crate) max_wait_ns: AtomicU64,
    pub(crate) peak_used: AtomicUsize,
    pub(crate) shadow_copies: AtomicU64,
    pub(crate) eviction_errors: AtomicU64,
}

pub(crate) struct BufferPool {
    pub(crate) frames: Box<[Frame]>,
    free: ArrayQueue<u32>,
    hand: AtomicUsize,
    /// Frames holding a page or a shadow.
    pub(crate) used: AtomicUsize,
    pub(crate) dirty: AtomicUsize,
    pub(crate) cfg: PoolConfig,
    pub(crate) counters: PoolCounters,
    wake: Mutex<bool>,
    wake_cv: Condvar,
    pub(crate) shutdown: AtomicBool,
}

/// A page latched for reading.
pub(crate) struct PageRead<'a> {
    g: RwLockReadGuard<'a, FrameData>,
}

impl PageRead<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.g.buf
    }
}

/// A page latched for writing. `bytes_mut` records the modification (and
/// preserves the checkpoint's copy first if one is owed).
pub(crate) struct PageWrite<'a> {
    g: RwLockWriteGuard<'a, FrameData>,
    pool: &'a BufferPool,
    pager: &'a Pager,
}

impl PageWrite<'_> {
    pub(crate) fn pid(&self) -> u64 {
        self.g.pid
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.g.buf
    }
    pub(crate) fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.pool.before_modify(self.pager, &mut self.g)?;
        Ok(&mut self.g.buf)
    }
}

impl BufferPool {
    pub(crate) fn new(cfg: PoolConfig) -> Self {
        let free = ArrayQueue::new(cfg.frames);
        let frames: Box<[Frame]> = (0..cfg.frames)
            .map(|_| Frame {
                latch: RwLock::new(FrameData {
                    state: FrameState::Free,
                    pid: 0,
                    dirty: false,
                    dirty_epoch: 0,
                    modcount: 0,
                    buf: Vec::new(),
                }),
                referenced: AtomicBool::new(false),
            })
            .collect();
        for i in 0..cfg.frames {
            // The queue was created with room for every frame.
            let _ = free.push(i as u32);
        }
        BufferPool {
            frames,
            free,
            hand: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
            dirty: AtomicUsize::new(0),
            cfg,
            counters: PoolCounters::default(),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
        }
    }

    /// Latches `pid` for reading, loading it if needed.
    pub(crate) fn fix_shared<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageRead<'a>> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                if let Some(g) = self.load(pager, pid)? {
                    return Ok(PageRead {
                        g: RwLockWriteGuard::downgrade(g),
                    });
                }
                continue;
            }
            let frame = &self.frames[f as usize];
            let g = frame.latch.read();
            if g.state == FrameState::Page && g.pid == pid {
                frame.referenced.store(true, Ordering::Relaxed);
                return Ok(PageRead { g });
            }
        }
    }

    /// Latches `pid` for writing, loading it if needed.
    pub(crate) fn fix_exclusive<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageWrite<'a>> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                if let Some(g) = self.load(pager, pid)? {
                    return Ok(PageWrite {
                        g,
                        pool: self,
                        pager,
                    });
                }
                continue;
            }
            let frame = &self.frames[f as usize];
            let g = frame.latch.write();
            if g.state == FrameState::Page && g.pid == pid {
                frame.referenced.store(true, Ordering::Relaxed);
                return Ok(PageWrite {
                    g,
                    pool: self,
                    pager,
                });
            }
        }
    }

    /// A new, empty, dirty page for `pid`, latched for writing. The caller
    /// initialises its bytes.
    pub(crate) fn new_page<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageWrite<'a>> {
        let fi = self.acquire_frame(pager)?;
        let mut g = self.frames[fi as usize].latch.write();
        if !pager.map.claim_frame(pid, fi) {
            self.release_frame(fi, g);
            return Err(Error::corruption(pid, "new page id is already cached"));
        }
        g.state = FrameState::Page;
        g.pid = pid;
        g.dirty = false;
        g.modcount = 0;
        let mut w = PageWrite {
            g,
            pool: self,
            pager,
        };
        w.bytes_mut()?.fill(0);
        Ok(w)
    }

    /// Loads `pid` into a free frame. `None` if another thread published a
    /// frame for it first (the caller retries the lookup).
    fn load<'a>(
        &'a self,
        pager: &Pager,
        pid: u64,
    ) -> Result<Option<RwLockWriteGuard<'a, FrameData>>> {
        let fi = self.acquire_frame(pager)?;
        let mut g = self.frames[fi as usize].latch.write();
        if !pager.map.claim_frame(pid, fi) {
            self.release_frame(fi, g);
            return Ok(None);
        }
        g.state = FrameState::Page;
        g.pid = pid;
        g.dirty = false;
        g.modcount = 0;
        if let Err(e) = pager.read_page(pid, &mut g.buf, &[PageKind::Leaf, PageKind::Branch]) {
            pager.map.set_frame(pid, NO_FRAME);
            self.release_frame(fi, g);
            return Err(e);
        }
        self.frames[fi as usize]
            .referenced
            .store(false, Ordering::Relaxed);
        Ok(Some(g))
    }

    /// Returns a frame we hold (latched, state reset) to the free list.
    fn release_frame(&self, fi: u32, mut g: RwLockWriteGuard<'_, FrameData>) {
        g.state = FrameState::Free;
        g.pid = 0;
        g.dirty = false;
        drop(g);
        self.used.fetch_sub(1, Ordering::AcqRel);
        // Every frame index is in the queue at most once, and the queue
        // holds them all.
        let _ = self.free.push(fi);
    }

    /// Frees a shadow frame once the checkpoint has written it.
    pub(crate) fn release_shadow(&self, fi: u32) {
        let g = self.frames[fi as usize].latch.write();
        debug_assert_eq!(g.state, FrameState::Shadow);
        self.release_frame(fi, g);
    }

    /// Takes a free frame, evicting if there is none. Application threads
    /// that find usage above a trigger first evict one page themselves.
    fn acquire_frame(&self, pager: &Pager) -> Result<u32> {
        self.help_if_over_trigger(pager);
        let mut waited: Option<Instant> = None;
        loop {
            if let Some(fi) = self.free.pop() {
                let used = self.used.fetch_add(1, Ordering::AcqRel) + 1;
                self.counters.peak_used.fetch_max(used, Ordering::Relaxed);
                if used > self.cfg.target {
                    self.wake_workers();
                }
                if let Some(t) = waited {
                    self.counters
                        .max_wait_ns
                        .fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                self.prepare(fi);
                return Ok(fi);
            }
            let t = *waited.get_or_insert_with(Instant::now);
            self.wake_workers();
            // No free frame: evict one ourselves and take it.
            if let Some(fi) = evict::evict_one(self, pager, false, self.cfg.frames * 2)? {
                self.counters.app_evictions.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .app_eviction_ns
                    .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                self.counters
                    .max_wait_ns
                    .fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                self.prepare(fi);
                return Ok(fi);
            }
            std::thread::yield_now();
        }
    }

    fn prepare(&self, fi: u32) {
        let mut g = self.frames[fi as usize].latch.write();
        if g.buf.len() != PAGE_SIZE {
            g.buf = vec![0u8; PAGE_SIZE];
        }
    }

    /// When usage or dirty pages are above their trigger, the calling
    /// application thread evicts one page (bounded work) before going on.
    pub(crate) fn help_if_over_trigger(&self, pager: &Pager) {
        let used = self.used.load(Ordering::Relaxed);
        let dirty = self.dirty.load(Ordering::Relaxed);
        if used <= self.cfg.trigger && dirty <= self.cfg.dirty_trigger {
            return;
        }
        self.wake_workers();
        let t = Instant::now();
        let dirty_only = used <= self.cfg.trigger;
        if let Ok(Some(fi)) = evict::evict_one(self, pager, dirty_only, evict::APP_EXAMINE_MAX) {
            let g = self.frames[fi as usize].latch.write();
            self.release_frame(fi, g);
            self.counters.app_evictions.fetch_add(1, Ordering::Relaxed);
            self.counters
                .app_eviction_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn wake_workers(&self) {
        let mut w = self.wake.lock();
        if !*w {
            *w = true;
            self.wake_cv.notify_all();
        }
    }

    /// Records a modification of the latched page `g`. A page still holding
    /// content that the running checkpoint has not captured is first copied
    /// into a shadow frame for it.
    fn before_modify(&self, pager: &Pager, g: &mut FrameData) -> Result<()> {
        let e = pager.epoch.load(Ordering::Acquire);
        if !g.dirty {
            g.dirty = true;
            g.dirty_epoch = e;
            self.dirty.fetch_add(1, Ordering::AcqRel);
            pager.dirty_list.lock().push(g.pid);
        } else if g.dirty_epoch < e {
            let fi = self.acquire_frame(pager)?;
            {
                let mut s = self.frames[fi as usize].latch.write();
                s.state = FrameState::Shadow;
                s.pid = g.pid;
                s.buf.copy_from_slice(&g.buf);
            }
            let mut st = pager.state.lock();
            match st.running.as_mut() {
                Some(r) if r.epoch == g.dirty_epoch => {
                    r.pending.insert(g.pid, Pending::Shadow(fi));
                    r.shadowed.push(g.pid);
                    self.counters.shadow_copies.fetch_add(1, Ordering::Relaxed);
                }
                _ => {
                    drop(st);
                    debug_assert!(
                        false,
                        "page {} dirty in epoch {} with no checkpoint running",
                        g.pid, g.dirty_epoch
                    );
                    self.release_shadow(fi);
                }
            }
            g.dirty_epoch = e;
            pager.dirty_list.lock().push(g.pid);
        }
        g.modcount += 1;
        Ok(())
    }

    /// Drops `pid` from the cache without writing it (its page was freed).
    /// Content a running checkpoint still needs is written first.
    pub(crate) fn discard(&self, pager: &Pager, pid: u64) -> Result<()> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                return Ok(());
            }
            let g = self.frames[f as usize].latch.write();
            if g.state != FrameState::Page || g.pid != pid {
                continue;
            }
            let mut g = g;
            if g.dirty && g.dirty_epoch < pager.epoch.load(Ordering::Acquire) {
                evict::write_out(self, pager, &mut g)?;
            }
            if g.dirty {
                self.dirty.fetch_sub(1, Ordering::AcqRel);
            }
            pager.map.set_frame(pid, NO_FRAME);
            self.release_frame(f, g);
            return Ok(());
        }
    }
}
