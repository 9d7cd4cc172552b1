//! tidemark: an embedded, transactional storage engine.
//!
//! This crate is the engine core: a copy-on-write B+tree of named tables in
//! one data file, read and written through a bounded buffer pool with
//! `pread`/`pwrite` (no mmap), made durable by checkpoints whose cost
//! follows the dirty data and that block no reader or writer.
//!
//! ```no_run
//! use tidemark::{Database, WriteBatch};
//! let db = Database::builder().cache_size(64 << 20).open("data/app")?;
//! let users = db.table("users")?;
//! users.put(b"alice", b"{\"age\": 31}")?;
//! assert_eq!(users.get(b"alice")?.as_deref(), Some(&b"{\"age\": 31}"[..]));
//! let mut batch = WriteBatch::new();
//! batch.put("users", b"bob", b"{}").delete("users", b"alice");
//! db.write(&batch)?;
//! for kv in users.iter() { let (k, v) = kv?; println!("{k:?} {v:?}"); }
//! db.checkpoint()?;
//! # Ok::<(), tidemark::Error>(())
//! ```
//!
//! Module map (see ARCHITECTURE.md): [`io`] file access; `page` the page
//! header and checksums; `meta` the double-buffered root; `pagemap` page id
//! to block; `alloc` free space; `pager` page I/O and epochs; `cache` the
//! buffer pool and eviction; `btree` the tree; `gate` and `checkpoint`
//! consistent checkpoints; `wal` the write-ahead log and group commit;
//! `stripes` the key locks that order log and tree alike; `versions`
//! snapshots and before-images; `txn` read and write transactions; `db`
//! the public API.

#![warn(missing_docs)]

mod alloc;
mod backup;
mod btree;
mod cache;
mod capped;
mod checkpoint;
mod checksum;
mod db;
mod docs;
mod engine;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gate;
pub mod io;
mod meta;
pub mod os_cache;
mod page;
mod pagemap;
mod pager;
mod statlog;
mod stats;
mod stripes;
mod sync;
mod txn;
mod verify;
mod versions;
mod wal;

pub use backup::{BackupInfo, CompactInfo};
/// The `bson` crate tidemark's documents are made of.
pub use bson;
pub use btree::node::MAX_KEY_SIZE;
pub use capped::{fragmentation_ratio, RECORD_HEADER};
pub use checkpoint::CheckpointInfo;
pub use db::{
    Builder, Database, Range, Table, WriteBatch, DEFAULT_CHECKPOINT_LOG_SIZE,
    DEFAULT_WRITE_BACK_INTERVAL, MAX_TABLE_NAME, MAX_VALUE_SIZE,
};
pub use docs::{
    parse_document, CappedOptions, Collection, Cursor, SnapshotCollection, Tailable,
    ValidateReport, MAX_COLLECTION_NAME, MAX_DOCUMENT_SIZE,
};
pub use engine::DATA_FILE;
pub use error::{Error, Result};
pub use os_cache::OsCache;
pub use page::{max_key_size, valid_page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
pub use statlog::{StatisticsLog, CONTROL_SOCKET, STATS_FILE_PREFIX, STATS_FILE_SUFFIX};
pub use stats::{NamedStats, Stats};
pub use txn::{ReadTxn, TxnRange, WriteTxn};
pub use verify::VerifyReport;
pub use wal::{Durability, DEFAULT_SEGMENT_SIZE, LOG_FILE_PREFIX};
