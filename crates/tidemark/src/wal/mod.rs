//! The write-ahead log: logical redo records for every committed batch,
//! written with group commit into recycled segment files, replayed on open
//! from the position the last checkpoint covers.
//!
//! * [`record`]: framing (length, LSN, synced position, crc32c) and the
//!   batch payload codec.
//! * [`group`]: the group commit protocol (lock-free join, one leader
//!   writes and fsyncs for everyone in its group).
//! * [`segment`]: the segment files, their creation and recycling.
//! * [`recover`]: replay, torn-tail cut, corruption detection.
//!
//! Ordering (ARCHITECTURE.md, "Order of a write"): a batch enters the write
//! gate, locks the key stripes it writes, reserves and fills its log
//! record, applies itself to the tree, then releases the stripes and the
//! gate and waits for the durability it asked for. Two batches writing one
//! key hold its stripe in turn, so they reserve log positions in the order
//! they apply; and a checkpoint cut, taken with the gate closed, is a point
//! in the log: every record before it is in the checkpoint, none after.

pub(crate) mod group;
pub(crate) mod record;
pub(crate) mod recover;
pub(crate) mod segment;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::io::FileSystem;

use group::GroupLog;
use record::{LogOp, HEADER, KIND_BATCH};
use segment::Segments;

/// Name prefix of log segment files in the database directory.
pub const LOG_FILE_PREFIX: &str = "wal-";
/// Default size of a log segment file.
pub const DEFAULT_SEGMENT_SIZE: u64 = 16 << 20;
/// Bytes of each group buffer (two alternate).
const SLOT_CAPACITY: u64 = 1 << 20;

/// When a commit returns, what has happened to it. Chosen per commit, with
/// a database-wide default ([`crate::Builder::durability`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Applied in memory and queued for the log: lost if the process dies
    /// before a later commit writes the log or a checkpoint covers it.
    None,
    /// Handed to the operating system: survives a crash of the process,
    /// not of the machine.
    #[default]
    Write,
    /// On stable storage (`fdatasync`): survives a crash of the machine.
    Fsync,
}

impl std::str::FromStr for Durability {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Durability::None),
            "write" => Ok(Durability::Write),
            "fsync" => Ok(Durability::Fsync),
            _ => Err(crate::Error::InvalidOption(format!(
                "durability {s:?}: expected none, write or fsync"
            ))),
        }
    }
}

/// A record in the log, to wait on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    end: u64,
    slot: usize,
    durability: Durability,
    /// Blocks of data-file room promised to this commit at admission
    /// (`Engine::log`), given back once it is applied.
    pub(crate) promised: u64,
}

impl Ticket {
    /// Stream position just past the record.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }
}

pub(crate) struct Wal {
    pub(crate) group: GroupLog,
    pub(crate) segs: Segments,
    /// Where replay starts: the position the durable checkpoint covers.
    start: u64,
    /// The position the last durable checkpoint covers (the log before it
    /// is no longer needed).
    covered: AtomicU64,
    /// Log bytes past `covered` at which a checkpoint is asked for (0:
    /// never).
    checkpoint_at: AtomicU64,
    /// A checkpoint was asked for since the last one ended.
    asked: AtomicBool,
}

impl Wal {
    /// Opens the log in `dir`; records go at `start` until [`Wal::replay`]
    /// and [`Wal::restart`] move past what is already there.
    pub(crate) fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        segment_size: u64,
        start: u64,
    ) -> Result<Wal> {
        Ok(Wal {
            group: GroupLog::new(start, SLOT_CAPACITY),
            segs: Segments::open(fs, dir, segment_size)?,
            start,
            covered: AtomicU64::new(start),
            checkpoint_at: AtomicU64::new(0),
            asked: AtomicBool::new(false),
        })
    }

    /// Replays every record from the start position through `apply`.
    pub(crate) fn replay(
        &self,
        apply: &mut dyn FnMut(&[LogOp<'_>]) -> Result<()>,
    ) -> Result<recover::Recovered> {
        recover::replay(&self.segs, self.start, apply)
    }

    /// After [`Wal::replay`]: erases leftovers past the end and appends
    /// after the last record replayed.
    pub(crate) fn restart(&mut self, found: &recover::Recovered) -> Result<()> {
        for &q in &found.stale {
            self.segs.erase_header(q)?;
        }
        self.group = GroupLog::new(found.end, SLOT_CAPACITY);
        self.start = found.end;
        Ok(())
    }

    /// Appends one batch record. Called inside the write gate with the
    /// batch's key stripes held; returns what to wait on after releasing
    /// them.
    pub(crate) fn append(&self, ops: &[LogOp<'_>], durability: Durability) -> Result<Ticket> {
        self.append_sized(ops, record::payload_len(ops), durability)
    }

    /// [`Wal::append`] of a record whose payload length (`plen`, from
    /// [`Wal::admit`]) is already known.
    pub(crate) fn append_sized(
        &self,
        ops: &[LogOp<'_>],
        plen: usize,
        durability: Durability,
    ) -> Result<Ticket> {
        let len = record::stream_len(plen);
        let r = self.group.reserve(len, &self.segs)?;
        let synced = self.group.synced().min(r.pos);
        self.group.with_bytes(&r, |b| {
            let (rec, pad) = b.split_at_mut(HEADER + plen);
            record::encode_payload(ops, &mut rec[HEADER..]);
            record::seal(rec, r.pos, synced, KIND_BATCH);
            pad.fill(0);
        });
        let (end, slot) = (r.end(), r.slot());
        self.group.release(r, durability == Durability::Fsync);
        Ok(Ticket {
            end,
            slot,
            durability,
            promised: 0,
        })
    }

    /// Admission of a record of `ops`: the segments it (and the group it
    /// joins) will be written to exist before it takes a place in the
    /// stream. Another group may move the stream on meanwhile; the segment
    /// after the record's own is there to absorb that. Returns the
    /// record's payload length (for [`Wal::append_sized`]) and its length
    /// in stream bytes.
    pub(crate) fn admit(&self, ops: &[LogOp<'_>]) -> Result<(usize, u64)> {
        let plen = record::payload_len(ops);
        let len = record::stream_len(plen);
        self.segs.ensure_room(self.position(), len)?;
        Ok((plen, len))
    }

    /// Returns once the record of `t` has the durability it asked for.
    pub(crate) fn wait(&self, t: Ticket) -> Result<()> {
        match t.durability {
            Durability::None => Ok(()),
            Durability::Write => self.group.wait(t.end, t.slot, false, &self.segs),
            Durability::Fsync => self.group.wait(t.end, t.slot, true, &self.segs),
        }
    }

    /// Makes everything appended so far durable (an empty record with
    /// `Fsync` if anything is not yet synced); returns the durable position.
    pub(crate) fn sync(&self) -> Result<u64> {
        if self.group.synced() < self.position() {
            let t = self.append(&[], Durability::Fsync)?;
            self.wait(t)?;
        }
        Ok(self.group.synced())
    }

    /// Makes what groups have written so far durable with `fdatasync`s of
    /// its own, outside group commit (no committer waits for them); returns
    /// a position everything before which is durable. Records still in the
    /// group buffer are not covered.
    pub(crate) fn sync_written(&self) -> Result<u64> {
        let synced = self.group.synced();
        let written = self.group.written();
        self.segs.sync_range(synced, written)?;
        Ok(written.max(synced))
    }

    /// Stream position of the next record (exact with the write gate closed).
    pub(crate) fn position(&self) -> u64 {
        self.group.position()
    }

    /// Asks for a checkpoint once the log holds `bytes` past the last one
    /// (`None`: never), which bounds both the log's size on disk and the
    /// replay at the next open; the segments it lets go are reused, so a
    /// steady write load creates no new segment files. The spares are
    /// sized for `bytes`, or for the default size when there is none.
    pub(crate) fn set_checkpoint_log_size(&self, bytes: Option<u64>) {
        self.checkpoint_at
            .store(bytes.unwrap_or(0), Ordering::Relaxed);
        self.segs
            .keep_spares_for(bytes.unwrap_or(crate::db::DEFAULT_CHECKPOINT_LOG_SIZE));
    }

    /// Whether the commit that ends at `end` is the first to find the log
    /// past its checkpoint size since the last checkpoint (it then asks
    /// for one).
    pub(crate) fn wants_checkpoint(&self, end: u64) -> bool {
        let at = self.checkpoint_at.load(Ordering::Relaxed);
        at != 0
            && end.saturating_sub(self.covered.load(Ordering::Relaxed)) >= at
            && !self.asked.load(Ordering::Relaxed)
            && !self.asked.swap(true, Ordering::AcqRel)
    }

    /// After a checkpoint covering everything before `covered` is durable:
    /// lets the segments before it go. A failure leaves them in place for
    /// the next checkpoint and is counted in the stats.
    pub(crate) fn checkpoint_done(&self, covered: u64) {
        self.covered.fetch_max(covered, Ordering::AcqRel);
        self.asked.store(false, Ordering::Release);
        if self
            .segs
            .recycle(covered.min(self.group.written()), self.group.position())
            .is_err()
        {
            self.count_recycle_error();
        }
    }

    /// At a checkpoint's cut, with the write gate closed: notes the log's
    /// use since the last cut and takes the spare segments it no longer
    /// asks for out of the list (see [`segment::Inner::detach_surplus`]); their
    /// files go with [`segment::Surplus::remove`] once the gate is open.
    pub(crate) fn detach_surplus(&self) -> segment::Surplus<'_> {
        self.segs.detach_surplus(self.position())
    }

    /// Counts a failure to let old or surplus segments go (they stay; a
    /// later checkpoint or open takes them up again).
    pub(crate) fn count_recycle_error(&self) {
        self.segs
            .counters
            .recycle_errors
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Figures for [`crate::Stats`].
    pub(crate) fn stats(&self) -> LogStats {
        let c = &self.group.counters;
        LogStats {
            bytes: c.bytes.load(Ordering::Relaxed),
            records: c.records.load(Ordering::Relaxed),
            groups: c.groups.load(Ordering::Relaxed),
            max_group: c.max_group.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            slot_wait_ns: c.slot_wait_ns.load(Ordering::Relaxed),
            sync_wait_ns: c.sync_wait_ns.load(Ordering::Relaxed),
            segments_created: self.segs.counters.created.load(Ordering::Relaxed),
            segments_recycled: self.segs.counters.recycled.load(Ordering::Relaxed),
            segments_removed: self.segs.counters.removed.load(Ordering::Relaxed),
            recycle_errors: self.segs.counters.recycle_errors.load(Ordering::Relaxed),
            position: self.group.position(),
            synced: self.group.synced(),
        }
    }
}

pub(crate) struct LogStats {
    pub(crate) bytes: u64,
    pub(crate) records: u64,
    pub(crate) groups: u64,
    pub(crate) max_group: u64,
    pub(crate) fsyncs: u64,
    pub(crate) slot_wait_ns: u64,
    pub(crate) sync_wait_ns: u64,
    pub(crate) segments_created: u64,
    pub(crate) segments_recycled: u64,
    pub(crate) segments_removed: u64,
    pub(crate) recycle_errors: u64,
    pub(crate) position: u64,
    pub(crate) synced: u64,
}
