//! Test support: an in-memory file system that remembers which writes were
//! synced, and can stop accepting writes at the N-th one (a crash).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tidemark::io::{FileIo, FileSystem};

/// One simulated file: what the OS holds (`live`) and what reached stable
/// storage at the last successful sync (`durable`).
#[derive(Default)]
pub struct SimFile {
    live: Mutex<Vec<u8>>,
    durable: Mutex<Vec<u8>>,
    /// Writes and resizes since the last successful sync, in order: what
    /// a crash may keep all of, some of, torn or reordered.
    pending: Mutex<Vec<Pending>>,
    /// Indices in `pending` of the writes a write-back pushed to the
    /// device whole: a ranged sync makes those durable, and only those.
    written_back: Mutex<std::collections::BTreeSet<usize>>,
    /// A sync of this file failed: from then on its durable bytes stay
    /// as they were (a conservative model of pages the kernel dropped).
    lost: Mutex<bool>,
    /// Bytes the file occupies on the simulated disk: its length, or more
    /// if it was preallocated (the preallocated tail is not materialised).
    space: Mutex<u64>,
    fs: Arc<Control>,
}

impl SimFile {
    /// Takes disk space for the file to occupy `end` bytes; `ENOSPC` if
    /// the simulated disk's capacity would be exceeded.
    fn occupy(&self, end: u64) -> io::Result<()> {
        let mut space = self.space.lock();
        if end <= *space {
            return Ok(());
        }
        let delta = end - *space;
        let cap = self.fs.capacity.load(Ordering::SeqCst);
        let used = self.fs.used.fetch_add(delta, Ordering::SeqCst);
        if used + delta > cap {
            self.fs.used.fetch_sub(delta, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(28));
        }
        *space = end;
        Ok(())
    }
}

/// Shared switches of a [`SimFs`].
#[derive(Default)]
pub struct Control {
    /// Writes performed so far.
    pub writes: AtomicU64,
    /// Writes allowed before the crash; u64::MAX = never crash.
    pub limit: AtomicU64,
    /// Set once the limit was reached.
    pub crashed: AtomicBool,
    /// While set, every fsync fails (and syncs nothing).
    pub fail_sync: AtomicBool,
    /// Syncs (of files and directories) performed so far.
    pub syncs: AtomicU64,
    /// One injected fault (see [`Fault`]); `None` = none.
    pub fault: Mutex<Option<Fault>>,
    /// Bytes the simulated disk holds; a write, resize or preallocation
    /// that would need more fails with `ENOSPC` and changes nothing.
    pub capacity: AtomicU64,
    /// Bytes the files occupy.
    pub used: AtomicU64,
    /// Reads performed so far.
    pub reads: AtomicU64,
}

/// A single I/O fault, after which the disk works again (the engine must
/// not trust that it does).
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// The write with this index (counting every write, resize, rename
    /// and removal) fails and changes nothing.
    FailWrite(u64),
    /// The write with this index stores only the first half of its bytes,
    /// then fails (a short write, then ENOSPC or EIO).
    ShortWrite(u64),
    /// The sync with this index fails and makes nothing durable; what it
    /// should have synced never becomes durable, as when the kernel marks
    /// the pages clean after a write-back error.
    FailSync(u64),
    /// The read with this index fails with `EIO` and fills nothing.
    FailRead(u64),
}

/// One change not yet synced.
#[derive(Clone, Debug)]
pub enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

impl Pending {
    fn apply(&self, d: &mut Vec<u8>) {
        match self {
            Pending::Write(off, bytes) => {
                let o = *off as usize;
                if d.len() < o + bytes.len() {
                    d.resize(o + bytes.len(), 0);
                }
                d[o..o + bytes.len()].copy_from_slice(bytes);
            }
            Pending::SetLen(len) => d.resize(*len as usize, 0),
        }
    }
}

/// What survives a crash (see [`SimFs::crash_image_with`]).
#[derive(Clone, Copy, Debug)]
pub enum Image {
    /// Power loss: only synced bytes and synced directory entries.
    PowerLoss,
    /// Process crash: everything the OS accepted.
    Process,
    /// Power loss that kept a random subset of the unsynced writes
    /// (applied in order).
    Subset(u64),
    /// Power loss that kept every unsynced write, the last one torn after
    /// a multiple of 512 bytes (`true`) or after a random byte (`false`).
    TornLast(bool, u64),
    /// Power loss that kept every unsynced write, applied in a random
    /// order (the disk reordered them).
    Reordered(u64),
}

/// A small deterministic generator for crash images.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// What a write must do under the injected fault.
enum WriteFate {
    Full,
    Half,
}

impl Control {
    fn allow(&self) -> io::Result<()> {
        match self.write_fate()? {
            WriteFate::Full => Ok(()),
            WriteFate::Half => Err(io::Error::other("simulated write failure")),
        }
    }

    /// Counts one write and decides what becomes of it.
    fn write_fate(&self) -> io::Result<WriteFate> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(io::Error::other(
                "simulated crash: the disk accepts no more writes",
            ));
        }
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if n >= self.limit.load(Ordering::SeqCst) {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(io::Error::other(
                "simulated crash: the disk accepts no more writes",
            ));
        }
        match *self.fault.lock() {
            Some(Fault::FailWrite(at)) if at == n => {
                Err(io::Error::other("simulated write failure"))
            }
            Some(Fault::ShortWrite(at)) if at == n => Ok(WriteFate::Half),
            _ => Ok(WriteFate::Full),
        }
    }

    /// Counts one sync; `Err` if it must fail.
    fn sync_fate(&self) -> io::Result<()> {
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::other("simulated fsync failure"));
        }
        if self.crashed.load(Ordering::SeqCst) {
            return Err(io::Error::other("simulated crash: fsync failed"));
        }
        let n = self.syncs.fetch_add(1, Ordering::SeqCst);
        if matches!(*self.fault.lock(), Some(Fault::FailSync(at)) if at == n) {
            return Err(io::Error::other("simulated fsync failure"));
        }
        Ok(())
    }
}

impl SimFile {
    /// A write, recorded as pending; returns its index in `pending`.
    fn write_recorded(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.occupy(offset + buf.len() as u64)?;
        let fate = self.fs.write_fate()?;
        let buf = match fate {
            WriteFate::Full => buf,
            WriteFate::Half => &buf[..buf.len() / 2],
        };
        let mut pending = self.pending.lock();
        let mut d = self.live.lock();
        let o = offset as usize;
        if d.len() < o + buf.len() {
            d.resize(o + buf.len(), 0);
        }
        d[o..o + buf.len()].copy_from_slice(buf);
        pending.push(Pending::Write(offset, buf.to_vec()));
        match fate {
            WriteFate::Full => Ok(pending.len() - 1),
            WriteFate::Half => Err(io::Error::other("simulated short write")),
        }
    }

    /// A sync of a range (`this`: the pending write to make durable, if
    /// any): that write, the writes pushed out by `write_back`, and every
    /// resize become durable, in their order; the rest stays pending.
    fn sync_ranged(&self, this: Option<usize>) -> io::Result<()> {
        if let Err(e) = self.fs.sync_fate() {
            *self.lost.lock() = true;
            return Err(e);
        }
        if *self.lost.lock() {
            return Ok(());
        }
        let mut pending = self.pending.lock();
        let mut on_device = self.written_back.lock();
        let mut durable = self.durable.lock();
        let mut kept = Vec::new();
        for (i, op) in pending.drain(..).enumerate() {
            let lands =
                Some(i) == this || on_device.contains(&i) || matches!(op, Pending::SetLen(_));
            if lands {
                op.apply(&mut durable);
            } else {
                kept.push(op);
            }
        }
        *pending = kept;
        on_device.clear();
        Ok(())
    }
}

impl FileIo for SimFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let n = self.fs.reads.fetch_add(1, Ordering::SeqCst);
        if matches!(*self.fs.fault.lock(), Some(Fault::FailRead(at)) if at == n) {
            return Err(io::Error::from_raw_os_error(5));
        }
        let d = self.live.lock();
        let o = offset as usize;
        if o + buf.len() > d.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past end",
            ));
        }
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_recorded(buf, offset).map(|_| ())
    }
    /// As Linux's `sync_file_range`: the writes wholly inside the range
    /// reach the device, durable at the next sync of any kind (a write
    /// that straddles the range's edge is left pending, conservatively).
    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        if self.fs.crashed.load(Ordering::SeqCst) {
            return Err(io::Error::other("simulated crash: the disk is gone"));
        }
        let end = offset + len;
        let pending = self.pending.lock();
        let mut on_device = self.written_back.lock();
        for (i, p) in pending.iter().enumerate() {
            if let Pending::Write(o, bytes) = p {
                if *o >= offset && o + bytes.len() as u64 <= end {
                    on_device.insert(i);
                }
            }
        }
        Ok(())
    }
    /// As `pwritev2` with `RWF_DSYNC` on ext4: this write, every write a
    /// write-back pushed out, and the file's length become durable;
    /// other pending writes stay pending.
    fn write_durable_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let at = self.write_recorded(buf, offset)?;
        self.sync_ranged(Some(at))
    }
    fn sync_written_back(&self, _quiet: (u64, u64)) -> io::Result<()> {
        self.sync_ranged(None)
    }
    fn sync_data(&self) -> io::Result<()> {
        if let Err(e) = self.fs.sync_fate() {
            // The write-back failed: the kernel forgets the data was dirty,
            // so no later sync will make these bytes durable.
            *self.lost.lock() = true;
            return Err(e);
        }
        if !*self.lost.lock() {
            *self.durable.lock() = self.live.lock().clone();
            self.pending.lock().clear();
            self.written_back.lock().clear();
        }
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.live.lock().len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.occupy(len)?;
        self.fs.allow()?;
        let mut live = self.live.lock();
        if (len as usize) < live.len() {
            // Cutting the file gives its tail back.
            let mut space = self.space.lock();
            let freed = space.saturating_sub(len);
            *space -= freed;
            self.fs.used.fetch_sub(freed, Ordering::SeqCst);
        }
        live.resize(len as usize, 0);
        drop(live);
        self.pending.lock().push(Pending::SetLen(len));
        Ok(())
    }
    /// Can fail like any I/O, but reserves nothing: the engine never reads
    /// a block it has not written, and a zero tail would make every crash
    /// image megabytes larger.
    fn preallocate(&self, len: u64) -> io::Result<()> {
        self.occupy(len)?;
        self.fs.allow()
    }
}

/// In-memory file system of [`SimFile`]s. Directory entries are modelled
/// too: a creation, rename or removal survives a power loss only once its
/// directory was synced.
#[derive(Clone, Default)]
pub struct SimFs {
    files: Arc<Mutex<HashMap<PathBuf, Arc<SimFile>>>>,
    /// The directory entries as of the last `sync_dir` of each directory.
    durable_names: Arc<Mutex<HashMap<PathBuf, Arc<SimFile>>>>,
    pub control: Arc<Control>,
}

impl SimFs {
    pub fn new() -> Self {
        let fs = SimFs::default();
        fs.control.limit.store(u64::MAX, Ordering::SeqCst);
        fs.control.capacity.store(u64::MAX, Ordering::SeqCst);
        fs
    }

    /// A new file system holding, for every file, what survives a crash now:
    /// the synced bytes (`power_loss`) or everything the OS had (process crash).
    pub fn crash_image(&self, power_loss: bool) -> SimFs {
        let out = SimFs::new();
        let names = if power_loss {
            self.durable_names.lock().clone()
        } else {
            self.files.lock().clone()
        };
        for (p, f) in names.iter() {
            let bytes = if power_loss {
                f.durable.lock().clone()
            } else {
                f.live.lock().clone()
            };
            let nf = SimFile {
                live: Mutex::new(bytes.clone()),
                durable: Mutex::new(bytes),
                pending: Mutex::new(Vec::new()),
                written_back: Mutex::new(Default::default()),
                lost: Mutex::new(false),
                space: Mutex::new(0),
                fs: out.control.clone(),
            };
            let nf = Arc::new(nf);
            out.files.lock().insert(p.clone(), nf.clone());
            out.durable_names.lock().insert(p.clone(), nf);
        }
        out
    }

    /// A crash image of the kind given (see [`Image`]). Beyond what
    /// `crash_image` models, the unsynced writes of each file may survive
    /// in part, torn, or in another order; directory entries survive only
    /// if synced (unsynced creations and renames are dropped).
    pub fn crash_image_with(&self, kind: Image) -> SimFs {
        let (seed, power) = match kind {
            Image::PowerLoss => return self.crash_image(true),
            Image::Process => return self.crash_image(false),
            Image::Subset(s) | Image::TornLast(_, s) | Image::Reordered(s) => (s, true),
        };
        debug_assert!(power);
        let mut rng = Rng::new(seed);
        let out = SimFs::new();
        let names = self.durable_names.lock().clone();
        for (p, f) in names.iter() {
            let lost = *f.lost.lock();
            let mut bytes = f.durable.lock().clone();
            let pending = if lost {
                Vec::new()
            } else {
                f.pending.lock().clone()
            };
            match kind {
                Image::Subset(_) => {
                    for op in &pending {
                        if rng.below(2) == 0 {
                            op.apply(&mut bytes);
                        }
                    }
                }
                Image::TornLast(sector, _) => {
                    if let Some((last, before)) = pending.split_last() {
                        for op in before {
                            op.apply(&mut bytes);
                        }
                        match last {
                            Pending::Write(off, data) if !data.is_empty() => {
                                let cut = if sector {
                                    (rng.below(data.len() as u64) / 512 * 512) as usize
                                } else {
                                    rng.below(data.len() as u64) as usize
                                };
                                Pending::Write(*off, data[..cut].to_vec()).apply(&mut bytes);
                            }
                            other => other.apply(&mut bytes),
                        }
                    }
                }
                Image::Reordered(_) => {
                    let mut order: Vec<usize> = (0..pending.len()).collect();
                    for i in (1..order.len()).rev() {
                        let j = rng.below(i as u64 + 1) as usize;
                        order.swap(i, j);
                    }
                    for i in order {
                        pending[i].apply(&mut bytes);
                    }
                }
                Image::PowerLoss | Image::Process => {}
            }
            let nf = Arc::new(SimFile {
                live: Mutex::new(bytes.clone()),
                durable: Mutex::new(bytes),
                pending: Mutex::new(Vec::new()),
                written_back: Mutex::new(Default::default()),
                lost: Mutex::new(false),
                space: Mutex::new(0),
                fs: out.control.clone(),
            });
            out.files.lock().insert(p.clone(), nf.clone());
            out.durable_names.lock().insert(p.clone(), nf);
        }
        out
    }

    /// Number of files in `dir` whose name starts with `prefix`.
    pub fn list_prefix(&self, dir: &Path, prefix: &str) -> usize {
        self.list(dir)
            .unwrap()
            .iter()
            .filter(|n| n.starts_with(prefix))
            .count()
    }

    /// Direct access to a file's live bytes (corruption tests).
    pub fn with_file<R>(&self, path: &Path, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let files = self.files.lock();
        let file = files.get(path).expect("file exists");
        let mut live = file.live.lock();
        f(&mut live)
    }
}

impl FileSystem for SimFs {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FileIo>> {
        let mut files = self.files.lock();
        if let Some(f) = files.get(path) {
            return Ok(f.clone());
        }
        if !create {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no such file"));
        }
        let f = Arc::new(SimFile {
            fs: self.control.clone(),
            ..Default::default()
        });
        files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        Ok(self
            .files
            .lock()
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(String::from))
            .collect())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.control.allow()?;
        let mut files = self.files.lock();
        let f = files
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        files.insert(to.to_path_buf(), f);
        Ok(())
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.control.allow()?;
        let f = self
            .files
            .lock()
            .remove(path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        // Its space is given back (the model has no open-but-unlinked files).
        let space = std::mem::take(&mut *f.space.lock());
        self.control.used.fetch_sub(space, Ordering::SeqCst);
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.control.sync_fate()?;
        let files = self.files.lock();
        let mut durable = self.durable_names.lock();
        durable.retain(|p, _| p.parent() != Some(dir));
        for (p, f) in files.iter().filter(|(p, _)| p.parent() == Some(dir)) {
            durable.insert(p.clone(), f.clone());
        }
        Ok(())
    }
}

/// The log segment size of [`small_builder`].
pub const SMALL_SEGMENT: u64 = 64 << 10;

/// A builder with a small cache, small log segments and no background
/// checkpoints, so tests decide when checkpoints happen.
pub fn small_builder() -> tidemark::Builder {
    tidemark::Builder::new()
        .cache_size((1 << 20) + (1 << 17))
        .log_segment_size(SMALL_SEGMENT)
        .checkpoint_interval(None)
}

/// Every entry of a table.
pub fn dump(t: &tidemark::Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    t.iter().collect::<Result<Vec<_>, _>>().expect("scan")
}
