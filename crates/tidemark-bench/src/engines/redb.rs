//! redb: one table, one write transaction per commit (redb serializes
//! writers). redb has no level between "not persisted until a later
//! durable commit" (`Durability::None`) and fsync (`Immediate`): Fsync and
//! Write both run `Immediate` (stronger than Write asks), None runs `None`.
//! Memory: `set_cache_size` = the budget.

use std::path::Path;

use redb::{Database, ReadableDatabase, TableDefinition};

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

pub struct Redb {
    db: Database,
    durability: Durability,
}

impl Redb {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let db = Database::builder()
            .set_cache_size(cfg.cache_bytes)
            .create(dir.join("bench.redb"))?;
        let w = db.begin_write()?;
        w.open_table(TABLE)?;
        w.commit()?;
        Ok(Redb {
            db,
            durability: cfg.durability,
        })
    }
    fn level(&self) -> redb::Durability {
        match self.durability {
            Durability::None => redb::Durability::None,
            Durability::Write | Durability::Fsync => redb::Durability::Immediate,
        }
    }
}

impl Engine for Redb {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(RedbWorker { e: self }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        let mut w = self.db.begin_write()?;
        w.set_durability(redb::Durability::Immediate)?;
        w.commit()?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        match self.durability {
            Durability::Write => "Immediate (fsync: no write-only level)".into(),
            _ => format!("{:?}", self.level()),
        }
    }
}

struct RedbWorker<'a> {
    e: &'a Redb,
}

impl Worker for RedbWorker<'_> {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut w = self.e.db.begin_write()?;
        w.set_durability(self.e.level())?;
        {
            let mut t = w.open_table(TABLE)?;
            for op in ops {
                match op {
                    Op::Put(k, v) => {
                        t.insert(*k, *v)?;
                    }
                    Op::Delete(k) => {
                        t.remove(*k)?;
                    }
                }
            }
        }
        w.commit()?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        let r = self.e.db.begin_read()?;
        let t = r.open_table(TABLE)?;
        Ok(t.get(key)?.map(|v| copy_out(v.value())))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let r = self.e.db.begin_read()?;
        let t = r.open_table(TABLE)?;
        let mut got = 0;
        for kv in t.range(start..)?.take(n) {
            let (k, v) = kv?;
            copy_out(k.value());
            copy_out(v.value());
            got += 1;
        }
        Ok(got)
    }
}
