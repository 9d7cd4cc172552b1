//! The buffer pool: a fixed set of page frames, read and written with
//! `pread`/`pwrite` through the pager. Nothing is memory mapped.
//!
//! * **Bounded memory.** There are exactly `cache_size / page_size` frames;
//!   a frame's buffer is allocated the first time it is used and never
//!   freed. Pages, and the shadow copies a checkpoint needs, live only in
//!   frames, so page memory never exceeds `cache_size`.
//! * **Latches.** Each frame has a reader-writer latch; holding it pins the
//!   page. Tree code couples latches top-down; eviction only ever
//!   *tries* a latch, so it never waits on, or deadlocks with, a reader,
//!   a writer or a checkpoint.
//! * **Victim choice.** CLOCK over the frames: the hand visits each frame
//!   once per sweep; a referenced page gets a second chance, a latched
//!   one is skipped without waiting. Frames never used are taken only
//!   while fewer than an eighth of the frames wait, given back, in the
//!   free queue, so the frames that have held pages stay a prefix of the
//!   array, and sweeps stop at its end (`clock_span`): in a cache larger
//!   than what it holds, a sweep costs what is cached, not the cache's
//!   size. A page is marked referenced when it is
//!   found already cached, not when it is loaded, so pages touched once
//!   (the random-insert workload) are evicted on first visit. Work per
//!   victim is bounded by the sweep, never by the size of the tree.
//! * **Thresholds** (percent of the frames): background workers keep usage
//!   below `eviction_target` and dirty pages below `eviction_dirty_target`;
//!   above `eviction_trigger` / `eviction_dirty_trigger` an application
//!   thread evicts one page (bounded work) before its operation goes on.
//! * **Standby.** A page the worker evicts for the usage target leaves its
//!   frame on the free queue *with its content*, still named by the page
//!   map (`FrameState::Standby`). The frame counts as free: the next thread
//!   that needs a frame takes it, unmapping the page then. Until that
//!   happens, a lookup of the page finds it and takes it back into use
//!   instead of reading it from the file. The target's headroom, kept free
//!   so that application threads seldom evict, still holds pages for
//!   readers: a read-mostly workload keeps the whole cache, not
//!   `eviction_target` of it.

mod evict;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_queue::ArrayQueue;
use parking_lot::{Condvar, Mutex};

// The latches are loom's under `cfg(loom)` (see `loom_tests`): the
// protocol between lookups, loads and eviction is model-checked on this
// code. Counters, the CLOCK hand and each frame's recorded content stay
// plain atomics: no decision of the protocol depends on them (see
// `Frame::content` for how the models treat the content).
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::{Error, Result};
use crate::page::PageKind;
use crate::pagemap::NO_FRAME;
use crate::pager::{Pager, Pending};

pub(crate) use evict::run_eviction_worker;

/// Smallest cache, in frames: enough for a few threads each holding a
/// root-to-leaf path (4-5 latches) plus split pages, with room to evict.
pub(crate) const MIN_FRAMES: usize = 64;
/// One more than the largest cache, in frames: frame indices are `u32`,
/// and `u32::MAX` is the page map's "no frame".
pub(crate) const MAX_FRAMES: usize = u32::MAX as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameState {
    /// On the free queue (or never used), holding nothing.
    Free,
    /// Taken by a thread (from the free queue, or emptied by its own
    /// eviction) that will fill it or give it back; on no queue a taker
    /// may use, whatever stale entry for it the free queue still holds.
    Held,
    /// Holding page `pid`, published in the page map.
    Page,
    /// Holding a checkpoint's shadow copy of page `pid` (not in the map).
    Shadow,
    /// On the free queue, yet still holding page `pid`, clean, published in
    /// the page map: a lookup takes it back into use ([`BufferPool`]'s
    /// `reclaim`), a thread needing a frame unmaps the page and takes it.
    Standby,
}

/// Which free frame [`BufferPool::take_free`] prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    /// For a page: frames given back wait until an eighth of the frames
    /// do, so that the frames in use stay a prefix and a page's frame sits
    /// far from the CLOCK hand.
    Spaced,
    /// For a checkpoint's shadow copy: any frame given back first.
    GivenBackFirst,
}

/// The last cleaning of a frame's page by a paced sweep.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cleaned {
    pub(crate) pid: u64,
    pub(crate) at: Instant,
    /// The checkpoint epoch (`Pager::epoch`) it was cleaned in.
    pub(crate) epoch: u64,
}

pub(crate) struct FrameData {
    pub(crate) state: FrameState,
    pub(crate) pid: u64,
    pub(crate) dirty: bool,
    /// Epoch in which the current unsaved changes began.
    pub(crate) dirty_epoch: u64,
    /// Bumped on every modification, and never reset: it counts the
    /// frame's modifications over every page it has held, so a page
    /// evicted and loaded into the same frame again cannot show the count
    /// a checkpoint read at its capture (see `checkpoint::capture`).
    pub(crate) modcount: u64,
    /// When the background worker last cleaned a page in this frame:
    /// which page, at what time, and in which checkpoint epoch (see
    /// [`evict::reduce_dirty`]).
    pub(crate) cleaned: Option<Cleaned>,
    /// The frame's index is on the free queue, or was popped from it by a
    /// thread that has not latched the frame yet. Set when the index is
    /// pushed, cleared by the thread that popped it once it holds the
    /// latch, so every index is on the queue at most once (the queue holds
    /// as many as there are frames). A frame taken back from standby keeps
    /// its entry: the thread that pops it finds the frame in use and
    /// passes it by.
    pub(crate) queued: bool,
    pub(crate) buf: Vec<u8>,
}

/// Aligned to 128 bytes (two cache lines, which x86 prefetches as a pair)
/// so that readers latching one hot frame, such as a root, do not make the
/// line of a neighbouring frame bounce between cores.
#[repr(align(128))]
pub(crate) struct Frame {
    pub(crate) latch: RwLock<FrameData>,
    referenced: AtomicBool,
    /// What the frame holds ([`Content`]), stored under the exclusive
    /// latch whenever its state or dirtiness changes, so that the sweep
    /// looking for dirty pages can pass a clean or empty frame without
    /// taking its latch. A read without the latch may be stale by the
    /// length of a latch hold: the sweep then takes the latch of a page
    /// just cleaned (and checks `dirty` under it), or passes a page just
    /// dirtied, which the next lap finds. No decision about a page's
    /// content is taken on it.
    content: AtomicU8,
}

/// What a frame holds, as [`Frame::content`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Content {
    /// Free, or a checkpoint's shadow copy: nothing the sweep evicts.
    Empty = 0,
    Clean = 1,
    Dirty = 2,
}

impl Frame {
    /// What the frame held when its exclusive latch was last released
    /// (the `content` field says how stale this may be).
    ///
    /// Under loom every frame reads as dirty, so eviction and the sweep
    /// try every frame's latch as they did before contents were recorded:
    /// passing a frame by its content is the same as failing to latch it,
    /// which the models explore, and the models keep the interleavings of
    /// those latch attempts (the page-latch models check about 83,000
    /// executions each; passing frames by content under loom left 289 and
    /// 7,382). The unit tests check the contents themselves.
    fn content(&self) -> Content {
        if cfg!(loom) {
            return Content::Dirty;
        }
        self.recorded()
    }

    /// The content last recorded, under loom too.
    fn recorded(&self) -> Content {
        match self.content.load(Ordering::Relaxed) {
            1 => Content::Clean,
            2 => Content::Dirty,
            _ => Content::Empty,
        }
    }

    /// Records what the frame holds; called with its exclusive latch held.
    fn set_content(&self, c: Content) {
        self.content.store(c as u8, Ordering::Relaxed);
    }

    /// Marks the frame recently used. Hot frames are already marked, and
    /// a load costs no ownership of the cache line where a store would.
    fn touch(&self) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
    }
}

/// Thresholds, already converted to frame counts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolConfig {
    /// Bytes of each frame: the database's page size.
    pub(crate) page_size: usize,
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
    pub(crate) cleaned: AtomicU64,
    pub(crate) examined: AtomicU64,
    pub(crate) worker_wakes: AtomicU64,
    pub(crate) app_evictions: AtomicU64,
    pub(crate) app_eviction_ns: AtomicU64,
    pub(crate) max_wait_ns: AtomicU64,
    pub(crate) peak_used: AtomicUsize,
    pub(crate) shadow_copies: AtomicU64,
    pub(crate) eviction_errors: AtomicU64,
    /// Lookups that found their page in standby and took it back.
    pub(crate) reclaimed: AtomicU64,
    /// Frames taken from standby: pages unmapped at last.
    pub(crate) standby_taken: AtomicU64,
}

pub(crate) struct BufferPool {
    pub(crate) frames: Box<[Frame]>,
    /// Frames given back (see `take_free`).
    free: ArrayQueue<u32>,
    /// Frames `0..never_used` have been handed out at least once; the
    /// others have never held a page (see `clock_span`).
    never_used: AtomicUsize,
    hand: AtomicUsize,
    /// Frames holding a page or a shadow.
    pub(crate) used: AtomicUsize,
    /// Frames in standby (free, their page still readable).
    pub(crate) standby: AtomicUsize,
    pub(crate) dirty: AtomicUsize,
    /// Set by the worker when its last paced step found every dirty page
    /// cleaned within `RECLEAN_GAP` or since the last checkpoint cut (see
    /// [`evict::clean_step`]): the dirty pages are hot ones, left for the
    /// checkpoint.
    pub(crate) dirty_hot: AtomicBool,
    pub(crate) cfg: PoolConfig,
    pub(crate) counters: PoolCounters,
    /// Serialises a worker's decision to sleep with a wake's notify.
    wake: Mutex<()>,
    wake_cv: Condvar,
    /// A wake was asked for and no worker has taken it yet. Application
    /// threads over a trigger ask for one on every frame they take; while
    /// one is pending they return at once instead of locking `wake`. On 2
    /// cores that lock was contended, and parking_lot's spinning before it
    /// sleeps calls `sched_yield`, which gave the caller's core to a
    /// preparing thread for a whole slice: 113 spells of 3 ms or more in
    /// the first 18 s of `cache-pressure` (BENCHMARKS.md, cache-pressure,
    /// "The data file written back before the kernel does it").
    wake_pending: AtomicBool,
    pub(crate) shutdown: AtomicBool,
}

/// A page latched for reading.
pub(crate) struct PageRead<'a> {
    g: ReadLatch<'a>,
}

impl PageRead<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.g.buf
    }
}

/// The shared latch a reader holds. A reader that loaded the page itself
/// downgrades its exclusive latch, so no evictor can take the frame in
/// between.
#[cfg(not(loom))]
type ReadLatch<'a> = RwLockReadGuard<'a, FrameData>;

#[cfg(not(loom))]
fn downgrade(g: RwLockWriteGuard<'_, FrameData>) -> ReadLatch<'_> {
    RwLockWriteGuard::downgrade(g)
}

/// loom's latch cannot be downgraded: the loader keeps it exclusive, which
/// excludes strictly more than the shared latch it stands for.
#[cfg(loom)]
enum ReadLatch<'a> {
    Shared(RwLockReadGuard<'a, FrameData>),
    Loaded(RwLockWriteGuard<'a, FrameData>),
}

#[cfg(loom)]
impl std::ops::Deref for ReadLatch<'_> {
    type Target = FrameData;
    fn deref(&self) -> &FrameData {
        match self {
            ReadLatch::Shared(g) => g,
            ReadLatch::Loaded(g) => g,
        }
    }
}

#[cfg(loom)]
fn downgrade(g: RwLockWriteGuard<'_, FrameData>) -> ReadLatch<'_> {
    ReadLatch::Loaded(g)
}

/// A page latched for writing. `bytes_mut` records the modification (and
/// preserves the checkpoint's copy first if one is owed).
pub(crate) struct PageWrite<'a> {
    g: RwLockWriteGuard<'a, FrameData>,
    /// The frame `g` latches.
    fi: u32,
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
        self.pool.before_modify(self.pager, self.fi, &mut self.g)?;
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
                    cleaned: None,
                    queued: false,
                    buf: Vec::new(),
                }),
                referenced: AtomicBool::new(false),
                content: AtomicU8::new(Content::Empty as u8),
            })
            .collect();
        BufferPool {
            frames,
            free,
            never_used: AtomicUsize::new(0),
            hand: AtomicUsize::new(0),
            used: AtomicUsize::new(0),
            standby: AtomicUsize::new(0),
            dirty: AtomicUsize::new(0),
            cfg,
            counters: PoolCounters::default(),
            wake: Mutex::new(()),
            wake_pending: AtomicBool::new(false),
            wake_cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            dirty_hot: AtomicBool::new(false),
        }
    }

    /// Latches `pid` for reading, loading it if needed.
    pub(crate) fn fix_shared<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageRead<'a>> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                if let Some((_, g)) = self.load(pager, pid)? {
                    return Ok(PageRead { g: downgrade(g) });
                }
                continue;
            }
            if let Some(r) = self.shared_if_holding(f, pid) {
                return Ok(r);
            }
        }
    }

    /// Latches frame `f` for reading if it (still) holds `pid`: a lookup's
    /// revalidation, since the frame may have changed pages since the page
    /// map named it.
    fn shared_if_holding(&self, f: u32, pid: u64) -> Option<PageRead<'_>> {
        let frame = &self.frames[f as usize];
        let g = frame.latch.read();
        if g.pid == pid {
            match g.state {
                FrameState::Page => {
                    frame.touch();
                    #[cfg(loom)]
                    let g = ReadLatch::Shared(g);
                    return Some(PageRead { g });
                }
                FrameState::Standby => {
                    drop(g);
                    let mut g = frame.latch.write();
                    if g.pid == pid && matches!(g.state, FrameState::Page | FrameState::Standby) {
                        self.reclaim(f, &mut g);
                        frame.touch();
                        return Some(PageRead { g: downgrade(g) });
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Takes the page of frame `fi` (latched exclusively in `g`) back into
    /// use if it is in standby: it counts as used again. Its free-queue
    /// entry stays; whoever pops it passes the frame by.
    fn reclaim(&self, fi: u32, g: &mut FrameData) {
        if g.state != FrameState::Standby {
            return;
        }
        g.state = FrameState::Page;
        self.frames[fi as usize].set_content(Content::Clean);
        self.standby.fetch_sub(1, Ordering::AcqRel);
        let used = self.used.fetch_add(1, Ordering::AcqRel) + 1;
        self.counters.peak_used.fetch_max(used, Ordering::Relaxed);
        self.counters.reclaimed.fetch_add(1, Ordering::Relaxed);
    }

    /// Latches `pid` for reading if it is in the cache now; `None`, never a
    /// load, if it is not. For a page id held without a latch on its
    /// parent (a scan's remembered branch), which a merge may have freed
    /// meanwhile: a freed page leaves the cache before its id is freed, and
    /// loading its id would read a block it no longer owns.
    pub(crate) fn fix_shared_cached<'a>(
        &'a self,
        pager: &'a Pager,
        pid: u64,
    ) -> Option<PageRead<'a>> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                return None;
            }
            if let Some(r) = self.shared_if_holding(f, pid) {
                return Some(r);
            }
        }
    }

    /// Latches `pid` for writing, loading it if needed.
    pub(crate) fn fix_exclusive<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageWrite<'a>> {
        loop {
            let f = pager.map.frame(pid);
            if f == NO_FRAME {
                if let Some((fi, g)) = self.load(pager, pid)? {
                    return Ok(PageWrite {
                        g,
                        fi,
                        pool: self,
                        pager,
                    });
                }
                continue;
            }
            let frame = &self.frames[f as usize];
            let mut g = frame.latch.write();
            if g.pid == pid && matches!(g.state, FrameState::Page | FrameState::Standby) {
                self.reclaim(f, &mut g);
                frame.touch();
                return Ok(PageWrite {
                    g,
                    fi: f,
                    pool: self,
                    pager,
                });
            }
        }
    }

    /// A new, empty, dirty page for `pid`, latched for writing. The caller
    /// initialises its bytes.
    pub(crate) fn new_page<'a>(&'a self, pager: &'a Pager, pid: u64) -> Result<PageWrite<'a>> {
        let fi = self.acquire_frame(pager, Take::Spaced)?;
        let mut g = self.frames[fi as usize].latch.write();
        if !pager.map.claim_frame(pid, fi) {
            self.release_frame(fi, g);
            return Err(Error::corruption(pid, "new page id is already cached"));
        }
        self.occupy(fi, &mut g, pid);
        let mut w = PageWrite {
            g,
            fi,
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
    ) -> Result<Option<(u32, RwLockWriteGuard<'a, FrameData>)>> {
        let fi = self.acquire_frame(pager, Take::Spaced)?;
        let mut g = self.frames[fi as usize].latch.write();
        if !pager.map.claim_frame(pid, fi) {
            self.release_frame(fi, g);
            return Ok(None);
        }
        self.occupy(fi, &mut g, pid);
        if let Err(e) = pager.read_page(pid, &mut g.buf, &[PageKind::Leaf, PageKind::Branch]) {
            pager.map.set_frame(pid, NO_FRAME);
            self.release_frame(fi, g);
            return Err(e);
        }
        self.frames[fi as usize]
            .referenced
            .store(false, Ordering::Relaxed);
        Ok(Some((fi, g)))
    }

    /// Makes frame `fi` (latched exclusively in `g`, its page id claimed)
    /// hold page `pid`, clean.
    fn occupy(&self, fi: u32, g: &mut FrameData, pid: u64) {
        g.state = FrameState::Page;
        g.pid = pid;
        g.dirty = false;
        self.frames[fi as usize].set_content(Content::Clean);
    }

    /// Marks the dirty page of frame `fi` (latched exclusively in `g`)
    /// clean: its content is now at its block.
    pub(crate) fn mark_clean(&self, fi: u32, g: &mut FrameData) {
        debug_assert!(g.dirty);
        g.dirty = false;
        self.frames[fi as usize].set_content(Content::Clean);
        self.dirty.fetch_sub(1, Ordering::AcqRel);
    }

    /// A free frame, `None` if every frame is in use; it is taken
    /// ([`FrameState::Held`]), still uncounted in `used`. A frame given
    /// back is taken once an eighth of the frames wait in the queue, else
    /// the next frame never used, else any frame given back. The frames in
    /// use then stay within the prefix `0..clock_span()`, and a frame
    /// waits in the queue about as long as it did when every frame
    /// started there: reused at once, a frame's new page would sit right
    /// behind the hand, a whole lap away, and the hand would pass more hot
    /// pages per victim (cache-pressure: 3.3-3.6 frames examined per
    /// eviction against 2.9). Waiting longer also keeps a page in standby
    /// longer.
    ///
    /// With `Take::GivenBackFirst` a frame given back is taken whenever
    /// the queue has one: for a checkpoint's shadow copy, which the sweep
    /// never visits and which goes back once the checkpoint has written
    /// it, so the spacing above does not apply; and a frame given back has
    /// its buffer's memory touched already, where a frame never used would
    /// take its page faults in the writer's copy, under the page's latch.
    fn take_free(&self, pager: &Pager, take: Take) -> Option<u32> {
        let n = self.frames.len();
        if take == Take::GivenBackFirst || self.free.len() >= n / 8 {
            if let Some(fi) = self.pop_free(pager) {
                return Some(fi);
            }
        }
        let never_used = self
            .never_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |x| {
                (x < n).then_some(x + 1)
            })
            .ok()
            .and_then(|x| u32::try_from(x).ok());
        if let Some(fi) = never_used {
            // Never published anywhere: nobody else latches it.
            self.hold(&mut self.frames[fi as usize].latch.write());
            return Some(fi);
        }
        self.pop_free(pager)
    }

    /// Pops the free queue until a frame can be taken: a free one, or one
    /// in standby, whose page is unmapped now. Passes by the entries of
    /// frames taken back from standby since they were queued, and puts
    /// back at the tail an entry whose frame is latched at the moment (a
    /// lookup may be taking its page back). Bounded: at most
    /// [`evict::APP_EXAMINE_MAX`] entries, then `None`.
    fn pop_free(&self, pager: &Pager) -> Option<u32> {
        for _ in 0..evict::APP_EXAMINE_MAX {
            let fi = self.free.pop()?;
            let Some(mut g) = self.frames[fi as usize].latch.try_write() else {
                // Still `queued`, and the queue has room: it held this
                // entry a moment ago and every index is on it once.
                let _ = self.free.push(fi);
                continue;
            };
            g.queued = false;
            match g.state {
                FrameState::Free => {}
                FrameState::Standby => {
                    pager.map.set_frame(g.pid, NO_FRAME);
                    g.pid = 0;
                    self.standby.fetch_sub(1, Ordering::AcqRel);
                    self.counters.standby_taken.fetch_add(1, Ordering::Relaxed);
                }
                // Taken back from standby, and perhaps given to a thread
                // by eviction since: not free.
                FrameState::Held | FrameState::Page | FrameState::Shadow => continue,
            }
            self.hold(&mut g);
            return Some(fi);
        }
        None
    }

    /// How many frames a CLOCK lap covers: those handed out at least
    /// once. The rest have never held a page, and a lap over a large
    /// cache that holds little would otherwise cost the cache's size.
    /// A lap may read this just before a frame past it is handed out and
    /// miss that frame once, as CLOCK misses a frame latched at the
    /// moment: the next lap sees it.
    pub(crate) fn clock_span(&self) -> usize {
        self.never_used.load(Ordering::Acquire).max(1)
    }

    /// Returns a frame we hold (latched, counted in `used`) to the free
    /// queue, empty.
    fn release_frame(&self, fi: u32, mut g: RwLockWriteGuard<'_, FrameData>) {
        g.state = FrameState::Free;
        g.pid = 0;
        g.dirty = false;
        self.frames[fi as usize].set_content(Content::Empty);
        self.give_back(fi, g, false);
    }

    /// Puts the clean page of frame `fi` (latched in `g`, counted in
    /// `used`, published in the page map) in standby: the frame is free,
    /// and the page stays readable until a thread takes the frame.
    fn stand_by(&self, fi: u32, mut g: RwLockWriteGuard<'_, FrameData>) {
        debug_assert!(g.state == FrameState::Page && !g.dirty);
        g.state = FrameState::Standby;
        self.frames[fi as usize].set_content(Content::Empty);
        self.give_back(fi, g, true);
    }

    /// Uncounts frame `fi` (latched in `g`, already free or, with
    /// `standby`, in standby) from `used` and queues it, unless its entry
    /// is still on the queue. The counts change under the latch, `used`
    /// first, so that `used + standby` never exceeds the frames (a lookup
    /// taking the page back takes the same latch).
    fn give_back(&self, fi: u32, mut g: RwLockWriteGuard<'_, FrameData>, standby: bool) {
        let push = !std::mem::replace(&mut g.queued, true);
        self.used.fetch_sub(1, Ordering::AcqRel);
        if standby {
            self.standby.fetch_add(1, Ordering::AcqRel);
        }
        drop(g);
        if push {
            // Every frame index is on the queue at most once (`queued`),
            // and the queue holds them all.
            let _ = self.free.push(fi);
        }
    }

    /// Frees a shadow frame once the checkpoint has written it.
    pub(crate) fn release_shadow(&self, fi: u32) {
        let g = self.frames[fi as usize].latch.write();
        debug_assert_eq!(g.state, FrameState::Shadow);
        self.release_frame(fi, g);
    }

    /// Takes a free frame, evicting if there is none. An application thread
    /// that would take usage above a trigger first evicts a page itself and
    /// takes that page's frame, which leaves usage where it was.
    fn acquire_frame(&self, pager: &Pager, take: Take) -> Result<u32> {
        if let Some(fi) = self.help(pager, 1) {
            self.prepare(fi);
            return Ok(fi);
        }
        let mut waited: Option<Instant> = None;
        loop {
            if let Some(fi) = self.take_free(pager, take) {
                let used = self.used.fetch_add(1, Ordering::AcqRel) + 1;
                self.counters.peak_used.fetch_max(used, Ordering::Relaxed);
                if used > self.wake_at() {
                    self.wake_workers();
                }
                if let Some(t) = waited {
                    self.counters
                        .max_wait_ns
                        .fetch_max(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                // `take_free` sized its buffer.
                return Ok(fi);
            }
            let t = *waited.get_or_insert_with(Instant::now);
            self.wake_workers();
            // No free frame: evict one ourselves and take it.
            if let Some(fi) = evict::evict_one(self, pager, self.clock_span() * 2)? {
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
            crate::sync::yield_now();
        }
    }

    /// Sizes the buffer of frame `fi`, emptied by the caller's own
    /// eviction, for a page.
    fn prepare(&self, fi: u32) {
        let mut g = self.frames[fi as usize].latch.write();
        self.size_buf(&mut g);
    }

    /// Marks a frame taken from the free queue (latched in `g`) as held by
    /// the caller, its buffer sized for a page: one latch hold per take.
    fn hold(&self, g: &mut FrameData) {
        g.state = FrameState::Held;
        self.size_buf(g);
    }

    fn size_buf(&self, g: &mut FrameData) {
        if g.buf.len() != self.cfg.page_size {
            g.buf = vec![0u8; self.cfg.page_size];
        }
    }

    /// When usage or dirty pages are above their trigger, the calling
    /// application thread evicts one page (bounded work) before going on.
    pub(crate) fn help_if_over_trigger(&self, pager: &Pager) {
        if let Some(fi) = self.help(pager, 0) {
            let g = self.frames[fi as usize].latch.write();
            self.release_frame(fi, g);
        }
    }

    /// Evicts one page (at most [`evict::APP_EXAMINE_MAX`] frames examined)
    /// if usage after taking `incoming` more frames, or the dirty pages,
    /// would be above their trigger (for the dirty trigger alone, a hot
    /// dirty page is cleaned instead, see [`evict::reduce_dirty`]). Returns
    /// the emptied frame, still counted as used; `None` if nothing was
    /// needed or found, or a page was cleaned.
    ///
    /// Over the dirty trigger alone, in a cache with room (usage at or
    /// under [`evict::paced_usage_limit`]), the thread is paced as the
    /// worker is, and does nothing when the worker found every dirty page
    /// cleaned within `RECLEAN_GAP` or since the last checkpoint cut
    /// (`dirty_hot`): those are pages written again after their cleaning,
    /// which cleaning would dirty again at once and the next checkpoint
    /// writes once.
    fn help(&self, pager: &Pager, incoming: usize) -> Option<u32> {
        let used = self.used.load(Ordering::Relaxed) + incoming;
        let dirty = self.dirty.load(Ordering::Relaxed);
        if used <= self.cfg.trigger && dirty <= self.cfg.dirty_trigger {
            return None;
        }
        let room = used <= evict::paced_usage_limit(self);
        if room && self.dirty_hot.load(Ordering::Relaxed) {
            return None;
        }
        self.wake_workers();
        let t = Instant::now();
        // A failed write-out is counted by `evict_one` or `reduce_dirty`; the
        // operation goes on, and the next attempt on that page reports it
        // again.
        let fi = if used <= self.cfg.trigger {
            // Only the dirty pages are over their trigger: one fewer is
            // enough, evicted or (a hot page) cleaned and kept.
            let paced = room.then(Instant::now);
            match evict::reduce_dirty(self, pager, evict::APP_EXAMINE_MAX, paced) {
                Ok(evict::Relief::Evicted(fi)) => Some(fi),
                Ok(evict::Relief::Cleaned) => None,
                Ok(evict::Relief::Nothing) | Err(_) => return None,
            }
        } else {
            Some(
                evict::evict_one(self, pager, evict::APP_EXAMINE_MAX)
                    .ok()
                    .flatten()?,
            )
        };
        self.counters.app_evictions.fetch_add(1, Ordering::Relaxed);
        self.counters
            .app_eviction_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        fi
    }

    /// Pages written out by eviction and cleaning since open (the data
    /// file's preparer populates room only while this moves).
    pub(crate) fn pages_written_out(&self) -> u64 {
        self.counters.cleaned.load(Ordering::Relaxed)
            + self.counters.evicted_dirty.load(Ordering::Relaxed)
    }

    /// Usage above which taking a frame wakes the workers: a quarter of
    /// the way from `eviction_target` to `eviction_trigger`. A worker
    /// woken evicts down to the target, so each wake frees a batch of
    /// frames; waking at the target itself made a cache that does not
    /// hold a read working set wake the worker once per page loaded, and
    /// the wakes and context switches cost about a fifth of the CPU of a
    /// read-only workload (YCSB C). An idle worker also rechecks on its
    /// own every `WORKER_IDLE`.
    fn wake_at(&self) -> usize {
        self.cfg.target + self.cfg.trigger.saturating_sub(self.cfg.target) / 4
    }

    /// Wakes the eviction workers, unless a wake is already pending.
    pub(crate) fn wake_workers(&self) {
        // Read before the swap: while a wake is pending, callers only read
        // the flag's cache line, not write it.
        if self.wake_pending.load(Ordering::Acquire)
            || self.wake_pending.swap(true, Ordering::AcqRel)
        {
            // A worker will see it: it checks for a pending wake under
            // `wake` before it sleeps, and the levels after it wakes.
            return;
        }
        let _w = self.wake.lock();
        self.wake_cv.notify_all();
        self.counters.worker_wakes.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker with nothing to do: sleeps until woken or for `timeout`,
    /// unless a wake is already pending, and takes the pending wake.
    pub(crate) fn sleep_until_woken(&self, timeout: std::time::Duration) {
        let mut w = self.wake.lock();
        if !self.wake_pending.load(Ordering::Acquire) {
            self.wake_cv.wait_for(&mut w, timeout);
        }
        // Cleared after the wait: a wake asked for meanwhile is not lost,
        // since the worker looks at the levels before it sleeps again.
        self.wake_pending.store(false, Ordering::Release);
    }

    /// Records a modification of the latched page `g`. A page still holding
    /// content that the running checkpoint has not captured is first copied
    /// into a shadow frame for it.
    fn before_modify(&self, pager: &Pager, fi: u32, g: &mut FrameData) -> Result<()> {
        let e = pager.epoch.load(Ordering::Acquire);
        if !g.dirty {
            g.dirty = true;
            g.dirty_epoch = e;
            self.frames[fi as usize].set_content(Content::Dirty);
            self.dirty.fetch_add(1, Ordering::AcqRel);
            if pager.map.list_once(g.pid, e) {
                pager.dirty_list.lock().push(g.pid);
            }
        } else if g.dirty_epoch < e {
            let fi = self.acquire_frame(pager, Take::GivenBackFirst)?;
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
            if pager.map.list_once(g.pid, e) {
                pager.dirty_list.lock().push(g.pid);
            }
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
            let mut g = self.frames[f as usize].latch.write();
            if g.pid != pid {
                continue;
            }
            match g.state {
                FrameState::Page => {}
                FrameState::Standby => {
                    // Already free and queued: only the page leaves.
                    pager.map.set_frame(pid, NO_FRAME);
                    g.state = FrameState::Free;
                    g.pid = 0;
                    self.standby.fetch_sub(1, Ordering::AcqRel);
                    return Ok(());
                }
                FrameState::Free | FrameState::Held | FrameState::Shadow => continue,
            }
            if g.dirty && g.dirty_epoch < pager.epoch.load(Ordering::Acquire) {
                evict::write_out(self, pager, f, &mut g)?;
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

/// A pool over an in-memory data file, and page operations that check
/// what they latched: shared by the loom models and the unit tests.
#[cfg(test)]
mod testkit {
    use super::*;
    use crate::alloc::BlockAlloc;
    use crate::btree::node;
    use crate::page;
    use crate::pagemap::PageMap;
    #[cfg(loom)]
    use loom::sync::Arc;
    #[cfg(not(loom))]
    use std::sync::Arc;

    /// A pool of `frames` frames over pages 1 and 2, both written to the
    /// data file (version 0 in their `aux` field) and evicted.
    pub(super) fn setup(frames: usize) -> (Arc<BufferPool>, Arc<Pager>) {
        setup_cfg(PoolConfig {
            page_size: crate::page::DEFAULT_PAGE_SIZE,
            frames,
            target: frames,
            trigger: frames,
            dirty_target: frames,
            dirty_trigger: frames,
        })
    }

    /// [`setup`] with the pool's configuration given.
    pub(super) fn setup_cfg(cfg: PoolConfig) -> (Arc<BufferPool>, Arc<Pager>) {
        let file = std::sync::Arc::new(crate::io::MemFile::default());
        let alloc = BlockAlloc::new(std::iter::empty()).expect("no blocks used yet");
        let pager = Arc::new(Pager::new(
            crate::page::DEFAULT_PAGE_SIZE,
            file,
            PageMap::new(),
            alloc,
            1,
            3,
            Vec::new(),
        ));
        let pool = Arc::new(BufferPool::new(cfg));
        for pid in 1..=2 {
            let mut w = pool.new_page(&pager, pid).unwrap();
            node::init_leaf(w.bytes_mut().unwrap(), pid);
        }
        while evict(&pool, &pager) {}
        assert_eq!(pool.used.load(Ordering::SeqCst), 0);
        (pool, pager)
    }

    /// Reads `pid` and checks the frame held that page: the latch the
    /// lookup returned is on a frame holding `pid`, whatever eviction and
    /// loads of other pages did meanwhile. Returns its version.
    pub(super) fn read(pool: &BufferPool, pager: &Pager, pid: u64) -> u64 {
        let r = pool.fix_shared(pager, pid).unwrap();
        assert_eq!(
            page::id(r.bytes()),
            pid,
            "latched a frame holding another page"
        );
        page::aux(r.bytes())
    }

    /// Bumps `pid`'s version under its exclusive latch.
    pub(super) fn bump(pool: &BufferPool, pager: &Pager, pid: u64) {
        let mut w = pool.fix_exclusive(pager, pid).unwrap();
        assert_eq!(
            page::id(w.bytes()),
            pid,
            "latched a frame holding another page"
        );
        let v = page::aux(w.bytes());
        page::set_aux(w.bytes_mut().unwrap(), v + 1);
    }

    /// Checks that every frame's recorded content ([`Frame::content`])
    /// is what its latched state says: the sweep for dirty pages trusts
    /// it to pass clean and empty frames without their latch.
    pub(super) fn assert_contents(pool: &BufferPool) {
        for (i, f) in pool.frames.iter().enumerate() {
            let g = f.latch.read();
            let want = match (g.state, g.dirty) {
                (FrameState::Page, true) => Content::Dirty,
                (FrameState::Page, false) => Content::Clean,
                _ => Content::Empty,
            };
            assert_eq!(
                f.recorded(),
                want,
                "frame {i} ({:?}, page {}, dirty {}) records the wrong content",
                g.state,
                g.pid,
                g.dirty
            );
        }
    }

    /// Evicts whatever CLOCK picks (it skips latched frames) and frees it;
    /// whether it found one.
    pub(super) fn evict(pool: &BufferPool, pager: &Pager) -> bool {
        // Two sweeps: a referenced page gets its second chance in the first.
        match evict::evict_one(pool, pager, 2 * pool.frames.len()).unwrap() {
            Some(fi) => {
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
                true
            }
            None => false,
        }
    }
}

/// Model checks of the page-latch protocol on this code: lookups that
/// latch and revalidate a frame, loads that claim a frame for a page id,
/// writers that dirty a page, and CLOCK eviction that writes a dirty page
/// to a new block and unpublishes it, all racing. `RUSTFLAGS="--cfg loom"
/// cargo test -p tidemark --release --lib cache::loom_tests` (see README,
/// opt-in suites).
#[cfg(all(test, loom))]
mod loom_tests {
    use super::testkit::{bump, evict, read, setup};
    use super::*;

    /// After the threads: each page is in at most one frame, and reads
    /// back with every version bump (none lost to an eviction or reload).
    fn check_end(pool: &BufferPool, pager: &Pager, want: [u64; 2]) {
        let (mut used, mut standby) = (0, 0);
        for f in pool.frames.iter() {
            match f.latch.read().state {
                FrameState::Page | FrameState::Shadow | FrameState::Held => used += 1,
                FrameState::Standby => standby += 1,
                FrameState::Free => {}
            }
        }
        assert_eq!(
            pool.used.load(Ordering::SeqCst),
            used,
            "frames in use miscounted"
        );
        assert_eq!(
            pool.standby.load(Ordering::SeqCst),
            standby,
            "standby miscounted"
        );
        for pid in 1..=2u64 {
            let holding = pool
                .frames
                .iter()
                .filter(|f| {
                    let g = f.latch.read();
                    matches!(g.state, FrameState::Page | FrameState::Standby) && g.pid == pid
                })
                .count();
            assert!(holding <= 1, "page {pid} is cached in {holding} frames");
            let f = pager.map.frame(pid);
            if f != NO_FRAME {
                let g = pool.frames[f as usize].latch.read();
                assert!(
                    matches!(g.state, FrameState::Page | FrameState::Standby) && g.pid == pid,
                    "the page map names frame {f} for page {pid}, which holds {:?} {}",
                    g.state,
                    g.pid
                );
            }
            assert_eq!(
                read(pool, pager, pid),
                want[pid as usize - 1],
                "page {pid} lost a write"
            );
        }
    }

    /// Explores `f` with up to 4 preemptions per execution (33 s here for
    /// both models; unbounded did not finish in 5 minutes). Prints how
    /// many executions were checked.
    fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = runs.clone();
        let mut m = loom::model::Builder::new();
        m.preemption_bound = Some(4);
        m.check(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            f()
        });
        eprintln!(
            "{name}: {} executions checked",
            runs.load(Ordering::Relaxed)
        );
    }

    /// A reader and a writer of page 1 race an evictor, with two frames:
    /// loads of page 1 by both, its eviction (dirty or clean) and reload.
    #[test]
    fn lookups_loads_and_eviction_of_one_page() {
        model("lookups, loads and eviction of one page", || {
            let (pool, pager) = setup(2);
            let (p1, g1) = (pool.clone(), pager.clone());
            let reader = loom::thread::spawn(move || {
                let v = read(&p1, &g1, 1);
                assert!(v <= 1);
                let w = read(&p1, &g1, 1);
                assert!(w >= v, "a version went back: {v} then {w}");
            });
            let (p2, g2) = (pool.clone(), pager.clone());
            let writer = loom::thread::spawn(move || bump(&p2, &g2, 1));
            evict(&pool, &pager);
            evict(&pool, &pager);
            reader.join().unwrap();
            writer.join().unwrap();
            check_end(&pool, &pager, [1, 0]);
        });
    }

    /// Two writers of different pages with one frame each needed and only
    /// two frames, racing an evictor: frames change pages under lookups.
    #[test]
    fn frames_change_pages_under_lookups() {
        model("frames change pages under lookups", || {
            let (pool, pager) = setup(2);
            let (p1, g1) = (pool.clone(), pager.clone());
            let a = loom::thread::spawn(move || {
                bump(&p1, &g1, 1);
                read(&p1, &g1, 2);
            });
            let (p2, g2) = (pool.clone(), pager.clone());
            let b = loom::thread::spawn(move || {
                bump(&p2, &g2, 2);
                read(&p2, &g2, 1);
            });
            evict(&pool, &pager);
            a.join().unwrap();
            b.join().unwrap();
            check_end(&pool, &pager, [1, 1]);
        });
    }

    /// A scan's cached-only lookup of page 1 (`fix_shared_cached`) races
    /// the discard of page 1 and the freeing of its id, while another
    /// thread loads page 2 into whichever frame is free: the lookup gets
    /// page 1 itself or nothing, never another page's frame, and once
    /// freed page 1 is in no frame (the lookup never loads it back).
    #[test]
    fn cached_lookups_race_a_page_being_freed() {
        model("cached lookups race a page being freed", || {
            let (pool, pager) = setup(2);
            read(&pool, &pager, 1);
            let (p1, g1) = (pool.clone(), pager.clone());
            let scan = loom::thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(r) = p1.fix_shared_cached(&g1, 1) {
                        assert_eq!(
                            crate::page::id(r.bytes()),
                            1,
                            "latched a frame holding another page"
                        );
                    }
                }
            });
            let (p2, g2) = (pool.clone(), pager.clone());
            let other = loom::thread::spawn(move || {
                read(&p2, &g2, 2);
            });
            pool.discard(&pager, 1).unwrap();
            pager.free_pid(1);
            scan.join().unwrap();
            other.join().unwrap();
            assert_eq!(pager.map.frame(1), NO_FRAME);
            let holding = pool
                .frames
                .iter()
                .filter(|f| {
                    let g = f.latch.read();
                    g.state == FrameState::Page && g.pid == 1
                })
                .count();
            assert_eq!(holding, 0, "a freed page is cached");
        });
    }

    /// Page 1 is in standby (its frame free, the page still mapped) while
    /// a reader looks it up, a writer loads page 2 into whichever frame it
    /// gets (perhaps page 1's, unmapping it), and the main thread takes a
    /// frame and gives it back: the reader gets page 1 or a reload of it,
    /// never another page, no page is cached twice, and the page map names
    /// only frames holding its pages.
    #[test]
    fn standby_pages_race_lookups_and_takers() {
        model("standby pages race lookups and takers", || {
            let (pool, pager) = setup(2);
            read(&pool, &pager, 1);
            assert!(evict::evict_to_standby(&pool, &pager, 4).unwrap());
            let (p1, g1) = (pool.clone(), pager.clone());
            let reader = loom::thread::spawn(move || assert_eq!(read(&p1, &g1, 1), 0));
            let (p2, g2) = (pool.clone(), pager.clone());
            let writer = loom::thread::spawn(move || bump(&p2, &g2, 2));
            if let Some(fi) = pool.take_free(&pager, Take::Spaced) {
                pool.used.fetch_add(1, Ordering::AcqRel);
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
            }
            reader.join().unwrap();
            writer.join().unwrap();
            check_end(&pool, &pager, [0, 1]);
        });
    }

    /// Page 1 is dirty and referenced (bumped, then read); a writer bumps
    /// it again while the main thread brings the dirty pages down (which
    /// cleans page 1 in place when it finds it referenced and dirty) and
    /// then evicts twice, so the end check reads page 1 back from its
    /// block: no bump is lost whether it lands before, during or after the
    /// write-back, and the dirty count matches the dirty frames.
    #[test]
    fn cleaning_races_writes_and_eviction() {
        model("cleaning races writes and eviction", || {
            let (pool, pager) = setup(2);
            bump(&pool, &pager, 1);
            read(&pool, &pager, 1);
            let (p1, g1) = (pool.clone(), pager.clone());
            let writer = loom::thread::spawn(move || bump(&p1, &g1, 1));
            if let evict::Relief::Evicted(fi) = evict::reduce_dirty(&pool, &pager, 2, None).unwrap()
            {
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
            }
            writer.join().unwrap();
            evict(&pool, &pager);
            evict(&pool, &pager);
            let dirty_frames = pool
                .frames
                .iter()
                .filter(|f| {
                    let g = f.latch.read();
                    g.state == FrameState::Page && g.dirty
                })
                .count();
            assert_eq!(pool.dirty.load(Ordering::SeqCst), dirty_frames);
            super::testkit::assert_contents(&pool);
            check_end(&pool, &pager, [2, 0]);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::testkit::{assert_contents, bump, evict, read, setup, setup_cfg};
    use super::*;
    use std::time::Duration;

    /// A page made dirty, evicted and made dirty again, many times in one
    /// epoch, goes onto the dirty list once; in the next epoch, once more.
    #[test]
    fn a_page_is_listed_dirty_once_per_epoch() {
        let (pool, pager) = setup(2);
        let listed = |pid: u64| {
            pager
                .dirty_list
                .lock()
                .iter()
                .filter(|&&p| p == pid)
                .count()
        };
        for _ in 0..50 {
            bump(&pool, &pager, 1);
            assert_eq!(cached_dirty(&pool, 1), Some(true));
            while evict(&pool, &pager) {}
            assert_eq!(cached_dirty(&pool, 1), None, "page 1 was evicted");
        }
        // Both pages were made (dirty) by `setup` in this epoch too.
        assert_eq!(listed(1), 1);
        assert_eq!(listed(2), 1);
        // A cut: the list is taken and the epoch moves on.
        {
            let mut st = pager.state.lock();
            let mut taken = std::mem::take(&mut *pager.dirty_list.lock());
            taken.sort_unstable();
            assert_eq!(taken, vec![1, 2]);
            st.epoch += 1;
            pager.epoch.store(st.epoch, Ordering::Release);
        }
        for _ in 0..5 {
            bump(&pool, &pager, 1);
            bump(&pool, &pager, 2);
            while evict(&pool, &pager) {}
        }
        assert_eq!(listed(1), 1);
        assert_eq!(listed(2), 1);
    }

    fn cached_dirty(pool: &BufferPool, pid: u64) -> Option<bool> {
        pool.frames.iter().find_map(|f| {
            let g = f.latch.read();
            (g.state == FrameState::Page && g.pid == pid).then_some(g.dirty)
        })
    }

    /// A thread taking frames signals the workers only once usage passes
    /// `wake_at`, a quarter of the way from the target to the trigger, and
    /// not as soon as it passes the target: a woken worker evicts down to
    /// the target, so each signal is worth a batch of frames.
    #[test]
    fn taking_frames_wakes_the_workers_only_past_a_quarter_of_the_way_to_the_trigger() {
        let (pool, pager) = setup_cfg(PoolConfig {
            page_size: crate::page::DEFAULT_PAGE_SIZE,
            frames: 64,
            target: 32,
            trigger: 60,
            dirty_target: 64,
            dirty_trigger: 64,
        });
        assert_eq!(pool.wake_at(), 39);
        let wakes = || pool.counters.worker_wakes.load(Ordering::SeqCst);
        let mut pid = 3;
        while pool.used.load(Ordering::SeqCst) < 39 {
            drop(pool.new_page(&pager, pid).unwrap());
            pid += 1;
        }
        assert_eq!(wakes(), 0, "woken at or below wake_at");
        drop(pool.new_page(&pager, pid).unwrap());
        assert_eq!(pool.used.load(Ordering::SeqCst), 40);
        assert_eq!(wakes(), 1, "not woken past wake_at");
    }

    /// A checkpoint's shadow copy takes a frame given back while one
    /// waits, however few wait, where a page takes a frame never used
    /// until an eighth of the frames wait: the writer's copy then lands in
    /// memory already touched, and the frames used stay a prefix.
    #[test]
    fn a_shadow_takes_a_frame_given_back_before_one_never_used() {
        let (pool, pager) = setup(64);
        // `setup` cached two pages and evicted them: frames 0 and 1 wait.
        assert_eq!(pool.clock_span(), 2);
        let shadow = pool
            .take_free(&pager, Take::GivenBackFirst)
            .expect("two frames wait");
        assert!(shadow < 2, "took frame {shadow}, never used");
        assert_eq!(pool.clock_span(), 2);
        // One frame waits, fewer than 64 / 8: a page's frame is a new one.
        let page = pool.take_free(&pager, Take::Spaced).expect("62 never used");
        assert_eq!(page, 2);
        assert_eq!(pool.clock_span(), 3);
        // The last frame waiting goes to a shadow too; with the queue
        // empty, a shadow takes a frame never used.
        let last_waiting = pool
            .take_free(&pager, Take::GivenBackFirst)
            .expect("one waits");
        assert!(last_waiting < 2 && last_waiting != shadow);
        assert_eq!(pool.take_free(&pager, Take::GivenBackFirst), Some(3));
    }

    /// A frame's modification count only grows, whatever pages come and
    /// go in it: a checkpoint that read a page's count at its capture
    /// must never find the same count on the page loaded again and changed.
    #[test]
    fn a_frames_modification_count_is_not_reset_by_a_new_page() {
        // Eight frames, two given back by `setup`: each new page takes the
        // frame that waited longest, so frames are reused at once.
        let (pool, pager) = setup(8);
        let (fi, seen) = {
            let mut w = pool.new_page(&pager, 3).unwrap();
            crate::btree::node::init_leaf(w.bytes_mut().unwrap(), 3);
            w.bytes_mut().unwrap();
            (w.fi, w.g.modcount)
        };
        assert!(seen >= 2, "two changes counted, {seen}");
        while evict(&pool, &pager) {}
        // Page 3 back, and other pages, until one lands in frame `fi`.
        let mut reused = false;
        for pid in [3, 4, 5, 6] {
            let mut w = if pid == 3 {
                pool.fix_exclusive(&pager, pid).unwrap()
            } else {
                pool.new_page(&pager, pid).unwrap()
            };
            if w.fi == fi {
                assert!(w.g.modcount >= seen, "count fell to {}", w.g.modcount);
                w.bytes_mut().unwrap();
                assert!(
                    w.g.modcount > seen,
                    "a change on the new page left the count at {seen}"
                );
                reused = true;
                break;
            }
            drop(w);
            while evict(&pool, &pager) {}
        }
        assert!(reused, "frame {fi} was never used again");
    }

    /// A cache that holds little keeps its pages in a prefix of the frames:
    /// frames given back are taken again once an eighth of the frames wait
    /// in the queue, and CLOCK laps (`clock_span`) cover that prefix, not
    /// the cache.
    #[test]
    fn frames_given_back_are_reused_and_laps_cover_only_frames_used() {
        let (pool, pager) = setup(64);
        // `setup` cached two pages and evicted them: two frames used once.
        assert_eq!(pool.clock_span(), 2);
        // Ten pages at once, with two frames waiting (fewer than 64 / 8):
        // ten frames never used.
        let pages: Vec<_> = (3..=12)
            .map(|pid| {
                let mut w = pool.new_page(&pager, pid).unwrap();
                crate::btree::node::init_leaf(w.bytes_mut().unwrap(), pid);
                w
            })
            .collect();
        drop(pages);
        while evict(&pool, &pager) {}
        assert_eq!(pool.clock_span(), 12);
        // Now twelve wait: pages come and go in those twelve frames.
        for round in 0..50u64 {
            for pid in 1..=4 {
                read(&pool, &pager, pid);
            }
            while evict(&pool, &pager) {}
            assert_eq!(pool.clock_span(), 12, "round {round} took a new frame");
        }
        // A lap from anywhere visits only those twelve frames, not the 52
        // never used: from hand 12 a lap over all 64 would pass 52 empty
        // frames before coming back to the two pages.
        for pid in 1..=2 {
            read(&pool, &pager, pid);
        }
        pool.hand.store(12, Ordering::SeqCst);
        let fi = evict::evict_one(&pool, &pager, 2 * pool.frames.len())
            .unwrap()
            .expect("two unreferenced pages to choose from");
        let visited = pool.hand.load(Ordering::SeqCst) - 12;
        assert!(visited <= 12, "the hand visited {visited} frames");
        let g = pool.frames[fi as usize].latch.write();
        pool.release_frame(fi, g);
        // Every frame not holding a page can still be taken, once.
        let mut taken = Vec::new();
        while let Some(f) = pool.take_free(&pager, Take::Spaced) {
            taken.push(f);
        }
        taken.sort_unstable();
        taken.dedup();
        assert_eq!(taken.len(), 64 - 1);
        assert_eq!(pool.clock_span(), 64);
    }

    /// The background worker cleans a hot dirty page at most once per
    /// `RECLEAN_GAP` and once per checkpoint epoch; passing over it keeps
    /// its reference bit, so it is not evicted instead; once both have
    /// passed, or for an application thread (unpaced), it is cleaned
    /// again. No write is lost on the way.
    #[test]
    fn the_worker_cleans_a_hot_page_at_most_once_per_gap_and_epoch() {
        let (pool, pager) = setup(4);
        bump(&pool, &pager, 1);
        read(&pool, &pager, 1); // found cached: referenced
        let t0 = Instant::now();
        let paced = |at: Duration| evict::reduce_dirty(&pool, &pager, 4, Some(t0 + at));
        assert!(matches!(
            paced(Duration::ZERO).unwrap(),
            evict::Relief::Cleaned
        ));
        assert_eq!(cached_dirty(&pool, 1), Some(false));
        bump(&pool, &pager, 1); // dirty again, and referenced
        for ms in [1, 10, 500] {
            assert!(
                matches!(
                    paced(Duration::from_millis(ms)).unwrap(),
                    evict::Relief::Nothing
                ),
                "cleaned again {ms} ms after"
            );
            assert_eq!(cached_dirty(&pool, 1), Some(true), "evicted at {ms} ms");
        }
        assert_eq!(pool.dirty.load(Ordering::SeqCst), 1);
        // The gap has passed, but no checkpoint has cut since the
        // cleaning: the checkpoint will write the page once anyway.
        let after = evict::RECLEAN_GAP + Duration::from_millis(1);
        for late in [after, after * 30] {
            assert!(
                matches!(paced(late).unwrap(), evict::Relief::Nothing),
                "cleaned again in the same epoch {late:?} after"
            );
            assert_eq!(cached_dirty(&pool, 1), Some(true));
        }
        // A cut moves the epoch on: after the gap, cleaned again.
        pager.epoch.fetch_add(1, Ordering::SeqCst);
        assert!(matches!(paced(after).unwrap(), evict::Relief::Cleaned));
        assert_eq!(pool.dirty.load(Ordering::SeqCst), 0);
        // In a new epoch, the gap alone still holds it back.
        bump(&pool, &pager, 1);
        pager.epoch.fetch_add(1, Ordering::SeqCst);
        assert!(matches!(
            paced(after + Duration::from_millis(10)).unwrap(),
            evict::Relief::Nothing
        ));
        assert_eq!(cached_dirty(&pool, 1), Some(true));
        // An application thread over the dirty trigger is not paced.
        assert!(matches!(
            evict::reduce_dirty(&pool, &pager, 4, None).unwrap(),
            evict::Relief::Cleaned
        ));
        while evict(&pool, &pager) {}
        assert_eq!(cached_dirty(&pool, 1), None);
        assert_eq!(read(&pool, &pager, 1), 3, "a write was lost");
    }

    /// The frames `take_free` hands out until it has none, checked
    /// distinct.
    fn take_all(pool: &BufferPool, pager: &Pager) -> Vec<u32> {
        let mut taken = Vec::new();
        while let Some(f) = pool.take_free(pager, Take::Spaced) {
            assert_eq!(pool.frames[f as usize].latch.read().state, FrameState::Held);
            taken.push(f);
        }
        let mut distinct = taken.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), taken.len(), "a frame was handed out twice");
        taken
    }

    /// Gives back frames `take_all` handed out (counted in `used` first,
    /// as `acquire_frame` counts them).
    fn give_all(pool: &BufferPool, taken: &[u32]) {
        for &f in taken {
            pool.used.fetch_add(1, Ordering::SeqCst);
            let g = pool.frames[f as usize].latch.write();
            pool.release_frame(f, g);
        }
    }

    /// The frame holding `pid`, as the page map names it, and its state.
    fn frame_of(pool: &BufferPool, pager: &Pager, pid: u64) -> Option<(u32, FrameState)> {
        let f = pager.map.frame(pid);
        (f != NO_FRAME).then(|| (f, pool.frames[f as usize].latch.read().state))
    }

    /// A page the worker evicts goes to standby: its frame is free (not in
    /// `used`), yet a lookup finds the page there and takes it back, with
    /// no read of the file, shared or exclusive.
    #[test]
    fn a_page_in_standby_is_taken_back_without_a_read() {
        let (pool, pager) = setup(64);
        read(&pool, &pager, 1);
        let reads = pager.counters.pages_read.load(Ordering::SeqCst);
        assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap());
        let (f, state) = frame_of(&pool, &pager, 1).expect("still mapped");
        assert_eq!(state, FrameState::Standby);
        assert_eq!(pool.used.load(Ordering::SeqCst), 0);
        assert_eq!(pool.standby.load(Ordering::SeqCst), 1);
        assert_contents(&pool);

        assert_eq!(read(&pool, &pager, 1), 0);
        assert_eq!(frame_of(&pool, &pager, 1), Some((f, FrameState::Page)));
        assert_eq!(pool.used.load(Ordering::SeqCst), 1);
        assert_eq!(pool.standby.load(Ordering::SeqCst), 0);
        assert_eq!(pool.counters.reclaimed.load(Ordering::SeqCst), 1);

        // Referenced by that lookup: the first lap spares it.
        assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap());
        assert_eq!(frame_of(&pool, &pager, 1), Some((f, FrameState::Standby)));
        bump(&pool, &pager, 1);
        assert_eq!(frame_of(&pool, &pager, 1), Some((f, FrameState::Page)));
        assert_eq!(pool.dirty.load(Ordering::SeqCst), 1);
        assert_eq!(read(&pool, &pager, 1), 1);
        assert_eq!(pool.counters.reclaimed.load(Ordering::SeqCst), 2);
        assert_eq!(pager.counters.pages_read.load(Ordering::SeqCst), reads);
        assert_contents(&pool);

        // Dirty when the worker takes it: written first, then in standby,
        // and read back from its frame, not its new block.
        assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap());
        assert_eq!(pool.dirty.load(Ordering::SeqCst), 0);
        assert_eq!(frame_of(&pool, &pager, 1), Some((f, FrameState::Standby)));
        assert_eq!(read(&pool, &pager, 1), 1);
        assert_eq!(pager.counters.pages_read.load(Ordering::SeqCst), reads);
    }

    /// Frames in standby are free: a thread that needs a frame takes them
    /// once no others are left, unmapping their pages, which are then read
    /// from the file again, unchanged.
    #[test]
    fn taking_a_frame_in_standby_unmaps_its_page() {
        let (pool, pager) = setup(64);
        bump(&pool, &pager, 2);
        read(&pool, &pager, 1);
        while evict::evict_to_standby(&pool, &pager, 128).unwrap() {}
        assert_eq!(
            frame_of(&pool, &pager, 1).map(|x| x.1),
            Some(FrameState::Standby)
        );
        assert_eq!(
            frame_of(&pool, &pager, 2).map(|x| x.1),
            Some(FrameState::Standby)
        );
        assert_eq!(pool.used.load(Ordering::SeqCst), 0);
        assert_eq!(pool.standby.load(Ordering::SeqCst), 2);

        let taken = take_all(&pool, &pager);
        assert_eq!(taken.len(), 64);
        assert_eq!(pool.standby.load(Ordering::SeqCst), 0);
        assert_eq!(frame_of(&pool, &pager, 1), None);
        assert_eq!(frame_of(&pool, &pager, 2), None);
        assert_eq!(pool.counters.standby_taken.load(Ordering::SeqCst), 2);
        give_all(&pool, &taken);
        assert_eq!(pool.used.load(Ordering::SeqCst), 0);

        let reads = pager.counters.pages_read.load(Ordering::SeqCst);
        assert_eq!(read(&pool, &pager, 1), 0);
        assert_eq!(read(&pool, &pager, 2), 1);
        assert_eq!(pager.counters.pages_read.load(Ordering::SeqCst), reads + 2);
        assert_contents(&pool);
    }

    /// A page taken back from standby leaves its frame's entry on the free
    /// queue. Whoever pops the entry passes the frame by, whether the page
    /// is still in it or eviction has since emptied it for a thread of its
    /// own; the frame is queued again, once, when it is next given back.
    #[test]
    fn a_frame_taken_back_from_standby_is_passed_by_on_the_queue() {
        for emptied in [false, true] {
            let (pool, pager) = setup(64);
            read(&pool, &pager, 1);
            assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap());
            read(&pool, &pager, 1);
            let (f, _) = frame_of(&pool, &pager, 1).expect("cached");
            let held = if emptied {
                let e = evict::evict_one(&pool, &pager, 128).unwrap();
                assert_eq!(e, Some(f), "page 1 is the only page to evict");
                assert_eq!(pool.frames[f as usize].latch.read().state, FrameState::Held);
                e
            } else {
                None
            };
            let taken = take_all(&pool, &pager);
            assert_eq!(taken.len(), 63);
            assert!(!taken.contains(&f), "took frame {f}, which is in use");
            if emptied {
                assert_eq!(frame_of(&pool, &pager, 1), None);
            } else {
                assert_eq!(frame_of(&pool, &pager, 1), Some((f, FrameState::Page)));
            }
            match held {
                Some(f) => {
                    let g = pool.frames[f as usize].latch.write();
                    pool.release_frame(f, g);
                }
                None => assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap()),
            }
            assert_eq!(take_all(&pool, &pager), [f]);
            assert_eq!(frame_of(&pool, &pager, 1), None);
            give_all(&pool, &taken);
            give_all(&pool, &[f]);
            assert_eq!(take_all(&pool, &pager).len(), 64);
        }
    }

    /// A page freed while in standby leaves the page map; its frame stays
    /// free and is handed out once.
    #[test]
    fn discarding_a_page_in_standby_frees_its_frame_once() {
        let (pool, pager) = setup(64);
        read(&pool, &pager, 1);
        assert!(evict::evict_to_standby(&pool, &pager, 128).unwrap());
        pool.discard(&pager, 1).unwrap();
        assert_eq!(frame_of(&pool, &pager, 1), None);
        assert_eq!(pool.standby.load(Ordering::SeqCst), 0);
        assert_eq!(pool.used.load(Ordering::SeqCst), 0);
        assert_eq!(take_all(&pool, &pager).len(), 64);
        assert_eq!(pool.counters.standby_taken.load(Ordering::SeqCst), 0);
    }

    /// A page whose fresh block is in the write-back step in flight is not
    /// written over it: the eviction takes a block outside the step, frees
    /// the old one, and counts the move. Once the step is over, the page is
    /// written over its (new) own block again.
    #[test]
    fn a_page_whose_block_is_being_written_back_moves_out_of_the_step() {
        let (pool, pager) = setup(64);
        let at = pager.map.block(1);
        assert!(
            pager.alloc.is_fresh(at),
            "setup's eviction took a fresh block"
        );
        let moved = |p: &Pager| {
            p.counters
                .pages_moved_from_write_back
                .load(Ordering::SeqCst)
        };
        let used = pager.alloc.used();
        pager.alloc.set_writing_back(Some((at, at + 1)));
        bump(&pool, &pager, 1);
        while evict(&pool, &pager) {}
        let now = pager.map.block(1);
        assert_ne!(now, at, "written over a block being written back");
        assert_eq!(moved(&pager), 1);
        assert_eq!(read(&pool, &pager, 1), 1, "the move lost the write");
        assert_eq!(
            pager.alloc.used(),
            used,
            "the old fresh block was not freed"
        );
        while evict(&pool, &pager) {}
        pager.alloc.set_writing_back(None);
        bump(&pool, &pager, 1);
        while evict(&pool, &pager) {}
        assert_eq!(pager.map.block(1), now, "outside a step, the block is kept");
        assert_eq!(moved(&pager), 1);
        assert_eq!(read(&pool, &pager, 1), 2);
    }

    /// A page evicted again between two cuts is written over the block its
    /// first eviction gave it: no checkpoint references that block, and the
    /// page takes no other. After a cut, which makes every block so far part
    /// of the checkpoint being written, the page's next eviction takes a new
    /// block and leaves the old one, with its bytes, as it was.
    #[test]
    fn a_page_evicted_again_before_a_cut_keeps_its_fresh_block() {
        let (pool, pager) = setup(64);
        let at = pager.map.block(1);
        assert!(
            pager.alloc.is_fresh(at),
            "setup's eviction took a fresh block"
        );
        let used = pager.alloc.used();
        let rewritten = |p: &Pager| p.counters.pages_rewritten_in_place.load(Ordering::SeqCst);
        let before = rewritten(&pager);
        for v in 1..=3 {
            bump(&pool, &pager, 1);
            while evict(&pool, &pager) {}
            assert_eq!(pager.map.block(1), at, "eviction {v} moved the page");
            assert_eq!(read(&pool, &pager, 1), v, "eviction {v} lost the write");
            while evict(&pool, &pager) {}
        }
        assert_eq!(pager.alloc.used(), used, "blocks were taken");
        assert_eq!(rewritten(&pager), before + 3);

        // The cut, as `checkpoint::take_cut` makes it.
        {
            let mut st = pager.state.lock();
            st.epoch += 1;
            pager.epoch.store(st.epoch, Ordering::SeqCst);
            pager.alloc.clear_fresh();
        }
        let mut image = vec![0u8; crate::page::DEFAULT_PAGE_SIZE];
        pager
            .file
            .read_exact_at(&mut image, at * crate::page::DEFAULT_PAGE_SIZE as u64)
            .unwrap();
        bump(&pool, &pager, 1);
        while evict(&pool, &pager) {}
        let moved = pager.map.block(1);
        assert_ne!(
            moved, at,
            "a block the checkpoint references was overwritten"
        );
        assert_eq!(rewritten(&pager), before + 3);
        let mut now = vec![0u8; image.len()];
        pager
            .file
            .read_exact_at(&mut now, at * crate::page::DEFAULT_PAGE_SIZE as u64)
            .unwrap();
        assert!(now == image, "the checkpoint's block changed");
        // The new block is fresh: the next eviction rewrites it.
        bump(&pool, &pager, 1);
        while evict(&pool, &pager) {}
        assert_eq!(pager.map.block(1), moved);
        assert_eq!(rewritten(&pager), before + 4);
        assert_eq!(read(&pool, &pager, 1), 5);
    }

    /// A pool of 64 frames with dirty target 0 and the dirty trigger given,
    /// whose usage target leaves room (usage at or under the paced limit)
    /// or none (every frame in use is over it).
    fn pool_with_room(
        room: bool,
        dirty_trigger: usize,
    ) -> (std::sync::Arc<BufferPool>, std::sync::Arc<Pager>) {
        setup_cfg(PoolConfig {
            page_size: crate::page::DEFAULT_PAGE_SIZE,
            frames: 64,
            target: if room { 64 } else { 1 },
            trigger: 64,
            dirty_target: 0,
            dirty_trigger,
        })
    }

    /// Page 1 written, read (so referenced) and cleaned by one step of the
    /// worker: the start of a hot page.
    fn cleaned_while_referenced(pool: &BufferPool, pager: &Pager) {
        bump(pool, pager, 1);
        read(pool, pager, 1);
        let used = pool.used.load(Ordering::SeqCst);
        assert!(matches!(
            evict::clean_step(pool, pager, used).unwrap(),
            evict::Relief::Cleaned
        ));
    }

    /// A dirty page not touched since the hand last passed is cleaned and
    /// kept while the cache has room (usage at or under the paced limit):
    /// evicting it would only read it back on its next use. Near the usage
    /// target it is written and evicted, as a page likely done with.
    #[test]
    fn an_untouched_dirty_page_is_kept_cached_while_the_cache_has_room() {
        for room in [true, false] {
            let (pool, pager) = pool_with_room(room, 64);
            bump(&pool, &pager, 1);
            for f in pool.frames.iter() {
                f.referenced.store(false, Ordering::SeqCst);
            }
            let used = pool.used.load(Ordering::SeqCst);
            let written = pager.counters.pages_written.load(Ordering::SeqCst);
            let evicted = pool.counters.evicted_dirty.load(Ordering::SeqCst);
            let step = evict::clean_step(&pool, &pager, used).unwrap();
            assert_eq!(
                pager.counters.pages_written.load(Ordering::SeqCst),
                written + 1,
                "room {room}: the dirty page was not written"
            );
            if room {
                assert!(matches!(step, evict::Relief::Cleaned), "room {room}");
                assert_eq!(cached_dirty(&pool, 1), Some(false));
                assert_eq!(pool.counters.evicted_dirty.load(Ordering::SeqCst), evicted);
            } else {
                let evict::Relief::Evicted(fi) = step else {
                    panic!("room {room}: the untouched dirty page was not evicted");
                };
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
                assert_eq!(cached_dirty(&pool, 1), None);
            }
            assert_eq!(pool.dirty.load(Ordering::SeqCst), 0);
            assert_contents(&pool);
            while evict(&pool, &pager) {}
            assert_eq!(read(&pool, &pager, 1), 1, "room {room}: the write was lost");
        }
    }

    /// A worker whose laps find every dirty page hot (cleaned this epoch and
    /// written again) waits longer after each such lap, from 10 ms doubling
    /// up to `RECLEAN_GAP`, instead of lapping the cache every 10 ms while
    /// the pages stay dirty until the next cut; after a cut it cleans them.
    #[test]
    fn the_worker_backs_off_while_every_dirty_page_is_hot() {
        let (pool, pager) = pool_with_room(true, 64);
        read(&pool, &pager, 2); // a clean page for the laps to pass
        cleaned_while_referenced(&pool, &pager);
        bump(&pool, &pager, 1); // dirty again: hot
        let written = pager.counters.pages_written.load(Ordering::SeqCst);
        let examined = pool.counters.examined.load(Ordering::SeqCst);
        let laps = std::thread::scope(|s| {
            let w = s.spawn(|| evict::run_eviction_worker(&pool, &pager));
            std::thread::sleep(Duration::from_millis(1500));
            let laps = pool.counters.examined.load(Ordering::SeqCst) - examined;
            // A cut: the page, cleaned in the epoch before, is cleaned again.
            pager.epoch.fetch_add(1, Ordering::SeqCst);
            pool.wake_workers();
            let deadline = Instant::now() + Duration::from_secs(30);
            while cached_dirty(&pool, 1) == Some(true) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            pool.shutdown.store(true, Ordering::SeqCst);
            pool.wake_workers();
            w.join().expect("the worker does not panic");
            laps
        });
        // Two frames a lap. Waits of 10, 20, 40, ... ms allow 8 laps in
        // 1.5 s, a bit more on a slow machine, where 10 ms each allowed 150.
        assert!(
            laps >= 2,
            "the worker never lapped ({laps} frames examined)"
        );
        assert!(laps <= 2 * 20, "{laps} frames examined in 1.5 s");
        assert_eq!(
            cached_dirty(&pool, 1),
            Some(false),
            "not cleaned after the cut"
        );
        assert_eq!(
            pager.counters.pages_written.load(Ordering::SeqCst),
            written + 1,
            "cleaned more than once"
        );
        while evict(&pool, &pager) {}
        assert_eq!(read(&pool, &pager, 1), 2, "a write was lost");
    }

    /// Over the dirty trigger alone, with room in the cache: once the
    /// worker finds every dirty page cleaned within `RECLEAN_GAP` (or this
    /// epoch), an application thread leaves them (no write, no eviction);
    /// in a cache near its usage target it cleans one as before.
    #[test]
    fn application_threads_leave_hot_dirty_pages_when_the_cache_has_room() {
        for room in [true, false] {
            let (pool, pager) = pool_with_room(room, 0);
            cleaned_while_referenced(&pool, &pager);
            let used = pool.used.load(Ordering::SeqCst);
            assert!(!pool.dirty_hot.load(Ordering::SeqCst));
            bump(&pool, &pager, 1); // dirty again within the gap
            let step = evict::clean_step(&pool, &pager, used).unwrap();
            assert_eq!(pool.dirty_hot.load(Ordering::SeqCst), room);
            if room {
                assert!(matches!(step, evict::Relief::Nothing));
                assert_eq!(cached_dirty(&pool, 1), Some(true));
            }
            bump(&pool, &pager, 1);
            let cleaned = pool.counters.cleaned.load(Ordering::SeqCst);
            let apps = pool.counters.app_evictions.load(Ordering::SeqCst);
            let examined = pool.counters.examined.load(Ordering::SeqCst);
            assert!(pool.dirty.load(Ordering::SeqCst) > pool.cfg.dirty_trigger);
            pool.help_if_over_trigger(&pager);
            let did = pool.counters.cleaned.load(Ordering::SeqCst) - cleaned;
            let helped = pool.counters.app_evictions.load(Ordering::SeqCst) - apps;
            let looked = pool.counters.examined.load(Ordering::SeqCst) - examined;
            if room {
                assert_eq!((did, helped), (0, 0), "cleaned a hot page again");
                assert_eq!(looked, 0, "walked the frames for nothing");
                assert_eq!(cached_dirty(&pool, 1), Some(true));
            } else {
                assert_eq!(cached_dirty(&pool, 1), Some(false), "left dirty");
            }
            while evict(&pool, &pager) {}
            assert_eq!(read(&pool, &pager, 1), 3, "a write was lost");
            assert_contents(&pool);
        }
    }

    /// Every way a frame changes hands or dirtiness (load, new page,
    /// modification, eviction clean and dirty, cleaning in place, a
    /// discarded page) leaves the content the sweep reads without a latch
    /// equal to the latched state, and the sweep still writes every dirty
    /// page: no version is lost, and bringing the dirty pages down to zero
    /// takes no more sweeps than there are dirty pages.
    #[test]
    fn recorded_contents_follow_every_change_of_a_frame() {
        let (pool, pager) = setup_cfg(PoolConfig {
            page_size: crate::page::DEFAULT_PAGE_SIZE,
            frames: 64,
            target: 64,
            trigger: 64,
            dirty_target: 0,
            dirty_trigger: 0,
        });
        // Pages 1..=2 exist (setup); 3..=99 are created here, more than
        // the 64 frames hold.
        let mut versions = vec![0u64; 100];
        for pid in 3..100u64 {
            let mut w = pool.new_page(&pager, pid).unwrap();
            crate::btree::node::init_leaf(w.bytes_mut().unwrap(), pid);
            drop(w);
            if pool.used.load(Ordering::SeqCst) > 48 {
                evict(&pool, &pager);
            }
        }
        assert_contents(&pool);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut discarded = std::collections::HashSet::new();
        for step in 0..4000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let pid = 1 + x % 99;
            if discarded.contains(&pid) {
                continue;
            }
            match (x >> 32) % 8 {
                0..=2 => {
                    bump(&pool, &pager, pid);
                    versions[pid as usize] += 1;
                }
                3 | 4 => assert_eq!(read(&pool, &pager, pid), versions[pid as usize]),
                5 => {
                    evict(&pool, &pager);
                }
                6 => {
                    let paced = ((x >> 40) & 1 == 0).then(Instant::now);
                    if let evict::Relief::Evicted(fi) =
                        evict::reduce_dirty(&pool, &pager, 64, paced).unwrap()
                    {
                        let g = pool.frames[fi as usize].latch.write();
                        pool.release_frame(fi, g);
                    }
                }
                _ if step % 97 == 0 => {
                    pool.discard(&pager, pid).unwrap();
                    discarded.insert(pid);
                }
                _ => {}
            }
            if pool.used.load(Ordering::SeqCst) > 56 {
                evict(&pool, &pager);
            }
            assert_contents(&pool);
        }
        let dirty = pool.dirty.load(Ordering::SeqCst);
        for _ in 0..dirty {
            if let evict::Relief::Evicted(fi) =
                evict::reduce_dirty(&pool, &pager, 2 * 64, None).unwrap()
            {
                let g = pool.frames[fi as usize].latch.write();
                pool.release_frame(fi, g);
            }
        }
        assert_eq!(
            pool.dirty.load(Ordering::SeqCst),
            0,
            "a dirty page was passed over"
        );
        assert_contents(&pool);
        for pid in 1..100u64 {
            if !discarded.contains(&pid) {
                assert_eq!(
                    read(&pool, &pager, pid),
                    versions[pid as usize],
                    "page {pid}"
                );
            }
        }
    }
}
