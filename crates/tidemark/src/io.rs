//! File I/O: the only place tidemark touches the operating system's files.
//!
//! Every data access is an explicit positioned read or write (`pread` /
//! `pwrite` through [`std::os::unix::fs::FileExt`]); nothing is memory
//! mapped, so flushing never unmaps a page a reader needs (seed 004).
//!
//! The [`FileSystem`] trait lets tests swap in a file layer that fails or
//! forgets writes; [`OsFileSystem`] is the real one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The operating system's page-cache page. A buffered write that covers
/// only part of one that is not in the cache makes the kernel read it
/// from the device before the write goes on, so writes that must not
/// wait for the device end on these: the data file's packed page images
/// ([`crate::page::IMAGE_ALIGN`]) and the log's writes into blocks not yet
/// written whole (`wal::segment`).
pub(crate) const CACHE_PAGE: usize = 4096;

/// Zeros to pad a write out with, up to a page of the largest size.
pub(crate) static ZEROS: [u8; crate::page::MAX_PAGE_SIZE] = [0; crate::page::MAX_PAGE_SIZE];

/// One open file, addressed by byte offset.
// A file length is an I/O query, not a container size; an `is_empty` would
// add nothing.
#[allow(clippy::len_without_is_empty)]
pub trait FileIo: Send + Sync + 'static {
    /// Fills `buf` from `offset`; reading past the end is an
    /// [`io::ErrorKind::UnexpectedEof`] error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Writes the concatenation of `bufs` at `offset`, with one system
    /// call where the platform has one (`pwritev`), so a caller whose bytes
    /// lie in pieces need not copy them together. The default joins them
    /// and calls [`FileIo::write_all_at`].
    fn write_all_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.write_all_at(&bufs.concat(), offset)
    }
    /// Makes every completed write durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Writes all of `buf` at `offset` and makes those bytes durable
    /// before returning, without [`FileIo::sync_data`]'s duty to write every
    /// other cached byte of the file too (Linux: `pwritev2` with
    /// `RWF_DSYNC`, the guarantee of an `O_DSYNC` write for this call's
    /// bytes). For a write whose ordering needs only that everything
    /// before it was made durable by an earlier `sync_data`: the meta page
    /// of a checkpoint. The default writes, then calls `sync_data`.
    fn write_durable_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(buf, offset)?;
        self.sync_data()
    }
    /// Writes the bytes cached for `len` bytes from `offset` to the device
    /// and waits for them, without making anything durable (no metadata,
    /// no device cache flush: [`FileIo::sync_data`] is still needed). Used
    /// to spread a large flush into small steps, so that no single step
    /// holds the operating system's page locks while the device queue is
    /// full. The default does nothing, which is always correct.
    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Makes durable every write that [`FileIo::write_back`] has seen
    /// reach the device, with the
    /// file's metadata needed to read it back (its length, which of its
    /// blocks hold data), without writing the file's other cached bytes,
    /// which [`FileIo::sync_data`] must. `quiet` (offset, length) is a
    /// range of the file that nothing writes until the call returns: an
    /// implementation may rewrite it with the bytes it holds. Where the
    /// platform promises no such thing, the default makes the whole file
    /// durable (`sync_data`), which is as correct and costs more.
    fn sync_written_back(&self, quiet: (u64, u64)) -> io::Result<()> {
        let _ = quiet;
        self.sync_data()
    }
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves room for the file to grow to `len` bytes, so later writes
    /// up to there are overwrites rather than appends (and a full device
    /// fails here, not in a later write). It may extend the length; writes
    /// past the end stay valid whether it did or not, and the engine never
    /// reads a block it has not written. The default extends the length.
    fn preallocate(&self, len: u64) -> io::Result<()> {
        extend_to(self, len)
    }
    /// Asks the operating system to cache `len` bytes from `offset`, a
    /// range preallocated and never written (it reads as zeros, so no
    /// device read is needed), in steps of `step` bytes, the size of the
    /// writes that will follow. A first write into an uncached range
    /// allocates page-cache memory while holding the file's write lock;
    /// populated ahead by a background thread, it is an overwrite of memory
    /// already there. Purely a hint: the default does nothing.
    fn populate(&self, offset: u64, len: u64, step: u64) -> io::Result<()> {
        let _ = (offset, len, step);
        Ok(())
    }
    /// Bytes free for an unprivileged user on the file system holding this
    /// file, if known. The default does not know.
    fn free_space(&self) -> io::Result<Option<u64>> {
        Ok(None)
    }
    /// Asks that the pages of later reads and writes leave the operating
    /// system's cache once the read is done or the write has reached the
    /// device (`on`), or stay as usual; returns whether they will leave
    /// it. See `os_cache` for why. The default cannot, and returns false.
    fn set_drop_behind(&self, on: bool) -> bool {
        let _ = on;
        false
    }
}

/// Extends `f` to `len` bytes if it is shorter.
fn extend_to(f: &(impl FileIo + ?Sized), len: u64) -> io::Result<()> {
    if f.len()? < len {
        f.set_len(len)?;
    }
    Ok(())
}

/// Lowers the calling thread's CPU priority to nice value `nice` (19 is the
/// lowest). On Linux a nice value belongs to a thread; elsewhere the same
/// call would set the whole process's, so nothing is done there. Raising
/// a thread's nice value needs no privilege and lowering it back does:
/// call it only on threads made for work that may wait.
pub(crate) fn set_thread_nice(nice: i32) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take and return integers and touch
        // no memory of ours; `PRIO_PROCESS` with a thread id names that
        // thread alone on Linux.
        #[allow(unsafe_code)]
        let rc =
            unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
    Ok(())
}

/// The calling thread's nice value.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn thread_nice() -> i32 {
    // SAFETY: as in `set_thread_nice`; getpriority returns the value (a
    // nice value of -1 and an error look alike, which the tests that use
    // this never meet).
    #[allow(unsafe_code)]
    unsafe {
        libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t)
    }
}

/// A file offset or length as the `off_t` the system calls take.
#[cfg(target_os = "linux")]
fn off_t(v: u64) -> io::Result<i64> {
    i64::try_from(v)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file offset beyond i64"))
}

/// Opens, names and lists files; the database asks it for its data file
/// and its log segments.
pub trait FileSystem: Send + Sync + 'static {
    /// Opens `path` for reading and writing, creating it when `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FileIo>>;
    /// Creates directory `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names (not paths) of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Renames `from` to `to`, replacing `to`. Durable after
    /// [`FileSystem::sync_dir`].
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes file `path`. Durable after [`FileSystem::sync_dir`].
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes the exclusive lock on database directory `dir`, held until the
    /// returned guard drops; [`io::ErrorKind::WouldBlock`] if another
    /// handle or process holds it. `None`: this file system has no locks.
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<DirLock>> {
        let _ = dir;
        Ok(None)
    }
}

/// The lock on a database directory; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Name of the lock file in a database directory.
pub const LOCK_FILE: &str = "LOCK";

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

impl FileSystem for OsFileSystem {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FileIo>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        let ranged_sync = ranged_sync_holds(&file);
        Ok(Arc::new(OsFile {
            file,
            drop_behind: AtomicBool::new(false),
            drop_unsupported: AtomicBool::new(false),
            ranged_sync,
        }))
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            if let Some(name) = entry?.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        Ok(out)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn lock_dir(&self, dir: &Path) -> io::Result<Option<DirLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))?;
        // An advisory lock of the open file description: a second open in
        // this process or another one fails, and the kernel drops it when
        // the process dies, so a crash never leaves the directory locked.
        match file.try_lock() {
            Ok(()) => Ok(Some(DirLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the database is open in another handle or process",
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

struct OsFile {
    file: File,
    /// Reads and writes pass `RWF_DONTCACHE` ([`FileIo::set_drop_behind`]).
    drop_behind: AtomicBool,
    /// The kernel refused `RWF_DONTCACHE` (before 6.14, or a file system
    /// without it): never asked again.
    drop_unsupported: AtomicBool,
    /// The file system makes a ranged `O_DSYNC` write a barrier for every
    /// write already written back ([`ranged_sync_holds`]).
    ranged_sync: bool,
}

/// Whether `file` lies on a file system where a ranged `O_DSYNC` write
/// ([`FileIo::write_durable_at`]) also makes durable every write of the
/// file already written back, with the metadata needed to read it:
/// ext4. Its fsync of a range writes and waits for that range alone, then
/// commits the journal up to the file's last change that a data sync
/// needs (its length, extents allocated or converted from unwritten,
/// which a write-back converts before it ends), and flushes the device's
/// cache either by that commit or by itself. Other file systems keep the
/// whole-file sync: btrfs, for one, logs only the range's own extents.
#[cfg(target_os = "linux")]
fn ranged_sync_holds(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    const EXT4_SUPER_MAGIC: i64 = 0xEF53;
    // SAFETY: an all-zero `statfs` is a valid value of this plain C struct
    // (integers only); fstatfs overwrites it.
    #[allow(unsafe_code)]
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes one `statfs` through the pointer, which points
    // to `st`, alive and writable for the call; the descriptor is open for
    // as long as `file` lives.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    // `f_type`'s width differs between targets.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let kind = st.f_type as i64;
    rc == 0 && kind == EXT4_SUPER_MAGIC
}

#[cfg(not(target_os = "linux"))]
fn ranged_sync_holds(_file: &File) -> bool {
    false
}

/// Linux's `RWF_DONTCACHE` (uapi `linux/fs.h`, 6.14): buffered I/O whose
/// pages leave the page cache once done. Not in the libc crate yet.
#[cfg(target_os = "linux")]
const RWF_DONTCACHE: libc::c_int = 0x80;

impl OsFile {
    /// `sync_file_range(2)` over `len` bytes from `offset`.
    #[cfg(target_os = "linux")]
    fn sync_file_range(&self, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (off, n) = (off_t(offset)?, off_t(len)?);
        // SAFETY: sync_file_range takes a file descriptor and integers and
        // touches no memory of ours; the descriptor is open for as long as
        // `self.file` lives, which outlasts the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, flags) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The `preadv2`/`pwritev2` flags for the next call.
    #[cfg(target_os = "linux")]
    fn rw_flags(&self) -> libc::c_int {
        if self.drop_behind.load(Ordering::Relaxed) {
            RWF_DONTCACHE
        } else {
            0
        }
    }

    /// Called when a call with `flags` failed with `e`: true if the caller
    /// should retry without the flag (the kernel does not know it; it is
    /// then off for good).
    #[cfg(target_os = "linux")]
    fn drop_refused(&self, flags: libc::c_int, e: &io::Error) -> bool {
        if flags & RWF_DONTCACHE != 0 && e.raw_os_error() == Some(libc::EOPNOTSUPP) {
            self.drop_unsupported.store(true, Ordering::Relaxed);
            self.drop_behind.store(false, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Runs one `preadv2`/`pwritev2` (`call`, given the flags) until it
    /// is not interrupted, again without `RWF_DONTCACHE` if the kernel
    /// refuses it; the bytes it moved.
    #[cfg(target_os = "linux")]
    fn flagged(&self, mut call: impl FnMut(libc::c_int) -> isize) -> io::Result<usize> {
        loop {
            let flags = self.rw_flags();
            let rc = call(flags);
            if rc >= 0 {
                return Ok(rc as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted && !self.drop_refused(flags, &e) {
                return Err(e);
            }
        }
    }

    #[cfg(target_os = "linux")]
    fn read_exact_flagged(&self, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        while !buf.is_empty() {
            let iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            let pos = off_t(at)?;
            // SAFETY: `iov` describes `buf`, which is valid for writes of
            // its length and outlives the call; the kernel writes at most
            // that many bytes into it. The descriptor is open for as long
            // as `self.file` lives.
            #[allow(unsafe_code)]
            let n = self.flagged(|flags| unsafe {
                libc::preadv2(self.file.as_raw_fd(), &iov, 1, pos, flags)
            })?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ));
            }
            buf = &mut buf[n..];
            at += n as u64;
        }
        Ok(())
    }
}

/// A data file in memory, for unit tests and the fuzz targets; it logs the
/// reads made of it.
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Default)]
pub(crate) struct MemFile {
    bytes: std::sync::Mutex<Vec<u8>>,
    /// Offset and length of every read, in order.
    pub(crate) reads: std::sync::Mutex<Vec<(u64, usize)>>,
    /// Offset and length of every write, in order.
    pub(crate) writes: std::sync::Mutex<Vec<(u64, usize)>>,
}

#[cfg(any(test, feature = "fuzzing"))]
impl MemFile {
    /// A file holding `bytes`.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn with_bytes(bytes: Vec<u8>) -> MemFile {
        MemFile {
            bytes: std::sync::Mutex::new(bytes),
            ..Default::default()
        }
    }

    /// The bytes at `offset..offset + len` (zero past the end).
    #[cfg(test)]
    pub(crate) fn bytes(&self, offset: u64, len: usize) -> Vec<u8> {
        let v = self.bytes.lock().unwrap();
        (0..len)
            .map(|i| v.get(offset as usize + i).copied().unwrap_or(0))
            .collect()
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl FileIo for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.reads.lock().unwrap().push((offset, buf.len()));
        let v = self.bytes.lock().unwrap();
        let o = offset as usize;
        if o + buf.len() > v.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&v[o..o + buf.len()]);
        Ok(())
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.writes.lock().unwrap().push((offset, buf.len()));
        let mut v = self.bytes.lock().unwrap();
        let end = offset as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.bytes.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    // No preallocation: the file grows by the blocks written.
    fn preallocate(&self, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

impl FileIo for OsFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if self.drop_behind.load(Ordering::Relaxed) {
            return self.read_exact_flagged(buf, offset);
        }
        FileExt::read_exact_at(&self.file, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        if self.drop_behind.load(Ordering::Relaxed) {
            return self.write_all_vectored_at(&[buf], offset);
        }
        FileExt::write_all_at(&self.file, buf, offset)
    }
    fn set_drop_behind(&self, on: bool) -> bool {
        #[cfg(target_os = "linux")]
        let on = on && !self.drop_unsupported.load(Ordering::Relaxed) && {
            // Ask the kernel once: a one-byte read with the flag fails
            // with EOPNOTSUPP where the flag is unknown, whatever the
            // file's length.
            let mut b = [0u8; 1];
            self.drop_behind.store(true, Ordering::Relaxed);
            match self.read_exact_flagged(&mut b, 0) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => true,
                _ => !self.drop_unsupported.load(Ordering::Relaxed),
            }
        };
        #[cfg(not(target_os = "linux"))]
        let on = {
            let _ = on;
            false
        };
        self.drop_behind.store(on, Ordering::Relaxed);
        on
    }
    #[cfg(target_os = "linux")]
    fn write_all_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        const MAX_PARTS: usize = 8;
        if bufs.len() > MAX_PARTS {
            return self.write_all_at(&bufs.concat(), offset);
        }
        let mut parts = [io::IoSlice::new(&[]); MAX_PARTS];
        for (p, b) in parts.iter_mut().zip(bufs) {
            *p = io::IoSlice::new(b);
        }
        let mut left = &mut parts[..bufs.len()];
        let mut at = offset;
        while !left.is_empty() {
            let pos = off_t(at)?;
            // SAFETY: `IoSlice` is guaranteed ABI-compatible with `iovec`
            // on Unix; `left` holds at most MAX_PARTS (< IOV_MAX) valid
            // slices that borrow `bufs`, which outlive the call, and the
            // kernel only reads them. The descriptor is open for as long
            // as `self.file` lives.
            #[allow(unsafe_code)]
            let n = self.flagged(|flags| unsafe {
                libc::pwritev2(
                    self.file.as_raw_fd(),
                    left.as_ptr().cast::<libc::iovec>(),
                    left.len() as libc::c_int,
                    pos,
                    flags,
                )
            })?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            at += n as u64;
            io::IoSlice::advance_slices(&mut left, n);
        }
        Ok(())
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    #[cfg(target_os = "linux")]
    fn write_durable_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut left = buf;
        let mut at = offset;
        while !left.is_empty() {
            let iov = libc::iovec {
                iov_base: left.as_ptr() as *mut libc::c_void,
                iov_len: left.len(),
            };
            let pos = off_t(at)?;
            // SAFETY: `iov` describes `left`, valid for reads of its
            // length, which outlives the call; the kernel only reads it.
            // The descriptor is open for as long as `self.file` lives.
            #[allow(unsafe_code)]
            let n = unsafe { libc::pwritev2(self.file.as_raw_fd(), &iov, 1, pos, libc::RWF_DSYNC) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // A kernel without the flag (before 4.7) or the call:
                    // the write and a whole-file sync give the same
                    // guarantee, at a sync's cost.
                    Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => {
                        self.write_all_at(left, at)?;
                        return self.sync_data();
                    }
                    _ => return Err(e),
                }
            }
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            at += n as u64;
            left = &left[n as usize..];
        }
        Ok(())
    }
    #[cfg(target_os = "linux")]
    fn write_back(&self, offset: u64, len: u64) -> io::Result<()> {
        self.sync_file_range(
            offset,
            len,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )
    }
    #[cfg(target_os = "linux")]
    fn sync_written_back(&self, quiet: (u64, u64)) -> io::Result<()> {
        if !self.ranged_sync {
            return self.sync_data();
        }
        // The quiet range rewritten with its own bytes as an `O_DSYNC`
        // write: the barrier of `ranged_sync_holds`, which changes no byte.
        let len = usize::try_from(quiet.1)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "range too long"))?;
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, quiet.0)?;
        self.write_durable_at(&buf, quiet.0)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    #[cfg(target_os = "linux")]
    fn free_space(&self) -> io::Result<Option<u64>> {
        use std::os::fd::AsRawFd;
        // SAFETY: an all-zero `statvfs` is a valid value of this plain C
        // struct (integers only); fstatvfs overwrites it.
        #[allow(unsafe_code)]
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: fstatvfs writes one `statvfs` through the pointer, which
        // points to `st`, alive and writable for the call; the descriptor
        // is open for as long as `self.file` lives.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fstatvfs(self.file.as_raw_fd(), &mut st) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // fsblkcnt_t and c_ulong are narrower than u64 on some targets.
        #[allow(clippy::useless_conversion)]
        let free = u64::from(st.f_bavail).saturating_mul(u64::from(st.f_frsize));
        Ok(Some(free))
    }
    /// Populates with `posix_fadvise(WILLNEED)`, which Linux 6.18 serves
    /// with 4 KiB folios, though a block written whole into uncached room
    /// gets one folio of its own size. With the room populated by writes
    /// of zeros instead, so in block-sized folios, `cache-pressure`
    /// inserted 4.7-9.7 % more a second in four interleaved pairs of six
    /// (fewer in the other two), but the device wrote up to 1.9 times the
    /// bytes; reads make such folios only by chance (BENCHMARKS.md, "16
    /// KiB page-cache folios by zero fill, tried").
    #[cfg(target_os = "linux")]
    fn populate(&self, offset: u64, len: u64, step: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        if self.drop_behind.load(Ordering::Relaxed) {
            // Pages cached ahead would be charged to a memory limit that
            // has no room for them (see `os_cache`).
            return Ok(());
        }
        let end = offset.saturating_add(len);
        let mut off = offset;
        while off < end {
            let n = step.clamp(1, end - off);
            // SAFETY: posix_fadvise takes a file descriptor and integers
            // and touches no memory of ours; the descriptor is open for as
            // long as `self.file` lives, which outlasts the call.
            #[allow(unsafe_code)]
            let rc = unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    off_t(off)?,
                    off_t(n)?,
                    libc::POSIX_FADV_WILLNEED,
                )
            };
            // posix_fadvise returns the error number instead of setting errno.
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            off += n;
        }
        Ok(())
    }
    #[cfg(target_os = "linux")]
    fn preallocate(&self, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let n = off_t(len)?;
        // SAFETY: fallocate takes a file descriptor and integers and
        // touches no memory of ours; the descriptor is open for as long as
        // `self.file` lives, which outlasts the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, n) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
            // A file system without fallocate: extending the length still
            // saves each write the cost of growing the file.
            return extend_to(self, len);
        }
        Err(err)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// `set_thread_nice` changes the calling thread's nice value and no
    /// other thread's (on Linux a nice value is per thread).
    #[test]
    fn set_thread_nice_is_per_thread() {
        let base = thread_nice();
        let want = (base + 3).min(19);
        let got = std::thread::spawn(move || {
            set_thread_nice(want).unwrap();
            thread_nice()
        })
        .join()
        .unwrap();
        assert_eq!(got, want);
        assert_eq!(thread_nice(), base, "the calling thread's changed too");
    }

    /// A vectored write puts its pieces, in order, at the offset, past the
    /// end too; empty pieces and more pieces than one call takes are fine.
    #[test]
    fn vectored_writes_land_as_their_pieces_joined() {
        let dir = tempfile::tempdir().unwrap();
        let f = OsFileSystem.open(&dir.path().join("f"), true).unwrap();
        f.write_all_at(&[0xEE; 64], 0).unwrap();
        let (a, b, c) = (vec![1u8; 5], vec![2u8; 17], vec![3u8; 3]);
        f.write_all_vectored_at(&[&a, &[], &b, &c], 10).unwrap();
        let many: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i + 10; i as usize + 1]).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| &v[..]).collect();
        f.write_all_vectored_at(&refs, 100).unwrap();
        let mut want = vec![0xEE; 64];
        want[10..]
            .iter_mut()
            .zip(a.iter().chain(&b).chain(&c))
            .for_each(|(w, x)| *w = *x);
        want.resize(100, 0);
        want.extend(refs.concat());
        assert_eq!(f.len().unwrap(), want.len() as u64);
        let mut got = vec![0u8; want.len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(got, want);
    }
    /// A durable write lands where it is aimed, over bytes and past the
    /// end, and leaves the bytes around it as they were; the file reopened
    /// reads the same.
    #[test]
    fn durable_writes_land_and_leave_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = OsFileSystem.open(&path, true).unwrap();
        f.write_all_at(&[0xAB; 8192], 0).unwrap();
        f.write_durable_at(&[7u8; 4096], 4096).unwrap();
        f.write_durable_at(&[9u8; 100], 10_000).unwrap();
        let mut want = vec![0xAB; 4096];
        want.extend([7u8; 4096]);
        want.resize(10_000, 0);
        want.extend([9u8; 100]);
        assert_eq!(f.len().unwrap(), want.len() as u64);
        drop(f);
        assert_reopened_reads(&path, &want);
    }
    /// Opens `path` again and checks that it reads `want` from its start.
    fn assert_reopened_reads(path: &Path, want: &[u8]) {
        let f = OsFileSystem.open(path, false).unwrap();
        let mut got = vec![0u8; want.len()];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(got, want);
    }
    /// Ranges written back (overlapping, adjacent, past the end) and a
    /// ranged sync over a quiet range change no byte, and the file reopened
    /// reads what was written, synced or not.
    #[test]
    fn ranged_write_back_and_sync_change_no_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = OsFileSystem.open(&path, true).unwrap();
        let want: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 31 % 251) as u8).collect();
        f.write_all_at(&want, 0).unwrap();
        for (off, len) in [(0, 4096), (4096, 8192), (8192, 4096), (60 * 1024, 1 << 20)] {
            f.write_back(off, len).unwrap();
        }
        f.sync_written_back((16 * 1024, 16 * 1024)).unwrap();
        assert_eq!(f.len().unwrap(), want.len() as u64);
        drop(f);
        assert_reopened_reads(&path, &want);
        let f = OsFileSystem.open(&path, false).unwrap();
        // A quiet range past the end cannot be read back: an error, not
        // a write of zeros there (or, off ext4, a whole sync, which is fine).
        if let Err(e) = f.sync_written_back((want.len() as u64, 4096)) {
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "{e}");
        }
        assert_eq!(f.len().unwrap(), want.len() as u64);
    }
    /// With the pages dropped behind each call (or, on a kernel without
    /// `RWF_DONTCACHE`, refused and left as usual), reads and writes, plain
    /// and vectored, past the end and short of it, still see what was
    /// written; switched off again, they go on the same.
    #[test]
    fn drop_behind_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let f = OsFileSystem.open(&dir.path().join("f"), true).unwrap();
        let on = f.set_drop_behind(true);
        if cfg!(target_os = "linux") && !on {
            eprintln!("RWF_DONTCACHE not supported here; the plain path was tested");
        }
        let block: Vec<u8> = (0..16384u32).map(|i| (i * 7 + 3) as u8).collect();
        f.write_all_at(&block, 0).unwrap();
        f.write_all_vectored_at(&[&block[..100], &block[100..]], 16384)
            .unwrap();
        let mut got = vec![0u8; 2 * 16384];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(&got[..16384], &block[..]);
        assert_eq!(&got[16384..], &block[..]);
        // A read past the end fails as a plain one does.
        let mut past = vec![0u8; 10];
        let e = f.read_exact_at(&mut past, 2 * 16384 - 5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(!f.set_drop_behind(false));
        f.write_all_at(&[9u8; 4], 5).unwrap();
        let mut four = [0u8; 4];
        f.read_exact_at(&mut four, 5).unwrap();
        assert_eq!(four, [9u8; 4]);
    }
}
