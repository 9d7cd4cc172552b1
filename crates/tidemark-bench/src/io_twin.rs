//! The checkpoint's I/O without the engine: what a writer pays for the
//! device and the kernel alone.
//!
//! `checkpoint --io-twin` adds a window to each round of the writer
//! phase, between the baseline and the checkpoint. In it the same writer
//! makes the same puts beside a thread that does what a checkpoint of the
//! dirty set does to the machine, with none of the engine: it copies
//! each page out of memory, checksums it and writes it to a file of its
//! own through the page cache, then, at the nice value the engine's
//! checkpoint flush runs at, pushes the file to the device in the same
//! 4 MiB `sync_file_range` steps and `fdatasync`s it. No latch, shadow
//! copy, allocator or write gate of the engine is involved, so the gap
//! between the writer's p99 beside this twin and beside the real
//! checkpoint is what the engine adds; the twin's own ratio to the
//! baseline is what the machine takes whatever the engine does.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of each page written (the engine's default page size).
const PAGE: usize = 16 << 10;
/// Bytes per `sync_file_range` step (the engine's `WRITE_BACK_STEP`).
const STEP: u64 = 4 << 20;
/// Memory the pages are copied from: larger than the CPUs' caches, as the
/// engine's frames are, so each copy reads memory, not cache.
const SOURCE: usize = 256 << 20;
/// The engine's default `checkpoint_flush_nice`.
const FLUSH_NICE: i32 = 19;

/// A file the size of the largest dirty set to mirror, written once in
/// full so that the twin's writes overwrite blocks that exist, as a
/// checkpoint's writes to the data file's free blocks do.
pub struct Twin {
    file: File,
    len: u64,
    source: Vec<u8>,
}

impl Twin {
    /// Creates the twin's file of `len` bytes in `dir` (rounded up to
    /// whole pages), written with zeros and synced.
    pub fn create(dir: &Path, len: u64) -> io::Result<Twin> {
        let len = len.div_ceil(PAGE as u64) * PAGE as u64;
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.join("io-twin.data"))?;
        let zeros = vec![0u8; STEP as usize];
        let mut off = 0;
        while off < len {
            let n = (len - off).min(STEP) as usize;
            file.write_all_at(&zeros[..n], off)?;
            off += n as u64;
        }
        file.sync_data()?;
        // Bytes that are not all alike, so the checksum does real work.
        let source = (0..SOURCE)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
            .collect();
        Ok(Twin { file, len, source })
    }

    /// Writes `bytes` (at most the file's length) as a checkpoint would,
    /// then flushes and syncs them; returns how long it all took.
    pub fn checkpoint(&self, bytes: u64) -> io::Result<Duration> {
        let t0 = Instant::now();
        let bytes = bytes.min(self.len);
        let pages = bytes.div_ceil(PAGE as u64) as usize;
        let mut buf = vec![0u8; PAGE];
        let slots = SOURCE / PAGE;
        for p in 0..pages {
            // Pages are taken from memory in a scattered order, as dirty
            // pages sit in the frames.
            let s = (p.wrapping_mul(7919)) % slots * PAGE;
            buf.copy_from_slice(&self.source[s..s + PAGE]);
            let crc = crc_fast::crc32_iscsi(&buf[8..]);
            buf[..4].copy_from_slice(&crc.to_le_bytes());
            self.file.write_all_at(&buf, (p * PAGE) as u64)?;
        }
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("io-twin-flush".into())
                .spawn_scoped(s, || {
                    set_nice(FLUSH_NICE);
                    self.flush(pages as u64 * PAGE as u64)
                })?
                .join()
                .map_err(|_| io::Error::other("the twin's flush thread panicked"))?
        })?;
        Ok(t0.elapsed())
    }

    /// The engine's flush: 4 MiB steps through `sync_file_range` (start
    /// the writes, wait for them), then `fdatasync`.
    fn flush(&self, len: u64) -> io::Result<()> {
        let mut off = 0u64;
        while off < len {
            sync_range(&self.file, off, STEP)?;
            off += STEP;
        }
        self.file.sync_data()
    }
}

/// One step of the engine's flush: starts the writes of `len` bytes of
/// `file` from `off` and waits for them (`sync_file_range`).
pub(crate) fn sync_range(file: &File, off: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    // SAFETY: sync_file_range takes a descriptor and integers and touches
    // no memory of ours; `file` keeps the descriptor open through the
    // call. Callers pass offsets and lengths of files far below i64::MAX.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), off as i64, len as i64, flags) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Lowers the calling thread's priority to `nice`, as the engine's flush
/// thread does; a refusal leaves it as it is.
pub(crate) fn set_nice(nice: i32) {
    // SAFETY: gettid and setpriority take and return integers and touch
    // no memory; on Linux a nice value set this way is the thread's own.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_twin_writes_checksummed_pages_over_its_file() {
        let d = tempfile::tempdir().unwrap();
        let twin = Twin::create(d.path(), 3 * PAGE as u64 - 1).unwrap();
        assert_eq!(twin.len, 3 * PAGE as u64, "rounded up to whole pages");
        twin.checkpoint(2 * PAGE as u64).unwrap();
        let f = std::fs::read(d.path().join("io-twin.data")).unwrap();
        assert_eq!(f.len(), 3 * PAGE);
        for p in 0..2 {
            let page = &f[p * PAGE..(p + 1) * PAGE];
            let crc = u32::from_le_bytes(page[..4].try_into().unwrap());
            assert_eq!(crc, crc_fast::crc32_iscsi(&page[8..]), "page {p}");
            assert!(page[8..].iter().any(|&b| b != 0), "page {p} not written");
        }
        assert!(
            f[2 * PAGE..].iter().all(|&b| b == 0),
            "a page past the bytes asked for was written"
        );
        // Asked for more than the file holds: the whole file, no growth.
        twin.checkpoint(10 * PAGE as u64).unwrap();
        assert_eq!(
            std::fs::metadata(d.path().join("io-twin.data"))
                .unwrap()
                .len(),
            3 * PAGE as u64
        );
    }
}
