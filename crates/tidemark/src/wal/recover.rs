//! Recovery: replay the log from the checkpoint's position, cut a torn
//! tail, refuse damage in the middle.
//!
//! Records are read in stream order from the position the durable
//! checkpoint covers. The first position that does not hold the record
//! expected there (short, zeros, bad checksum, a record of an earlier lap)
//! ends the log, unless something proves that position had been synced:
//! every record carries `synced`, the stream position that was durable when
//! its group was written. If any sound record further on (on the 8-byte
//! grid, with the LSN of its own position) has `synced` beyond the bad
//! position, the bad bytes had reached stable storage and were damaged
//! afterwards: that is [`Error::Corruption`], never a silent truncation of
//! acknowledged commits. Sound records past the end whose `synced` does
//! not reach it are leftovers of a write that never completed; recovery
//! erases their headers so a later crash cannot bring them back.

use crate::error::{Error, Result};

use super::record::{self, LogOp, ALIGN, HEADER};
use super::segment::Segments;

/// Largest record payload recovery accepts (larger lengths are damage).
const MAX_PAYLOAD: u64 = super::group::MAX_RESERVATION;

/// What recovery found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Stream position just past the last record replayed: new records go
    /// here.
    pub(crate) end: u64,
    /// Records replayed.
    pub(crate) records: u64,
    /// Sound records found past the end (erased before reuse).
    pub(crate) stale: Vec<u64>,
}

/// Reads the record that should start at `pos`; `None` if there is none.
fn read_record(segs: &Segments, pos: u64) -> Result<Option<Vec<u8>>> {
    let mut head = [0u8; HEADER];
    if segs.read(pos, &mut head)? < HEADER {
        return Ok(None);
    }
    let len = u64::from(u32::from_le_bytes([head[4], head[5], head[6], head[7]]));
    if len > MAX_PAYLOAD {
        return Ok(None);
    }
    let mut rec = vec![0u8; HEADER + len as usize];
    let n = segs.read(pos, &mut rec)?;
    rec.truncate(n);
    Ok(Some(rec))
}

/// Replays every record from `start`, calling `apply` with each batch's
/// operations in order.
pub(crate) fn replay(
    segs: &Segments,
    start: u64,
    apply: &mut dyn FnMut(&[LogOp<'_>]) -> Result<()>,
) -> Result<Recovered> {
    let mut out = Recovered {
        end: start,
        ..Recovered::default()
    };
    let mut pos = start;
    loop {
        let valid = match read_record(segs, pos)? {
            Some(rec) => match record::check(&rec, pos) {
                Ok((h, total)) => {
                    let ops = record::decode_payload(&rec[HEADER..total]).map_err(|why| {
                        Error::corruption(0, format!("log record at {pos}: {why}"))
                    })?;
                    apply(&ops)?;
                    out.records += 1;
                    pos += record::stream_len(h.len as usize);
                    true
                }
                Err(_) => false,
            },
            None => false,
        };
        if !valid {
            break;
        }
    }
    out.end = pos;
    out.stale = scan_past_end(segs, pos)?;
    Ok(out)
}

/// Looks past the end of the log for sound records of the current lap.
/// Errors if one proves the end was synced; returns the others.
fn scan_past_end(segs: &Segments, end: u64) -> Result<Vec<u64>> {
    let size = segs.size();
    let mut stale = Vec::new();
    for i in segs.indices().into_iter().filter(|&i| i >= end / size) {
        let seg_start = i * size;
        let mut bytes = vec![0u8; size as usize];
        let n = segs.read(seg_start, &mut bytes)?;
        bytes.truncate(n);
        let mut off = if seg_start > end {
            0
        } else {
            (end - seg_start) + ALIGN
        };
        while off + (HEADER as u64) <= n as u64 {
            let q = seg_start + off;
            let at = off as usize;
            let lsn = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap_or([0; 8]));
            if lsn == q && q > end {
                if let Some(rec) = read_record(segs, q)? {
                    if let Ok((h, _)) = record::check(&rec, q) {
                        if h.synced > end {
                            return Err(Error::corruption(
                                0,
                                format!(
                                    "log damaged at stream position {end}: the record at {q} \
                                     was written after everything up to {} was synced",
                                    h.synced
                                ),
                            ));
                        }
                        stale.push(q);
                    }
                }
            }
            off += ALIGN;
        }
    }
    Ok(stale)
}
