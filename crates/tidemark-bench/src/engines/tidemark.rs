//! tidemark itself: one table, writes through `WriteBatch` at the run's
//! durability, the cache budget as `cache_size` (which bounds pages and
//! kept versions together).

use std::path::Path;

use tidemark::{Database, Table, WriteBatch};

use super::{Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

const TABLE: &str = "bench";

pub struct Tidemark {
    db: Database,
    table: Table,
    durability: tidemark::Durability,
}

impl Tidemark {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let durability = match cfg.durability {
            Durability::None => tidemark::Durability::None,
            Durability::Write => tidemark::Durability::Write,
            Durability::Fsync => tidemark::Durability::Fsync,
        };
        let db = Database::builder()
            .cache_size(cfg.cache_bytes)
            .page_size(cfg.tidemark_page_size)
            .durability(durability)
            .statistics_log(None)
            .open(dir)?;
        let table = db.table(TABLE)?;
        Ok(Tidemark {
            db,
            table,
            durability,
        })
    }
}

impl Engine for Tidemark {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(TidemarkWorker { e: self }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        self.db.checkpoint()?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        format!("Durability::{:?} per commit", self.durability)
    }
}

struct TidemarkWorker<'a> {
    e: &'a Tidemark,
}

impl Worker for TidemarkWorker<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> BoxResult<()> {
        self.e.table.put_with(key, value, self.e.durability)?;
        Ok(())
    }
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut b = WriteBatch::new();
        for op in ops {
            match op {
                Op::Put(k, v) => b.put(TABLE, k, v),
                Op::Delete(k) => b.delete(TABLE, k),
            };
        }
        b.set_durability(self.e.durability);
        self.e.db.write(&b)?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        // The value is already an owned copy; black_box keeps it as real
        // as the peers' copies.
        Ok(self
            .e
            .table
            .get(key)?
            .map(|v| std::hint::black_box(v).len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let mut got = 0;
        // The count is known, as SQLite's LIMIT knows it: the iterator
        // copies no entries past it out of the last leaf.
        for kv in self.e.table.range(start.to_vec()..).read_ahead(n).take(n) {
            std::hint::black_box(kv?);
            got += 1;
        }
        Ok(got)
    }
}
