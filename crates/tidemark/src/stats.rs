//! Counters for every mechanism, gathered into one [`Stats`] snapshot.

use std::sync::atomic::Ordering;

use crate::engine::Engine;
use crate::page::PAGE_SIZE;

/// A snapshot of the engine's counters. Gauges are values at the moment of
/// the call; counters count since open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Bytes of cache frames for pages: the configured `cache_size` less
    /// the version budget.
    pub cache_size: u64,
    /// Bytes of cache frames holding pages or checkpoint shadow copies.
    pub cache_bytes_used: u64,
    /// Bytes of cache frames holding dirty pages.
    pub cache_bytes_dirty: u64,
    /// Highest `cache_bytes_used` seen.
    pub cache_bytes_peak: u64,
    /// Pages read from the data file (tree and overflow pages).
    pub pages_read: u64,
    /// Pages written to the data file (eviction, checkpoint, overflow).
    pub pages_written: u64,
    /// Bytes written to the data file, meta pages excluded.
    pub bytes_written: u64,
    /// Clean pages evicted.
    pub pages_evicted_clean: u64,
    /// Dirty pages evicted (each written to a new block first).
    pub pages_evicted_dirty: u64,
    /// Pages the eviction hand examined.
    pub pages_examined: u64,
    /// Evictions performed by application threads.
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
    /// Size of the data file in bytes.
    pub file_size: u64,
    /// Bytes of free blocks inside the data file.
    pub file_free_bytes: u64,
    /// Bytes of blocks waiting for a checkpoint before they can be reused.
    pub file_limbo_bytes: u64,
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
    let page = PAGE_SIZE as u64;
    let ld = |x: &std::sync::atomic::AtomicU64| x.load(Ordering::Relaxed);
    let log = e.wal.stats();
    Stats {
        cache_size: (e.pool.cfg.frames * PAGE_SIZE) as u64,
        cache_bytes_used: e.pool.used.load(Ordering::Relaxed) as u64 * page,
        cache_bytes_dirty: e.pool.dirty.load(Ordering::Relaxed) as u64 * page,
        cache_bytes_peak: p.peak_used.load(Ordering::Relaxed) as u64 * page,
        pages_read: ld(&e.pager.counters.pages_read),
        pages_written: ld(&e.pager.counters.pages_written),
        bytes_written: ld(&e.pager.counters.bytes_written),
        pages_evicted_clean: ld(&p.evicted_clean),
        pages_evicted_dirty: ld(&p.evicted_dirty),
        pages_examined: ld(&p.examined),
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
        checkpoint_running: ld(&c.running) != 0,
        file_size: file_blocks * page,
        file_free_bytes: (a.free_blocks + (file_blocks - a.file_blocks)) * page,
        file_limbo_bytes: a.limbo_blocks * page,
        log_bytes_written: log.bytes,
        log_records: log.records,
        log_groups: log.groups,
        log_max_group: log.max_group,
        log_fsyncs: log.fsyncs,
        log_slot_wait_us: log.slot_wait_ns / 1000,
        log_sync_wait_us: log.sync_wait_ns / 1000,
        log_segments_created: log.segments_created,
        log_segments_recycled: log.segments_recycled,
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
            ("cache_size", self.cache_size),
            ("cache_bytes_used", self.cache_bytes_used),
            ("cache_bytes_dirty", self.cache_bytes_dirty),
            ("cache_bytes_peak", self.cache_bytes_peak),
            ("pages_read", self.pages_read),
            ("pages_written", self.pages_written),
            ("bytes_written", self.bytes_written),
            ("pages_evicted_clean", self.pages_evicted_clean),
            ("pages_evicted_dirty", self.pages_evicted_dirty),
            ("pages_examined", self.pages_examined),
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
            ("file_size", self.file_size),
            ("file_free_bytes", self.file_free_bytes),
            ("file_limbo_bytes", self.file_limbo_bytes),
            ("log_bytes_written", self.log_bytes_written),
            ("log_records", self.log_records),
            ("log_groups", self.log_groups),
            ("log_max_group", self.log_max_group),
            ("log_fsyncs", self.log_fsyncs),
            ("log_slot_wait_us", self.log_slot_wait_us),
            ("log_sync_wait_us", self.log_sync_wait_us),
            ("log_segments_created", self.log_segments_created),
            ("log_segments_recycled", self.log_segments_recycled),
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
