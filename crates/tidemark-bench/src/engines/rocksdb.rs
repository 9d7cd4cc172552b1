//! RocksDB (rust-rocksdb): the default column family, LRU block cache =
//! the budget, memtables (`write_buffer_size`) a quarter of it, otherwise
//! RocksDB's defaults. Writes are `WriteBatch`es with the WAL on:
//! `sync=false` for Write (the WAL is written to the OS at commit:
//! survives a crash of the process), `sync=true` for Fsync, and the WAL off
//! for None.

use std::path::Path;

use rocksdb::{BlockBasedOptions, Cache, IteratorMode, Options, WriteBatch, WriteOptions, DB};

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

pub struct Rocks {
    db: DB,
    durability: Durability,
}

impl Rocks {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(2);
        let mut table = BlockBasedOptions::default();
        let cache = Cache::new_lru_cache(cfg.cache_bytes);
        table.set_block_cache(&cache);
        opts.set_block_based_table_factory(&table);
        opts.set_write_buffer_size(cfg.cache_bytes / 4);
        let db = DB::open(&opts, dir)?;
        Ok(Rocks {
            db,
            durability: cfg.durability,
        })
    }
    fn wopts(&self) -> WriteOptions {
        let mut w = WriteOptions::default();
        match self.durability {
            Durability::None => w.disable_wal(true),
            Durability::Write => w.set_sync(false),
            Durability::Fsync => w.set_sync(true),
        }
        w
    }
}

impl Engine for Rocks {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(RocksWorker {
            e: self,
            w: self.wopts(),
        }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        self.db.flush()?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        match self.durability {
            Durability::None => "WAL disabled".into(),
            Durability::Write => "WAL, sync=false".into(),
            Durability::Fsync => "WAL, sync=true".into(),
        }
    }
}

struct RocksWorker<'a> {
    e: &'a Rocks,
    w: WriteOptions,
}

impl Worker for RocksWorker<'_> {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut b = WriteBatch::default();
        for op in ops {
            match op {
                Op::Put(k, v) => b.put(k, v),
                Op::Delete(k) => b.delete(k),
            }
        }
        self.e.db.write_opt(b, &self.w)?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        Ok(self.e.db.get_pinned(key)?.map(|v| copy_out(&v)))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let mut got = 0;
        let it = self
            .e
            .db
            .iterator(IteratorMode::From(start, rocksdb::Direction::Forward));
        for kv in it.take(n) {
            let (k, v) = kv?;
            copy_out(&k);
            copy_out(&v);
            got += 1;
        }
        Ok(got)
    }
}
