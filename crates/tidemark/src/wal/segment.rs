//! Log segment files: the log stream cut into fixed-size files.
//!
//! Segment `i` holds stream positions `i * size .. (i + 1) * size` and is
//! named `wal-<i as 16 hex digits>.log`. New segments are prepared ahead
//! of the writer by a background thread: written with zeros in page-sized
//! writes under a temporary name (`.prep`), fsynced, then renamed into
//! place with a directory sync, so later commits overwrite blocks that
//! exist and their `fdatasync` has no file-size or extent change to
//! journal. A commit that reaches a segment not yet prepared (the device
//! is too busy for the preparer to keep up) never waits for a zero fill,
//! nor for an fsync: it creates the segment preallocated (`fallocate`) at
//! its full length, emptied first of anything an earlier life left there,
//! and leaves the file and its directory entry to the next sync of the
//! log ([`Inner::sync`], [`Inner::sync_range`]), which makes them durable
//! before it reports anything durable. A commit at durability `Write` then
//! pays no fsync for the segments it makes; one at `Fsync` pays for them in
//! the sync it waits for anyway (while a checkpoint flushed, the syncs at
//! creation waited behind its writes: BENCHMARKS.md, "Segments the writer
//! makes, synced with the log"). Until then a crash
//! can leave such a file missing, or short; a short segment file is never
//! read, and holds no record a sync reported durable. A
//! segment the durable checkpoint no longer needs is renamed to the next
//! index after the newest one (its old records carry LSNs that do not
//! match their new position, so recovery never takes them for new ones)
//! and reused. The spares kept follow what the log has used between
//! recent checkpoints (see [`Usage`]): after a burst, those the load no
//! longer needs are removed, furthest from the log first.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::io::{FileIo, FileSystem};

/// Segments kept for reuse beyond the one being written, at least.
const SPARES: usize = 2;
/// Size of each write that fills a new segment with zeros.
const FILL_CHUNK: usize = 4096;
/// Segments the background preparer makes ready, from the one after the
/// segment being written.
const AHEAD: u64 = 2;
/// The block in which the log's writes end (see [`Inner::write_at`]).
const BLOCK: u64 = crate::io::CACHE_PAGE as u64;
/// Checkpoints over which the log's use sizes the spares (see [`Usage`]).
const WINDOW: usize = 8;
/// Stream bytes past the position of a cut that records not admitted
/// through [`Segments::ensure_room`] could still reach: those are the
/// 32-byte empty records of `Wal::sync`, placed outside the write gate, at
/// most one in flight per thread, so this covers 8,192 threads. Surplus
/// spares are removed only beyond it and the segments prepared ahead.
const CUT_SLACK: u64 = 256 << 10;

pub(crate) fn file_name(index: u64) -> String {
    format!("wal-{index:016x}.log")
}

/// Name of segment `index` while the preparer fills it.
fn prep_name(index: u64) -> String {
    format!("wal-{index:016x}.prep")
}

fn parse_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[derive(Default)]
pub(crate) struct SegmentCounters {
    pub(crate) created: AtomicU64,
    pub(crate) recycled: AtomicU64,
    pub(crate) recycle_errors: AtomicU64,
    /// Segment files removed: let go by a checkpoint when the spares were
    /// enough, or spares the log's recent use no longer asked for.
    pub(crate) removed: AtomicU64,
}

/// How far the log moved between recent checkpoints, which sizes the
/// spares: twice the most segments it went through between two cuts over
/// the last [`WINDOW`] checkpoints (idle ones included), and [`SPARES`],
/// at most the configured limit. Until a window has been seen since open,
/// the limit itself. A steady load keeps the spares it uses, so it still
/// creates no segment files; a burst's spares are removed [`WINDOW`]
/// checkpoints after it ends.
#[derive(Default)]
struct Usage {
    /// Segment of the stream position at the last cut.
    last: Option<u64>,
    /// Segments the stream moved between consecutive cuts, newest last.
    recent: VecDeque<u64>,
}

/// The segment files; cheap to share with the thread that prepares the
/// next segment ahead of the writer.
pub(crate) struct Segments {
    inner: Arc<Inner>,
    /// The last preparer thread, joined before the segments are dropped:
    /// a preparer outliving its database could rename a file into a
    /// directory that a new instance already uses.
    preparer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Segments {
    fn drop(&mut self) {
        if let Some(h) = self.preparer.get_mut().take() {
            // The thread returns no value and catches nothing to report.
            let _ = h.join();
        }
    }
}

impl std::ops::Deref for Segments {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

pub(crate) struct Inner {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    size: u64,
    files: Mutex<BTreeMap<u64, Arc<dyn FileIo>>>,
    /// Segments written since the last sync.
    unsynced: Mutex<BTreeSet<u64>>,
    /// Held while files are created or renamed: a segment the leader
    /// creates and one the checkpoint recycles must never get one name.
    layout: Mutex<()>,
    /// 1 + index of the segment being prepared in the background, or 0.
    preparing: AtomicU64,
    /// Segments below this index were let go by a checkpoint: the log
    /// never reaches them again, so none is created there. Raised only
    /// under `layout`. Without it, a preparer that checked for segment `i`
    /// before the writer created it and a checkpoint recycled it away
    /// would rename a new file into place behind the log, a spare that
    /// nothing ever writes.
    retired_below: AtomicU64,
    /// Stream position below which every block the log has written
    /// since open was written whole at least once (see
    /// [`Inner::write_at`]).
    whole_to: AtomicU64,
    /// Segments created on the commit path (see [`Inner::file`]), whose
    /// directory entries a sync must make durable: a count, raised after
    /// each creation, that the syncs compare with `dir_synced`.
    creations: AtomicU64,
    /// Value of `creations` up to which a directory sync has completed;
    /// held while one runs, so a sync that finds it behind waits for the
    /// one in flight rather than report its segments durable before their
    /// names are.
    dir_synced: Mutex<u64>,
    /// Most segments kept for reuse (see [`Inner::recycle`]).
    max_spares: AtomicUsize,
    /// The log's use between recent checkpoints, which sizes the spares.
    usage: Mutex<Usage>,
    pub(crate) counters: SegmentCounters,
}

impl Segments {
    /// Opens the segments found in `dir`.
    pub(crate) fn open(fs: Arc<dyn FileSystem>, dir: &Path, size: u64) -> Result<Segments> {
        let mut files = BTreeMap::new();
        for name in fs.list(dir)? {
            if name.starts_with("wal-") && name.ends_with(".prep") {
                // A preparation cut short: never part of the log.
                match fs.remove(&dir.join(&name)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => continue,
                }
            }
            if let Some(i) = parse_name(&name) {
                let f = fs.open(&dir.join(&name), false)?;
                // A short segment is one whose zero fill did not finish (a
                // full disk, a crash): no record was ever written to it.
                // Left out, it is filled again when the log gets there.
                if f.len()? >= size {
                    files.insert(i, f);
                }
            }
        }
        Ok(Segments {
            inner: Arc::new(Inner {
                fs,
                dir: dir.to_path_buf(),
                size,
                files: Mutex::new(files),
                unsynced: Mutex::new(BTreeSet::new()),
                layout: Mutex::new(()),
                preparing: AtomicU64::new(0),
                retired_below: AtomicU64::new(0),
                whole_to: AtomicU64::new(0),
                creations: AtomicU64::new(0),
                dir_synced: Mutex::new(0),
                // Until the database's options size them.
                max_spares: AtomicUsize::new(SPARES),
                usage: Mutex::new(Usage::default()),
                counters: SegmentCounters::default(),
            }),
            preparer: Mutex::new(None),
        })
    }

    /// Writes stream bytes at `pos`, across segment boundaries. On the
    /// first write into a segment, the next one is prepared (zero-filled,
    /// synced) by a short-lived background thread, so the commit that
    /// crosses into it finds it ready instead of filling it itself.
    pub(crate) fn write(&self, pos: u64, bytes: &[u8]) -> Result<()> {
        self.inner.write_at(pos, bytes)?;
        let (first, last) = (pos / self.size, (pos + bytes.len() as u64) / self.size);
        if pos.is_multiple_of(self.size) || first != last {
            self.prepare_in_background(last + 1);
        }
        Ok(())
    }

    /// Starts preparing segments `next..next + AHEAD` (zero-filled,
    /// synced) on a short-lived background thread, unless `next` exists or
    /// a preparation is already running. Never waits.
    fn prepare_in_background(&self, next: u64) {
        if !self.files.lock().contains_key(&next)
            && self
                .preparing
                .compare_exchange(0, next + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("tidemark-log-prepare".into())
                .spawn(move || {
                    // A failure here is not lost: the writer creates the
                    // segment itself when it gets there, and reports that.
                    for i in next..next + AHEAD {
                        if inner.prepare(i).is_err() {
                            break;
                        }
                    }
                    inner.preparing.store(0, Ordering::Release);
                });
            match spawned {
                // The previous preparer has finished (`preparing` was 0),
                // so dropping its handle detaches nothing still running.
                Ok(h) => *self.preparer.lock() = Some(h),
                Err(_) => self.preparing.store(0, Ordering::Release),
            }
        }
    }

    /// Waits for the background preparer, if one was started and not yet
    /// waited for; returns whether there was one.
    fn join_preparer(&self) -> bool {
        match self.preparer.lock().take() {
            Some(h) => {
                // As in `drop`: the thread returns nothing to report.
                let _ = h.join();
                true
            }
            None => false,
        }
    }

    /// Sizes the spares recycling keeps for a log that asks for a
    /// checkpoint every `bytes` (see [`spares_for`]).
    pub(crate) fn keep_spares_for(&self, bytes: u64) {
        self.max_spares
            .store(spares_for(bytes, self.size), Ordering::Relaxed);
    }

    /// Makes sure the segments that will hold stream bytes `pos..pos +
    /// len` exist, creating (preallocating, see [`Inner::file`]) those the
    /// preparer has not made: the group write that follows then only
    /// writes into space the file system already gave. A full disk is
    /// [`Error::DiskFull`]; nothing of the log changed. The segment after
    /// them is prepared in the background, never on the commit path:
    /// preparing one (16 MiB of zeros and an fdatasync) took a committing
    /// thread tens of milliseconds.
    pub(crate) fn ensure_room(&self, pos: u64, len: u64) -> Result<()> {
        let last = (pos + len.max(1) - 1) / self.size;
        let (missing, next_missing): (Vec<u64>, bool) = {
            let files = self.files.lock();
            (
                (pos / self.size..=last)
                    .filter(|i| !files.contains_key(i))
                    .collect(),
                !files.contains_key(&(last + 1)),
            )
        };
        for i in missing {
            let made = match self.inner.file(i) {
                // The preparer may be filling this very segment under its
                // temporary name, and hold the room a second copy would
                // need: once it is done, the segment is there (or the room
                // its copy took is free again).
                Err(Error::Io(io))
                    if crate::error::io_is_disk_full(&io) && self.join_preparer() =>
                {
                    self.inner.file(i)
                }
                r => r,
            };
            made.map_err(|e| match e {
                Error::Io(io) if crate::error::io_is_disk_full(&io) => Error::DiskFull(format!(
                    "creating log segment {} of {} bytes failed ({io})",
                    file_name(i),
                    self.size
                )),
                e => e,
            })?;
        }
        // Only now: on a disk with room for one more segment, a preparer
        // started first could take it for the segment after, and this
        // commit would be refused for want of the room it had.
        if next_missing {
            self.prepare_in_background(last + 1);
        }
        Ok(())
    }

    /// Overwrites the 32-byte header at `pos` with zeros (a stale record
    /// recovery found past the end of the log) and syncs.
    pub(crate) fn erase_header(&self, pos: u64) -> Result<()> {
        self.inner.write_at(pos, &[0u8; super::record::HEADER])?;
        self.sync()
    }
}

impl Inner {
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Indices of the segment files present.
    pub(crate) fn indices(&self) -> Vec<u64> {
        self.files.lock().keys().copied().collect()
    }

    /// Reads stream bytes from `pos` into `buf`; returns how many were
    /// there (fewer at a missing segment or the end of a short file).
    pub(crate) fn read(&self, mut pos: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let (i, off) = (pos / self.size, pos % self.size);
            let Some(f) = self.files.lock().get(&i).cloned() else {
                break;
            };
            let n = ((self.size - off) as usize).min(buf.len() - done);
            let avail = f.len()?.saturating_sub(off).min(n as u64) as usize;
            if avail > 0 {
                f.read_exact_at(&mut buf[done..done + avail], off)?;
            }
            done += avail;
            pos += avail as u64;
            if avail < n {
                break;
            }
        }
        Ok(done)
    }

    /// The file of segment `i`; if missing, created at once: emptied (a
    /// short file of that name, left by a crash, may hold records of an
    /// earlier life), then preallocated at its full length, no data
    /// written and nothing synced: the commit path waits for neither a
    /// zero fill nor an fsync. The file's length and its directory entry
    /// become durable with the next sync of the log, before that sync
    /// reports any of its records durable (see `creations`). A creation that
    /// fails (a full disk, most likely) removes what it made, so that no
    /// short file keeps the room it took.
    fn file(&self, i: u64) -> Result<Arc<dyn FileIo>> {
        if let Some(f) = self.files.lock().get(&i) {
            return Ok(f.clone());
        }
        let _layout = self.layout.lock();
        if let Some(f) = self.files.lock().get(&i) {
            return Ok(f.clone());
        }
        // Under `layout`, a segment file not in `files` is no one's: the
        // preparer renames into place and recycling renames under it too.
        let path = self.dir.join(file_name(i));
        let f = self.fs.open(&path, true)?;
        let made = (|| -> Result<()> {
            // A file by this name that is not a segment is a short one
            // open left out: its length never became durable, but blocks
            // of records written into it may have, and they must not
            // reappear inside the new segment at their old positions.
            if f.len()? > 0 {
                f.set_len(0)?;
            }
            f.preallocate(self.size)?;
            // `preallocate` may leave the length short, and a short segment
            // is taken at open for one whose creation never finished.
            if f.len()? < self.size {
                f.set_len(self.size)?;
            }
            Ok(())
        })();
        if let Err(e) = made {
            // Best effort, as in `prepare`: the error reported is the
            // creation's. A removal that does not reach the disk leaves a
            // short file, which open takes for an unfinished creation.
            drop(f);
            let _ = self.fs.remove(&path);
            return Err(e);
        }
        self.counters.created.fetch_add(1, Ordering::Relaxed);
        // Before the file is handed out, so before any record is written
        // into it: a sync that covers such a record sees the creation.
        self.creations.fetch_add(1, Ordering::AcqRel);
        self.files.lock().insert(i, f.clone());
        Ok(f)
    }

    /// Whether segment `i` exists, or lies behind the log where no
    /// segment is created any more (see `retired_below`).
    fn exists_or_retired(&self, i: u64) -> bool {
        self.files.lock().contains_key(&i) || i < self.retired_below.load(Ordering::Acquire)
    }

    /// Prepares segment `i` unless it exists: zeros written and synced
    /// under a temporary name, without holding the layout lock (a commit
    /// that needs the segment meanwhile creates it itself), then renamed
    /// into place. If the segment was created meanwhile, the prepared file
    /// is removed.
    fn prepare(&self, i: u64) -> Result<()> {
        if self.exists_or_retired(i) {
            return Ok(());
        }
        let tmp = self.dir.join(prep_name(i));
        let f = self.fs.open(&tmp, true)?;
        let filled = (|| -> Result<()> {
            let zeros = vec![0u8; FILL_CHUNK];
            let mut off = 0;
            while off < self.size {
                let n = (self.size - off).min(FILL_CHUNK as u64) as usize;
                f.write_all_at(&zeros[..n], off)?;
                off += n as u64;
            }
            f.sync_data()?;
            Ok(())
        })();
        if let Err(e) = filled {
            // A fill cut short (a full disk, most likely) gives its room
            // back at once, not at the next open. Best effort: the error
            // reported is the fill's.
            drop(f);
            let _ = self.fs.remove(&tmp);
            return Err(e);
        }
        let layout = self.layout.lock();
        // Checked again under `layout`: the writer may have created the
        // segment meanwhile, and a checkpoint may have recycled it away.
        if self.exists_or_retired(i) {
            drop(layout);
            self.fs.remove(&tmp)?;
            return Ok(());
        }
        self.fs.rename(&tmp, &self.dir.join(file_name(i)))?;
        self.fs.sync_dir(&self.dir)?;
        self.counters.created.fetch_add(1, Ordering::Relaxed);
        self.files.lock().insert(i, f);
        Ok(())
    }

    /// Writes stream bytes at `pos`, across segment boundaries.
    ///
    /// A write that ends inside a [`BLOCK`] the log has not written whole
    /// since open goes on with zeros to the block's end. A write that
    /// covers only part of a page-cache page not in the cache makes the
    /// kernel read the page from the device first, and the committing
    /// thread waits for that read, behind whatever the device is busy
    /// with: the blocks of a recycled segment, or of a prepared one, whose
    /// clean pages the kernel reclaimed (the VM of BENCHMARKS.md runs a
    /// proactive reclaim of idle pages) are such pages. One insert of `cache-pressure`
    /// waited 1.03 s there, the device busy with a checkpoint
    /// (BENCHMARKS.md, "The log's reads before its writes"). The zeros lie
    /// past the end of the stream, where a segment holds zeros or stale
    /// records, and the next group's write, always after this one (one
    /// leader at a time), overwrites them; its page is then cached. Only
    /// a write starting inside a block not written since open, the first
    /// after a reopen, still reads that block.
    fn write_at(&self, mut pos: u64, mut bytes: &[u8]) -> Result<()> {
        let end = pos + bytes.len() as u64;
        let pad_to = if end > self.whole_to.load(Ordering::Relaxed) {
            end.next_multiple_of(BLOCK)
        } else {
            end
        };
        while !bytes.is_empty() {
            let (i, off) = (pos / self.size, pos % self.size);
            let n = ((self.size - off) as usize).min(bytes.len());
            let f = self.file(i)?;
            if pos + n as u64 == end && pad_to > end {
                // The segment size is a multiple of BLOCK (`check_size`),
                // so the zeros end inside this segment.
                let pad = &crate::io::ZEROS[..(pad_to - end) as usize];
                f.write_all_vectored_at(&[&bytes[..n], pad], off)?;
            } else {
                f.write_all_at(&bytes[..n], off)?;
            }
            self.unsynced.lock().insert(i);
            bytes = &bytes[n..];
            pos += n as u64;
        }
        self.whole_to.fetch_max(pad_to, Ordering::Relaxed);
        Ok(())
    }

    /// Makes the stream bytes in `from..to` durable (`fdatasync` of the
    /// segments holding them) without taking part in group commit: the
    /// list of segments the next group's fsync covers is left alone, so a
    /// concurrent leader still syncs everything it must.
    pub(crate) fn sync_range(&self, from: u64, to: u64) -> Result<()> {
        if to <= from {
            return Ok(());
        }
        for i in from / self.size..=(to - 1) / self.size {
            let f = self.files.lock().get(&i).cloned();
            if let Some(f) = f {
                f.sync_data()?;
            }
        }
        self.sync_created()
    }

    /// Makes the directory entries of the segments created on the commit
    /// path durable, if any are not yet: every sync calls it after its
    /// `fdatasync`s and before it reports anything durable. A creation
    /// raises `creations` before its segment gets a record, so the count read
    /// here covers the segments of every record the caller syncs.
    fn sync_created(&self) -> Result<()> {
        let want = self.creations.load(Ordering::Acquire);
        let mut done = self.dir_synced.lock();
        if *done < want {
            self.fs.sync_dir(&self.dir)?;
            *done = want;
        }
        Ok(())
    }

    /// Makes every segment written since the last call durable.
    pub(crate) fn sync(&self) -> Result<()> {
        let pending: Vec<u64> = std::mem::take(&mut *self.unsynced.lock())
            .into_iter()
            .collect();
        for (k, &i) in pending.iter().enumerate() {
            let f = self.files.lock().get(&i).cloned();
            if let Some(f) = f {
                if let Err(e) = f.sync_data() {
                    // Not synced: keep them listed for whoever retries.
                    self.unsynced.lock().extend(&pending[k..]);
                    return Err(e.into());
                }
            }
        }
        self.sync_created()
    }

    /// Reuses or removes segments wholly before stream position `before`
    /// (which nothing will write again). Renames go to indices after the
    /// newest segment, so they become the next ones written. Every one is
    /// kept while the spares (segments past `head`'s) are fewer than the
    /// log's recent use asks for (see [`Usage`]), at most the configured
    /// limit (see [`Segments::keep_spares_for`]), so the spares grow only
    /// to what the load has needed between checkpoints and a steady load
    /// creates no segment files; the rest are removed. `head` is where the
    /// log writes next: segments after its one are the spares already
    /// there.
    pub(crate) fn recycle(&self, before: u64, head: u64) -> Result<()> {
        let first_needed = before / self.size;
        let _layout = self.layout.lock();
        let (old, mut newest, mut spares) = {
            let files = self.files.lock();
            let old: Vec<u64> = files.range(..first_needed).map(|(&i, _)| i).collect();
            let newest = files.keys().next_back().copied().unwrap_or(0);
            (old, newest, files.range(head / self.size + 1..).count())
        };
        self.retired_below.fetch_max(first_needed, Ordering::AcqRel);
        if old.is_empty() {
            return Ok(());
        }
        let keep = self.spares_wanted();
        for i in old {
            let from = self.dir.join(file_name(i));
            if spares < keep {
                newest += 1;
                self.fs.rename(&from, &self.dir.join(file_name(newest)))?;
                let mut files = self.files.lock();
                if let Some(f) = files.remove(&i) {
                    files.insert(newest, f);
                }
                spares += 1;
                self.counters.recycled.fetch_add(1, Ordering::Relaxed);
            } else {
                self.fs.remove(&from)?;
                self.files.lock().remove(&i);
                self.counters.removed.fetch_add(1, Ordering::Relaxed);
            }
            self.unsynced.lock().remove(&i);
        }
        self.fs.sync_dir(&self.dir)?;
        Ok(())
    }

    /// Spares the log's recent use asks for (see [`Usage`]).
    fn spares_wanted(&self) -> usize {
        self.spares_for_usage(&self.usage.lock())
    }

    /// The most spares ever kept (see [`Segments::keep_spares_for`]).
    fn spare_limit(&self) -> usize {
        self.max_spares.load(Ordering::Relaxed).max(SPARES)
    }

    /// Spares `usage` asks for, at most the configured limit.
    fn spares_for_usage(&self, usage: &Usage) -> usize {
        let limit = self.spare_limit();
        if usage.recent.len() < WINDOW {
            return limit;
        }
        let most = usage.recent.iter().copied().max().unwrap_or(0);
        let wanted = most.saturating_mul(2).saturating_add(SPARES as u64);
        usize::try_from(wanted)
            .unwrap_or(usize::MAX)
            .clamp(SPARES, limit)
    }

    /// At a checkpoint's cut, with the write gate closed (`head`, the
    /// stream position, is then exact but for the few empty records
    /// `Wal::sync` places outside the gate): notes how far the log moved
    /// since the last cut, and takes the spares beyond what its recent use
    /// asks for out of the segment list, furthest from the log first,
    /// never within [`CUT_SLACK`] and the segments prepared ahead of
    /// `head`. Call [`Surplus::remove`] on the result once the gate is
    /// open again: it removes their files, holding the layout lock until
    /// then, so that no segment of their names is created meanwhile. That
    /// lock is only tried: it is held across file creations and directory
    /// syncs, which must not hold the gate closed; when it is busy, or
    /// nothing is surplus, nothing is taken out.
    ///
    /// Once out of the list, no writer can reach their files: a record
    /// written past the slack must be placed after this cut, and the
    /// write looks its segment up in the list then, finds none, and
    /// creates one (waiting for the layout lock).
    pub(crate) fn detach_surplus(&self, head: u64) -> Surplus<'_> {
        let segment = head / self.size;
        let keep = {
            let mut usage = self.usage.lock();
            if let Some(last) = usage.last {
                usage.recent.push_back(segment.saturating_sub(last));
                if usage.recent.len() > WINDOW {
                    usage.recent.pop_front();
                }
            }
            usage.last = Some(segment);
            self.spares_for_usage(&usage)
        };
        let none = Surplus {
            segs: self,
            _layout: None,
            detached: Vec::new(),
        };
        // Nothing at or below `beyond` is ever taken out, and the newest
        // index bounds the spares: a look at one key ends the check of an
        // idle checkpoint, whose cost then does not grow with the spares a
        // large log keeps (counting them took 0.5 to 1.2 us at 64 MB to
        // 4 GB of cache in `tidemark-bench checkpoint`).
        let beyond = (head.saturating_add(CUT_SLACK) / self.size).saturating_add(AHEAD);
        // Kept up to the limit (the window is not full yet, or the log's
        // use asks for all of them): recycling never keeps a spare past
        // the limit, and the segments prepared ahead lie within `beyond`,
        // so there is nothing to take. Only a directory opened with more
        // spares than its limit holds an excess, which goes once the log's
        // use asks for fewer. Without this exit, every idle checkpoint of
        // the window after a large fill counted the spares (0.2 us at 64 MB
        // against 0.6 us at 4 GB in `tidemark-bench checkpoint`).
        if keep >= self.spare_limit() {
            return none;
        }
        let newest = self.files.lock().keys().next_back().copied().unwrap_or(0);
        if newest.saturating_sub(segment) <= keep as u64 || newest <= beyond {
            return none;
        }
        // Never waited for with the gate closed: the layout lock is held
        // across file creations and directory syncs. Busy, the surplus
        // waits for a later checkpoint.
        let Some(layout) = self.layout.try_lock() else {
            return none;
        };
        let mut files = self.files.lock();
        let surplus = files.range(segment + 1..).count().saturating_sub(keep);
        let detached: Vec<u64> = files
            .range(beyond + 1..)
            .rev()
            .take(surplus)
            .map(|(&i, _)| i)
            .collect();
        for i in &detached {
            files.remove(i);
        }
        drop(files);
        Surplus {
            segs: self,
            _layout: Some(layout),
            detached,
        }
    }
}

/// Spare segments taken out of the list by [`Inner::detach_surplus`],
/// whose files are still to be removed.
pub(crate) struct Surplus<'a> {
    segs: &'a Inner,
    _layout: Option<parking_lot::MutexGuard<'a, ()>>,
    detached: Vec<u64>,
}

impl Surplus<'_> {
    /// Removes the files. A failure leaves the rest in place, out of the
    /// list: a later open takes them up as spares again, and a write that
    /// reaches one of their indices first reopens the file there (whole,
    /// holding stale records only).
    pub(crate) fn remove(self) -> Result<()> {
        if self.detached.is_empty() {
            return Ok(());
        }
        let s = self.segs;
        for &i in &self.detached {
            s.fs.remove(&s.dir.join(file_name(i)))?;
            s.counters.removed.fetch_add(1, Ordering::Relaxed);
        }
        s.fs.sync_dir(&s.dir)?;
        Ok(())
    }
}

impl super::group::Sink for Segments {
    fn write(&self, pos: u64, bytes: &[u8]) -> Result<()> {
        Segments::write(self, pos, bytes)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }
}

/// Spare segments of `size` bytes for a log that asks for a checkpoint
/// every `bytes`: twice that (the log keeps growing while a checkpoint
/// runs, so more than `bytes` can pass between two recyclings), and the
/// one prepared ahead.
fn spares_for(bytes: u64, size: u64) -> usize {
    usize::try_from(2 * bytes.div_ceil(size.max(1)) + SPARES as u64).unwrap_or(usize::MAX)
}

/// Checks a segment size chosen for a new database.
pub(crate) fn check_size(size: u64) -> Result<()> {
    if size < 4096 || !size.is_multiple_of(4096) || size > 1 << 34 {
        return Err(Error::InvalidOption(format!(
            "log_segment_size {size} must be a multiple of 4096 between 4 KiB and 16 GiB"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_ignored() {
        assert_eq!(parse_name(&file_name(0x1234)), Some(0x1234));
        assert_eq!(parse_name("wal-12.log"), None);
        assert_eq!(parse_name("data.tdm"), None);
        assert!(check_size(1000).is_err());
        assert!(check_size(64 << 10).is_ok());
    }

    const SIZE: u64 = 64 << 10;

    fn open(dir: &Path) -> Segments {
        Segments::open(Arc::new(crate::io::OsFileSystem), dir, SIZE).unwrap()
    }

    fn zeros(f: &Arc<dyn FileIo>) -> bool {
        let mut buf = vec![1u8; SIZE as usize];
        f.read_exact_at(&mut buf, 0).unwrap();
        buf.iter().all(|&b| b == 0)
    }

    #[test]
    fn a_segment_not_prepared_is_created_at_full_length_without_waiting() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let f = s.file(3).unwrap();
        assert_eq!(f.len().unwrap(), SIZE);
        assert!(zeros(&f));
        assert_eq!(s.indices(), vec![3]);
        assert_eq!(s.counters.created.load(Ordering::Relaxed), 1);
        drop(s);
        // At full length, so a reopen takes it as a segment.
        assert_eq!(open(d.path()).indices(), vec![3]);
    }

    #[test]
    fn a_prepared_segment_is_renamed_into_place_and_leftovers_go_at_open() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        s.prepare(0).unwrap();
        assert_eq!(s.indices(), vec![0]);
        assert!(zeros(&s.file(0).unwrap()));
        let names = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(d.path()), vec![file_name(0)]);
        drop(s);
        // A preparation cut short by a crash is neither a segment nor kept.
        std::fs::write(d.path().join(prep_name(1)), [0u8; 100]).unwrap();
        let s = open(d.path());
        assert_eq!(s.indices(), vec![0]);
        assert_eq!(names(d.path()), vec![file_name(0)]);
    }

    #[test]
    fn preparing_never_overwrites_a_segment_the_writer_created() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        s.write(2 * SIZE, b"record").unwrap();
        s.prepare(2).unwrap();
        let mut buf = [0u8; 6];
        s.file(2).unwrap().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"record");
        drop(s);
        assert!(!d.path().join(prep_name(2)).exists());
    }

    #[test]
    fn a_late_preparer_creates_nothing_behind_the_log() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        // The writer creates segments 0 and 1 before a preparer asked for
        // them gets to run, and a checkpoint then lets both go.
        s.file(0).unwrap();
        s.file(1).unwrap();
        s.recycle(2 * SIZE, 2 * SIZE).unwrap();
        assert_eq!(s.indices(), vec![2, 3]);
        // The preparer, checking only now, finds neither index.
        s.prepare(0).unwrap();
        s.prepare(1).unwrap();
        assert_eq!(s.indices(), vec![2, 3]);
        assert_eq!(s.counters.created.load(Ordering::Relaxed), 2);
        drop(s);
        let mut names: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, vec![file_name(2), file_name(3)]);
    }

    #[test]
    fn spares_follow_the_logs_recent_use_and_go_after_a_burst() {
        const BIG: u64 = 1 << 20;
        let d = tempfile::tempdir().unwrap();
        let s = Segments::open(Arc::new(crate::io::OsFileSystem), d.path(), BIG).unwrap();
        s.keep_spares_for(64 * BIG);
        let on_disk = || {
            std::fs::read_dir(d.path())
                .unwrap()
                .filter_map(|e| parse_name(&e.unwrap().file_name().into_string().unwrap()))
                .count()
        };
        // Records into `n` new segments, then a checkpoint (cut, then the
        // segments before it let go); the preparer is waited for.
        let mut head = 0u64;
        let mut run = |n: u64| {
            for _ in 0..n {
                s.write(head, b"record").unwrap();
                head += BIG;
            }
            s.detach_surplus(head).remove().unwrap();
            s.recycle(head, head).unwrap();
            s.join_preparer();
            head
        };
        // A steady 3 segments between checkpoints, for over a window: once
        // the window is seen, no more segment files are created.
        for _ in 0..WINDOW + 2 {
            run(3);
        }
        let created = s.counters.created.load(Ordering::Relaxed);
        for _ in 0..WINDOW {
            run(3);
        }
        assert_eq!(s.counters.created.load(Ordering::Relaxed), created);
        assert_eq!(s.counters.removed.load(Ordering::Relaxed), 0);
        // A burst of 40 segments before one checkpoint: all kept as spares.
        run(40);
        let after_burst = s.indices().len();
        assert!(after_burst >= 40, "{:?}", s.indices());
        // The database goes quiet: the burst's spares stay while it is in
        // the window, and go when it leaves.
        for k in 1..WINDOW {
            run(0);
            assert_eq!(s.indices().len(), after_burst, "idle checkpoint {k}");
        }
        let head = run(0);
        let left = s.indices();
        let seg = head / BIG;
        let beyond = (head + CUT_SLACK) / BIG + AHEAD;
        // Kept: the head's segment and the spares up to the slack and the
        // segments prepared ahead; the rest are gone, from disk too.
        assert_eq!(left, (seg..=beyond).collect::<Vec<_>>());
        assert_eq!(on_disk(), left.len());
        let removed = s.counters.removed.load(Ordering::Relaxed);
        assert_eq!(removed as usize, after_burst - left.len());
        assert!(removed >= 30, "{removed} removed");
        // The log writes on past them: the segments removed there are
        // created again when it gets to them.
        let mut head = head;
        for _ in 0..10 {
            s.write(head, b"record").unwrap();
            head += BIG;
        }
        let mut buf = [0u8; 6];
        s.file(head / BIG - 1)
            .unwrap()
            .read_exact_at(&mut buf, 0)
            .unwrap();
        assert_eq!(&buf, b"record");
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Records into this many new segments.
        Write(u64),
        /// This many checkpoints in a row: a cut, then the segments before
        /// it let go.
        Checkpoints(usize),
        /// Closed and opened again (the window starts over).
        Reopen,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (0u64..=24).prop_map(Op::Write),
            4 => (1usize..=2 * WINDOW).prop_map(Op::Checkpoints),
            1 => Just(Op::Reopen),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// Whatever the order of bursts, checkpoints and reopens: every
        /// segment holding records no checkpoint covers yet is there with
        /// its records, no file is on disk that the list does not name,
        /// the spares stay within their limit, and after a window of idle
        /// checkpoints only the slack past the log is left.
        #[test]
        fn segments_holding_records_are_never_removed(ops in proptest::collection::vec(op(), 1..40)) {
            let d = tempfile::tempdir().unwrap();
            let limit = 16;
            let open = || {
                let s = open(d.path());
                s.keep_spares_for(limit * SIZE);
                s
            };
            let mut s = open();
            let (mut head, mut covered) = (0u64, 0u64);
            let (mut cuts_since_open, mut idle_cuts, mut wrote) = (0usize, 0usize, false);
            for op in ops {
                match op {
                    Op::Write(n) => {
                        for _ in 0..n {
                            s.write(head, &head.to_le_bytes()).unwrap();
                            head += SIZE;
                        }
                        wrote |= n > 0;
                    }
                    Op::Checkpoints(k) => {
                        for _ in 0..k {
                            s.detach_surplus(head).remove().unwrap();
                            s.recycle(head, head).unwrap();
                            covered = head;
                            cuts_since_open += 1;
                            idle_cuts = if wrote { 0 } else { idle_cuts + 1 };
                            wrote = false;
                        }
                    }
                    Op::Reopen => {
                        drop(s);
                        s = open();
                        cuts_since_open = 0;
                    }
                }
                s.join_preparer();
                let listed = s.indices();
                for i in covered / SIZE..head / SIZE {
                    let mut buf = [0u8; 8];
                    s.file(i).unwrap().read_exact_at(&mut buf, 0).unwrap();
                    proptest::prop_assert_eq!(u64::from_le_bytes(buf), i * SIZE, "segment {}", i);
                }
                let mut on_disk: Vec<u64> = std::fs::read_dir(d.path())
                    .unwrap()
                    .filter_map(|e| parse_name(&e.unwrap().file_name().into_string().unwrap()))
                    .collect();
                on_disk.sort_unstable();
                proptest::prop_assert_eq!(&on_disk, &listed);
                let spares = listed.iter().filter(|&&i| i > head / SIZE).count();
                proptest::prop_assert!(spares <= spares_for(limit * SIZE, SIZE) + AHEAD as usize, "{} spares", spares);
                if cuts_since_open > WINDOW && idle_cuts >= WINDOW {
                    let slack = ((CUT_SLACK / SIZE) + AHEAD) as usize;
                    proptest::prop_assert!(spares <= slack, "{} spares after {} idle checkpoints: {:?}", spares, idle_cuts, listed);
                }
            }
        }
    }

    #[test]
    fn dropping_the_segments_waits_for_the_preparer() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        // The first write into segment 0 starts preparing 1 and 2.
        s.write(0, b"first").unwrap();
        drop(s);
        // Nothing is still being filled or renamed once the drop returns.
        let s = open(d.path());
        assert_eq!(s.indices(), vec![0, 1, 2]);
        for i in 1..=2 {
            assert!(zeros(&s.file(i).unwrap()));
        }
    }

    /// The operating system's files, with the range of every write made
    /// to a file opened through it: (file, offset, length), in order; and
    /// how many file and directory syncs were made.
    #[derive(Default)]
    struct Recording {
        writes: Arc<Mutex<Vec<(usize, u64, u64)>>>,
        opened: AtomicUsize,
        data_syncs: Arc<AtomicUsize>,
        dir_syncs: AtomicUsize,
    }

    impl Recording {
        /// (file syncs, directory syncs) so far.
        fn syncs(&self) -> (usize, usize) {
            (
                self.data_syncs.load(Ordering::SeqCst),
                self.dir_syncs.load(Ordering::SeqCst),
            )
        }
    }

    struct RecordedFile {
        inner: Arc<dyn FileIo>,
        id: usize,
        writes: Arc<Mutex<Vec<(usize, u64, u64)>>>,
        data_syncs: Arc<AtomicUsize>,
    }

    impl FileIo for RecordedFile {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.inner.read_exact_at(buf, offset)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.writes.lock().push((self.id, offset, buf.len() as u64));
            self.inner.write_all_at(buf, offset)
        }
        fn write_all_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
            let len = bufs.iter().map(|b| b.len() as u64).sum();
            self.writes.lock().push((self.id, offset, len));
            self.inner.write_all_vectored_at(bufs, offset)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.data_syncs.fetch_add(1, Ordering::SeqCst);
            self.inner.sync_data()
        }
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.inner.set_len(len)
        }
        fn preallocate(&self, len: u64) -> std::io::Result<()> {
            self.inner.preallocate(len)
        }
    }

    impl FileSystem for Recording {
        fn open(&self, path: &Path, create: bool) -> std::io::Result<Arc<dyn FileIo>> {
            Ok(Arc::new(RecordedFile {
                inner: crate::io::OsFileSystem.open(path, create)?,
                id: self.opened.fetch_add(1, Ordering::Relaxed),
                writes: self.writes.clone(),
                data_syncs: self.data_syncs.clone(),
            }))
        }
        fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
            crate::io::OsFileSystem.create_dir_all(dir)
        }
        fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
            crate::io::OsFileSystem.list(dir)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            crate::io::OsFileSystem.rename(from, to)
        }
        fn remove(&self, path: &Path) -> std::io::Result<()> {
            crate::io::OsFileSystem.remove(path)
        }
        fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
            self.dir_syncs.fetch_add(1, Ordering::SeqCst);
            crate::io::OsFileSystem.sync_dir(dir)
        }
    }

    #[test]
    fn a_segment_made_for_a_commit_is_synced_with_the_log_not_when_made() {
        let d = tempfile::tempdir().unwrap();
        let fs = Arc::new(Recording::default());
        let s = Segments::open(fs.clone(), d.path(), SIZE).unwrap();
        let f = s.file(3).unwrap();
        assert_eq!(f.len().unwrap(), SIZE);
        assert_eq!(fs.syncs(), (0, 0), "making the segment synced");
        s.inner.write_at(3 * SIZE, b"record").unwrap();
        assert_eq!(fs.syncs(), (0, 0), "writing into it synced");
        // The log's sync: the segment's data, then its name.
        s.sync().unwrap();
        assert_eq!(fs.syncs(), (1, 1));
        // Nothing made since: no directory sync.
        s.inner.write_at(3 * SIZE + BLOCK, b"more").unwrap();
        s.sync().unwrap();
        assert_eq!(fs.syncs(), (2, 1));
        // A sync of a range covers the names of segments made too.
        s.file(4).unwrap();
        s.inner.write_at(4 * SIZE, b"next").unwrap();
        s.sync_range(4 * SIZE, 4 * SIZE + 4).unwrap();
        assert_eq!(fs.syncs(), (3, 2));
        s.sync_range(4 * SIZE, 4 * SIZE + 4).unwrap();
        assert_eq!(fs.syncs(), (4, 2));
    }

    #[test]
    fn a_short_file_left_by_a_crash_is_emptied_before_it_becomes_a_segment() {
        let d = tempfile::tempdir().unwrap();
        // Records reached the disk, the file's length did not.
        std::fs::write(
            d.path().join(file_name(3)),
            vec![0xABu8; 3 * BLOCK as usize],
        )
        .unwrap();
        let s = open(d.path());
        assert!(s.indices().is_empty(), "a short file taken as a segment");
        let f = s.file(3).unwrap();
        assert_eq!(f.len().unwrap(), SIZE);
        assert!(zeros(&f), "bytes of an earlier life kept in a new segment");
    }

    /// Checks that no write in `writes` covers part of a block that no
    /// earlier write to its file covered whole, but for the blocks in
    /// `allowed` (file, block). Returns the blocks written whole.
    fn check_whole_blocks(
        writes: &[(usize, u64, u64)],
        allowed: &[(usize, u64)],
    ) -> BTreeSet<(usize, u64)> {
        let mut whole = BTreeSet::new();
        for &(f, off, len) in writes {
            let end = off + len;
            for (at, edge) in [(off, "starts"), (end, "ends")] {
                let b = at / BLOCK;
                if !at.is_multiple_of(BLOCK) && !whole.contains(&(f, b)) {
                    assert!(
                        allowed.contains(&(f, b)),
                        "a write of {len} bytes at {off} {edge} inside block {b} of file {f}, never written whole"
                    );
                }
            }
            for b in off.div_ceil(BLOCK)..end / BLOCK {
                whole.insert((f, b));
            }
        }
        whole
    }

    #[test]
    fn log_writes_end_on_block_boundaries_in_blocks_not_yet_written_whole() {
        let d = tempfile::tempdir().unwrap();
        let fs = Arc::new(Recording::default());
        let s = Segments::open(fs.clone(), d.path(), SIZE).unwrap();
        // Records of odd lengths, some within a block, some across blocks
        // and across segments, as groups write them.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut pos = 0u64;
        let mut stream = Vec::new();
        while pos < 3 * SIZE + 5000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = [40, 200, 3000, 9000][(rng % 4) as usize] + (rng >> 8) % 64;
            let bytes: Vec<u8> = (0..len).map(|i| (pos + i) as u8 | 1).collect();
            s.write(pos, &bytes).unwrap();
            stream.extend_from_slice(&bytes);
            pos += len;
        }
        let writes = std::mem::take(&mut *fs.writes.lock());
        // Only the first write ever starts mid-block, and it starts at 0.
        check_whole_blocks(&writes, &[]);
        // The stream reads back whole, zeros after its end to the block's.
        let mut back = vec![0u8; stream.len()];
        assert_eq!(s.read(0, &mut back).unwrap(), stream.len());
        assert!(back == stream);
        let mut tail = vec![1u8; (pos.next_multiple_of(BLOCK) - pos) as usize];
        assert_eq!(s.read(pos, &mut tail).unwrap(), tail.len());
        assert!(tail.iter().all(|&b| b == 0));
        s.sync().unwrap();
        drop(s);

        // After a reopen, the first write goes on from inside a block
        // written before: that block alone is read by the kernel.
        let s = Segments::open(fs.clone(), d.path(), SIZE).unwrap();
        let seg = pos / SIZE;
        s.write(pos, &[7u8; 100]).unwrap();
        s.write(pos + 100, &[8u8; 100]).unwrap();
        let writes = std::mem::take(&mut *fs.writes.lock());
        // The segment's file (a preparer may have written others first).
        let file = writes.iter().find(|w| w.1 == pos % SIZE).unwrap().0;
        check_whole_blocks(&writes, &[(file, (pos % SIZE) / BLOCK)]);
        let mut back = vec![0u8; 200];
        s.read(pos, &mut back).unwrap();
        assert!(back[..100].iter().all(|&b| b == 7) && back[100..].iter().all(|&b| b == 8));
        assert!(s.indices().contains(&seg));
    }
}
