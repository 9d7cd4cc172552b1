//! The engine: the pager, the buffer pool, the write gate, the key stripes
//! and the log put together; the code that opens a database (reads the
//! durable checkpoint's map back, rebuilds free space from it, replays the
//! log); and the tree-level operations that commits and replay share.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::alloc::BlockAlloc;
use crate::btree::{node, overflow, Keep, StoredValue, Tree};
use crate::cache::{BufferPool, PoolConfig};
use crate::capped::{Ring, RingState};
use crate::checkpoint::{CheckpointCounters, Durable};
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::io::{FileIo, FileSystem};
use crate::meta::{self, Meta};
use crate::page::{self, get_u64, PageKind, HEADER_SIZE};
use crate::pagemap::{self, PageMap, NO_BLOCK};
use crate::pager::{Pager, PopulateGate, Promise};
use crate::stripes::Stripes;
use crate::versions::{Ts, Versions};
use crate::wal::record::LogOp;
use crate::wal::recover::Recovered;
use crate::wal::{Durability, Ticket, Wal};

/// How often the data file's preparing thread looks for work when it has
/// none.
const PREPARE_IDLE: std::time::Duration = std::time::Duration::from_millis(20);

/// Page id of the catalog tree (table name -> root page id).
pub(crate) const CATALOG_ROOT: u64 = 1;
/// Name of the data file inside the database directory.
pub const DATA_FILE: &str = "data.tdm";

pub(crate) struct Engine {
    pub(crate) pager: Pager,
    pub(crate) pool: BufferPool,
    pub(crate) gate: Gate,
    pub(crate) durable: Mutex<Durable>,
    pub(crate) ckpt: CheckpointCounters,
    /// Serialises create_table / drop_table.
    pub(crate) catalog_lock: Mutex<()>,
    pub(crate) stripes: Stripes,
    pub(crate) wal: Wal,
    pub(crate) versions: Versions,
    /// The database directory and its file layer (for ring files).
    pub(crate) dir: std::path::PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    /// Open rings of capped collections, by collection name.
    pub(crate) rings: parking_lot::RwLock<std::collections::HashMap<Vec<u8>, Arc<Ring>>>,
    /// (flush requested, stop) for the background ring writer.
    pub(crate) ring_wake: Mutex<(bool, bool)>,
    pub(crate) ring_cv: parking_lot::Condvar,
    /// (checkpoint requested, stop) for the background checkpointer.
    pub(crate) ckpt_wake: Mutex<(bool, bool)>,
    pub(crate) ckpt_cv: parking_lot::Condvar,
    /// Set to stop the data file's preparing thread.
    pub(crate) prep_stop: Mutex<bool>,
    pub(crate) prep_cv: parking_lot::Condvar,
    /// Open collections, by name (see `docs`).
    pub(crate) colls: Mutex<std::collections::HashMap<String, Arc<crate::docs::CollMeta>>>,
    /// Operations by kind, table and collection (see `stats`).
    pub(crate) ops: crate::stats::OpCounters,
    /// When the database was opened.
    pub(crate) opened: std::time::Instant,
}

/// How a change is recorded for snapshots: the commit's timestamp and the
/// table name (`None`: no snapshot is live, nothing to keep).
pub(crate) type Track<'a> = Option<(Ts, &'a [u8])>;

impl Engine {
    pub(crate) fn tree(&self, root: u64) -> Tree<'_> {
        Tree {
            pager: &self.pager,
            pool: &self.pool,
            root,
        }
    }

    /// Opens (or creates) the database in `dir` and replays its log.
    /// `page_size` and `log_segment_size` apply to a new database; an
    /// existing one keeps the sizes its meta page records. `pool_config`
    /// makes the cache's configuration for the database's page size.
    pub(crate) fn open(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        page_size: usize,
        pool_config: &dyn Fn(usize) -> Result<PoolConfig>,
        log_segment_size: u64,
        version_budget: u64,
    ) -> Result<(Engine, Recovered)> {
        // `Builder::open` refused any other before touching the directory.
        debug_assert!(page::valid_page_size(page_size));
        crate::wal::segment::check_size(log_segment_size)?;
        fs.create_dir_all(dir)?;
        let path = dir.join(DATA_FILE);
        let file = fs.open(&path, true)?;
        let mut len = file.len()?;
        if len > 0 && interrupted_creation(&*file, len)? {
            // Creating this database failed before its first meta page was
            // durable (open returned the error, so nothing was ever
            // acknowledged): start the creation again.
            file.set_len(0)?;
            len = 0;
        }
        if len == 0 {
            let mut buf = vec![0u8; page_size];
            Meta {
                generation: 1,
                epoch: 0,
                next_pid: CATALOG_ROOT,
                dir_block: 0,
                map_chunks: 0,
                log_lsn: 0,
                log_segment_size,
            }
            .encode(&mut buf);
            file.write_all_at(&buf, page_size as u64)?;
            file.sync_data()?;
            // Make the new file's directory entry durable too.
            fs.sync_dir(dir)?;
        } else if len < 2 * page::MIN_PAGE_SIZE as u64 {
            return Err(Error::NotADatabase(format!(
                "{} is {len} bytes: too short for a tidemark data file",
                path.display()
            )));
        }
        let len = file.len()?;
        let (page_size, m) = meta::read_durable(&*file, len)?;
        let cfg = pool_config(page_size)?;
        let file_blocks = len.div_ceil(page_size as u64);
        let map = PageMap::new();
        let (dir_blocks, chunk_blocks) = read_map(&*file, page_size, &m, &map, file_blocks)?;
        let mut used: Vec<u64> = dir_blocks
            .iter()
            .chain(chunk_blocks.iter())
            .copied()
            .filter(|&b| b != 0)
            .collect();
        let mut free_pids = Vec::new();
        for pid in CATALOG_ROOT..m.next_pid {
            match map.block(pid) {
                NO_BLOCK => free_pids.push(pid),
                blk => used.push(blk),
            }
        }
        free_pids.reverse();
        let alloc = BlockAlloc::new(used)
            .map_err(|blk| Error::corruption(blk, "block referenced twice in the page map"))?;
        let pager = Pager::new(
            page_size,
            file,
            map,
            alloc,
            m.epoch + 1,
            m.next_pid,
            free_pids,
        );
        let wal = Wal::open(fs.clone(), dir, m.log_segment_size, m.log_lsn)?;
        let mut engine = Engine {
            pager,
            pool: BufferPool::new(cfg),
            gate: Gate::new(),
            durable: Mutex::new(Durable {
                generation: m.generation,
                log_lsn: m.log_lsn,
                chunk_blocks,
                dir_blocks,
                log_segment_size: m.log_segment_size,
            }),
            ckpt: CheckpointCounters::default(),
            catalog_lock: Mutex::new(()),
            stripes: Stripes::new(),
            wal,
            versions: Versions::new(version_budget),
            dir: dir.to_path_buf(),
            fs: fs.clone(),
            rings: Default::default(),
            ring_wake: Mutex::new((false, false)),
            ring_cv: parking_lot::Condvar::new(),
            ckpt_wake: Mutex::new((false, false)),
            ckpt_cv: parking_lot::Condvar::new(),
            prep_stop: Mutex::new(false),
            prep_cv: parking_lot::Condvar::new(),
            colls: Default::default(),
            ops: Default::default(),
            opened: std::time::Instant::now(),
        };
        if m.next_pid == CATALOG_ROOT {
            let pid = engine.pager.alloc_pid()?;
            debug_assert_eq!(pid, CATALOG_ROOT);
            let mut w = engine.pool.new_page(&engine.pager, pid)?;
            node::init_leaf(w.bytes_mut()?, pid);
            drop(w);
            crate::checkpoint::checkpoint(&engine)?;
        } else if engine.pager.map.block(CATALOG_ROOT) == NO_BLOCK {
            return Err(Error::corruption(CATALOG_ROOT, "catalog root has no block"));
        }
        // Ring files prepared for collections whose creation never
        // committed.
        for f in fs.list(dir)? {
            if crate::capped::is_prepared_file(&f) {
                fs.remove(&dir.join(&f))?;
            }
        }
        let found = engine.wal.replay(&mut |ops| engine.apply_logged(ops))?;
        engine.wal.restart(&found)?;
        // Replayed ring records wait in memory; the log they came from may
        // not be synced (a process crash leaves it in the OS cache).
        engine.flush_rings()?;
        Ok((engine, found))
    }

    /// Bytes of the longest key this database takes (it follows the page
    /// size: [`page::max_key_size`]).
    pub(crate) fn max_key_size(&self) -> usize {
        page::max_key_size(self.pager.page_size)
    }

    /// [`Error::KeySize`] unless `key` is a key this database takes.
    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        let max = self.max_key_size();
        if key.is_empty() || key.len() > max {
            return Err(Error::KeySize {
                len: key.len(),
                max,
            });
        }
        Ok(())
    }

    /// Root page of table `name`, if it exists.
    pub(crate) fn lookup_root(&self, name: &[u8]) -> Result<Option<u64>> {
        match self.tree(CATALOG_ROOT).get(name)? {
            Some(v) => Ok(Some(decode_root(name, &v)?)),
            None => Ok(None),
        }
    }

    /// Creates table `name` (absent) and returns its root. Inside the gate.
    pub(crate) fn create_root(&self, name: &[u8]) -> Result<u64> {
        let root = self.pager.alloc_pid()?;
        let mut w = self.pool.new_page(&self.pager, root)?;
        node::init_leaf(w.bytes_mut()?, root);
        drop(w);
        self.tree(CATALOG_ROOT).put(
            name,
            &StoredValue::Inline(root.to_le_bytes().to_vec()),
            None,
        )?;
        Ok(root)
    }

    /// Removes table `name` (rooted at `root`) and frees its pages. Inside
    /// the gate.
    pub(crate) fn drop_root(&self, name: &[u8], root: u64) -> Result<()> {
        let mut pages = Vec::new();
        self.tree(root).for_each_page(&mut |p| {
            pages.push(p);
            Ok(())
        })?;
        self.tree(CATALOG_ROOT).delete(name, None)?;
        // No scan can latch the freed pages any more: the table is gone
        // from the catalog and every stripe is held.
        self.pager.shape_changed();
        for p in pages {
            self.pool.discard(&self.pager, p)?;
            self.pager.free_pid(p);
        }
        Ok(())
    }

    /// Sets `key` to `value` in the tree rooted at `root`. Inside the gate.
    pub(crate) fn apply_put(
        &self,
        root: u64,
        key: &[u8],
        value: &[u8],
        track: Track<'_>,
    ) -> Result<()> {
        let stored = if node::fits_inline(self.pager.page_size, key.len(), value.len()) {
            StoredValue::Inline(value.to_vec())
        } else {
            StoredValue::Overflow {
                len: value.len() as u64,
                index_pid: overflow::write(&self.pager, value)?,
            }
        };
        let tree = self.tree(root);
        if let Some(old) = self.keeping(key, track, |keep| tree.put(key, &stored, keep))? {
            tree.free_value(&old)?;
        }
        Ok(())
    }

    /// Runs a tree change `f`, handing it a callback that keeps the key's
    /// previous value for snapshots when the commit is tracked.
    fn keeping<R>(&self, key: &[u8], track: Track<'_>, f: impl FnOnce(Keep<'_>) -> R) -> R {
        match track {
            Some((ts, table)) => {
                let mut save = |before: Option<&[u8]>| self.versions.save(ts, table, key, before);
                f(Some(&mut save))
            }
            None => f(None),
        }
    }

    /// Removes `key` from the tree rooted at `root`; whether it was there.
    pub(crate) fn apply_delete(&self, root: u64, key: &[u8], track: Track<'_>) -> Result<bool> {
        let tree = self.tree(root);
        match self.keeping(key, track, |keep| tree.delete(key, keep))? {
            Some(old) => {
                tree.free_value(&old)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Applies one replayed batch. Operations on a table that no longer
    /// exists are skipped: the table was dropped later in the log order.
    fn apply_logged(&self, ops: &[LogOp<'_>]) -> Result<()> {
        let _in = self.gate.enter();
        for op in ops {
            match *op {
                LogOp::Put { table, key, value } => {
                    if table == COLLECTIONS.as_bytes() {
                        self.collection_written(key, Some(value), None)?;
                    }
                    if let Some(root) = self.lookup_root(table)? {
                        self.apply_put(root, key, value, None)?;
                    }
                }
                LogOp::Delete { table, key } => {
                    if table == COLLECTIONS.as_bytes() {
                        self.collection_written(key, None, None)?;
                    }
                    if let Some(root) = self.lookup_root(table)? {
                        self.apply_delete(root, key, None)?;
                    }
                }
                LogOp::RingWrite { table, pos, record } => {
                    if let Some(ring) = self.ring(table)? {
                        let (at, state) = pos.split_at(8);
                        let at = u64::from_le_bytes(at.try_into().unwrap_or([0; 8]));
                        ring.apply(RingState::decode(state), at, record.into(), 0);
                    }
                }
                LogOp::CreateTable { table } => {
                    if self.lookup_root(table)?.is_none() {
                        self.create_root(table)?;
                    }
                }
                LogOp::DropTable { table } => {
                    if let Some(root) = self.lookup_root(table)? {
                        self.drop_root(table, root)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Table of collection descriptions (see `docs`).
pub(crate) const COLLECTIONS: &str = "$collections";

/// A collection's description: regular, or capped with its ring size,
/// document limit and ring state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CollEntry {
    pub(crate) capped: Option<(u64, Option<u64>, RingState)>,
}

impl CollEntry {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self.capped {
            None => vec![0],
            Some((size, max, st)) => {
                let mut v = vec![1];
                v.extend_from_slice(&size.to_le_bytes());
                v.extend_from_slice(&max.unwrap_or(0).to_le_bytes());
                v.extend_from_slice(&st.encode());
                v
            }
        }
    }

    pub(crate) fn decode(name: &[u8], v: &[u8]) -> Result<CollEntry> {
        let bad = || {
            Error::corruption(
                0,
                format!(
                    "description of collection {:?} is malformed",
                    String::from_utf8_lossy(name)
                ),
            )
        };
        match v.first() {
            Some(0) if v.len() == 1 => Ok(CollEntry { capped: None }),
            Some(1) if v.len() == 17 + RingState::ENCODED => {
                let size = u64::from_le_bytes(v[1..9].try_into().map_err(|_| bad())?);
                let max = u64::from_le_bytes(v[9..17].try_into().map_err(|_| bad())?);
                let st = RingState::decode(&v[17..]).ok_or_else(bad)?;
                Ok(CollEntry {
                    capped: Some((size, (max > 0).then_some(max), st)),
                })
            }
            _ => Err(bad()),
        }
    }
}

impl Engine {
    /// Blocks the data file keeps free for what is already dirty in the
    /// cache: each dirty page may be evicted (a new block) or checkpointed,
    /// plus slack for commits admitted at the same time (a sixteenth of the
    /// frames) and the map and directory pages a checkpoint adds.
    fn reserve_blocks(&self) -> u64 {
        let frames = self.pool.cfg.frames as u64;
        let dirty = self.pool.dirty.load(std::sync::atomic::Ordering::Relaxed) as u64;
        dirty + frames / 16 + 64
    }

    /// Admission of a checkpoint: room in the data file for every dirty
    /// page twice (its image, and a shadow copy if a writer changes it
    /// meanwhile), the slack, and every page-map chunk and directory page
    /// it may rewrite. The room beyond the dirty pages is promised to the
    /// checkpoint until the returned guard is dropped, so that commits
    /// admitted while it runs leave it there. [`Error::DiskFull`] if the
    /// disk cannot give it; the checkpoint then fails alone and writes go
    /// on.
    pub(crate) fn admit_checkpoint(&self) -> Result<Promise<'_>> {
        let dirty = self.pool.dirty.load(std::sync::atomic::Ordering::Relaxed) as u64;
        let per_chunk = self.pager.chunk_entries() as u64;
        let chunks = self.pager.next_pid().div_ceil(per_chunk);
        let map = chunks + chunks.div_ceil(per_chunk) + 1;
        self.pager.promise(self.reserve_blocks(), dirty + map)
    }

    /// Logs `ops` after admission: room in the log for the record, and in
    /// the data file for the reserve plus what applying the record can take:
    /// twice the pages its bytes could fill (a value too large for a leaf:
    /// its overflow pages, once), and two pages for each operation (a page
    /// already on disk that it makes dirty, and a parent), at most the
    /// blocks in use. That room is promised to the commit until
    /// it is applied ([`Ticket::promised`], released by the caller). A full
    /// disk is [`Error::DiskFull`] with nothing logged, so the commit fails
    /// alone and later ones may succeed.
    pub(crate) fn log(&self, ops: &[LogOp<'_>], durability: Durability) -> Result<Ticket> {
        // Every write passes here before it is logged: keys longer than
        // this database's pages take fail whole, with nothing logged (the
        // API checked them against the longest any database takes).
        for op in ops {
            if let LogOp::Put { key, .. } | LogOp::Delete { key, .. } = op {
                self.check_key(key)?;
            }
        }
        let (plen, len) = self.wal.admit(ops)?;
        let touched = (2 * ops.len() as u64).min(self.pager.alloc.used());
        let ps = self.pager.page_size;
        // A value too large for a leaf takes exactly its overflow pages,
        // written once to new blocks: counted by the rule for cells, a
        // value of 16 MiB asked for four times its size, and the file
        // kept half as much again preallocated ahead of it.
        let (mut cells, mut overflow) = (len, 0u64);
        for op in ops {
            if let LogOp::Put { key, value, .. } = op {
                if !node::fits_inline(ps, key.len(), value.len()) {
                    cells = cells.saturating_sub(value.len() as u64);
                    overflow += overflow::page_count(ps, value.len());
                }
            }
        }
        let pages = cells.div_ceil(ps as u64 / 2) * 2 + overflow + touched;
        let promise = self.pager.promise(self.reserve_blocks(), pages)?;
        let mut ticket = self.wal.append_sized(ops, plen, durability)?;
        ticket.promised = promise.keep();
        Ok(ticket)
    }
}

impl Engine {
    /// The description of collection `name`, if it exists.
    pub(crate) fn collection_entry(&self, name: &[u8]) -> Result<Option<CollEntry>> {
        let Some(root) = self.lookup_root(COLLECTIONS.as_bytes())? else {
            return Ok(None);
        };
        match self.tree(root).get(name)? {
            Some(v) => Ok(Some(CollEntry::decode(name, &v)?)),
            None => Ok(None),
        }
    }

    /// The ring of capped collection `name`, opened on first use; `None`
    /// if no such capped collection exists.
    pub(crate) fn ring(&self, name: &[u8]) -> Result<Option<Arc<Ring>>> {
        if let Some(r) = self.rings.read().get(name) {
            return Ok(Some(r.clone()));
        }
        let Some((size, max, st)) = self.collection_entry(name)?.and_then(|e| e.capped) else {
            return Ok(None);
        };
        let mut rings = self.rings.write();
        if let Some(r) = rings.get(name) {
            return Ok(Some(r.clone()));
        }
        let ring = Arc::new(Ring::open(&*self.fs, &self.dir, name, size, max, st)?);
        rings.insert(name.to_vec(), ring.clone());
        Ok(Some(ring))
    }

    /// A collection description is being written (`None`: deleted). A new
    /// or dropped capped collection's ring file (if any, from a collection
    /// of the same name dropped before) is removed, so none of its records
    /// can be taken for the new collection's; the log holds every record
    /// the new collection has. `prepared` is the ring file filled for a new
    /// capped collection ([`crate::capped::prepare_file`]): it takes the
    /// removed file's place (without one, the ring file is made on first
    /// use).
    pub(crate) fn collection_written(
        &self,
        name: &[u8],
        value: Option<&[u8]>,
        prepared: Option<&Path>,
    ) -> Result<()> {
        let fresh = match value {
            None => true,
            Some(v) => match CollEntry::decode(name, v)?.capped {
                Some((_, _, st)) => st.next_id == RingState::empty().next_id,
                None => true,
            },
        };
        if fresh {
            self.rings.write().remove(name);
            self.colls
                .lock()
                .remove(String::from_utf8_lossy(name).as_ref());
            let path = crate::capped::ring_path(&self.dir, name);
            if self
                .fs
                .list(&self.dir)?
                .iter()
                .any(|f| *f == crate::capped::file_name(name))
            {
                self.fs.remove(&path)?;
                if prepared.is_none() {
                    self.fs.sync_dir(&self.dir)?;
                }
            }
            if let (Some(from), Some(_)) = (prepared, value) {
                self.fs.rename(from, &path)?;
                self.fs.sync_dir(&self.dir)?;
            }
        }
        Ok(())
    }

    /// Writes every ring's state into `$collections` (not logged: the log
    /// records of inserts carry their states). Called by a checkpoint's cut
    /// with the write gate closed, so the image holds the states as of the
    /// cut, matching its log position.
    pub(crate) fn persist_ring_states(&self) -> Result<()> {
        let rings: Vec<Arc<Ring>> = self.rings.read().values().cloned().collect();
        if rings.is_empty() {
            return Ok(());
        }
        let Some(root) = self.lookup_root(COLLECTIONS.as_bytes())? else {
            return Ok(());
        };
        for r in rings {
            let st = r.state();
            if r.persisted() == Some(st) {
                continue;
            }
            let entry = CollEntry {
                capped: Some((r.size, r.max, st)),
            };
            self.tree(root)
                .put(&r.name, &StoredValue::Inline(entry.encode()), None)?;
            r.set_persisted(st);
        }
        Ok(())
    }

    /// Asks the background ring writer to write pending ring records.
    pub(crate) fn request_ring_flush(&self) {
        self.ring_wake.lock().0 = true;
        self.ring_cv.notify_one();
    }

    /// The background ring writer: when asked, and every second anyway,
    /// makes the log written so far durable (its own `fdatasync`, outside
    /// group commit, so no committer waits for it) and writes the ring
    /// records that covers, so inserts neither fsync nor hold many pending
    /// bytes. A failure stops writes, as a failed checkpoint does.
    pub(crate) fn run_ring_writer(&self) {
        let mut w = self.ring_wake.lock();
        loop {
            if !w.0 && !w.1 {
                self.ring_cv
                    .wait_for(&mut w, std::time::Duration::from_secs(1));
            }
            if w.1 {
                return;
            }
            w.0 = false;
            drop(w);
            let rings: Vec<Arc<Ring>> = self.rings.read().values().cloned().collect();
            if rings.iter().any(|r| r.pending_bytes() > 0) && self.pager.check_writable().is_ok() {
                let r = self
                    .wal
                    .sync_written()
                    .and_then(|durable| rings.iter().try_for_each(|r| r.flush(durable)))
                    .and_then(|()| {
                        rings
                            .iter()
                            .try_for_each(|r| r.write_back(crate::capped::WRITE_BACK_MIN))
                    });
                if let Err(e) = r {
                    self.pager
                        .stop_writes(&format!("writing capped records failed: {e}"));
                }
            }
            w = self.ring_wake.lock();
        }
    }

    /// Asks the background checkpointer for a checkpoint now (the log has
    /// grown past its checkpoint size).
    pub(crate) fn request_checkpoint(&self) {
        self.ckpt_wake.lock().0 = true;
        self.ckpt_cv.notify_one();
    }

    /// The background checkpointer: a checkpoint every `every` (if set)
    /// and whenever one is requested, until stopped; between checkpoints,
    /// the data file written back every `write_back` (if set; see
    /// [`crate::checkpoint::write_back`]). A failed checkpoint or
    /// write-back stops writes and is reported to writers.
    pub(crate) fn run_checkpointer(
        &self,
        every: Option<std::time::Duration>,
        write_back: Option<std::time::Duration>,
    ) {
        let after = |d: Option<std::time::Duration>| d.map(|d| std::time::Instant::now() + d);
        let mut due = after(every);
        let mut write_back_due = after(write_back);
        let mut w = self.ckpt_wake.lock();
        loop {
            while !w.0 && !w.1 {
                let next = match (due, write_back_due) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                match next {
                    Some(t) => {
                        if self.ckpt_cv.wait_until(&mut w, t).timed_out() {
                            break;
                        }
                    }
                    None => self.ckpt_cv.wait(&mut w),
                }
            }
            if w.1 {
                return;
            }
            let requested = std::mem::take(&mut w.0);
            drop(w);
            let now = std::time::Instant::now();
            if requested || due.is_some_and(|t| now >= t) {
                let whole = self
                    .ckpt
                    .whole_flushes
                    .load(std::sync::atomic::Ordering::Relaxed);
                let _ = crate::checkpoint::checkpoint(self);
                due = after(every);
                // A checkpoint pushes out only its own blocks, unless it
                // had to sync the whole file: only then is the next
                // write-back's clock reset. Otherwise what writers wrote
                // after its cut would wait for the kernel's own
                // write-back, which queues all of it at once.
                if self
                    .ckpt
                    .whole_flushes
                    .load(std::sync::atomic::Ordering::Relaxed)
                    != whole
                {
                    write_back_due = after(write_back);
                }
            } else if write_back_due.is_some_and(|t| now >= t) {
                let _ = crate::checkpoint::write_back(self);
                write_back_due = after(write_back);
            }
            w = self.ckpt_wake.lock();
        }
    }

    pub(crate) fn stop_checkpointer(&self) {
        self.ckpt_wake.lock().1 = true;
        self.ckpt_cv.notify_all();
    }

    /// The data file's preparing thread: grows the file ahead of need and
    /// populates the cache for the room grown ([`Pager::prepare_ahead`]),
    /// until stopped. Failures are left for the writers' own admission
    /// (which reports a full disk) and retried after a pause.
    pub(crate) fn run_file_preparer(&self) {
        let mut gate = PopulateGate::new(self.pool.pages_written_out());
        let mut stop = self.prep_stop.lock();
        while !*stop {
            drop(stop);
            let populate = gate.open(self.pool.pages_written_out(), Instant::now());
            let more = self.pager.check_writable().is_ok()
                && self.pager.prepare_ahead(populate).unwrap_or(false);
            stop = self.prep_stop.lock();
            if !more && !*stop {
                self.prep_cv.wait_for(&mut stop, PREPARE_IDLE);
            }
        }
    }

    pub(crate) fn stop_file_preparer(&self) {
        *self.prep_stop.lock() = true;
        self.prep_cv.notify_all();
    }

    pub(crate) fn stop_ring_writer(&self) {
        self.ring_wake.lock().1 = true;
        self.ring_cv.notify_all();
    }

    /// Syncs the log and writes every ring's records it covers to the ring
    /// files, then syncs them (checkpoints and open).
    pub(crate) fn flush_rings(&self) -> Result<()> {
        let rings: Vec<Arc<Ring>> = self.rings.read().values().cloned().collect();
        if rings.is_empty() {
            return Ok(());
        }
        let durable = self.wal.sync()?;
        for r in rings {
            r.flush(durable)?;
            r.write_back(0)?;
            r.sync()?;
        }
        Ok(())
    }
}

/// Decodes a catalog value (a root page id).
pub(crate) fn decode_root(name: &[u8], v: &[u8]) -> Result<u64> {
    let b: [u8; 8] = v.try_into().map_err(|_| {
        Error::corruption(
            CATALOG_ROOT,
            format!(
                "catalog entry for {:?} is {} bytes",
                String::from_utf8_lossy(name),
                v.len()
            ),
        )
    })?;
    Ok(u64::from_le_bytes(b))
}

/// Loads the durable page map; returns (directory blocks, chunk blocks).
fn read_map(
    file: &dyn crate::io::FileIo,
    page_size: usize,
    m: &Meta,
    map: &PageMap,
    file_blocks: u64,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let nchunks = m.map_chunks as usize;
    let empty = nchunks == 0 && m.dir_block == 0;
    let per_chunk = pagemap::chunk_entries(page_size);
    if nchunks > pagemap::max_disk_chunks(page_size)
        || (!empty && (m.next_pid as usize).div_ceil(per_chunk) != nchunks)
    {
        return Err(Error::corruption(
            0,
            format!(
                "meta lists {nchunks} map chunks for {} page ids",
                m.next_pid
            ),
        ));
    }
    let mut buf = vec![0u8; page_size];
    let read = |blk: u64, buf: &mut [u8]| -> Result<()> {
        if blk < crate::alloc::META_BLOCKS || blk >= file_blocks {
            return Err(Error::corruption(
                blk,
                format!("block {blk} is outside the file ({file_blocks} blocks)"),
            ));
        }
        file.read_exact_at(buf, blk * page_size as u64)?;
        Ok(())
    };
    let mut dirs = Vec::new();
    let mut chunks = Vec::with_capacity(nchunks);
    let mut next = m.dir_block;
    while chunks.len() < nchunks {
        if next == 0 {
            return Err(Error::corruption(0, "map directory ends early"));
        }
        read(next, &mut buf)?;
        page::check(&buf, &[PageKind::MapDirectory], dirs.len() as u64, next)?;
        let n = page::count(&buf);
        if n == 0 || n > per_chunk || chunks.len() + n > nchunks {
            return Err(Error::corruption(
                next,
                "map directory page has a bad entry count",
            ));
        }
        chunks.extend((0..n).map(|i| get_u64(&buf, HEADER_SIZE + i * 8)));
        dirs.push(next);
        next = page::aux(&buf);
    }
    for (c, &blk) in chunks.iter().enumerate() {
        if blk == 0 {
            continue;
        }
        read(blk, &mut buf)?;
        page::check(&buf, &[PageKind::MapChunk], c as u64, blk)?;
        for j in 0..per_chunk {
            let pid = (c * per_chunk + j) as u64;
            let v = get_u64(&buf, HEADER_SIZE + j * 8);
            if pid >= m.next_pid || v == NO_BLOCK {
                continue;
            }
            if v < crate::alloc::META_BLOCKS || v >= file_blocks {
                return Err(Error::corruption(
                    pid,
                    format!("mapped to block {v}, outside the file ({file_blocks} blocks)"),
                ));
            }
            map.swap_block(pid, v);
        }
    }
    Ok((dirs, chunks))
}

/// Whether `file` (of `len` bytes) is what an interrupted creation leaves,
/// at some page size: at most the two meta slots long, neither holding a
/// valid meta page, slot 0 never written and slot 1 empty or a torn copy
/// of the first meta page (its magic in place, when it is long enough to
/// hold it). Anything else that fails to open is a foreign or damaged file
/// and stays untouched. (A database of any page size holds its first meta
/// page in slot 1, which lies inside slot 0 of every larger page size, so
/// only an empty file passes at a size other than its own.)
fn interrupted_creation(file: &dyn FileIo, len: u64) -> Result<bool> {
    if len > 2 * page::MAX_PAGE_SIZE as u64 {
        return Ok(false);
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0)?;
    let mut ps = page::MIN_PAGE_SIZE;
    while ps <= page::MAX_PAGE_SIZE {
        if len <= 2 * ps as u64 {
            let (slot0, slot1) = buf.split_at(buf.len().min(ps));
            if slot0.iter().all(|&b| b == 0)
                && !(slot1.len() == ps && meta::Meta::decode(slot1, 1).is_ok_and(|m| m.is_some()))
                && meta::torn_first_meta(slot1)
            {
                return Ok(true);
            }
        }
        ps *= 2;
    }
    Ok(false)
}
