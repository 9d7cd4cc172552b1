//! Entry points for the fuzz targets (`crates/tidemark/fuzz`), built only
//! with the `fuzzing` feature: every decoder that reads bytes from disk or
//! from a user, driven the way the engine drives it. None may panic,
//! whatever the bytes.

use crate::btree::node;
use crate::page::{self, PageKind, PAGE_SIZE};

/// The bytes as one page, first as read (the checksum decides), then
/// sealed (so the structural checks and every accessor run on pages that
/// pass them).
pub fn page(data: &[u8]) {
    let mut buf = vec![0u8; PAGE_SIZE];
    let n = data.len().min(PAGE_SIZE);
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
    let n = data.len().clamp(page::HEADER_SIZE + 1, PAGE_SIZE - 1);
    for sealed in [false, true] {
        let mut frame = vec![0xAA; PAGE_SIZE];
        let tail = PAGE_SIZE - n;
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

/// The bytes as a meta page, as read and sealed.
pub fn meta(data: &[u8]) {
    let mut buf = vec![0u8; PAGE_SIZE];
    let n = data.len().min(PAGE_SIZE);
    buf[..n].copy_from_slice(&data[..n]);
    let _ = crate::meta::Meta::decode(&buf, 0);
    page::seal(&mut buf);
    let _ = crate::meta::Meta::decode(&buf, 0);
    let _ = crate::meta::Meta::decode(&buf, 1);
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

/// The bytes as a document given to the document API: parsed, given an
/// `_id`, its key encoded, as `insert_one_bson` does.
pub fn document(data: &[u8]) {
    if let Ok(doc) = crate::docs::parse_document(data) {
        let _ = crate::docs::prepare(&doc);
    }
}
