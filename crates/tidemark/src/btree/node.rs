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

use crate::page::{self, get_u16, get_u32, get_u64, put_u16, PageKind, HEADER_SIZE};

/// Bytes usable for slots and cells in a node of `page_size` bytes.
pub(crate) const fn usable(page_size: usize) -> usize {
    page_size - HEADER_SIZE
}
/// Largest cell, slot included, that a node of `page_size` bytes accepts: a
/// third of the usable space, so a full node always holds at least two
/// cells and every split of a full node plus one more cell leaves two
/// halves that fit.
pub(crate) const fn max_cell(page_size: usize) -> usize {
    usable(page_size) / 3
}
const SLOT: usize = 2;
const LEAF_CELL_HEADER: usize = 7;
const BRANCH_CELL_HEADER: usize = 10;
const OVERFLOW_REF: usize = 8;

/// Maximum key length in bytes of a database of the default page size, and
/// the longest any database takes: a database's own limit follows its page
/// size ([`page::max_key_size`], [`crate::Database::max_key_size`]). A
/// branch cell of a maximal key, with its header and slot, must fit the
/// largest cell a node takes (a third of a page's usable space, so that a
/// split always leaves two halves that fit).
pub const MAX_KEY_SIZE: usize = page::max_key_size(page::DEFAULT_PAGE_SIZE);

/// Whether keys of up to [`page::max_key_size`] bytes fit the cells of a
/// node of `page_size` bytes.
const fn keys_fit(page_size: usize) -> bool {
    let k = page::max_key_size(page_size);
    BRANCH_CELL_HEADER + k + SLOT <= max_cell(page_size)
        && LEAF_CELL_HEADER + k + OVERFLOW_REF + SLOT <= max_cell(page_size)
}
const _: () = assert!(keys_fit(4096) && keys_fit(8192) && keys_fit(16384) && keys_fit(32768));
const _: () = assert!(page::MIN_PAGE_SIZE == 4096 && page::MAX_PAGE_SIZE == 32768);
const _: () = assert!(MAX_KEY_SIZE == page::max_key_size(page::MAX_PAGE_SIZE));

/// A leaf value as stored: inline bytes or a reference to overflow pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow { len: u64, index_pid: u64 },
}

/// Whether a key/value pair is stored inline in a leaf of `page_size`
/// bytes or must go to overflow pages.
pub(crate) fn fits_inline(page_size: usize, klen: usize, vlen: usize) -> bool {
    LEAF_CELL_HEADER + klen + vlen + SLOT <= max_cell(page_size)
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
    key_after(buf, i, cell_header(buf))
}

/// Bytes before the key in each cell of this node.
fn cell_header(buf: &[u8]) -> usize {
    if is_leaf(buf) {
        LEAF_CELL_HEADER
    } else {
        BRANCH_CELL_HEADER
    }
}

/// The key of cell `i`, whose cells have `header` bytes before the key.
fn key_after(buf: &[u8], i: usize, header: usize) -> &[u8] {
    let off = slot(buf, i);
    let start = off + header;
    &buf[start..start + usize::from(get_u16(buf, off))]
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
    // The kind is the page's: read once, not once per probe as `key` does.
    let header = cell_header(buf);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        // Each probe's time is mostly the cache miss on its cell (a leaf
        // of a table the CPU caches do not hold): start loading the cells
        // of both possible next probes while this one compares.
        if hi - lo > 2 {
            prefetch_cell(buf, lo + (mid - lo) / 2);
            prefetch_cell(buf, mid + 1 + (hi - mid - 1) / 2);
        }
        match cmp_keys(key_after(buf, mid, header), key_) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// `a.cmp(b)` for byte strings, eight bytes at a time while both have
/// them. Keys are mostly short (an 8-byte id, a YCSB key of about 24), and
/// for those the library `memcmp` that slices' `cmp` calls cost more in
/// its call and size dispatch than in comparing: 9-12 % of all samples of
/// an in-memory commit workload went to it (BENCHMARKS.md, "Key
/// comparison inline"). Long keys still go to `memcmp`, which is faster
/// there.
#[inline]
pub(crate) fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    if n > 64 {
        return a.cmp(b);
    }
    let mut i = 0;
    while i + 8 <= n {
        let (x, y) = (be_u64(a, i), be_u64(b, i));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    while i < n {
        if a[i] != b[i] {
            return a[i].cmp(&b[i]);
        }
        i += 1;
    }
    a.len().cmp(&b.len())
}

/// The eight bytes of `s` at `at` as a big-endian number, so that numbers
/// order as the bytes do.
#[inline]
fn be_u64(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_be_bytes(w)
}

/// Asks the CPU to start loading the cell of slot `i`, one of the page's
/// `count` slots (a hint: no effect on results, nothing loaded if the
/// slot does not point into `buf`).
#[inline]
fn prefetch_cell(buf: &[u8], i: usize) {
    if let Some(cell) = buf.get(slot(buf, i)) {
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        // SAFETY: a prefetch is a hint that never faults and reads or
        // writes nothing the program sees; `cell` is a live reference into
        // `buf` in any case.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                std::ptr::from_ref(cell).cast::<i8>(),
            );
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = cell;
    }
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

/// Bytes the live cells and their slots take: what a merge must move.
pub(crate) fn used(buf: &[u8]) -> usize {
    usable(buf.len()).saturating_sub(free_space(buf))
}

/// A node of `page_size` bytes whose live bytes fall below this share of
/// a node (a quarter) is merged with a sibling if the two fit in
/// [`merge_fill_max`].
pub(crate) const fn merge_below(page_size: usize) -> usize {
    usable(page_size) / 4
}
/// A second mark, an eighth: a node that crossed [`merge_below`] while its
/// siblings were too full to take it tries again here.
pub(crate) const fn merge_again_below(page_size: usize) -> usize {
    usable(page_size) / 8
}

/// Whether a removal that took a node of `page_size` bytes from `before`
/// to `after` live bytes crossed a mark at which it tries to merge
/// ([`merge_below`], then [`merge_again_below`]): once per mark, not on
/// every removal under it, so a node draining from one end (a queue)
/// beside full siblings tries twice, then empties.
pub(crate) fn crossed_merge_mark(page_size: usize, before: usize, after: usize) -> bool {
    [merge_below(page_size), merge_again_below(page_size)]
        .iter()
        .any(|&mark| before >= mark && after < mark)
}

/// The most a merged node of `page_size` bytes may hold: three quarters
/// of a node, so that it takes a quarter's worth of inserts before it
/// splits again (a merge into a full leaf would make every insert after a
/// delete split it anew).
pub(crate) const fn merge_fill_max(page_size: usize) -> usize {
    usable(page_size) * 3 / 4
}

/// Whether siblings `left` and `right` (of one level, `left`'s keys all
/// below `right`'s) would fit in [`merge_fill_max`] as one node. Branches
/// also take `sep`, the parent's separator between them, which comes down
/// with `right`'s leftmost child.
pub(crate) fn can_merge(left: &[u8], right: &[u8], sep: &[u8]) -> bool {
    let down = if is_leaf(left) {
        0
    } else {
        BRANCH_CELL_HEADER + sep.len() + SLOT
    };
    used(left) + used(right) + down <= merge_fill_max(left.len())
}

/// Moves every cell of `right` to the end of `left`, its sibling of the
/// same level whose keys are all below `right`'s, if [`can_merge`] allows;
/// returns whether it did. A branch first takes `sep` (the parent's
/// separator between the two) with `right`'s leftmost child. `right` is
/// left unchanged (the caller frees it). A leaf's insert record is reset:
/// its indexes no longer say where the last insert landed.
pub(crate) fn merge(left: &mut [u8], right: &[u8], sep: &[u8]) -> bool {
    debug_assert_eq!(page::level(left), page::level(right));
    if !can_merge(left, right, sep) {
        return false;
    }
    compact(left);
    let down = (!is_leaf(left)).then(|| encode_branch_cell(sep, page::aux(right)));
    let mut n = page::count(left);
    let mut end = page::free_end(left);
    let cells = down
        .as_deref()
        .into_iter()
        .chain((0..page::count(right)).map(|j| cell(right, j)));
    for c in cells {
        end -= c.len();
        left[end..end + c.len()].copy_from_slice(c);
        set_slot(left, n, end);
        n += 1;
    }
    page::set_count(left, n);
    page::set_free_end(left, end);
    if is_leaf(left) {
        set_insert_run(left, None);
    }
    debug_assert!(slots_end(left) <= end, "merge overflowed the page");
    true
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

/// Replaces cell `i` with `new_cell` where it lies, if `new_cell` is no
/// longer; the bytes it leaves unused count as garbage. `false` (nothing
/// changed) if it is longer. An update of a value by one of the same size
/// then moves no other cell: without this, in a full leaf every update
/// left the old cell as garbage and compacted the whole page to find room
/// for the new one.
pub(crate) fn overwrite_cell(buf: &mut [u8], i: usize, new_cell: &[u8]) -> bool {
    let off = slot(buf, i);
    let old_len = cell_len_at(buf, off);
    if new_cell.len() > old_len {
        return false;
    }
    buf[off..off + new_cell.len()].copy_from_slice(new_cell);
    let freed = old_len - new_cell.len();
    if freed > 0 {
        page::set_garbage(buf, page::garbage(buf) + freed);
    }
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
/// from one copy of the page in a per-thread buffer (no allocation per
/// cell: this runs on the write path whenever a leaf's freed space is
/// needed).
pub(crate) fn compact(buf: &mut [u8]) {
    COMPACT_COPY.with_borrow_mut(|old| {
        // A copy, not a zeroed array then a copy: the buffer keeps its
        // capacity, so this is one `memcpy` of the page.
        old.clear();
        old.extend_from_slice(buf);
        let n = page::count(old);
        let mut end = buf.len();
        buf[HEADER_SIZE..].fill(0);
        for i in 0..n {
            let c = cell(old, i);
            end -= c.len();
            buf[end..end + c.len()].copy_from_slice(c);
            set_slot(buf, i, end);
        }
        page::set_free_end(buf, end);
        page::set_garbage(buf, 0);
        debug_assert!(slots_end(buf) <= end, "compact overflowed the page");
    });
}

thread_local! {
    /// Each thread's copy of the page [`compact`] lays out again (pages
    /// differ in size between databases, so not an array on the stack).
    static COMPACT_COPY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
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
    let ps = src.len();
    let dst = &mut dst[..ps];
    let se = slots_end(src);
    if page::garbage(src) == 0 {
        let fe = page::free_end(src);
        dst[..se].copy_from_slice(&src[..se]);
        dst[se..se + ps - fe].copy_from_slice(&src[fe..]);
    } else {
        // Dead cells: lay the live ones out as `compact` does (the slots
        // then hold their unpacked offsets), and close the gap.
        dst.copy_from_slice(src);
        compact(dst);
        let fe = page::free_end(dst);
        dst.copy_within(fe..ps, se);
    }
    let live = ps - page::free_end(dst);
    let image = se + live;
    let len = image.next_multiple_of(page::IMAGE_ALIGN);
    dst[image..len].fill(0);
    page::set_image(dst, image);
    page::seal_image(dst, image);
    len
}

/// The packed image of a node page without dead cells, as [`pack`] would
/// write it, in pieces that borrow the page instead of a copy: the sealed
/// header, then the slots and the cells as they lie in `src`. Written in
/// that order (with zeros after, up to the returned padded length), they
/// are exactly [`pack`]'s bytes. `None` when the page has dead cells,
/// which only [`pack`] lays out.
pub(crate) fn packed_parts(src: &[u8]) -> Option<PackedParts<'_>> {
    if page::garbage(src) != 0 {
        return None;
    }
    let se = slots_end(src);
    let fe = page::free_end(src);
    let image = se + src.len() - fe;
    let mut header = [0u8; HEADER_SIZE];
    header.copy_from_slice(&src[..HEADER_SIZE]);
    page::set_image(&mut header[..], image);
    let (slots, cells) = (&src[HEADER_SIZE..se], &src[fe..]);
    page::seal_image_parts(&mut header, &[slots, cells]);
    Some(PackedParts {
        header,
        slots,
        cells,
        image,
    })
}

/// A packed image in pieces ([`packed_parts`]).
pub(crate) struct PackedParts<'a> {
    /// The page's header, with the image length and checksum set.
    pub(crate) header: [u8; HEADER_SIZE],
    /// The slot array.
    pub(crate) slots: &'a [u8],
    /// The cells, from the page's free end to its end.
    pub(crate) cells: &'a [u8],
    /// Length of the image before padding.
    pub(crate) image: usize,
}

impl PackedParts<'_> {
    /// The image's length padded to [`page::IMAGE_ALIGN`], what [`pack`]
    /// returns.
    pub(crate) fn padded(&self) -> usize {
        self.image.next_multiple_of(page::IMAGE_ALIGN)
    }
}

/// Lays out in place a node page read packed (its checksum already
/// checked): moves the cells back to the end of the page and clears the
/// gap. A page stored whole is left as it is.
pub(crate) fn unpack(buf: &mut [u8]) -> Result<(), String> {
    let image = page::image(buf);
    if image == 0 {
        return Ok(());
    }
    let ps = buf.len();
    let se = slots_end(buf);
    let fe = page::free_end(buf);
    if se > image || image > ps || fe < se || fe > ps || ps - fe != image - se {
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
/// header and slots move to the front; the gap between is left as it is.
/// Saves [`unpack`]'s move of every cell.
pub(crate) fn unpack_tail(buf: &mut [u8], image: usize) -> Result<(), String> {
    if !(HEADER_SIZE..buf.len()).contains(&image) {
        return Err(format!(
            "packed image of {image} bytes read at a page's end"
        ));
    }
    let t = buf.len() - image;
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
    // The gap keeps whatever the frame held (the image's own header and
    // slots, an earlier page's bytes): nothing reads a node's free gap,
    // and no write takes it (`packed_parts` and `pack` write the slots,
    // the cells and zeros), so clearing it would only cost every miss a
    // memset of the gap.
    page::set_image(buf, 0);
    Ok(())
}

/// Replaces all cells of `buf` (header fields other than count, free_end and
/// garbage are kept).
fn rebuild(buf: &mut [u8], cells: &[Vec<u8>]) {
    let mut end = buf.len();
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

/// A leaf's record of where its inserts have been landing, kept in the
/// header's `aux` (unused by leaves otherwise): bits 0-15 hold one more than
/// the index of the last key inserted (0: none), bits 16-31 the number of
/// inserts in a row that each landed right beside the one before (`run`),
/// bit 32 the side: set when each landed just below the one before
/// (descending keys), clear when just above it (ascending keys).
///
/// It is a hint for [`split_leaf`] and nothing else: any value, also one
/// read from disk, yields a valid split. A file written before it existed
/// holds 0 there (no record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InsertRun {
    last: usize,
    run: u16,
    descending: bool,
}

/// A leaf that must split is split where the new key lands, not in the
/// middle, when that key and the ones inserted before it make a run this
/// long: each landed right beside the one before, on the same side. A
/// random key lands beside the previous insert with a chance of about two
/// in the leaf's count of keys, so three in a row are rare for random keys,
/// while a leaf of ascending (or descending) keys has a run as long as its
/// count when it fills.
const SEQUENTIAL_RUN: u16 = 3;

const RUN_SHIFT: u32 = 16;
const DESCENDING_BIT: u64 = 1 << 32;

fn insert_run(buf: &[u8]) -> Option<InsertRun> {
    let aux = page::aux(buf);
    let last = (aux & 0xFFFF) as usize;
    (last > 0).then(|| InsertRun {
        last: last - 1,
        run: ((aux >> RUN_SHIFT) & 0xFFFF) as u16,
        descending: aux & DESCENDING_BIT != 0,
    })
}

fn set_insert_run(buf: &mut [u8], r: Option<InsertRun>) {
    let aux = r.map_or(0, |r| {
        // Indexes fit 16 bits: a page holds fewer than 2^15 slots.
        (r.last as u64 + 1) & 0xFFFF
            | u64::from(r.run) << RUN_SHIFT
            | if r.descending { DESCENDING_BIT } else { 0 }
    });
    page::set_aux(buf, aux);
}

/// The record after a key is inserted at index `i` of a leaf whose record
/// was `prev`.
fn next_run(prev: Option<InsertRun>, i: usize) -> InsertRun {
    let (run, descending) = match prev {
        Some(p) if i == p.last + 1 => (
            if p.descending {
                1
            } else {
                p.run.saturating_add(1)
            },
            false,
        ),
        Some(p) if i == p.last => (
            if p.descending {
                p.run.saturating_add(1)
            } else {
                1
            },
            true,
        ),
        _ => (0, false),
    };
    InsertRun {
        last: i,
        run,
        descending,
    }
}

/// Records in leaf `buf` that a new key was inserted at index `i`.
pub(crate) fn note_leaf_insert(buf: &mut [u8], i: usize) {
    let r = next_run(insert_run(buf), i);
    set_insert_run(buf, Some(r));
}

/// Records in leaf `buf` that the key at index `i` was removed: the last
/// insert's index moves down with the keys after `i`, and is forgotten if it
/// was `i` itself.
pub(crate) fn note_leaf_remove(buf: &mut [u8], i: usize) {
    let r = insert_run(buf).and_then(|mut r| match r.last.cmp(&i) {
        std::cmp::Ordering::Less => Some(r),
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => {
            r.last -= 1;
            Some(r)
        }
    });
    set_insert_run(buf, r);
}

/// Bytes `cells` take in a node, slots included.
fn cells_size(cells: &[Vec<u8>]) -> usize {
    cells.iter().map(|c| c.len() + SLOT).sum()
}

/// Whether `cells[..m]` and `cells[m..]` are both non-empty and each fits
/// a node of `page_size` bytes.
fn halves_fit(page_size: usize, cells: &[Vec<u8>], m: usize) -> bool {
    (1..cells.len()).contains(&m)
        && cells_size(&cells[..m]) <= usable(page_size)
        && cells_size(&cells[m..]) <= usable(page_size)
}

/// Picks how many of `cells` go left so both halves fit a page.
fn split_point(cells: &[Vec<u8>]) -> usize {
    split_share(cells, 1, 2)
}

/// How many of `cells` go left for the left part to take about `num/den`
/// of their bytes (at least one cell each side).
fn split_share(cells: &[Vec<u8>], num: usize, den: usize) -> usize {
    let total = cells_size(cells);
    let mut acc = 0;
    let mut m = 0;
    while m < cells.len() && acc + cells[m].len() + SLOT <= total * num / den {
        acc += cells[m].len() + SLOT;
        m += 1;
    }
    m.clamp(1, cells.len() - 1)
}

/// Where a leaf sits in its tree, as the descent to it found: at the edge
/// of the key space or not. A tree of one leaf is at both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    /// No key above the leaf's: every branch above it was left by its last child.
    pub(crate) rightmost: bool,
    /// No key below the leaf's: every branch above it was left by its first child.
    pub(crate) leftmost: bool,
}

#[cfg(test)]
impl Edge {
    /// A leaf somewhere inside the tree.
    pub(crate) const INNER: Edge = Edge {
        rightmost: false,
        leftmost: false,
    };
}

/// Share of the bytes, in tenths, that an edge leaf keeps on its inner side
/// when it splits (PostgreSQL's default leaf fill factor does the same for
/// its rightmost page): keys arriving near the edge in a slightly shuffled
/// order (many writers of ascending keys) come in below the newest ones,
/// so the part left behind keeps a tenth free for them, and the rest of it
/// is full instead of half full.
const EDGE_FILL_TENTHS: usize = 9;

/// Splits a leaf that cannot take `new_cell` at index `i` (replacing cell
/// `i` when `replace`). `left` keeps the lower part, `right` (initialised
/// here with `right_pid`) receives the upper part. Returns the separator:
/// the first key of `right`.
///
/// The split is in the middle (by bytes), unless the leaf's last inserts
/// were sequential (see [`InsertRun`]): then it is where the new key lands,
/// so that the part the keys still to come will go to holds nothing they
/// would have to split away again, and the part they leave behind is full.
/// Ascending: the new key ends `left` (when keys above it share the leaf,
/// they alone go right, once; the run then fills `left` and its next split
/// leaves it full with the new key alone in `right`). Descending: the new
/// key starts `right` (keys below it stay left), or is alone in `left` when
/// it is the lowest. Either way a run of keys leaves full leaves behind it,
/// not the half-full ones of a split in the middle; a descending run inside
/// a leaf that also holds lower keys leaves leaves short by the room those
/// keys take, as the keys still to come land among them.
///
/// A leaf at an `edge` of the key space splits nine tenths towards its
/// inner side ([`EDGE_FILL_TENTHS`]) instead, unless every key in it came
/// in one run (a single writer's ordered keys: the run's split is fuller
/// still). Many writers' ordered keys arrive slightly out of order, which
/// breaks runs; the tenth left free takes the late ones.
pub(crate) fn split_leaf(
    left: &mut [u8],
    right: &mut [u8],
    right_pid: u64,
    i: usize,
    new_cell: &[u8],
    replace: bool,
    edge: Edge,
) -> Vec<u8> {
    let cells = cells_with(left, i, new_cell, replace);
    let run = (!replace).then(|| next_run(insert_run(left), i));
    let sequential = run.filter(|r| r.run >= SEQUENTIAL_RUN).and_then(|r| {
        let m = if r.descending {
            i.max(1)
        } else {
            (i + 1).min(cells.len() - 1)
        };
        halves_fit(left.len(), &cells, m).then_some(m)
    });
    // A leaf at the edge of the tree splits near its outer end, towards
    // which the key space grows; in a tree of one leaf, the new key says
    // which end that is.
    let upper = i * 2 >= cells.len();
    let at_edge = if edge.rightmost && (upper || !edge.leftmost) {
        Some(split_share(&cells, EDGE_FILL_TENTHS, 10))
    } else if edge.leftmost {
        Some(split_share(&cells, 10 - EDGE_FILL_TENTHS, 10))
    } else {
        None
    };
    let at_edge = at_edge.filter(|&m| halves_fit(left.len(), &cells, m));
    // At an edge both may apply: the run decides only if every key of the
    // leaf came in it (one writer's keys, in order), as any key arriving out
    // of order would land in the full part it leaves behind and split it.
    let whole_run = run.is_some_and(|r| usize::from(r.run) + 1 >= cells.len());
    let m = match (sequential, at_edge) {
        (Some(m), Some(_)) if whole_run => m,
        (_, Some(m)) => m,
        (Some(m), None) => m,
        (None, None) => split_point(&cells),
    };
    init_leaf(right, right_pid);
    rebuild(right, &cells[m..]);
    rebuild(left, &cells[..m]);
    // The record follows the new key into the part that holds it.
    let (with_new, without) = if i < m {
        (&mut *left, &mut *right)
    } else {
        (&mut *right, &mut *left)
    };
    let at = if i < m { i } else { i - m };
    set_insert_run(with_new, run.map(|r| InsertRun { last: at, ..r }));
    set_insert_run(without, None);
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
    let ps = buf.len();
    if se > ps || fe < se || fe > ps {
        return Err(format!("bad layout: {n} slots, free_end {fe}"));
    }
    if page::garbage(buf) > ps - fe {
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
        if off < fe || off + hdr > ps {
            return Err(format!("slot {i} points outside the cell area ({off})"));
        }
        if leaf && buf[off + 2] > 1 {
            return Err(format!("cell {i}: unknown value tag {}", buf[off + 2]));
        }
        let klen = usize::from(get_u16(buf, off));
        if klen == 0 || klen > page::max_key_size(ps) {
            return Err(format!("cell {i}: key length {klen}"));
        }
        if off + cell_len_at(buf, off) > ps {
            return Err(format!("cell {i} runs past the end of the page"));
        }
    }
    Ok(())
}

/// A copy of the node page in `buf` with its free gap cleared: what two
/// layouts of one node must agree on (the gap of a page laid out by
/// [`unpack_tail`] keeps the frame's earlier bytes).
#[cfg(test)]
pub(crate) fn without_gap(buf: &[u8]) -> Vec<u8> {
    let mut v = buf.to_vec();
    let (se, fe) = (slots_end(buf), page::free_end(buf));
    v[se..fe].fill(0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PAGE_SIZE: usize = page::DEFAULT_PAGE_SIZE;
    /// Every page size a database may have.
    const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];
    const USABLE: usize = usable(PAGE_SIZE);
    const MERGE_BELOW: usize = merge_below(PAGE_SIZE);
    const MERGE_AGAIN_BELOW: usize = merge_again_below(PAGE_SIZE);
    const MERGE_FILL_MAX: usize = merge_fill_max(PAGE_SIZE);

    /// A pair of keys that often share a prefix, of lengths on both sides
    /// of every step `cmp_keys` takes (8-byte words, the byte tail, the
    /// `memcmp` cut at 64), with bytes at both ends of the range so a
    /// signed comparison would be caught.
    fn key_pair() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
        let byte = prop_oneof![Just(0u8), Just(0x7f), Just(0x80), Just(0xff), any::<u8>()];
        (
            prop::collection::vec(byte.clone(), 0..80),
            prop::collection::vec(byte.clone(), 0..80),
            prop::collection::vec(byte, 0..80),
        )
            .prop_map(|(prefix, a, b)| {
                (
                    [&prefix[..], &a[..]].concat(),
                    [&prefix[..], &b[..]].concat(),
                )
            })
    }

    proptest! {
        /// `cmp_keys` is the order of byte slices, whatever the lengths.
        #[test]
        fn cmp_keys_orders_as_slices((a, b) in key_pair()) {
            prop_assert_eq!(cmp_keys(&a, &b), a.cmp(&b));
            prop_assert_eq!(cmp_keys(&b, &a), b.cmp(&a));
            prop_assert_eq!(cmp_keys(&a, &a), std::cmp::Ordering::Equal);
        }

        /// `search` in a leaf and a branch finds what a sorted list finds.
        #[test]
        fn search_matches_a_sorted_list(
            keys in prop::collection::btree_set(prop::collection::vec(any::<u8>(), 0..24), 1..60),
            probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..24), 1..20),
        ) {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let leaf = leaf_with_value(keys.iter().cloned(), b"v");
            let mut branch = vec![0u8; PAGE_SIZE];
            init_branch(&mut branch, 5, 1, 100);
            for (i, k) in keys.iter().enumerate() {
                prop_assert!(insert_cell(&mut branch, i, &encode_branch_cell(k, 200 + i as u64)));
            }
            for p in probes.iter().chain(&keys) {
                let want = keys.binary_search(p);
                prop_assert_eq!(search(&leaf, p), want);
                prop_assert_eq!(search(&branch, p), want);
            }
        }
    }

    fn leaf_with(keys: &[&[u8]]) -> Vec<u8> {
        leaf_with_value(keys.iter().map(|k| k.to_vec()), b"v")
    }

    /// A leaf (page id 9) holding `keys`, each with value `val`.
    fn leaf_with_value(keys: impl IntoIterator<Item = Vec<u8>>, val: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; PAGE_SIZE];
        init_leaf(&mut b, 9);
        for k in keys {
            let i = search(&b, &k).unwrap_err();
            assert!(insert_cell(
                &mut b,
                i,
                &encode_leaf_cell(&k, LeafValue::Inline(val))
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
        assert_eq!(without_gap(&tail), whole);
        validate(&tail).unwrap();
        // The gap kept the frame's bytes; operations on the page work all
        // the same (an insert lands in the gap).
        assert!(insert_cell(
            &mut tail,
            0,
            &encode_leaf_cell(b"0", LeafValue::Inline(b"v"))
        ));
        assert!(insert_cell(
            &mut whole,
            0,
            &encode_leaf_cell(b"0", LeafValue::Inline(b"v"))
        ));
        assert_eq!(without_gap(&tail), without_gap(&whole));
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
    fn packed_parts_join_to_packs_image() {
        // Pages of every fill, none with dead cells.
        let mut keys = Vec::new();
        for n in [0usize, 1, 7, 40, 200] {
            while keys.len() < n {
                keys.push(format!("key{:07}", (keys.len() * 7919) % 1_000_003).into_bytes());
            }
            let b = leaf_with_value(keys.clone(), &[0x5A; 33]);
            let mut image = vec![0u8; PAGE_SIZE];
            let len = pack(&b, &mut image);
            let p = packed_parts(&b).expect("no dead cells");
            assert_eq!(p.padded(), len, "{n} keys");
            let mut joined = p.header.to_vec();
            joined.extend_from_slice(p.slots);
            joined.extend_from_slice(p.cells);
            assert_eq!(joined.len(), p.image);
            joined.resize(len, 0);
            assert_eq!(joined, image[..len], "{n} keys");
            page::check(&image, &[PageKind::Leaf], 9, 9).unwrap();
        }
        // A dead cell: only `pack` lays that out.
        let mut b = leaf_with(&[b"a", b"b", b"c"]);
        remove(&mut b, 1);
        assert!(packed_parts(&b).is_none());
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
        for ps in PAGE_SIZES {
            fill_compact_and_split_at(ps);
        }
    }

    fn fill_compact_and_split_at(ps: usize) {
        let mut b = vec![0u8; ps];
        init_leaf(&mut b, 1);
        let val = vec![7u8; 300];
        let (mut next, mut live) = (0u32, 0usize);
        loop {
            let k = format!("k{next:05}");
            next += 1;
            let c = encode_leaf_cell(k.as_bytes(), LeafValue::Inline(&val));
            let i = search(&b, k.as_bytes()).unwrap_err();
            if !insert_cell(&mut b, i, &c) {
                let mut r = vec![0u8; ps];
                let sep = split_leaf(&mut b, &mut r, 2, i, &c, false, Edge::INNER);
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

    /// Inserts `keys` in the given order into leaf `b` as the tree does
    /// (noting each insert), splitting as the tree would whenever the leaf
    /// is full; returns every leaf made, in key order.
    fn insert_splitting(keys: impl IntoIterator<Item = Vec<u8>>, val: &[u8]) -> Vec<Vec<u8>> {
        insert_splitting_as(keys, val, false)
    }

    /// [`insert_splitting`], telling the splits which leaves are at the edges
    /// of the key space when `edges`, as the tree does.
    fn insert_splitting_as(
        keys: impl IntoIterator<Item = Vec<u8>>,
        val: &[u8],
        edges: bool,
    ) -> Vec<Vec<u8>> {
        let mut leaves = vec![{
            let mut b = vec![0u8; PAGE_SIZE];
            init_leaf(&mut b, 1);
            b
        }];
        for k in keys {
            let c = encode_leaf_cell(&k, LeafValue::Inline(val));
            let li = leaves
                .iter()
                .rposition(|l| page::count(l) > 0 && key(l, 0) <= &k[..])
                .unwrap_or(0);
            let n_leaves = leaves.len();
            let b = &mut leaves[li];
            let i = search(b, &k).unwrap_err();
            if insert_cell(b, i, &c) {
                note_leaf_insert(b, i);
                continue;
            }
            let mut r = vec![0u8; PAGE_SIZE];
            let pid = 2 + li as u64;
            let edge = Edge {
                rightmost: edges && li == n_leaves - 1,
                leftmost: edges && li == 0,
            };
            let sep = split_leaf(b, &mut r, pid, i, &c, false, edge);
            validate(b).unwrap();
            validate(&r).unwrap();
            assert_eq!(sep, key(&r, 0));
            leaves.insert(li + 1, r);
        }
        leaves
    }

    fn fill_of(leaves: &[Vec<u8>]) -> f64 {
        let used: usize = leaves.iter().map(|l| USABLE - free_space(l)).sum();
        used as f64 / (leaves.len() * USABLE) as f64
    }

    /// Ascending and descending keys leave full leaves behind them: the
    /// split falls where the next key lands, not in the middle. Random keys
    /// still split in the middle (about two thirds full on average).
    #[test]
    fn sequential_inserts_leave_full_leaves() {
        let val = [5u8; 100];
        let n = 3000u32;
        let asc = insert_splitting((0..n).map(|i| format!("k{i:06}").into_bytes()), &val);
        let desc = insert_splitting((0..n).rev().map(|i| format!("k{i:06}").into_bytes()), &val);
        // The same keys in a scattered order (7919 is prime to n, so each
        // comes once): no runs of neighbours.
        let rand = insert_splitting(
            (0..n).map(|i| format!("k{:06}", (u64::from(i) * 7919) % u64::from(n)).into_bytes()),
            &val,
        );
        for (name, leaves) in [("asc", &asc), ("desc", &desc), ("rand", &rand)] {
            let total: usize = leaves.iter().map(|l| page::count(l)).sum();
            assert_eq!(total, n as usize, "{name}");
            let keys: Vec<&[u8]> = leaves
                .iter()
                .flat_map(|l| (0..page::count(l)).map(move |i| key(l, i)))
                .collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{name}: order");
        }
        // Every leaf but the one still taking keys is full to within a cell.
        let cell = encode_leaf_cell(b"k000000", LeafValue::Inline(&val)).len() + SLOT;
        for (name, leaves, open) in [("asc", &asc, asc.len() - 1), ("desc", &desc, 0)] {
            for (j, l) in leaves.iter().enumerate() {
                if j != open {
                    assert!(
                        free_space(l) < cell,
                        "{name} leaf {j}: {} free",
                        free_space(l)
                    );
                }
            }
        }
        assert!(fill_of(&asc) > 0.95, "asc fill {}", fill_of(&asc));
        assert!(fill_of(&desc) > 0.95, "desc fill {}", fill_of(&desc));
        let r = fill_of(&rand);
        assert!((0.5..0.85).contains(&r), "random fill {r}");
    }

    /// Ascending keys that arrive shuffled within windows of 64 (many
    /// writers) make no runs, but the rightmost leaf splits nine tenths to
    /// the left, which leaves room for the late ones: leaves stay about
    /// nine tenths full, not half. Descending likewise at the leftmost
    /// leaf; random keys are unchanged (one edge leaf among many).
    #[test]
    fn shuffled_keys_at_the_edges_leave_leaves_nine_tenths_full() {
        let val = [5u8; 100];
        let n = 6400u32;
        let jittered = |i: u32| (i / 64) * 64 + ((i % 64) * 37 + (i / 64) * 11) % 64;
        let key_of = |i: u32| format!("k{i:06}").into_bytes();
        let asc = insert_splitting_as((0..n).map(|i| key_of(jittered(i))), &val, true);
        let desc = insert_splitting_as((0..n).map(|i| key_of(n - 1 - jittered(i))), &val, true);
        let rand = insert_splitting_as((0..n).map(|i| key_of((i * 7919) % n)), &val, true);
        let before = insert_splitting_as((0..n).map(|i| key_of(jittered(i))), &val, false);
        for (name, leaves) in [
            ("asc", &asc),
            ("desc", &desc),
            ("rand", &rand),
            ("before", &before),
        ] {
            let total: usize = leaves.iter().map(|l| page::count(l)).sum();
            assert_eq!(total, n as usize, "{name}");
        }
        assert!(fill_of(&asc) > 0.85, "asc fill {}", fill_of(&asc));
        assert!(fill_of(&desc) > 0.85, "desc fill {}", fill_of(&desc));
        assert!(
            fill_of(&before) < 0.6,
            "inner splits only: fill {}",
            fill_of(&before)
        );
        let r = fill_of(&rand);
        assert!((0.5..0.85).contains(&r), "random fill {r}");
    }

    /// An update no longer than the cell it replaces is written where the
    /// old one lay: nothing else moves, no compaction; a shorter one leaves
    /// its unused bytes as garbage, which packing and compaction reclaim. A
    /// longer one is refused and leaves the page as it was.
    #[test]
    fn updates_overwrite_cells_in_place() {
        let val = [6u8; 1000];
        let mut b = leaf_with_value((0..16).map(|k| format!("k{k:05}").into_bytes()), &val);
        assert!(!can_insert(
            &b,
            encode_leaf_cell(b"k00099", LeafValue::Inline(&val)).len()
        ));
        let before_slots: Vec<usize> = (0..page::count(&b)).map(|i| slot(&b, i)).collect();
        let k = b"k00003";
        let i = search(&b, k).unwrap();
        let same = encode_leaf_cell(k, LeafValue::Inline(&[9u8; 1000]));
        assert!(overwrite_cell(&mut b, i, &same));
        assert_eq!(leaf_value(&b, i), LeafValue::Inline(&[9u8; 1000]));
        let after_slots: Vec<usize> = (0..page::count(&b)).map(|i| slot(&b, i)).collect();
        assert_eq!(after_slots, before_slots);
        assert_eq!(page::garbage(&b), 0);
        let shorter = encode_leaf_cell(k, LeafValue::Inline(&[8u8; 600]));
        assert!(overwrite_cell(&mut b, i, &shorter));
        assert_eq!(page::garbage(&b), 400);
        validate(&b).unwrap();
        let longer = encode_leaf_cell(k, LeafValue::Inline(&[7u8; 700]));
        let copy = b.clone();
        assert!(!overwrite_cell(&mut b, i, &longer));
        assert_eq!(b, copy);
        // Packed and read back, or compacted, the page has the same cells.
        let mut block = vec![0u8; PAGE_SIZE];
        pack(&b, &mut block);
        unpack(&mut block).unwrap();
        assert_eq!(cells_of(&block), cells_of(&b));
        assert_eq!(leaf_value(&block, i), LeafValue::Inline(&[8u8; 600]));
        let mut c = b.clone();
        compact(&mut c);
        assert_eq!(page::garbage(&c), 0);
        assert_eq!(cells_of(&c), cells_of(&b));
        assert!(can_insert(&c, 300));
    }

    /// A run of inserts ending inside a leaf (one stream of ascending keys
    /// below other keys) splits where the stream's next key lands: the keys
    /// above go right, alone, and the stream then leaves full leaves.
    #[test]
    fn an_ascending_run_inside_a_leaf_splits_at_the_run() {
        let val = [1u8; 100];
        // Stream "a" ascending into a leaf that also holds the "b" keys.
        let keys = (0..20u32)
            .map(|i| format!("b{i:04}").into_bytes())
            .chain((0..400u32).map(|i| format!("a{i:04}").into_bytes()));
        let leaves = insert_splitting(keys, &val);
        let b_leaf = leaves.last().unwrap();
        assert_eq!(page::count(b_leaf), 20);
        assert_eq!(key(b_leaf, 0), b"b0000");
        let cell = encode_leaf_cell(b"a0000", LeafValue::Inline(&val)).len() + SLOT;
        assert!(leaves.len() >= 4);
        for l in &leaves[..leaves.len() - 2] {
            assert!(free_space(l) < cell, "{} free", free_space(l));
        }
    }

    /// The record of the last insert follows the keys: a remove before it
    /// moves it down, a remove of it forgets it, a remove after it keeps it.
    #[test]
    fn removes_keep_the_insert_record_on_its_key() {
        let mut b = leaf_with(&[]);
        for (n, k) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
            assert!(insert_cell(
                &mut b,
                n,
                &encode_leaf_cell(*k, LeafValue::Inline(b"v"))
            ));
            note_leaf_insert(&mut b, n);
        }
        let r = insert_run(&b).unwrap();
        assert_eq!((r.last, r.run, r.descending), (3, 3, false));
        remove(&mut b, 0);
        note_leaf_remove(&mut b, 0);
        assert_eq!(insert_run(&b).unwrap().last, 2);
        assert_eq!(key(&b, 2), b"d");
        // An insert right after "d" continues the run.
        assert!(insert_cell(
            &mut b,
            3,
            &encode_leaf_cell(b"e", LeafValue::Inline(b"v"))
        ));
        note_leaf_insert(&mut b, 3);
        assert_eq!(insert_run(&b).unwrap().run, 4);
        remove(&mut b, 3);
        note_leaf_remove(&mut b, 3);
        assert_eq!(insert_run(&b), None);
        // A descending pair, then a jump: the run restarts.
        note_leaf_insert(&mut b, 1);
        note_leaf_insert(&mut b, 1);
        assert_eq!(
            insert_run(&b).map(|r| (r.run, r.descending)),
            Some((1, true))
        );
        // The next key below lands at the same index (the last moves up).
        note_leaf_insert(&mut b, 1);
        assert_eq!(
            insert_run(&b).map(|r| (r.run, r.descending)),
            Some((2, true))
        );
        note_leaf_insert(&mut b, 3);
        assert_eq!(insert_run(&b).map(|r| r.run), Some(0));
    }

    /// Whatever the record says (it is read from disk like everything else),
    /// and wherever the leaf sits, a split keeps every cell, in order, in
    /// two halves that fit.
    #[test]
    fn any_insert_record_splits_validly() {
        let val = vec![3u8; 700];
        let base: Vec<Vec<u8>> = (0..21u32)
            .map(|i| format!("k{:03}", i * 2).into_bytes())
            .collect();
        let records = [
            0u64,
            u64::MAX,
            0xFFFF,
            1 | 5 << RUN_SHIFT,
            22 | 9 << RUN_SHIFT,
            21 | 9 << RUN_SHIFT | DESCENDING_BIT,
            1 | 9 << RUN_SHIFT | DESCENDING_BIT,
            500 | 60 << RUN_SHIFT,
        ];
        for aux in records {
            for newk in 0..43u32 {
                let k = format!("k{newk:03}").into_bytes();
                let mut b = vec![0u8; PAGE_SIZE];
                init_leaf(&mut b, 1);
                for (j, bk) in base.iter().enumerate() {
                    assert!(insert_cell(
                        &mut b,
                        j,
                        &encode_leaf_cell(bk, LeafValue::Inline(&val))
                    ));
                }
                page::set_aux(&mut b, aux);
                let (i, replace) = match search(&b, &k) {
                    Ok(i) => (i, true),
                    Err(i) => (i, false),
                };
                let c = encode_leaf_cell(&k, LeafValue::Inline(&[9u8; 1500]));
                let mut want = cells_with(&b, i, &c, replace);
                let mut r = vec![0u8; PAGE_SIZE];
                let edge = Edge {
                    rightmost: newk % 3 == 1,
                    leftmost: newk % 4 == 1,
                };
                let sep = split_leaf(&mut b, &mut r, 2, i, &c, replace, edge);
                validate(&b).unwrap();
                validate(&r).unwrap();
                assert!(
                    page::count(&b) > 0 && page::count(&r) > 0,
                    "aux {aux:x} key {newk}"
                );
                assert_eq!(sep, key(&r, 0));
                let mut got = cells_of(&b);
                got.extend(cells_of(&r));
                assert_eq!(got.len(), want.len());
                assert!(got == std::mem::take(&mut want), "aux {aux:x} key {newk}");
            }
        }
    }

    fn cells_of(b: &[u8]) -> Vec<Vec<u8>> {
        (0..page::count(b)).map(|i| cell(b, i).to_vec()).collect()
    }

    /// Two sparse leaves become one holding every key of both in order,
    /// dead cells left behind; a pair over three quarters of a page is
    /// refused and neither leaf changes.
    #[test]
    fn a_merge_is_tried_once_per_mark_crossed() {
        let (q, e) = (MERGE_BELOW, MERGE_AGAIN_BELOW);
        assert!(crossed_merge_mark(PAGE_SIZE, q, q - 1));
        assert!(crossed_merge_mark(PAGE_SIZE, q + 100, e));
        assert!(crossed_merge_mark(PAGE_SIZE, e, e - 1));
        assert!(crossed_merge_mark(PAGE_SIZE, USABLE, 0));
        // Removals between the marks, or under both, try nothing.
        assert!(!crossed_merge_mark(PAGE_SIZE, q - 1, e));
        assert!(!crossed_merge_mark(PAGE_SIZE, e - 1, 0));
        assert!(!crossed_merge_mark(PAGE_SIZE, USABLE, q));
    }

    #[test]
    fn merge_takes_the_right_leafs_cells_when_both_fit() {
        let val = [5u8; 300];
        let keys = |r: std::ops::Range<u32>| r.map(|i| format!("k{i:04}").into_bytes());
        let mut left = leaf_with_value(keys(0..20), &val);
        // Dead cells in the left leaf: the merge compacts them away.
        for _ in 0..5 {
            remove(&mut left, 3);
        }
        note_leaf_insert(&mut left, 2);
        let right = leaf_with_value(keys(20..30), &val);
        let before = used(&left) + used(&right);
        assert!(merge(&mut left, &right, b""));
        validate(&left).unwrap();
        assert_eq!(used(&left), before);
        assert_eq!(page::garbage(&left), 0);
        assert_eq!(insert_run(&left), None);
        let got: Vec<Vec<u8>> = (0..page::count(&left))
            .map(|i| key(&left, i).to_vec())
            .collect();
        let want: Vec<Vec<u8>> = keys(0..3).chain(keys(8..30)).collect();
        assert_eq!(got, want);
        for i in 0..page::count(&left) {
            assert_eq!(leaf_value(&left, i), LeafValue::Inline(&val));
        }

        // 25 + 15 cells of 300 bytes: over three quarters of 16 KiB.
        let mut full = leaf_with_value(keys(0..25), &val);
        let other = leaf_with_value(keys(25..40), &val);
        assert!(used(&full) + used(&other) > MERGE_FILL_MAX);
        let copy = full.clone();
        assert!(!merge(&mut full, &other, b""));
        assert_eq!(full, copy);
    }

    /// Two branches become one: the parent's separator comes down between
    /// them with the right one's leftmost child, so every child keeps the
    /// keys it had.
    #[test]
    fn merged_branches_keep_every_child_under_its_keys() {
        let branch = |pid: u64, leftmost: u64, cells: &[(&[u8], u64)]| {
            let mut b = vec![0u8; PAGE_SIZE];
            init_branch(&mut b, pid, 1, leftmost);
            for (i, (k, c)) in cells.iter().enumerate() {
                assert!(insert_cell(&mut b, i, &encode_branch_cell(k, *c)));
            }
            b
        };
        let mut left = branch(1, 10, &[(b"c", 11), (b"f", 12)]);
        let right = branch(2, 20, &[(b"m", 21), (b"q", 22)]);
        assert!(merge(&mut left, &right, b"j"));
        validate(&left).unwrap();
        let keys: Vec<&[u8]> = (0..page::count(&left)).map(|i| key(&left, i)).collect();
        assert_eq!(keys, [&b"c"[..], b"f", b"j", b"m", b"q"]);
        let children: Vec<u64> = (0..=page::count(&left)).map(|i| child(&left, i)).collect();
        assert_eq!(children, [10, 11, 12, 20, 21, 22]);
        assert_eq!(child_index(&left, b"k"), 3);
        assert_eq!(child_index(&left, b"a"), 0);
    }

    /// A packed page is shorter than the page, passes the checksum over its
    /// image only, and unpacks to a page with the same cells in the same
    /// order, with or without dead cells in the original; what lies past
    /// the image in the block does not matter.
    #[test]
    fn pack_then_unpack_keeps_every_cell() {
        for (ps, with_garbage) in PAGE_SIZES.into_iter().flat_map(|p| [(p, false), (p, true)]) {
            let mut b = vec![0u8; ps];
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
            let mut block = vec![0xA5u8; ps];
            let len = pack(&b, &mut block);
            // Images are padded to 4 KiB: only larger pages pack short.
            assert!(
                len < ps || ps == page::IMAGE_ALIGN,
                "a page under half full packs short: {len}"
            );
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
        // Written as raw bytes (offset 28, `page.rs`): `set_image` refuses
        // a length past the page in debug builds.
        bad[28..32].copy_from_slice(&(PAGE_SIZE as u32 + 1).to_le_bytes());
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
