//! sled 0.34 (the last stable release): one tree, writes as atomic batches.
//! sled has no per-commit level between its periodic flush (every 500 ms by
//! default) and `flush()` (fsync): Fsync calls `flush()` after every
//! commit; Write and None use the periodic flush, which is weaker than
//! Write (a crash of the process can lose the last half second), so its
//! figures are marked and left out of the equal-durability targets.
//! Memory: `cache_capacity` = the budget.

use std::path::Path;

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

pub struct Sled {
    db: sled::Db,
    durability: Durability,
}

impl Sled {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let db = sled::Config::new()
            .path(dir)
            .cache_capacity(cfg.cache_bytes as u64)
            .open()?;
        Ok(Sled {
            db,
            durability: cfg.durability,
        })
    }
}

impl Engine for Sled {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(SledWorker { e: self }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        self.db.flush()?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        match self.durability {
            Durability::Fsync => "flush() after every commit".into(),
            _ => "periodic flush every 500 ms (weaker than write)".into(),
        }
    }
    fn weaker(&self) -> bool {
        self.durability == Durability::Write
    }
}

struct SledWorker<'a> {
    e: &'a Sled,
}

impl Worker for SledWorker<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> BoxResult<()> {
        self.e.db.insert(key, value)?;
        if self.e.durability == Durability::Fsync {
            self.e.db.flush()?;
        }
        Ok(())
    }
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut b = sled::Batch::default();
        for op in ops {
            match op {
                Op::Put(k, v) => b.insert(*k, *v),
                Op::Delete(k) => b.remove(*k),
            }
        }
        self.e.db.apply_batch(b)?;
        if self.e.durability == Durability::Fsync {
            self.e.db.flush()?;
        }
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        Ok(self.e.db.get(key)?.map(|v| copy_out(&v)))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let mut got = 0;
        for kv in self.e.db.range(start..).take(n) {
            let (k, v) = kv?;
            copy_out(&k);
            copy_out(&v);
            got += 1;
        }
        Ok(got)
    }
}
