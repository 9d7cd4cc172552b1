//! The pager: reads and writes pages of the data file by logical page id,
//! and keeps the epoch bookkeeping that makes checkpoints consistent.
//!
//! Epochs: epoch `e` is the time between checkpoint cut `e - 1` and cut `e`.
//! Checkpoint `e` captures the state at cut `e`. Writers tag each page they
//! dirty with the current epoch; while checkpoint `e` runs (the `running`
//! state), a page still tagged `e` holds content the checkpoint needs, and
//! whoever touches it first (writer, evictor, checkpoint) preserves that
//! content for it (see `cache` and `checkpoint`).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::alloc::{BlockAlloc, Rewrite};
use crate::btree::node;
use crate::error::{Error, Result};
use crate::io::FileIo;
use crate::os_cache::OsCache;
use crate::page::{self, PageKind};
use crate::pagemap::{self, PageMap, MAX_PIDS, NO_BLOCK};

/// Smallest step, in blocks, by which the data file grows (16 MiB of
/// pages of 16 KiB; block counts here scale with the page size); larger
/// files grow by an eighth of their size.
const GROW_MIN_BLOCKS: u64 = 1024;

/// Blocks [`Pager::prepare_ahead`] populates per call (4 MiB), so that the
/// preparing thread checks for shutdown often.
const PREPARE_STEP_BLOCKS: u64 = 256;

/// Room within this many blocks (64 MiB) past the highest block handed out
/// is populated without pacing: allocations that find no free block take
/// it next.
const POPULATE_URGENT_BLOCKS: u64 = 4096;

/// Time constant, in seconds, of the file's growth rate that paces
/// population ([`PopulatePace`]).
const POPULATE_TAU_S: f64 = 10.0;

/// Population runs at this multiple of the file's recent growth rate, so
/// that it catches up with growth and then waits for more.
const POPULATE_PACE_MARGIN: f64 = 1.25;

/// Lowest pace of population, in blocks a second (4 MiB/s).
const POPULATE_FLOOR_BLOCKS_S: f64 = 256.0;

/// Smallest grant of the paced population (1 MiB), so each call does a
/// worthwhile amount.
const POPULATE_MIN_GRANT: u64 = 64;

/// How long after the last page written by eviction or cleaning the
/// preparing thread keeps populating grown room ([`PopulateGate`]).
const POPULATE_AFTER_WRITES: Duration = Duration::from_secs(1);

/// Whether [`Pager::prepare_ahead`] populates: only while the buffer pool
/// writes pages out (evictions and cleanings), that is, while application
/// threads and the eviction workers take new blocks whose first write
/// population moves off their path. A checkpoint writes its own pages, and
/// those writes may take their page-cache memory themselves: with nothing
/// evicted or cleaned, population only competed with the writers. In
/// `tidemark-bench checkpoint` (a 627 MB dirty set that stays in the
/// cache, so that only the checkpoint writes the file) the preparer
/// populated about 2.7 GB of room during the writer phase, up to 45 % of
/// a core, and each checkpoint wrote into memory readahead had cut into
/// 4 KiB folios. With the gate, over nine interleaved pairs: checkpoints
/// of 1.37 s against 1.68 s, and the writer's p99 beside them 30.4 us
/// against 36.4 us (medians; BENCHMARKS.md, "Population only while pages
/// are written out").
#[derive(Debug)]
pub(crate) struct PopulateGate {
    written: u64,
    seen: Option<Instant>,
}

impl PopulateGate {
    /// A gate closed until the count of pages written out moves from
    /// `written`.
    pub(crate) fn new(written: u64) -> Self {
        PopulateGate {
            written,
            seen: None,
        }
    }

    /// Whether to populate now, given the pool's count of pages written
    /// out by eviction and cleaning so far.
    pub(crate) fn open(&mut self, written: u64, now: Instant) -> bool {
        if written != self.written {
            self.written = written;
            self.seen = Some(now);
        }
        self.seen
            .is_some_and(|t| now.saturating_duration_since(t) < POPULATE_AFTER_WRITES)
    }
}

/// Paces [`Pager::prepare_ahead`]'s population of grown room. Populating a
/// block costs its page-cache memory being taken and zeroed: on the VMs the
/// benchmarks run on, about 3.5 s of CPU per GB for memory the guest has
/// not touched lately. The file grows by an eighth at a time (hundreds of
/// megabytes for a large file), and populating a whole step at once took
/// most of a core for a second or more from writers already using both
/// (BENCHMARKS.md, cache-pressure, "Population paced by the file's
/// growth"). Paced, the same work is spread over the seconds between
/// growth steps.
#[derive(Debug)]
struct PopulatePace {
    at: Instant,
    /// The file's length, in blocks, at the last call.
    have: u64,
    /// The file's growth, in blocks a second, weighted exponentially over
    /// [`POPULATE_TAU_S`].
    rate: f64,
    /// Blocks that may be populated now, at most one step.
    credit: f64,
}

impl PopulatePace {
    fn new(have: u64, now: Instant) -> Self {
        PopulatePace {
            at: now,
            have,
            rate: 0.0,
            credit: 0.0,
        }
    }

    /// Blocks that may be populated now, given the file's length `have`;
    /// `urgent` grants a whole step whatever the pace.
    fn grant(&mut self, have: u64, now: Instant, urgent: bool) -> u64 {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        let grown = have.saturating_sub(self.have);
        self.have = have;
        self.rate = self.rate * (-dt / POPULATE_TAU_S).exp() + grown as f64 / POPULATE_TAU_S;
        let pace = (self.rate * POPULATE_PACE_MARGIN).max(POPULATE_FLOOR_BLOCKS_S);
        let step = PREPARE_STEP_BLOCKS as f64;
        self.credit = (self.credit + dt * pace).min(step);
        if urgent {
            self.credit = (self.credit - step).max(0.0);
            return PREPARE_STEP_BLOCKS;
        }
        // At most one step, and whole blocks: the credit is below `step`.
        let n = self.credit as u64;
        if n < POPULATE_MIN_GRANT {
            return 0;
        }
        self.credit -= n as f64;
        n
    }
}

thread_local! {
    /// Each thread's buffer for packing the node pages with dead cells it
    /// writes (taken and put back around each write, so it is never
    /// borrowed twice).
    static PACKED: std::cell::Cell<Option<Box<[u8]>>> = const { std::cell::Cell::new(None) };
}

/// Room promised to one admitted write ([`Pager::promise`]), given back
/// when it is dropped: once the write is applied, the pages it made dirty
/// are counted as dirty instead.
pub(crate) struct Promise<'a> {
    promised: &'a AtomicU64,
    blocks: u64,
}

impl Promise<'_> {
    /// Keeps the room promised past this guard: the caller hands the count
    /// to [`Pager::adopt`] later (a commit's promise travels in its log
    /// ticket from admission to the end of its apply).
    pub(crate) fn keep(self) -> u64 {
        let blocks = self.blocks;
        std::mem::forget(self);
        blocks
    }
}

impl Drop for Promise<'_> {
    fn drop(&mut self) {
        self.promised.fetch_sub(self.blocks, Ordering::AcqRel);
    }
}

/// The length, in blocks, a file of `have` blocks grows to by one step.
fn grow_step(have: u64) -> u64 {
    have + (have / 8).max(GROW_MIN_BLOCKS)
}

/// Free bytes of the file system that growing ahead leaves alone: the
/// default `checkpoint_log_size`, as much log as may be written before a
/// checkpoint gives segments back.
const PREPARE_HEADROOM: u64 = crate::db::DEFAULT_CHECKPOINT_LOG_SIZE;

/// While the data file is flushed, [`Pager::prepare_ahead`] grows it only
/// when fewer than this many blocks (64 MiB of pages of 16 KiB) are left
/// beyond what allocation keeps ahead ([`Pager::ensure_room`]'s terms).
const FLUSH_GROWTH_FLOOR: u64 = 4096;

/// Clears [`Pager`]'s flush mark when dropped ([`Pager::flush_guard`]).
pub(crate) struct FlushGuard<'a>(&'a Pager);

impl Drop for FlushGuard<'_> {
    fn drop(&mut self) {
        let p = self.0;
        let took = p
            .since_open_ns()
            .saturating_sub(p.flush_since_ns.load(Ordering::Acquire));
        p.flush_ns.fetch_add(took, Ordering::AcqRel);
        p.flushing.store(false, Ordering::Release);
    }
}

/// What a running checkpoint knows about a page it must write.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pending {
    /// A writer modified the page after the cut; frame `.0` holds the
    /// content as of the cut.
    Shadow(u32),
    /// The evictor wrote the page's cut content to this block.
    Written(u64),
}

/// State of the checkpoint in progress.
pub(crate) struct Running {
    pub(crate) epoch: u64,
    /// Map entries changed after the cut: their value at the cut.
    pub(crate) map_before: HashMap<u64, u64>,
    pub(crate) pending: HashMap<u64, Pending>,
    /// Pages given a shadow frame, in the order the shadows were made. The
    /// checkpoint writes these first, so shadow frames live for about one
    /// page write instead of until the checkpoint reaches their page: a
    /// checkpoint of a large dirty set would otherwise fill the cache with
    /// shadows and push application threads into eviction.
    pub(crate) shadowed: Vec<u64>,
}

/// Epoch state, guarded by one mutex taken only around map changes (page
/// writes), never around I/O.
pub(crate) struct EpochState {
    pub(crate) epoch: u64,
    /// Map chunks with entries changed during the current epoch.
    pub(crate) dirty_chunks: BTreeSet<usize>,
    pub(crate) running: Option<Running>,
}

/// Blocks per chunk of [`StoredLens`] (1 GiB of data file, 128 KiB of
/// lengths).
const LENS_CHUNK_BLOCKS: u64 = 1 << 16;
/// Chunks a [`BlockChunks`] can hold: files up to 4 TiB (at 16 KiB
/// pages); blocks past that are read whole and flushed with the whole file.
const LENS_CHUNKS: usize = 1 << 12;
const _: () = assert!(page::MAX_PAGE_SIZE <= u16::MAX as usize);

/// How many bytes of each block of the data file hold its page, exactly, as
/// last written or read by this process (0: not known). A node page is
/// stored packed, and a leaf two thirds full has an image of about 11 KiB:
/// a read of only the image copies a third less from the operating
/// system's cache than one of the whole block, and read into the end of
/// the frame it puts every cell where the unpacked page keeps it
/// ([`node::unpack_tail`]). The length is only what to try: the image read
/// must hold that same length in its header and a matching checksum, or
/// the block is read whole and checked as any other (a block written
/// before this open, or rewritten without a record), so a wrong length
/// costs a second read, never a wrong page. Two bytes per block of file,
/// allocated a gigabyte of file at a time as blocks are used: outside
/// `cache_size`, 1/8,192 of the file.
struct StoredLens {
    lens: BlockChunks<AtomicU16, LENS_CHUNK_BLOCKS>,
}

impl StoredLens {
    fn new() -> StoredLens {
        StoredLens {
            lens: BlockChunks::new(),
        }
    }

    /// Bytes of `block` known to hold its page (0 if not known).
    fn get(&self, block: u64) -> usize {
        self.lens
            .slot(block, false)
            .map_or(0, |l| usize::from(l.load(Ordering::Relaxed)))
    }

    /// Records that the page in `block` takes its first `len` bytes.
    fn set(&self, block: u64, len: usize) {
        if let Some(l) = self.lens.slot(block, true) {
            // At most MAX_PAGE_SIZE, which fits (asserted above).
            l.store(len.min(page::MAX_PAGE_SIZE) as u16, Ordering::Relaxed);
        }
    }
}

/// An array of `T` indexed from 0, allocated `PER` slots at a time
/// as slots are first set, [`LENS_CHUNKS`] chunks at most; an index past
/// them has no slot. [`StoredLens`] keeps a slot per block and
/// [`Unflushed`] one per 64 blocks, both a chunk per 1 GiB of data file
/// at 16 KiB pages.
struct BlockChunks<T, const PER: u64> {
    chunks: Box<[OnceLock<Box<[T]>>]>,
}

impl<T: Default, const PER: u64> BlockChunks<T, PER> {
    fn new() -> Self {
        BlockChunks {
            chunks: (0..LENS_CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Slot `i`, its chunk allocated first if `create`; `None` past the
    /// last chunk, or if the chunk was never allocated and not `create`.
    fn slot(&self, i: u64, create: bool) -> Option<&T> {
        let chunk = self.chunks.get(usize::try_from(i / PER).ok()?)?;
        let slots = if create {
            chunk.get_or_init(|| (0..PER).map(|_| T::default()).collect())
        } else {
            chunk.get()?
        };
        // In range: the index is the remainder of a division by the
        // chunk's length.
        slots.get((i % PER) as usize)
    }

    /// Every allocated slot with its index, in order.
    fn allocated(&self) -> impl Iterator<Item = (u64, &T)> {
        self.chunks.iter().enumerate().flat_map(move |(c, chunk)| {
            chunk
                .get()
                .into_iter()
                .flat_map(move |slots| (c as u64 * PER..).zip(slots.iter()))
        })
    }
}

/// The blocks of the data file written since the last checkpoint's flush
/// began, one bit each, so that a checkpoint pushes to the device what its
/// image may need and not what writers wrote after its cut (see
/// `checkpoint::flush`). A block is marked once its write is complete and
/// before its page is mapped there or handed to a checkpoint, so every
/// block an image references was marked before that image's flush takes
/// the set. Bits are taken word by word: a block marked while the set is
/// taken goes to this flush or the next one, and either makes it durable.
/// Eight bytes per 64 blocks, allocated 1 GiB of data file at a time (at
/// 16 KiB pages) as blocks are written; a block past what the set can
/// hold sends the next flush back to syncing the whole file.
pub(crate) struct Unflushed {
    /// Word `w` holds blocks `64 w .. 64 w + 64`.
    words: BlockChunks<AtomicU64, { LENS_CHUNK_BLOCKS / 64 }>,
    /// A block past the set's reach was written since the last take.
    overflowed: AtomicBool,
}

/// What [`Unflushed::take`] found.
pub(crate) enum Written {
    /// These blocks, ascending.
    Blocks(Vec<u64>),
    /// Some block could not be recorded: the whole file must be flushed.
    Unknown,
}

impl Unflushed {
    fn new() -> Unflushed {
        Unflushed {
            words: BlockChunks::new(),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Records that `block`'s write completed.
    pub(crate) fn mark(&self, block: u64) {
        match self.words.slot(block / 64, true) {
            Some(w) => {
                w.fetch_or(1 << (block % 64), Ordering::AcqRel);
            }
            None => self.overflowed.store(true, Ordering::Release),
        }
    }

    /// Takes the blocks marked so far, leaving the set empty.
    pub(crate) fn take(&self) -> Written {
        let overflowed = self.overflowed.swap(false, Ordering::AcqRel);
        let mut blocks = Vec::new();
        for (i, w) in self.words.allocated() {
            if w.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = w.swap(0, Ordering::AcqRel);
            while bits != 0 {
                blocks.push(i * 64 + u64::from(bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
        if overflowed {
            Written::Unknown
        } else {
            Written::Blocks(blocks)
        }
    }
}

/// Bytes of its block the page in `buf` (as read or sealed) takes: the
/// image of a packed page, else the whole block.
fn stored_len(buf: &[u8]) -> usize {
    match page::image(buf) {
        0 => buf.len(),
        image => image,
    }
}

#[derive(Default)]
pub(crate) struct PagerCounters {
    pub(crate) pages_read: AtomicU64,
    pub(crate) pages_written: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    /// Of `pages_written`, evictions that wrote a page over its own fresh
    /// block ([`Pager::rewrite_fresh`]).
    pub(crate) pages_rewritten_in_place: AtomicU64,
    /// Evictions that would have written a page over its own fresh block
    /// but found that block in the write-back step in flight, and took a
    /// new one ([`Pager::rewrite_fresh`]).
    pub(crate) pages_moved_from_write_back: AtomicU64,
    /// Bytes of the data file read for pages.
    pub(crate) bytes_read: AtomicU64,
    /// Leaves merged into a sibling (`Tree::merge_underfull`).
    pub(crate) leaves_merged: AtomicU64,
    /// Empty leaves unlinked from their parent (`Tree::unlink_empty_leaf`).
    pub(crate) leaves_unlinked: AtomicU64,
    /// Branches merged into a sibling.
    pub(crate) branches_merged: AtomicU64,
    /// Times a root with one child took its content (a level less).
    pub(crate) roots_collapsed: AtomicU64,
    /// Times the data file grew.
    pub(crate) file_growths: AtomicU64,
    /// Of `file_growths`, those made by a thread that was allocating a
    /// block ([`Pager::ensure_room`]) rather than by the preparing thread.
    pub(crate) file_growths_by_writes: AtomicU64,
    /// Of `file_growths`, those made while the data file was flushed.
    pub(crate) file_growths_while_flushing: AtomicU64,
    /// Blocks [`Pager::prepare_ahead`] asked the operating system to cache.
    pub(crate) blocks_populated: AtomicU64,
    /// New blocks whose first write went to room grown since open and not
    /// yet populated: a write that takes page-cache memory itself.
    pub(crate) blocks_written_unpopulated: AtomicU64,
}

pub(crate) struct Pager {
    /// Bytes of every page and block of this database (its meta page
    /// records it; chosen at creation).
    pub(crate) page_size: usize,
    /// Map entries per chunk page at this page size.
    chunk_entries: usize,
    pub(crate) file: Arc<dyn FileIo>,
    pub(crate) map: PageMap,
    pub(crate) alloc: BlockAlloc,
    /// Mirror of `state.epoch`; stable for a writer inside the write gate.
    pub(crate) epoch: AtomicU64,
    /// loom's mutex under `cfg(loom)`: eviction updates the page map (loom
    /// atomics) while holding it.
    pub(crate) state: crate::sync::Mutex<EpochState>,
    /// Pages dirtied during the current epoch (may hold stale entries).
    pub(crate) dirty_list: Mutex<Vec<u64>>,
    next_pid: AtomicU64,
    /// Blocks the data file has room for (its length, preallocated).
    file_blocks: AtomicU64,
    /// Blocks of room promised to admitted writes still in progress: a
    /// commit between its admission and the end of its apply, a checkpoint
    /// between its admission and its meta page ([`Pager::promise`]).
    promised: AtomicU64,
    /// Serialises growing the file.
    grow: Mutex<()>,
    /// What each block holds, so reads take packed pages without the gap.
    stored: StoredLens,
    /// Blocks written since the last checkpoint's flush began.
    pub(crate) unflushed: Unflushed,
    /// Blocks below this are in the file and were either there at open or
    /// have been populated by [`Pager::prepare_ahead`].
    populated: AtomicU64,
    pace: Mutex<PopulatePace>,
    /// Whether the data file is being flushed (a checkpoint's or a
    /// write-back's steps and `fdatasync`, [`Pager::flush_guard`]): growing
    /// the file then waits for the device behind the flush's writes while
    /// holding the file's write lock ([`Pager::prepare_ahead`]).
    flushing: AtomicBool,
    /// When the flush in progress began, in nanoseconds since `opened`.
    flush_since_ns: AtomicU64,
    /// Nanoseconds the flushes that ended took in all.
    flush_ns: AtomicU64,
    opened: Instant,
    /// Free blocks the last write admission asked for (see
    /// [`Pager::ensure_space`]); allocations keep half as much again
    /// ahead, so writers seldom grow the file themselves.
    reserve: AtomicU64,
    pids: Mutex<PidFree>,
    stopped: AtomicBool,
    /// The database was closed (writes refused with [`Error::Closed`]).
    closed: AtomicBool,
    stop_reason: Mutex<String>,
    pub(crate) counters: PagerCounters,
    /// Bumped by every change of a tree's shape (a split, an unlinked
    /// leaf, a dropped table) while the changed branch is latched
    /// exclusively, so a scan that remembered its place in a branch can
    /// tell whether that place still holds (see [`crate::btree::ScanHint`]).
    pub(crate) shape_changes: AtomicU64,
    /// Whether the data file's pages stay in the OS page cache (see
    /// `os_cache`); set at open, then reviewed as the file's length changes.
    pub(crate) os_cache: OsCacheRule,
}

/// The rule for the data file's pages in the operating system's cache, and
/// its current verdict.
#[derive(Default)]
pub(crate) struct OsCacheRule {
    pub(crate) policy: OsCache,
    /// The process's memory limit found at open.
    pub(crate) limit: Option<u64>,
    /// `Builder::cache_size`.
    pub(crate) cache_bytes: u64,
    /// Reads and writes of the data file drop their pages now.
    pub(crate) dropping: AtomicBool,
}

struct PidFree {
    free: Vec<u64>,
    limbo: Vec<(u64, u64)>,
}

impl Pager {
    pub(crate) fn new(
        page_size: usize,
        file: Arc<dyn FileIo>,
        map: PageMap,
        alloc: BlockAlloc,
        epoch: u64,
        next_pid: u64,
        free_pids: Vec<u64>,
    ) -> Self {
        // The length was read at open; a failure here only costs an early
        // (harmless) growth step.
        debug_assert!(page::valid_page_size(page_size));
        let file_blocks = file.len().map_or(0, |l| l / page_size as u64);
        Pager {
            page_size,
            chunk_entries: pagemap::chunk_entries(page_size),
            file,
            map,
            alloc,
            epoch: AtomicU64::new(epoch),
            state: crate::sync::Mutex::new(EpochState {
                epoch,
                dirty_chunks: BTreeSet::new(),
                running: None,
            }),
            dirty_list: Mutex::new(Vec::new()),
            next_pid: AtomicU64::new(next_pid),
            file_blocks: AtomicU64::new(file_blocks),
            promised: AtomicU64::new(0),
            grow: Mutex::new(()),
            stored: StoredLens::new(),
            unflushed: Unflushed::new(),
            populated: AtomicU64::new(file_blocks),
            pace: Mutex::new(PopulatePace::new(file_blocks, Instant::now())),
            flushing: AtomicBool::new(false),
            flush_since_ns: AtomicU64::new(0),
            flush_ns: AtomicU64::new(0),
            opened: Instant::now(),
            reserve: AtomicU64::new(0),
            pids: Mutex::new(PidFree {
                free: free_pids,
                limbo: Vec::new(),
            }),
            stopped: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            stop_reason: Mutex::new(String::new()),
            counters: PagerCounters::default(),
            shape_changes: AtomicU64::new(0),
            os_cache: OsCacheRule::default(),
        }
    }

    /// The map chunk page that holds `pid`'s entry.
    pub(crate) fn chunk_of(&self, pid: u64) -> usize {
        (pid / self.chunk_entries as u64) as usize
    }

    /// Map entries per chunk page.
    pub(crate) fn chunk_entries(&self) -> usize {
        self.chunk_entries
    }

    /// A zeroed buffer of one page.
    pub(crate) fn page_buf(&self) -> Vec<u8> {
        vec![0u8; self.page_size]
    }

    /// Sets the rule for the file's pages in the OS cache and applies it.
    pub(crate) fn set_os_cache(&mut self, policy: OsCache, limit: Option<u64>, cache_bytes: u64) {
        self.os_cache.policy = policy;
        self.os_cache.limit = limit;
        self.os_cache.cache_bytes = cache_bytes;
        self.review_os_cache();
    }

    /// Applies the OS-cache rule to the file's current length. Called
    /// whenever the length changes (with `grow` held, or at open).
    fn review_os_cache(&self) {
        let r = &self.os_cache;
        let len = self.file_blocks.load(Ordering::Acquire) * self.page_size as u64;
        let want = r.policy.drops(r.limit, r.cache_bytes, len);
        if want != r.dropping.load(Ordering::Relaxed) {
            let on = self.file.set_drop_behind(want);
            r.dropping.store(on, Ordering::Relaxed);
        }
    }

    /// Records a change of some tree's shape. Call while holding exclusive
    /// the branch (or root) whose children change.
    pub(crate) fn shape_changed(&self) {
        self.shape_changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Cuts the data file after its last block in use; returns its length
    /// in blocks before and after. The growth lock is held throughout, so a
    /// block handed out meanwhile waits in `ensure_room` and is written
    /// only after the cut, into room made for it again.
    ///
    /// A failed cut or sync of the cut stops writes, as a failed write-back
    /// does: the `fdatasync` that failed also covered data pages evicted
    /// since the last checkpoint, which the kernel may have dropped, and a
    /// later sync could succeed over them.
    pub(crate) fn shrink_to_used(&self) -> Result<(u64, u64)> {
        let _g = self.grow.lock();
        let before = self.file_blocks.load(Ordering::Acquire);
        // Until the cut is done, every `ensure_room` takes the slow path and
        // waits for this lock: a block handed out after `shrink` (which may
        // lie past the cut) is not written before room is made for it.
        self.file_blocks.store(0, Ordering::Release);
        let after = self.alloc.shrink().min(before);
        let mut len = before;
        let mut cut = Ok(());
        if after < before {
            cut = self.file.set_len(after * self.page_size as u64);
            if cut.is_ok() {
                // The file is this long now, whether or not the sync holds.
                len = after;
                cut = self.file.sync_data();
            }
        }
        self.file_blocks.store(len, Ordering::Release);
        self.populated.fetch_min(len, Ordering::AcqRel);
        self.review_os_cache();
        if let Err(err) = cut {
            self.stop_writes(&format!("cutting the data file failed: {err}"));
            return Err(err.into());
        }
        Ok((before, after))
    }

    /// Blocks the data file has room for, preallocated ones included.
    pub(crate) fn file_blocks(&self) -> u64 {
        self.file_blocks.load(Ordering::Acquire)
    }

    pub(crate) fn next_pid(&self) -> u64 {
        self.next_pid.load(Ordering::Acquire)
    }

    /// Refuses writes after a failed write or fsync (see [`Error::WritesStopped`]).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.stopped.load(Ordering::Acquire) {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            return Err(Error::WritesStopped(self.stop_reason.lock().clone()));
        }
        Ok(())
    }

    /// Refuses every later write: the database was closed.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stop_writes("the database was closed");
    }

    /// Records a write failure that leaves memory and disk out of step.
    pub(crate) fn stop_writes(&self, why: &str) {
        let mut r = self.stop_reason.lock();
        if !self.stopped.swap(true, Ordering::AcqRel) {
            *r = why.to_string();
        }
    }

    pub(crate) fn alloc_pid(&self) -> Result<u64> {
        if let Some(p) = self.pids.lock().free.pop() {
            return Ok(p);
        }
        let p = self.next_pid.fetch_add(1, Ordering::AcqRel);
        if p >= MAX_PIDS {
            self.next_pid.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::Full(format!("all {MAX_PIDS} page ids are in use")));
        }
        Ok(p)
    }

    /// Frees a page id and its block; both are reused only after the
    /// checkpoint of the current epoch is durable.
    pub(crate) fn free_pid(&self, pid: u64) {
        let mut st = self.state.lock();
        let e = st.epoch;
        self.set_mapping_locked(&mut st, pid, NO_BLOCK, false);
        self.pids.lock().limbo.push((e, pid));
    }

    /// Checkpoint `epoch` is durable.
    pub(crate) fn release_through(&self, epoch: u64) {
        self.alloc.release_through(epoch);
        let mut p = self.pids.lock();
        let limbo = std::mem::take(&mut p.limbo);
        for (e, pid) in limbo {
            if e <= epoch {
                p.free.push(pid);
            } else {
                p.limbo.push((e, pid));
            }
        }
    }

    /// Changes the block of `pid` (caller holds `state`), recording what the
    /// running checkpoint needs and freeing the old block.
    ///
    /// `same_as_checkpoint` says the running checkpoint records this very
    /// block for `pid`, so once it is durable the entry does not differ
    /// from disk and its chunk need not be rewritten again.
    pub(crate) fn set_mapping_locked(
        &self,
        st: &mut EpochState,
        pid: u64,
        block: u64,
        same_as_checkpoint: bool,
    ) {
        let old = self.map.swap_block(pid, block);
        if !same_as_checkpoint {
            st.dirty_chunks.insert(self.chunk_of(pid));
        }
        if let Some(r) = st.running.as_mut() {
            r.map_before.entry(pid).or_insert(old);
        }
        // The same block again is a page rewritten over its own fresh
        // block: nothing to free.
        if old != NO_BLOCK && old != block {
            self.alloc.free(old, st.epoch);
        }
    }

    /// Reads the page of `pid` into `buf` and checks it.
    pub(crate) fn read_page(&self, pid: u64, buf: &mut [u8], kinds: &[PageKind]) -> Result<()> {
        let block = self.map.block(pid);
        if block == NO_BLOCK {
            return Err(Error::corruption(
                pid,
                "page id has no block (dangling reference)",
            ));
        }
        let known = self.stored.get(block);
        let mut read = 0;
        let mut laid_out = false;
        if (1..self.page_size).contains(&known) {
            read += known;
            laid_out = self.read_packed(block, pid, buf, known, kinds)?;
        }
        if !laid_out {
            self.read_block(block, buf, pid)?;
            read += self.page_size;
            page::check(buf, kinds, pid, pid)?;
            self.stored.set(block, stored_len(buf));
            if matches!(page::kind(buf), Some(PageKind::Leaf | PageKind::Branch)) {
                node::unpack(buf).map_err(|r| Error::corruption(pid, r))?;
            }
        }
        self.counters
            .bytes_read
            .fetch_add(read as u64, Ordering::Relaxed);
        if matches!(page::kind(buf), Some(PageKind::Leaf | PageKind::Branch)) {
            node::validate(buf).map_err(|r| Error::corruption(pid, r))?;
        }
        self.counters.pages_read.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Reads the node page of `pid`, stored packed in the first `known`
    /// bytes of `block`, into the end of `buf`, checks it and lays it out
    /// ([`node::unpack_tail`]). `Ok(false)` when the block does not hold
    /// an intact image of that length (the file ends first, the header
    /// gives another length, the checksum does not match): the caller then
    /// reads the block whole, and [`page::check`] says what is wrong.
    fn read_packed(
        &self,
        block: u64,
        pid: u64,
        buf: &mut [u8],
        known: usize,
        kinds: &[PageKind],
    ) -> Result<bool> {
        let tail = self.page_size - known;
        match self
            .file
            .read_exact_at(&mut buf[tail..], block * self.page_size as u64)
        {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        if !page::image_intact(&buf[tail..]) {
            return Ok(false);
        }
        page::check_fields(&buf[tail..], kinds, pid, pid)?;
        node::unpack_tail(buf, known).map_err(|r| Error::corruption(pid, r))?;
        Ok(true)
    }

    /// Reads block `block`; reading past the end of the file is corruption
    /// of whatever pointed there (`page` names it). The last block of a
    /// file the file system did not extend ahead may hold only a packed
    /// image: what it has is read and the rest of `buf` zeroed (the
    /// checksum then decides).
    pub(crate) fn read_block(&self, block: u64, buf: &mut [u8], page: u64) -> Result<()> {
        let at = block * self.page_size as u64;
        match self.file.read_exact_at(buf, at) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let len = self.file.len()?;
                if len <= at {
                    return Err(Error::corruption(
                        page,
                        format!("block {block} lies past the end of the file"),
                    ));
                }
                // len - at < buf.len() here, or the read would have worked.
                let have = usize::try_from(len - at).map_or(buf.len(), |h| h.min(buf.len()));
                self.file.read_exact_at(&mut buf[..have], at)?;
                buf[have..].fill(0);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Makes the file long enough for block `b`, growing it by a large step:
    /// writing past the end of a file costs the file system several times
    /// an overwrite (on ext4 about 50 us against 4-8 us per 16 KiB), and
    /// right after a checkpoint every evicted page needs a new block.
    fn ensure_room(&self, b: u64) -> Result<()> {
        let have = self.file_blocks.load(Ordering::Acquire);
        if b < have {
            // Keep the room write admissions ask for, and half as much
            // again, ahead of the allocations (the checkpoint and eviction
            // allocate; a writer that found too little would grow the file
            // on its own commit path). Best effort: only this block is
            // required.
            let r = self.reserve.load(Ordering::Relaxed);
            let ahead = self.alloc.used() + r + r / 2;
            if have < ahead {
                if let Some(_g) = self.grow.try_lock() {
                    let have = self.file_blocks.load(Ordering::Acquire);
                    if have < ahead {
                        if let Ok(want) = self.grow_to(have, ahead) {
                            self.file_blocks.store(want, Ordering::Release);
                            self.review_os_cache();
                        }
                    }
                }
            }
            return Ok(());
        }
        let _g = self.grow.lock();
        let have = self.file_blocks.load(Ordering::Acquire);
        if b < have {
            return Ok(());
        }
        let want = self.grow_to(have, b + 1)?;
        self.file_blocks.store(want, Ordering::Release);
        self.review_os_cache();
        Ok(())
    }

    /// One step of the data file's preparation, done by a background
    /// thread (`tidemark-file-prepare`) so that writers find room ready:
    ///
    /// 1. Grows the file to what writes are expected to need: the blocks in
    ///    use, the room write admissions ask for and half as much again,
    ///    and the room the next epoch will take beyond what its checkpoint
    ///    gives back ([`BlockAlloc::growth_ahead`]). Without the last term,
    ///    the first writes after a checkpoint cut (every page rewritten
    ///    then needs a new block) would grow the file in a burst.
    /// 2. Populates the operating system's cache for up to
    ///    [`PREPARE_STEP_BLOCKS`] blocks of room grown since open
    ///    ([`FileIo::populate`]), so the first write of each new block is
    ///    an overwrite of cached memory instead of an allocation made
    ///    under the file's write lock. Room within
    ///    [`POPULATE_URGENT_BLOCKS`] of the highest block handed out is
    ///    populated at once; room beyond it at the pace of the file's
    ///    growth ([`PopulatePace`]).
    ///
    /// Step 2 only with `populate` ([`PopulateGate`]). Returns whether
    /// there is more to do at once; `false` also when the pace asks to
    /// wait.
    pub(crate) fn prepare_ahead(&self, populate: bool) -> Result<bool> {
        let page = self.page_size as u64;
        let (kept, ahead) = self.growth_terms();
        // Only while new pages are being written: an idle or rewrite-only
        // database grows as its writers need, and a file just shrunk by
        // `compact` stays as it is. While the file is flushed, only when
        // allocation is about to need the room: the file system may have
        // to read its free-space bitmaps to grow the file, behind the
        // flush's writes, holding the file's write lock meanwhile, and
        // every eviction's `pwrite` waits for it (ext4 on a busy virtual
        // disk: 190-550 ms; BENCHMARKS.md, cache-pressure, "Growth kept out
        // of the flush"). [`Pager::grow_before_flush`] made room before it.
        let deferred = self.flushing.load(Ordering::Acquire)
            && self.file_blocks.load(Ordering::Acquire) >= kept + FLUSH_GROWTH_FLOOR;
        if ahead > 0 && !deferred {
            self.grow_ahead_to(kept + ahead)?;
        }
        if !populate {
            return Ok(false);
        }
        let have = self.file_blocks.load(Ordering::Acquire);
        let from = self.populated.load(Ordering::Acquire);
        // Room allocation will soon take is populated at once: the blocks
        // next to where it extends the file, and as many more as the
        // admitted reserve asks beyond the free blocks below that point
        // (a checkpoint of that many dirty pages would take them all in a
        // second or two). The rest at the pace of the file's growth.
        let high = self.alloc.high_water();
        let r = self.reserve.load(Ordering::Relaxed);
        let soon = r.saturating_sub(high.saturating_sub(self.alloc.used()));
        let urgent = from
            < high
                .saturating_add(POPULATE_URGENT_BLOCKS)
                .saturating_add(soon);
        let grant = self.pace.lock().grant(have, Instant::now(), urgent);
        if from >= have || grant == 0 {
            return Ok(false);
        }
        let to = have.min(from + grant);
        self.file.populate(from * page, (to - from) * page, page)?;
        self.counters
            .blocks_populated
            .fetch_add(to - from, Ordering::Relaxed);
        // A shrink meanwhile lowered `populated` to the new length: keep it.
        let _ = self
            .populated
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire);
        Ok(urgent && to < have)
    }

    /// Grows the file, by at least the usual step, to `want` blocks if it
    /// is shorter, never taking the file system's free space below
    /// [`PREPARE_HEADROOM`]: growing ahead is a convenience, and that
    /// space stays for the log and for the writers' own admission.
    fn grow_ahead_to(&self, want: u64) -> Result<()> {
        if self.file_blocks.load(Ordering::Acquire) >= want {
            return Ok(());
        }
        let page = self.page_size as u64;
        let _g = self.grow.lock();
        let have = self.file_blocks.load(Ordering::Acquire);
        let allowed = match self.file.free_space()? {
            Some(free) => have + free.saturating_sub(PREPARE_HEADROOM) / page,
            None => u64::MAX,
        };
        let want = want.min(allowed);
        if have < want {
            let step = grow_step(have).min(allowed).max(want);
            let len = self.grow_exactly(have, want, step)?;
            self.file_blocks.store(len, Ordering::Release);
            self.review_os_cache();
        }
        Ok(())
    }

    /// Called by a flush of the data file before its first write: grows
    /// the file now, while the device is not yet busy with the flush, if
    /// the growing file ([`Pager::prepare_ahead`]'s terms) has less than
    /// a step of room left, so that the preparer's next step is not due
    /// while the flush runs. Half a step was not always enough: after a
    /// checkpoint's cut every first rewrite takes a new block, and a
    /// flush of 5.5 s used it up (BENCHMARKS.md, "Growth kept out of the
    /// flush").
    pub(crate) fn grow_before_flush(&self) -> Result<()> {
        let (kept, ahead) = self.growth_terms();
        if ahead == 0 {
            return Ok(());
        }
        let have = self.file_blocks.load(Ordering::Acquire);
        self.grow_ahead_to(kept + ahead + (grow_step(have) - have))
    }

    /// What growing ahead aims at, in blocks: what allocation keeps ahead
    /// (the blocks in use, the room write admissions ask for and half as
    /// much again, as in [`Pager::ensure_room`]), and the room the next
    /// epoch will take beyond what its checkpoint gives back
    /// ([`BlockAlloc::growth_ahead`]).
    fn growth_terms(&self) -> (u64, u64) {
        let r = self.reserve.load(Ordering::Relaxed);
        (self.alloc.used() + r + r / 2, self.alloc.growth_ahead())
    }

    /// Marks the data file as being flushed until the guard is dropped
    /// (see [`Pager::prepare_ahead`]).
    pub(crate) fn flush_guard(&self) -> FlushGuard<'_> {
        self.flush_since_ns
            .store(self.since_open_ns(), Ordering::Release);
        self.flushing.store(true, Ordering::Release);
        FlushGuard(self)
    }

    fn since_open_ns(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Nanoseconds the data file has spent being flushed since open, the
    /// flush in progress included (one flush runs at a time: the
    /// checkpointer thread makes them all).
    pub(crate) fn flush_time_ns(&self) -> u64 {
        let done = self.flush_ns.load(Ordering::Acquire);
        if !self.flushing.load(Ordering::Acquire) {
            return done;
        }
        let since = self.flush_since_ns.load(Ordering::Acquire);
        done + self.since_open_ns().saturating_sub(since)
    }

    /// Preallocates the file to at least `need` blocks, by the usual step
    /// when it fits; returns its new length in blocks. Call with `grow`.
    fn grow_to(&self, have: u64, need: u64) -> std::io::Result<u64> {
        let len = self.grow_exactly(have, need, need.max(grow_step(have)))?;
        self.counters
            .file_growths_by_writes
            .fetch_add(1, Ordering::Relaxed);
        Ok(len)
    }

    /// [`Pager::grow_to`] with the step given: `want` if it fits, `need`
    /// near a full disk.
    fn grow_exactly(&self, have: u64, need: u64, want: u64) -> std::io::Result<u64> {
        debug_assert!(have < need && need <= want);
        let len = match self.file.preallocate(want * self.page_size as u64) {
            Ok(()) => want,
            // Near a full disk the large step does not fit: grow by what
            // is needed, so the space left is still used.
            Err(e) if crate::error::io_is_disk_full(&e) && want > need => {
                self.file.preallocate(need * self.page_size as u64)?;
                need
            }
            Err(e) => return Err(e),
        };
        self.counters.file_growths.fetch_add(1, Ordering::Relaxed);
        if self.flushing.load(Ordering::Acquire) {
            self.counters
                .file_growths_while_flushing
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(len)
    }

    /// Admission of a write (a commit, a checkpoint): makes sure the data
    /// file has room for `blocks` more, free inside it or preallocated past
    /// its last block in use, growing it if not. The writes that follow
    /// (page evictions, the checkpoint's pages) then land in space the file
    /// system has already given. A full disk is [`Error::DiskFull`], met
    /// before the caller changed anything.
    pub(crate) fn ensure_space(&self, blocks: u64) -> Result<()> {
        // Every committing thread passes here: publish the reserve for the
        // allocators only when it moved by more than an eighth, so the
        // threads do not all write one cache line.
        let r = self.reserve.load(Ordering::Relaxed);
        if blocks.abs_diff(r) > r / 8 {
            self.reserve.store(blocks, Ordering::Relaxed);
        }
        if self.file_blocks.load(Ordering::Acquire) >= self.alloc.used() + blocks {
            return Ok(());
        }
        let _g = self.grow.lock();
        let have = self.file_blocks.load(Ordering::Acquire);
        let need = self.alloc.used() + blocks;
        if have >= need {
            return Ok(());
        }
        match self.grow_to(have, need) {
            Ok(want) => {
                self.file_blocks.store(want, Ordering::Release);
                self.review_os_cache();
                Ok(())
            }
            Err(e) if crate::error::io_is_disk_full(&e) => Err(Error::DiskFull(format!(
                "the data file needs room for {blocks} more blocks of {} bytes ({e})",
                self.page_size
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Admission of a write that will take room while others are admitted
    /// too: makes sure the data file has room for `shared` (what is already
    /// dirty, which every write counts), for `own` and for what every
    /// write admitted before and still in progress was promised, and
    /// promises `own` until the returned [`Promise`] is dropped. Without
    /// the promises, two writes admitted at once both counted the same
    /// room, and the second could meet a full disk half-way (a checkpoint's
    /// map pages, a batch's evictions).
    pub(crate) fn promise(&self, shared: u64, own: u64) -> Result<Promise<'_>> {
        // Added first, so that of two admissions racing each counts the
        // other's promise.
        let all = self.promised.fetch_add(own, Ordering::AcqRel) + own;
        let promise = Promise {
            promised: &self.promised,
            blocks: own,
        };
        self.ensure_space(shared + all)?;
        Ok(promise)
    }

    /// The guard of `blocks` promised earlier and kept ([`Promise::keep`]).
    pub(crate) fn adopt(&self, blocks: u64) -> Promise<'_> {
        Promise {
            promised: &self.promised,
            blocks,
        }
    }

    /// Writes the page in `buf` to a newly allocated block: a leaf or
    /// branch packed (through a per-thread buffer, `buf` is not changed),
    /// any other page sealed in place and whole.
    ///
    /// A block for a checkpoint (`fresh` false) is written whole even for
    /// a packed page: its image, then zeros. The checkpoint then pushes
    /// the file to the device, and the kernel makes one request of each
    /// run of dirty blocks, but with images alone every block ends in
    /// clean page-cache pages, so a checkpoint of 600 MB went out as tens
    /// of thousands of 8-28 KiB requests a second, whose completions
    /// took the CPU from writers (BENCHMARKS.md, "Checkpoint blocks
    /// written whole"). An eviction's block (`fresh`) keeps the image
    /// alone: the kernel writes those back on its own schedule, and the
    /// whole block cost evictions more than it saved there. Except the
    /// first write of a block since open: in room the file grew with
    /// `fallocate`, what an image leaves out stays an unwritten extent on
    /// ext4, two extent entries a block (177,459 extents, 88,738 of them
    /// unwritten, in one 3 GB data file, whose `rm` took 12.5 s). Reads
    /// take only the image either way.
    pub(crate) fn write_new_block(&self, buf: &mut [u8], fresh: bool) -> Result<u64> {
        let (b, extended) = self.alloc.allocate_noting(fresh);
        if let Err(e) = self.ensure_room(b) {
            self.alloc.free(b, self.epoch.load(Ordering::Acquire));
            return Err(e);
        }
        if extended && b >= self.populated.load(Ordering::Acquire) {
            self.counters
                .blocks_written_unpopulated
                .fetch_add(1, Ordering::Relaxed);
        }
        if let Err(e) = self.write_block(buf, b, fresh) {
            self.alloc.free(b, self.epoch.load(Ordering::Acquire));
            return Err(e);
        }
        Ok(b)
    }

    /// Writes the page in `buf` over `block`, which the caller holds for
    /// it: a block just allocated, or the page's own fresh block
    /// ([`Pager::rewrite_fresh`]). `fresh` as for
    /// [`Pager::write_new_block`].
    fn write_block(&self, buf: &mut [u8], b: u64, fresh: bool) -> Result<()> {
        let at = b * self.page_size as u64;
        let node = matches!(page::kind(buf), Some(PageKind::Leaf | PageKind::Branch));
        // The whole block, zeros after the image: a checkpoint's write (not
        // `fresh`) and a block's first write since open (see above).
        let whole = !(fresh && self.stored.get(b) != 0);
        let parts = if node { node::packed_parts(buf) } else { None };
        let written = if let Some(p) = parts {
            // No dead cells: write the image from the frame's own bytes,
            // without packing it into a copy first.
            let len = if whole { self.page_size } else { p.padded() };
            let pad = &crate::io::ZEROS[..len - p.image];
            self.file
                .write_all_vectored_at(&[&p.header, p.slots, p.cells, pad], at)
                .map(|()| (len, p.image))
        } else if node {
            let mut image = PACKED
                .take()
                .filter(|b| b.len() >= self.page_size)
                .unwrap_or_else(|| vec![0u8; self.page_size].into_boxed_slice());
            let len = node::pack(buf, &mut image);
            let stored = stored_len(&image);
            let len = if !whole {
                len
            } else {
                // Past `len` the buffer holds an earlier page's bytes.
                image[len..self.page_size].fill(0);
                self.page_size
            };
            let r = self
                .file
                .write_all_at(&image[..len], at)
                .map(|()| (len, stored));
            PACKED.set(Some(image));
            r
        } else {
            page::seal(buf);
            let r = self.file.write_all_at(buf, at);
            r.map(|()| (self.page_size, self.page_size))
        };
        let (written, stored) = written?;
        self.unflushed.mark(b);
        self.stored.set(b, stored);
        self.counters.pages_written.fetch_add(1, Ordering::Relaxed);
        // After the mark (see `checkpoint::flush_here`).
        self.counters
            .bytes_written
            .fetch_add(written as u64, Ordering::Release);
        Ok(())
    }

    /// Writes the page in `buf` over its own block `b` if `b` is fresh
    /// (allocated since the last checkpoint's cut and adopted by no
    /// checkpoint) and returns whether it did. No checkpoint, durable or
    /// running, can reference a fresh block, so overwriting it in place
    /// keeps copy-on-write's guarantee, and a page evicted again and again
    /// between two checkpoints keeps one block instead of taking a new one
    /// each time (no allocator lock, scan or free for it), so the blocks
    /// the kernel holds dirty for the file are at most one per page
    /// (ARCHITECTURE.md, "Block lifetimes"). The caller holds the
    /// page's frame latched exclusively, so nobody reads `b` meanwhile: a
    /// lookup of the page finds the frame. If a checkpoint's cut comes
    /// between the test and the write, the caller sees the page owed to it
    /// and hands `b` over as the page's block in that checkpoint, exactly
    /// as for a new block: the bytes written are the page as of the cut.
    /// A failed write leaves the page dirty in its frame and `b` its block,
    /// as it was: only this process's cache ever read that block.
    ///
    /// A fresh block in the write-back step in flight is not written over
    /// (the page takes a new block, and `b` is freed as usual): the
    /// operating system holds that block's cached pages locked while it
    /// queues them for the device, and a `pwrite` into them would wait
    /// for the device while holding the file's write lock, which every
    /// other writer of the file then waits for.
    pub(crate) fn rewrite_fresh(&self, buf: &mut [u8], b: u64) -> Result<bool> {
        if b == NO_BLOCK {
            return Ok(false);
        }
        match self.alloc.rewritable(b) {
            Rewrite::Yes => {}
            Rewrite::NotFresh => return Ok(false),
            Rewrite::WritingBack => {
                self.counters
                    .pages_moved_from_write_back
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(false);
            }
        }
        self.write_block(buf, b, true)?;
        self.counters
            .pages_rewritten_in_place
            .fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Writes a page that bypasses the cache (overflow) and maps it.
    pub(crate) fn write_direct(&self, pid: u64, buf: &mut [u8]) -> Result<()> {
        let b = self.write_new_block(buf, true)?;
        self.alloc.written_once(b);
        let mut st = self.state.lock();
        self.set_mapping_locked(&mut st, pid, b, false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE_SIZE: usize = page::DEFAULT_PAGE_SIZE;
    use std::sync::Arc;

    fn blocks(w: Written) -> Vec<u64> {
        match w {
            Written::Blocks(b) => b,
            Written::Unknown => panic!("every block was within reach"),
        }
    }

    /// The set gives back each block marked since the last take, once,
    /// ascending, across chunk and word edges; a block past its reach
    /// turns the next take into "the whole file", once.
    #[test]
    fn unflushed_blocks_are_taken_once_each() {
        let u = Unflushed::new();
        let marked = [
            LENS_CHUNK_BLOCKS + 1,
            2,
            63,
            64,
            2,
            LENS_CHUNK_BLOCKS - 1,
            3 * LENS_CHUNK_BLOCKS + 5,
        ];
        for &b in &marked {
            u.mark(b);
        }
        let mut want: Vec<u64> = marked.to_vec();
        want.sort_unstable();
        want.dedup();
        assert_eq!(blocks(u.take()), want);
        assert_eq!(blocks(u.take()), Vec::<u64>::new(), "taken already");
        u.mark(7);
        assert_eq!(blocks(u.take()), vec![7]);

        u.mark(LENS_CHUNK_BLOCKS * LENS_CHUNKS as u64);
        u.mark(9);
        assert!(matches!(u.take(), Written::Unknown));
        assert_eq!(blocks(u.take()), Vec::<u64>::new(), "the overflow is once");
    }

    /// Marks made while other threads take the set are each taken by
    /// exactly one take.
    #[test]
    fn unflushed_marks_racing_takes_are_taken_exactly_once() {
        let u = Arc::new(Unflushed::new());
        let per = 20_000u64;
        let markers: Vec<_> = (0..2u64)
            .map(|t| {
                let u = u.clone();
                std::thread::spawn(move || {
                    for i in 0..per {
                        u.mark(t * per + i);
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while markers.iter().any(|m| !m.is_finished()) {
            seen.extend(blocks(u.take()));
        }
        for m in markers {
            m.join().expect("marker thread");
        }
        seen.extend(blocks(u.take()));
        seen.sort_unstable();
        assert_eq!(seen, (0..2 * per).collect::<Vec<_>>());
    }

    /// A data file that keeps no bytes: it records its length and the
    /// ranges it was asked to populate.
    #[derive(Default)]
    struct Recorder {
        len: Mutex<u64>,
        populated: Mutex<Vec<(u64, u64)>>,
        /// What `free_space` reports.
        free: Mutex<Option<u64>>,
        /// The longest the file may become: a disk that fills there.
        cap: Mutex<Option<u64>>,
    }

    impl FileIo for Recorder {
        fn read_exact_at(&self, _buf: &mut [u8], _offset: u64) -> std::io::Result<()> {
            Err(std::io::ErrorKind::UnexpectedEof.into())
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            let mut l = self.len.lock();
            *l = (*l).max(offset + buf.len() as u64);
            Ok(())
        }
        fn sync_data(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn len(&self) -> std::io::Result<u64> {
            Ok(*self.len.lock())
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            if self.cap.lock().is_some_and(|cap| len > cap) {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let mut l = self.len.lock();
            if let Some(free) = self.free.lock().as_mut() {
                *free = (*free + *l).saturating_sub(len);
            }
            *l = len;
            Ok(())
        }
        fn free_space(&self) -> std::io::Result<Option<u64>> {
            Ok(*self.free.lock())
        }
        fn populate(&self, offset: u64, len: u64, step: u64) -> std::io::Result<()> {
            assert_eq!(step, PAGE_SIZE as u64, "populated page by page");
            self.populated.lock().push((offset, offset + len));
            Ok(())
        }
    }

    fn pager(blocks: u64) -> (Arc<Recorder>, Pager) {
        let f = Arc::new(Recorder::default());
        f.set_len(blocks * PAGE_SIZE as u64).unwrap();
        let alloc = BlockAlloc::new(std::iter::empty()).expect("no blocks used yet");
        let p = Pager::new(
            PAGE_SIZE,
            f.clone(),
            PageMap::new(),
            alloc,
            1,
            3,
            Vec::new(),
        );
        (f, p)
    }

    #[test]
    fn prepare_ahead_grows_for_the_next_epoch_and_populates_only_new_room() {
        let page = PAGE_SIZE as u64;
        let (f, p) = pager(0);
        let mut buf = vec![0u8; PAGE_SIZE];
        // 3,000 new pages written this epoch: after the next cut, each
        // first rewrite needs a block while its current one stays in the
        // checkpoint.
        let blocks: Vec<u64> = (0..3000)
            .map(|_| p.write_new_block(&mut buf, true).unwrap())
            .collect();
        while p.prepare_ahead(true).unwrap() {}
        let used = p.alloc.used();
        assert!(
            p.file_blocks() >= used + 3000,
            "{} blocks for {used} in use",
            p.file_blocks()
        );
        // Everything grown since open is populated once, in order.
        let ranges = f.populated.lock().clone();
        assert_eq!(ranges.first().map(|r| r.0), Some(0));
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{ranges:?}");
        assert_eq!(ranges.last().map(|r| r.1), Some(p.file_blocks() * page));
        // The counters say so: the writes grew the file themselves, into
        // room nobody had populated; then the preparer populated it all.
        let c = &p.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert!(ld(&c.file_growths_by_writes) >= 1);
        assert!(
            ld(&c.file_growths) > ld(&c.file_growths_by_writes),
            "the preparer grew it too"
        );
        assert_eq!(ld(&c.file_growths_while_flushing), 0);
        assert_eq!(ld(&c.blocks_written_unpopulated), 3000);
        assert_eq!(ld(&c.blocks_populated), p.file_blocks());

        // The cut, then every page rewritten once: each rewrite sends its
        // old block to limbo, so the epoch after needs no more room.
        p.alloc.clear_fresh();
        let len = p.file_blocks();
        for b in blocks {
            p.alloc.free(b, 2);
            p.write_new_block(&mut buf, true).unwrap();
        }
        while p.prepare_ahead(true).unwrap() {}
        assert_eq!(p.file_blocks(), len, "no growth once rewrites free blocks");
        assert_eq!(
            ld(&c.blocks_written_unpopulated),
            3000,
            "the rewrites took populated room"
        );
    }

    /// While the file is flushed, growth waits unless allocation is about
    /// to need the room; once the flush ends it catches up.
    #[test]
    fn growth_waits_for_the_flush_while_room_is_left() {
        let (_f, p) = pager_with_new_blocks(20_000);
        // Room for more blocks than the flush floor, fewer than the next
        // epoch's 20,000 (no write admitted: no reserve).
        let used = p.alloc.used();
        p.grow_ahead_to(used + FLUSH_GROWTH_FLOOR + 1_000).unwrap();
        let have = p.file_blocks();
        assert!(
            have >= used + FLUSH_GROWTH_FLOOR,
            "{have} blocks for {used}"
        );
        assert!(
            have < used + p.alloc.growth_ahead(),
            "{have} blocks for {used}"
        );
        {
            let _flushing = p.flush_guard();
            while p.prepare_ahead(false).unwrap() {}
            assert_eq!(p.file_blocks(), have, "grew during the flush");
        }
        while p.prepare_ahead(false).unwrap() {}
        assert!(
            p.file_blocks() >= used + 20_000,
            "{} blocks after the flush",
            p.file_blocks()
        );
    }

    /// The flush time counts the flush in progress, and keeps what ended.
    #[test]
    fn flush_time_counts_each_flush_once() {
        let (_f, p) = pager(0);
        assert_eq!(p.flush_time_ns(), 0);
        let g = p.flush_guard();
        std::thread::sleep(Duration::from_millis(20));
        let during = p.flush_time_ns();
        assert!(during >= 20_000_000, "{during} ns into a 20 ms flush");
        drop(g);
        let after = p.flush_time_ns();
        assert!(after >= during);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(p.flush_time_ns(), after, "no flush: the time stands");
    }

    /// With less room left than the floor, the flush does not hold growth
    /// back: allocation would otherwise grow the file on a writer's path.
    #[test]
    fn growth_goes_on_during_a_flush_when_room_runs_short() {
        let (_f, p) = pager_with_new_blocks(20_000);
        let used = p.alloc.used();
        let have = p.file_blocks();
        assert!(have < used + FLUSH_GROWTH_FLOOR, "{have} blocks for {used}");
        let grown = p
            .counters
            .file_growths_while_flushing
            .load(Ordering::Relaxed);
        let _flushing = p.flush_guard();
        while p.prepare_ahead(false).unwrap() {}
        assert!(
            p.counters
                .file_growths_while_flushing
                .load(Ordering::Relaxed)
                > grown,
            "a growth during the flush is counted as one"
        );
        assert!(
            p.file_blocks() >= used + 20_000,
            "{} blocks",
            p.file_blocks()
        );
    }

    /// Before a flush, a growing file is given a step beyond what the
    /// preparer keeps; a file that is not growing is left as it is.
    #[test]
    fn a_growing_file_is_grown_before_a_flush() {
        let (_f, p) = pager_with_new_blocks(20_000);
        while p.prepare_ahead(false).unwrap() {}
        let want = p.alloc.used() + p.alloc.growth_ahead();
        let have = p.file_blocks();
        p.grow_before_flush().unwrap();
        let step = grow_step(have) - have;
        assert!(
            p.file_blocks() >= want + step,
            "{} blocks, {want} wanted, a step {step}",
            p.file_blocks()
        );
        assert!(!p.flushing.load(Ordering::Acquire));

        p.alloc.clear_fresh();
        let len = p.file_blocks();
        p.grow_before_flush().unwrap();
        assert_eq!(p.file_blocks(), len, "grew with no new pages written");
    }

    #[test]
    fn growing_ahead_leaves_the_headroom_free() {
        let page = PAGE_SIZE as u64;
        let (f, p) = pager_with_new_blocks(3000);
        let before = p.file_blocks();
        *f.free.lock() = Some(PREPARE_HEADROOM + 2048 * page);
        while p.prepare_ahead(true).unwrap() {}
        let grown = p.file_blocks() - before;
        assert!(grown > 0, "room past the headroom is used");
        assert!(
            f.free.lock().unwrap() >= PREPARE_HEADROOM,
            "grew by {grown} blocks into the headroom"
        );
        // Without the limit it would have room for the next epoch's 3,000
        // blocks past the 3,002 in use.
        assert!(p.file_blocks() < 6002, "{} blocks", p.file_blocks());
    }

    #[test]
    fn promises_count_each_other_until_given_back() {
        let (f, p) = pager(0);
        let base = p.alloc.used();
        *f.cap.lock() = Some((base + 1000) * PAGE_SIZE as u64);
        // Room for 1,000 blocks: 600 promised, then 600 more do not fit,
        // though they would alone.
        let a = p.promise(0, 600).unwrap();
        assert!(matches!(p.promise(0, 600), Err(Error::DiskFull(_))));
        // The refused promise holds nothing: 400 fit beside the first.
        let b = p.promise(0, 400).unwrap();
        assert!(matches!(p.promise(0, 1), Err(Error::DiskFull(_))));
        // What every write counts (the dirty pages) comes on top.
        drop(b);
        assert!(matches!(p.promise(300, 200), Err(Error::DiskFull(_))));
        // Given back when done.
        drop(a);
        let kept = p.promise(0, 900).unwrap().keep();
        // A kept promise stays counted until its guard is adopted and dropped.
        assert!(matches!(p.promise(0, 200), Err(Error::DiskFull(_))));
        drop(p.adopt(kept));
        let _c = p.promise(0, 1000).unwrap();
        assert_eq!(p.file_blocks(), base + 1000);
    }

    #[test]
    fn a_shrunk_file_is_not_grown_again_while_idle() {
        let (_f, p) = pager(0);
        let mut buf = vec![0u8; PAGE_SIZE];
        for _ in 0..100 {
            p.write_new_block(&mut buf, true).unwrap();
        }
        p.ensure_space(500).unwrap();
        // A checkpoint adopted them; then the file was cut to its blocks.
        p.alloc.clear_fresh();
        let (_, after) = p.shrink_to_used().unwrap();
        while p.prepare_ahead(true).unwrap() {}
        assert_eq!(p.file_blocks(), after);
    }

    #[test]
    fn population_far_ahead_of_allocation_is_paced_not_done_at_once() {
        let page = PAGE_SIZE as u64;
        let (f, p) = pager(0);
        let mut buf = vec![0u8; PAGE_SIZE];
        for _ in 0..100 {
            p.write_new_block(&mut buf, true).unwrap();
        }
        // An admission asked for far more room than allocation has reached,
        // then a later one for little: the file keeps its length.
        p.ensure_space(40_000).unwrap();
        p.ensure_space(10).unwrap();
        let len = p.file_blocks();
        assert!(len > 40_000);
        while p.prepare_ahead(true).unwrap() {}
        let done = |f: &Arc<Recorder>| f.populated.lock().last().map_or(0, |r| r.1) / page;
        let urgent = p.alloc.high_water() + POPULATE_URGENT_BLOCKS;
        // The room next to allocation at once, and at most a step more.
        assert!(done(&f) >= urgent, "{} < {urgent}", done(&f));
        assert!(done(&f) < urgent + 2 * PREPARE_STEP_BLOCKS, "{}", done(&f));
        // Allocation moving on makes the room next to it urgent again.
        for _ in 0..3000 {
            p.write_new_block(&mut buf, true).unwrap();
        }
        while p.prepare_ahead(true).unwrap() {}
        let high = p.alloc.high_water();
        assert!(done(&f) >= high + POPULATE_URGENT_BLOCKS);
        assert!(done(&f) < len);
        // A reserve as large as a big dirty set, with no free blocks below
        // `high` to take it: all of it is populated at once.
        assert_eq!(high, p.alloc.used());
        p.ensure_space(20_000).unwrap();
        while p.prepare_ahead(true).unwrap() {}
        assert!(
            done(&f) >= high + POPULATE_URGENT_BLOCKS + 20_000,
            "{}",
            done(&f)
        );
        let ranges = f.populated.lock().clone();
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{ranges:?}");
    }

    #[test]
    fn the_pace_follows_growth_without_bursts() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut pace = PopulatePace::new(1000, t0);
        // Nothing grown: only the floor, 4 MiB/s, granted a tick at a time.
        let mut granted = 0;
        for tick in 1..=50 {
            let g = pace.grant(1000, at(tick * 20), false);
            assert!(g <= PREPARE_STEP_BLOCKS);
            granted += g;
        }
        let floor = POPULATE_FLOOR_BLOCKS_S as u64;
        assert!(
            granted <= floor && granted >= floor - POPULATE_MIN_GRANT,
            "{granted}"
        );
        // The file grows by 20,000 blocks in one step: the pace rises to
        // follow it, spread over the seconds after rather than at once.
        let mut first_second = 0;
        let mut total = 0;
        for tick in 51..=50 + 10 * 50 {
            let g = pace.grant(21_000, at(tick * 20), false);
            if tick <= 100 {
                first_second += g;
            }
            total += g;
        }
        assert!(
            first_second < 5_000,
            "{first_second} blocks in the first second"
        );
        assert!(total > 12_000, "{total} blocks in ten seconds");
        // Urgent room is granted a whole step whatever the credit.
        assert_eq!(pace.grant(21_000, at(10_000), true), PREPARE_STEP_BLOCKS);
        assert_eq!(pace.grant(21_000, at(10_000), true), PREPARE_STEP_BLOCKS);
    }

    /// The gate opens when the pool's count of pages written out moves,
    /// stays open for `POPULATE_AFTER_WRITES` after the last move, and
    /// closes then; it starts closed.
    #[test]
    fn population_follows_pages_written_out() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut gate = PopulateGate::new(7);
        assert!(!gate.open(7, at(0)), "open before any page was written out");
        assert!(gate.open(8, at(10)));
        assert!(gate.open(8, at(900)));
        assert!(gate.open(9, at(1_000)));
        assert!(gate.open(9, at(1_999)));
        assert!(
            !gate.open(9, at(2_000)),
            "open a second after the last write"
        );
        assert!(!gate.open(9, at(60_000)));
        assert!(gate.open(10, at(60_001)));
    }

    /// Without population the file still grows ahead of the writes; nothing
    /// is populated until a call that may populate, which then starts from
    /// the first room grown.
    #[test]
    fn growing_ahead_does_not_wait_for_population() {
        let page = PAGE_SIZE as u64;
        let (f, p) = pager_with_new_blocks(3000);
        assert!(!p.prepare_ahead(false).unwrap());
        let grown = p.file_blocks();
        assert!(grown >= p.alloc.used() + 3000, "{grown} blocks");
        assert!(f.populated.lock().is_empty(), "populated while closed");
        while p.prepare_ahead(true).unwrap() {}
        let ranges = f.populated.lock().clone();
        assert_eq!(ranges.first().map(|r| r.0), Some(0));
        assert_eq!(ranges.last().map(|r| r.1), Some(grown * page));
    }

    #[test]
    fn room_there_at_open_is_not_populated() {
        let (f, p) = pager(4096);
        assert!(!p.prepare_ahead(true).unwrap());
        assert!(f.populated.lock().is_empty());
        assert_eq!(p.file_blocks(), 4096);
    }

    /// [`pager`] over an empty file, with `n` pages written to new blocks
    /// by eviction.
    fn pager_with_new_blocks(n: usize) -> (Arc<Recorder>, Pager) {
        let (f, p) = pager(0);
        let mut buf = vec![0u8; PAGE_SIZE];
        for _ in 0..n {
            p.write_new_block(&mut buf, true).unwrap();
        }
        (f, p)
    }

    /// A pager over a data file in memory (made 64 blocks long, as the
    /// pager's growth steps leave a file: no block is cut short).
    fn mem_pager(f: &Arc<crate::io::MemFile>) -> Pager {
        if f.len().unwrap() == 0 {
            f.set_len(64 * PAGE_SIZE as u64).unwrap();
        }
        let alloc = BlockAlloc::new(std::iter::empty()).expect("no blocks used yet");
        Pager::new(
            PAGE_SIZE,
            f.clone(),
            PageMap::new(),
            alloc,
            1,
            3,
            Vec::new(),
        )
    }

    fn map(p: &Pager, pid: u64, block: u64) {
        let mut st = p.state.lock();
        p.set_mapping_locked(&mut st, pid, block, false);
    }

    /// A leaf of page `pid` with `n` cells of 100-byte values.
    fn leaf(pid: u64, n: usize) -> Vec<u8> {
        let mut buf = vec![0u8; PAGE_SIZE];
        node::init_leaf(&mut buf, pid);
        for i in 0..n {
            let key = (i as u64).to_be_bytes();
            let cell = node::encode_leaf_cell(&key, node::LeafValue::Inline(&[i as u8; 100]));
            assert!(node::insert_cell(&mut buf, i, &cell));
        }
        buf
    }

    /// The bytes a read of `page`, stored packed, takes once its length
    /// is known: its image.
    fn image_read(page: &[u8]) -> usize {
        let mut image = vec![0u8; PAGE_SIZE];
        node::pack(page, &mut image);
        page::image(&image)
    }

    fn take_reads(f: &crate::io::MemFile) -> Vec<(u64, usize)> {
        std::mem::take(&mut *f.reads.lock().unwrap())
    }

    #[test]
    fn reads_take_a_packed_page_without_its_gap_and_check_what_they_read() {
        let f = Arc::new(crate::io::MemFile::default());
        let p = mem_pager(&f);
        let small = leaf(5, 30);
        let b = p.write_new_block(&mut small.clone(), true).unwrap();
        map(&p, 5, b);
        let at = b * PAGE_SIZE as u64;
        take_reads(&f);
        // The frame read into holds another page's bytes.
        let mut buf = vec![0xAA; PAGE_SIZE];
        p.read_page(5, &mut buf, &[PageKind::Leaf]).unwrap();
        let first = image_read(&small);
        assert_eq!(
            first, 3542,
            "30 cells of 115 bytes, their slots, the header"
        );
        assert_eq!(take_reads(&f), vec![(at, first)]);
        assert_eq!(
            node::without_gap(&buf)[page::HEADER_SIZE..],
            small[page::HEADER_SIZE..]
        );
        assert_eq!(p.counters.bytes_read.load(Ordering::Relaxed), first as u64);

        // The block rewritten behind the pager's back with a fuller page:
        // the image read at the recorded length does not check, and the
        // block is read whole.
        let full = leaf(5, 100);
        let mut image = vec![0u8; PAGE_SIZE];
        let len = node::pack(&full, &mut image);
        assert_eq!(len, 3 * 4096);
        f.write_all_at(&image[..len], at).unwrap();
        buf.fill(0x55);
        p.read_page(5, &mut buf, &[PageKind::Leaf]).unwrap();
        assert_eq!(take_reads(&f), vec![(at, first), (at, PAGE_SIZE)]);
        assert_eq!(
            node::without_gap(&buf)[page::HEADER_SIZE..],
            full[page::HEADER_SIZE..]
        );
        // ... and the length it found is used next time.
        p.read_page(5, &mut buf, &[PageKind::Leaf]).unwrap();
        assert_eq!(take_reads(&f), vec![(at, image_read(&full))]);
        assert_eq!(
            node::without_gap(&buf)[page::HEADER_SIZE..],
            full[page::HEADER_SIZE..]
        );

        // A flipped byte inside the image is corruption; the bytes of the
        // block past the image are not part of the page.
        let flip = |off: u64| {
            let mut byte = f.bytes(at + off, 1);
            byte[0] ^= 0x40;
            f.write_all_at(&byte, at + off).unwrap();
        };
        flip(8000);
        let e = p.read_page(5, &mut buf, &[PageKind::Leaf]).unwrap_err();
        assert!(matches!(e, Error::Corruption { page: 5, .. }), "{e}");
        flip(8000);
        flip(image_read(&full) as u64 + 100);
        p.read_page(5, &mut buf, &[PageKind::Leaf]).unwrap();
        assert_eq!(
            node::without_gap(&buf)[page::HEADER_SIZE..],
            full[page::HEADER_SIZE..]
        );
    }

    #[test]
    fn checkpoint_blocks_and_first_writes_are_whole_other_evictions_packed() {
        let f = Arc::new(crate::io::MemFile::default());
        let p = mem_pager(&f);
        // A full leaf first, so the thread's packing buffer holds its bytes
        // past the smaller leaves' images.
        let full = leaf(3, 100);
        let small = leaf(4, 30);
        let bf = p.write_new_block(&mut full.clone(), true).unwrap();
        let bs = p.write_new_block(&mut small.clone(), false).unwrap();
        // Freed and written again by an eviction: the same block.
        p.alloc.free(bf, p.epoch.load(Ordering::Acquire));
        let small5 = leaf(5, 30);
        let be = p.write_new_block(&mut small5.clone(), true).unwrap();
        assert_eq!(be, bf, "a fresh block is reused at once");
        let at = |b: u64| b * PAGE_SIZE as u64;
        let image = image_read(&small);
        assert!(image < image_read(&full));
        let padded = image.next_multiple_of(page::IMAGE_ALIGN);
        assert_eq!(
            *f.writes.lock().unwrap(),
            vec![(at(bf), PAGE_SIZE), (at(bs), PAGE_SIZE), (at(be), padded),],
            "a block's first write and a checkpoint's take the whole block, \
             a later eviction's the image"
        );
        assert!(
            f.bytes(at(bs) + image as u64, PAGE_SIZE - image)
                .iter()
                .all(|&b| b == 0),
            "past the image the block holds zeros, not the earlier page's bytes"
        );
        assert_eq!(
            p.counters.bytes_written.load(Ordering::Relaxed),
            (2 * PAGE_SIZE + padded) as u64
        );
        // Reads take only the image of either, and give back each page.
        map(&p, 4, bs);
        map(&p, 5, be);
        take_reads(&f);
        let mut buf = vec![0u8; PAGE_SIZE];
        for (pid, page) in [(4, &small), (5, &small5)] {
            buf.fill(0x77);
            p.read_page(pid, &mut buf, &[PageKind::Leaf]).unwrap();
            assert_eq!(
                node::without_gap(&buf)[page::HEADER_SIZE..],
                page[page::HEADER_SIZE..]
            );
        }
        assert_eq!(take_reads(&f), vec![(at(bs), image), (at(be), image)]);
    }

    #[test]
    fn blocks_written_before_open_are_read_whole_then_by_their_length() {
        let f = Arc::new(crate::io::MemFile::default());
        let b = mem_pager(&f)
            .write_new_block(&mut leaf(7, 40), true)
            .unwrap();
        let at = b * PAGE_SIZE as u64;
        // A new pager over the same file: it has not seen the block.
        let p = mem_pager(&f);
        map(&p, 7, b);
        take_reads(&f);
        let mut buf = vec![0u8; PAGE_SIZE];
        for _ in 0..2 {
            p.read_page(7, &mut buf, &[PageKind::Leaf]).unwrap();
            assert_eq!(
                node::without_gap(&buf)[page::HEADER_SIZE..],
                leaf(7, 40)[page::HEADER_SIZE..]
            );
        }
        let second = (at, image_read(&leaf(7, 40)));
        assert_eq!(take_reads(&f), vec![(at, PAGE_SIZE), second]);
    }

    #[test]
    fn a_block_cut_short_by_the_end_of_the_file_is_read_for_what_it_has() {
        let f = Arc::new(crate::io::MemFile::default());
        let p = mem_pager(&f);
        let b = p.write_new_block(&mut leaf(9, 30), true).unwrap();
        map(&p, 9, b);
        let at = b * PAGE_SIZE as u64;
        // The file ends 12 KiB into the block, inside the rest of a page
        // longer than the pager knows.
        let full = leaf(9, 100);
        let mut image = vec![0u8; PAGE_SIZE];
        let len = node::pack(&full, &mut image);
        f.set_len(at + len as u64).unwrap();
        f.write_all_at(&image[..len], at).unwrap();
        take_reads(&f);
        let mut buf = vec![0u8; PAGE_SIZE];
        p.read_page(9, &mut buf, &[PageKind::Leaf]).unwrap();
        assert_eq!(
            node::without_gap(&buf)[page::HEADER_SIZE..],
            full[page::HEADER_SIZE..]
        );
        let reads = take_reads(&f);
        let first = image_read(&leaf(9, 30));
        assert_eq!(reads[..2], [(at, first), (at, PAGE_SIZE)]);
        assert_eq!(reads.last(), Some(&(at, len)));
    }
}
