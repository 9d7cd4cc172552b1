//! The engine: the pager, the buffer pool and the write gate put together,
//! and the code that opens a data file (reads the durable checkpoint's map
//! back and rebuilds free space from it).

use std::path::Path;

use parking_lot::Mutex;

use crate::alloc::BlockAlloc;
use crate::btree::{node, Tree};
use crate::cache::{BufferPool, PoolConfig};
use crate::checkpoint::{CheckpointCounters, Durable};
use crate::error::{Error, Result};
use crate::gate::Gate;
use crate::io::FileSystem;
use crate::meta::{self, Meta};
use crate::page::{self, get_u64, PageKind, HEADER_SIZE, PAGE_SIZE};
use crate::pagemap::{PageMap, CHUNK_ENTRIES, MAX_CHUNKS, NO_BLOCK};
use crate::pager::Pager;

/// Page id of the catalog tree (table name -> root page id).
pub(crate) const CATALOG_ROOT: u64 = 1;
/// Name of the data file inside the database directory.
pub const DATA_FILE: &str = "data.tdm";

pub(crate) struct Engine {
    pub(crate) pager: Pager,
    pub(crate) pool: BufferPool,
    pub(crate) gate: Gate,
    pub(crate) durable: Mutex<Durable>,
    pub(crate) ckpt: CheckpointCounters,
    /// Serialises create_table / drop_table.
    pub(crate) catalog_lock: Mutex<()>,
}

impl Engine {
    pub(crate) fn tree(&self, root: u64) -> Tree<'_> {
        Tree {
            pager: &self.pager,
            pool: &self.pool,
            root,
        }
    }

    pub(crate) fn open(dir: &Path, fs: &dyn FileSystem, cfg: PoolConfig) -> Result<Engine> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(DATA_FILE);
        let file = fs.open(&path, true)?;
        let len = file.len()?;
        if len == 0 {
            let mut buf = vec![0u8; PAGE_SIZE];
            Meta {
                generation: 1,
                epoch: 0,
                next_pid: CATALOG_ROOT,
                dir_block: 0,
                map_chunks: 0,
            }
            .encode(&mut buf);
            file.write_all_at(&buf, PAGE_SIZE as u64)?;
            file.sync_data()?;
            // Make the new file's directory entry durable too.
            std::fs::File::open(dir)?.sync_all()?;
        } else if len < 2 * PAGE_SIZE as u64 {
            return Err(Error::NotADatabase(format!(
                "{} is {len} bytes: too short for a tidemark data file",
                path.display()
            )));
        }
        let file_blocks = file.len()?.div_ceil(PAGE_SIZE as u64);
        let (mut a, mut b) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
        file.read_exact_at(&mut a, 0)?;
        file.read_exact_at(&mut b, PAGE_SIZE as u64)?;
        let m = meta::choose(&a, &b)?;
        let map = PageMap::new();
        let (dir_blocks, chunk_blocks) = read_map(&*file, &m, &map, file_blocks)?;
        let mut used: Vec<u64> = dir_blocks
            .iter()
            .chain(chunk_blocks.iter())
            .copied()
            .filter(|&b| b != 0)
            .collect();
        let mut free_pids = Vec::new();
        for pid in CATALOG_ROOT..m.next_pid {
            match map.block(pid) {
                NO_BLOCK => free_pids.push(pid),
                blk => used.push(blk),
            }
        }
        free_pids.reverse();
        let alloc = BlockAlloc::new(used)
            .map_err(|blk| Error::corruption(blk, "block referenced twice in the page map"))?;
        let pager = Pager::new(file, map, alloc, m.epoch + 1, m.next_pid, free_pids);
        let engine = Engine {
            pager,
            pool: BufferPool::new(cfg),
            gate: Gate::new(),
            durable: Mutex::new(Durable {
                generation: m.generation,
                chunk_blocks,
                dir_blocks,
            }),
            ckpt: CheckpointCounters::default(),
            catalog_lock: Mutex::new(()),
        };
        if m.next_pid == CATALOG_ROOT {
            let pid = engine.pager.alloc_pid()?;
            debug_assert_eq!(pid, CATALOG_ROOT);
            let mut w = engine.pool.new_page(&engine.pager, pid)?;
            node::init_leaf(w.bytes_mut()?, pid);
            drop(w);
            crate::checkpoint::checkpoint(&engine)?;
        } else if engine.pager.map.block(CATALOG_ROOT) == NO_BLOCK {
            return Err(Error::corruption(CATALOG_ROOT, "catalog root has no block"));
        }
        Ok(engine)
    }
}

/// Loads the durable page map; returns (directory blocks, chunk blocks).
fn read_map(
    file: &dyn crate::io::FileIo,
    m: &Meta,
    map: &PageMap,
    file_blocks: u64,
) -> Result<(Vec<u64>, Vec<u64>)> {
    let nchunks = m.map_chunks as usize;
    let empty = nchunks == 0 && m.dir_block == 0;
    if nchunks > MAX_CHUNKS || (!empty && (m.next_pid as usize).div_ceil(CHUNK_ENTRIES) != nchunks)
    {
        return Err(Error::corruption(
            0,
            format!(
                "meta lists {nchunks} map chunks for {} page ids",
                m.next_pid
            ),
        ));
    }
    let mut buf = vec![0u8; PAGE_SIZE];
    let read = |blk: u64, buf: &mut [u8]| -> Result<()> {
        if blk < crate::alloc::META_BLOCKS || blk >= file_blocks {
            return Err(Error::corruption(
                blk,
                format!("block {blk} is outside the file ({file_blocks} blocks)"),
            ));
        }
        file.read_exact_at(buf, blk * PAGE_SIZE as u64)?;
        Ok(())
    };
    let mut dirs = Vec::new();
    let mut chunks = Vec::with_capacity(nchunks);
    let mut next = m.dir_block;
    while chunks.len() < nchunks {
        if next == 0 {
            return Err(Error::corruption(0, "map directory ends early"));
        }
        read(next, &mut buf)?;
        page::check(&buf, &[PageKind::MapDirectory], dirs.len() as u64, next)?;
        let n = page::count(&buf);
        if n == 0 || n > CHUNK_ENTRIES || chunks.len() + n > nchunks {
            return Err(Error::corruption(
                next,
                "map directory page has a bad entry count",
            ));
        }
        chunks.extend((0..n).map(|i| get_u64(&buf, HEADER_SIZE + i * 8)));
        dirs.push(next);
        next = page::aux(&buf);
    }
    for (c, &blk) in chunks.iter().enumerate() {
        if blk == 0 {
            continue;
        }
        read(blk, &mut buf)?;
        page::check(&buf, &[PageKind::MapChunk], c as u64, blk)?;
        for j in 0..CHUNK_ENTRIES {
            let pid = (c * CHUNK_ENTRIES + j) as u64;
            let v = get_u64(&buf, HEADER_SIZE + j * 8);
            if pid >= m.next_pid || v == NO_BLOCK {
                continue;
            }
            if v < crate::alloc::META_BLOCKS || v >= file_blocks {
                return Err(Error::corruption(
                    pid,
                    format!("mapped to block {v}, outside the file ({file_blocks} blocks)"),
                ));
            }
            map.swap_block(pid, v);
        }
    }
    Ok((dirs, chunks))
}
