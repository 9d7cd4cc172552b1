//! The public API: [`Builder`], [`Database`], [`Table`], [`WriteBatch`],
//! [`Range`].

use std::collections::{HashMap, VecDeque};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::btree::ScanHint;
use crate::cache::{self, PoolConfig, MAX_FRAMES, MIN_FRAMES};
use crate::checkpoint::{self, CheckpointInfo};
use crate::engine::{decode_root, Engine, CATALOG_ROOT};
use crate::error::{Error, Result};
use crate::io::{FileSystem, OsFileSystem};
use crate::os_cache::OsCache;
use crate::page;
use crate::statlog::{self, StatisticsLog};
use crate::stats::{bump, Stats};
use crate::txn::{ReadTxn, Snap, WriteTxn};
use crate::verify::{self, VerifyReport};
use crate::versions::Ts;
use crate::wal::record::LogOp;
use crate::wal::{Durability, Ticket, DEFAULT_SEGMENT_SIZE};

/// Largest value, in bytes.
pub const MAX_VALUE_SIZE: usize = 16 * 1024 * 1024;
/// Default of [`Builder::checkpoint_log_size`].
pub const DEFAULT_CHECKPOINT_LOG_SIZE: u64 = 1 << 30;

/// Default [`Builder::write_back_interval`]: under Linux's default
/// `vm.dirty_expire_centisecs` (30 s), so the kernel's own write-back of
/// the data file never finds it expired.
pub const DEFAULT_WRITE_BACK_INTERVAL: Duration = Duration::from_secs(20);
/// Longest table name, in bytes.
pub const MAX_TABLE_NAME: usize = 255;

/// Opens or creates a database with chosen options.
///
/// ```no_run
/// let db = tidemark::Builder::new().cache_size(64 << 20).open("data/app")?;
/// # Ok::<(), tidemark::Error>(())
/// ```
#[derive(Clone)]
pub struct Builder {
    cache_size: usize,
    eviction_target: u8,
    eviction_trigger: u8,
    eviction_dirty_target: u8,
    eviction_dirty_trigger: u8,
    eviction_threads: usize,
    checkpoint_interval: Option<Duration>,
    checkpoint_log_size: Option<u64>,
    checkpoint_flush_nice: Option<i32>,
    write_back_interval: Option<Duration>,
    os_cache: OsCache,
    durability: Durability,
    log_segment_size: u64,
    page_size: usize,
    version_budget: u8,
    statistics_log: Option<StatisticsLog>,
    control_socket: bool,
    fs: Arc<dyn FileSystem>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("cache_size", &self.cache_size)
            .field("eviction_target", &self.eviction_target)
            .field("eviction_trigger", &self.eviction_trigger)
            .field("eviction_dirty_target", &self.eviction_dirty_target)
            .field("eviction_dirty_trigger", &self.eviction_dirty_trigger)
            .field("eviction_threads", &self.eviction_threads)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("checkpoint_log_size", &self.checkpoint_log_size)
            .field("checkpoint_flush_nice", &self.checkpoint_flush_nice)
            .field("write_back_interval", &self.write_back_interval)
            .field("os_cache", &self.os_cache)
            .field("durability", &self.durability)
            .field("log_segment_size", &self.log_segment_size)
            .field("page_size", &self.page_size)
            .field("version_budget", &self.version_budget)
            .finish_non_exhaustive()
    }
}

impl Builder {
    /// Defaults: 256 MiB cache, eviction target/trigger 80/95 %, dirty
    /// target/trigger 5/20 %, one eviction worker, a checkpoint every 60 s,
    /// durability [`Durability::Write`], 16 MiB log segments, 10 % of the
    /// cache for snapshot versions, a statistics log line every 10 s.
    pub fn new() -> Self {
        Builder {
            cache_size: 256 << 20,
            eviction_target: 80,
            eviction_trigger: 95,
            eviction_dirty_target: 5,
            eviction_dirty_trigger: 20,
            eviction_threads: 1,
            checkpoint_interval: Some(Duration::from_secs(60)),
            checkpoint_log_size: Some(DEFAULT_CHECKPOINT_LOG_SIZE),
            checkpoint_flush_nice: Some(19),
            write_back_interval: Some(DEFAULT_WRITE_BACK_INTERVAL),
            os_cache: OsCache::Auto,
            durability: Durability::Write,
            log_segment_size: DEFAULT_SEGMENT_SIZE,
            page_size: page::DEFAULT_PAGE_SIZE,
            version_budget: 10,
            statistics_log: Some(StatisticsLog::default()),
            control_socket: false,
            fs: Arc::new(OsFileSystem),
        }
    }
    /// The statistics log: a JSON line of every counter each interval, in
    /// rotating files (see [`StatisticsLog`]); `None` turns it off. On by
    /// default, every 10 s, in the database directory, with a last line at
    /// close.
    pub fn statistics_log(mut self, log: Option<StatisticsLog>) -> Self {
        self.statistics_log = log;
        self
    }

    /// Opens a control socket, `control.sock` in the database directory
    /// (owner only), through which `tidemark stat` reads the statistics
    /// and `tidemark backup` asks for a backup while this process has the
    /// database open. Off by default; needs the operating system's file
    /// system.
    pub fn control_socket(mut self, on: bool) -> Self {
        self.control_socket = on;
        self
    }

    /// Bytes of memory for pages and snapshot versions together; the
    /// pages' share (all but [`Builder::version_budget`]) must hold at
    /// least 64 pages (1 MiB).
    pub fn cache_size(mut self, bytes: usize) -> Self {
        self.cache_size = bytes;
        self
    }
    /// Background eviction keeps cache usage below this percent.
    pub fn eviction_target(mut self, pct: u8) -> Self {
        self.eviction_target = pct;
        self
    }
    /// Above this percent, application threads evict before continuing.
    pub fn eviction_trigger(mut self, pct: u8) -> Self {
        self.eviction_trigger = pct;
        self
    }
    /// Background eviction keeps dirty pages below this percent.
    pub fn eviction_dirty_target(mut self, pct: u8) -> Self {
        self.eviction_dirty_target = pct;
        self
    }
    /// Above this percent of dirty pages, application threads evict.
    pub fn eviction_dirty_trigger(mut self, pct: u8) -> Self {
        self.eviction_dirty_trigger = pct;
        self
    }
    /// Number of background eviction workers (0 leaves all eviction to
    /// application threads).
    pub fn eviction_threads(mut self, n: usize) -> Self {
        self.eviction_threads = n;
        self
    }
    /// Periodic checkpoint interval; `None` checkpoints only on demand and
    /// at close.
    pub fn checkpoint_interval(mut self, every: Option<Duration>) -> Self {
        self.checkpoint_interval = every;
        self
    }
    /// Log bytes written since the last checkpoint at which a checkpoint
    /// starts without waiting for the interval (default 1 GiB; `None`:
    /// only the interval). It bounds the log on disk and the replay when
    /// the database opens after a crash. The segment files a checkpoint
    /// lets go are kept for reuse, as many as twice what the log went
    /// through between two of the last 8 checkpoints (idle ones included)
    /// and at most twice this size (or twice the default with `None`), so
    /// a steady write load creates no new log files, and a burst's spares
    /// are removed 8 checkpoints after it ends.
    pub fn checkpoint_log_size(mut self, bytes: Option<u64>) -> Self {
        self.checkpoint_log_size = bytes;
        self
    }
    /// CPU priority (a nice value, 0 to 19; default 19, the lowest) of the
    /// thread that pushes a checkpoint's writes to the device and waits
    /// for them, the step between writing its pages and writing its meta
    /// page. That step is the kernel's work on the data file (write-back
    /// and `fdatasync`) and holds no lock that readers or writers take, so
    /// running it behind them delays no one but the checkpoint; at normal
    /// priority it takes a share of their cores (on 2 cores, a writer's
    /// 99th-percentile latency during a checkpoint was 4.5 times its
    /// latency without one, against 2.2 times with this default; the
    /// checkpoint took a third longer: BENCHMARKS.md, "Checkpoint flush at
    /// low priority"). `None` runs it on the checkpointing thread itself.
    /// Linux only; elsewhere the thread runs at its normal priority.
    pub fn checkpoint_flush_nice(mut self, nice: Option<i32>) -> Self {
        self.checkpoint_flush_nice = nice;
        self
    }
    /// How long the data file may go, between checkpoints, without its
    /// cached writes being pushed to the device and synced (default 20 s;
    /// `None`: only checkpoints do it). Evictions write pages to the data
    /// file through the operating system's cache, and Linux writes a file
    /// back by itself once its oldest dirty data is `vm.dirty_expire_centisecs`
    /// old (30 s by default); for a file written without pause that is
    /// the whole file at once, then again every few seconds. On 2 cores,
    /// a gigabyte queued to the disk in one go held the page-cache locks
    /// that evictions' writes need: inserts stalled for 60-145 ms
    /// (BENCHMARKS.md, cache-pressure, "The data file written back before
    /// the kernel does it"). This write-back runs the way a checkpoint's
    /// flush does: 4 MiB steps, then `fdatasync`, on a thread at
    /// `checkpoint_flush_nice`. It makes nothing durable by itself (the
    /// next checkpoint does), and is skipped when nothing was written
    /// since the last one. A failure stops writes, as a checkpoint's
    /// does: the error of a failed `fdatasync` is reported once, and a
    /// later checkpoint's sync could then succeed over lost pages.
    pub fn write_back_interval(mut self, every: Option<Duration>) -> Self {
        self.write_back_interval = every;
        self
    }
    /// Whether the data file's pages stay in the operating system's page
    /// cache after tidemark reads or writes them (default
    /// [`OsCache::Auto`]). The buffer pool is the cache `cache_size`
    /// bounds; below it the kernel caches the file too, which makes a page
    /// read again after its eviction a memory copy. Under a memory limit
    /// (a container's cgroup) that second cache is charged to the process,
    /// and once the file outgrows the room the limit leaves, each new page
    /// in it waits for reclaim, up to 100 ms when the pages to reclaim are
    /// still being written back. `Auto` finds the process's memory limit
    /// at open and drops the pages behind each read and write (Linux
    /// 6.14's `RWF_DONTCACHE`) once the data file is larger than half of
    /// what the limit leaves beside `cache_size`; it keeps them otherwise.
    /// `Stats::os_cache_drop_behind` says which is in force. BENCHMARKS.md,
    /// versus cache-pressure, "The data file's pages dropped behind each
    /// read and write", has the figures.
    pub fn os_cache(mut self, policy: OsCache) -> Self {
        self.os_cache = policy;
        self
    }
    /// Durability of commits that do not choose their own.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// Bytes per log segment file, for a new database (a multiple of
    /// 4 KiB); an existing database keeps the size it was created with.
    pub fn log_segment_size(mut self, bytes: u64) -> Self {
        self.log_segment_size = bytes;
        self
    }
    /// Bytes of every page and block of a new database: 4096, 8192, 16384
    /// (the default, [`crate::DEFAULT_PAGE_SIZE`]) or 32768. An existing
    /// database keeps the size it was created with
    /// ([`Database::page_size`] says which).
    ///
    /// Smaller pages make every cache miss and every page write move fewer
    /// bytes, so workloads of small records over a tree larger than the
    /// cache run faster (BENCHMARKS.md, "Page sizes"), at the price of
    /// shorter keys: a key may take a quarter of a page, at most 4 KiB
    /// ([`crate::max_key_size`]: 1 KiB at 4 KiB pages, 2 KiB at 8 KiB).
    /// Values may be up to [`MAX_VALUE_SIZE`] at every page size.
    pub fn page_size(mut self, bytes: usize) -> Self {
        self.page_size = bytes;
        self
    }
    /// Percent of `cache_size` (1 to 50) that old versions kept for live
    /// snapshots may use; pages get the rest. Past it, the oldest snapshots
    /// are invalidated ([`Error::SnapshotTooOld`]) rather than writers
    /// waiting. The budget sets how long a snapshot or an iterator can
    /// live while writers run: every write made meanwhile keeps a version
    /// for it. A scan that takes longer than the writers need to fill the
    /// budget is refused again on every retry. For example, two threads
    /// committing about 800,000 small records a second filled 10 % of a
    /// 32 MB cache within tens of milliseconds. Raise the budget for long
    /// scans under heavy writes.
    pub fn version_budget(mut self, pct: u8) -> Self {
        self.version_budget = pct;
        self
    }
    /// Replaces the file layer (fault injection in tests).
    pub fn file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// Bytes of `cache_size` kept for snapshot versions.
    fn version_bytes(&self) -> u64 {
        self.cache_size as u64 * u64::from(self.version_budget) / 100
    }

    /// Checks the options that do not depend on the page size.
    fn check_options(&self) -> Result<()> {
        if !page::valid_page_size(self.page_size) {
            return Err(Error::InvalidOption(format!(
                "page_size must be a power of two from {} to {} bytes, not {}",
                page::MIN_PAGE_SIZE,
                page::MAX_PAGE_SIZE,
                self.page_size
            )));
        }
        if !(1..=50).contains(&self.version_budget) {
            return Err(Error::InvalidOption(format!(
                "version_budget must be 1 to 50 percent, not {}",
                self.version_budget
            )));
        }
        if let Some(n) = self.checkpoint_flush_nice.filter(|n| !(0..=19).contains(n)) {
            return Err(Error::InvalidOption(format!(
                "checkpoint_flush_nice must be 0 to 19, not {n}"
            )));
        }
        if self
            .checkpoint_log_size
            .is_some_and(|b| b < self.log_segment_size)
        {
            return Err(Error::InvalidOption(format!(
                "checkpoint_log_size must be at least one log segment ({} bytes)",
                self.log_segment_size
            )));
        }
        let (t, tr, d, dtr) = (
            self.eviction_target,
            self.eviction_trigger,
            self.eviction_dirty_target,
            self.eviction_dirty_trigger,
        );
        if !(t > 0 && t < tr && tr <= 100) {
            return Err(Error::InvalidOption(format!(
                "need 0 < eviction_target ({t}) < eviction_trigger ({tr}) <= 100"
            )));
        }
        if !(d > 0 && d < dtr && dtr <= 100 && dtr <= tr) {
            return Err(Error::InvalidOption(format!("need 0 < eviction_dirty_target ({d}) < eviction_dirty_trigger ({dtr}) <= eviction_trigger")));
        }
        Ok(())
    }

    /// The cache's configuration for a database of pages of `page_size`
    /// bytes.
    fn pool_config(&self, page_size: usize) -> Result<PoolConfig> {
        self.check_options()?;
        let frames = (self.cache_size as u64 - self.version_bytes()) as usize / page_size;
        if frames < MIN_FRAMES {
            return Err(Error::InvalidOption(format!(
                "cache_size must leave at least {} bytes for pages after the {} % version budget",
                MIN_FRAMES * page_size,
                self.version_budget
            )));
        }
        // Frame indices are `u32`, `u32::MAX` meaning none (`NO_FRAME`).
        if frames >= MAX_FRAMES {
            return Err(Error::InvalidOption(format!(
                "cache_size must leave under {} bytes for pages after the {} % version budget",
                (MAX_FRAMES as u64) * page_size as u64,
                self.version_budget
            )));
        }
        let pct = |p: u8| frames * usize::from(p) / 100;
        Ok(PoolConfig {
            page_size,
            frames,
            target: pct(self.eviction_target),
            trigger: pct(self.eviction_trigger),
            dirty_target: pct(self.eviction_dirty_target).max(1),
            dirty_trigger: pct(self.eviction_dirty_trigger).max(2),
        })
    }

    /// Opens the database in directory `path`, creating it if needed.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Database> {
        // The options that do not depend on the page size fail before the
        // directory is touched; the cache's size is checked once the
        // database's page size is known.
        self.check_options()?;
        self.fs.create_dir_all(path.as_ref())?;
        let lock = self.fs.lock_dir(path.as_ref()).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                Error::Locked(path.as_ref().display().to_string())
            } else {
                Error::Io(e)
            }
        })?;
        let (mut engine, recovered) = Engine::open(
            path.as_ref(),
            self.fs.clone(),
            self.page_size,
            &|ps| self.pool_config(ps),
            self.log_segment_size,
            self.version_bytes(),
        )?;
        engine.ckpt.flush_nice = self.checkpoint_flush_nice;
        let limit = match self.os_cache {
            OsCache::Auto => crate::os_cache::memory_limit(),
            _ => None,
        };
        engine
            .pager
            .set_os_cache(self.os_cache, limit, self.cache_size as u64);
        let engine = Arc::new(engine);
        let shared = Arc::new(Shared {
            stop: Mutex::new(false),
            cv: Condvar::new(),
        });
        let mut threads = Vec::new();
        for i in 0..self.eviction_threads {
            let e = engine.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("tidemark-evict-{i}"))
                    .spawn(move || cache::run_eviction_worker(&e.pool, &e.pager))?,
            );
        }
        {
            let e = engine.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("tidemark-rings".into())
                    .spawn(move || e.run_ring_writer())?,
            );
        }
        {
            let e = engine.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("tidemark-file-prepare".into())
                    .spawn(move || e.run_file_preparer())?,
            );
        }
        {
            let e = engine.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("tidemark-versions".into())
                    .spawn(move || e.versions.run_reclaimer())?,
            );
        }
        if let Some(cfg) = self.statistics_log.clone() {
            if cfg.interval.is_zero() {
                return Err(Error::InvalidOption(
                    "statistics_log interval must be above zero".into(),
                ));
            }
            let (e, s) = (engine.clone(), shared.clone());
            let mut w = statlog::Writer::new(self.fs.clone(), path.as_ref(), cfg.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("tidemark-stats".into())
                    .spawn(move || {
                        let mut write = || {
                            let l = statlog::line(
                                &crate::stats::collect(&e),
                                std::time::SystemTime::now(),
                                cfg.interval,
                            );
                            if w.append(&l).is_err() {
                                bump(&e.ops.statlog_errors);
                            }
                        };
                        write();
                        let mut stop = s.stop.lock();
                        while !*stop {
                            if s.cv.wait_for(&mut stop, cfg.interval).timed_out() && !*stop {
                                drop(stop);
                                write();
                                stop = s.stop.lock();
                            }
                        }
                        drop(stop);
                        // The last line, at close.
                        write();
                    })?,
            );
        }
        let socket = if self.control_socket {
            let (sock, t) = statlog::Socket::start(path.as_ref(), engine.clone())?;
            threads.push(t);
            Some(sock)
        } else {
            None
        };
        engine.wal.set_checkpoint_log_size(self.checkpoint_log_size);
        if self.checkpoint_interval.is_some()
            || self.checkpoint_log_size.is_some()
            || self.write_back_interval.is_some()
        {
            let (e, every, write_back) = (
                engine.clone(),
                self.checkpoint_interval,
                self.write_back_interval,
            );
            threads.push(
                std::thread::Builder::new()
                    .name("tidemark-checkpoint".into())
                    .spawn(move || e.run_checkpointer(every, write_back))?,
            );
        }
        Ok(Database {
            inner: Arc::new(Inner {
                engine,
                shared,
                threads: Mutex::new(threads),
                path: path.as_ref().to_path_buf(),
                closed: AtomicBool::new(false),
                lock: Mutex::new(lock),
                socket,
                durability: self.durability,
                replayed: recovered.records,
            }),
        })
    }
}

struct Shared {
    stop: Mutex<bool>,
    cv: Condvar,
}

struct Inner {
    engine: Arc<Engine>,
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    path: PathBuf,
    closed: AtomicBool,
    /// The directory lock, released at close.
    lock: Mutex<Option<crate::io::DirLock>>,
    /// The control socket, if served.
    socket: Option<statlog::Socket>,
    durability: Durability,
    /// Log records replayed when the database was opened.
    replayed: u64,
}

impl Inner {
    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        *self.shared.stop.lock() = true;
        self.shared.cv.notify_all();
        self.engine.pool.shutdown.store(true, Ordering::Release);
        self.engine.pool.wake_workers();
        self.engine.versions.stop_reclaimer();
        self.engine.stop_ring_writer();
        self.engine.stop_checkpointer();
        self.engine.stop_file_preparer();
        if let Some(s) = &self.socket {
            s.stop();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let done = if self.engine.pager.check_writable().is_ok() {
            checkpoint::checkpoint(&self.engine).map(|_| ())
        } else {
            Ok(())
        };
        // Clones still held can no longer write, so the directory can be
        // opened again (here or by another process) once the lock goes.
        self.engine.pager.close();
        drop(self.lock.lock().take());
        done
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Errors at drop cannot be returned; `Database::close` reports them.
        let _ = self.shutdown();
    }
}

/// An open database. Cheap to clone; all clones share one engine. The last
/// clone to drop checkpoints and closes it (use [`Database::close`] to see
/// errors).
#[derive(Clone)]
pub struct Database {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// One operation of a [`WriteBatch`].
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Put {
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Delete {
        table: String,
        key: Vec<u8>,
    },
    /// A document insert (see [`WriteBatch::insert_one`]).
    Insert {
        collection: String,
        key: Vec<u8>,
        doc: Vec<u8>,
    },
}

/// Puts and deletes across tables, applied together by [`Database::write`].
///
/// The batch is checked whole before anything is applied (sizes, tables);
/// a checkpoint contains all of it or none of it.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<Op>,
    pub(crate) durability: Option<Durability>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a put of `key` = `value` into `table`.
    pub fn put(
        &mut self,
        table: &str,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.ops.push(Op::Put {
            table: table.to_string(),
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
        });
        self
    }
    /// Adds a delete of `key` from `table`.
    pub fn delete(&mut self, table: &str, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops.push(Op::Delete {
            table: table.to_string(),
            key: key.as_ref().to_vec(),
        });
        self
    }
    /// Adds the insert of `doc` into collection `collection` (capped or
    /// not), giving it an ObjectId `_id` if it has none; returns the `_id`.
    /// The insert commits with the rest of the batch or not at all, so an
    /// oplog entry can commit with the change it describes.
    pub fn insert_one(&mut self, collection: &str, doc: &bson::Document) -> Result<bson::Bson> {
        let (id, key, doc) = crate::docs::prepare(doc)?;
        self.ops.push(Op::Insert {
            collection: collection.to_string(),
            key,
            doc,
        });
        Ok(id)
    }
    /// Chooses this batch's durability instead of the database default.
    pub fn set_durability(&mut self, d: Durability) -> &mut Self {
        self.durability = Some(d);
        self
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// Whether the batch has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// [`Error::KeySize`] unless `key` is one some database takes (at most
/// [`crate::MAX_KEY_SIZE`]); [`Engine::check_key`] applies the limit of
/// one database's page size, and every write passes it before it is
/// logged.
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() || key.len() > crate::MAX_KEY_SIZE {
        return Err(Error::KeySize {
            len: key.len(),
            max: crate::MAX_KEY_SIZE,
        });
    }
    Ok(())
}
pub(crate) fn check_value(v: &[u8]) -> Result<()> {
    if v.len() > MAX_VALUE_SIZE {
        return Err(Error::ValueTooLarge {
            len: v.len(),
            max: MAX_VALUE_SIZE,
        });
    }
    Ok(())
}
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_TABLE_NAME {
        return Err(Error::InvalidTableName(name.to_string()));
    }
    Ok(())
}

/// The root of each table a write batch names, looked up once per table.
/// A batch names few tables, and a short list searched in order costs less
/// than a map and copies no name; past [`BatchRoots::FEW`] tables a map
/// takes over, so a batch over many tables is not quadratic.
#[derive(Default)]
struct BatchRoots<'a> {
    few: Vec<(&'a str, u64)>,
    many: HashMap<&'a str, u64>,
}

impl<'a> BatchRoots<'a> {
    const FEW: usize = 16;

    fn get(&self, table: &str) -> Option<u64> {
        if self.many.is_empty() {
            self.few.iter().find(|(t, _)| *t == table).map(|&(_, r)| r)
        } else {
            self.many.get(table).copied()
        }
    }

    fn insert(&mut self, table: &'a str, root: u64) {
        if self.many.is_empty() && self.few.len() < Self::FEW {
            self.few.push((table, root));
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(table, root);
        }
    }
}

impl Database {
    /// Opens or creates the database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Database> {
        Builder::new().open(path)
    }

    /// A builder for options.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Bytes of every page of this database, chosen when it was created
    /// ([`Builder::page_size`]).
    pub fn page_size(&self) -> usize {
        self.engine().pager.page_size
    }

    /// Bytes of the longest key this database takes: a quarter of its
    /// page, at most [`crate::MAX_KEY_SIZE`] ([`crate::max_key_size`]).
    pub fn max_key_size(&self) -> usize {
        self.engine().max_key_size()
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    fn lookup_root(&self, name: &str) -> Result<Option<u64>> {
        self.engine().lookup_root(name.as_bytes())
    }

    /// Durability commits get unless they choose their own.
    pub fn default_durability(&self) -> Durability {
        self.inner.durability
    }

    /// Log records replayed when this database was opened (commits made
    /// after the last checkpoint before it was closed or crashed).
    pub fn replayed_records(&self) -> u64 {
        self.inner.replayed
    }

    /// The commit protocol every write follows (see `wal`, `stripes` and
    /// `versions`): enter the gate, lock the key stripes (`None`: all of
    /// them), run `check` (which may refuse, changing nothing), take a
    /// timestamp if snapshots are live, log `ops`, `apply` them to the tree
    /// (keeping before-images under that timestamp), leave, and wait for
    /// `durability`.
    pub(crate) fn commit<V, T>(
        &self,
        ops: &[LogOp<'_>],
        stripes: Option<Vec<usize>>,
        durability: Durability,
        check: impl FnOnce(&Engine) -> Result<V>,
        apply: impl FnOnce(&Engine, V, Option<Ts>) -> Result<T>,
    ) -> Result<T> {
        self.commit_planned(stripes, check, |e, _| e.log(ops, durability), apply)
    }

    /// [`Database::commit`] for writes whose log record depends on what
    /// `check` found (documents, capped inserts): `log` appends it.
    pub(crate) fn commit_planned<V, T>(
        &self,
        stripes: Option<Vec<usize>>,
        check: impl FnOnce(&Engine) -> Result<V>,
        log: impl FnOnce(&Engine, &V) -> Result<Ticket>,
        apply: impl FnOnce(&Engine, V, Option<Ts>) -> Result<T>,
    ) -> Result<T> {
        let e = self.engine();
        e.pager.check_writable()?;
        e.pool.help_if_over_trigger(&e.pager);
        let (ticket, out) = {
            let _in = e.gate.enter();
            let _held = match stripes {
                Some(s) => e.stripes.lock(s),
                None => e.stripes.lock_all(),
            };
            let v = check(e)?;
            let ts = e.versions.begin();
            // Ends the timestamp however this block is left.
            let _ended = EndTs(e, ts);
            let ticket = log(e, &v).inspect_err(|err| {
                // A refused admission (a full disk, a key longer than this
                // database's pages take: `Engine::log` checks both before
                // it logs anything) changed nothing; any other failure may
                // have left part of a group in the log.
                if !matches!(err, Error::DiskFull(_) | Error::KeySize { .. }) {
                    e.pager.stop_writes(&format!("log append failed: {err}"));
                }
            })?;
            // The room promised at admission is counted in the dirty pages
            // once the record is applied.
            let _room = e.pager.adopt(ticket.promised);
            let out = apply(e, v, ts).inspect_err(|err| {
                // The log holds a record the tree may hold only part of;
                // replay on the next open applies it whole.
                e.pager
                    .stop_writes(&format!("applying a logged batch failed: {err}"));
                e.wal.group.fail("applying a logged batch failed");
            })?;
            (ticket, out)
        };
        e.versions.after_commit();
        if e.wal.wants_checkpoint(ticket.end()) {
            e.request_checkpoint();
        }
        e.wal.wait(ticket).inspect_err(|err| {
            e.pager.stop_writes(&format!("{err}"));
        })?;
        Ok(out)
    }

    /// Creates table `name`; [`Error::TableExists`] if it exists.
    pub fn create_table(&self, name: &str) -> Result<Table> {
        check_name(name)?;
        let _c = self.engine().catalog_lock.lock();
        let op = [LogOp::CreateTable {
            table: name.as_bytes(),
        }];
        let root = self.commit(
            &op,
            Some(Vec::new()),
            self.inner.durability,
            |e| match e.lookup_root(name.as_bytes())? {
                Some(_) => Err(Error::TableExists(name.to_string())),
                None => Ok(()),
            },
            |e, (), _| e.create_root(name.as_bytes()),
        )?;
        Ok(Table::handle(self, name, root))
    }

    /// Opens table `name`; [`Error::TableNotFound`] if it does not exist.
    pub fn open_table(&self, name: &str) -> Result<Table> {
        check_name(name)?;
        match self.lookup_root(name)? {
            Some(root) => Ok(Table::handle(self, name, root)),
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Opens table `name`, creating it if it does not exist.
    pub fn table(&self, name: &str) -> Result<Table> {
        match self.open_table(name) {
            Err(Error::TableNotFound(_)) => match self.create_table(name) {
                Err(Error::TableExists(_)) => self.open_table(name),
                r => r,
            },
            r => r,
        }
    }

    /// Drops table `name` and frees its pages. Handles to it return
    /// [`Error::TableDropped`] afterwards.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        check_name(name)?;
        let _c = self.engine().catalog_lock.lock();
        let op = [LogOp::DropTable {
            table: name.as_bytes(),
        }];
        self.commit(
            &op,
            None,
            self.inner.durability,
            |e| {
                e.lookup_root(name.as_bytes())?
                    .ok_or_else(|| Error::TableNotFound(name.to_string()))
            },
            |e, root, ts| {
                e.versions.table_dropped(name.as_bytes(), ts);
                e.drop_root(name.as_bytes(), root)
            },
        )
    }

    /// Names of all tables, in order.
    pub fn list_tables(&self) -> Result<Vec<String>> {
        let t = Table::handle(self, "", CATALOG_ROOT);
        t.iter()
            .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
            .collect()
    }

    /// Applies every operation of `batch`, or none if any is invalid, as
    /// one log record; returns once it has the batch's durability (or the
    /// database default).
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        let r = self.write_batch(batch);
        if r.is_ok() {
            let o = &self.engine().ops;
            bump(&o.batches);
            for op in &batch.ops {
                match op {
                    Op::Put { table, .. } => {
                        bump(&o.puts);
                        o.table_write(table);
                    }
                    Op::Delete { table, .. } => {
                        bump(&o.deletes);
                        o.table_write(table);
                    }
                    Op::Insert { collection, .. } => {
                        bump(&o.doc_inserts);
                        o.collection_write(collection);
                    }
                }
            }
        }
        r
    }

    fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        if batch.ops.iter().any(|op| matches!(op, Op::Insert { .. })) {
            return self.write_with_documents(batch);
        }
        let e = self.engine();
        let mut ops = Vec::with_capacity(batch.ops.len());
        let mut stripes = Vec::with_capacity(batch.ops.len());
        for op in &batch.ops {
            let (table, key) = match op {
                Op::Put { table, key, value } => {
                    check_value(value)?;
                    ops.push(LogOp::Put {
                        table: table.as_bytes(),
                        key,
                        value,
                    });
                    (table, key)
                }
                Op::Delete { table, key } => {
                    ops.push(LogOp::Delete {
                        table: table.as_bytes(),
                        key,
                    });
                    (table, key)
                }
                Op::Insert { .. } => unreachable!("batches with inserts go to the document path"),
            };
            check_name(table).map_err(|_| Error::TableNotFound(table.clone()))?;
            check_key(key)?;
            stripes.push(e.stripes.of(table.as_bytes(), key));
        }
        self.commit(
            &ops,
            Some(stripes),
            batch.durability.unwrap_or(self.inner.durability),
            |e| {
                let mut roots = BatchRoots::default();
                for op in &batch.ops {
                    let table = match op {
                        Op::Put { table, .. } | Op::Delete { table, .. } => table,
                        Op::Insert { collection, .. } => collection,
                    };
                    if roots.get(table).is_none() {
                        let root = e
                            .lookup_root(table.as_bytes())?
                            .ok_or_else(|| Error::TableNotFound(table.clone()))?;
                        roots.insert(table, root);
                    }
                }
                Ok(roots)
            },
            |e, roots, ts| {
                let root_of = |table: &str| {
                    roots
                        .get(table)
                        .ok_or_else(|| Error::TableNotFound(table.to_string()))
                };
                for op in &batch.ops {
                    match op {
                        Op::Put { table, key, value } => e.apply_put(
                            root_of(table)?,
                            key,
                            value,
                            ts.map(|t| (t, table.as_bytes())),
                        )?,
                        Op::Delete { table, key } => {
                            e.apply_delete(
                                root_of(table)?,
                                key,
                                ts.map(|t| (t, table.as_bytes())),
                            )?;
                        }
                        Op::Insert { .. } => {}
                    }
                }
                Ok(())
            },
        )
    }

    /// A read-only snapshot of every table as of now, stable for its whole
    /// life while writers go on (see [`ReadTxn`]).
    pub fn begin_read(&self) -> ReadTxn {
        ReadTxn::new(self.clone())
    }

    /// A write transaction: reads from a snapshot taken now plus its own
    /// writes, commits atomically or not at all, and rolls back if
    /// dropped (see [`WriteTxn`]).
    pub fn begin_write(&self) -> WriteTxn {
        WriteTxn::new(self.clone())
    }

    /// Writes a consistent copy of the database into directory `dest`
    /// (created; it must be empty) while readers and writers go on; only
    /// checkpoints wait for it. The copy opens like this database after a
    /// crash at the end of the backup: it holds every commit acknowledged
    /// before the call, and possibly some acknowledged during it.
    pub fn backup(&self, dest: impl AsRef<Path>) -> Result<crate::BackupInfo> {
        crate::backup::backup(self.engine(), dest.as_ref())
    }

    /// Returns the data file's free space to the file system: tree pages
    /// and the page map are moved from the end of the file into its lowest
    /// free blocks by checkpoints (four in all; commits wait while pages are
    /// marked to move), then the file is cut after its last block in use.
    /// Overflow pages (values over a page) are not moved.
    ///
    /// A crash at any moment of it leaves the last completed checkpoint and
    /// every acknowledged commit, as at any other time. An I/O error in any
    /// of its checkpoints, or in the cut or the sync after it, stops writes
    /// ([`Error::WritesStopped`] from then on, reads go on), as a failed
    /// checkpoint does.
    pub fn compact(&self) -> Result<crate::CompactInfo> {
        crate::backup::compact(self.engine())
    }

    /// Makes everything written so far durable; see [`CheckpointInfo`].
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        checkpoint::checkpoint(self.engine())
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> Stats {
        crate::stats::collect(self.engine())
    }

    /// Walks every table and checks checksums, key order and tree shape.
    /// Commits wait while the tables' trees are walked (reads go on), so
    /// that no page changes shape under the walk.
    ///
    /// Damage is reported in [`VerifyReport::problems`], not as an error;
    /// the `Result` is for failures to run at all.
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut tables = vec![(String::from("(catalog)"), CATALOG_ROOT)];
        let mut problems = Vec::new();
        match self.iter_catalog() {
            Ok(entries) => {
                for (name, v) in entries {
                    match decode_root(name.as_bytes(), &v) {
                        Ok(root) => tables.push((name, root)),
                        Err(e) => problems.push(format!("catalog: {e}")),
                    }
                }
            }
            Err(e) => problems.push(format!("catalog unreadable, tables not checked: {e}")),
        }
        let mut report = verify::verify(self.engine(), &tables);
        report.problems.extend(problems);
        // Collections: every document and index entry, every ring record.
        match self.list_collections() {
            Ok(names) => {
                for name in names {
                    match self.get_collection(&name).and_then(|c| c.validate()) {
                        Ok(v) => report.problems.extend(
                            v.problems
                                .into_iter()
                                .map(|p| format!("collection {name:?}: {p}")),
                        ),
                        Err(e) => report
                            .problems
                            .push(format!("collection {name:?} could not be checked: {e}")),
                    }
                }
            }
            Err(e) => report
                .problems
                .push(format!("collections could not be listed: {e}")),
        }
        Ok(report)
    }

    fn iter_catalog(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let t = Table::handle(self, "", CATALOG_ROOT);
        t.iter()
            .map(|r| r.map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v)))
            .collect()
    }

    /// Stops background work, checkpoints and closes. Other clones of this
    /// handle become unusable for writes.
    pub fn close(self) -> Result<()> {
        self.inner.shutdown()
    }
}

/// Ends a commit's timestamp when dropped (see `versions`).
struct EndTs<'a>(&'a Engine, Option<Ts>);

impl Drop for EndTs<'_> {
    fn drop(&mut self) {
        if let Some(ts) = self.1 {
            self.0.versions.end(ts);
        }
    }
}

/// A named table of ordered byte-string keys and values. Cheap to clone.
#[derive(Clone)]
pub struct Table {
    db: Database,
    name: String,
    root: u64,
    pub(crate) ops: Arc<crate::stats::NamedOps>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn root(&self) -> u64 {
        self.root
    }

    /// A handle on table `name` rooted at `root`.
    pub(crate) fn handle(db: &Database, name: &str, root: u64) -> Table {
        Table {
            ops: db.engine().ops.table(name),
            db: db.clone(),
            name: name.into(),
            root,
        }
    }

    /// Fails if the table was dropped since this handle was opened.
    fn check_live(&self) -> Result<()> {
        if self.root == CATALOG_ROOT {
            return Ok(());
        }
        match self.db.lookup_root(&self.name)? {
            Some(r) if r == self.root => Ok(()),
            _ => Err(Error::TableDropped(self.name.clone())),
        }
    }

    pub(crate) fn map_dropped<T>(&self, r: Result<T>) -> Result<T> {
        match r {
            Err(Error::Corruption { .. }) if self.check_live().is_err() => {
                Err(Error::TableDropped(self.name.clone()))
            }
            r => r,
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        self.db.engine().check_key(key)?;
        let e = self.db.engine();
        if self.root == CATALOG_ROOT {
            return e.tree(self.root).get(key);
        }
        bump(&e.ops.gets);
        bump(&self.ops.reads);
        let _shared = e.stripes.read(e.stripes.of(self.name.as_bytes(), key));
        self.map_dropped(e.tree(self.root).get(key))
    }

    /// Sets `key` to `value`, with the database's default durability.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, self.db.inner.durability)
    }

    /// Sets `key` to `value`; returns once the write has `durability`.
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        durability: Durability,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.db.engine().check_key(key)?;
        check_value(value)?;
        let e = self.db.engine();
        bump(&e.ops.puts);
        bump(&self.ops.writes);
        let op = [LogOp::Put {
            table: self.name.as_bytes(),
            key,
            value,
        }];
        let stripe = e.stripes.of(self.name.as_bytes(), key);
        self.db.commit(
            &op,
            Some(vec![stripe]),
            durability,
            |_| self.check_live(),
            |e, (), ts| {
                let track = ts.map(|t| (t, self.name.as_bytes()));
                self.map_dropped(e.apply_put(self.root, key, value, track))
            },
        )
    }

    /// Removes `key`; returns whether it was present.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.delete_with(key, self.db.inner.durability)
    }

    /// Removes `key` with `durability`; returns whether it was present.
    pub fn delete_with(&self, key: impl AsRef<[u8]>, durability: Durability) -> Result<bool> {
        let key = key.as_ref();
        self.db.engine().check_key(key)?;
        let e = self.db.engine();
        bump(&e.ops.deletes);
        bump(&self.ops.writes);
        let op = [LogOp::Delete {
            table: self.name.as_bytes(),
            key,
        }];
        let stripe = e.stripes.of(self.name.as_bytes(), key);
        self.db.commit(
            &op,
            Some(vec![stripe]),
            durability,
            |_| self.check_live(),
            |e, (), ts| {
                let track = ts.map(|t| (t, self.name.as_bytes()));
                self.map_dropped(e.apply_delete(self.root, key, track))
            },
        )
    }

    /// Entries with keys in `range`, in key order; iterate from both ends.
    ///
    /// ```no_run
    /// # let db = tidemark::Database::open("x")?;
    /// let t = db.table("t")?;
    /// for kv in t.range::<&[u8], _>(b"a".as_slice()..b"m".as_slice()) { let (_k, _v) = kv?; }
    /// for kv in t.range::<&[u8], _>(..).rev() { let (_k, _v) = kv?; }
    /// # Ok::<(), tidemark::Error>(())
    /// ```
    ///
    /// The iterator reads one snapshot, taken when it is created: it sees
    /// every key as of that moment, whatever commits meanwhile.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Range {
        // The catalog is not versioned; table scans are.
        let snap = (self.root != CATALOG_ROOT).then(|| Arc::new(Snap::new(self.db.clone())));
        self.range_in(range, snap)
    }

    /// A range read through `snap` (`None`: the live tree).
    pub(crate) fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
        snap: Option<Arc<Snap>>,
    ) -> Range {
        if self.root != CATALOG_ROOT {
            bump(&self.db.engine().ops.scans);
            bump(&self.ops.scans);
        }
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        Range {
            snap,
            table: self.clone(),
            lo: own(range.start_bound()),
            hi: own(range.end_bound()),
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_done: false,
            back_done: false,
            last_front: None,
            last_back: None,
            hint: ScanHint::default(),
            want_front: None,
            want_back: None,
        }
    }

    /// All entries in key order.
    pub fn iter(&self) -> Range {
        self.range::<&[u8], _>(..)
    }
}

/// A double-ended iterator over a key range. It reads one leaf at a time
/// and holds no latch between calls, so it never blocks writers; keys that
/// changed since its snapshot are read from the versions kept for it.
pub struct Range {
    snap: Option<Arc<Snap>>,
    table: Table,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    front: VecDeque<(Vec<u8>, Vec<u8>)>,
    back: VecDeque<(Vec<u8>, Vec<u8>)>,
    front_done: bool,
    back_done: bool,
    last_front: Option<Vec<u8>>,
    last_back: Option<Vec<u8>>,
    /// The front's place in the tree between leaves.
    hint: ScanHint,
    /// Entries the caller still expects from the front ([`Range::read_ahead`]);
    /// `None`: unknown, or already exceeded.
    want_front: Option<usize>,
    /// The same from the back.
    want_back: Option<usize>,
}

impl Range {
    /// Tells the iterator that the caller will take about `n` entries from
    /// each end it reads, as with `.take(n)`: it then copies at most that
    /// many out of the leaves, where it otherwise copies the rest of each
    /// leaf it reaches. A hint only: the entries returned are the same, and
    /// reading past `n` goes on as without it (after one more descent from
    /// the root).
    ///
    /// ```no_run
    /// # let db = tidemark::Database::open("x")?;
    /// let t = db.table("t")?;
    /// let first_ten: Vec<_> = t.range(b"k".to_vec()..).read_ahead(10).take(10).collect();
    /// # Ok::<(), tidemark::Error>(())
    /// ```
    #[must_use]
    pub fn read_ahead(mut self, n: usize) -> Self {
        let want = (n > 0).then_some(n);
        self.want_front = want;
        self.want_back = want;
        self
    }

    /// Counts one entry taken against what the caller expected.
    fn took(want: &mut Option<usize>) {
        if let Some(w) = want {
            *w -= 1;
            if *w == 0 {
                *want = None;
            }
        }
    }

    fn crossed(&self, key: &[u8], from_front: bool) -> bool {
        if from_front {
            self.last_back.as_deref().is_some_and(|b| key >= b)
        } else {
            self.last_front.as_deref().is_some_and(|f| key <= f)
        }
    }

    fn refill_front(&mut self) -> Result<()> {
        while self.front.is_empty() && !self.front_done {
            let from = self.lo.clone();
            let batch = self.table.db.engine().tree(self.table.root).fetch_forward(
                &self.lo,
                &self.hi,
                &mut self.hint,
                self.want_front.unwrap_or(usize::MAX),
            );
            let batch = self.table.map_dropped(batch)?;
            if let Some((k, _)) = batch.entries.last() {
                self.lo = Bound::Excluded(k.clone());
            }
            // Every key of the next leaf is at or above the fence; a cut
            // batch ends at its last key, and the next starts after it.
            let to = match (batch.fence, batch.entries.last()) {
                (_, Some((k, _))) if batch.cut => Bound::Included(k.clone()),
                (Some(f), _) => {
                    self.lo = Bound::Included(f.clone());
                    Bound::Excluded(f)
                }
                (None, _) => {
                    self.front_done = true;
                    self.hi.clone()
                }
            };
            let entries = match &self.snap {
                Some(snap) => snap.merge(&self.table.name, batch.entries, &from, &to, true)?,
                None => batch.entries,
            };
            self.front.extend(entries);
        }
        Ok(())
    }

    fn refill_back(&mut self) -> Result<()> {
        while self.back.is_empty() && !self.back_done {
            let to = self.hi.clone();
            let batch = self.table.db.engine().tree(self.table.root).fetch_backward(
                &self.lo,
                &self.hi,
                self.want_back.unwrap_or(usize::MAX),
            );
            let batch = self.table.map_dropped(batch)?;
            if let Some((k, _)) = batch.entries.last() {
                self.hi = Bound::Excluded(k.clone());
            }
            // Every key of this leaf is at or above the fence; a cut batch
            // ends at its last (lowest) key, and the next starts below it.
            let from = match (batch.fence, batch.entries.last()) {
                (_, Some((k, _))) if batch.cut => Bound::Included(k.clone()),
                (Some(f), _) => {
                    self.hi = Bound::Excluded(f.clone());
                    Bound::Included(f)
                }
                (None, _) => {
                    self.back_done = true;
                    self.lo.clone()
                }
            };
            let entries = match &self.snap {
                Some(snap) => snap.merge(&self.table.name, batch.entries, &from, &to, false)?,
                None => batch.entries,
            };
            self.back.extend(entries);
        }
        Ok(())
    }
}

impl Iterator for Range {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.refill_front() {
            self.front_done = true;
            self.front.clear();
            return Some(Err(e));
        }
        // The front has read everything up to what the back read: the
        // back's unreturned entries come next, lowest first.
        let (k, v) = self.front.pop_front().or_else(|| self.back.pop_back())?;
        if self.crossed(&k, true) {
            self.front.clear();
            self.front_done = true;
            return None;
        }
        Self::took(&mut self.want_front);
        // Reuses the buffer: no allocation per entry.
        let last = self.last_front.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(&k);
        Some(Ok((k, v)))
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.refill_back() {
            self.back_done = true;
            self.back.clear();
            return Some(Err(e));
        }
        // As in `next`: the front's unreturned entries, highest first.
        let (k, v) = self.back.pop_front().or_else(|| self.front.pop_back())?;
        if self.crossed(&k, false) {
            self.back.clear();
            self.back_done = true;
            return None;
        }
        Self::took(&mut self.want_back);
        // Reuses the buffer: no allocation per entry.
        let last = self.last_back.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(&k);
        Some(Ok((k, v)))
    }
}
