//! Log record framing.
//!
//! The log is one stream of bytes addressed by log sequence number (LSN):
//! the LSN of a record is the stream position of its first byte. A record
//! is a 32-byte header and a payload:
//!
//! ```text
//! 0   crc32c  u32  over bytes 4 .. 32 + len
//! 4   len     u32  payload bytes
//! 8   lsn     u64  stream position of this header
//! 16  synced  u64  stream position already durable when the record's
//!                  group was written: everything before it was fsynced
//! 24  kind    u8   KIND_BATCH
//! 25  zero    7 bytes
//! 32  payload, then zeros up to the next multiple of 8
//! ```
//!
//! Records start at multiples of 8 ([`ALIGN`]), so recovery can look for
//! records past a damaged one on a fixed grid. A record may span two
//! segment files: the stream is one address space cut into files.
//!
//! The `lsn` field makes a stale record (left in a recycled segment by an
//! earlier lap of the log) invalid where a newer one is expected, and the
//! `synced` field lets recovery tell a torn tail from damage in the middle
//! (see `wal::recover`). All integers are little-endian.
//!
//! A batch payload is a count followed by operations:
//!
//! ```text
//! count u32, then per operation:
//!   tag u8, table_len u8, table, then by tag:
//!   OP_PUT:    key_len u16, key, value_len u32, value
//!   OP_DELETE: key_len u16, key
//!   OP_CREATE_TABLE, OP_DROP_TABLE: nothing more
//!   OP_RING_WRITE: as OP_PUT; the table is a capped collection, the key
//!              the record's ring position (u64) and, for an insert, the
//!              ring state after it (56 bytes), the value the record bytes
//!              (see `capped`)
//! ```

use crate::btree::node::MAX_KEY_SIZE;

/// Bytes of a record header.
pub(crate) const HEADER: usize = 32;
const CRC_OFFSET: usize = 0;
const LEN_OFFSET: usize = CRC_OFFSET + 4;
const LSN_OFFSET: usize = LEN_OFFSET + 4;
const SYNCED_OFFSET: usize = LSN_OFFSET + 8;
const KIND_OFFSET: usize = SYNCED_OFFSET + 8;

/// Records start at multiples of this many bytes.
pub(crate) const ALIGN: u64 = 8;
/// A committed write batch.
pub(crate) const KIND_BATCH: u8 = 1;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
const OP_CREATE_TABLE: u8 = 3;
const OP_DROP_TABLE: u8 = 4;
const OP_RING_WRITE: u8 = 5;

/// Bytes a record with `payload` bytes of payload takes in the stream,
/// alignment included.
pub(crate) fn stream_len(payload: usize) -> u64 {
    ((HEADER + payload) as u64).next_multiple_of(ALIGN)
}

/// One logged operation, borrowed from the buffer it was decoded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogOp<'a> {
    Put {
        table: &'a [u8],
        key: &'a [u8],
        value: &'a [u8],
    },
    Delete {
        table: &'a [u8],
        key: &'a [u8],
    },
    CreateTable {
        table: &'a [u8],
    },
    DropTable {
        table: &'a [u8],
    },
    /// A capped record written into the ring of collection `table` at
    /// ring position `pos` (8 bytes, little-endian), followed for an insert
    /// by the encoded ring state after it.
    RingWrite {
        table: &'a [u8],
        pos: &'a [u8],
        record: &'a [u8],
    },
}

/// A record header as read from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) len: u32,
    pub(crate) lsn: u64,
    pub(crate) synced: u64,
    pub(crate) kind: u8,
}

/// Bytes the payload of `ops` takes.
pub(crate) fn payload_len(ops: &[LogOp<'_>]) -> usize {
    4 + ops
        .iter()
        .map(|op| match op {
            LogOp::Put { table, key, value }
            | LogOp::RingWrite {
                table,
                pos: key,
                record: value,
            } => 1 + 1 + table.len() + 2 + key.len() + 4 + value.len(),
            LogOp::Delete { table, key } => 1 + 1 + table.len() + 2 + key.len(),
            LogOp::CreateTable { table } | LogOp::DropTable { table } => 1 + 1 + table.len(),
        })
        .sum::<usize>()
}

/// Writes the payload of `ops` into `out`, which is exactly
/// `payload_len(ops)` long. Callers have checked the limits: table names
/// up to 255 bytes, keys up to `MAX_KEY_SIZE`, values under 4 GiB.
pub(crate) fn encode_payload(ops: &[LogOp<'_>], out: &mut [u8]) {
    debug_assert_eq!(out.len(), payload_len(ops));
    let mut w = Writer { out, at: 0 };
    w.bytes(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        let (tag, table, key) = match op {
            LogOp::Put { table, key, .. } => (OP_PUT, table, Some(key)),
            LogOp::Delete { table, key } => (OP_DELETE, table, Some(key)),
            LogOp::CreateTable { table } => (OP_CREATE_TABLE, table, None),
            LogOp::DropTable { table } => (OP_DROP_TABLE, table, None),
            LogOp::RingWrite { table, pos, .. } => (OP_RING_WRITE, table, Some(pos)),
        };
        debug_assert!(table.len() <= u8::MAX as usize);
        w.bytes(&[tag, table.len() as u8]);
        w.bytes(table);
        if let Some(key) = key {
            debug_assert!(key.len() <= MAX_KEY_SIZE);
            w.bytes(&(key.len() as u16).to_le_bytes());
            w.bytes(key);
        }
        if let LogOp::Put { value, .. } | LogOp::RingWrite { record: value, .. } = op {
            w.bytes(&(value.len() as u32).to_le_bytes());
            w.bytes(value);
        }
    }
    debug_assert_eq!(w.at, w.out.len());
}

struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
}

/// Fills in the header of the record whose header and payload (already
/// written) are `rec`, and seals it with its checksum.
pub(crate) fn seal(rec: &mut [u8], lsn: u64, synced: u64, kind: u8) {
    debug_assert!(rec.len() >= HEADER && lsn.is_multiple_of(ALIGN));
    let len = (rec.len() - HEADER) as u32;
    rec[LEN_OFFSET..LSN_OFFSET].copy_from_slice(&len.to_le_bytes());
    rec[LSN_OFFSET..SYNCED_OFFSET].copy_from_slice(&lsn.to_le_bytes());
    rec[SYNCED_OFFSET..KIND_OFFSET].copy_from_slice(&synced.to_le_bytes());
    rec[KIND_OFFSET] = kind;
    rec[KIND_OFFSET + 1..HEADER].fill(0);
    let crc = crate::checksum::crc32c(&rec[LEN_OFFSET..]);
    rec[CRC_OFFSET..LEN_OFFSET].copy_from_slice(&crc.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Why bytes at a position are not the record expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Invalid {
    /// Fewer bytes than a header or than the header's length says.
    Short,
    /// Zeros where a header should be (never-written space).
    Zero,
    /// The checksum does not match.
    Checksum,
    /// A sound record, but not the one expected (an older lap of the log).
    WrongLsn(u64),
    /// A sound record whose kind or payload makes no sense.
    Malformed(&'static str),
}

/// Checks the record that should start at `lsn` in `buf`; returns its
/// header and total length.
pub(crate) fn check(buf: &[u8], lsn: u64) -> Result<(Header, usize), Invalid> {
    let head = buf.get(..HEADER).ok_or(Invalid::Short)?;
    if head.iter().all(|&b| b == 0) {
        return Err(Invalid::Zero);
    }
    let len = u32_at(head, LEN_OFFSET).ok_or(Invalid::Short)?;
    let total = HEADER
        .checked_add(len as usize)
        .ok_or(Invalid::Malformed("length overflows"))?;
    let rec = buf.get(..total).ok_or(Invalid::Short)?;
    let crc = u32_at(rec, CRC_OFFSET).ok_or(Invalid::Short)?;
    if crate::checksum::crc32c(&rec[LEN_OFFSET..]) != crc {
        return Err(Invalid::Checksum);
    }
    let h = Header {
        len,
        lsn: u64_at(rec, LSN_OFFSET).ok_or(Invalid::Short)?,
        synced: u64_at(rec, SYNCED_OFFSET).ok_or(Invalid::Short)?,
        kind: rec[KIND_OFFSET],
    };
    if h.lsn != lsn {
        return Err(Invalid::WrongLsn(h.lsn));
    }
    if h.kind != KIND_BATCH {
        return Err(Invalid::Malformed("unknown record kind"));
    }
    if h.synced > lsn {
        return Err(Invalid::Malformed("synced position lies after the record"));
    }
    Ok((h, total))
}

/// Decodes a batch payload. A payload that passed its checksum but does
/// not decode is corruption of what was written, reported as such.
pub(crate) fn decode_payload(p: &[u8]) -> Result<Vec<LogOp<'_>>, &'static str> {
    let mut r = Reader { p, at: 0 };
    let count = r.u32()?;
    // Every operation takes at least 2 bytes, which bounds the allocation
    // whatever the (checksummed, but possibly buggy) count says.
    let mut ops = Vec::with_capacity((count as usize).min(p.len() / 2));
    for _ in 0..count {
        let tag = r.take(1)?[0];
        let tlen = r.take(1)?[0] as usize;
        let table = r.take(tlen)?;
        match tag {
            OP_CREATE_TABLE => {
                ops.push(LogOp::CreateTable { table });
                continue;
            }
            OP_DROP_TABLE => {
                ops.push(LogOp::DropTable { table });
                continue;
            }
            _ => {}
        }
        let klen = u16::from_le_bytes(r.take(2)?.try_into().map_err(|_| "short")?) as usize;
        if klen > MAX_KEY_SIZE {
            return Err("key longer than the key limit");
        }
        let key = r.take(klen)?;
        ops.push(match tag {
            OP_PUT => {
                let vlen = r.u32()? as usize;
                LogOp::Put {
                    table,
                    key,
                    value: r.take(vlen)?,
                }
            }
            OP_DELETE => LogOp::Delete { table, key },
            OP_RING_WRITE => {
                if key.len() != 8 && key.len() != 8 + crate::capped::RingState::ENCODED {
                    return Err("ring position is not 8 bytes (+ a ring state)");
                }
                let vlen = r.u32()? as usize;
                LogOp::RingWrite {
                    table,
                    pos: key,
                    record: r.take(vlen)?,
                }
            }
            _ => return Err("unknown operation tag"),
        });
    }
    if r.at != p.len() {
        return Err("bytes after the last operation");
    }
    Ok(ops)
}

struct Reader<'a> {
    p: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.at.checked_add(n).ok_or("length overflows")?;
        let s = self
            .p
            .get(self.at..end)
            .ok_or("operation runs past the payload")?;
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ops: &[LogOp<'_>], lsn: u64, synced: u64) -> Vec<u8> {
        let mut rec = vec![0u8; HEADER + payload_len(ops)];
        encode_payload(ops, &mut rec[HEADER..]);
        seal(&mut rec, lsn, synced, KIND_BATCH);
        rec
    }

    fn sample() -> Vec<LogOp<'static>> {
        vec![
            LogOp::Put {
                table: b"users",
                key: b"k1",
                value: b"value one",
            },
            LogOp::Delete {
                table: b"t",
                key: b"",
            },
            LogOp::Put {
                table: b"",
                key: &[0xFF; 4096],
                value: &[],
            },
            LogOp::CreateTable { table: b"new" },
            LogOp::DropTable { table: b"old" },
            LogOp::RingWrite {
                table: b"oplog",
                pos: &[7, 0, 0, 0, 0, 0, 0, 0],
                record: b"ring record bytes",
            },
        ]
    }

    #[test]
    fn a_record_round_trips() {
        let ops = sample();
        let rec = frame(&ops, 4096, 100);
        let (h, total) = check(&rec, 4096).unwrap();
        assert_eq!(total, rec.len());
        assert_eq!((h.lsn, h.synced, h.kind), (4096, 100, KIND_BATCH));
        assert_eq!(decode_payload(&rec[HEADER..total]).unwrap(), ops);
    }

    #[test]
    fn every_truncation_of_a_record_is_short_never_a_record() {
        let rec = frame(&sample(), 0, 0);
        for cut in 0..rec.len() {
            assert_eq!(check(&rec[..cut], 0), Err(Invalid::Short), "cut at {cut}");
        }
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let rec = frame(&sample(), 64, 0);
        for i in 0..rec.len() {
            let mut bad = rec.clone();
            bad[i] ^= 0x40;
            // A flip in the length field may also read as a short record.
            assert!(check(&bad, 64).is_err(), "flip at byte {i} went unnoticed");
        }
    }

    #[test]
    fn a_record_from_an_earlier_lap_is_not_taken_for_the_current_one() {
        let rec = frame(&sample(), 1 << 20, 0);
        assert_eq!(check(&rec, 2 << 20), Err(Invalid::WrongLsn(1 << 20)));
    }

    #[test]
    fn zeros_read_as_unwritten_space() {
        assert_eq!(check(&[0u8; 64], 0), Err(Invalid::Zero));
    }

    #[test]
    fn a_checksummed_but_malformed_payload_is_an_error_not_a_panic() {
        for payload in [
            &[][..],
            &[1, 0, 0, 0][..],
            &[1, 0, 0, 0, 9, 0, 0, 0][..],
            &[1, 0, 0, 0, OP_PUT, 200, 1][..],
            &[0, 0, 0, 0, 7][..],
            &[255, 255, 255, 255][..],
        ] {
            assert!(decode_payload(payload).is_err(), "{payload:?} decoded");
        }
    }
}
