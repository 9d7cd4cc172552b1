//! The page: the fixed-size unit of the data file and of the cache.
//!
//! Every block of the data file is one page and starts with the same
//! 32-byte header:
//!
//! | offset | size | field     | meaning                                              |
//! |--------|------|-----------|------------------------------------------------------|
//! | 0      | 4    | checksum  | crc32c of bytes 4..page size, or 4..image           |
//! | 4      | 1    | kind      | [`PageKind`]                                         |
//! | 5      | 1    | level     | B+tree level: 0 = leaf, >0 = branch                  |
//! | 6      | 2    | count     | number of cells (nodes) or payload entries           |
//! | 8      | 8    | id        | logical page id (tree/overflow), chunk index (map)   |
//! | 16     | 8    | aux       | branch: leftmost child; overflow: payload length;    |
//! |        |      |           | leaf: where its last inserts landed (a split hint)   |
//! | 24     | 2    | free_end  | nodes: offset where the cell area begins             |
//! | 26     | 2    | garbage   | nodes: bytes of dead cells inside the cell area      |
//! | 28     | 4    | image     | 0: the block holds the whole page; else the length   |
//! |        |      |           | of a packed node image (below)                       |
//!
//! A leaf or branch page is stored packed (see [`crate::btree::node::pack`]):
//! its header and slots, then its cells, without the free gap between them,
//! zero-padded to a multiple of [`IMAGE_ALIGN`]. `image` is the length
//! before the padding and the checksum covers bytes 4..image; the rest of
//! the block is not part of the page and may hold anything. A checkpoint,
//! and the first write of a block since open, write zeros there, so that
//! the write covers the block; an eviction's later writes of a block write
//! the padded image alone, leaving an earlier page's bytes there
//! (`Pager::write_new_block` says why). Other kinds of page are always
//! stored whole (`image` 0), as every page was before packing.
//!
//! The id in the header is checked against the id the reader expected, so a
//! page written to the wrong block, or a stale block read through a bad
//! pointer, is detected as well as a torn or bit-flipped one.

use crate::error::{Error, Result};

/// Size of every page and block of a new database unless its builder
/// chooses another ([`crate::Builder::page_size`]), in bytes.
///
/// 16 KiB: keys may be up to 4 KiB, and a branch page must hold at least
/// three maximal separators for splits to always make progress; 8 KiB
/// cannot (it takes keys up to 2 KiB, see [`max_key_size`]). It is also
/// large enough that a tree over a terabyte has four levels.
pub const DEFAULT_PAGE_SIZE: usize = 16 * 1024;
/// Smallest page size a database may have: the kernel's page, so that a
/// page is never split across two page-cache pages.
pub const MIN_PAGE_SIZE: usize = 4 * 1024;
/// Largest page size a database may have: every in-page offset, and the
/// page size itself, must fit the header's u16 fields.
pub const MAX_PAGE_SIZE: usize = 32 * 1024;
const _: () = assert!(MAX_PAGE_SIZE <= u16::MAX as usize);

/// Whether `n` may be a database's page size: a power of two from
/// [`MIN_PAGE_SIZE`] to [`MAX_PAGE_SIZE`].
pub fn valid_page_size(n: usize) -> bool {
    n.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&n)
}

/// Longest key a database of pages of `page_size` bytes takes: a quarter
/// of the page, at most 4 KiB (1 KiB for 4 KiB pages, 2 KiB for 8 KiB, 4
/// KiB from 16 KiB up). A branch cell of a maximal key must fit a third of
/// a node's room, so that a split always leaves two halves that fit; a
/// quarter leaves room for the cell's header, slot and overflow reference.
pub const fn max_key_size(page_size: usize) -> usize {
    let q = page_size / 4;
    if q < 4096 {
        q
    } else {
        4096
    }
}

const CHECKSUM_OFFSET: usize = 0;
const KIND_OFFSET: usize = CHECKSUM_OFFSET + 4;
const LEVEL_OFFSET: usize = KIND_OFFSET + 1;
const COUNT_OFFSET: usize = LEVEL_OFFSET + 1;
const ID_OFFSET: usize = COUNT_OFFSET + 2;
const AUX_OFFSET: usize = ID_OFFSET + 8;
const FREE_END_OFFSET: usize = AUX_OFFSET + 8;
const GARBAGE_OFFSET: usize = FREE_END_OFFSET + 2;
const IMAGE_OFFSET: usize = GARBAGE_OFFSET + 2;
/// Size of the common page header; page bodies start here.
pub const HEADER_SIZE: usize = IMAGE_OFFSET + 4;
/// A packed page image written alone (by an eviction) is written in whole
/// multiples of this (the kernel's page size): a write that covers part of
/// a page-cache page makes the kernel read the rest of it first.
pub(crate) const IMAGE_ALIGN: usize = crate::io::CACHE_PAGE;

/// What a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageKind {
    Meta = 1,
    Leaf = 2,
    Branch = 3,
    Overflow = 4,
    MapChunk = 5,
    MapDirectory = 6,
}

impl PageKind {
    fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            1 => PageKind::Meta,
            2 => PageKind::Leaf,
            3 => PageKind::Branch,
            4 => PageKind::Overflow,
            5 => PageKind::MapChunk,
            6 => PageKind::MapDirectory,
            _ => return None,
        })
    }
}

pub(crate) fn get_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([buf[at], buf[at + 1]])
}
pub(crate) fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}
pub(crate) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get_u64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}
pub(crate) fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn kind(buf: &[u8]) -> Option<PageKind> {
    PageKind::from_byte(buf[KIND_OFFSET])
}
pub(crate) fn level(buf: &[u8]) -> u8 {
    buf[LEVEL_OFFSET]
}
pub(crate) fn count(buf: &[u8]) -> usize {
    usize::from(get_u16(buf, COUNT_OFFSET))
}
pub(crate) fn set_count(buf: &mut [u8], n: usize) {
    debug_assert!(n <= usize::from(u16::MAX));
    put_u16(buf, COUNT_OFFSET, n as u16);
}
pub(crate) fn id(buf: &[u8]) -> u64 {
    get_u64(buf, ID_OFFSET)
}
pub(crate) fn set_id(buf: &mut [u8], v: u64) {
    put_u64(buf, ID_OFFSET, v);
}
pub(crate) fn aux(buf: &[u8]) -> u64 {
    get_u64(buf, AUX_OFFSET)
}
pub(crate) fn set_aux(buf: &mut [u8], v: u64) {
    put_u64(buf, AUX_OFFSET, v);
}
pub(crate) fn free_end(buf: &[u8]) -> usize {
    usize::from(get_u16(buf, FREE_END_OFFSET))
}
pub(crate) fn set_free_end(buf: &mut [u8], v: usize) {
    debug_assert!(v <= MAX_PAGE_SIZE);
    // Pages are at most MAX_PAGE_SIZE (32 KiB), so every in-page offset fits in u16.
    put_u16(buf, FREE_END_OFFSET, v as u16);
}
pub(crate) fn garbage(buf: &[u8]) -> usize {
    usize::from(get_u16(buf, GARBAGE_OFFSET))
}
pub(crate) fn set_garbage(buf: &mut [u8], v: usize) {
    debug_assert!(v <= MAX_PAGE_SIZE);
    put_u16(buf, GARBAGE_OFFSET, v as u16);
}

/// Length of the packed image the page was stored as, 0 if stored whole.
pub(crate) fn image(buf: &[u8]) -> usize {
    get_u32(buf, IMAGE_OFFSET) as usize
}
pub(crate) fn set_image(buf: &mut [u8], v: usize) {
    debug_assert!(v <= MAX_PAGE_SIZE);
    put_u32(buf, IMAGE_OFFSET, v as u32);
}

/// Clears `buf` and writes a fresh header.
pub(crate) fn init(buf: &mut [u8], kind: PageKind, level: u8, id: u64) {
    buf.fill(0);
    buf[KIND_OFFSET] = kind as u8;
    buf[LEVEL_OFFSET] = level;
    put_u64(buf, ID_OFFSET, id);
    let end = buf.len();
    set_free_end(buf, end);
}

/// Computes and stores the checksum of the whole page (stored whole, so
/// `image` is 0); call just before writing the page.
pub(crate) fn seal(buf: &mut [u8]) {
    set_image(buf, 0);
    let sum = crate::checksum::crc32c(&buf[KIND_OFFSET..]);
    put_u32(buf, CHECKSUM_OFFSET, sum);
}

/// Stores the checksum of a packed image of `image` bytes at the start of
/// `buf` (its `image` field already set).
pub(crate) fn seal_image(buf: &mut [u8], image: usize) {
    let sum = crate::checksum::crc32c(&buf[KIND_OFFSET..image]);
    put_u32(buf, CHECKSUM_OFFSET, sum);
}

/// Seals a packed image given in pieces: `header`, the page's first
/// [`HEADER_SIZE`] bytes (its `image` field already set), then `rest`, the
/// image's remaining bytes in order. Stores in `header` the checksum
/// [`seal_image`] would store for the joined image.
pub(crate) fn seal_image_parts(header: &mut [u8; HEADER_SIZE], rest: &[&[u8]]) {
    let sum = crate::checksum::crc32c(&header[KIND_OFFSET..]);
    let sum = crate::checksum::crc32c_append(sum, rest);
    put_u32(header, CHECKSUM_OFFSET, sum);
}

/// Checks a page just read from disk: checksum, kind and id. A packed node
/// image passes as it is; [`crate::btree::node::unpack`] lays it out.
/// `buf` is the whole block, one page long.
///
/// `page` names the page in the error (logical id or block number).
pub(crate) fn check(buf: &[u8], want_kind: &[PageKind], want_id: u64, page: u64) -> Result<()> {
    if !valid_page_size(buf.len()) {
        return Err(Error::corruption(page, "short page"));
    }
    let image = image(buf);
    if image != 0 && !(HEADER_SIZE..=buf.len()).contains(&image) {
        return Err(Error::corruption(
            page,
            format!("packed image length {image} out of range"),
        ));
    }
    let end = if image == 0 { buf.len() } else { image };
    let stored = get_u32(buf, CHECKSUM_OFFSET);
    let actual = crate::checksum::crc32c(&buf[KIND_OFFSET..end]);
    if stored != actual {
        if buf.iter().all(|&b| b == 0) {
            return Err(Error::corruption(
                page,
                "block was never written (all zero)",
            ));
        }
        return Err(Error::corruption(
            page,
            format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    check_fields(buf, want_kind, want_id, page)
}

/// Whether `stored`, the first bytes of a block, is exactly a packed node
/// image: its `image` field is its length and its checksum matches. A
/// reader that knows a block's image length reads only that and checks it
/// with this; any other outcome sends it to a whole read and [`check`].
pub(crate) fn image_intact(stored: &[u8]) -> bool {
    stored.len() > HEADER_SIZE
        && image(stored) == stored.len()
        && get_u32(stored, CHECKSUM_OFFSET) == crate::checksum::crc32c(&stored[KIND_OFFSET..])
}

/// The checks of [`check`] after the checksum: kind, packing, id. `buf`
/// starts with the page's header as stored.
pub(crate) fn check_fields(
    buf: &[u8],
    want_kind: &[PageKind],
    want_id: u64,
    page: u64,
) -> Result<()> {
    let image = image(buf);
    let k = kind(buf).ok_or_else(|| {
        Error::corruption(page, format!("unknown page kind {}", buf[KIND_OFFSET]))
    })?;
    if !want_kind.contains(&k) {
        return Err(Error::corruption(
            page,
            format!("expected a {want_kind:?} page, found {k:?}"),
        ));
    }
    if image != 0 && !matches!(k, PageKind::Leaf | PageKind::Branch) {
        return Err(Error::corruption(
            page,
            format!("a {k:?} page is never stored packed"),
        ));
    }
    if id(buf) != want_id {
        return Err(Error::corruption(
            page,
            format!(
                "misplaced page: expected id {want_id}, header says {}",
                id(buf)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_check_roundtrips_and_detects_flips() {
        let mut buf = vec![0u8; DEFAULT_PAGE_SIZE];
        init(&mut buf, PageKind::Leaf, 0, 42);
        buf[100] = 7;
        seal(&mut buf);
        check(&buf, &[PageKind::Leaf], 42, 42).unwrap();
        assert!(matches!(
            check(&buf, &[PageKind::Leaf], 43, 43),
            Err(Error::Corruption { .. })
        ));
        assert!(matches!(
            check(&buf, &[PageKind::Branch], 42, 42),
            Err(Error::Corruption { .. })
        ));
        for at in [0usize, 4, 5, 100, DEFAULT_PAGE_SIZE - 1] {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            assert!(
                check(&bad, &[PageKind::Leaf], 42, 42).is_err(),
                "flip at {at} undetected"
            );
        }
    }

    #[test]
    fn zero_block_is_reported_as_unwritten() {
        let buf = vec![0u8; DEFAULT_PAGE_SIZE];
        let err = check(&buf, &[PageKind::Leaf], 1, 1).unwrap_err();
        assert!(err.to_string().contains("never written"), "{err}");
    }
}
