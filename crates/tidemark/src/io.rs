//! File I/O: the only place tidemark touches the operating system's files.
//!
//! Every data access is an explicit positioned read or write (`pread` /
//! `pwrite` through [`std::os::unix::fs::FileExt`]); nothing is memory
//! mapped, so flushing never unmaps a page a reader needs (seed 004).
//!
//! The [`FileSystem`] trait lets tests swap in a file layer that fails or
//! forgets writes; [`OsFileSystem`] is the real one.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// One open file, addressed by byte offset.
// A file length is an I/O query, not a container size; an `is_empty` would
// add nothing.
#[allow(clippy::len_without_is_empty)]
pub trait FileIo: Send + Sync + 'static {
    /// Fills `buf` from `offset`; reading past the end is an
    /// [`io::ErrorKind::UnexpectedEof`] error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, extending the file if needed.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// Opens files; the database asks it for its data file.
pub trait FileSystem: Send + Sync + 'static {
    /// Opens `path` for reading and writing, creating it when `create`.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FileIo>>;
}

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

impl FileSystem for OsFileSystem {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn FileIo>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(Arc::new(OsFile { file }))
    }
}

struct OsFile {
    file: File,
}

impl FileIo for OsFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(&self.file, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}
