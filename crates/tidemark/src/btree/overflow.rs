//! Values too large for a leaf cell live in overflow pages, written
//! directly to their blocks (they never occupy the cache).
//!
//! An overflowed value is an index plus data pages, all of kind `Overflow`:
//!
//! * data page: level 0, `aux` = payload bytes in this page, body = payload;
//! * index page: level 1, `aux` = value length, `count` = number of data
//!   pages it lists, body = their page ids (u64 each);
//! * root index page, only when one index page cannot list every data page
//!   (values over about 8 MiB at 8 KiB pages, 2 MiB at 4 KiB; never at 16
//!   KiB pages): level 2, `aux` = value length, `count` = number of index
//!   pages, body = their page ids in order. Each index page then lists as
//!   many data pages as it holds, the last one the rest.
//!
//! The leaf cell holds the value length and the id of the top index page.
//! Freeing a value frees every page the index lists, and the index.

use crate::error::{Error, Result};
use crate::page::{self, get_u64, put_u64, PageKind, HEADER_SIZE};
use crate::pager::Pager;

/// Payload bytes per data page, and bytes of ids per index page.
fn payload(page_size: usize) -> usize {
    page_size - HEADER_SIZE
}

/// Page ids one index page lists.
fn ids_per_index(page_size: usize) -> usize {
    payload(page_size) / 8
}

/// Two levels of index list every data page of the largest value at the
/// smallest page size.
const _: () = {
    let p = page::MIN_PAGE_SIZE - HEADER_SIZE;
    let data_pages = crate::MAX_VALUE_SIZE.div_ceil(p);
    assert!(data_pages.div_ceil(p / 8) <= p / 8);
};

/// Pages [`write()`] takes for a value of `len` bytes at pages of
/// `page_size`: its data pages, its index pages, and a root index page
/// when one index page cannot list them all. Admission counts a write's
/// room by it: an overflowed value fills its pages whole and is written
/// once, straight to new blocks.
pub(crate) fn page_count(page_size: usize, len: usize) -> u64 {
    let data = len.div_ceil(payload(page_size));
    let indexes = data.div_ceil(ids_per_index(page_size)).max(1);
    let root = usize::from(indexes > 1);
    (data + indexes + root) as u64
}

/// Writes `value` to overflow pages; returns the id of its top index page.
pub(crate) fn write(pager: &Pager, value: &[u8]) -> Result<u64> {
    let ps = pager.page_size;
    let mut buf = pager.page_buf();
    let mut pids = Vec::with_capacity(value.len().div_ceil(payload(ps)));
    for chunk in value.chunks(payload(ps)) {
        let pid = pager.alloc_pid()?;
        page::init(&mut buf, PageKind::Overflow, 0, pid);
        page::set_aux(&mut buf, chunk.len() as u64);
        buf[HEADER_SIZE..HEADER_SIZE + chunk.len()].copy_from_slice(chunk);
        pager.write_direct(pid, &mut buf)?;
        pids.push(pid);
    }
    let per = ids_per_index(ps);
    let mut indexes = Vec::with_capacity(pids.len().div_ceil(per).max(1));
    for ids in pids.chunks(per).chain(pids.is_empty().then_some(&[][..])) {
        indexes.push(write_index(pager, &mut buf, 1, value.len(), ids)?);
    }
    if let [only] = indexes[..] {
        return Ok(only);
    }
    write_index(pager, &mut buf, 2, value.len(), &indexes)
}

/// Writes an index page of `level` listing `ids`, for a value of `len`
/// bytes; returns its page id.
fn write_index(pager: &Pager, buf: &mut [u8], level: u8, len: usize, ids: &[u64]) -> Result<u64> {
    let pid = pager.alloc_pid()?;
    page::init(buf, PageKind::Overflow, level, pid);
    page::set_aux(buf, len as u64);
    page::set_count(buf, ids.len());
    for (i, p) in ids.iter().enumerate() {
        put_u64(buf, HEADER_SIZE + i * 8, *p);
    }
    pager.write_direct(pid, buf)?;
    Ok(pid)
}

/// Reads index page `pid` of a value of `len` bytes, which must be of
/// `level` and list `want` ids; returns them.
fn read_index_page(
    pager: &Pager,
    pid: u64,
    level: u8,
    len: u64,
    want: usize,
    buf: &mut [u8],
) -> Result<Vec<u64>> {
    pager.read_page(pid, buf, &[PageKind::Overflow])?;
    let n = page::count(buf);
    if page::level(buf) != level
        || page::aux(buf) != len
        || n != want
        || n > ids_per_index(buf.len())
    {
        return Err(Error::corruption(
            pid,
            format!("overflow index does not describe a value of {len} bytes"),
        ));
    }
    Ok((0..n).map(|i| get_u64(buf, HEADER_SIZE + i * 8)).collect())
}

/// Reads the index of a value of `len` bytes whose top index page is
/// `index`; returns its data pages and every index page below the top one.
fn read_index(pager: &Pager, index: u64, len: u64, buf: &mut [u8]) -> Result<(Vec<u64>, Vec<u64>)> {
    let ps = pager.page_size;
    let n = usize::try_from(len)
        .ok()
        .filter(|&l| l <= crate::MAX_VALUE_SIZE)
        .ok_or_else(|| Error::corruption(index, format!("overflow value of {len} bytes")))?
        .div_ceil(payload(ps));
    let per = ids_per_index(ps);
    if n <= per {
        return Ok((read_index_page(pager, index, 1, len, n, buf)?, Vec::new()));
    }
    let subs = read_index_page(pager, index, 2, len, n.div_ceil(per), buf)?;
    let mut data = Vec::with_capacity(n);
    for (i, &sub) in subs.iter().enumerate() {
        let want = per.min(n - i * per);
        data.extend(read_index_page(pager, sub, 1, len, want, buf)?);
    }
    Ok((data, subs))
}

/// Reads a whole overflowed value.
pub(crate) fn read(pager: &Pager, index: u64, len: u64) -> Result<Vec<u8>> {
    let mut buf = pager.page_buf();
    let (pids, _) = read_index(pager, index, len, &mut buf)?;
    let room = payload(buf.len());
    let mut out = Vec::with_capacity(len as usize);
    for pid in pids {
        pager.read_page(pid, &mut buf, &[PageKind::Overflow])?;
        let n = page::aux(&buf) as usize;
        if page::level(&buf) != 0 || n > room || out.len() + n > len as usize {
            return Err(Error::corruption(
                pid,
                "overflow data page has a bad length",
            ));
        }
        out.extend_from_slice(&buf[HEADER_SIZE..HEADER_SIZE + n]);
    }
    if out.len() as u64 != len {
        return Err(Error::corruption(
            index,
            format!("overflow value has {} bytes, expected {len}", out.len()),
        ));
    }
    Ok(out)
}

/// Frees every page of an overflowed value.
pub(crate) fn free(pager: &Pager, index: u64, len: u64) -> Result<()> {
    for pid in pages(pager, index, len)? {
        pager.free_pid(pid);
    }
    Ok(())
}

/// Every page id of an overflowed value (for `verify` and `drop_table`):
/// its data pages, then its index pages.
pub(crate) fn pages(pager: &Pager, index: u64, len: u64) -> Result<Vec<u64>> {
    let mut buf = pager.page_buf();
    let (mut v, subs) = read_index(pager, index, len, &mut buf)?;
    v.extend(subs);
    v.push(index);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::BlockAlloc;
    use crate::pagemap::PageMap;
    use std::sync::Arc;

    /// A pager at pages of `ps` over a data file in memory.
    fn mem_pager(ps: usize) -> Pager {
        let f = Arc::new(crate::io::MemFile::default());
        let alloc = BlockAlloc::new(std::iter::empty()).expect("no blocks used yet");
        Pager::new(ps, f, PageMap::new(), alloc, 1, 3, Vec::new())
    }

    #[test]
    fn page_count_is_what_a_write_takes() {
        for ps in [
            page::MIN_PAGE_SIZE,
            page::DEFAULT_PAGE_SIZE,
            page::MAX_PAGE_SIZE,
        ] {
            let pager = mem_pager(ps);
            let p = payload(ps);
            let one_index = ids_per_index(ps) * p;
            let mut lens = vec![1, p - 1, p, p + 1, 3 * p, one_index - 1, one_index];
            lens.extend([one_index + 1, 2 * one_index + p, crate::MAX_VALUE_SIZE]);
            for len in lens.into_iter().filter(|&l| l <= crate::MAX_VALUE_SIZE) {
                let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
                let used = pager.alloc.used();
                let index = write(&pager, &value).unwrap();
                let written = pager.alloc.used() - used;
                let listed = pages(&pager, index, len as u64).unwrap().len() as u64;
                assert_eq!(listed, written, "pages of {ps}, {len} bytes");
                assert_eq!(page_count(ps, len), written, "pages of {ps}, {len} bytes");
                assert!(read(&pager, index, len as u64).unwrap() == value);
                free(&pager, index, len as u64).unwrap();
            }
        }
    }
}
