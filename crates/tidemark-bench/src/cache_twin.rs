//! Cache pressure's I/O without the engine: what the machine does to the
//! load's reads, writes and file growth alone.
//!
//! `cache-pressure --io-twin` runs, after the engine's load, the same
//! number of operations on the same number of threads, each doing to a
//! file of its own what one insert did to the data file on average in the
//! engine's run, with none of the engine:
//!
//! - a read of the engine's bytes read per insert, from a random block,
//!   into one of a cache's worth of frames;
//! - a write of its bytes written per insert, checksummed, over a random
//!   block (the engine's evictions write a leaf over its own block, which
//!   is where its writes land almost always);
//! - the file grown, at an even pace, to the size the engine's data file
//!   reached, preallocated ahead as the engine grows its file
//!   (`fallocate`, at least 16 MiB or an eighth of the file at a time);
//! - the engine's log bytes per insert appended to a log file, which
//!   starts over at the log size that makes the engine checkpoint (as its
//!   segments are recycled then).
//!
//! Every write-back interval a thread at the engine's flush priority
//! pushes the file to the device in the engine's 4 MiB steps and syncs it,
//! and the writers keep off the step in flight, as the engine's
//! evictions do. No B+tree, latch, allocator or eviction of the engine is
//! involved, and the twin uses far less CPU per operation, so it runs
//! faster and for fewer seconds. Its slowest second against its median is
//! what this machine gives this I/O whatever the engine does; the
//! engine's own ratio from the same run, beside it, is what the engine
//! adds.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

/// Name of the twin's data file in its directory.
pub const DATA_FILE: &str = "cache-twin.data";

/// Bytes of a block: the engine's default page size.
const BLOCK: u64 = 16 << 10;
/// Bytes per write-back step (the engine's `WRITE_BACK_STEP`).
const STEP: u64 = 4 << 20;
/// The engine's default `checkpoint_flush_nice`, which its write-back
/// between checkpoints runs at too.
const FLUSH_NICE: i32 = 19;

/// What one insert of the engine's run did to the data file, on average,
/// and how the run went: the twin's plan.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Operations in all (the engine's inserts).
    pub ops: u64,
    /// Threads making them.
    pub threads: usize,
    /// Bytes each operation reads (at most a block).
    pub read_bytes: usize,
    /// Bytes each operation writes (at most a block).
    pub write_bytes: usize,
    /// Size the file grows to.
    pub final_len: u64,
    /// Bytes of frames the reads land in (the engine's cache).
    pub frames_bytes: usize,
    /// Bytes each operation appends to the log.
    pub log_bytes: usize,
    /// Log bytes after which the log starts over (the engine's
    /// `checkpoint_log_size`).
    pub log_wrap: u64,
    /// Time between write-backs of the file (`None`: none).
    pub write_back_every: Option<Duration>,
}

/// The twin's figures.
#[derive(Clone, Debug)]
pub struct Run {
    /// Operations completed in each whole second.
    pub windows: Vec<u64>,
    /// The slowest operation of each second, in ns (by the second it began in).
    pub worst_ns_by_second: Vec<u64>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Write-backs made.
    pub write_backs: u64,
}

impl Run {
    /// The median whole second and the slowest one, in operations.
    pub fn median_and_min(&self) -> (f64, f64) {
        let mut v: Vec<f64> = self.windows.iter().map(|&w| w as f64).collect();
        let med = crate::report::median(&mut v);
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        (med, if min.is_finite() { min } else { 0.0 })
    }
    /// The slowest operation of the run, in ms.
    pub fn worst_ms(&self) -> f64 {
        self.worst_ns_by_second.iter().copied().max().unwrap_or(0) as f64 / 1e6
    }
}

/// Blocks the file holds once `done` of `plan.ops` operations have been
/// claimed: at least one, growing evenly to the final size.
fn blocks_at(plan: &Plan, done: u64) -> u64 {
    let last = plan.final_len.div_ceil(BLOCK).max(1);
    (last as u128 * done.min(plan.ops) as u128 / plan.ops.max(1) as u128).max(1) as u64
}

/// Bytes the file is preallocated to when it holds `used` bytes: as the
/// engine grows its data file, by at least 16 MiB or an eighth of the file.
fn preallocated(used: u64) -> u64 {
    used + (16u64 << 20).max(used / 8)
}

/// Preallocates `file` to `len` bytes (`fallocate`, the file's size
/// growing with it).
fn fallocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate takes a descriptor and integers and touches no
    // memory of ours; `file` keeps the descriptor open through the call.
    // Lengths stay far below i64::MAX.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len as i64) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Runs the plan against new files in `dir` (removed at the end).
pub fn run(dir: &Path, plan: &Plan) -> io::Result<Run> {
    let open = |name: &str| {
        File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.join(name))
    };
    let (file, log) = (open(DATA_FILE)?, open("cache-twin.log")?);
    let r = run_on(&file, &log, plan);
    drop((file, log));
    std::fs::remove_file(dir.join(DATA_FILE))?;
    std::fs::remove_file(dir.join("cache-twin.log"))?;
    r
}

/// What the twin's threads share.
struct Shared<'a> {
    plan: &'a Plan,
    file: &'a File,
    log: &'a File,
    start: Instant,
    read_len: usize,
    write_len: usize,
    log_len: usize,
    frames_per_thread: usize,
    /// Blocks written so far. A thread that finds the plan ahead of it
    /// writes the next block itself, preallocating first where needed.
    grown: AtomicU64,
    /// Bytes the file is preallocated to.
    allocated: AtomicU64,
    grow_lock: Mutex<()>,
    /// Records appended to the log so far.
    log_at: AtomicU64,
    /// Operations claimed and completed.
    claimed: AtomicU64,
    done: AtomicU64,
    /// The write-back step in flight, as [first block, end block); end 0
    /// when none is.
    step: (AtomicU64, AtomicU64),
    write_backs: AtomicU64,
    stop: AtomicBool,
}

fn run_on(file: &File, log: &File, plan: &Plan) -> io::Result<Run> {
    let first = preallocated(BLOCK);
    fallocate(file, first)?;
    // The first block, so that every read finds one.
    file.write_all_at(&vec![0u8; BLOCK as usize], 0)?;
    let sh = Shared {
        plan,
        file,
        log,
        start: Instant::now(),
        read_len: plan.read_bytes.clamp(1, BLOCK as usize),
        // Room for the checksum in front.
        write_len: plan.write_bytes.clamp(8, BLOCK as usize),
        log_len: plan.log_bytes.min(BLOCK as usize / 2),
        frames_per_thread: (plan.frames_bytes / plan.threads.max(1) / BLOCK as usize).max(1),
        grown: AtomicU64::new(1),
        allocated: AtomicU64::new(first),
        grow_lock: Mutex::new(()),
        log_at: AtomicU64::new(0),
        claimed: AtomicU64::new(0),
        done: AtomicU64::new(0),
        step: (AtomicU64::new(0), AtomicU64::new(0)),
        write_backs: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let sh = &sh;
    std::thread::scope(|s| -> io::Result<Run> {
        let sampler = s.spawn(|| {
            let mut windows = Vec::new();
            let mut last = 0;
            let mut next = sh.start + Duration::from_secs(1);
            while !sh.stop.load(Ordering::Relaxed) {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += Duration::from_secs(1);
                let now = sh.done.load(Ordering::Relaxed);
                windows.push(now - last);
                last = now;
            }
            windows
        });
        let flusher = std::thread::Builder::new()
            .name("cache-twin-flush".into())
            .spawn_scoped(s, || write_back(sh))?;
        let writers: Vec<_> = (0..plan.threads)
            .map(|w| {
                s.spawn(move || {
                    let r = writer(sh, w);
                    if r.is_err() {
                        // The other writers stop at their next claim.
                        sh.claimed.fetch_max(plan.ops, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        let mut worst_ns_by_second: Vec<u64> = Vec::new();
        let mut first_err = None;
        for w in writers {
            match w.join() {
                Ok(Ok(v)) => {
                    if worst_ns_by_second.len() < v.len() {
                        worst_ns_by_second.resize(v.len(), 0);
                    }
                    for (acc, x) in worst_ns_by_second.iter_mut().zip(v) {
                        *acc = (*acc).max(x);
                    }
                }
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err = first_err.or(Some(io::Error::other("a twin writer panicked")))
                }
            }
        }
        let elapsed = sh.start.elapsed();
        sh.stop.store(true, Ordering::Relaxed);
        let windows = sampler
            .join()
            .map_err(|_| io::Error::other("the twin's sampler panicked"))?;
        let flushed = flusher
            .join()
            .map_err(|_| io::Error::other("the twin's flush thread panicked"))?;
        if let Some(e) = first_err {
            return Err(e);
        }
        flushed?;
        // Whole seconds only: the last, partial window is dropped.
        let windows = windows
            .into_iter()
            .take(elapsed.as_secs() as usize)
            .collect();
        worst_ns_by_second.truncate(elapsed.as_secs().max(1) as usize);
        Ok(Run {
            windows,
            worst_ns_by_second,
            elapsed,
            write_backs: sh.write_backs.load(Ordering::Relaxed),
        })
    })
}

/// The write-back thread: every interval, the blocks written so far
/// pushed to the device in steps and synced, at the engine's flush
/// priority, until the writers are done.
fn write_back(sh: &Shared) -> io::Result<()> {
    crate::io_twin::set_nice(FLUSH_NICE);
    let Some(every) = sh.plan.write_back_every else {
        return Ok(());
    };
    let mut next = sh.start + every;
    loop {
        while Instant::now() < next {
            if sh.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        next += every;
        let len = sh.grown.load(Ordering::Acquire) * BLOCK;
        let mut off = 0;
        while off < len {
            sh.step.0.store(off / BLOCK, Ordering::Release);
            sh.step.1.store((off + STEP) / BLOCK, Ordering::Release);
            let r = crate::io_twin::sync_range(sh.file, off, STEP);
            sh.step.1.store(0, Ordering::Release);
            r?;
            off += STEP;
        }
        sh.file.sync_data()?;
        sh.write_backs.fetch_add(1, Ordering::Relaxed);
    }
}

/// One writer thread: claims operations until all are claimed; returns
/// its slowest operation of each second, in ns.
fn writer(sh: &Shared, w: usize) -> io::Result<Vec<u64>> {
    let (plan, file) = (sh.plan, sh.file);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7e1 + w as u64);
    let mut frames = vec![0u8; sh.frames_per_thread * BLOCK as usize];
    // Bytes that are not all alike, so the checksum does real work.
    rng.fill(&mut frames[..]);
    let mut worst: Vec<u64> = Vec::new();
    loop {
        let i = sh.claimed.fetch_add(1, Ordering::Relaxed);
        if i >= plan.ops {
            return Ok(worst);
        }
        let t0 = Instant::now();
        // Growth first: the blocks the plan wants by now.
        let want = blocks_at(plan, i + 1);
        if sh.grown.load(Ordering::Acquire) < want {
            let _g = sh.grow_lock.lock().unwrap_or_else(|p| p.into_inner());
            let mut have = sh.grown.load(Ordering::Acquire);
            while have < want {
                if (have + 1) * BLOCK > sh.allocated.load(Ordering::Relaxed) {
                    let len = preallocated((have + 1) * BLOCK);
                    fallocate(file, len)?;
                    sh.allocated.store(len, Ordering::Relaxed);
                }
                let f = rng.gen_range(0..sh.frames_per_thread) * BLOCK as usize;
                file.write_all_at(&frames[f..f + BLOCK as usize], have * BLOCK)?;
                have += 1;
                sh.grown.store(have, Ordering::Release);
            }
        }
        let blocks = sh.grown.load(Ordering::Acquire);
        let f = rng.gen_range(0..sh.frames_per_thread) * BLOCK as usize;
        let frame = &mut frames[f..f + BLOCK as usize];
        let b = rng.gen_range(0..blocks);
        file.read_exact_at(&mut frame[..sh.read_len], b * BLOCK)?;
        // The "insert": a byte changed.
        frame[(i as usize * 131) % sh.read_len] ^= 0x5a;
        let crc = crc_fast::crc32_iscsi(&frame[4..sh.write_len]);
        frame[..4].copy_from_slice(&crc.to_le_bytes());
        // A block outside the write-back step in flight.
        let mut b = rng.gen_range(0..blocks);
        for _ in 0..8 {
            let end = sh.step.1.load(Ordering::Acquire);
            if end == 0 || b < sh.step.0.load(Ordering::Acquire) || b >= end {
                break;
            }
            b = rng.gen_range(0..blocks);
        }
        file.write_all_at(&frame[..sh.write_len], b * BLOCK)?;
        if sh.log_len > 0 {
            // The record, appended where the log is; the log starts over
            // once it has reached the wrap.
            let records = (plan.log_wrap / sh.log_len as u64).max(1);
            let at = sh.log_at.fetch_add(1, Ordering::Relaxed) % records * sh.log_len as u64;
            sh.log
                .write_all_at(&frame[BLOCK as usize - sh.log_len..], at)?;
        }
        let ns = t0.elapsed().as_nanos() as u64;
        let sec = t0.duration_since(sh.start).as_secs() as usize;
        if worst.len() <= sec {
            worst.resize(sec + 1, 0);
        }
        worst[sec] = worst[sec].max(ns);
        sh.done.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ops: u64) -> Plan {
        Plan {
            ops,
            threads: 2,
            read_bytes: 11_000,
            write_bytes: 12_000,
            final_len: 64 * BLOCK,
            frames_bytes: 1 << 20,
            log_bytes: 150,
            log_wrap: 1 << 20,
            write_back_every: Some(Duration::from_millis(50)),
        }
    }

    #[test]
    fn the_file_is_preallocated_in_the_engines_steps() {
        assert_eq!(preallocated(BLOCK), BLOCK + (16 << 20), "16 MiB at least");
        assert_eq!(
            preallocated(1 << 30),
            (1 << 30) + (1 << 27),
            "an eighth of a large file"
        );
    }

    #[test]
    fn the_file_grows_evenly_to_the_engines_size() {
        let p = plan(1000);
        assert_eq!(blocks_at(&p, 0), 1, "never empty");
        assert_eq!(blocks_at(&p, 500), 32);
        assert_eq!(blocks_at(&p, 1000), 64);
        assert_eq!(blocks_at(&p, 5000), 64, "never past the final size");
    }

    #[test]
    fn the_twin_makes_every_operation_and_grows_its_file() {
        let d = tempfile::tempdir().unwrap();
        // Past the first 16 MiB step, so that the file is grown twice more.
        let p = Plan {
            final_len: 40 << 20,
            ..plan(200_000)
        };
        let open = |n: &str| {
            File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(d.path().join(n))
                .unwrap()
        };
        let (file, log) = (open("t"), open("log"));
        let r = run_on(&file, &log, &p).unwrap();
        let len = file.metadata().unwrap().len();
        assert!(
            len >= p.final_len && len <= preallocated(p.final_len),
            "preallocated in steps up to a step past the plan's size: {len}"
        );
        let log_len = log.metadata().unwrap().len();
        assert!(
            log_len <= p.log_wrap && log_len > p.log_wrap - 150,
            "the log started over at its wrap: {log_len}"
        );
        let counted: u64 = r.windows.iter().sum();
        assert!(
            counted <= p.ops,
            "whole seconds count at most every operation"
        );
        assert!(r.elapsed.as_secs() as usize >= r.windows.len());
        assert!(r.worst_ms() > 0.0, "operations were timed");
        // Written blocks carry their checksum over the rest of the write.
        let mut buf = vec![0u8; 12_000];
        let mut checked = 0;
        for b in 0..64 {
            file.read_exact_at(&mut buf, b * BLOCK).unwrap();
            let crc = u32::from_le_bytes(buf[..4].try_into().unwrap());
            if crc == crc_fast::crc32_iscsi(&buf[4..]) {
                checked += 1;
            }
        }
        assert!(
            checked > 32,
            "most blocks were overwritten by checksummed writes: {checked}"
        );
    }

    #[test]
    fn a_failed_write_is_reported() {
        let d = tempfile::tempdir().unwrap();
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(d.path().join("t"))
            .unwrap();
        std::fs::write(d.path().join("log"), b"").unwrap();
        // A log the twin may not write to.
        let log = File::open(d.path().join("log")).unwrap();
        let err = run_on(&file, &log, &plan(1_000_000)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
    }

    #[test]
    fn the_run_file_is_removed() {
        let d = tempfile::tempdir().unwrap();
        run(d.path(), &plan(1000)).unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
