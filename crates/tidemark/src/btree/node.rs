//! Slotted B+tree nodes: the body of leaf and branch pages.
//!
//! After the common header (see [`crate::page`]) a node holds an array of
//! `count` little-endian u16 slots, each the offset of a cell. Cells are
//! packed from the end of the page downwards; `free_end` is the lowest cell
//! offset and `garbage` counts bytes of removed cells not yet compacted.
//! Slots are kept in key order, cells are in any order.
//!
//! Leaf cell:
//!
//! | size | field | meaning                                               |
//! |------|-------|-------------------------------------------------------|
//! | 2    | klen  | key length                                            |
//! | 1    | vtag  | 0 = value inline, 1 = value in overflow pages          |
//! | 4    | vlen  | value length (the whole value, also when overflowed)  |
//! | klen | key   |                                                       |
//! | vlen or 8 | value, or the page id of the overflow index page |
//!
//! Branch cell: `klen: u16, child: u64, key`. A branch with n cells has
//! n + 1 children: the header's `aux` is the leftmost child (keys below the
//! first separator); cell i's child holds keys >= cell i's key.

use crate::page::{self, get_u16, get_u32, get_u64, put_u16, PageKind, HEADER_SIZE, PAGE_SIZE};

/// Bytes usable for slots and cells in a node.
pub(crate) const USABLE: usize = PAGE_SIZE - HEADER_SIZE;
/// Largest cell, slot included, that a node accepts: a third of the usable
/// space, so a full node always holds at least two cells and every split of
/// a full node plus one more cell leaves two halves that fit.
pub(crate) const MAX_CELL: usize = USABLE / 3;
const SLOT: usize = 2;
const LEAF_CELL_HEADER: usize = 7;
const BRANCH_CELL_HEADER: usize = 10;
const OVERFLOW_REF: usize = 8;

/// Maximum key length in bytes. A branch cell of a maximal key, with its
/// header and slot, must fit the largest cell a node takes (a third of a
/// page's usable space, so that a split always leaves two halves that fit).
pub const MAX_KEY_SIZE: usize = 4096;
const _: () = assert!(BRANCH_CELL_HEADER + MAX_KEY_SIZE + SLOT <= MAX_CELL);
const _: () = assert!(LEAF_CELL_HEADER + MAX_KEY_SIZE + OVERFLOW_REF + SLOT <= MAX_CELL);

/// A leaf value as stored: inline bytes or a reference to overflow pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow { len: u64, index_pid: u64 },
}

/// Whether a key/value pair is stored inline or must go to overflow pages.
pub(crate) fn fits_inline(klen: usize, vlen: usize) -> bool {
    LEAF_CELL_HEADER + klen + vlen + SLOT <= MAX_CELL
}

pub(crate) fn encode_leaf_cell(key: &[u8], value: LeafValue<'_>) -> Vec<u8> {
    let mut c = Vec::with_capacity(LEAF_CELL_HEADER + key.len() + 8);
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    match value {
        LeafValue::Inline(v) => {
            c.push(0);
            c.extend_from_slice(&(v.len() as u32).to_le_bytes());
            c.extend_from_slice(key);
            c.extend_from_slice(v);
        }
        LeafValue::Overflow { len, index_pid } => {
            c.push(1);
            // Values are limited to 16 MiB, so the length fits in u32.
            c.extend_from_slice(&(len as u32).to_le_bytes());
            c.extend_from_slice(key);
            c.extend_from_slice(&index_pid.to_le_bytes());
        }
    }
    c
}

pub(crate) fn encode_branch_cell(key: &[u8], child: u64) -> Vec<u8> {
    let mut c = Vec::with_capacity(BRANCH_CELL_HEADER + key.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&child.to_le_bytes());
    c.extend_from_slice(key);
    c
}

pub(crate) fn init_leaf(buf: &mut [u8], pid: u64) {
    page::init(buf, PageKind::Leaf, 0, pid);
}

pub(crate) fn init_branch(buf: &mut [u8], pid: u64, level: u8, leftmost: u64) {
    page::init(buf, PageKind::Branch, level, pid);
    page::set_aux(buf, leftmost);
}

pub(crate) fn is_leaf(buf: &[u8]) -> bool {
    page::level(buf) == 0
}

fn slot(buf: &[u8], i: usize) -> usize {
    usize::from(get_u16(buf, HEADER_SIZE + i * SLOT))
}
fn set_slot(buf: &mut [u8], i: usize, off: usize) {
    put_u16(buf, HEADER_SIZE + i * SLOT, off as u16);
}
fn slots_end(buf: &[u8]) -> usize {
    HEADER_SIZE + page::count(buf) * SLOT
}

fn cell_len_at(buf: &[u8], off: usize) -> usize {
    let klen = usize::from(get_u16(buf, off));
    if is_leaf(buf) {
        let vlen = get_u32(buf, off + 3) as usize;
        let body = if buf[off + 2] == 0 {
            vlen
        } else {
            OVERFLOW_REF
        };
        LEAF_CELL_HEADER + klen + body
    } else {
        BRANCH_CELL_HEADER + klen
    }
}

/// The raw bytes of cell `i`.
pub(crate) fn cell(buf: &[u8], i: usize) -> &[u8] {
    let off = slot(buf, i);
    &buf[off..off + cell_len_at(buf, off)]
}

pub(crate) fn key(buf: &[u8], i: usize) -> &[u8] {
    let off = slot(buf, i);
    let klen = usize::from(get_u16(buf, off));
    let start = off
        + if is_leaf(buf) {
            LEAF_CELL_HEADER
        } else {
            BRANCH_CELL_HEADER
        };
    &buf[start..start + klen]
}

pub(crate) fn leaf_value(buf: &[u8], i: usize) -> LeafValue<'_> {
    let off = slot(buf, i);
    let klen = usize::from(get_u16(buf, off));
    let vlen = get_u32(buf, off + 3) as usize;
    let start = off + LEAF_CELL_HEADER + klen;
    if buf[off + 2] == 0 {
        LeafValue::Inline(&buf[start..start + vlen])
    } else {
        LeafValue::Overflow {
            len: vlen as u64,
            index_pid: get_u64(buf, start),
        }
    }
}

/// Child `i` of a branch, `0..=count`.
pub(crate) fn child(buf: &[u8], i: usize) -> u64 {
    if i == 0 {
        page::aux(buf)
    } else {
        get_u64(buf, slot(buf, i - 1) + 2)
    }
}

/// Binary search: `Ok(i)` if cell i has `key`, else `Err(insertion point)`.
pub(crate) fn search(buf: &[u8], key_: &[u8]) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0usize, page::count(buf));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match key(buf, mid).cmp(key_) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Index of the child of a branch whose range holds `key`.
pub(crate) fn child_index(buf: &[u8], key_: &[u8]) -> usize {
    match search(buf, key_) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}

/// Index of the child holding the greatest keys strictly below `key`.
pub(crate) fn child_index_below(buf: &[u8], key_: &[u8]) -> usize {
    match search(buf, key_) {
        Ok(i) | Err(i) => i,
    }
}

/// Free bytes, counting dead cells that a compaction would reclaim.
pub(crate) fn free_space(buf: &[u8]) -> usize {
    page::free_end(buf) - slots_end(buf) + page::garbage(buf)
}

/// Whether a cell of `cell_len` bytes can be added (after compaction).
pub(crate) fn can_insert(buf: &[u8], cell_len: usize) -> bool {
    free_space(buf) >= cell_len + SLOT
}

/// Inserts `cell` as cell `i`; returns false (page unchanged) if it cannot fit.
pub(crate) fn insert_cell(buf: &mut [u8], i: usize, cell_: &[u8]) -> bool {
    if !can_insert(buf, cell_.len()) {
        return false;
    }
    if page::free_end(buf) - slots_end(buf) < cell_.len() + SLOT {
        compact(buf);
    }
    let n = page::count(buf);
    debug_assert!(i <= n);
    let off = page::free_end(buf) - cell_.len();
    buf[off..off + cell_.len()].copy_from_slice(cell_);
    page::set_free_end(buf, off);
    // Shift slots i.. one to the right.
    let from = HEADER_SIZE + i * SLOT;
    let to = HEADER_SIZE + n * SLOT;
    buf.copy_within(from..to, from + SLOT);
    page::set_count(buf, n + 1);
    set_slot(buf, i, off);
    true
}

/// Removes cell `i`.
pub(crate) fn remove(buf: &mut [u8], i: usize) {
    let n = page::count(buf);
    debug_assert!(i < n);
    let len = cell(buf, i).len();
    let off = slot(buf, i);
    if off == page::free_end(buf) {
        page::set_free_end(buf, off + len);
    } else {
        page::set_garbage(buf, page::garbage(buf) + len);
    }
    let from = HEADER_SIZE + (i + 1) * SLOT;
    let to = HEADER_SIZE + n * SLOT;
    buf.copy_within(from..to, from - SLOT);
    page::set_count(buf, n - 1);
}

/// Rewrites the cell area without holes, in the layout [`rebuild`] gives,
/// from one copy of the page on the stack (no allocation per cell: this
/// runs on the write path whenever a leaf's freed space is needed).
pub(crate) fn compact(buf: &mut [u8]) {
    let mut old = [0u8; PAGE_SIZE];
    old.copy_from_slice(&buf[..PAGE_SIZE]);
    let n = page::count(&old);
    let mut end = PAGE_SIZE;
    buf[HEADER_SIZE..].fill(0);
    for i in 0..n {
        let c = cell(&old, i);
        end -= c.len();
        buf[end..end + c.len()].copy_from_slice(c);
        set_slot(buf, i, end);
    }
    page::set_free_end(buf, end);
    page::set_garbage(buf, 0);
    debug_assert!(slots_end(buf) <= end, "compact overflowed the page");
}

/// Packs node page `src` into `dst` the way it is stored: the header and
/// slots, then the live cells, without the free gap between them (nor dead
/// cells: those are left behind, and the slots say where each cell lies once
/// unpacked), zero-padded to a multiple of [`page::IMAGE_ALIGN`] and sealed
/// over the image. Returns the number of bytes of `dst` to write.
///
/// A leaf filled by random inserts is about two thirds full, so this writes
/// 12 KiB where the whole page is 16.
pub(crate) fn pack(src: &[u8], dst: &mut [u8]) -> usize {
    let se = slots_end(src);
    if page::garbage(src) == 0 {
        let fe = page::free_end(src);
        dst[..se].copy_from_slice(&src[..se]);
        dst[se..se + PAGE_SIZE - fe].copy_from_slice(&src[fe..PAGE_SIZE]);
    } else {
        // Dead cells: lay the live ones out as `compact` does (the slots
        // then hold their unpacked offsets), and close the gap.
        dst[..PAGE_SIZE].copy_from_slice(&src[..PAGE_SIZE]);
        compact(dst);
        let fe = page::free_end(dst);
        dst.copy_within(fe..PAGE_SIZE, se);
    }
    let live = PAGE_SIZE - page::free_end(dst);
    let image = se + live;
    let len = image.next_multiple_of(page::IMAGE_ALIGN);
    dst[image..len].fill(0);
    page::set_image(dst, image);
    page::seal_image(dst, image);
    len
}

/// Lays out in place a node page read packed (its checksum already
/// checked): moves the cells back to the end of the page and clears the
/// gap. A page stored whole is left as it is.
pub(crate) fn unpack(buf: &mut [u8]) -> Result<(), String> {
    let image = page::image(buf);
    if image == 0 {
        return Ok(());
    }
    let se = slots_end(buf);
    let fe = page::free_end(buf);
    if se > image || image > PAGE_SIZE || fe < se || fe > PAGE_SIZE || PAGE_SIZE - fe != image - se
    {
        return Err(format!(
            "packed image of {image} bytes does not match {} slots and free_end {fe}",
            page::count(buf)
        ));
    }
    buf.copy_within(se..image, fe);
    buf[se..fe].fill(0);
    page::set_image(buf, 0);
    Ok(())
}

/// Lays out in place a node page whose packed image of `image` bytes was
/// read into the end of `buf` (its checksum already checked there): the
/// cells are then already where the unpacked page keeps them, so only the
/// header and slots move to the front and the gap between is cleared. Saves
/// [`unpack`]'s move of every cell.
pub(crate) fn unpack_tail(buf: &mut [u8], image: usize) -> Result<(), String> {
    if !(HEADER_SIZE..PAGE_SIZE).contains(&image) {
        return Err(format!(
            "packed image of {image} bytes read at a page's end"
        ));
    }
    let t = PAGE_SIZE - image;
    let se = HEADER_SIZE + page::count(&buf[t..]) * SLOT;
    let fe = page::free_end(&buf[t..]);
    // With the image at the end, its cells start at t + se; the page says
    // they start at fe.
    if se > image || fe != t + se {
        return Err(format!(
            "packed image of {image} bytes does not match {} slots and free_end {fe}",
            page::count(&buf[t..])
        ));
    }
    buf.copy_within(t..t + se, 0);
    buf[se..fe].fill(0);
    page::set_image(buf, 0);
    Ok(())
}

/// Replaces all cells of `buf` (header fields other than count, free_end and
/// garbage are kept).
fn rebuild(buf: &mut [u8], cells: &[Vec<u8>]) {
    let mut end = PAGE_SIZE;
    buf[HEADER_SIZE..].fill(0);
    for (i, c) in cells.iter().enumerate() {
        end -= c.len();
        buf[end..end + c.len()].copy_from_slice(c);
        set_slot(buf, i, end);
    }
    page::set_count(buf, cells.len());
    page::set_free_end(buf, end);
    page::set_garbage(buf, 0);
    debug_assert!(slots_end(buf) <= end, "rebuild overflowed the page");
}

/// The cells of `buf` with `new_cell` inserted at (or replacing) index `i`.
fn cells_with(buf: &[u8], i: usize, new_cell: &[u8], replace: bool) -> Vec<Vec<u8>> {
    let mut cells: Vec<Vec<u8>> = (0..page::count(buf))
        .map(|j| cell(buf, j).to_vec())
        .collect();
    if replace {
        cells[i] = new_cell.to_vec();
    } else {
        cells.insert(i, new_cell.to_vec());
    }
    cells
}

/// Picks how many of `cells` go left so both halves fit a page.
fn split_point(cells: &[Vec<u8>]) -> usize {
    let total: usize = cells.iter().map(|c| c.len() + SLOT).sum();
    let mut acc = 0;
    let mut m = 0;
    while m < cells.len() && acc + cells[m].len() + SLOT <= total / 2 {
        acc += cells[m].len() + SLOT;
        m += 1;
    }
    m.clamp(1, cells.len() - 1)
}

/// Splits a leaf that cannot take `new_cell` at index `i` (replacing cell
/// `i` when `replace`). `left` keeps the lower half, `right` (initialised
/// here with `right_pid`) receives the upper half. Returns the separator:
/// the first key of `right`.
pub(crate) fn split_leaf(
    left: &mut [u8],
    right: &mut [u8],
    right_pid: u64,
    i: usize,
    new_cell: &[u8],
    replace: bool,
) -> Vec<u8> {
    let cells = cells_with(left, i, new_cell, replace);
    let m = split_point(&cells);
    init_leaf(right, right_pid);
    rebuild(right, &cells[m..]);
    rebuild(left, &cells[..m]);
    key(right, 0).to_vec()
}

/// Splits a branch that cannot take `new_cell` at index `i`. The middle
/// separator moves up: it is returned, and its child becomes `right`'s
/// leftmost child.
pub(crate) fn split_branch(
    left: &mut [u8],
    right: &mut [u8],
    right_pid: u64,
    i: usize,
    new_cell: &[u8],
) -> Vec<u8> {
    let cells = cells_with(left, i, new_cell, false);
    let m = split_point(&cells);
    let promoted = &cells[m];
    let klen = usize::from(get_u16(promoted, 0));
    let child_ = get_u64(promoted, 2);
    let sep = promoted[BRANCH_CELL_HEADER..BRANCH_CELL_HEADER + klen].to_vec();
    init_branch(right, right_pid, page::level(left), child_);
    rebuild(right, &cells[m + 1..]);
    rebuild(left, &cells[..m]);
    sep
}

/// Structural check of a node just read from disk, so that the accessors
/// above cannot index out of bounds. Key order is checked by `verify`.
pub(crate) fn validate(buf: &[u8]) -> Result<(), String> {
    let n = page::count(buf);
    let se = HEADER_SIZE + n * SLOT;
    let fe = page::free_end(buf);
    if se > PAGE_SIZE || fe < se || fe > PAGE_SIZE {
        return Err(format!("bad layout: {n} slots, free_end {fe}"));
    }
    if page::garbage(buf) > PAGE_SIZE - fe {
        return Err("garbage larger than cell area".into());
    }
    let leaf = is_leaf(buf);
    for i in 0..n {
        let off = slot(buf, i);
        let hdr = if leaf {
            LEAF_CELL_HEADER
        } else {
            BRANCH_CELL_HEADER
        };
        if off < fe || off + hdr > PAGE_SIZE {
            return Err(format!("slot {i} points outside the cell area ({off})"));
        }
        if leaf && buf[off + 2] > 1 {
            return Err(format!("cell {i}: unknown value tag {}", buf[off + 2]));
        }
        let klen = usize::from(get_u16(buf, off));
        if klen == 0 || klen > MAX_KEY_SIZE {
            return Err(format!("cell {i}: key length {klen}"));
        }
        if off + cell_len_at(buf, off) > PAGE_SIZE {
            return Err(format!("cell {i} runs past the end of the page"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf_with(keys: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0u8; PAGE_SIZE];
        init_leaf(&mut b, 9);
        for k in keys {
            let i = search(&b, k).unwrap_err();
            assert!(insert_cell(
                &mut b,
                i,
                &encode_leaf_cell(k, LeafValue::Inline(b"v"))
            ));
        }
        b
    }

    #[test]
    fn an_image_read_into_the_end_of_a_frame_lays_out_as_unpack_does() {
        let mut b = leaf_with(&[b"m", b"c", b"x", b"a", b"q"]);
        // A dead cell, so that packing compacts.
        remove(&mut b, 1);
        let mut image = vec![0u8; PAGE_SIZE];
        pack(&b, &mut image);
        let n = page::image(&image);
        let mut whole = image.clone();
        unpack(&mut whole).unwrap();
        // The frame held another page's bytes.
        let mut tail = vec![0xAA; PAGE_SIZE];
        tail[PAGE_SIZE - n..].copy_from_slice(&image[..n]);
        unpack_tail(&mut tail, n).unwrap();
        assert_eq!(tail, whole);
        validate(&tail).unwrap();
        // Read at a length that is not the image's, the layout does not add
        // up and nothing is laid out.
        for wrong in [n - 8, n + 8] {
            let mut t = vec![0u8; PAGE_SIZE];
            let k = wrong.min(n);
            t[PAGE_SIZE - wrong..PAGE_SIZE - wrong + k].copy_from_slice(&image[..k]);
            assert!(unpack_tail(&mut t, wrong).is_err(), "{wrong}");
        }
        assert!(unpack_tail(&mut tail, PAGE_SIZE).is_err());
    }

    #[test]
    fn insert_search_remove_keep_order() {
        let mut b = leaf_with(&[b"m", b"c", b"x", b"a"]);
        let keys: Vec<&[u8]> = (0..page::count(&b)).map(|i| key(&b, i)).collect();
        assert_eq!(keys, vec![&b"a"[..], b"c", b"m", b"x"]);
        assert_eq!(search(&b, b"m"), Ok(2));
        assert_eq!(search(&b, b"n"), Err(3));
        remove(&mut b, 1);
        assert_eq!(search(&b, b"c"), Err(1));
        assert_eq!(leaf_value(&b, 1), LeafValue::Inline(b"v"));
        validate(&b).unwrap();
    }

    #[test]
    fn fill_compact_and_split_produce_valid_halves() {
        let mut b = vec![0u8; PAGE_SIZE];
        init_leaf(&mut b, 1);
        let val = vec![7u8; 300];
        let (mut next, mut live) = (0u32, 0usize);
        loop {
            let k = format!("k{next:05}");
            next += 1;
            let c = encode_leaf_cell(k.as_bytes(), LeafValue::Inline(&val));
            let i = search(&b, k.as_bytes()).unwrap_err();
            if !insert_cell(&mut b, i, &c) {
                let mut r = vec![0u8; PAGE_SIZE];
                let sep = split_leaf(&mut b, &mut r, 2, i, &c, false);
                validate(&b).unwrap();
                validate(&r).unwrap();
                assert_eq!(sep, key(&r, 0));
                assert!(key(&b, page::count(&b) - 1) < &sep[..]);
                assert_eq!(page::count(&b) + page::count(&r), live + 1);
                break;
            }
            live += 1;
            if next % 10 == 0 {
                remove(&mut b, 0);
                live -= 1;
            }
        }
    }

    fn cells_of(b: &[u8]) -> Vec<Vec<u8>> {
        (0..page::count(b)).map(|i| cell(b, i).to_vec()).collect()
    }

    /// A packed page is shorter than the page, passes the checksum over its
    /// image only, and unpacks to a page with the same cells in the same
    /// order, with or without dead cells in the original; what lies past
    /// the image in the block does not matter.
    #[test]
    fn pack_then_unpack_keeps_every_cell() {
        for with_garbage in [false, true] {
            let mut b = vec![0u8; PAGE_SIZE];
            init_leaf(&mut b, 5);
            for n in 0..40u32 {
                let k = format!("k{:03}", (n * 17) % 41);
                let v = vec![n as u8; 30 + (n as usize * 7) % 50];
                let i = search(&b, k.as_bytes()).unwrap_err();
                assert!(insert_cell(
                    &mut b,
                    i,
                    &encode_leaf_cell(k.as_bytes(), LeafValue::Inline(&v))
                ));
            }
            if with_garbage {
                remove(&mut b, 3);
                remove(&mut b, 20);
                assert!(page::garbage(&b) > 0);
            }
            let mut block = vec![0xA5u8; PAGE_SIZE];
            let len = pack(&b, &mut block);
            assert!(len < PAGE_SIZE, "a page under half full packs short: {len}");
            assert_eq!(len % page::IMAGE_ALIGN, 0);
            page::check(&block, &[PageKind::Leaf], 5, 5).unwrap();
            // Bytes past the padded image are not covered.
            block[len..].fill(0x3C);
            page::check(&block, &[PageKind::Leaf], 5, 5).unwrap();
            unpack(&mut block).unwrap();
            validate(&block).unwrap();
            assert_eq!(page::image(&block), 0);
            assert_eq!(page::garbage(&block), 0);
            assert_eq!(cells_of(&block), cells_of(&b));
            // Unpacked, the page takes inserts like any other.
            let i = search(&block, b"zz").unwrap_err();
            assert!(insert_cell(
                &mut block,
                i,
                &encode_leaf_cell(b"zz", LeafValue::Inline(b"1"))
            ));
            validate(&block).unwrap();
        }
    }

    /// A flip inside the image fails the checksum; an image whose length
    /// disagrees with its slots is refused by `unpack`, not laid out.
    #[test]
    fn damaged_packed_images_are_refused() {
        let b = leaf_with(&[b"a", b"b", b"c"]);
        let mut block = vec![0u8; PAGE_SIZE];
        let _ = pack(&b, &mut block);
        let image = page::image(&block);
        for at in [4usize, HEADER_SIZE, image - 1] {
            let mut bad = block.clone();
            bad[at] ^= 1;
            assert!(
                page::check(&bad, &[PageKind::Leaf], 9, 9).is_err(),
                "flip at {at}"
            );
        }
        let mut bad = block.clone();
        page::set_image(&mut bad, PAGE_SIZE + 1);
        assert!(page::check(&bad, &[PageKind::Leaf], 9, 9).is_err());
        let mut bad = block.clone();
        page::set_image(&mut bad, image - 1);
        page::seal_image(&mut bad, image - 1);
        page::check(&bad, &[PageKind::Leaf], 9, 9).unwrap();
        assert!(unpack(&mut bad).is_err());
    }

    /// Compacting in place gives byte for byte the page that rebuilding
    /// from a copy of every cell gives, holes gone, cells and order kept.
    #[test]
    fn compact_equals_a_rebuild_from_the_cells() {
        let mut b = vec![0u8; PAGE_SIZE];
        init_leaf(&mut b, 3);
        for n in 0..60u32 {
            let k = format!("k{:03}", (n * 37) % 101);
            let v = vec![n as u8; 20 + (n as usize * 13) % 90];
            match search(&b, k.as_bytes()) {
                Ok(i) => remove(&mut b, i),
                Err(i) => {
                    assert!(insert_cell(
                        &mut b,
                        i,
                        &encode_leaf_cell(k.as_bytes(), LeafValue::Inline(&v))
                    ));
                }
            }
            if n % 7 == 0 && page::count(&b) > 2 {
                remove(&mut b, 1);
            }
        }
        assert!(page::garbage(&b) > 0, "the page has holes to remove");
        let cells: Vec<Vec<u8>> = (0..page::count(&b)).map(|i| cell(&b, i).to_vec()).collect();
        let mut expect = b.clone();
        rebuild(&mut expect, &cells);
        compact(&mut b);
        assert_eq!(b, expect);
        assert_eq!(page::garbage(&b), 0);
        validate(&b).unwrap();
    }

    #[test]
    fn validate_rejects_garbage_slots() {
        let mut b = leaf_with(&[b"a"]);
        set_slot(&mut b, 0, PAGE_SIZE - 2);
        assert!(validate(&b).is_err());
    }
}
