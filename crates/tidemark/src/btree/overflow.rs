//! Values too large for a leaf cell live in overflow pages, written
//! directly to their blocks (they never occupy the cache).
//!
//! An overflowed value is an index page plus data pages, all of kind
//! `Overflow`:
//!
//! * index page: level 1, `aux` = value length, `count` = number of data
//!   pages, body = their page ids (u64 each);
//! * data page: level 0, `aux` = payload bytes in this page, body = payload.
//!
//! The leaf cell holds the value length and the index page id. Freeing a
//! value frees every page the index lists.

use crate::error::{Error, Result};
use crate::page::{self, get_u64, put_u64, PageKind, HEADER_SIZE, PAGE_SIZE};
use crate::pager::Pager;

/// Payload bytes per data page.
const PAYLOAD: usize = PAGE_SIZE - HEADER_SIZE;
/// Most data pages one value may use: enough for `MAX_VALUE_SIZE`, and the
/// list of their ids must fit in one index page.
const MAX_DATA_PAGES: usize = crate::MAX_VALUE_SIZE.div_ceil(PAYLOAD);
const _: () = assert!(MAX_DATA_PAGES * 8 <= PAYLOAD);

/// Writes `value` to overflow pages; returns the index page id.
pub(crate) fn write(pager: &Pager, value: &[u8]) -> Result<u64> {
    let n = value.len().div_ceil(PAYLOAD);
    debug_assert!(n <= MAX_DATA_PAGES);
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut pids = Vec::with_capacity(n);
    for chunk in value.chunks(PAYLOAD) {
        let pid = pager.alloc_pid()?;
        page::init(&mut buf, PageKind::Overflow, 0, pid);
        page::set_aux(&mut buf, chunk.len() as u64);
        buf[HEADER_SIZE..HEADER_SIZE + chunk.len()].copy_from_slice(chunk);
        pager.write_direct(pid, &mut buf)?;
        pids.push(pid);
    }
    let index = pager.alloc_pid()?;
    page::init(&mut buf, PageKind::Overflow, 1, index);
    page::set_aux(&mut buf, value.len() as u64);
    page::set_count(&mut buf, n);
    for (i, p) in pids.iter().enumerate() {
        put_u64(&mut buf, HEADER_SIZE + i * 8, *p);
    }
    pager.write_direct(index, &mut buf)?;
    Ok(index)
}

/// Reads the index page of a value of `len` bytes and returns its data pages.
fn read_index(pager: &Pager, index: u64, len: u64, buf: &mut [u8]) -> Result<Vec<u64>> {
    pager.read_page(index, buf, &[PageKind::Overflow])?;
    let n = page::count(buf);
    if page::level(buf) != 1
        || page::aux(buf) != len
        || n != (len as usize).div_ceil(PAYLOAD)
        || n > MAX_DATA_PAGES
    {
        return Err(Error::corruption(
            index,
            format!("overflow index does not describe a value of {len} bytes"),
        ));
    }
    Ok((0..n).map(|i| get_u64(buf, HEADER_SIZE + i * 8)).collect())
}

/// Reads a whole overflowed value.
pub(crate) fn read(pager: &Pager, index: u64, len: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; PAGE_SIZE];
    let pids = read_index(pager, index, len, &mut buf)?;
    let mut out = Vec::with_capacity(len as usize);
    for pid in pids {
        pager.read_page(pid, &mut buf, &[PageKind::Overflow])?;
        let n = page::aux(&buf) as usize;
        if page::level(&buf) != 0 || n > PAYLOAD || out.len() + n > len as usize {
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
    let mut buf = vec![0u8; PAGE_SIZE];
    for pid in read_index(pager, index, len, &mut buf)? {
        pager.free_pid(pid);
    }
    pager.free_pid(index);
    Ok(())
}

/// Every page id of an overflowed value (for `verify` and `drop_table`).
pub(crate) fn pages(pager: &Pager, index: u64, len: u64) -> Result<Vec<u64>> {
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut v = read_index(pager, index, len, &mut buf)?;
    v.push(index);
    Ok(v)
}
