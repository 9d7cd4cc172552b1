//! The page map: for every logical page id (pid), the block that holds its
//! latest written image, and the cache frame holding it, if any.
//!
//! B+tree pages refer to each other by pid, never by block. Copy-on-write
//! therefore moves a page to a new block by changing one map entry; the
//! parent is untouched, and eviction never needs to find or latch a parent.
//!
//! On disk the map is a set of map-chunk pages (kind `MapChunk`, header id =
//! chunk index), each holding [`chunk_entries`] little-endian u64 block
//! numbers (as many as the database's page size holds); block 0 means "no block". A checkpoint rewrites only the chunks
//! whose entries changed. A chain of directory pages (kind `MapDirectory`,
//! `count` entries of u64 chunk blocks, `aux` = next directory block) lists
//! the chunks; the meta page names the first directory block.

use std::sync::atomic::Ordering;
use std::sync::OnceLock;

// loom's atomics under `cfg(loom)`: a page's frame and block entries are
// the protocol between lookups, loads and eviction (`cache::loom_tests`).
use crate::sync::{AtomicU32, AtomicU64};

use crate::page::{DEFAULT_PAGE_SIZE, HEADER_SIZE};

/// Map entries per chunk page of a database of pages of `page_size` bytes.
pub(crate) const fn chunk_entries(page_size: usize) -> usize {
    (page_size - HEADER_SIZE) / 8
}
/// Entries per chunk of the map in memory: those of a chunk page of the
/// default size, whatever the database's page size (a constant, so that
/// every lookup divides by a constant).
const CHUNK_ENTRIES: usize = chunk_entries(DEFAULT_PAGE_SIZE);
/// Most chunks the map in memory can have. The chunk table is allocated up
/// front (16 bytes per chunk slot), so this bounds its size at 1 MiB while
/// allowing 2^16 * 2044 page ids: about 2 TiB of pages of 16 KiB.
const MAX_CHUNKS: usize = 1 << 16;
/// Most page ids a database can have.
pub(crate) const MAX_PIDS: u64 = (CHUNK_ENTRIES * MAX_CHUNKS) as u64;
/// Most chunk pages the map of a database of pages of `page_size` bytes
/// can have on disk: enough for [`MAX_PIDS`].
pub(crate) const fn max_disk_chunks(page_size: usize) -> usize {
    (MAX_PIDS as usize).div_ceil(chunk_entries(page_size))
}
/// Entries a chunk makes in memory: all of them, or a few in a loom model
/// check, which tracks every atomic (page ids past them are out of range).
#[cfg(not(loom))]
const MADE_ENTRIES: usize = CHUNK_ENTRIES;
#[cfg(loom)]
const MADE_ENTRIES: usize = 8;
/// Frame index meaning "not in the cache".
pub(crate) const NO_FRAME: u32 = u32::MAX;
/// Block number meaning "never written". Block 0 is a meta block, so no
/// page ever lives there.
pub(crate) const NO_BLOCK: u64 = 0;

struct Entry {
    block: AtomicU64,
    frame: AtomicU32,
    /// [`epoch_tag`] of the epoch in which the page id last went onto the
    /// pager's dirty list, 0 if never (see [`PageMap::list_once`]). It
    /// fills the entry's padding: an entry stays 16 bytes.
    listed: AtomicU32,
}

/// An epoch's tag for [`Entry::listed`]: never 0, and the same for two
/// epochs only `u32::MAX` apart, a wrap [`PageMap::clear_listed`] takes
/// care of.
pub(crate) fn epoch_tag(epoch: u64) -> u32 {
    // The remainder is below u32::MAX, so the tag fits and is at least 1.
    (epoch % u64::from(u32::MAX)) as u32 + 1
}

pub(crate) struct PageMap {
    chunks: Box<[OnceLock<Box<[Entry]>>]>,
}

impl PageMap {
    pub(crate) fn new() -> Self {
        PageMap {
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }

    fn entry(&self, pid: u64) -> Option<&Entry> {
        if pid >= MAX_PIDS {
            return None;
        }
        let c = (pid / CHUNK_ENTRIES as u64) as usize;
        let i = (pid % CHUNK_ENTRIES as u64) as usize;
        if i >= MADE_ENTRIES {
            return None;
        }
        let chunk = self.chunks[c].get_or_init(|| {
            (0..MADE_ENTRIES)
                .map(|_| Entry {
                    block: AtomicU64::new(NO_BLOCK),
                    frame: AtomicU32::new(NO_FRAME),
                    listed: AtomicU32::new(0),
                })
                .collect()
        });
        Some(&chunk[i])
    }

    /// Block of `pid`, `NO_BLOCK` if never written or out of range.
    pub(crate) fn block(&self, pid: u64) -> u64 {
        self.entry(pid)
            .map_or(NO_BLOCK, |e| e.block.load(Ordering::Acquire))
    }

    /// Sets the block of `pid`, returning the previous one.
    pub(crate) fn swap_block(&self, pid: u64, block: u64) -> u64 {
        match self.entry(pid) {
            Some(e) => e.block.swap(block, Ordering::AcqRel),
            None => NO_BLOCK,
        }
    }

    pub(crate) fn frame(&self, pid: u64) -> u32 {
        self.entry(pid)
            .map_or(NO_FRAME, |e| e.frame.load(Ordering::Acquire))
    }

    pub(crate) fn set_frame(&self, pid: u64, frame: u32) {
        if let Some(e) = self.entry(pid) {
            e.frame.store(frame, Ordering::Release);
        }
    }

    /// Whether `pid` should go onto the dirty list in `epoch`: true the
    /// first time it is asked in that epoch (and for a page id out of
    /// range), false after, so that the list holds each page id once per
    /// epoch rather than once per time a page is made dirty. Sound because
    /// every push in an epoch goes onto the list that epoch's cut takes:
    /// pages are made dirty only by writers inside the write gate, which a
    /// cut closes, and by the cutting thread itself before it takes the
    /// list; the checkpoint's own pushes for the next epoch come after the
    /// cut (ARCHITECTURE.md, Checkpoints).
    pub(crate) fn list_once(&self, pid: u64, epoch: u64) -> bool {
        let tag = epoch_tag(epoch);
        match self.entry(pid) {
            // Read before the swap: a page made dirty again in the same
            // epoch (the common case) writes nothing to the entry, whose
            // cache line every lookup of the page reads.
            Some(e) => {
                e.listed.load(Ordering::Acquire) != tag
                    && e.listed.swap(tag, Ordering::AcqRel) != tag
            }
            None => true,
        }
    }

    /// Forgets every page id's listing. Called by a cut whose new epoch's
    /// tag is 1, so that a listing from `u32::MAX` epochs before can
    /// never pass for one of the new epoch; with the write gate closed, so
    /// no page is listed meanwhile.
    pub(crate) fn clear_listed(&self) {
        for chunk in self.chunks.iter().filter_map(OnceLock::get) {
            for e in chunk.iter() {
                e.listed.store(0, Ordering::Release);
            }
        }
    }

    /// Publishes `frame` for `pid` only if no frame is published yet.
    pub(crate) fn claim_frame(&self, pid: u64, frame: u32) -> bool {
        self.entry(pid).is_some_and(|e| {
            e.frame
                .compare_exchange(NO_FRAME, frame, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_page_id_is_listed_once_per_epoch() {
        let m = PageMap::new();
        assert!(m.list_once(5, 7));
        assert!(!m.list_once(5, 7));
        assert!(m.list_once(6, 7), "another page id");
        assert!(m.list_once(5, 8), "the next epoch");
        assert!(!m.list_once(5, 8));
        // Out of range: always listed (the checkpoint skips what it
        // cannot find).
        assert!(m.list_once(MAX_PIDS, 7));
        assert!(m.list_once(MAX_PIDS, 7));
    }

    #[test]
    fn epoch_tags_are_never_zero_and_wrap_only_after_u32_max_epochs() {
        for e in [0, 1, u64::from(u32::MAX) - 1, u64::from(u32::MAX), u64::MAX] {
            assert_ne!(epoch_tag(e), 0, "epoch {e}");
        }
        assert_ne!(epoch_tag(3), epoch_tag(4));
        assert_eq!(epoch_tag(3), epoch_tag(3 + u64::from(u32::MAX)));
        assert_eq!(epoch_tag(u64::from(u32::MAX)), 1);
    }

    #[test]
    fn clearing_forgets_every_listing() {
        let m = PageMap::new();
        let far = 5 * CHUNK_ENTRIES as u64 + 3;
        assert!(m.list_once(1, 7));
        assert!(m.list_once(far, 7));
        m.clear_listed();
        // An epoch whose tag equals 7's (a wrap) lists them again.
        assert!(m.list_once(1, 7 + u64::from(u32::MAX)));
        assert!(m.list_once(far, 7));
    }
}
