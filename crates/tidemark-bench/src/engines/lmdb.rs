//! LMDB through heed: one environment and one database, memory-mapped (so
//! its "cache" is the OS page cache: LMDB has no budget of its own, which
//! is the point of seed 004's comparison). One writer at a time, as LMDB
//! allows; readers take read transactions without thread-local slots.
//! Durability: the default (`fsync` of the data file at every commit) for
//! Fsync; `NO_SYNC` for Write and None (commits write the map through the
//! OS, which survives a crash of the process).

use std::ops::Bound;
use std::path::Path;

use heed::types::Bytes;
use heed::{Database, EnvFlags, EnvOpenOptions, WithoutTls};

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

pub struct Lmdb {
    env: heed::Env<WithoutTls>,
    db: Database<Bytes, Bytes>,
    durability: Durability,
}

impl Lmdb {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        // The map is address space, not memory: 64 GiB is room to grow.
        opts.map_size(64 << 30).max_dbs(1).max_readers(256);
        if cfg.durability != Durability::Fsync {
            // SAFETY: NO_SYNC only drops the fsync at commit (durability
            // against power loss), which is what this durability level asks
            // for; it does not make the environment unsound to use.
            unsafe {
                opts.flags(EnvFlags::NO_SYNC);
            }
        }
        // SAFETY: heed requires that the same environment is not opened
        // twice in one process and that the file is not modified by others;
        // `dir` is a fresh directory owned by this run.
        let env = unsafe { opts.open(dir)? };
        let mut wtxn = env.write_txn()?;
        let db: Database<Bytes, Bytes> = env.create_database(&mut wtxn, Some("bench"))?;
        wtxn.commit()?;
        Ok(Lmdb {
            env,
            db,
            durability: cfg.durability,
        })
    }
}

impl Engine for Lmdb {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(LmdbWorker { e: self }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        self.env.force_sync()?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        match self.durability {
            Durability::Fsync => "sync at every commit (default)".into(),
            _ => "NO_SYNC".into(),
        }
    }
}

struct LmdbWorker<'a> {
    e: &'a Lmdb,
}

impl Worker for LmdbWorker<'_> {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let mut w = self.e.env.write_txn()?;
        for op in ops {
            match op {
                Op::Put(k, v) => self.e.db.put(&mut w, k, v)?,
                Op::Delete(k) => {
                    self.e.db.delete(&mut w, k)?;
                }
            }
        }
        w.commit()?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        let r = self.e.env.read_txn()?;
        // Copied out, as every other engine's read is.
        Ok(self.e.db.get(&r, key)?.map(copy_out))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let r = self.e.env.read_txn()?;
        let mut got = 0;
        let bounds = (Bound::Included(start), Bound::Unbounded);
        for kv in self.e.db.range(&r, &bounds)?.take(n) {
            let (k, v) = kv?;
            copy_out(k);
            copy_out(v);
            got += 1;
        }
        Ok(got)
    }
}
