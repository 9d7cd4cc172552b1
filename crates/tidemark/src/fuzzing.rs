//! Entry points for the fuzz targets (`crates/tidemark/fuzz`), built only
//! with the `fuzzing` feature: every decoder that reads bytes from disk or
//! from a user, driven the way the engine drives it. None may panic,
//! whatever the bytes.

use crate::btree::node;
use crate::page::{self, PageKind};

/// Every page size a database may have.
const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];

/// The bytes as one page of every page size, first as read (the checksum
/// decides), then sealed (so the structural checks and every accessor run
/// on pages that pass them).
pub fn page(data: &[u8]) {
    for ps in PAGE_SIZES {
        page_of(data, ps);
    }
}

fn page_of(data: &[u8], page_size: usize) {
    let mut buf = vec![0u8; page_size];
    let n = data.len().min(page_size);
    buf[..n].copy_from_slice(&data[..n]);
    let kinds = [
        PageKind::Leaf,
        PageKind::Branch,
        PageKind::Overflow,
        PageKind::MapChunk,
        PageKind::MapDirectory,
    ];
    for sealed in [false, true] {
        if sealed {
            page::seal(&mut buf);
        }
        let id = page::id(&buf);
        if page::check(&buf, &kinds, id, id).is_err() {
            continue;
        }
        if matches!(page::kind(&buf), Some(PageKind::Leaf | PageKind::Branch))
            && node::unpack(&mut buf).is_ok()
            && node::validate(&buf).is_ok()
        {
            walk(&buf, data);
        }
    }
    // The same bytes as the image of a block whose length the pager
    // recorded, read into the end of a frame that held other bytes: as
    // read, then with the image's own length and checksum set.
    let n = data.len().clamp(page::HEADER_SIZE + 1, page_size - 1);
    for sealed in [false, true] {
        let mut frame = vec![0xAA; page_size];
        let tail = page_size - n;
        let have = data.len().min(n);
        frame[tail..tail + have].copy_from_slice(&data[..have]);
        frame[tail + have..].fill(0);
        if sealed {
            page::set_image(&mut frame[tail..], n);
            page::seal_image(&mut frame[tail..], n);
        }
        if !page::image_intact(&frame[tail..]) {
            continue;
        }
        let id = page::id(&frame[tail..]);
        if page::check_fields(&frame[tail..], &kinds, id, id).is_ok()
            && matches!(
                page::kind(&frame[tail..]),
                Some(PageKind::Leaf | PageKind::Branch)
            )
            && node::unpack_tail(&mut frame, n).is_ok()
            && node::validate(&frame).is_ok()
        {
            walk(&frame, data);
        }
    }
}

/// Every accessor of a node page that passed its checks, and a search for
/// a key taken from `data`.
fn walk(buf: &[u8], data: &[u8]) {
    let leaf = node::is_leaf(buf);
    for i in 0..page::count(buf) {
        let _ = node::key(buf, i);
        if leaf {
            let _ = node::leaf_value(buf, i);
        } else {
            let _ = node::child(buf, i);
        }
    }
    let probe = data.get(..data.len().min(16)).unwrap_or(&[]);
    let _ = node::search(buf, probe);
    if !leaf {
        let _ = node::child_index(buf, probe);
    }
}

/// The bytes as a meta page of every page size, as read and sealed.
pub fn meta(data: &[u8]) {
    for ps in PAGE_SIZES {
        let mut buf = vec![0u8; ps];
        let n = data.len().min(ps);
        buf[..n].copy_from_slice(&data[..n]);
        let _ = crate::meta::Meta::decode(&buf, 0);
        page::seal(&mut buf);
        let _ = crate::meta::Meta::decode(&buf, 0);
        let _ = crate::meta::Meta::decode(&buf, 1);
    }
}

/// The bytes as a log record at stream position 0, and as a payload.
pub fn log_record(data: &[u8]) {
    use crate::wal::record;
    if let Ok((_, total)) = record::check(data, 0) {
        let _ = record::decode_payload(&data[record::HEADER..total]);
    }
    let _ = record::decode_payload(data);
}

/// The bytes as a capped ring state and as a ring record header.
pub fn ring(data: &[u8]) {
    let _ = crate::capped::RingState::decode(data);
    let _ = crate::capped::parse_head(data);
}

/// The bytes as a whole capped ring: the first [`RingState::ENCODED`]
/// bytes as the ring's state (as its collection's entry would give it),
/// the rest as the ring file's bytes after its header, the ring as long as
/// they are (at least the smallest ring). Walks the records forward and
/// backward as a natural-order cursor does, reading each document, and
/// plans inserts of a few lengths, as the engine does on such a file.
/// Returns the records the forward walk read whole.
///
/// [`RingState::ENCODED`]: crate::capped::RingState
pub fn ring_file(data: &[u8]) -> usize {
    use crate::capped::{Ring, RingState, FILE_HEADER, MIN_RING_SIZE, RECORD_HEADER};
    use crate::docs::cursor::RingWalk;
    let Some(st) = data.get(..RingState::ENCODED).and_then(RingState::decode) else {
        return 0;
    };
    let body = &data[RingState::ENCODED..];
    let size = (body.len() as u64).max(MIN_RING_SIZE);
    let mut bytes = vec![0u8; (FILE_HEADER + size) as usize];
    bytes[FILE_HEADER as usize..FILE_HEADER as usize + body.len()].copy_from_slice(body);
    let file = std::sync::Arc::new(crate::io::MemFile::with_bytes(bytes));
    let ring = Ring::over(file, b"fuzz", size, None, st);
    let mut forward = 0;
    for reverse in [false, true] {
        let mut walk = RingWalk::new(&ring, reverse);
        // The walk ends by the state's record ids, which may be far apart
        // in a state made of arbitrary bytes.
        for _ in 0..4096 {
            match walk.next_record(&ring, "fuzz") {
                Ok(Some((_, doc))) => {
                    let _ = crate::docs::stored_document(&doc, String::new);
                    forward += usize::from(!reverse);
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    for len in [RECORD_HEADER as u64 + 1, size / 3, size, size + 1] {
        let _ = ring.plan(&st, len, &|_| None);
    }
    forward
}

/// A sound input for [`ring_file`]: the state and bytes of a ring of
/// `records` small documents written from its start (a seed for the fuzz
/// target's corpus).
pub fn ring_file_seed(records: u64) -> Vec<u8> {
    use crate::capped::{encode_record, RingState};
    let mut body = Vec::new();
    let mut st = RingState::empty();
    for rid in 1..=records {
        let pos = body.len() as u64;
        let doc =
            bson::to_vec(&bson::doc! {"_id": rid as i64, "x": "tidemark"}).unwrap_or_default();
        let key = rid.to_be_bytes();
        body.extend(encode_record(pos, rid, st.last, &key, &doc));
        st.last = pos;
        st.head = body.len() as u64;
        st.next_id = rid + 1;
        st.count += 1;
        st.bytes = body.len() as u64;
    }
    let mut out = st.encode().to_vec();
    out.extend(body);
    out
}

/// The bytes as a document given to the document API: parsed, given an
/// `_id`, its key encoded, as `insert_one_bson` does.
pub fn document(data: &[u8]) {
    if let Ok(doc) = crate::docs::parse_document(data) {
        let _ = crate::docs::prepare(&doc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sound_ring_is_walked_whole_and_damage_stops_the_walk() {
        let seed = ring_file_seed(40);
        assert_eq!(ring_file(&seed), 40);
        // A byte of record 11's document flipped: the walk stops there
        // (a checksum mismatch is corruption, not a panic).
        let mut damaged = seed.clone();
        let header = crate::capped::RingState::ENCODED;
        let at = header + 10 * (seed.len() - header) / 40 + 45;
        damaged[at] ^= 0xff;
        assert_eq!(ring_file(&damaged), 10);
        // Too short to hold a state.
        assert_eq!(ring_file(&seed[..20]), 0);
    }
}
