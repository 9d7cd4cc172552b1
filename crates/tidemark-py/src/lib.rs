//! Python bindings of tidemark: the extension module `tidemark._tidemark`.
//!
//! The `tidemark` Python package (`python/tidemark`) wraps this module in a
//! pymongo-shaped API. This layer moves bytes between Python and the engine:
//! keys and values as `bytes`, documents as raw BSON, which pymongo's `bson`
//! package encodes and decodes on the Python side (so ObjectId, Int64,
//! Decimal128 and datetime round-trip exactly as pymongo writes them).
//!
//! Every engine call runs with the GIL released (`Python::detach`), so
//! Python threads reach the engine concurrently and its group commit and
//! key stripes decide how they scale, not the interpreter lock. Errors are
//! raised as the classes of `tidemark.errors`, chosen by the engine's typed
//! error (see `class_of`).

use std::ops::Bound as Edge;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyType};
use tidemark::bson::{Bson, Document};
use tidemark::{Durability, Error};

/// The `tidemark.errors` class for an engine error.
fn class_of(e: &Error) -> &'static str {
    match e {
        e if e.is_disk_full() => "DiskFullError",
        Error::Io(_) => "TidemarkIOError",
        Error::Corruption { .. } => "CorruptionError",
        Error::NotADatabase(_) => "NotADatabaseError",
        Error::KeySize { .. } => "KeySizeError",
        Error::ValueTooLarge { .. } => "ValueTooLarge",
        Error::TableNotFound(_) => "TableNotFound",
        Error::TableExists(_) => "TableExists",
        Error::TableDropped(_) => "TableDropped",
        Error::InvalidTableName(_) => "InvalidName",
        Error::InvalidOption(_) => "ConfigurationError",
        Error::Full(_) => "DatabaseFull",
        Error::WritesStopped(_) => "WritesStopped",
        Error::Conflict(_) => "ConflictError",
        Error::SnapshotTooOld => "SnapshotTooOld",
        Error::Locked(_) => "DatabaseLocked",
        Error::Closed => "DatabaseClosed",
        Error::InvalidBson(_) => "InvalidDocument",
        Error::DocumentTooLarge { .. } => "DocumentTooLarge",
        Error::DuplicateKey { .. } => "DuplicateKeyError",
        Error::CollectionNotFound(_) => "CollectionNotFound",
        Error::CollectionExists(_) => "CollectionInvalid",
        Error::CappedRecordTooLarge { .. } => "CappedRecordTooLarge",
        Error::CappedOperation { .. } => "CappedOperationError",
        Error::NotCapped(_) => "NotCappedError",
        Error::CappedPositionLost { .. } => "CappedPositionLost",
        _ => "TidemarkError",
    }
}

/// `e` as a Python exception of its `tidemark.errors` class.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    raise(py, class_of(&e), e.to_string())
}

/// An exception of class `class` of `tidemark.errors`.
fn raise(py: Python<'_>, class: &str, msg: String) -> PyErr {
    let class = py
        .import("tidemark.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(c) => PyErr::from_type(c, msg),
        Err(err) => err,
    }
}

/// Runs an engine call with the GIL released.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> tidemark::Result<T> + Send) -> PyResult<T> {
    py.detach(f).map_err(|e| to_py(py, e))
}

/// Runs `f` on the snapshot or transaction held in `slot`, with the GIL
/// released; `InvalidOperation` with the message `gone` once it was
/// released, committed or rolled back.
fn with_open<G: Send, T: Send>(
    shared: &Shared,
    py: Python<'_>,
    slot: &Mutex<Option<G>>,
    gone: &str,
    f: impl FnOnce(&mut G) -> tidemark::Result<T> + Send,
) -> PyResult<T> {
    shared.check(py)?;
    py.detach(|| match &mut *slot.lock() {
        Some(t) => f(t).map_err(Some),
        None => Err(None),
    })
    .map_err(|e| match e {
        Some(e) => to_py(py, e),
        None => raise(py, "InvalidOperation", gone.into()),
    })
}

/// One open database, shared by every handle made from it: after
/// `close`, all of them refuse to work.
struct Shared {
    db: tidemark::Database,
    open: AtomicBool,
}

impl Shared {
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        if self.open.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(to_py(py, Error::Closed))
        }
    }

    fn durability(&self, py: Python<'_>, d: Option<&str>) -> PyResult<Durability> {
        match d {
            None => Ok(self.db.default_durability()),
            Some(s) => s.parse().map_err(|e| to_py(py, e)),
        }
    }
}

fn bytes<'py>(py: Python<'py>, v: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, v)
}

/// Decodes raw BSON given by the Python layer.
fn document(py: Python<'_>, raw: &[u8]) -> PyResult<Document> {
    tidemark::parse_document(raw).map_err(|e| to_py(py, e))
}

/// The value of `field` in a one-field document the Python layer encoded
/// to carry a single BSON value (an `_id` or a range bound).
fn value(py: Python<'_>, raw: &[u8]) -> PyResult<Bson> {
    let d = document(py, raw)?;
    d.get("v")
        .cloned()
        .ok_or_else(|| PyValueError::new_err("expected a document {'v': value}"))
}

fn encode(py: Python<'_>, d: &Document) -> PyResult<Py<PyBytes>> {
    let mut out = Vec::new();
    d.to_writer(&mut out)
        .map_err(|e| to_py(py, Error::InvalidBson(e.to_string())))?;
    Ok(PyBytes::new(py, &out).unbind())
}

type KeyRange = (Edge<Vec<u8>>, Edge<Vec<u8>>);

/// A half-open key range `[lo, hi)`; `None` is unbounded.
fn key_range(lo: Option<&[u8]>, hi: Option<&[u8]>) -> KeyRange {
    (
        lo.map_or(Edge::Unbounded, |k| Edge::Included(k.to_vec())),
        hi.map_or(Edge::Unbounded, |k| Edge::Excluded(k.to_vec())),
    )
}

/// Bounds of an `_id` range from encoded `{'v': value}` documents.
fn id_bound(py: Python<'_>, raw: Option<&[u8]>, inclusive: bool) -> PyResult<Edge<Bson>> {
    Ok(match raw {
        None => Edge::Unbounded,
        Some(r) if inclusive => Edge::Included(value(py, r)?),
        Some(r) => Edge::Excluded(value(py, r)?),
    })
}

/// `find_range` or `find_range_reverse` of a live or snapshot collection
/// (the two types have the same pair of methods, and no trait joins them).
macro_rules! by_id {
    ($c:expr, $lo:expr, $hi:expr, $reverse:expr) => {
        if $reverse {
            $c.find_range_reverse($lo, $hi)
        } else {
            $c.find_range($lo, $hi)
        }
    };
}

/// An open database (`tidemark._tidemark.Database`).
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Database {
    shared: Arc<Shared>,
}

impl Database {
    /// Runs `f` on the open database with the GIL released.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&tidemark::Database) -> tidemark::Result<T> + Send,
    ) -> PyResult<T> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        run(py, || f(db))
    }

    fn table_of(&self, t: tidemark::Table) -> Table {
        Table {
            shared: self.shared.clone(),
            t,
        }
    }

    fn collection_of(&self, c: tidemark::Collection) -> Collection {
        Collection {
            shared: self.shared.clone(),
            c,
        }
    }
}

/// An interval option given in seconds: 0 or less turns it off.
fn interval(name: &str, secs: f64) -> PyResult<Option<Duration>> {
    if secs > 0.0 {
        Duration::try_from_secs_f64(secs)
            .map(Some)
            .map_err(|_| PyValueError::new_err(format!("{name} {secs} is not a duration")))
    } else {
        Ok(None)
    }
}

#[pymethods]
impl Database {
    #[new]
    #[pyo3(signature = (path, *, cache_size=None, durability=None, eviction_target=None,
        eviction_trigger=None, eviction_dirty_target=None, eviction_dirty_trigger=None,
        eviction_threads=None, checkpoint_interval=None, checkpoint_log_size=None,
        checkpoint_flush_nice=None, write_back_interval=None, os_cache=None, log_segment_size=None,
        page_size=None, version_budget=None, statistics_log=true, statistics_interval=None,
        statistics_path=None, control_socket=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        cache_size: Option<usize>,
        durability: Option<&str>,
        eviction_target: Option<u8>,
        eviction_trigger: Option<u8>,
        eviction_dirty_target: Option<u8>,
        eviction_dirty_trigger: Option<u8>,
        eviction_threads: Option<usize>,
        checkpoint_interval: Option<f64>,
        checkpoint_log_size: Option<u64>,
        checkpoint_flush_nice: Option<i32>,
        write_back_interval: Option<f64>,
        os_cache: Option<&str>,
        log_segment_size: Option<u64>,
        page_size: Option<usize>,
        version_budget: Option<u8>,
        statistics_log: bool,
        statistics_interval: Option<f64>,
        statistics_path: Option<PathBuf>,
        control_socket: bool,
    ) -> PyResult<Database> {
        let mut b = tidemark::Database::builder();
        if let Some(v) = cache_size {
            b = b.cache_size(v);
        }
        if let Some(d) = durability {
            b = b.durability(d.parse().map_err(|e| to_py(py, e))?);
        }
        if let Some(v) = eviction_target {
            b = b.eviction_target(v);
        }
        if let Some(v) = eviction_trigger {
            b = b.eviction_trigger(v);
        }
        if let Some(v) = eviction_dirty_target {
            b = b.eviction_dirty_target(v);
        }
        if let Some(v) = eviction_dirty_trigger {
            b = b.eviction_dirty_trigger(v);
        }
        if let Some(v) = eviction_threads {
            b = b.eviction_threads(v);
        }
        if let Some(secs) = checkpoint_interval {
            b = b.checkpoint_interval(interval("checkpoint_interval", secs)?);
        }
        if let Some(v) = checkpoint_log_size {
            b = b.checkpoint_log_size((v > 0).then_some(v));
        }
        if let Some(v) = checkpoint_flush_nice {
            // Negative: the checkpointing thread flushes itself.
            b = b.checkpoint_flush_nice((v >= 0).then_some(v));
        }
        if let Some(secs) = write_back_interval {
            b = b.write_back_interval(interval("write_back_interval", secs)?);
        }
        if let Some(v) = os_cache {
            b = b.os_cache(v.parse().map_err(|e| to_py(py, e))?);
        }
        if let Some(v) = log_segment_size {
            b = b.log_segment_size(v);
        }
        if let Some(v) = page_size {
            b = b.page_size(v);
        }
        if let Some(v) = version_budget {
            b = b.version_budget(v);
        }
        if statistics_log {
            let mut log = tidemark::StatisticsLog::default();
            if let Some(secs) = statistics_interval {
                log.interval = Duration::try_from_secs_f64(secs)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "statistics_interval {secs} is not a positive duration"
                        ))
                    })?;
            }
            log.path = statistics_path;
            b = b.statistics_log(Some(log));
        } else {
            b = b.statistics_log(None);
        }
        b = b.control_socket(control_socket);
        let db = run(py, move || b.open(path))?;
        Ok(Database {
            shared: Arc::new(Shared {
                db,
                open: AtomicBool::new(true),
            }),
        })
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.shared.db.path().to_path_buf()
    }

    /// Bytes of every page of this database, chosen when it was created.
    #[getter]
    fn page_size(&self) -> usize {
        self.shared.db.page_size()
    }

    /// Bytes of the longest key this database takes (a quarter of its
    /// page, at most ``MAX_KEY_SIZE``).
    #[getter]
    fn max_key_size(&self) -> usize {
        self.shared.db.max_key_size()
    }

    /// The durability of calls that name none: "none", "write" or "fsync".
    #[getter]
    fn durability(&self) -> &'static str {
        durability_name(self.shared.db.default_durability())
    }

    /// Whether the database is open.
    #[getter]
    fn is_open(&self) -> bool {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Opens table `name`, creating it if needed.
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        self.call(py, |db| db.table(name)).map(|t| self.table_of(t))
    }

    /// Creates table `name` (TableExists if it exists).
    fn create_table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        self.call(py, |db| db.create_table(name))
            .map(|t| self.table_of(t))
    }

    /// Opens table `name` (TableNotFound if it does not exist).
    fn open_table(&self, py: Python<'_>, name: &str) -> PyResult<Table> {
        self.call(py, |db| db.open_table(name))
            .map(|t| self.table_of(t))
    }

    fn drop_table(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.call(py, |db| db.drop_table(name))
    }

    fn list_tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.call(py, |db| db.list_tables())
    }

    /// Applies a batch atomically with the given durability.
    #[pyo3(signature = (batch, durability=None))]
    fn write(&self, py: Python<'_>, batch: &Batch, durability: Option<&str>) -> PyResult<()> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let db = &self.shared.db;
        let mut b = batch.inner.lock();
        b.set_durability(d);
        let b = &*b;
        run(py, || db.write(b))
    }

    fn begin_read(&self, py: Python<'_>) -> PyResult<Snapshot> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let r = py.detach(|| db.begin_read());
        Ok(Snapshot {
            shared: self.shared.clone(),
            txn: Arc::new(Mutex::new(Some(r))),
        })
    }

    fn begin_write(&self, py: Python<'_>) -> PyResult<Transaction> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let w = py.detach(|| db.begin_write());
        Ok(Transaction {
            shared: self.shared.clone(),
            txn: Mutex::new(Some(w)),
        })
    }

    /// Creates a collection; capped when `capped_size` is given.
    #[pyo3(signature = (name, capped_size=None, capped_max=None))]
    fn create_collection(
        &self,
        py: Python<'_>,
        name: &str,
        capped_size: Option<u64>,
        capped_max: Option<u64>,
    ) -> PyResult<Collection> {
        self.shared.check(py)?;
        let capped = match (capped_size, capped_max) {
            (Some(size), max) => Some(tidemark::CappedOptions { size, max }),
            (None, None) => None,
            (None, Some(_)) => {
                return Err(PyValueError::new_err("a capped collection needs a size"))
            }
        };
        self.call(py, |db| db.create_collection(name, capped))
            .map(|c| self.collection_of(c))
    }

    /// Opens collection `name` (CollectionNotFound if absent).
    fn get_collection(&self, py: Python<'_>, name: &str) -> PyResult<Collection> {
        self.call(py, |db| db.get_collection(name))
            .map(|c| self.collection_of(c))
    }

    /// Opens collection `name`, creating a regular one if absent.
    fn collection(&self, py: Python<'_>, name: &str) -> PyResult<Collection> {
        self.call(py, |db| db.collection(name))
            .map(|c| self.collection_of(c))
    }

    fn list_collections(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.call(py, |db| db.list_collections())
    }

    fn drop_collection(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        self.call(py, |db| db.drop_collection(name))
    }

    /// Every statistics counter by name.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let s = py.detach(|| db.stats());
        let d = PyDict::new(py);
        for (k, v) in s.fields() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Runs a checkpoint now.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let info = run(py, || db.checkpoint())?;
        let d = PyDict::new(py);
        d.set_item("pages_written", info.pages_written)?;
        d.set_item("idle", info.idle)?;
        d.set_item("duration_us", info.duration_us)?;
        Ok(d)
    }

    /// Writes a consistent copy into `dest` while writes go on.
    fn backup<'py>(&self, py: Python<'py>, dest: PathBuf) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let b = run(py, || db.backup(&dest))?;
        let d = PyDict::new(py);
        d.set_item("data_bytes", b.data_bytes)?;
        d.set_item("ring_bytes", b.ring_bytes)?;
        d.set_item("log_bytes", b.log_bytes)?;
        d.set_item("duration_us", b.duration_us)?;
        Ok(d)
    }

    /// Returns the free tail of the data file to the file system.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let c = run(py, || db.compact())?;
        let d = PyDict::new(py);
        d.set_item("size_before", c.size_before)?;
        d.set_item("size_after", c.size_after)?;
        Ok(d)
    }

    /// Checks every page, table and collection.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let db = &self.shared.db;
        let r = run(py, || db.verify())?;
        let d = PyDict::new(py);
        d.set_item("ok", r.is_ok())?;
        d.set_item("tables", r.tables)?;
        d.set_item("pages", r.pages)?;
        d.set_item("overflow_pages", r.overflow_pages)?;
        d.set_item("entries", r.entries)?;
        d.set_item("problems", r.problems.clone())?;
        Ok(d)
    }

    /// Checkpoints and closes; every handle made from this database then
    /// refuses to work. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if !self.shared.open.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let db = self.shared.db.clone();
        run(py, move || db.close())
    }
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::None => "none",
        Durability::Write => "write",
        Durability::Fsync => "fsync",
        _ => "unknown",
    }
}

/// A key-value table.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Table {
    shared: Arc<Shared>,
    t: tidemark::Table,
}

#[pymethods]
impl Table {
    #[getter]
    fn name(&self) -> String {
        self.t.name().to_string()
    }

    fn get<'py>(&self, py: Python<'py>, key: &[u8]) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.shared.check(py)?;
        let t = &self.t;
        Ok(run(py, || t.get(key))?.map(|v| bytes(py, &v)))
    }

    #[pyo3(signature = (key, value, durability=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &[u8],
        value: &[u8],
        durability: Option<&str>,
    ) -> PyResult<()> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let t = &self.t;
        run(py, || t.put_with(key, value, d))
    }

    /// Removes `key`; whether it was there.
    #[pyo3(signature = (key, durability=None))]
    fn delete(&self, py: Python<'_>, key: &[u8], durability: Option<&str>) -> PyResult<bool> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let t = &self.t;
        run(py, || t.delete_with(key, d))
    }

    /// Entries with `lo <= key < hi`, each read as of one snapshot; at most
    /// `limit` of them.
    #[pyo3(signature = (lo=None, hi=None, reverse=false, limit=None))]
    fn range(
        &self,
        py: Python<'_>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<RangeIter> {
        self.shared.check(py)?;
        let t = &self.t;
        let r = py.detach(|| t.range(key_range(lo, hi)));
        Ok(RangeIter::of_range(self.shared.clone(), r, reverse, limit))
    }
}

enum Entries {
    Table(Box<tidemark::Range>),
    Listed(std::vec::IntoIter<(Vec<u8>, Vec<u8>)>),
}

/// An iterator of `(key, value)` pairs.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct RangeIter {
    shared: Arc<Shared>,
    /// The entries, and how many more may be returned (`None`: all).
    inner: Mutex<(Entries, Option<usize>)>,
    reverse: bool,
}

impl RangeIter {
    /// Over a table's range: with a limit, the range copies no more than
    /// it out of the leaves (`Range::read_ahead`).
    fn of_range(
        shared: Arc<Shared>,
        r: tidemark::Range,
        reverse: bool,
        limit: Option<usize>,
    ) -> RangeIter {
        let r = match limit {
            Some(n) => r.read_ahead(n),
            None => r,
        };
        RangeIter {
            shared,
            inner: Mutex::new((Entries::Table(Box::new(r)), limit)),
            reverse,
        }
    }
}

#[pymethods]
impl RangeIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        self.shared.check(py)?;
        let reverse = self.reverse;
        let inner = &self.inner;
        let next = run(py, || {
            let mut g = inner.lock();
            let (entries, left) = &mut *g;
            if *left == Some(0) {
                return Ok(None);
            }
            let item = match entries {
                Entries::Table(r) if reverse => r.next_back(),
                Entries::Table(r) => r.next(),
                Entries::Listed(l) if reverse => l.next_back().map(Ok),
                Entries::Listed(l) => l.next().map(Ok),
            };
            if let Some(n) = left {
                *n = n.saturating_sub(1);
            }
            item.transpose()
        })?;
        Ok(next.map(|(k, v)| (bytes(py, &k), bytes(py, &v))))
    }
}

/// Puts, deletes and document inserts applied together by
/// `Database.write`.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Batch {
    inner: Mutex<tidemark::WriteBatch>,
}

#[pymethods]
impl Batch {
    #[new]
    fn new() -> Batch {
        Batch {
            inner: Mutex::new(tidemark::WriteBatch::new()),
        }
    }

    fn put(&self, table: &str, key: &[u8], value: &[u8]) {
        self.inner.lock().put(table, key, value);
    }

    fn delete(&self, table: &str, key: &[u8]) {
        self.inner.lock().delete(table, key);
    }

    /// Adds the insert of a document (raw BSON) into `collection`.
    fn insert_one(&self, py: Python<'_>, collection: &str, raw: &[u8]) -> PyResult<()> {
        let d = document(py, raw)?;
        self.inner
            .lock()
            .insert_one(collection, &d)
            .map(|_| ())
            .map_err(|e| to_py(py, e))
    }

    fn __len__(&self) -> usize {
        self.inner.lock().len()
    }
}

/// A read snapshot.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Snapshot {
    shared: Arc<Shared>,
    txn: Arc<Mutex<Option<tidemark::ReadTxn>>>,
}

impl Snapshot {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&tidemark::ReadTxn) -> tidemark::Result<T> + Send,
    ) -> PyResult<T> {
        with_open(
            &self.shared,
            py,
            &self.txn,
            "the snapshot was released",
            |t| f(t),
        )
    }
}

#[pymethods]
impl Snapshot {
    fn get<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        key: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self.with(py, |t| t.get(table, key))?.map(|v| bytes(py, &v)))
    }

    #[pyo3(signature = (table, lo=None, hi=None, reverse=false, limit=None))]
    fn range(
        &self,
        py: Python<'_>,
        table: &str,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<RangeIter> {
        let r = self.with(py, |t| t.range(table, key_range(lo, hi)))?;
        Ok(RangeIter::of_range(self.shared.clone(), r, reverse, limit))
    }

    fn get_collection(&self, py: Python<'_>, name: &str) -> PyResult<SnapshotCollection> {
        let c = self.with(py, |t| t.get_collection(name))?;
        Ok(SnapshotCollection {
            shared: self.shared.clone(),
            c,
        })
    }

    /// Whether the snapshot can still be read (not too old).
    fn is_valid(&self) -> bool {
        self.txn.lock().as_ref().is_some_and(|t| t.is_valid())
    }

    /// Ends the snapshot now, letting the versions it kept go.
    fn release(&self) {
        self.txn.lock().take();
    }
}

/// A collection as of a snapshot.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct SnapshotCollection {
    shared: Arc<Shared>,
    c: tidemark::SnapshotCollection,
}

#[pymethods]
impl SnapshotCollection {
    #[getter]
    fn name(&self) -> String {
        self.c.name().to_string()
    }

    /// The document whose `_id` is the `v` of `{'v': id}` (raw BSON).
    fn find_one(&self, py: Python<'_>, id: &[u8]) -> PyResult<Option<Py<PyBytes>>> {
        self.shared.check(py)?;
        let id = value(py, id)?;
        let c = &self.c;
        match run(py, || c.find_one(&id))? {
            Some(d) => encode(py, &d).map(Some),
            None => Ok(None),
        }
    }

    #[pyo3(signature = (reverse=false))]
    fn find(&self, py: Python<'_>, reverse: bool) -> PyResult<DocCursor> {
        self.shared.check(py)?;
        let c = &self.c;
        let cur = run(py, || if reverse { c.find_reverse() } else { c.find() })?;
        Ok(DocCursor::new(&self.shared, cur))
    }

    #[pyo3(signature = (lo=None, lo_inclusive=true, hi=None, hi_inclusive=false, reverse=false))]
    fn find_range(
        &self,
        py: Python<'_>,
        lo: Option<&[u8]>,
        lo_inclusive: bool,
        hi: Option<&[u8]>,
        hi_inclusive: bool,
        reverse: bool,
    ) -> PyResult<DocCursor> {
        self.shared.check(py)?;
        let (lo, hi) = (
            id_bound(py, lo, lo_inclusive)?,
            id_bound(py, hi, hi_inclusive)?,
        );
        let c = &self.c;
        let cur = run(py, || by_id!(c, lo.as_ref(), hi.as_ref(), reverse))?;
        Ok(DocCursor::new(&self.shared, cur))
    }

    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.check(py)?;
        let c = &self.c;
        run(py, || c.count())
    }
}

/// What a transaction used after its commit or rollback raises.
const ENDED: &str = "the transaction has ended";

/// A write transaction.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Transaction {
    shared: Arc<Shared>,
    txn: Mutex<Option<tidemark::WriteTxn>>,
}

impl Transaction {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut tidemark::WriteTxn) -> tidemark::Result<T> + Send,
    ) -> PyResult<T> {
        with_open(&self.shared, py, &self.txn, ENDED, f)
    }
}

#[pymethods]
impl Transaction {
    fn get<'py>(
        &self,
        py: Python<'py>,
        table: &str,
        key: &[u8],
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        Ok(self.with(py, |t| t.get(table, key))?.map(|v| bytes(py, &v)))
    }

    fn put(&self, py: Python<'_>, table: &str, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.with(py, |t| t.put(table, key, value))
    }

    fn delete(&self, py: Python<'_>, table: &str, key: &[u8]) -> PyResult<()> {
        self.with(py, |t| t.delete(table, key))
    }

    /// Entries as the transaction sees them (its snapshot and its own
    /// writes), read when called.
    #[pyo3(signature = (table, lo=None, hi=None, reverse=false, limit=None))]
    fn range(
        &self,
        py: Python<'_>,
        table: &str,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        reverse: bool,
        limit: Option<usize>,
    ) -> PyResult<RangeIter> {
        let all = self.with(py, |t| {
            t.range(table, key_range(lo, hi))?
                .collect::<tidemark::Result<Vec<_>>>()
        })?;
        Ok(RangeIter {
            shared: self.shared.clone(),
            inner: Mutex::new((Entries::Listed(all.into_iter()), limit)),
            reverse,
        })
    }

    #[pyo3(signature = (durability=None))]
    fn commit(&self, py: Python<'_>, durability: Option<&str>) -> PyResult<()> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let Some(t) = self.txn.lock().take() else {
            return Err(raise(py, "InvalidOperation", ENDED.into()));
        };
        run(py, move || t.commit_with(d))
    }

    fn rollback(&self) {
        self.txn.lock().take();
    }

    /// Whether it can still be committed.
    #[getter]
    fn active(&self) -> bool {
        self.txn.lock().is_some()
    }
}

/// A document collection.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct Collection {
    shared: Arc<Shared>,
    c: tidemark::Collection,
}

#[pymethods]
impl Collection {
    #[getter]
    fn name(&self) -> String {
        self.c.name().to_string()
    }

    /// `(size, max)` of a capped collection, else `None`.
    #[getter]
    fn capped(&self) -> Option<(u64, Option<u64>)> {
        self.c.capped().map(|o| (o.size, o.max))
    }

    /// Inserts one document (raw BSON, `_id` included).
    #[pyo3(signature = (raw, durability=None))]
    fn insert_one(&self, py: Python<'_>, raw: &[u8], durability: Option<&str>) -> PyResult<()> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let c = &self.c;
        run(py, || {
            let doc = tidemark::parse_document(raw)?;
            c.insert_one_with(&doc, d).map(|_| ())
        })
    }

    /// Inserts every document or none.
    #[pyo3(signature = (raws, durability=None))]
    fn insert_many(
        &self,
        py: Python<'_>,
        raws: Vec<Vec<u8>>,
        durability: Option<&str>,
    ) -> PyResult<()> {
        self.shared.check(py)?;
        let d = self.shared.durability(py, durability)?;
        let c = &self.c;
        run(py, || {
            let docs = raws
                .iter()
                .map(|r| tidemark::parse_document(r))
                .collect::<tidemark::Result<Vec<_>>>()?;
            c.insert_many_with(&docs, d).map(|_| ())
        })
    }

    /// The document whose `_id` is the `v` of `{'v': id}` (raw BSON).
    fn find_one(&self, py: Python<'_>, id: &[u8]) -> PyResult<Option<Py<PyBytes>>> {
        self.shared.check(py)?;
        let id = value(py, id)?;
        let c = &self.c;
        match run(py, || c.find_one(&id))? {
            Some(d) => encode(py, &d).map(Some),
            None => Ok(None),
        }
    }

    /// Replaces the document with that `_id`; whether one matched.
    fn replace_one(&self, py: Python<'_>, id: &[u8], raw: &[u8]) -> PyResult<bool> {
        self.shared.check(py)?;
        let id = value(py, id)?;
        let doc = document(py, raw)?;
        let c = &self.c;
        run(py, || c.replace_one(&id, &doc))
    }

    /// Deletes the document with that `_id`; whether one matched.
    fn delete_one(&self, py: Python<'_>, id: &[u8]) -> PyResult<bool> {
        self.shared.check(py)?;
        let id = value(py, id)?;
        let c = &self.c;
        run(py, || c.delete_one(&id))
    }

    /// Every document in natural order (or reverse).
    #[pyo3(signature = (reverse=false))]
    fn find(&self, py: Python<'_>, reverse: bool) -> PyResult<DocCursor> {
        self.shared.check(py)?;
        let c = &self.c;
        let cur = py.detach(|| if reverse { c.find_reverse() } else { c.find() });
        Ok(DocCursor::new(&self.shared, cur))
    }

    /// Documents with `_id` between encoded bounds, in `_id` order.
    #[pyo3(signature = (lo=None, lo_inclusive=true, hi=None, hi_inclusive=false, reverse=false))]
    fn find_range(
        &self,
        py: Python<'_>,
        lo: Option<&[u8]>,
        lo_inclusive: bool,
        hi: Option<&[u8]>,
        hi_inclusive: bool,
        reverse: bool,
    ) -> PyResult<DocCursor> {
        self.shared.check(py)?;
        let (lo, hi) = (
            id_bound(py, lo, lo_inclusive)?,
            id_bound(py, hi, hi_inclusive)?,
        );
        let c = &self.c;
        let cur = run(py, || by_id!(c, lo.as_ref(), hi.as_ref(), reverse))?;
        Ok(DocCursor::new(&self.shared, cur))
    }

    /// A tailable cursor from the oldest record of a capped collection.
    fn tail(&self, py: Python<'_>, max_await_ms: u64) -> PyResult<TailCursor> {
        self.shared.check(py)?;
        let c = &self.c;
        let t = run(py, || c.tail(Duration::from_millis(max_await_ms)))?;
        Ok(TailCursor {
            shared: self.shared.clone(),
            inner: Mutex::new(t),
        })
    }

    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        self.shared.check(py)?;
        let c = &self.c;
        run(py, || c.count())
    }

    /// Physical offsets of a capped collection's records, in natural order.
    fn layout(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.shared.check(py)?;
        let c = &self.c;
        run(py, || c.layout())
    }

    fn validate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.shared.check(py)?;
        let c = &self.c;
        let r = run(py, || c.validate())?;
        let d = PyDict::new(py);
        d.set_item("ok", r.problems.is_empty())?;
        d.set_item("count", r.count)?;
        d.set_item("data_bytes", r.data_bytes)?;
        d.set_item("wasted_bytes", r.wasted_bytes)?;
        d.set_item("ring_size", r.ring_size)?;
        d.set_item("fragmentation", r.fragmentation)?;
        d.set_item("discontinuities", r.discontinuities)?;
        d.set_item("wraps", r.wraps)?;
        d.set_item("index_entries", r.index_entries)?;
        d.set_item("problems", r.problems.clone())?;
        Ok(d)
    }
}

/// An iterator of documents (raw BSON).
#[pyclass(frozen, module = "tidemark._tidemark")]
struct DocCursor {
    shared: Arc<Shared>,
    inner: Mutex<tidemark::Cursor>,
}

impl DocCursor {
    fn new(shared: &Arc<Shared>, cur: tidemark::Cursor) -> DocCursor {
        DocCursor {
            shared: shared.clone(),
            inner: Mutex::new(cur),
        }
    }
}

#[pymethods]
impl DocCursor {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        self.shared.check(py)?;
        let inner = &self.inner;
        match run(py, || inner.lock().next().transpose())? {
            Some(d) => encode(py, &d).map(Some),
            None => Ok(None),
        }
    }
}

/// A tailable cursor over a capped collection.
#[pyclass(frozen, module = "tidemark._tidemark")]
struct TailCursor {
    shared: Arc<Shared>,
    inner: Mutex<tidemark::Tailable>,
}

#[pymethods]
impl TailCursor {
    /// The next document (raw BSON), or `None` if none arrived within the
    /// cursor's wait.
    fn next(&self, py: Python<'_>) -> PyResult<Option<Py<PyBytes>>> {
        self.shared.check(py)?;
        let inner = &self.inner;
        match run(py, || inner.lock().next_document())? {
            Some(d) => encode(py, &d).map(Some),
            None => Ok(None),
        }
    }
}

/// Largest key, document and value sizes, for the Python layer.
#[pymodule]
fn _tidemark(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Database>()?;
    m.add_class::<Table>()?;
    m.add_class::<RangeIter>()?;
    m.add_class::<Batch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<SnapshotCollection>()?;
    m.add_class::<Transaction>()?;
    m.add_class::<Collection>()?;
    m.add_class::<DocCursor>()?;
    m.add_class::<TailCursor>()?;
    m.add("MAX_KEY_SIZE", tidemark::MAX_KEY_SIZE)?;
    m.add("DEFAULT_PAGE_SIZE", tidemark::DEFAULT_PAGE_SIZE)?;
    m.add("MAX_VALUE_SIZE", tidemark::MAX_VALUE_SIZE)?;
    m.add("MAX_DOCUMENT_SIZE", tidemark::MAX_DOCUMENT_SIZE)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
