//! Counters for every mechanism, gathered into one [`Stats`] snapshot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::engine::Engine;

/// Operations counted by kind, and per table and per collection.
#[derive(Default)]
pub(crate) struct OpCounters {
    pub(crate) gets: AtomicU64,
    pub(crate) puts: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) scans: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) txn_commits: AtomicU64,
    pub(crate) doc_inserts: AtomicU64,
    pub(crate) doc_finds: AtomicU64,
    pub(crate) doc_replaces: AtomicU64,
    pub(crate) doc_deletes: AtomicU64,
    /// Statistics log lines that could not be written.
    pub(crate) statlog_errors: AtomicU64,
    tables: parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>,
    collections: parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>,
}

/// Reads, writes and scans of one table or collection.
#[derive(Default)]
pub(crate) struct NamedOps {
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) scans: AtomicU64,
}

/// Runs `f` on the counters of the table or collection `name` in `map`,
/// making them on first use; under the read lock when they exist.
fn with_named<R>(
    map: &parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>,
    name: &str,
    f: impl Fn(&Arc<NamedOps>) -> R,
) -> R {
    if let Some(o) = map.read().get(name) {
        return f(o);
    }
    f(map.write().entry(name.to_string()).or_default())
}

fn named(map: &parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>, name: &str) -> Arc<NamedOps> {
    with_named(map, name, Arc::clone)
}

/// Counts `what` of the table or collection `name` without taking a
/// reference to its counters (a commit that only counts has no use for
/// one, and its two atomic updates on a line every writer shares cost more
/// than the count).
fn count_named(
    map: &parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>,
    name: &str,
    what: impl Fn(&NamedOps) -> &AtomicU64,
) {
    with_named(map, name, |o| bump(what(o)));
}

impl OpCounters {
    /// Counts one write to table `name`.
    pub(crate) fn table_write(&self, name: &str) {
        count_named(&self.tables, name, |o| &o.writes);
    }

    /// Counts one write to collection `name`.
    pub(crate) fn collection_write(&self, name: &str) {
        count_named(&self.collections, name, |o| &o.writes);
    }

    /// The counters of table `name` (made on first use).
    pub(crate) fn table(&self, name: &str) -> Arc<NamedOps> {
        named(&self.tables, name)
    }

    /// The counters of collection `name` (made on first use).
    pub(crate) fn collection(&self, name: &str) -> Arc<NamedOps> {
        named(&self.collections, name)
    }

    fn list(map: &parking_lot::RwLock<HashMap<String, Arc<NamedOps>>>) -> Vec<NamedStats> {
        let mut out: Vec<NamedStats> = map
            .read()
            .iter()
            .filter(|(name, _)| !name.is_empty())
            .map(|(name, o)| NamedStats {
                name: name.clone(),
                reads: o.reads.load(Ordering::Relaxed),
                writes: o.writes.load(Ordering::Relaxed),
                scans: o.scans.load(Ordering::Relaxed),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Operations on one table or collection since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedStats {
    /// The table's or collection's name.
    pub name: String,
    /// Point reads (`get`, `find_one`).
    pub reads: u64,
    /// Writes (puts and deletes; inserts, replaces and deletes).
    pub writes: u64,
    /// Range scans and cursors opened.
    pub scans: u64,
}

/// A snapshot of the engine's counters. Gauges are values at the moment of
/// the call; counters count since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Microseconds since the database was opened.
    pub uptime_us: u64,
    /// Point reads of tables (`get`, in and out of transactions).
    pub ops_get: u64,
    /// Puts (single, in batches and in committed transactions).
    pub ops_put: u64,
    /// Deletes of keys (single, in batches and in committed transactions).
    pub ops_delete: u64,
    /// Range scans opened.
    pub ops_scan: u64,
    /// Batches written (`Database::write`).
    pub ops_batch: u64,
    /// Write transactions committed.
    pub ops_txn_commit: u64,
    /// Documents inserted.
    pub ops_doc_insert: u64,
    /// Document lookups by `_id` and cursors opened.
    pub ops_doc_find: u64,
    /// Documents replaced.
    pub ops_doc_replace: u64,
    /// Documents deleted (capped removals not included).
    pub ops_doc_delete: u64,
    /// Statistics log lines that could not be written.
    pub statistics_log_errors: u64,
    /// `eviction_target` in bytes: background eviction keeps use under it.
    pub cache_eviction_target: u64,
    /// `eviction_trigger` in bytes: above it, application threads evict.
    pub cache_eviction_trigger: u64,
    /// `eviction_dirty_target` in bytes.
    pub cache_dirty_target: u64,
    /// `eviction_dirty_trigger` in bytes.
    pub cache_dirty_trigger: u64,
    /// Bytes of cache frames for pages: the configured `cache_size` less
    /// the version budget.
    pub cache_size: u64,
    /// Bytes of cache frames holding pages or checkpoint shadow copies.
    pub cache_bytes_used: u64,
    /// Bytes of cache frames holding dirty pages.
    pub cache_bytes_dirty: u64,
    /// Bytes of cache frames in standby: free for any thread to take, and
    /// until then holding a clean page a lookup can take back. Not part of
    /// `cache_bytes_used`; the two together never exceed `cache_size`.
    pub cache_bytes_standby: u64,
    /// Highest `cache_bytes_used` seen.
    pub cache_bytes_peak: u64,
    /// Pages read from the data file (tree and overflow pages).
    pub pages_read: u64,
    /// Pages written to the data file (eviction, checkpoint, overflow).
    pub pages_written: u64,
    /// Of `pages_written`, evictions that wrote a page over its own block,
    /// which it had taken since the last checkpoint and no checkpoint
    /// references; the others take a new block.
    pub pages_rewritten_in_place: u64,
    /// Evictions that found the page's own block in the data file's
    /// write-back step in flight, and wrote the page to a new block
    /// instead of waiting for the device.
    pub pages_moved_from_write_back: u64,
    /// Bytes written to the data file, meta pages excluded.
    pub bytes_written: u64,
    /// Bytes read from the data file for pages: a node page stored packed
    /// is read without its free gap once its block's length is known.
    pub bytes_read: u64,
    /// Clean pages evicted.
    pub pages_evicted_clean: u64,
    /// Dirty pages evicted (each written to a new block first).
    pub pages_evicted_dirty: u64,
    /// Dirty pages written back (to a new block) and kept cached, clean:
    /// what meeting the dirty target does to a page touched again since
    /// the eviction hand last passed it.
    pub pages_cleaned: u64,
    /// Pages the eviction hand examined.
    pub pages_examined: u64,
    /// Lookups that found their page in standby and took it back instead of
    /// reading it: the background worker had evicted it for
    /// `eviction_target`, and its frame, free, was not taken yet.
    pub pages_reclaimed_from_standby: u64,
    /// Frames taken from standby: their pages left the cache only then.
    pub standby_frames_taken: u64,
    /// Times a thread signalled the eviction workers to run (a signal not
    /// already pending). A worker woken evicts down to `eviction_target`,
    /// so under steady pressure there are many pages read or written per
    /// signal, not one.
    pub eviction_worker_wakes: u64,
    /// Evictions performed by application threads (counting the hot dirty
    /// pages they cleaned, kept cached, when only the dirty trigger was
    /// passed).
    pub app_thread_evictions: u64,
    /// Total time application threads spent evicting, in microseconds.
    pub app_thread_eviction_us: u64,
    /// Longest single wait any operation had for cache space, in microseconds.
    pub max_cache_wait_us: u64,
    /// Pages copied aside for a running checkpoint before a writer changed them.
    pub checkpoint_shadow_copies: u64,
    /// Evictions that failed with an I/O error.
    pub eviction_errors: u64,
    /// Checkpoints completed (including idle ones).
    pub checkpoints: u64,
    /// Checkpoints that found nothing to write.
    pub checkpoints_idle: u64,
    /// Duration of the last checkpoint, in microseconds.
    pub checkpoint_last_us: u64,
    /// Longest checkpoint, in microseconds.
    pub checkpoint_max_us: u64,
    /// Pages written by checkpoints.
    pub checkpoint_pages_written: u64,
    /// Whether a checkpoint is running now.
    pub checkpoint_running: bool,
    /// Microseconds the data file has spent being flushed to the device
    /// since open (the steps and `fdatasync` of checkpoints and of
    /// write-backs between them), the flush in progress included.
    pub data_flush_us: u64,
    /// Write-backs of the data file between checkpoints
    /// (`Builder::write_back_interval`).
    pub data_write_backs: u64,
    /// Bytes of every page of this database, chosen when it was created
    /// (`Builder::page_size`).
    pub page_size: u64,
    /// Size of the data file in bytes.
    pub file_size: u64,
    /// Bytes of free blocks inside the data file.
    pub file_free_bytes: u64,
    /// Bytes of the data file up to the end of its highest block in use
    /// at open or handed out since (`compact` lowers it to the blocks in
    /// use): the blocks in use and the free blocks among them. The rest of `file_size` is room
    /// preallocated ahead of the writes admitted, which grows by steps
    /// and with the size of those writes, so reuse of freed blocks shows
    /// here rather than in `file_size`.
    pub file_high_water_bytes: u64,
    /// Bytes of blocks waiting for a checkpoint before they can be reused.
    pub file_limbo_bytes: u64,
    /// Times the data file grew (by preallocation, a large step at a time).
    pub file_growths: u64,
    /// Of `file_growths`, those made by a thread that needed the room for
    /// a write it was making (a commit's admission, an eviction, a
    /// checkpoint's page) rather than ahead of need by the preparing
    /// thread.
    pub file_growths_by_writes: u64,
    /// Of `file_growths`, those made while the data file was being flushed
    /// (a checkpoint or a write-back), when growing waits for the device.
    pub file_growths_while_flushing: u64,
    /// Bytes of grown room the preparing thread asked the operating system
    /// to cache ahead of the first writes into it.
    pub file_bytes_populated: u64,
    /// Bytes of pages whose block was new room not yet populated when the
    /// page was first written there: each such write took page-cache
    /// memory itself.
    pub file_bytes_written_unpopulated: u64,
    /// Leaves merged into a sibling after deletes left them under a quarter
    /// full.
    pub tree_leaves_merged: u64,
    /// Leaves that deletes emptied, unlinked from their parent and freed.
    pub tree_leaves_unlinked: u64,
    /// Branches merged into a sibling after merges below left them under a
    /// quarter full.
    pub tree_branches_merged: u64,
    /// Times a root left with one child took its content: the tree got a
    /// level shorter.
    pub tree_roots_collapsed: u64,
    /// The process's memory limit (its cgroup's) found at open, in bytes;
    /// 0 if none was found or `Builder::os_cache` is not `Auto`.
    pub memory_limit_bytes: u64,
    /// Whether reads and writes of the data file drop their pages from the
    /// operating system's cache now (`Builder::os_cache`).
    pub os_cache_drop_behind: bool,
    /// Bytes written to the log (records and their alignment).
    pub log_bytes_written: u64,
    /// Log records (committed batches) written.
    pub log_records: u64,
    /// Groups written: each is one write call for all its records.
    pub log_groups: u64,
    /// Most records in one group.
    pub log_max_group: u64,
    /// Log fsyncs.
    pub log_fsyncs: u64,
    /// Time committers spent waiting for room in a group buffer, in
    /// microseconds (summed over committers).
    pub log_slot_wait_us: u64,
    /// Time committers spent waiting for their group's write or fsync, in
    /// microseconds (summed over committers).
    pub log_sync_wait_us: u64,
    /// Log segment files created.
    pub log_segments_created: u64,
    /// Log segment files recycled after a checkpoint.
    pub log_segments_recycled: u64,
    /// Log segment files removed: let go by a checkpoint while enough
    /// spares were kept, or spares beyond twice what the log went through
    /// between two of the last 8 checkpoints.
    pub log_segments_removed: u64,
    /// Recycling of old log segments that failed (they stay; the next
    /// checkpoint retries).
    pub log_recycle_errors: u64,
    /// Stream position of the next log record.
    pub log_position: u64,
    /// Stream position up to which the log is durable.
    pub log_synced: u64,
    /// Snapshots live now (read and write transactions, open iterators).
    pub snapshots_active: u64,
    /// Age of the oldest live snapshot, in microseconds.
    pub snapshot_oldest_age_us: u64,
    /// Old versions kept for live snapshots.
    pub versions_kept: u64,
    /// Bytes charged for those versions (against the version budget).
    pub versions_bytes: u64,
    /// The version budget in bytes (`version_budget` percent of `cache_size`).
    pub versions_budget: u64,
    /// Write transactions refused with a conflict.
    pub txn_conflicts: u64,
    /// Reads and commits refused with `SnapshotTooOld`.
    pub snapshot_too_old_errors: u64,
    /// Snapshots invalidated to keep versions within the budget.
    pub snapshots_invalidated: u64,
    /// Open capped collections.
    pub capped_collections: u64,
    /// Records in them.
    pub capped_records: u64,
    /// Record bytes in them, headers included.
    pub capped_bytes: u64,
    /// Records removed from rings to make room, since open.
    pub capped_records_removed: u64,
    /// The fewest records any capped collection of the same sizes could
    /// have removed for the same inserts: one whose live records are always
    /// the longest suffix of the inserts that fits in its size (so it could
    /// use every free byte, even the skipped end of a ring).
    pub capped_records_removed_min: u64,
    /// Ring bytes waiting for their log to become durable.
    pub capped_pending_bytes: u64,
    /// Operations per table (engine tables of collections included), by
    /// name.
    pub tables: Vec<NamedStats>,
    /// Operations per collection, by name.
    pub collections: Vec<NamedStats>,
}

impl Stats {
    /// Average records per log group, 0 when no group was written.
    pub fn log_avg_group(&self) -> f64 {
        if self.log_groups == 0 {
            0.0
        } else {
            self.log_records as f64 / self.log_groups as f64
        }
    }
}

pub(crate) fn collect(e: &Engine) -> Stats {
    let rings: Vec<_> = e.rings.read().values().cloned().collect();
    let p = &e.pool.counters;
    let c = &e.ckpt;
    let a = e.pager.alloc.stats();
    let (snaps, oldest, kept, vbytes) = e.versions.gauges();
    let v = &e.versions.counters;
    // Preallocated blocks past the last allocated one are free space too.
    let file_blocks = e.pager.file_blocks().max(a.file_blocks);
    let page = e.pager.page_size as u64;
    let ld = |x: &std::sync::atomic::AtomicU64| x.load(Ordering::Relaxed);
    let log = e.wal.stats();
    let o = &e.ops;
    let cfg = &e.pool.cfg;
    Stats {
        uptime_us: e.opened.elapsed().as_micros() as u64,
        ops_get: ld(&o.gets),
        ops_put: ld(&o.puts),
        ops_delete: ld(&o.deletes),
        ops_scan: ld(&o.scans),
        ops_batch: ld(&o.batches),
        ops_txn_commit: ld(&o.txn_commits),
        ops_doc_insert: ld(&o.doc_inserts),
        ops_doc_find: ld(&o.doc_finds),
        ops_doc_replace: ld(&o.doc_replaces),
        ops_doc_delete: ld(&o.doc_deletes),
        statistics_log_errors: ld(&o.statlog_errors),
        cache_eviction_target: cfg.target as u64 * page,
        cache_eviction_trigger: cfg.trigger as u64 * page,
        cache_dirty_target: cfg.dirty_target as u64 * page,
        cache_dirty_trigger: cfg.dirty_trigger as u64 * page,
        tables: OpCounters::list(&o.tables),
        collections: OpCounters::list(&o.collections),
        page_size: page,
        cache_size: cfg.frames as u64 * page,
        cache_bytes_used: e.pool.used.load(Ordering::Relaxed) as u64 * page,
        cache_bytes_dirty: e.pool.dirty.load(Ordering::Relaxed) as u64 * page,
        cache_bytes_standby: e.pool.standby.load(Ordering::Relaxed) as u64 * page,
        cache_bytes_peak: p.peak_used.load(Ordering::Relaxed) as u64 * page,
        pages_read: ld(&e.pager.counters.pages_read),
        pages_written: ld(&e.pager.counters.pages_written),
        pages_rewritten_in_place: ld(&e.pager.counters.pages_rewritten_in_place),
        pages_moved_from_write_back: ld(&e.pager.counters.pages_moved_from_write_back),
        bytes_written: ld(&e.pager.counters.bytes_written),
        bytes_read: ld(&e.pager.counters.bytes_read),
        pages_evicted_clean: ld(&p.evicted_clean),
        pages_evicted_dirty: ld(&p.evicted_dirty),
        pages_cleaned: ld(&p.cleaned),
        pages_examined: ld(&p.examined),
        pages_reclaimed_from_standby: ld(&p.reclaimed),
        standby_frames_taken: ld(&p.standby_taken),
        eviction_worker_wakes: ld(&p.worker_wakes),
        app_thread_evictions: ld(&p.app_evictions),
        app_thread_eviction_us: ld(&p.app_eviction_ns) / 1000,
        max_cache_wait_us: ld(&p.max_wait_ns) / 1000,
        checkpoint_shadow_copies: ld(&p.shadow_copies),
        eviction_errors: ld(&p.eviction_errors),
        checkpoints: ld(&c.count),
        checkpoints_idle: ld(&c.idle),
        checkpoint_last_us: ld(&c.last_ns) / 1000,
        checkpoint_max_us: ld(&c.max_ns) / 1000,
        checkpoint_pages_written: ld(&c.pages_written),
        tree_leaves_merged: ld(&e.pager.counters.leaves_merged),
        tree_leaves_unlinked: ld(&e.pager.counters.leaves_unlinked),
        tree_branches_merged: ld(&e.pager.counters.branches_merged),
        tree_roots_collapsed: ld(&e.pager.counters.roots_collapsed),
        data_write_backs: ld(&c.write_backs),
        checkpoint_running: ld(&c.running) != 0,
        data_flush_us: e.pager.flush_time_ns() / 1000,
        file_size: file_blocks * page,
        file_free_bytes: (a.free_blocks + (file_blocks - a.file_blocks)) * page,
        file_high_water_bytes: a.file_blocks * page,
        file_limbo_bytes: a.limbo_blocks * page,
        file_growths: ld(&e.pager.counters.file_growths),
        file_growths_by_writes: ld(&e.pager.counters.file_growths_by_writes),
        file_growths_while_flushing: ld(&e.pager.counters.file_growths_while_flushing),
        file_bytes_populated: ld(&e.pager.counters.blocks_populated) * page,
        file_bytes_written_unpopulated: ld(&e.pager.counters.blocks_written_unpopulated) * page,
        memory_limit_bytes: e.pager.os_cache.limit.unwrap_or(0),
        os_cache_drop_behind: e.pager.os_cache.dropping.load(Ordering::Relaxed),
        log_bytes_written: log.bytes,
        log_records: log.records,
        log_groups: log.groups,
        log_max_group: log.max_group,
        log_fsyncs: log.fsyncs,
        log_slot_wait_us: log.slot_wait_ns / 1000,
        log_sync_wait_us: log.sync_wait_ns / 1000,
        log_segments_created: log.segments_created,
        log_segments_recycled: log.segments_recycled,
        log_segments_removed: log.segments_removed,
        log_recycle_errors: log.recycle_errors,
        log_position: log.position,
        log_synced: log.synced,
        snapshots_active: snaps,
        snapshot_oldest_age_us: oldest,
        versions_kept: kept,
        versions_bytes: vbytes,
        versions_budget: e.versions.budget(),
        txn_conflicts: v.conflicts.load(Ordering::Relaxed),
        snapshot_too_old_errors: v.too_old.load(Ordering::Relaxed),
        snapshots_invalidated: v.invalidated.load(Ordering::Relaxed),
        capped_collections: rings.len() as u64,
        capped_records: rings.iter().map(|r| r.state().count).sum(),
        capped_bytes: rings.iter().map(|r| r.state().bytes).sum(),
        capped_records_removed: rings
            .iter()
            .map(|r| r.removed.load(Ordering::Relaxed))
            .sum(),
        capped_records_removed_min: rings
            .iter()
            .map(|r| {
                r.removed
                    .load(Ordering::Relaxed)
                    .saturating_sub(r.removed_beyond_minimum())
            })
            .sum(),
        capped_pending_bytes: rings.iter().map(|r| r.pending_bytes()).sum(),
    }
}

impl Stats {
    /// Every field as (name, value) pairs, in declaration order, for
    /// printing and JSON.
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("uptime_us", self.uptime_us),
            ("ops_get", self.ops_get),
            ("ops_put", self.ops_put),
            ("ops_delete", self.ops_delete),
            ("ops_scan", self.ops_scan),
            ("ops_batch", self.ops_batch),
            ("ops_txn_commit", self.ops_txn_commit),
            ("ops_doc_insert", self.ops_doc_insert),
            ("ops_doc_find", self.ops_doc_find),
            ("ops_doc_replace", self.ops_doc_replace),
            ("ops_doc_delete", self.ops_doc_delete),
            ("statistics_log_errors", self.statistics_log_errors),
            ("cache_size", self.cache_size),
            ("cache_eviction_target", self.cache_eviction_target),
            ("cache_eviction_trigger", self.cache_eviction_trigger),
            ("cache_dirty_target", self.cache_dirty_target),
            ("cache_dirty_trigger", self.cache_dirty_trigger),
            ("cache_bytes_used", self.cache_bytes_used),
            ("cache_bytes_dirty", self.cache_bytes_dirty),
            ("cache_bytes_standby", self.cache_bytes_standby),
            ("cache_bytes_peak", self.cache_bytes_peak),
            ("pages_read", self.pages_read),
            ("pages_written", self.pages_written),
            ("pages_rewritten_in_place", self.pages_rewritten_in_place),
            (
                "pages_moved_from_write_back",
                self.pages_moved_from_write_back,
            ),
            ("bytes_written", self.bytes_written),
            ("bytes_read", self.bytes_read),
            ("pages_evicted_clean", self.pages_evicted_clean),
            ("pages_evicted_dirty", self.pages_evicted_dirty),
            ("pages_cleaned", self.pages_cleaned),
            ("pages_examined", self.pages_examined),
            (
                "pages_reclaimed_from_standby",
                self.pages_reclaimed_from_standby,
            ),
            ("standby_frames_taken", self.standby_frames_taken),
            ("eviction_worker_wakes", self.eviction_worker_wakes),
            ("app_thread_evictions", self.app_thread_evictions),
            ("app_thread_eviction_us", self.app_thread_eviction_us),
            ("max_cache_wait_us", self.max_cache_wait_us),
            ("checkpoint_shadow_copies", self.checkpoint_shadow_copies),
            ("eviction_errors", self.eviction_errors),
            ("checkpoints", self.checkpoints),
            ("checkpoints_idle", self.checkpoints_idle),
            ("checkpoint_last_us", self.checkpoint_last_us),
            ("checkpoint_max_us", self.checkpoint_max_us),
            ("checkpoint_pages_written", self.checkpoint_pages_written),
            ("checkpoint_running", u64::from(self.checkpoint_running)),
            ("data_flush_us", self.data_flush_us),
            ("data_write_backs", self.data_write_backs),
            ("page_size", self.page_size),
            ("file_size", self.file_size),
            ("file_free_bytes", self.file_free_bytes),
            ("file_high_water_bytes", self.file_high_water_bytes),
            ("file_limbo_bytes", self.file_limbo_bytes),
            ("file_growths", self.file_growths),
            ("file_growths_by_writes", self.file_growths_by_writes),
            (
                "file_growths_while_flushing",
                self.file_growths_while_flushing,
            ),
            ("file_bytes_populated", self.file_bytes_populated),
            (
                "file_bytes_written_unpopulated",
                self.file_bytes_written_unpopulated,
            ),
            ("tree_leaves_merged", self.tree_leaves_merged),
            ("tree_leaves_unlinked", self.tree_leaves_unlinked),
            ("tree_branches_merged", self.tree_branches_merged),
            ("tree_roots_collapsed", self.tree_roots_collapsed),
            ("memory_limit_bytes", self.memory_limit_bytes),
            ("os_cache_drop_behind", u64::from(self.os_cache_drop_behind)),
            ("log_bytes_written", self.log_bytes_written),
            ("log_records", self.log_records),
            ("log_groups", self.log_groups),
            ("log_max_group", self.log_max_group),
            ("log_fsyncs", self.log_fsyncs),
            ("log_slot_wait_us", self.log_slot_wait_us),
            ("log_sync_wait_us", self.log_sync_wait_us),
            ("log_segments_created", self.log_segments_created),
            ("log_segments_recycled", self.log_segments_recycled),
            ("log_segments_removed", self.log_segments_removed),
            ("log_recycle_errors", self.log_recycle_errors),
            ("log_position", self.log_position),
            ("log_synced", self.log_synced),
            ("snapshots_active", self.snapshots_active),
            ("snapshot_oldest_age_us", self.snapshot_oldest_age_us),
            ("versions_kept", self.versions_kept),
            ("versions_bytes", self.versions_bytes),
            ("versions_budget", self.versions_budget),
            ("txn_conflicts", self.txn_conflicts),
            ("snapshot_too_old_errors", self.snapshot_too_old_errors),
            ("snapshots_invalidated", self.snapshots_invalidated),
            ("capped_collections", self.capped_collections),
            ("capped_records", self.capped_records),
            ("capped_bytes", self.capped_bytes),
            ("capped_records_removed", self.capped_records_removed),
            (
                "capped_records_removed_min",
                self.capped_records_removed_min,
            ),
            ("capped_pending_bytes", self.capped_pending_bytes),
        ]
    }
}
