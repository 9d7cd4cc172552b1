//! Online backup and compaction.
//!
//! **Backup** copies a database while writers go on. It takes a checkpoint,
//! then holds the checkpoint lock (so no later checkpoint can free the
//! blocks the durable one references, nor rewrite its meta page) while it
//! copies:
//! 1. the data file: the blocks of the durable checkpoint do not change
//!    until the next checkpoint, whatever eviction writes to free blocks;
//! 2. every capped ring file: ring bytes reach disk only after the log
//!    that covers them is durable, so what is copied is covered by the log
//!    synced in step 3, and replaying it from the checkpoint rewrites any
//!    record the copy caught half-overwritten;
//! 3. the log from the checkpoint's position to the position synced after
//!    step 2, with the rest of the last segment zeroed, so the copy's log
//!    ends cleanly there.
//!
//! Opening the copy recovers like a restart after a crash at that moment:
//! every commit acknowledged before the backup began is in the checkpoint
//! of step 0, and commits acknowledged during it may be too (those in the
//! copied log). Checkpoints wait for the copy; readers and writers do not.
//!
//! **Compaction** returns the free space at the end of the data file to the
//! file system. Two checkpoints release the blocks earlier ones no longer
//! need. With the write gate closed (commits wait; no page can be freed or
//! unlinked meanwhile), every tree page whose block lies beyond the number
//! of blocks in use is marked dirty, and so is every page-map chunk; the
//! allocator is rewound to the lowest free blocks, so the next checkpoint
//! writes those pages below that line. Two more checkpoints free their old
//! blocks, and the file is cut after its last block in use. Overflow pages
//! (values over a page) are not moved.

use std::path::Path;
use std::time::Instant;

use crate::checkpoint;
use crate::engine::{Engine, DATA_FILE};
use crate::error::{Error, Result};
use crate::io::FileIo;
use crate::wal::segment;

/// What a backup copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackupInfo {
    /// Bytes of the data file copied.
    pub data_bytes: u64,
    /// Bytes of capped ring files copied.
    pub ring_bytes: u64,
    /// Bytes of log copied (from the checkpoint to the synced end).
    pub log_bytes: u64,
    /// Time taken, in microseconds.
    pub duration_us: u64,
}

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactInfo {
    /// Data file size before, in bytes.
    pub size_before: u64,
    /// Data file size after, in bytes.
    pub size_after: u64,
}

const CHUNK: usize = 1 << 20;

/// Copies `len` bytes of `src` from offset 0 into `dst`.
fn copy(src: &dyn FileIo, dst: &dyn FileIo, len: u64) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(CHUNK as u64) as usize;
        src.read_exact_at(&mut buf[..n], off)?;
        dst.write_all_at(&buf[..n], off)?;
        off += n as u64;
    }
    Ok(())
}

fn is_ring_file(name: &str) -> bool {
    name.starts_with("capped-") && name.ends_with(".ring")
}

pub(crate) fn backup(e: &Engine, dest: &Path) -> Result<BackupInfo> {
    let t0 = Instant::now();
    let fs = &*e.fs;
    if dest == e.dir {
        return Err(Error::InvalidOption(
            "a backup cannot be written over its own database".into(),
        ));
    }
    fs.create_dir_all(dest)?;
    if !fs.list(dest)?.is_empty() {
        return Err(Error::InvalidOption(format!(
            "backup destination {} exists and is not empty",
            dest.display()
        )));
    }
    checkpoint::checkpoint(e)?;
    // No checkpoint until the copy is done (see the module comment).
    let durable = e.durable.lock();
    e.pager.check_writable()?;
    let start = durable.log_lsn;
    let seg = durable.log_segment_size;

    // 1. The data file.
    let data_len = e.pager.file.len()?;
    let dst = fs.open(&dest.join(DATA_FILE), true)?;
    copy(&*e.pager.file, &*dst, data_len)?;
    dst.sync_data()?;

    // 2. The rings.
    let mut ring_bytes = 0;
    for name in fs.list(&e.dir)? {
        if !is_ring_file(&name) {
            continue;
        }
        let src = fs.open(&e.dir.join(&name), false)?;
        let len = src.len()?;
        let dst = fs.open(&dest.join(&name), true)?;
        copy(&*src, &*dst, len)?;
        dst.sync_data()?;
        ring_bytes += len;
    }

    // 3. The log, from the checkpoint to what is durable now.
    let end = e.wal.sync()?.max(start);
    let first = start / seg;
    let last = end.saturating_sub(1).max(start) / seg;
    let mut log_bytes = 0;
    let mut buf = vec![0u8; CHUNK];
    for i in first..=last {
        let dst = fs.open(&dest.join(segment::file_name(i)), true)?;
        let seg_start = i * seg;
        let upto = end.min(seg_start + seg);
        // Replay starts at `start`: what precedes it stays zeros.
        let mut pos = seg_start.max(start);
        log_bytes += upto.saturating_sub(pos);
        while pos < upto {
            let n = ((upto - pos) as usize).min(CHUNK);
            let got = e.wal.segs.read(pos, &mut buf[..n])?;
            if got < n {
                return Err(Error::corruption(
                    0,
                    format!("log segment {i} is shorter than the synced log"),
                ));
            }
            dst.write_all_at(&buf[..n], pos - seg_start)?;
            pos += n as u64;
        }
        // The rest of the segment is zeros: the copy's log ends at `end`.
        dst.set_len(seg)?;
        dst.sync_data()?;
    }
    drop(durable);
    fs.sync_dir(dest)?;
    Ok(BackupInfo {
        data_bytes: data_len,
        ring_bytes,
        log_bytes,
        duration_us: t0.elapsed().as_micros() as u64,
    })
}

/// Marks dirty every tree page stored beyond the number of blocks in use;
/// returns the pages marked. Runs with the write gate
/// closed.
fn relocate(e: &Engine) -> Result<u64> {
    let line = e.pager.alloc.used();
    e.pager.alloc.rewind();
    let mut moved = 0;
    for pid in 0..e.pager.next_pid() {
        let b = e.pager.map.block(pid);
        if b == crate::pagemap::NO_BLOCK || b < line {
            continue;
        }
        match e.pool.fix_exclusive(&e.pager, pid) {
            Ok(mut w) => {
                // Unchanged bytes, but dirty: the next checkpoint writes
                // the page to a new (low) block. Its block is made not
                // fresh first, so that an eviction before that checkpoint
                // also moves it instead of rewriting it where it is
                // (`Pager::rewrite_fresh`).
                e.pager.alloc.unfresh(b);
                w.bytes_mut()?;
                moved += 1;
            }
            // Overflow pages are read and written outside the pool and
            // are not moved; a free page id has no block.
            Err(Error::Corruption { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(moved)
}

/// Makes the next checkpoint rewrite every map chunk and the directory.
fn mark_map_dirty(e: &Engine) {
    let chunks = e.pager.next_pid().div_ceil(e.pager.chunk_entries() as u64) as usize;
    e.pager.state.lock().dirty_chunks.extend(0..chunks.max(1));
}

pub(crate) fn compact(e: &Engine) -> Result<CompactInfo> {
    // The first checkpoint makes the blocks freed before it reusable once
    // the second one is durable; the second frees what the first released.
    checkpoint::checkpoint(e)?;
    checkpoint::checkpoint(e)?;
    e.gate.close();
    let moved = relocate(e);
    e.gate.open();
    moved?;
    // The first writes the marked pages, the map and its directory low;
    // the second releases the blocks they left. Each rewrites the map, so
    // neither is idle (an idle checkpoint releases nothing).
    for _ in 0..2 {
        e.pager.alloc.rewind();
        mark_map_dirty(e);
        checkpoint::checkpoint(e)?;
    }
    let (before, after) = e.pager.shrink_to_used()?;
    Ok(CompactInfo {
        size_before: before * e.pager.page_size as u64,
        size_after: after * e.pager.page_size as u64,
    })
}
