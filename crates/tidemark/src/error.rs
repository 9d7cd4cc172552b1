//! The error type every fallible tidemark call returns.

use std::io;

/// Result alias used throughout tidemark.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in a tidemark call.
///
/// Bad bytes on disk are always [`Error::Corruption`], raised where the bytes
/// are decoded; tidemark never panics on what it reads from a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// A page (or the meta page) failed its checksum or a structural check.
    #[error("corruption in page {page}: {reason}")]
    Corruption {
        /// Logical page id (or block number for meta and map pages).
        page: u64,
        /// What check failed.
        reason: String,
    },
    /// The file exists but is not a tidemark database, or is truncated.
    #[error("not a tidemark database: {0}")]
    NotADatabase(String),
    /// An empty key, or one longer than the database takes: a quarter of
    /// its page, at most [`crate::MAX_KEY_SIZE`]
    /// ([`crate::Database::max_key_size`]).
    #[error("key of {len} bytes is outside the allowed 1..={max} bytes")]
    KeySize {
        /// Length of the rejected key.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A value longer than [`crate::MAX_VALUE_SIZE`].
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Length of the rejected value.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `open_table` or a batch named a table that does not exist.
    #[error("table {0:?} does not exist")]
    TableNotFound(String),
    /// `create_table` named a table that already exists.
    #[error("table {0:?} already exists")]
    TableExists(String),
    /// The table handle refers to a table that has since been dropped.
    #[error("table {0:?} was dropped")]
    TableDropped(String),
    /// A table name that is empty or longer than [`crate::MAX_TABLE_NAME`].
    #[error("invalid table name {0:?}")]
    InvalidTableName(String),
    /// An option passed to the builder is out of range.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The page-id space is exhausted (see `pagemap::MAX_PIDS`).
    #[error("database full: {0}")]
    Full(String),
    /// The disk is full: this write was refused before anything of it was
    /// logged or applied, so nothing changed and the database still
    /// accepts writes. Retry once space is free (a checkpoint also frees
    /// log segments). Space for the cache's dirty pages and for the log is
    /// reserved ahead of each commit, so a full disk is met here rather
    /// than half-way through a commit.
    #[error("disk full: {0}; nothing was written, retry when space is free")]
    DiskFull(String),
    /// A previous write to the data file failed; the database refuses further
    /// writes until it is reopened, because the in-memory state may no longer
    /// match what a checkpoint would write. Reads keep working.
    #[error("database stopped accepting writes after an earlier failure: {0}")]
    WritesStopped(String),
    /// A write transaction lost a write-write conflict: a transaction that
    /// committed after it began wrote one of its keys (first committer
    /// wins). Nothing of it was applied; retry it from the start.
    #[error("write conflict: {0}")]
    Conflict(String),
    /// The snapshot was held so long that keeping the versions it needs
    /// would exceed the version budget, so they were reclaimed. Begin a new
    /// snapshot.
    #[error("snapshot too old: its versions were reclaimed to stay within the cache")]
    SnapshotTooOld,
    /// The database directory is open in another handle or process (its
    /// `LOCK` file is locked); close that one first.
    #[error("database {0} is already open in another handle or process")]
    Locked(String),
    /// The database was closed; this handle can no longer be used.
    #[error("the database was closed")]
    Closed,
    /// Bytes that are not a valid BSON document.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// A document larger than the 16 MiB BSON limit.
    #[error("document of {len} bytes exceeds the limit of {max} bytes")]
    DocumentTooLarge {
        /// Encoded size of the document.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Another document of the collection has this `_id`.
    #[error("duplicate _id {id} in collection {collection:?}")]
    DuplicateKey {
        /// The collection.
        collection: String,
        /// The `_id`, as relaxed Extended JSON.
        id: String,
    },
    /// No collection of this name exists.
    #[error("collection {0:?} does not exist")]
    CollectionNotFound(String),
    /// A collection of this name exists already.
    #[error("collection {0:?} already exists")]
    CollectionExists(String),
    /// A capped record (document and header) larger than the ring.
    #[error("capped record of {len} bytes does not fit in a ring of {size} bytes")]
    CappedRecordTooLarge {
        /// Record bytes, header included.
        len: u64,
        /// Ring size.
        size: u64,
    },
    /// An operation capped collections do not allow (deleting one document,
    /// or a replace that changes a document's size), as in MongoDB.
    #[error("not allowed on capped collection {collection:?}: {what}")]
    CappedOperation {
        /// The collection.
        collection: String,
        /// What was refused.
        what: &'static str,
    },
    /// The operation needs a capped collection.
    #[error("collection {0:?} is not capped")]
    NotCapped(String),
    /// A cursor over a capped collection fell behind: the records it would
    /// read next were overwritten by newer inserts (MongoDB's
    /// `CappedPositionLost`).
    #[error("capped position lost in {collection:?}: record {rid} was overwritten")]
    CappedPositionLost {
        /// The collection.
        collection: String,
        /// The record id the cursor would have read next.
        rid: u64,
    },
}

impl Error {
    /// Whether this is a full disk: [`Error::DiskFull`] (refused, nothing
    /// changed) or an I/O error with `ENOSPC` met by a write already under
    /// way (after which writes stop until reopen, like any failed write).
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::DiskFull(_) => true,
            Error::Io(e) => io_is_disk_full(e),
            _ => false,
        }
    }

    pub(crate) fn corruption(page: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            page,
            reason: reason.into(),
        }
    }
}

/// Whether an I/O error means the disk (or the quota) is full.
pub(crate) fn io_is_disk_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || e.raw_os_error() == Some(libc::ENOSPC)
        || e.raw_os_error() == Some(libc::EDQUOT)
}
