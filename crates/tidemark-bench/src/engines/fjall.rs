//! fjall (an LSM-tree in Rust): one keyspace. A plain insert writes its
//! journal entry to the OS (`PersistMode::Buffer`: survives a crash of the
//! process) and is Write; Fsync commits a batch with
//! `PersistMode::SyncData`; None uses manual journal persistence. Memory,
//! as RocksDB's: the block cache (`cache_size`) = the budget, the keyspace's
//! memtable (`max_memtable_size`, 64 MiB by default) a quarter of it. The
//! database-wide write-buffer limit stays at its default (off; its setter is
//! deprecated in 3.x).

use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

pub struct Fjall {
    db: Database,
    ks: Keyspace,
    durability: Durability,
}

impl Fjall {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let db = Database::builder(dir)
            .cache_size(cfg.cache_bytes as u64)
            .manual_journal_persist(cfg.durability == Durability::None)
            .open()?;
        let memtable = (cfg.cache_bytes / 4) as u64;
        let ks = db.keyspace("bench", || {
            KeyspaceCreateOptions::default().max_memtable_size(memtable)
        })?;
        Ok(Fjall {
            db,
            ks,
            durability: cfg.durability,
        })
    }
    fn mode(&self) -> Option<PersistMode> {
        match self.durability {
            Durability::None => None,
            Durability::Write => Some(PersistMode::Buffer),
            Durability::Fsync => Some(PersistMode::SyncData),
        }
    }
}

impl Engine for Fjall {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(FjallWorker { e: self }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        self.db.persist(PersistMode::SyncAll)?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        format!("PersistMode {:?} per commit", self.mode())
    }
}

struct FjallWorker<'a> {
    e: &'a Fjall,
}

impl Worker for FjallWorker<'_> {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut b = self.e.db.batch().durability(self.e.mode());
        for op in ops {
            match op {
                Op::Put(k, v) => b.insert(&self.e.ks, *k, *v),
                Op::Delete(k) => b.remove(&self.e.ks, *k),
            }
        }
        b.commit()?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        Ok(self.e.ks.get(key)?.map(|v| copy_out(&v)))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let mut got = 0;
        for g in self.e.ks.range(start..).take(n) {
            let (k, v) = g.into_inner()?;
            copy_out(&k);
            copy_out(&v);
            got += 1;
        }
        Ok(got)
    }
}
