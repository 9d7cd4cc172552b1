//! WiredTiger 11.3.1 (the engine of seeds 001 and 003) through a small C
//! shim (`wt_shim.c`) over its C API, linked statically from the library
//! that `scripts/build-wiredtiger.sh` builds from the PyPI source package.
//!
//! Configuration: `cache_size` = the budget (WiredTiger counts everything
//! it caches against it), logging on, a checkpoint every 60 s (as MongoDB
//! runs it, and as tidemark's default), otherwise the library's defaults.
//! Durability: `transaction_sync=(enabled=true,method=fsync)` for Fsync;
//! `method=none` (the log is written to the file system at commit, not
//! flushed) for Write; `enabled=false` (log records buffered in memory) for
//! None. Each thread has its own session and cursor, as WiredTiger requires;
//! single puts are auto-commit operations, batches explicit transactions;
//! a write conflict (`WT_ROLLBACK`) is retried, as the documentation says
//! an application must.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use super::{copy_out, Config, Durability, Engine, Op, Worker};
use crate::{msg, BoxResult};

#[repr(C)]
struct Conn {
    _opaque: [u8; 0],
}
#[repr(C)]
struct Session {
    _opaque: [u8; 0],
}
#[repr(C)]
struct Cursor {
    _opaque: [u8; 0],
}

extern "C" {
    fn tmwt_notfound() -> c_int;
    fn tmwt_rollback() -> c_int;
    fn tmwt_strerror(err: c_int) -> *const c_char;
    fn tmwt_open(home: *const c_char, config: *const c_char, conn: *mut *mut Conn) -> c_int;
    fn tmwt_close(conn: *mut Conn) -> c_int;
    fn tmwt_session(
        conn: *mut Conn,
        uri: *const c_char,
        s: *mut *mut Session,
        c: *mut *mut Cursor,
    ) -> c_int;
    fn tmwt_session_close(s: *mut Session) -> c_int;
    fn tmwt_begin(s: *mut Session) -> c_int;
    fn tmwt_commit(s: *mut Session) -> c_int;
    fn tmwt_abort(s: *mut Session) -> c_int;
    fn tmwt_checkpoint(s: *mut Session) -> c_int;
    fn tmwt_put(c: *mut Cursor, k: *const c_void, kl: usize, v: *const c_void, vl: usize) -> c_int;
    fn tmwt_remove(c: *mut Cursor, k: *const c_void, kl: usize) -> c_int;
    fn tmwt_get(
        c: *mut Cursor,
        k: *const c_void,
        kl: usize,
        visit: Visit,
        ctx: *mut c_void,
    ) -> c_int;
    fn tmwt_scan(
        c: *mut Cursor,
        k: *const c_void,
        kl: usize,
        n: usize,
        visit: Visit,
        ctx: *mut c_void,
        got: *mut usize,
    ) -> c_int;
}

/// What the shim calls with each pair it reads.
type Visit = extern "C" fn(*mut c_void, *const c_void, usize, *const c_void, usize);

/// Copies a pair out, as every engine's read does (see `copy_out`), and
/// stores the value's length in the `usize` behind `ctx`.
extern "C" fn copy_pair(
    ctx: *mut c_void,
    k: *const c_void,
    kl: usize,
    v: *const c_void,
    vl: usize,
) {
    // SAFETY: the shim passes WiredTiger's item buffers, valid for kl and
    // vl bytes until its next cursor call (k is null only when kl is 0),
    // and ctx is the `&mut usize` the caller gave it for this call.
    unsafe {
        if kl > 0 {
            copy_out(std::slice::from_raw_parts(k.cast::<u8>(), kl));
        }
        if vl > 0 {
            copy_out(std::slice::from_raw_parts(v.cast::<u8>(), vl));
        }
        *ctx.cast::<usize>() = vl;
    }
}

const URI: &CStr = c"table:bench";

fn check(ret: c_int, what: &str) -> BoxResult<()> {
    if ret == 0 {
        return Ok(());
    }
    // SAFETY: wiredtiger_strerror returns a pointer to a static,
    // NUL-terminated message for any error code.
    let text = unsafe { CStr::from_ptr(tmwt_strerror(ret)) };
    Err(msg(&format!(
        "wiredtiger {what}: {} ({ret})",
        text.to_string_lossy()
    )))
}

fn rollback_code() -> c_int {
    // SAFETY: returns a constant.
    unsafe { tmwt_rollback() }
}

pub struct WiredTiger {
    conn: *mut Conn,
    durability: Durability,
}

// SAFETY: a WT_CONNECTION is documented as thread-safe: its methods
// (open_session, close) may be called from any thread concurrently.
// Sessions and cursors are per thread (each Worker owns its own and is not
// Send).
unsafe impl Send for WiredTiger {}
// SAFETY: as above.
unsafe impl Sync for WiredTiger {}

impl WiredTiger {
    pub fn open(dir: &Path, cfg: &Config) -> BoxResult<Self> {
        let sync = match cfg.durability {
            Durability::None => "transaction_sync=(enabled=false)",
            Durability::Write => "transaction_sync=(enabled=true,method=none)",
            Durability::Fsync => "transaction_sync=(enabled=true,method=fsync)",
        };
        let config = format!(
            "create,cache_size={}B,log=(enabled=true),checkpoint=(wait=60),session_max={},{sync}",
            cfg.cache_bytes,
            cfg.threads + 16
        );
        let home = CString::new(dir.to_str().ok_or_else(|| msg("path is not UTF-8"))?)?;
        let config = CString::new(config)?;
        let mut conn = std::ptr::null_mut();
        // SAFETY: home and config are NUL-terminated strings that outlive
        // the call; conn is a valid out-pointer.
        check(
            unsafe { tmwt_open(home.as_ptr(), config.as_ptr(), &mut conn) },
            "open",
        )?;
        let e = WiredTiger {
            conn,
            durability: cfg.durability,
        };
        // Creates the table.
        drop(e.session()?);
        Ok(e)
    }

    fn session(&self) -> BoxResult<WtWorker<'_>> {
        let (mut s, mut c) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: conn is open until Drop; URI is NUL-terminated; s and c
        // are valid out-pointers.
        check(
            unsafe { tmwt_session(self.conn, URI.as_ptr(), &mut s, &mut c) },
            "open_session",
        )?;
        Ok(WtWorker { _e: self, s, c })
    }
}

impl Drop for WiredTiger {
    fn drop(&mut self) {
        // SAFETY: every session borrows `self`, so all are closed by now;
        // conn is open and closed exactly once here.
        let _ = unsafe { tmwt_close(self.conn) };
    }
}

impl Engine for WiredTiger {
    fn worker(&self) -> BoxResult<Box<dyn Worker + '_>> {
        Ok(Box::new(self.session()?))
    }
    fn checkpoint(&self) -> BoxResult<()> {
        let w = self.session()?;
        // SAFETY: w.s is an open session owned by this thread.
        check(unsafe { tmwt_checkpoint(w.s) }, "checkpoint")
    }
    fn durability_note(&self) -> String {
        match self.durability {
            Durability::None => "log on, transaction_sync disabled".into(),
            Durability::Write => "log on, transaction_sync method=none".into(),
            Durability::Fsync => "log on, transaction_sync method=fsync".into(),
        }
    }
}

/// One session and its cursor; neither may be shared between threads, so
/// this type is not Send (it holds raw pointers).
struct WtWorker<'a> {
    _e: &'a WiredTiger,
    s: *mut Session,
    c: *mut Cursor,
}

impl Drop for WtWorker<'_> {
    fn drop(&mut self) {
        // SAFETY: the session is open; closing it closes its cursor.
        let _ = unsafe { tmwt_session_close(self.s) };
    }
}

impl WtWorker<'_> {
    fn apply(&mut self, ops: &[Op<'_>]) -> c_int {
        for op in ops {
            // SAFETY: the cursor is open and owned by this thread; key and
            // value slices are valid for the call (WiredTiger copies them).
            let ret = unsafe {
                match op {
                    Op::Put(k, v) => tmwt_put(
                        self.c,
                        k.as_ptr().cast(),
                        k.len(),
                        v.as_ptr().cast(),
                        v.len(),
                    ),
                    Op::Delete(k) => tmwt_remove(self.c, k.as_ptr().cast(), k.len()),
                }
            };
            if ret != 0 {
                return ret;
            }
        }
        0
    }
}

impl Worker for WtWorker<'_> {
    fn write(&mut self, ops: &[Op<'_>]) -> BoxResult<()> {
        loop {
            let ret = if ops.len() == 1 {
                // An auto-commit operation: its own transaction.
                self.apply(ops)
            } else {
                // SAFETY: the session is open and owned by this thread.
                check(unsafe { tmwt_begin(self.s) }, "begin_transaction")?;
                let r = self.apply(ops);
                // SAFETY: as above; a transaction is active.
                unsafe {
                    if r == 0 {
                        tmwt_commit(self.s)
                    } else {
                        tmwt_abort(self.s);
                        r
                    }
                }
            };
            if ret == rollback_code() {
                continue; // a write conflict: retry, as WiredTiger asks
            }
            return check(ret, "write");
        }
    }
    fn get(&mut self, key: &[u8]) -> BoxResult<Option<usize>> {
        let mut len = 0usize;
        // SAFETY: cursor open and owned; key valid for the call; the shim
        // calls copy_pair at most once, with `len` as its context.
        let ret = unsafe {
            tmwt_get(
                self.c,
                key.as_ptr().cast(),
                key.len(),
                copy_pair,
                (&mut len as *mut usize).cast(),
            )
        };
        // SAFETY: returns a constant.
        if ret == unsafe { tmwt_notfound() } {
            return Ok(None);
        }
        check(ret, "search")?;
        Ok(Some(len))
    }
    fn scan(&mut self, start: &[u8], n: usize) -> BoxResult<usize> {
        let (mut got, mut last_len) = (0usize, 0usize);
        // SAFETY: as in get.
        let ret = unsafe {
            tmwt_scan(
                self.c,
                start.as_ptr().cast(),
                start.len(),
                n,
                copy_pair,
                (&mut last_len as *mut usize).cast(),
                &mut got,
            )
        };
        check(ret, "scan")?;
        Ok(got)
    }
}
