//! Checkpoints: make the state at one instant durable, writing only what
//! changed, while readers and writers keep running.
//!
//! 1. **Cut.** Close the write gate (waits for writes already inside, then
//!    blocks new ones for microseconds), move the epoch from `n` to `n + 1`,
//!    take the list of pages dirtied in epoch `n` and the map chunks changed
//!    in it, note the log position (every record before it was applied
//!    inside the gate, so it is in this image), install the `running`
//!    state, and take the spare log segments the log's recent use no
//!    longer asks for out of the segment list; reopen the gate, then
//!    remove those files. If nothing
//!    changed since the last checkpoint, stop here: the cost of an idle
//!    checkpoint does not depend on how much is cached.
//! 2. **Capture.** For each page dirtied in epoch `n`, its content as of the
//!    cut is taken from whichever of three places holds it: the frame itself
//!    (copied under its latch; the page stays available), a shadow frame a
//!    writer filled before changing the page, or the block the evictor wrote
//!    it to. Each captured image goes to a new block (copy-on-write). A page
//!    not changed since its capture is marked clean at that block.
//! 3. **Map.** Rewrite only the map chunks whose entries differ from the
//!    last durable checkpoint, with the values as of the cut, and the chunk
//!    directory. Push the blocks written before this flush began (those
//!    the image may reference, `Pager::unflushed`) to the device in 4 MiB
//!    steps (so one huge fsync never fills the device queue), then make
//!    them durable without the rest of the file (`sync_written_back`), on
//!    a thread of low CPU priority (see [`flush`]);
//!    a growing file is grown first, and not while the steps run
//!    (`Pager::grow_before_flush`).
//!    Then sync the log and write capped collections' pending ring records
//!    (see `capped`), and sync the ring files. (The cut, gate closed, first
//!    writes each ring's in-memory state into its `$collections` value.)
//! 4. **Meta.** Write the meta slot not holding the previous checkpoint;
//!    `fdatasync`. The checkpoint is durable; blocks freed up to epoch `n`
//!    leave limbo, and log segments wholly before the cut's log position
//!    are recycled.
//!
//! The checkpoint takes no lock that eviction needs: frame latches one at a
//! time and the pager's state mutex for map bookkeeping, never across I/O.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::meta::Meta;
use crate::page::{self, put_u64, PageKind, HEADER_SIZE};
use crate::pagemap::{self, NO_FRAME};
use crate::pager::{Pending, Running};

/// What the last durable checkpoint consists of.
pub(crate) struct Durable {
    pub(crate) generation: u64,
    /// Log position the durable checkpoint covers: replay starts here.
    pub(crate) log_lsn: u64,
    pub(crate) chunk_blocks: Vec<u64>,
    pub(crate) dir_blocks: Vec<u64>,
    pub(crate) log_segment_size: u64,
}

#[derive(Default)]
pub(crate) struct CheckpointCounters {
    pub(crate) count: AtomicU64,
    pub(crate) idle: AtomicU64,
    pub(crate) last_ns: AtomicU64,
    pub(crate) max_ns: AtomicU64,
    pub(crate) pages_written: AtomicU64,
    pub(crate) running: AtomicU64,
    /// Write-backs of the data file between checkpoints
    /// ([`write_back`]).
    pub(crate) write_backs: AtomicU64,
    /// The pager's `bytes_written` as of the last flush, whole or of a
    /// checkpoint's blocks (every write counted before a checkpoint's
    /// flush began is in its set): a write-back with nothing new to sync
    /// is skipped.
    pub(crate) synced_bytes: AtomicU64,
    /// Flushes of the whole file (every write-back, and a checkpoint on a
    /// file system without the ranged sync): the checkpointer restarts
    /// the write-back's clock only after one of these.
    pub(crate) whole_flushes: AtomicU64,
    /// Nice value of the thread that flushes the data file for a
    /// checkpoint (`Builder::checkpoint_flush_nice`); `None`: the
    /// checkpointing thread flushes it itself.
    pub(crate) flush_nice: Option<i32>,
}

/// What one checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// Pages written (tree pages, map chunks, directory pages).
    pub pages_written: u64,
    /// Whether there was nothing to write.
    pub idle: bool,
    /// Time taken, in microseconds.
    pub duration_us: u64,
}

struct Cut {
    epoch: u64,
    pids: Vec<u64>,
    chunks: std::collections::BTreeSet<usize>,
    next_pid: u64,
    /// Log position of the cut: every record before it is in this image.
    log_lsn: u64,
}

pub(crate) fn checkpoint(e: &Engine) -> Result<CheckpointInfo> {
    let mut durable = e.durable.lock();
    e.pager.check_writable()?;
    // Refused before anything is written: a full disk fails this
    // checkpoint alone (writes go on; a later one may succeed).
    let _room = e.admit_checkpoint()?;
    let t0 = Instant::now();
    e.ckpt.running.store(1, Ordering::Relaxed);
    let result = match take_cut(e) {
        Ok(None) => Ok(0),
        Ok(Some(cut)) => write_image(e, &mut durable, cut),
        Err(err) => Err(err),
    };
    e.ckpt.running.store(0, Ordering::Relaxed);
    let pages = match result {
        Ok(p) => p,
        Err(err) => {
            e.pager.stop_writes(&format!("checkpoint failed: {err}"));
            return Err(err);
        }
    };
    let ns = t0.elapsed().as_nanos() as u64;
    e.ckpt.count.fetch_add(1, Ordering::Relaxed);
    e.ckpt.last_ns.store(ns, Ordering::Relaxed);
    e.ckpt.max_ns.fetch_max(ns, Ordering::Relaxed);
    e.ckpt.pages_written.fetch_add(pages, Ordering::Relaxed);
    if pages == 0 {
        e.ckpt.idle.fetch_add(1, Ordering::Relaxed);
    }
    Ok(CheckpointInfo {
        pages_written: pages,
        idle: pages == 0,
        duration_us: ns / 1000,
    })
}

/// Step 1. `None` if nothing changed since the last checkpoint.
fn take_cut(e: &Engine) -> Result<Option<Cut>> {
    e.gate.close();
    // Ring states are kept in memory between checkpoints; the image must
    // hold them as of the cut.
    if let Err(err) = e.persist_ring_states() {
        e.gate.open();
        return Err(err);
    }
    let cut = {
        let mut st = e.pager.state.lock();
        let pids = std::mem::take(&mut *e.pager.dirty_list.lock());
        if pids.is_empty() && st.dirty_chunks.is_empty() {
            None
        } else {
            let n = st.epoch;
            st.epoch = n + 1;
            e.pager.epoch.store(n + 1, Ordering::Release);
            if pagemap::epoch_tag(n + 1) == 1 {
                // Tags wrapped (every u32::MAX epochs): no old listing may
                // pass for one of the new epoch.
                e.pager.map.clear_listed();
            }
            let chunks = std::mem::take(&mut st.dirty_chunks);
            st.running = Some(Running {
                epoch: n,
                map_before: HashMap::new(),
                pending: HashMap::new(),
                shadowed: Vec::new(),
            });
            e.pager.alloc.clear_fresh();
            Some(Cut {
                epoch: n,
                pids,
                chunks,
                next_pid: e.pager.next_pid(),
                log_lsn: e.wal.position(),
            })
        }
    };
    // Idle checkpoints too: a database gone quiet after a burst gives its
    // spare log segments back.
    let surplus = e.wal.detach_surplus();
    e.gate.open();
    if cut.is_some() {
        // Pages cleaned in the epoch just closed may be cleaned again: an
        // eviction worker waiting out a lap that found every dirty page
        // hot goes on now.
        e.pool.wake_workers();
    }
    if surplus.remove().is_err() {
        e.wal.count_recycle_error();
    }
    Ok(cut)
}

/// Steps 2-4; returns the number of pages written.
fn write_image(e: &Engine, durable: &mut Durable, cut: Cut) -> Result<u64> {
    let Cut {
        epoch: n,
        mut pids,
        mut chunks,
        next_pid,
        log_lsn,
    } = cut;
    pids.sort_unstable();
    pids.dedup();
    let mut buf = e.pager.page_buf();
    let mut overrides: HashMap<u64, u64> = HashMap::with_capacity(pids.len());
    let mut written = 0u64;
    for pid in pids {
        written += write_shadows(e, n, &mut overrides, &mut buf)?;
        if let Some(b) = capture(e, pid, n, &mut buf)? {
            overrides.insert(pid, b);
            written += 1;
            continue;
        }
        written += take_pending(e, pid, n, &mut overrides, &mut buf)?;
    }
    written += write_shadows(e, n, &mut overrides, &mut buf)?;
    chunks.extend(overrides.keys().map(|&p| e.pager.chunk_of(p)));
    written += write_map(e, durable, n, next_pid, &chunks, &overrides, &mut buf)?;
    e.pager.state.lock().running = None;
    // The meta slot step 4 overwrites: nothing writes it before then.
    let slot = ((durable.generation + 1) % 2) * e.pager.page_size as u64;
    flush(e, Scope::Image { slot })?;
    // The image names ring states as of the cut: their records must be in
    // the ring files before the meta page makes the image durable.
    e.flush_rings()?;
    let meta = Meta {
        generation: durable.generation + 1,
        epoch: n,
        next_pid,
        dir_block: durable.dir_blocks.first().copied().unwrap_or(0),
        map_chunks: durable.chunk_blocks.len() as u32,
        log_lsn,
        log_segment_size: durable.log_segment_size,
    };
    meta.encode(&mut buf);
    // Everything the meta page names was made durable by the flush
    // above, so only the meta page's own bytes need to be: a whole-file
    // sync here would also write every page evicted since, none of which
    // this checkpoint needs, while writers wait for the pages it locks.
    e.pager
        .file
        .write_durable_at(&buf, (meta.generation % 2) * e.pager.page_size as u64)?;
    durable.generation = meta.generation;
    durable.log_lsn = log_lsn;
    e.pager.release_through(n);
    // The checkpoint is durable whatever happens to the old segments: a
    // failure to recycle them is counted (`log_recycle_errors`) and the
    // next checkpoint tries again.
    e.wal.checkpoint_done(log_lsn);
    Ok(written + 1)
}

/// What a flush of the data file must make durable.
#[derive(Clone, Copy)]
enum Scope {
    /// Everything written (a write-back between checkpoints).
    File,
    /// What a checkpoint's image may reference: every block written
    /// before the flush began, by evictions since the last flush and by
    /// the checkpoint itself (`Pager::unflushed`). Not the blocks writers
    /// fill while it runs: in a write-heavy load those are hundreds of
    /// megabytes a checkpoint would otherwise push out too, so its cost
    /// would follow the load's rate instead of its own dirty data.
    /// `slot` is the byte offset of the meta slot the checkpoint will
    /// write next, which nothing writes until then.
    Image { slot: u64 },
}

/// Step 3's flush: the data file's writes pushed to the device and
/// synced, on a thread of its own at nice value `e.ckpt.flush_nice` (when
/// set), while the checkpointing thread waits for it. This step is the
/// kernel's work (`sync_file_range` steps and `fdatasync`; no lock of ours
/// is held, so a thread of low priority holds up no one but the
/// checkpoint), and at normal priority it took writers' cores from them:
/// on 2 cores, a writer's 99th-percentile latency during a checkpoint of
/// 627 MB was 4.5 times its latency without one, and 2.2 times with this
/// step at nice 19 (medians of 13 and 17 runs; BENCHMARKS.md, "Checkpoint flush
/// at low priority"). The nice value of a thread can be raised but not
/// lowered back without privilege, hence a thread for the step rather
/// than the caller's own. If no thread can be started, the caller
/// flushes.
fn flush(e: &Engine, scope: Scope) -> Result<()> {
    let Some(nice) = e.ckpt.flush_nice else {
        return flush_here(e, scope);
    };
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("tidemark-ckpt-flush".into())
            .spawn_scoped(s, || {
                // A system that refuses the change leaves the thread at
                // normal priority: slower for writers, as correct.
                let _ = crate::io::set_thread_nice(nice);
                flush_here(e, scope)
            });
        match spawned {
            Ok(h) => h.join().unwrap_or_else(|_| {
                Err(Error::Io(std::io::Error::other(
                    "the checkpoint's flush thread panicked",
                )))
            }),
            Err(_) => flush_here(e, scope),
        }
    })
}

/// [`flush`] on the calling thread.
fn flush_here(e: &Engine, scope: Scope) -> Result<()> {
    // Read before the set is taken: a write is marked in the set before
    // it is counted, so every byte counted here is in the set.
    let written = e.pager.counters.bytes_written.load(Ordering::Acquire);
    // Taken before anything else: every block the image references is in
    // it (`Pager::unflushed`).
    let blocks = match scope {
        Scope::Image { .. } => e.pager.unflushed.take(),
        Scope::File => crate::pager::Written::Unknown,
    };
    // Room the growing file will soon need is taken now, before the
    // flush's writes make the device slow to answer the file system's
    // reads; while they are in flight, the preparer defers growth. A
    // failure is left, as the preparer's are, to the writers' own
    // admission, which reports a full disk.
    let _ = e.pager.grow_before_flush();
    let _flushing = e.pager.flush_guard();
    match (scope, blocks) {
        (Scope::Image { slot }, crate::pager::Written::Blocks(blocks)) => {
            write_back_blocks(e, &blocks)?;
            e.pager
                .file
                .sync_written_back((slot, e.pager.page_size as u64))?;
        }
        _ => {
            write_back_paced(e)?;
            e.pager.file.sync_data()?;
            e.ckpt.whole_flushes.fetch_add(1, Ordering::Relaxed);
        }
    }
    e.ckpt.synced_bytes.store(written, Ordering::Relaxed);
    Ok(())
}

/// Between checkpoints: the data file's cached writes pushed to the device
/// and synced, as a checkpoint's [`flush`] does (4 MiB steps, then
/// `fdatasync`, at low priority), so that the kernel's own write-back
/// never finds the file's dirty data expired (`vm.dirty_expire_centisecs`)
/// and queues all of it at once (`Builder::write_back_interval`). Nothing
/// becomes durable by this: the meta page still names the last
/// checkpoint. Skipped if nothing was written since the last sync; never
/// beside a checkpoint. A failure stops writes: the error of a failed
/// `fdatasync` is reported once, and a later checkpoint's sync could then
/// succeed over pages the kernel dropped.
pub(crate) fn write_back(e: &Engine) -> Result<()> {
    let _durable = e.durable.lock();
    e.pager.check_writable()?;
    let written = e.pager.counters.bytes_written.load(Ordering::Relaxed);
    if written == e.ckpt.synced_bytes.load(Ordering::Relaxed) {
        return Ok(());
    }
    if let Err(err) = flush(e, Scope::File) {
        e.pager
            .stop_writes(&format!("writing the data file back failed: {err}"));
        return Err(err);
    }
    e.ckpt.write_backs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Bytes the checkpoint hands to the device per step before its fsync.
/// Steps of 32 MiB halved a flush's length under `cache-pressure` but
/// deepened the slowest seconds, which fall in flushes (BENCHMARKS.md,
/// "A new instance at half speed; write-back steps of 32 MiB, tried").
const WRITE_BACK_STEP: u64 = 4 << 20;

/// The write-back step in flight, told to the allocator; cleared however
/// the steps end.
struct Window<'a>(&'a crate::alloc::BlockAlloc);

impl Drop for Window<'_> {
    fn drop(&mut self) {
        self.0.set_writing_back(None);
    }
}

/// Pushes the file's cached writes to the device a few megabytes at a time
/// before the fsync. Between two checkpoints the evictor may have written
/// gigabytes that the operating system still caches; one fsync of all of it
/// would fill the device queue while the kernel holds page locks that
/// writers' `pwrite`s need, stalling them for seconds. In small steps the
/// queue never fills, writers keep going, and the fsync finds little left.
///
/// While a step is in flight, its blocks are handed out to no one and
/// written over by no one ([`crate::alloc::BlockAlloc::set_writing_back`]):
/// the kernel locks a step's dirty pages while it queues them, and an
/// eviction's `pwrite` into one would wait for the device while holding the
/// file's write lock, and every writer of the file behind it.
fn write_back_paced(e: &Engine) -> Result<()> {
    let len = e.pager.file.len()?;
    let page = e.pager.page_size as u64;
    let window = Window(&e.pager.alloc);
    let mut off = 0;
    while off < len {
        let end = off + WRITE_BACK_STEP;
        window
            .0
            .set_writing_back(Some((off / page, end.div_ceil(page))));
        e.pager.file.write_back(off, WRITE_BACK_STEP)?;
        off = end;
    }
    Ok(())
}

/// Pushes `blocks` (ascending) to the device as [`write_back_paced`]
/// pushes the whole file, in the same 4 MiB steps of the file, but only
/// over the part of each step from its first block in `blocks` to its
/// last, and not at all over a step with none. A step's span may hold
/// blocks written after the flush began too (so written out early, which
/// is harmless); a step the image was not written to is passed by. The
/// step in flight is kept from evictions as in `write_back_paced`, and,
/// as there, each step is one call that waits for the write-outs in
/// flight over it, then writes and waits (`FileIo::write_back`). A first
/// version started each run of adjacent blocks as a write-out of its own
/// without waiting, and waited for them all after: in the `checkpoint`
/// benchmark its flush was slower and the writer's p99 beside it missed
/// the target in every run (BENCHMARKS.md, "The checkpoint flushes its
/// own blocks"). Nothing becomes durable here
/// ([`crate::io::FileIo::sync_written_back`]).
fn write_back_blocks(e: &Engine, blocks: &[u64]) -> Result<()> {
    let page = e.pager.page_size as u64;
    let per_step = (WRITE_BACK_STEP / page).max(1);
    let window = Window(&e.pager.alloc);
    let mut rest = blocks;
    while let Some(&first) = rest.first() {
        let step_end = (first / per_step + 1) * per_step;
        // At least 1: `first` itself is below `step_end`.
        let n = rest.partition_point(|&b| b < step_end);
        let last = rest[n - 1];
        window.0.set_writing_back(Some((first, last + 1)));
        e.pager
            .file
            .write_back(first * page, (last + 1 - first) * page)?;
        rest = &rest[n..];
    }
    Ok(())
}

/// Writes the cut content of every page shadowed since the last call, so
/// shadow frames go back to the cache at once.
fn write_shadows(
    e: &Engine,
    n: u64,
    overrides: &mut HashMap<u64, u64>,
    buf: &mut [u8],
) -> Result<u64> {
    let shadowed = match e.pager.state.lock().running.as_mut() {
        Some(r) if !r.shadowed.is_empty() => std::mem::take(&mut r.shadowed),
        _ => return Ok(0),
    };
    let mut written = 0;
    for pid in shadowed {
        written += take_pending(e, pid, n, overrides, buf)?;
    }
    Ok(written)
}

/// Records in `overrides` where the cut content of `pid` is, if a writer
/// or the evictor preserved it; writes a shadow frame out first. Returns
/// the number of pages written.
fn take_pending(
    e: &Engine,
    pid: u64,
    n: u64,
    overrides: &mut HashMap<u64, u64>,
    buf: &mut [u8],
) -> Result<u64> {
    let pending = e
        .pager
        .state
        .lock()
        .running
        .as_mut()
        .and_then(|r| r.pending.remove(&pid));
    match pending {
        Some(Pending::Shadow(fi)) => {
            buf.copy_from_slice(&e.pool.frames[fi as usize].latch.read().buf);
            let b = e.pager.write_new_block(buf, false)?;
            e.pool.release_shadow(fi);
            // Only this checkpoint references `b`; the live page moved on.
            e.pager.alloc.free(b, n + 1);
            overrides.insert(pid, b);
            Ok(1)
        }
        Some(Pending::Written(b)) => {
            overrides.insert(pid, b);
            Ok(0)
        }
        None => Ok(0),
    }
}

/// Takes the cut content of `pid` from its frame, if the frame still holds
/// it, and writes it to a new block.
fn capture(e: &Engine, pid: u64, n: u64, buf: &mut [u8]) -> Result<Option<u64>> {
    loop {
        let f = e.pager.map.frame(pid);
        if f == NO_FRAME {
            return Ok(None);
        }
        let frame = &e.pool.frames[f as usize];
        let mut g = frame.latch.write();
        if g.pid == pid && g.state == crate::cache::FrameState::Standby {
            // In standby: clean, its content at its block.
            return Ok(None);
        }
        if g.state != crate::cache::FrameState::Page || g.pid != pid {
            continue;
        }
        if !(g.dirty && g.dirty_epoch == n) {
            return Ok(None);
        }
        buf.copy_from_slice(&g.buf);
        g.dirty_epoch = n + 1;
        let modcount = g.modcount;
        drop(g);
        let b = e.pager.write_new_block(buf, false)?;
        let mut g = frame.latch.write();
        if g.state == crate::cache::FrameState::Page
            && g.pid == pid
            && g.dirty
            && g.modcount == modcount
        {
            // Unchanged since the capture: the page is clean at `b`. The
            // count is the frame's over all its pages, never reset, so a
            // page evicted while `b` was written and loaded into this
            // frame again, then changed, does not show the count read.
            e.pool.mark_clean(f, &mut g);
            let old = e.pager.map.swap_block(pid, b);
            if old != pagemap::NO_BLOCK {
                e.pager.alloc.free(old, n);
            }
        } else {
            e.pager.alloc.free(b, n + 1);
            if g.state == crate::cache::FrameState::Page
                && g.pid == pid
                && g.dirty
                && e.pager.map.list_once(pid, n + 1)
            {
                e.pager.dirty_list.lock().push(pid);
            }
        }
        return Ok(Some(b));
    }
}

/// Step 3: rewrites changed map chunks and the directory.
fn write_map(
    e: &Engine,
    durable: &mut Durable,
    n: u64,
    next_pid: u64,
    chunks: &std::collections::BTreeSet<usize>,
    overrides: &HashMap<u64, u64>,
    buf: &mut [u8],
) -> Result<u64> {
    let per_chunk = e.pager.chunk_entries();
    let nchunks = (next_pid as usize).div_ceil(per_chunk);
    if durable.chunk_blocks.len() < nchunks {
        durable.chunk_blocks.resize(nchunks, 0);
    }
    let mut written = 0;
    for &c in chunks.iter().filter(|&&c| c < nchunks) {
        page::init(buf, PageKind::MapChunk, 0, c as u64);
        {
            let st = e.pager.state.lock();
            let before = st.running.as_ref().map(|r| &r.map_before);
            for j in 0..per_chunk {
                let pid = (c * per_chunk + j) as u64;
                let v = if pid >= next_pid {
                    0
                } else if let Some(&b) = overrides.get(&pid) {
                    b
                } else if let Some(&b) = before.and_then(|m| m.get(&pid)) {
                    b
                } else {
                    e.pager.map.block(pid)
                };
                put_u64(buf, HEADER_SIZE + j * 8, v);
            }
        }
        let b = e.pager.write_new_block(buf, false)?;
        written += 1;
        let old = std::mem::replace(&mut durable.chunk_blocks[c], b);
        if old != 0 {
            e.pager.alloc.free(old, n);
        }
    }
    // Directory: chained pages listing every chunk block, written last
    // page first so each can name its successor.
    let per_page = per_chunk;
    let npages = durable.chunk_blocks.len().div_ceil(per_page);
    let mut new_dirs = vec![0u64; npages];
    let mut next = 0u64;
    for d in (0..npages).rev() {
        let entries = &durable.chunk_blocks
            [d * per_page..((d + 1) * per_page).min(durable.chunk_blocks.len())];
        page::init(buf, PageKind::MapDirectory, 0, d as u64);
        page::set_count(buf, entries.len());
        page::set_aux(buf, next);
        for (i, &cb) in entries.iter().enumerate() {
            put_u64(buf, HEADER_SIZE + i * 8, cb);
        }
        next = e.pager.write_new_block(buf, false)?;
        new_dirs[d] = next;
        written += 1;
    }
    for old in std::mem::replace(&mut durable.dir_blocks, new_dirs) {
        e.pager.alloc.free(old, n);
    }
    Ok(written)
}
