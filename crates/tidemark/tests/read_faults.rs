//! `EIO` on read, at every read position of a small workload: opening
//! (recovery reads the meta pages, the page map and the log), point reads
//! and a scan over a table larger than the cache (pages are evicted and
//! read back), writes that load pages, and a checkpoint. Each read fails
//! once, one run per position. The failing operation must return
//! `Error::Io` (never `Corruption`: the bytes were not read, not wrong; and
//! never a panic or a wrong value); a failure while applying a logged
//! write stops writes (`WritesStopped`), as any failed I/O in a commit
//! does. Reopened without the fault, the database holds exactly the
//! acknowledged writes (plus the one in flight, which its log record may
//! carry) and passes `verify`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{Fault, SimFs};
use tidemark::{Database, Error};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Opens the database (creating it at the default page size).
fn open(fs: &SimFs, dir: &Path) -> tidemark::Result<Database> {
    open_sized(fs, dir, tidemark::DEFAULT_PAGE_SIZE)
}

/// Opens the database; `page_size` applies if this creates it.
fn open_sized(fs: &SimFs, dir: &Path, page_size: usize) -> tidemark::Result<Database> {
    common::small_builder()
        .page_size(page_size)
        .eviction_threads(0)
        .statistics_log(None)
        .file_system(Arc::new(fs.clone()))
        .open(dir)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u8) -> Vec<u8> {
    let len = if i.is_multiple_of(50) {
        30_000
    } else {
        200 + (i as usize * 37) % 1500
    };
    vec![round.wrapping_add(i as u8); len]
}

/// An error a failed read may surface as.
fn is_read_error(e: &Error) -> bool {
    match e {
        Error::Io(io) => io.raw_os_error() == Some(5),
        Error::WritesStopped(_) => true,
        _ => false,
    }
}

/// A checkpointed table of 1,500 keys (about 1.3 MB against a 1.1 MiB
/// cache), then 60 commits only in the log (replayed on open).
fn base(dir: &Path, page_size: usize) -> (SimFs, Model) {
    let fs = SimFs::new();
    let db = open_sized(&fs, dir, page_size).unwrap();
    let t = db.table("t").unwrap();
    let mut model = Model::new();
    for i in 0..1500 {
        t.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    db.checkpoint().unwrap();
    for i in (0..1500).step_by(25) {
        t.put(key(i), value(i, 1)).unwrap();
        model.insert(key(i), value(i, 1));
    }
    // A process crash: the last 60 commits are only in the log.
    drop(t);
    std::mem::forget(db);
    (fs.crash_image(false), model)
}

/// What a run under one read fault saw.
struct Seen {
    /// The model after every acknowledged write.
    acked: Model,
    /// The model had the write that failed succeeded.
    attempt: Option<Model>,
    /// Operations that failed with a read error.
    failed: u64,
}

/// Open, point reads, a full scan, 30 writes, a checkpoint.
fn phase(fs: &SimFs, dir: &Path, model: &Model) -> Seen {
    let mut seen = Seen {
        acked: model.clone(),
        attempt: None,
        failed: 0,
    };
    let check = |seen: &mut Seen, r: &Error, what: &str| {
        assert!(is_read_error(r), "{what}: {r:?} is not a read error");
        seen.failed += 1;
    };
    let db = match open(fs, dir) {
        Ok(db) => db,
        Err(e) => {
            check(&mut seen, &e, "open");
            return seen;
        }
    };
    let t = match db.open_table("t") {
        Ok(t) => t,
        Err(e) => {
            check(&mut seen, &e, "open_table");
            return seen;
        }
    };
    for i in (0..1500).step_by(7) {
        match t.get(key(i)) {
            Ok(v) => assert_eq!(v.as_ref(), model.get(&key(i)), "get {i}"),
            Err(e) => check(&mut seen, &e, "get"),
        }
    }
    let mut scanned = 0;
    for item in t.iter() {
        match item {
            Ok((k, v)) => {
                assert_eq!(Some(&v), model.get(&k), "scan");
                scanned += 1;
            }
            Err(e) => {
                check(&mut seen, &e, "scan");
                break;
            }
        }
    }
    assert!(
        scanned == model.len() || seen.failed > 0,
        "scan ended early"
    );
    for i in (3..1500).step_by(50) {
        let mut next = seen.acked.clone();
        next.insert(key(i), value(i, 2));
        match t.put(key(i), value(i, 2)) {
            Ok(()) => seen.acked = next,
            Err(e) => {
                check(&mut seen, &e, "put");
                seen.attempt.get_or_insert(next);
            }
        }
    }
    if let Err(e) = db.checkpoint() {
        check(&mut seen, &e, "checkpoint");
    }
    seen
}

#[test]
fn every_read_fault_is_an_io_error_and_loses_nothing() {
    every_read_fault_at(tidemark::DEFAULT_PAGE_SIZE);
}

/// The same on a database of 4 KiB pages: four times the pages to read.
#[test]
fn every_read_fault_at_4_kib_pages_is_an_io_error_and_loses_nothing() {
    every_read_fault_at(4096);
}

fn every_read_fault_at(ps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (image, model) = base(dir.path(), ps);
    // Count the reads of an undisturbed run.
    let clean = image.crash_image(false);
    let seen = phase(&clean, dir.path(), &model);
    assert_eq!(seen.failed, 0);
    let reads = clean.control.reads.load(Ordering::SeqCst);
    assert!(reads > 100, "too few reads to be interesting: {reads}");

    let (mut noticed, mut stopped) = (0u64, 0u64);
    for n in 0..reads {
        let fs = image.crash_image(false);
        *fs.control.fault.lock() = Some(Fault::FailRead(n));
        let seen = phase(&fs, dir.path(), &model);
        noticed += u64::from(seen.failed > 0);
        stopped += u64::from(seen.attempt.is_some());
        // The run's handle is gone (its threads stopped, its lock
        // released); reopen as after a process crash, without the fault.
        *fs.control.fault.lock() = None;
        let after = fs.crash_image(false);
        let db = open(&after, dir.path()).expect("reopen after a read fault");
        assert_eq!(db.page_size(), ps);
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "read {n}: {:?}", report.problems);
        let got: Model = common::dump(&db.open_table("t").unwrap())
            .into_iter()
            .collect();
        assert!(
            got == seen.acked || seen.attempt.as_ref() == Some(&got),
            "read {n}: {} keys after reopen, acknowledged writes give {}",
            got.len(),
            seen.acked.len()
        );
    }
    eprintln!(
        "read faults, pages of {ps}: {reads} read positions, each failed once; {noticed} runs saw the error, {stopped} of them in a write (writes stopped); all reopened with every acknowledged write"
    );
}
