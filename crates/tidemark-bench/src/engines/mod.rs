//! The engines a benchmark can drive, each behind one trait: tidemark and
//! its peers. Every peer but SQLite sits behind a cargo feature (`peers`,
//! or one `peer-<name>` each), so the default build never compiles
//! RocksDB's or WiredTiger's C/C++.
//!
//! An [`Engine`] is one open database with one table; each benchmark thread
//! takes its own [`Worker`] (a session, a connection, a cursor: whatever the
//! engine wants per thread). Every write call is one atomic commit at the
//! durability the engine was opened with ([`Durability`]); how each peer
//! maps it, and the memory budget, is in [`Config`] and BENCHMARKS.md.

mod sqlite;
mod tidemark;

#[cfg(feature = "peer-fjall")]
mod fjall;
#[cfg(feature = "peer-lmdb")]
mod lmdb;
#[cfg(feature = "peer-redb")]
mod redb;
#[cfg(feature = "peer-rocksdb")]
mod rocksdb;
#[cfg(feature = "peer-sled")]
mod sled;
#[cfg(feature = "peer-wiredtiger")]
mod wiredtiger;

use std::path::Path;

use crate::{msg, BoxResult};

/// What a commit must survive before it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// In memory; durable at the engine's next checkpoint or flush.
    None,
    /// Handed to the operating system: survives a crash of the process.
    Write,
    /// On stable storage: survives a crash of the machine.
    Fsync,
}

impl Durability {
    pub fn parse(s: &str) -> BoxResult<Self> {
        match s {
            "none" => Ok(Durability::None),
            "write" => Ok(Durability::Write),
            "fsync" => Ok(Durability::Fsync),
            _ => Err(msg(&format!(
                "durability must be none, write or fsync, not {s:?}"
            ))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::Write => "write",
            Durability::Fsync => "fsync",
        }
    }
}

/// How an engine is opened: the same for every engine of a run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The memory budget for the engine's own cache(s), bytes.
    pub cache_bytes: usize,
    pub durability: Durability,
    /// Threads that will take a worker (engines with per-connection caches
    /// divide the budget among them).
    pub threads: usize,
    /// Page size of a tidemark database (the other engines keep theirs).
    pub tidemark_page_size: usize,
}

/// One write of a commit.
pub enum Op<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
}

/// Copies `bytes` out, as a caller keeping a read's result would, and
/// returns the length. `black_box` keeps the optimiser from removing the
/// copy: an allocation whose contents are never used can otherwise be
/// elided, which would let an engine that lends out borrowed slices skip
/// work that every engine returning owned bytes must do.
#[cfg(any(
    feature = "peer-rocksdb",
    feature = "peer-lmdb",
    feature = "peer-redb",
    feature = "peer-fjall",
    feature = "peer-sled",
    feature = "peer-wiredtiger"
))]
pub(crate) fn copy_out(bytes: &[u8]) -> usize {
    std::hint::black_box(bytes.to_vec()).len()
}

/// Per-thread handle on an engine.
pub trait Worker {
    /// One commit of one put.
    fn put(&mut self, key: &[u8], value: &[u8]) -> BoxResult<()> {
        self.write(&[Op::Put(key, value)])
    }
    /// One atomic commit of every op.
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()>;
    /// Reads a key; returns the length of its value (the value itself is
    /// copied out, as a caller would), or None.
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>>;
    /// Reads up to `n` pairs in key order from `start`; returns how many.
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize>;
}

/// One open database with one table.
pub trait Engine: Send + Sync {
    /// A handle for the calling thread.
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>>;
    /// Makes everything committed durable in the data files (a checkpoint,
    /// a flush of the memtables, a sync of the map): what "after a
    /// checkpoint" means for this engine.
    fn checkpoint(&self) -> BoxResult<()>;
    /// How this engine honours `durability`, in words, for the table.
    fn durability_note(&self) -> String;
    /// Whether the engine's `durability` is weaker than asked (no level
    /// between in memory and fsync): its figures are not compared in the
    /// equal-durability targets.
    fn weaker(&self) -> bool {
        false
    }
}

/// The engines compiled into this binary, tidemark first.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["tidemark", "sqlite"];
    if cfg!(feature = "peer-wiredtiger") {
        v.push("wiredtiger");
    }
    if cfg!(feature = "peer-rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "peer-lmdb") {
        v.push("lmdb");
    }
    if cfg!(feature = "peer-redb") {
        v.push("redb");
    }
    if cfg!(feature = "peer-fjall") {
        v.push("fjall");
    }
    if cfg!(feature = "peer-sled") {
        v.push("sled");
    }
    v
}

/// Opens (creating) the engine `name` in the empty directory `dir`.
pub fn open(name: &str, dir: &Path, cfg: &Config) -> BoxResult<Box<dyn Engine>> {
    std::fs::create_dir_all(dir)?;
    match name {
        "tidemark" => Ok(Box::new(tidemark::Tidemark::open(dir, cfg)?)),
        "sqlite" => Ok(Box::new(sqlite::Sqlite::open(dir, cfg)?)),
        #[cfg(feature = "peer-wiredtiger")]
        "wiredtiger" => Ok(Box::new(wiredtiger::WiredTiger::open(dir, cfg)?)),
        #[cfg(feature = "peer-rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::Rocks::open(dir, cfg)?)),
        #[cfg(feature = "peer-lmdb")]
        "lmdb" => Ok(Box::new(lmdb::Lmdb::open(dir, cfg)?)),
        #[cfg(feature = "peer-redb")]
        "redb" => Ok(Box::new(redb::Redb::open(dir, cfg)?)),
        #[cfg(feature = "peer-fjall")]
        "fjall" => Ok(Box::new(fjall::Fjall::open(dir, cfg)?)),
        #[cfg(feature = "peer-sled")]
        "sled" => Ok(Box::new(sled::Sled::open(dir, cfg)?)),
        _ => Err(msg(&format!(
            "engine {name:?} is not in this build (built: {}; peers need `--features peers`, see BENCHMARKS.md)",
            available().join(", ")
        ))),
    }
}

/// Figures of this process read from /proc: the peak resident set since
/// the last [`proc_stats::reset_peak_rss`], and bytes this process caused to be written
/// to storage.
pub mod proc_stats {
    fn status_kb(field: &str) -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }
    /// Peak resident set, bytes.
    pub fn peak_rss() -> u64 {
        status_kb("VmHWM:") * 1024
    }
    /// Starts a new peak-RSS window (Linux: write 5 to clear_refs).
    pub fn reset_peak_rss() {
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
    /// Bytes written to storage on behalf of this process (including pages
    /// dirtied through a memory map), minus writes cancelled by truncation.
    pub fn write_bytes() -> u64 {
        let s = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| crate::report::proc_io_field(&s, name).unwrap_or(0);
        field("write_bytes").saturating_sub(field("cancelled_write_bytes"))
    }
    /// Minor and major page faults of this process so far (0, 0 if
    /// getrusage fails).
    pub fn page_faults() -> (u64, u64) {
        crate::report::rusage(libc::RUSAGE_SELF)
            .map_or((0, 0), |ru| (ru.ru_minflt as u64, ru.ru_majflt as u64))
    }
}
