//! SQLite (rusqlite, bundled) in WAL mode, one connection per thread as its
//! documentation recommends for concurrent use, writes in `BEGIN IMMEDIATE`
//! transactions with a busy timeout (SQLite has one writer at a time).
//! Durability: `synchronous=OFF` for None, `NORMAL` for Write (in WAL mode a
//! commit is written to the WAL file, not synced: it survives a crash of
//! the process), `FULL` for Fsync. Memory: `cache_size` of each connection
//! is the budget divided by the threads of the run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{Config, Durability, Engine, Op, Worker};
use crate::BoxResult;

pub struct Sqlite {
    path: PathBuf,
    cfg: Config,
}

impl Sqlite {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let path = dir.join("bench.sqlite");
        let c = Connection::open(&path)?;
        c.pragma_update(None, "journal_mode", "WAL")?;
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID",
        )?;
        Ok(Sqlite {
            path,
            cfg: cfg.clone(),
        })
    }
    fn sync(&self) -> &'static str {
        match self.cfg.durability {
            Durability::None => "OFF",
            Durability::Write => "NORMAL",
            Durability::Fsync => "FULL",
        }
    }
}

impl Engine for Sqlite {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        let c = Connection::open(&self.path)?;
        c.pragma_update(None, "synchronous", self.sync())?;
        c.pragma_update(
            None,
            "cache_size",
            -((self.cfg.cache_bytes / self.cfg.threads.max(1) / 1024) as i64),
        )?;
        c.busy_timeout(Duration::from_secs(60))?;
        Ok(Box::new(SqliteWorker { c }))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        let c = Connection::open(&self.path)?;
        c.busy_timeout(Duration::from_secs(60))?;
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
    fn durability_note(&self) -> String {
        format!("WAL mode, synchronous={}", self.sync())
    }
}

struct SqliteWorker {
    c: Connection,
}

impl Worker for SqliteWorker {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        let tx = self
            .c
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut put = tx.prepare_cached("INSERT OR REPLACE INTO kv (k, v) VALUES (?1, ?2)")?;
            let mut del = tx.prepare_cached("DELETE FROM kv WHERE k = ?1")?;
            for op in ops {
                match op {
                    Op::Put(k, v) => put.execute(params![k, v])?,
                    Op::Delete(k) => del.execute(params![k])?,
                };
            }
        }
        tx.commit()?;
        Ok(())
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        let mut s = self.c.prepare_cached("SELECT v FROM kv WHERE k = ?1")?;
        let v: Option<Vec<u8>> = s.query_row(params![key], |r| r.get(0)).optional()?;
        Ok(v.map(|v| std::hint::black_box(v).len()))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let mut s = self
            .c
            .prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2")?;
        let mut rows = s.query(params![start, n as i64])?;
        let mut got = 0;
        while let Some(r) = rows.next()? {
            // black_box: the copies are kept, as in every engine's scan.
            std::hint::black_box(r.get::<_, Vec<u8>>(0)?);
            std::hint::black_box(r.get::<_, Vec<u8>>(1)?);
            got += 1;
        }
        Ok(got)
    }
}
