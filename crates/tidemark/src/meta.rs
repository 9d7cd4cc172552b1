//! The double-buffered meta page: blocks 0 and 1 of the data file.
//!
//! A checkpoint with generation `g` writes slot `g % 2`, so the slot holding
//! the previous durable checkpoint is never touched; on open the valid slot
//! with the higher generation wins. Body, after the common page header
//! (header id = slot number):
//!
//! | offset | size | field          | meaning                                        |
//! |--------|------|----------------|------------------------------------------------|
//! | 32     | 8    | magic          | `b"TIDEMRK\x01"`                               |
//! | 40     | 4    | format_version | [`FORMAT_VERSION`]                             |
//! | 44     | 4    | page_size      | the database's page size, chosen at creation   |
//! | 48     | 8    | generation     | increases by one per durable checkpoint        |
//! | 56     | 8    | epoch          | the epoch whose cut this checkpoint captured   |
//! | 64     | 8    | next_pid       | page ids below this exist (or are free)        |
//! | 72     | 8    | dir_block      | first map directory page, 0 = empty map        |
//! | 80     | 4    | map_chunks     | number of map chunks the directory lists       |
//! | 84     | 8    | log_lsn        | log position this checkpoint covers: replay    |
//! |        |      |                | starts here                                    |
//! | 92     | 8    | log_seg_size   | bytes per log segment file                     |

use crate::error::{Error, Result};
use crate::io::FileIo;
use crate::page::{self, get_u32, get_u64, put_u32, put_u64, PageKind, HEADER_SIZE};

/// Identifies a tidemark data file.
pub(crate) const MAGIC: [u8; 8] = *b"TIDEMRK\x01";
/// On-disk format version this build writes. Version 3 stores leaf and
/// branch pages packed (see [`crate::page`]).
pub(crate) const FORMAT_VERSION: u32 = 3;
/// Oldest format version this build reads: version 2 differs only in
/// storing every page whole, which version 3 still reads.
pub(crate) const OLDEST_READABLE: u32 = 2;

const MAGIC_OFFSET: usize = HEADER_SIZE;
const VERSION_OFFSET: usize = MAGIC_OFFSET + 8;
const PAGE_SIZE_OFFSET: usize = VERSION_OFFSET + 4;
const GENERATION_OFFSET: usize = PAGE_SIZE_OFFSET + 4;
const EPOCH_OFFSET: usize = GENERATION_OFFSET + 8;
const NEXT_PID_OFFSET: usize = EPOCH_OFFSET + 8;
const DIR_BLOCK_OFFSET: usize = NEXT_PID_OFFSET + 8;
const MAP_CHUNKS_OFFSET: usize = DIR_BLOCK_OFFSET + 8;
const LOG_LSN_OFFSET: usize = MAP_CHUNKS_OFFSET + 4;
const LOG_SEG_SIZE_OFFSET: usize = LOG_LSN_OFFSET + 8;

/// The durable root of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) generation: u64,
    pub(crate) epoch: u64,
    pub(crate) next_pid: u64,
    pub(crate) dir_block: u64,
    pub(crate) map_chunks: u32,
    pub(crate) log_lsn: u64,
    pub(crate) log_segment_size: u64,
}

impl Meta {
    /// Encodes into `buf`, one page of the database's page size.
    pub(crate) fn encode(&self, buf: &mut [u8]) {
        let slot = self.generation % 2;
        page::init(buf, PageKind::Meta, 0, slot);
        buf[MAGIC_OFFSET..MAGIC_OFFSET + 8].copy_from_slice(&MAGIC);
        put_u32(buf, VERSION_OFFSET, FORMAT_VERSION);
        // A page size is at most MAX_PAGE_SIZE, so it fits in u32.
        put_u32(buf, PAGE_SIZE_OFFSET, buf.len() as u32);
        put_u64(buf, GENERATION_OFFSET, self.generation);
        put_u64(buf, EPOCH_OFFSET, self.epoch);
        put_u64(buf, NEXT_PID_OFFSET, self.next_pid);
        put_u64(buf, DIR_BLOCK_OFFSET, self.dir_block);
        put_u32(buf, MAP_CHUNKS_OFFSET, self.map_chunks);
        put_u64(buf, LOG_LSN_OFFSET, self.log_lsn);
        put_u64(buf, LOG_SEG_SIZE_OFFSET, self.log_segment_size);
        page::seal(buf);
    }

    /// Decodes slot `slot`, read as a page of `buf.len()` bytes. `Ok(None)`
    /// when the block does not carry the tidemark magic at all (foreign or
    /// never written).
    pub(crate) fn decode(buf: &[u8], slot: u64) -> Result<Option<Meta>> {
        if buf.len() < MAGIC_OFFSET + 8 || buf[MAGIC_OFFSET..MAGIC_OFFSET + 8] != MAGIC {
            return Ok(None);
        }
        page::check(buf, &[PageKind::Meta], slot, slot)?;
        let version = get_u32(buf, VERSION_OFFSET);
        if !(OLDEST_READABLE..=FORMAT_VERSION).contains(&version) {
            return Err(Error::NotADatabase(format!(
                "format version {version}, this build reads {OLDEST_READABLE} to {FORMAT_VERSION}"
            )));
        }
        let ps = get_u32(buf, PAGE_SIZE_OFFSET) as usize;
        if ps != buf.len() {
            return Err(Error::NotADatabase(format!(
                "meta page declares a page size of {ps} bytes, read as {}",
                buf.len()
            )));
        }
        let m = Meta {
            generation: get_u64(buf, GENERATION_OFFSET),
            epoch: get_u64(buf, EPOCH_OFFSET),
            next_pid: get_u64(buf, NEXT_PID_OFFSET),
            dir_block: get_u64(buf, DIR_BLOCK_OFFSET),
            map_chunks: get_u32(buf, MAP_CHUNKS_OFFSET),
            log_lsn: get_u64(buf, LOG_LSN_OFFSET),
            log_segment_size: get_u64(buf, LOG_SEG_SIZE_OFFSET),
        };
        if crate::wal::segment::check_size(m.log_segment_size).is_err() {
            return Err(Error::corruption(
                slot,
                format!("log segment size {} in the meta page", m.log_segment_size),
            ));
        }
        if m.generation % 2 != slot {
            return Err(Error::corruption(
                slot,
                format!("generation {} stored in slot {slot}", m.generation),
            ));
        }
        Ok(Some(m))
    }
}

/// Whether `bytes`, the start of meta slot 1, can be a torn write of a new
/// database's first meta page: empty, all zero, or the magic in place.
pub(crate) fn torn_first_meta(bytes: &[u8]) -> bool {
    let end = MAGIC_OFFSET + MAGIC.len();
    if bytes.iter().all(|&b| b == 0) {
        return true;
    }
    if bytes.len() < end {
        // Too short to tell by its magic: only the header was written.
        return bytes.len() <= MAGIC_OFFSET;
    }
    bytes[MAGIC_OFFSET..end] == MAGIC
}

/// The page size slot 0's header declares, if it carries the magic and a
/// size this build takes (the checksum is not checked here: the slots are
/// then read at that size and checked whole).
fn declared_page_size(head: &[u8]) -> Option<usize> {
    if head.len() < PAGE_SIZE_OFFSET + 4 || head[MAGIC_OFFSET..MAGIC_OFFSET + 8] != MAGIC {
        return None;
    }
    Some(get_u32(head, PAGE_SIZE_OFFSET) as usize).filter(|&ps| page::valid_page_size(ps))
}

/// Reads the durable meta of a data file of `len` bytes, and its page
/// size. The size slot 0 declares is tried first, then every other size
/// this build takes (slot 0 may be torn, and slot 1 lies one page in):
/// the first size at which a slot decodes whole, checksum and declared
/// size included, is the file's. If none does, the error is the one met
/// at the first size tried.
pub(crate) fn read_durable(file: &dyn FileIo, len: u64) -> Result<(usize, Meta)> {
    let mut head = [0u8; PAGE_SIZE_OFFSET + 4];
    let have = head.len().min(usize::try_from(len).unwrap_or(usize::MAX));
    file.read_exact_at(&mut head[..have], 0)?;
    let declared = declared_page_size(&head[..have]);
    let mut sizes = vec![declared.unwrap_or(page::DEFAULT_PAGE_SIZE)];
    let mut ps = page::MIN_PAGE_SIZE;
    while ps <= page::MAX_PAGE_SIZE {
        if !sizes.contains(&ps) {
            sizes.push(ps);
        }
        ps *= 2;
    }
    let mut first_err = None;
    for ps in sizes {
        if len < 2 * ps as u64 {
            first_err.get_or_insert_with(|| {
                Error::NotADatabase(format!(
                    "the data file is {len} bytes: too short for two meta pages of {ps} bytes"
                ))
            });
            continue;
        }
        let (mut a, mut b) = (vec![0u8; ps], vec![0u8; ps]);
        file.read_exact_at(&mut a, 0)?;
        file.read_exact_at(&mut b, ps as u64)?;
        match choose(&a, &b) {
            Ok(m) => return Ok((ps, m)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    // The list of sizes is never empty, so an error was recorded.
    Err(first_err.unwrap_or_else(|| Error::NotADatabase("no meta page".into())))
}

/// Chooses the durable meta from the two slots. Errors if neither is valid:
/// `NotADatabase` when neither carries the magic, else the decode error.
pub(crate) fn choose(slot0: &[u8], slot1: &[u8]) -> Result<Meta> {
    let a = Meta::decode(slot0, 0);
    let b = Meta::decode(slot1, 1);
    match (a, b) {
        (Ok(Some(x)), Ok(Some(y))) => Ok(if x.generation > y.generation { x } else { y }),
        (Ok(Some(x)), _) | (_, Ok(Some(x))) => Ok(x),
        (Ok(None), Ok(None)) => Err(Error::NotADatabase(
            "no tidemark meta page in blocks 0 and 1".into(),
        )),
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const PAGE_SIZE: usize = page::DEFAULT_PAGE_SIZE;

    fn m(generation: u64) -> Meta {
        Meta {
            generation,
            epoch: 3,
            next_pid: 10,
            dir_block: 4,
            map_chunks: 1,
            log_lsn: 4096,
            log_segment_size: 1 << 20,
        }
    }

    #[test]
    fn newest_valid_slot_wins_and_torn_slot_falls_back() {
        let (mut a, mut b) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
        m(6).encode(&mut a);
        m(7).encode(&mut b);
        assert_eq!(choose(&a, &b).unwrap().generation, 7);
        b[200] ^= 1; // torn write of the newer slot
        assert_eq!(choose(&a, &b).unwrap().generation, 6);
    }

    /// A file as format version 2 wrote it (every page whole, version 2 in
    /// the meta slots), made here by unpacking every packed page of a
    /// closed database in place, opens and reads back every record; a
    /// version this build does not know is refused.
    #[test]
    fn a_version_2_file_opens_and_an_unknown_version_does_not() {
        use crate::btree::node;
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let db = crate::Database::open(dir.path()).unwrap();
        let t = db.create_table("t").unwrap();
        for i in 0..5000u32 {
            t.put(i.to_be_bytes(), [i as u8; 120]).unwrap();
        }
        db.checkpoint().unwrap();
        drop(t);
        db.close().unwrap();
        let path = dir.path().join(crate::DATA_FILE);
        let rewrite = |version: u32| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap();
            let blocks = f.metadata().unwrap().len() / PAGE_SIZE as u64;
            let mut buf = vec![0u8; PAGE_SIZE];
            let mut unpacked = 0;
            for b in 0..blocks {
                f.read_exact_at(&mut buf, b * PAGE_SIZE as u64).unwrap();
                if b < 2 {
                    if buf[MAGIC_OFFSET..MAGIC_OFFSET + 8] == MAGIC {
                        put_u32(&mut buf, VERSION_OFFSET, version);
                        page::seal(&mut buf);
                    }
                } else if page::image(&buf) != 0 {
                    let id = page::id(&buf);
                    if page::check(&buf, &[PageKind::Leaf, PageKind::Branch], id, id).is_err() {
                        continue; // a free block's leftovers
                    }
                    node::unpack(&mut buf).unwrap();
                    page::seal(&mut buf);
                    unpacked += 1;
                } else {
                    continue;
                }
                f.write_all_at(&buf, b * PAGE_SIZE as u64).unwrap();
            }
            unpacked
        };
        assert!(rewrite(2) > 10, "the database had packed pages to unpack");
        let db = crate::Database::open(dir.path()).unwrap();
        let t = db.open_table("t").unwrap();
        for i in (0..5000u32).step_by(7) {
            assert_eq!(t.get(i.to_be_bytes()).unwrap().unwrap(), [i as u8; 120]);
        }
        assert_eq!(t.iter().count(), 5000);
        assert!(db.verify().unwrap().is_ok());
        drop(t);
        db.close().unwrap();
        rewrite(FORMAT_VERSION + 1);
        assert!(matches!(
            crate::Database::open(dir.path()),
            Err(Error::NotADatabase(_))
        ));
    }

    /// A file of meta slots of `ps` bytes: slot 0 holding `slot0`'s bytes
    /// (or generation 6), slot 1 generation 7.
    fn slots_file(ps: usize, slot0: Option<&[u8]>) -> (tempfile::TempDir, Arc<dyn FileIo>) {
        use crate::io::FileSystem;
        let dir = tempfile::tempdir().unwrap();
        let f = crate::io::OsFileSystem
            .open(&dir.path().join("data"), true)
            .unwrap();
        let (mut a, mut b) = (vec![0u8; ps], vec![0u8; ps]);
        m(6).encode(&mut a);
        m(7).encode(&mut b);
        if let Some(bytes) = slot0 {
            a.fill(0);
            a[..bytes.len()].copy_from_slice(bytes);
        }
        f.write_all_at(&a, 0).unwrap();
        f.write_all_at(&b, ps as u64).unwrap();
        // Blocks after the meta slots, as a database has.
        f.write_all_at(&vec![0x5Au8; 4 * ps], 2 * ps as u64)
            .unwrap();
        (dir, f)
    }

    /// The page size is found from slot 0's header, or, with slot 0 torn or
    /// never written, by trying each size until slot 1 decodes whole.
    #[test]
    fn the_page_size_is_read_from_the_file() {
        for ps in [4096, 8192, 16384, 32768] {
            let (_d, f) = slots_file(ps, None);
            let (got, meta) = read_durable(&*f, f.len().unwrap()).unwrap();
            assert_eq!((got, meta.generation), (ps, 7));
            for slot0 in [&[][..], &[0xEE; 300][..]] {
                let (_d, f) = slots_file(ps, Some(slot0));
                let (got, meta) = read_durable(&*f, f.len().unwrap()).unwrap();
                assert_eq!((got, meta.generation), (ps, 7), "pages of {ps}");
            }
            // Slot 0 declares another size: its checksum fails there, and
            // slot 1 is found at the file's own size.
            let mut lying = vec![0u8; ps];
            m(6).encode(&mut lying);
            put_u32(
                &mut lying,
                PAGE_SIZE_OFFSET,
                if ps == 4096 { 8192 } else { 4096 },
            );
            let (_d, f) = slots_file(ps, Some(&lying[..64]));
            let (got, _) = read_durable(&*f, f.len().unwrap()).unwrap();
            assert_eq!(got, ps);
        }
        // A meta page read at a size other than the one it declares is
        // refused, checksum or not.
        let mut buf = vec![0u8; 8192];
        m(7).encode(&mut buf);
        put_u32(&mut buf, PAGE_SIZE_OFFSET, 4096);
        page::seal(&mut buf);
        assert!(matches!(Meta::decode(&buf, 1), Err(Error::NotADatabase(_))));
    }

    #[test]
    fn foreign_file_is_not_a_database() {
        let z = vec![0u8; PAGE_SIZE];
        let junk = vec![0xABu8; PAGE_SIZE];
        assert!(matches!(choose(&z, &junk), Err(Error::NotADatabase(_))));
    }
}
