//! Capped collections: a ring of bytes per collection, in its own file.
//!
//! Every record has a *ring position*: a byte address that only grows. Its
//! physical offset in the ring is `pos % size`. A new record goes at the
//! head, right after the newest record; if it does not fit before the end
//! of the ring, its position moves to the start of the next lap (the skipped
//! end of the ring is the only waste, shorter than that record). After the
//! insert the ring must hold records from `start + len - size` on, so
//! exactly the oldest records whose position lies before that are removed,
//! in natural order: the records the new one overlaps, or that sit in the
//! skipped end. Nothing searches for space and nothing is freelisted; an
//! insert reads the headers of the records it removes and writes its own.
//!
//! Record layout (little-endian):
//!
//! ```text
//! 0   magic    u32  RECORD_MAGIC
//! 4   crc32c   u32  over bytes 8 .. end of record
//! 8   pos      u64  ring position of this record
//! 16  rid      u64  record id: natural order, consecutive
//! 24  prev     u64  ring position of the record before (NO_PREV if none)
//! 32  key_len  u16  the encoded _id that follows
//! 34  zero     u16
//! 36  doc_len  u32
//! 40  key, then the BSON document
//! ```
//!
//! The position in the header makes a stale record (from an earlier lap)
//! impossible to mistake for the one expected; `prev` lets a cursor walk
//! backwards. The ring file starts with one 4 KiB header naming the ring
//! size; ring offset 0 is file offset 4096.
//!
//! Durability: a capped insert is logged (`LogOp::RingWrite`, with the
//! record bytes and the ring state after it: head, tail, ids, counts) in the
//! same log record as the rest of its batch. The ring state lives in memory
//! and is written to its `$collections` value by each checkpoint's cut. The record bytes are kept in memory (`pending`) until the
//! log covering them is durable, and only then written to the ring file, so
//! the ring file never holds bytes whose log record could still be lost:
//! after any crash, the checkpoint's ring state plus the replayed log
//! rebuild the ring, and any record the file lost or had overwritten is
//! rewritten by replay. A checkpoint syncs the log, writes every pending
//! record and syncs the ring file before its meta page names the ring state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::io::{FileIo, FileSystem};

/// Bytes of a record header.
pub const RECORD_HEADER: usize = 40;
const RECORD_MAGIC: u32 = 0x7264_6d74;
/// `prev` of the first record ever written.
const NO_PREV: u64 = u64::MAX;
/// Bytes before ring offset 0 in the ring file.
pub(crate) const FILE_HEADER: u64 = 4096;
const FILE_MAGIC: &[u8; 16] = b"tidemark ring v1";
/// Smallest ring a capped collection may have.
pub const MIN_RING_SIZE: u64 = 4096;
/// Pending (not yet durable) record bytes per ring above which an insert
/// wakes the background ring writer.
const PENDING_SOFT: u64 = 4 << 20;
/// ... and above which the inserter syncs the log and writes them out
/// itself (the writer is behind; memory stays bounded).
const PENDING_HARD: u64 = 64 << 20;
/// Written ring bytes the background writer lets gather before it hands
/// them to the device ([`Ring::write_back`]), and the most it hands over
/// in one step.
pub(crate) const WRITE_BACK_MIN: u64 = 8 << 20;
const WRITE_BACK_STEP: u64 = 4 << 20;
/// Bytes read at once for a record header and its key.
const HEAD_READ: usize = 128;
/// Lengths of removed records remembered for the removal minimum; more
/// than a wrap's skipped end can ever hold.
const RECENT_REMOVED: usize = 256;

/// The durable description of a ring: where its records are. Stored as a
/// table value, changed by every insert in the same batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RingState {
    /// Ring position just past the newest record.
    pub(crate) head: u64,
    /// Ring position of the oldest record (== head when empty).
    pub(crate) tail: u64,
    /// Ring position of the newest record.
    pub(crate) last: u64,
    /// Record id of the oldest record.
    pub(crate) first_id: u64,
    /// Record id the next insert gets.
    pub(crate) next_id: u64,
    pub(crate) count: u64,
    /// Bytes of all records, headers included.
    pub(crate) bytes: u64,
}

impl RingState {
    pub(crate) const ENCODED: usize = 56;

    pub(crate) fn empty() -> RingState {
        RingState {
            head: 0,
            tail: 0,
            last: NO_PREV,
            first_id: 1,
            next_id: 1,
            count: 0,
            bytes: 0,
        }
    }

    pub(crate) fn encode(&self) -> [u8; Self::ENCODED] {
        let mut b = [0u8; Self::ENCODED];
        for (i, v) in [
            self.head,
            self.tail,
            self.last,
            self.first_id,
            self.next_id,
            self.count,
            self.bytes,
        ]
        .into_iter()
        .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Option<RingState> {
        if b.len() != Self::ENCODED {
            return None;
        }
        let f = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(RingState {
            head: f(0),
            tail: f(1),
            last: f(2),
            first_id: f(3),
            next_id: f(4),
            count: f(5),
            bytes: f(6),
        })
    }
}

/// A record header as read from the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordHead {
    pub(crate) pos: u64,
    pub(crate) rid: u64,
    pub(crate) prev: u64,
    pub(crate) key: Vec<u8>,
    pub(crate) doc_len: u32,
}

impl RecordHead {
    /// Bytes the whole record takes in the ring.
    pub(crate) fn total(&self) -> u64 {
        (RECORD_HEADER + self.key.len()) as u64 + u64::from(self.doc_len)
    }
}

/// Bytes a record with an encoded key of `key` bytes and a document of
/// `doc` bytes takes in the ring.
pub(crate) fn record_len(key: usize, doc: usize) -> u64 {
    (RECORD_HEADER + key + doc) as u64
}

/// Builds the bytes of a record.
pub(crate) fn encode_record(pos: u64, rid: u64, prev: u64, key: &[u8], doc: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(RECORD_HEADER + key.len() + doc.len());
    b.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    b.extend_from_slice(&pos.to_le_bytes());
    b.extend_from_slice(&rid.to_le_bytes());
    b.extend_from_slice(&prev.to_le_bytes());
    b.extend_from_slice(&(key.len() as u16).to_le_bytes());
    b.extend_from_slice(&[0; 2]);
    b.extend_from_slice(&(doc.len() as u32).to_le_bytes());
    b.extend_from_slice(key);
    b.extend_from_slice(doc);
    let crc = crate::checksum::crc32c(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

pub(crate) fn parse_head(b: &[u8]) -> Option<(u32, RecordHead, usize)> {
    let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
    let magic = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    if magic != RECORD_MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    let klen = u16::from_le_bytes(b.get(32..34)?.try_into().ok()?) as usize;
    let doc_len = u32::from_le_bytes(b.get(36..40)?.try_into().ok()?);
    Some((
        crc,
        RecordHead {
            pos: u64_at(8)?,
            rid: u64_at(16)?,
            prev: u64_at(24)?,
            key: Vec::new(),
            doc_len,
        },
        klen,
    ))
}

/// An insert as planned by [`Ring::plan`].
pub(crate) struct Planned {
    /// Ring position of the new record.
    pub(crate) pos: u64,
    /// Records it removes, oldest first.
    pub(crate) removed: Vec<RecordHead>,
    /// The ring state after it.
    pub(crate) after: RingState,
}

/// What reading the record expected at a position found.
pub(crate) enum Slot {
    /// The record, whole and with a good checksum: header and document.
    Record(RecordHead, Vec<u8>),
    /// No record of that position is there (never written, or overwritten
    /// by a later lap).
    Absent,
    /// A header for that position whose bytes fail their checksum.
    Damaged(String),
}

/// Pending (not yet written) records by ring position.
struct Pending {
    records: BTreeMap<u64, (u64, Arc<[u8]>)>,
    bytes: u64,
}

/// Ring file ranges written but not yet handed to the device.
#[derive(Default)]
struct Written {
    ranges: Vec<(u64, u64)>,
    bytes: u64,
}

/// The ring of one capped collection.
pub(crate) struct Ring {
    pub(crate) name: Vec<u8>,
    pub(crate) size: u64,
    pub(crate) max: Option<u64>,
    file: Arc<dyn FileIo>,
    state: Mutex<RingState>,
    /// Records logged but not yet known durable: (log bound, bytes).
    pending: Mutex<Pending>,
    /// Held while writing pending records out, so they go in order.
    flush: Mutex<()>,
    /// File ranges written since they were last handed to the device.
    written: Mutex<Written>,
    /// Tailable cursors wait here for inserts.
    arrivals: Mutex<u64>,
    arrived: Condvar,
    /// Records removed to make room, since open.
    pub(crate) removed: std::sync::atomic::AtomicU64,
    /// The state last written to `$collections` (by a checkpoint's cut).
    persisted: Mutex<Option<RingState>>,
    /// Lengths of the records removed last, newest first (for
    /// [`Ring::removed_beyond_minimum`]).
    recent_removed: Mutex<std::collections::VecDeque<u64>>,
}

/// File name of the ring of collection `name` (hex, so any name is a
/// valid file name).
pub(crate) fn file_name(name: &[u8]) -> String {
    let mut s = String::from("capped-");
    for b in name {
        s.push_str(&format!("{b:02x}"));
    }
    s.push_str(".ring");
    s
}

/// The ring file of collection `name` in `dir`.
pub(crate) fn ring_path(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(file_name(name))
}

/// What follows a ring file's name in the name of a ring file being
/// prepared for a collection not yet created.
const PREP_SUFFIX: &str = ".prep-";

/// Whether `file` (a name in the database directory) is a ring file whose
/// preparation or collection creation was cut short: removed at open.
pub(crate) fn is_prepared_file(file: &str) -> bool {
    file.starts_with("capped-") && file.contains(&format!(".ring{PREP_SUFFIX}"))
}

/// Fills the ring file of a collection about to be created, under a
/// temporary name unique to this call, and returns that name; the
/// collection's creation renames it into place ([`ring_path`]). Filling
/// takes a write of `size` bytes (seconds for a large ring), so it runs
/// before the creation commits, holding no lock.
pub(crate) fn prepare_file(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &[u8],
    size: u64,
) -> Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!(
        "{}{PREP_SUFFIX}{}-{n}",
        file_name(name),
        std::process::id()
    ));
    let file = fs.open(&path, true)?;
    if let Err(e) = init_file(&*file, size) {
        drop(file);
        let _ = fs.remove(&path);
        return Err(e);
    }
    Ok(path)
}

/// Gives a new ring file its length, zeros and header, durably. Every
/// ring byte is written once here (zeros, in page-sized writes, as the
/// log's segments are) rather than only allocated: records then always
/// overwrite written blocks, so writing them back never converts
/// unwritten extents, which on ext4 takes journal transactions that the
/// log's `fdatasync`s queue behind (measured: `capped`'s 1000 MiB ring,
/// whose first lap is half its run). The header goes last, after the
/// zeros are durable: a file whose header reads as zeros is refilled.
fn init_file(file: &dyn FileIo, size: u64) -> Result<()> {
    const CHUNK: u64 = 4096;
    file.preallocate(FILE_HEADER + size)?;
    // Reads of never-written ring bytes must find zeros, not the end.
    file.set_len(FILE_HEADER + size)?;
    let zeros = [0u8; CHUNK as usize];
    let mut off = 0;
    while off < FILE_HEADER + size {
        // Lossless: at most CHUNK.
        let n = (FILE_HEADER + size - off).min(CHUNK) as usize;
        file.write_all_at(&zeros[..n], off)?;
        off += n as u64;
    }
    file.sync_data()?;
    let mut head = vec![0u8; FILE_HEADER as usize];
    head[..16].copy_from_slice(FILE_MAGIC);
    head[16..24].copy_from_slice(&size.to_le_bytes());
    file.write_all_at(&head, 0)?;
    file.sync_data()?;
    Ok(())
}

impl Ring {
    /// Opens (creating if absent) the ring file of `name`, whose state is
    /// `state`.
    pub(crate) fn open(
        fs: &dyn FileSystem,
        dir: &Path,
        name: &[u8],
        size: u64,
        max: Option<u64>,
        state: RingState,
    ) -> Result<Ring> {
        let path = ring_path(dir, name);
        let file = fs.open(&path, true)?;
        let mut head = vec![0u8; FILE_HEADER as usize];
        head[..16].copy_from_slice(FILE_MAGIC);
        head[16..24].copy_from_slice(&size.to_le_bytes());
        let mut found = vec![0u8; 24];
        if file.len()? >= FILE_HEADER {
            file.read_exact_at(&mut found, 0)?;
        }
        if found.iter().all(|&b| b == 0) {
            // New (a collection created by replay, or a prepared file
            // lost), or its creation was cut short before the header was
            // written: (re)initialise.
            init_file(&*file, size)?;
            fs.sync_dir(dir)?;
        } else if found[..] != head[..24] {
            return Err(Error::NotADatabase(format!(
                "{} is not the ring of a {size}-byte capped collection",
                path.display()
            )));
        }
        Ok(Ring::over(file, name, size, max, state))
    }

    /// The ring of `name` over `file`, already checked to be its ring file
    /// (or, for the fuzz targets, any bytes).
    pub(crate) fn over(
        file: Arc<dyn FileIo>,
        name: &[u8],
        size: u64,
        max: Option<u64>,
        state: RingState,
    ) -> Ring {
        Ring {
            name: name.to_vec(),
            size,
            max,
            file,
            state: Mutex::new(state),
            pending: Mutex::new(Pending {
                records: BTreeMap::new(),
                bytes: 0,
            }),
            flush: Mutex::new(()),
            written: Default::default(),
            arrivals: Mutex::new(0),
            arrived: Condvar::new(),
            removed: Default::default(),
            recent_removed: Default::default(),
            persisted: Mutex::new(Some(state)),
        }
    }

    /// The state as of the last applied insert.
    pub(crate) fn state(&self) -> RingState {
        *self.state.lock()
    }

    /// Physical offset of ring position `pos`.
    pub(crate) fn offset(&self, pos: u64) -> u64 {
        pos % self.size
    }

    /// Reads up to `buf.len()` bytes of the record that should be at `pos`:
    /// from the pending records (only as far as the pending record there
    /// goes), else from the file. Returns the bytes read.
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> Result<usize> {
        {
            let p = self.pending.lock();
            if let Some((&start, (_, rec))) = p.records.range(..=pos).next_back() {
                let at = (pos - start) as usize;
                if at < rec.len() {
                    // Inside a record newer than anything the file holds
                    // there: only that record's bytes count.
                    let n = buf.len().min(rec.len() - at);
                    buf[..n].copy_from_slice(&rec[at..at + n]);
                    return Ok(n);
                }
            }
        }
        let off = self.offset(pos);
        if off + buf.len() as u64 > self.size {
            return Ok(0);
        }
        self.file.read_exact_at(buf, FILE_HEADER + off)?;
        Ok(buf.len())
    }

    /// The header (and key) of the record at ring position `pos`, if that
    /// position holds one. The checksum is not checked (see [`Ring::read`]).
    pub(crate) fn head_at(&self, pos: u64) -> Result<Option<RecordHead>> {
        let room = self.size - self.offset(pos);
        if room < RECORD_HEADER as u64 {
            return Ok(None);
        }
        // One read for the header and a key of usual length.
        let mut b = vec![0u8; (HEAD_READ as u64).min(room) as usize];
        let n = self.read_at(pos, &mut b)?;
        let Some((_, mut h, klen)) = parse_head(&b[..n]) else {
            return Ok(None);
        };
        if h.pos != pos || record_len(klen, h.doc_len as usize) > room {
            return Ok(None);
        }
        if n < RECORD_HEADER + klen {
            b = vec![0u8; RECORD_HEADER + klen];
            if self.read_at(pos, &mut b)? < b.len() {
                return Ok(None);
            }
        }
        h.key = b[RECORD_HEADER..RECORD_HEADER + klen].to_vec();
        Ok(Some(h))
    }

    /// Reads the whole record at `pos`, checking its checksum.
    pub(crate) fn read(&self, pos: u64) -> Result<Slot> {
        let Some(h) = self.head_at(pos)? else {
            return Ok(Slot::Absent);
        };
        let mut b = vec![0u8; h.total() as usize];
        if self.read_at(pos, &mut b)? < b.len() {
            return Ok(Slot::Absent);
        }
        let crc = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        // A concurrent overwrite can tear what was read; only a record that
        // reads back the same header again is reported as damaged.
        if crate::checksum::crc32c(&b[8..]) != crc {
            return Ok(match self.head_at(pos)? {
                Some(again) if again == h => Slot::Damaged(format!(
                    "capped record {} at ring offset {}: checksum mismatch",
                    h.rid,
                    self.offset(pos)
                )),
                _ => Slot::Absent,
            });
        }
        let doc = b.split_off(RECORD_HEADER + h.key.len());
        Ok(Slot::Record(h, doc))
    }

    /// Ring position of the record after the one at `pos` (taking `total`
    /// bytes), given that such a record exists: right after it, or at the
    /// start of the next lap.
    pub(crate) fn next_pos(&self, pos: u64, total: u64) -> Result<u64> {
        let right_after = pos + total;
        if self.offset(right_after) == 0 {
            return Ok(right_after);
        }
        match self.head_at(right_after)? {
            Some(_) => Ok(right_after),
            None => Ok(right_after.next_multiple_of(self.size)),
        }
    }

    /// Plans the insert of a record of `len` bytes into a ring in state
    /// `st`: its position, the records it removes (oldest first) and the
    /// state after. `extra` supplies records planned earlier in the same
    /// batch (not yet in the ring).
    pub(crate) fn plan(
        &self,
        st: &RingState,
        len: u64,
        extra: &dyn Fn(u64) -> Option<RecordHead>,
    ) -> Result<Planned> {
        if len > self.size {
            return Err(Error::CappedRecordTooLarge {
                len,
                size: self.size,
            });
        }
        let off = self.offset(st.head);
        let start = if off + len > self.size {
            st.head.next_multiple_of(self.size)
        } else {
            st.head
        };
        let keep_from = (start + len).saturating_sub(self.size);
        let mut after = *st;
        let mut removed = Vec::new();
        // The header of the record at the tail, when already read.
        let mut known: Option<RecordHead> = None;
        while after.count > 0
            && (after.tail < keep_from || self.max.is_some_and(|m| after.count >= m))
        {
            let found = match known.take() {
                Some(h) => Some(h),
                None => match extra(after.tail) {
                    Some(h) => Some(h),
                    None => self.head_at(after.tail)?,
                },
            };
            let h = match found {
                Some(h) => h,
                None => {
                    return Err(Error::corruption(
                        0,
                        format!(
                            "capped collection {:?}: no record at ring offset {} where its \
                             oldest record {} should be",
                            String::from_utf8_lossy(&self.name),
                            self.offset(after.tail),
                            after.first_id
                        ),
                    ))
                }
            };
            if h.rid != after.first_id {
                return Err(Error::corruption(
                    0,
                    format!(
                        "capped collection {:?}: record {} found where {} should be",
                        String::from_utf8_lossy(&self.name),
                        h.rid,
                        after.first_id
                    ),
                ));
            }
            after.count -= 1;
            after.bytes -= h.total();
            after.first_id += 1;
            after.tail = if after.count == 0 {
                start
            } else {
                // The next record is right after this one, or at the start
                // of the next lap.
                let right_after = after.tail + h.total();
                known = match extra(right_after) {
                    Some(n) => Some(n),
                    None if self.offset(right_after) == 0 => None,
                    None => self.head_at(right_after)?,
                };
                match &known {
                    Some(_) => right_after,
                    None if self.offset(right_after) == 0 => right_after,
                    None => right_after.next_multiple_of(self.size),
                }
            };
            removed.push(h);
        }
        if after.count == 0 {
            after.tail = start;
            after.first_id = after.next_id;
        }
        after.last = start;
        after.head = start + len;
        after.next_id += 1;
        after.count += 1;
        after.bytes += len;
        Ok(Planned {
            pos: start,
            removed,
            after,
        })
    }

    /// Applies a logged insert (or an in-place rewrite): the state after it
    /// and its bytes, which wait in memory until the log up to `log_bound`
    /// is durable.
    pub(crate) fn apply(
        &self,
        after: Option<RingState>,
        pos: u64,
        record: Arc<[u8]>,
        log_bound: u64,
    ) {
        let mut st = self.state.lock();
        let mut p = self.pending.lock();
        if let Some(after) = after {
            *st = after;
        }
        // Records now behind the tail are gone; never write them out.
        while let Some((&q, _)) = p.records.first_key_value() {
            if q >= st.tail {
                break;
            }
            if let Some((_, r)) = p.records.remove(&q) {
                p.bytes -= r.len() as u64;
            }
        }
        p.bytes += record.len() as u64;
        if let Some((_, old)) = p.records.insert(pos, (log_bound, record)) {
            p.bytes -= old.len() as u64;
        }
    }

    /// Notes the lengths of records an insert removed (oldest first).
    pub(crate) fn note_removed(&self, lens: &[u64]) {
        let mut r = self.recent_removed.lock();
        for &l in lens {
            r.push_front(l);
        }
        r.truncate(RECENT_REMOVED);
    }

    /// How many of the records removed so far a placement that could use
    /// every free byte of the ring would have kept: the newest removed
    /// records that still fit beside the live ones. Removals minus this is
    /// the fewest removals any capped collection of this size could have
    /// made for the same inserts (its live records are the longest suffix
    /// of the inserts that fits in `size` bytes).
    pub(crate) fn removed_beyond_minimum(&self) -> u64 {
        let st = self.state();
        let mut room = self.size.saturating_sub(st.bytes);
        let mut n = 0;
        for &l in self.recent_removed.lock().iter() {
            if l > room || self.max.is_some_and(|m| st.count + n >= m) {
                break;
            }
            room -= l;
            n += 1;
        }
        n
    }

    pub(crate) fn persisted(&self) -> Option<RingState> {
        *self.persisted.lock()
    }

    pub(crate) fn set_persisted(&self, st: RingState) {
        *self.persisted.lock() = Some(st);
    }

    /// Wakes tailable cursors waiting for records.
    pub(crate) fn notify(&self) {
        *self.arrivals.lock() += 1;
        self.arrived.notify_all();
    }

    /// Waits up to `timeout` for an insert after `seen` (an arrival count
    /// from [`Ring::arrivals`]).
    pub(crate) fn wait_arrival(&self, seen: u64, timeout: Duration) {
        let mut a = self.arrivals.lock();
        if *a == seen {
            let _ = self.arrived.wait_for(&mut a, timeout);
        }
    }

    pub(crate) fn arrivals(&self) -> u64 {
        *self.arrivals.lock()
    }

    /// Bytes waiting for the log to become durable.
    pub(crate) fn pending_bytes(&self) -> u64 {
        self.pending.lock().bytes
    }

    /// Whether the pending bytes call for the background writer.
    pub(crate) fn over_soft_limit(&self) -> bool {
        self.pending_bytes() > PENDING_SOFT
    }

    /// Whether the pending bytes are over the hard limit (the caller should
    /// sync the log and flush).
    pub(crate) fn over_limit(&self) -> bool {
        self.pending_bytes() > PENDING_HARD
    }

    /// Writes out, in ring order, every pending record whose log is durable
    /// (log bound at or below `durable`).
    pub(crate) fn flush(&self, durable: u64) -> Result<()> {
        let _f = self.flush.lock();
        let due: Vec<(u64, Arc<[u8]>)> = {
            let p = self.pending.lock();
            p.records
                .iter()
                .filter(|(_, (bound, _))| *bound <= durable)
                .map(|(&pos, (_, r))| (pos, r.clone()))
                .collect()
        };
        // Records next to each other in the ring go out in one write.
        let mut runs = Vec::new();
        let mut i = 0;
        while i < due.len() {
            let start = due[i].0;
            let mut end = start + due[i].1.len() as u64;
            let mut j = i + 1;
            while j < due.len() && due[j].0 == end && self.offset(end) != 0 {
                end += due[j].1.len() as u64;
                j += 1;
            }
            if j == i + 1 {
                self.file
                    .write_all_at(&due[i].1, FILE_HEADER + self.offset(start))?;
            } else {
                let mut run = Vec::with_capacity((end - start) as usize);
                for (_, rec) in &due[i..j] {
                    run.extend_from_slice(rec);
                }
                self.file
                    .write_all_at(&run, FILE_HEADER + self.offset(start))?;
            }
            runs.push((FILE_HEADER + self.offset(start), end - start));
            i = j;
        }
        {
            let mut w = self.written.lock();
            w.bytes += runs.iter().map(|r| r.1).sum::<u64>();
            w.ranges.extend(runs);
        }
        let mut p = self.pending.lock();
        for (pos, rec) in due {
            if p.records
                .get(&pos)
                .is_some_and(|(_, r)| Arc::ptr_eq(r, &rec))
            {
                p.records.remove(&pos);
                p.bytes -= rec.len() as u64;
            }
        }
        Ok(())
    }

    /// Hands the ring file's writes to the device, a few megabytes at a
    /// time and waiting for each, once at least `min` bytes are waiting.
    /// A large ring takes many laps of a small one to coalesce rewrites in
    /// the operating system's cache, so without this the checkpoint's
    /// `fdatasync` of a 1000 MiB ring pushes hundreds of megabytes at once,
    /// and the log's `fdatasync`s, that commits wait for, queue behind
    /// them. Written back as they come, the ring's writes share the device
    /// evenly with the log's. Nothing becomes durable: [`Ring::sync`] is
    /// still needed.
    pub(crate) fn write_back(&self, min: u64) -> Result<()> {
        let mut ranges = {
            let mut w = self.written.lock();
            if w.bytes == 0 || w.bytes < min {
                return Ok(());
            }
            w.bytes = 0;
            std::mem::take(&mut w.ranges)
        };
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (off, len) in ranges {
            match merged.last_mut() {
                Some((o, l)) if off <= *o + *l => *l = (*l).max(off + len - *o),
                _ => merged.push((off, len)),
            }
        }
        for (off, len) in merged {
            let mut at = off;
            while at < off + len {
                let n = (off + len - at).min(WRITE_BACK_STEP);
                self.file.write_back(at, n)?;
                at += n;
            }
        }
        Ok(())
    }

    /// Makes the ring file's writes durable.
    pub(crate) fn sync(&self) -> Result<()> {
        Ok(self.file.sync_data()?)
    }
}

/// The fragmentation ratio of `../shared/BRIEF.md` (seed 000's analysis)
/// for physical offsets in natural order: the root of the sum of squared
/// steps (in MiB) without the largest backwards step, in natural order,
/// over the same for the offsets sorted. 1.0 for a perfect ring.
pub fn fragmentation_ratio(offsets: &[u64]) -> f64 {
    fn rms(o: &[u64]) -> f64 {
        let mut t = 0.0;
        let mut maxneg: f64 = 0.0;
        for w in o.windows(2) {
            let d = (w[1] as f64 - w[0] as f64) / 1_048_576.0;
            t += d * d;
            maxneg = maxneg.min(d);
        }
        (t - maxneg * maxneg).max(0.0).sqrt()
    }
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    let best = rms(&sorted);
    if best == 0.0 {
        return 1.0;
    }
    rms(offsets) / best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let s = RingState {
            head: 1,
            tail: 2,
            last: 3,
            first_id: 4,
            next_id: 5,
            count: 6,
            bytes: 7,
        };
        assert_eq!(RingState::decode(&s.encode()), Some(s));
        assert_eq!(RingState::decode(&[0; 3]), None);
    }

    #[test]
    fn ratio_of_a_ring_is_one_and_of_a_shuffle_is_not() {
        let ring: Vec<u64> = (0..100).map(|i| ((i + 40) % 100) * 1_000_000).collect();
        assert!((fragmentation_ratio(&ring) - 1.0).abs() < 0.01);
        let mut jumbled = ring.clone();
        jumbled.swap(10, 60);
        jumbled.swap(20, 80);
        assert!(fragmentation_ratio(&jumbled) > 2.0);
    }
}
