//! Every crash point of a small workload: the disk stops accepting writes
//! after the N-th write, for every N. Most commits use durability `Write`;
//! the deletes use `Fsync`. After a power loss (only synced bytes and
//! synced directory entries survive) reopening must give the state after
//! the last completed checkpoint or the last acknowledged `Fsync` commit,
//! whichever came later, or a longer prefix of the commit order (up to the
//! commit in flight): longer only when the crash cut short an fsync that
//! covers several log segments, which makes durable, in stream order, a
//! part of what it was syncing. After a process
//! crash (the OS kept every completed write) it must give every
//! acknowledged commit, plus at most the one in flight, replayed from the
//! log. Power losses that keep part of the unsynced writes (a random
//! subset; all of them with the last torn at a 512-byte boundary or at a
//! random byte; all of them in a random order) must give a prefix of the
//! commit order at least that long: no holes, no acknowledged durable
//! commit lost. Every image must pass `verify`, and recovery must be
//! idempotent: a crash during recovery, at every write of it, then a
//! second recovery, gives the same state as the uninterrupted recovery.
//!
//! A second workload leaves a burst's spare log segments behind and then
//! checkpoints until one removes them: a crash at every write from that
//! checkpoint on, through the `Fsync` commits after it, keeps the durable
//! state after a power loss and every acknowledged commit after a process
//! crash.
//!
//! A third compacts a table that deletes left mostly empty: a crash at
//! every write from the compaction on (its checkpoints, the cut of the
//! data file, the `Fsync` commits after it) keeps the durable state after
//! a power loss, whole or in part, and every acknowledged commit after a
//! process crash.
//!
//! A fourth, at 4 KiB pages, stores a value that needs two levels of
//! overflow index, overwrites it and checkpoints: the same rules at every
//! write from that value's commit on.
//!
//! The thread that prepares the next log segment writes concurrently with
//! the workload, so which write the N-th is varies slightly between runs.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{dump, Image, SimFs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a run of the workload saw.
struct Run {
    /// The model after each checkpoint that reported success.
    done: Vec<Model>,
    /// The model after the last acknowledged commit.
    acked: Model,
    /// The model had the commit in flight when the disk stopped succeeded.
    attempt: Option<Model>,
    /// The model after every acknowledged commit, in order (`[0]`: empty).
    states: Vec<Model>,
    /// Index in `states` that survives a power loss: the last completed
    /// checkpoint or acknowledged `Fsync` commit, whichever came later.
    durable: usize,
}

impl Run {
    /// The states a crash may recover to: a prefix of the commit order no
    /// shorter than the durable one.
    fn allowed(&self) -> impl Iterator<Item = &Model> {
        self.states[self.durable..]
            .iter()
            .chain(self.attempt.as_ref())
    }
}

/// A small database on `fs`, without the statistics log (whose thread's
/// writes would interleave with the workload's).
fn on(fs: &SimFs) -> tidemark::Builder {
    common::small_builder()
        .statistics_log(None)
        .file_system(Arc::new(fs.clone()))
}

/// The workload: rounds of batches and single puts/deletes (with splits,
/// overflow values, a table create and drop), each followed by a
/// checkpoint.
fn workload(fs: &SimFs, dir: &std::path::Path) -> Run {
    let mut run = Run {
        done: vec![Model::new()],
        acked: Model::new(),
        attempt: None,
        states: vec![Model::new()],
        durable: 0,
    };
    // No background eviction worker: application threads evict, so the
    // sequence of writes, and thus each crash point, is deterministic.
    // Nor the statistics log's thread, whose writes would interleave.
    let Ok(db) = on(fs).eviction_threads(0).open(dir) else {
        return run;
    };
    // Runs one commit: `change` is what it does to the model.
    let commit = |run: &mut Run,
                  change: &dyn Fn(&mut Model),
                  op: &dyn Fn() -> tidemark::Result<()>|
     -> bool {
        let mut next = run.acked.clone();
        change(&mut next);
        match op() {
            Ok(()) => {
                run.acked = next.clone();
                run.states.push(next);
                true
            }
            Err(_) => {
                run.attempt = Some(next);
                false
            }
        }
    };
    let Ok(t) = db.table("t") else {
        return run;
    };
    for round in 0..3u32 {
        // About 1.4 MB of live data against a 1 MiB cache: dirty pages
        // are evicted to new blocks between checkpoints. Batches of 40
        // puts keep the number of log writes (and so of crash points) low.
        for b in 0..40u32 {
            let items: Vec<(Vec<u8>, Vec<u8>)> = (b * 40..b * 40 + 40)
                .map(|i| {
                    let k = format!("k{:04}", (i * 7 + round * 13) % 1600).into_bytes();
                    let v = if i % 400 == 0 {
                        vec![round as u8; 20_000]
                    } else {
                        vec![i as u8; 900]
                    };
                    (k, v)
                })
                .collect();
            let ok = commit(&mut run, &|m| m.extend(items.iter().cloned()), &|| {
                let mut batch = tidemark::WriteBatch::new();
                for (k, v) in &items {
                    batch.put("t", k, v);
                }
                db.write(&batch)
            });
            if !ok {
                return run;
            }
        }
        for i in 0..20u32 {
            let k = format!("k{:04}", i * 11 + round).into_bytes();
            let ok = commit(
                &mut run,
                &|m| {
                    m.remove(&k);
                },
                &|| t.delete_with(&k, tidemark::Durability::Fsync).map(|_| ()),
            );
            if !ok {
                return run;
            }
            run.durable = run.states.len() - 1;
        }
        if round == 1 && !commit(&mut run, &|_| {}, &|| db.table("scratch")?.put(b"x", b"y")) {
            return run;
        }
        if round == 2
            && !commit(&mut run, &|_| {}, &|| {
                db.table("scratch")?.put(b"z", b"y")?;
                db.drop_table("scratch")
            })
        {
            return run;
        }
        if round == 0 {
            let s = db.stats();
            assert!(
                s.pages_evicted_dirty > 0,
                "workload must evict dirty pages between checkpoints"
            );
            // And evict some again before the cut, over the fresh blocks
            // their first evictions took: crashes land among those writes.
            assert!(
                s.pages_rewritten_in_place > 0,
                "workload must write pages over their own fresh blocks"
            );
        }
        match db.checkpoint() {
            Ok(_) => {
                run.done.push(run.acked.clone());
                run.durable = run.states.len() - 1;
            }
            Err(_) => return run,
        }
    }
    run
}

fn state(fs: &SimFs, dir: &std::path::Path) -> Model {
    let db = on(fs).open(dir).expect("reopen after crash");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "verify after crash: {:?}", report.problems);
    match db.open_table("t") {
        Ok(t) => dump(&t).into_iter().collect(),
        Err(tidemark::Error::TableNotFound(_)) => Model::new(),
        Err(e) => panic!("{e}"),
    }
}

/// Writes a recovery of `fs` performs (open, then close).
fn recovery_writes(fs: &SimFs, dir: &std::path::Path) -> u64 {
    let probe = fs.crash_image(false);
    let before = probe.control.writes.load(Ordering::SeqCst);
    let _ = state(&probe, dir);
    probe.control.writes.load(Ordering::SeqCst) - before
}

/// Runs `workload` on a fresh file system whose disk stops accepting
/// writes after the `n`-th (`u64::MAX`: never); returns the directory,
/// the file system and what the run saw.
fn run_until_write<R>(
    n: u64,
    workload: impl Fn(&SimFs, &std::path::Path) -> R,
) -> (tempfile::TempDir, SimFs, R) {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    fs.control.limit.store(n, Ordering::SeqCst);
    let run = workload(&fs, dir.path());
    (dir, fs, run)
}

/// After a process crash at write `n` (the OS kept every completed
/// write), reopening gives every acknowledged commit, and at most the
/// one in flight besides.
fn assert_process_crash_keeps_acked(
    n: u64,
    fs: &SimFs,
    dir: &std::path::Path,
    acked: &Model,
    attempt: Option<&Model>,
) {
    let got = state(&fs.crash_image(false), dir);
    assert!(
        &got == acked || attempt == Some(&got),
        "process crash at write {n}: {} keys, acknowledged commits give {}",
        got.len(),
        acked.len()
    );
}

/// The images of a crash at write `n`: after a process crash, every
/// acknowledged commit (`acked`) or the one in flight (`attempt`); after a
/// power loss, whole or keeping part of the unsynced writes (a subset,
/// the last torn either way, reordered), a prefix of the commit order
/// (`states`) no shorter than the durable one (`states[durable]`), or the
/// commit in flight. Returns the number of images checked.
fn check_crash_images(
    n: u64,
    fs: &SimFs,
    dir: &std::path::Path,
    states: &[Model],
    durable: usize,
    acked: &Model,
    attempt: Option<&Model>,
) -> u64 {
    assert_process_crash_keeps_acked(n, fs, dir, acked, attempt);
    let mut images = 1;
    for kind in [
        Image::PowerLoss,
        Image::Subset(n),
        Image::TornLast(true, n),
        Image::TornLast(false, n),
        Image::Reordered(n),
    ] {
        let got = state(&fs.crash_image_with(kind), dir);
        assert!(
            states[durable..].contains(&got) || attempt == Some(&got),
            "{kind:?} at write {n}: {} keys, the durable state has {}",
            got.len(),
            states[durable].len()
        );
        images += 1;
    }
    images
}

/// What a run saw, as [`check_crash_images`] takes it: the model after
/// every acknowledged commit, the index of the durable one, the model
/// after the last acknowledged commit, and the model had the commit in
/// flight succeeded.
type Seen<'r> = (&'r [Model], usize, &'r Model, Option<&'r Model>);

/// Runs `workload` with the disk stopping at each write of `writes` and
/// checks the crash images there; returns the number of images checked.
fn crash_every_write<R>(
    writes: std::ops::Range<u64>,
    workload: impl Fn(&SimFs, &std::path::Path) -> R,
    seen: impl Fn(&R) -> Seen<'_>,
) -> u64 {
    let mut images = 0;
    for n in writes {
        let (dir, fs, run) = run_until_write(n, &workload);
        let (states, durable, acked, attempt) = seen(&run);
        images += check_crash_images(n, &fs, dir.path(), states, durable, acked, attempt);
    }
    images
}

#[test]
fn every_write_index_recovers_to_a_completed_checkpoint() {
    // Count the writes of an uninterrupted run.
    let (_dir, fs, run) = run_until_write(u64::MAX, workload);
    assert_eq!(run.done.len(), 4);
    let total = fs.control.writes.load(Ordering::SeqCst);
    assert!(
        total > 50,
        "workload too small to be interesting: {total} writes"
    );
    // Partial images (subsets, torn, reordered) and crashes during
    // recovery are checked at every crash point with TIDEMARK_CRASH_ALL=1,
    // else at every 8th (the whole test then takes about 7 minutes here).
    let every = if std::env::var_os("TIDEMARK_CRASH_ALL").is_some() {
        1
    } else {
        8
    };
    let (mut images, mut recovery_crashes, mut longer) = (0u64, 0u64, 0u64);
    for n in 0..total {
        let (dir, fs, run) = run_until_write(n, workload);
        let durable = &run.states[run.durable];

        // Power loss: the durable state, the commit in flight, or (when a
        // multi-segment fsync was cut short) a prefix of the commits
        // between them.
        let power = state(&fs.crash_image(true), dir.path());
        assert!(
            run.allowed().any(|m| m == &power),
            "power loss at write {n}: {} keys is not a prefix of the commits at least as long as the durable one ({} keys)",
            power.len(),
            durable.len()
        );
        if &power != durable && run.attempt.as_ref() != Some(&power) {
            // Only a partial fsync makes unacknowledged commits durable:
            // the crash hit while the log was being synced.
            longer += 1;
        }

        assert_process_crash_keeps_acked(n, &fs, dir.path(), &run.acked, run.attempt.as_ref());
        images += 2;
        if n % every != 0 {
            continue;
        }
        for kind in [
            Image::Subset(n),
            Image::Subset(n + 1_000_003),
            Image::TornLast(true, n),
            Image::TornLast(false, n),
            Image::Reordered(n),
        ] {
            let img = fs.crash_image_with(kind);
            let got = state(&img, dir.path());
            assert!(
                run.allowed().any(|m| m == &got),
                "{kind:?} at write {n}: {} keys is not a prefix of the commits at least as long as the durable one ({} keys)",
                got.len(),
                durable.len()
            );
            images += 1;
        }
        // Recovery is idempotent: crash it at one of its own writes, then
        // recover again.
        let img = fs.crash_image(true);
        let w = recovery_writes(&img, dir.path());
        if w > 0 {
            let again = img.crash_image(true);
            let at = again.control.writes.load(Ordering::SeqCst) + (n % w);
            again.control.limit.store(at, Ordering::SeqCst);
            let _ = on(&again).open(dir.path());
            for power_loss in [true, false] {
                let got = state(&again.crash_image(power_loss), dir.path());
                assert!(
                    got == power,
                    "crash at write {} of the recovery after write {n} (power loss {power_loss}): {} keys, the uninterrupted recovery gives {}",
                    n % w,
                    got.len(),
                    power.len()
                );
                recovery_crashes += 1;
            }
        }
    }
    eprintln!(
        "crash points: {total} write indices, {images} crash images recovered and checked, {recovery_crashes} crashes during recovery, {longer} power losses during a log fsync that kept a longer prefix"
    );
}

/// What a run of [`spares_workload`] saw.
struct SparesRun {
    /// The model after the last acknowledged commit.
    acked: Model,
    /// The model a power loss must keep: after the last completed
    /// checkpoint or acknowledged `Fsync` commit.
    durable: Model,
    /// The model had the commit in flight when the disk stopped succeeded.
    attempt: Option<Model>,
    /// Writes before the checkpoint that removes the burst's spares.
    trim_start: u64,
    /// Segment files removed when the run ended.
    removed: u64,
}

/// A burst of log (some 20 segments of 64 KiB) kept as spares, 7 idle
/// checkpoints, then the checkpoint that removes the spares, then `Fsync`
/// commits and a last checkpoint. Stops at the first error.
fn spares_workload(fs: &SimFs, dir: &std::path::Path) -> SparesRun {
    let mut run = SparesRun {
        acked: Model::new(),
        durable: Model::new(),
        attempt: None,
        trim_start: u64::MAX,
        removed: 0,
    };
    let Ok(db) = on(fs).open(dir) else {
        return run;
    };
    let Ok(t) = db.table("t") else { return run };
    let key = |i: u32| format!("k{i:05}").into_bytes();
    let put = |run: &mut SparesRun, k: Vec<u8>, v: Vec<u8>, d: tidemark::Durability| {
        let mut next = run.acked.clone();
        next.insert(k.clone(), v.clone());
        if t.put_with(k, v, d).is_err() {
            run.attempt = Some(next);
            return false;
        }
        run.acked = next;
        if d == tidemark::Durability::Fsync {
            run.durable = run.acked.clone();
        }
        true
    };
    let checkpoint = |run: &mut SparesRun| {
        if db.checkpoint().is_err() {
            return false;
        }
        run.durable = run.acked.clone();
        true
    };
    for i in 0..10 {
        if !put(
            &mut run,
            key(i),
            b"light".to_vec(),
            tidemark::Durability::Write,
        ) || !checkpoint(&mut run)
        {
            return run;
        }
    }
    for i in 0..1300 {
        if !put(
            &mut run,
            key(i),
            vec![(i % 251) as u8; 1000],
            tidemark::Durability::Write,
        ) {
            return run;
        }
    }
    for _ in 0..8 {
        if !checkpoint(&mut run) {
            return run;
        }
    }
    run.trim_start = fs.control.writes.load(Ordering::SeqCst);
    if !checkpoint(&mut run) {
        return run;
    }
    run.removed = db.stats().log_segments_removed;
    for i in 0..25 {
        let v = format!("after{i}").into_bytes();
        if !put(&mut run, key(i * 50), v, tidemark::Durability::Fsync) {
            return run;
        }
    }
    checkpoint(&mut run);
    run
}

#[test]
fn every_crash_point_while_a_checkpoint_removes_spare_segments_keeps_every_commit() {
    let (_dir, fs, run) = run_until_write(u64::MAX, spares_workload);
    assert!(run.removed >= 10, "{} spares removed", run.removed);
    let total = fs.control.writes.load(Ordering::SeqCst);
    let mut images = 0;
    for n in run.trim_start..total {
        let (dir, fs, run) = run_until_write(n, spares_workload);
        let power = state(&fs.crash_image(true), dir.path());
        assert!(
            power == run.durable || run.attempt.as_ref() == Some(&power),
            "power loss at write {n}: {} keys, the durable state has {}",
            power.len(),
            run.durable.len()
        );
        assert_process_crash_keeps_acked(n, &fs, dir.path(), &run.acked, run.attempt.as_ref());
        images += 2;
    }
    assert!(images >= 40, "{images} images");
    eprintln!(
        "spares crash points: {} write indices from the trimming checkpoint on, {images} images, {} spares removed",
        total - run.trim_start,
        run.removed
    );
}

/// What a run of [`compact_workload`] saw.
struct CompactRun {
    /// The model after the last acknowledged commit.
    acked: Model,
    /// The model after every acknowledged commit, in order (`[0]`: empty).
    states: Vec<Model>,
    /// Index in `states` that survives a power loss: the last completed
    /// checkpoint or acknowledged `Fsync` commit, whichever came later.
    durable: usize,
    /// The model had the commit in flight when the disk stopped succeeded.
    attempt: Option<Model>,
    /// Writes before the compaction began.
    compact_start: u64,
    /// What the compaction reported, if it completed.
    info: Option<tidemark::CompactInfo>,
}

/// A table of about 1.8 MB, nine keys in ten deleted (leaves merge and
/// unlink, and the survivors' pages lie all over the file), then a
/// compaction, then `Fsync` commits and a checkpoint. Stops at the first
/// error.
fn compact_workload(fs: &SimFs, dir: &std::path::Path) -> CompactRun {
    let mut run = CompactRun {
        acked: Model::new(),
        states: vec![Model::new()],
        durable: 0,
        attempt: None,
        compact_start: u64::MAX,
        info: None,
    };
    // No eviction worker (application threads evict), so the writes come
    // in the same order in every run.
    let Ok(db) = on(fs).eviction_threads(0).open(dir) else {
        return run;
    };
    let Ok(t) = db.table("t") else { return run };
    let key = |i: u32| format!("k{:05}", (i * 7919) % 2000).into_bytes();
    let commit = |run: &mut CompactRun, batch: &tidemark::WriteBatch, next: Model| {
        if db.write(batch).is_err() {
            run.attempt = Some(next);
            return false;
        }
        run.acked = next.clone();
        run.states.push(next);
        true
    };
    for b in 0..40u32 {
        let mut next = run.acked.clone();
        let mut batch = tidemark::WriteBatch::new();
        for i in b * 50..b * 50 + 50 {
            let v = vec![(i % 251) as u8; 900];
            next.insert(key(i), v.clone());
            batch.put("t", key(i), v);
        }
        if !commit(&mut run, &batch, next) {
            return run;
        }
    }
    if db.checkpoint().is_err() {
        return run;
    }
    run.durable = run.states.len() - 1;
    for b in 0..20u32 {
        let mut next = run.acked.clone();
        let mut batch = tidemark::WriteBatch::new();
        for i in (b * 100..b * 100 + 100).filter(|i| i % 10 != 3) {
            next.remove(&key(i));
            batch.delete("t", key(i));
        }
        if !commit(&mut run, &batch, next) {
            return run;
        }
    }
    if db.checkpoint().is_err() {
        return run;
    }
    run.durable = run.states.len() - 1;
    run.compact_start = fs.control.writes.load(Ordering::SeqCst);
    match db.compact() {
        Ok(info) => run.info = Some(info),
        Err(_) => return run,
    }
    for i in 0..10u32 {
        let mut next = run.acked.clone();
        let v = format!("after{i}").into_bytes();
        next.insert(key(i * 3), v.clone());
        if t.put_with(key(i * 3), v, tidemark::Durability::Fsync)
            .is_err()
        {
            run.attempt = Some(next);
            return run;
        }
        run.acked = next.clone();
        run.states.push(next);
        run.durable = run.states.len() - 1;
    }
    if db.checkpoint().is_ok() {
        run.durable = run.states.len() - 1;
    }
    run
}

#[test]
fn every_crash_point_of_a_compaction_keeps_every_commit() {
    let (dir, fs, run) = run_until_write(u64::MAX, compact_workload);
    let info = run.info.expect("the uninterrupted compaction completes");
    assert!(
        info.size_after * 2 < info.size_before,
        "compaction from {} to {} bytes: the workload leaves too little free",
        info.size_before,
        info.size_after
    );
    assert_eq!(state(&fs.crash_image(true), dir.path()), run.acked);
    let total = fs.control.writes.load(Ordering::SeqCst);
    // Unsynced log writes a crash kept can only hold commits before the
    // compaction.
    let images = crash_every_write(run.compact_start..total, compact_workload, |r| {
        (&r.states, r.durable, &r.acked, r.attempt.as_ref())
    });
    assert!(images >= 60, "{images} images");
    eprintln!(
        "compaction crash points: {} write indices from the compaction on, {images} images, data file {} -> {} bytes",
        total - run.compact_start,
        info.size_before,
        info.size_after
    );
}

/// What a run of [`overflow_workload`] saw.
struct OverflowRun {
    /// The model after the last acknowledged commit.
    acked: Model,
    /// The model after every acknowledged commit, in order (`[0]`: empty).
    states: Vec<Model>,
    /// Index in `states` that survives a power loss.
    durable: usize,
    /// The model had the commit in flight when the disk stopped succeeded.
    attempt: Option<Model>,
    /// Writes before the large value's commit.
    start: u64,
    /// Overflow pages `verify` counted with the large value stored, if the
    /// run got that far.
    overflow_pages: Option<u64>,
}

/// Payload bytes of an overflow data page at 4 KiB pages, and the largest
/// value one overflow index page can list at that size.
const PAYLOAD_4K: usize = 4096 - 32;
const ONE_INDEX_4K: usize = (PAYLOAD_4K / 8) * PAYLOAD_4K;

/// At 4 KiB pages: a few small records and a checkpoint, then a value one
/// byte too large for one overflow index page (two index pages under a
/// root index page) committed with `Fsync`, overwritten by a small value
/// (its pages freed), a checkpoint, a delete with `Fsync` and a last
/// checkpoint. Stops at the first error.
fn overflow_workload(fs: &SimFs, dir: &std::path::Path) -> OverflowRun {
    let mut run = OverflowRun {
        acked: Model::new(),
        states: vec![Model::new()],
        durable: 0,
        attempt: None,
        start: u64::MAX,
        overflow_pages: None,
    };
    // No eviction worker, so the writes come in the same order every run.
    let Ok(db) = on(fs).page_size(4096).eviction_threads(0).open(dir) else {
        return run;
    };
    let Ok(t) = db.table("t") else { return run };
    let commit = |run: &mut OverflowRun,
                  change: &dyn Fn(&mut Model),
                  fsync: bool,
                  op: &dyn Fn() -> tidemark::Result<()>|
     -> bool {
        let mut next = run.acked.clone();
        change(&mut next);
        if op().is_err() {
            run.attempt = Some(next);
            return false;
        }
        run.acked = next.clone();
        run.states.push(next);
        if fsync {
            run.durable = run.states.len() - 1;
        }
        true
    };
    let small: Vec<(Vec<u8>, Vec<u8>)> = (0..50u32)
        .map(|i| (format!("k{i:03}").into_bytes(), vec![i as u8; 300]))
        .collect();
    let ok = commit(
        &mut run,
        &|m| m.extend(small.iter().cloned()),
        false,
        &|| {
            let mut batch = tidemark::WriteBatch::new();
            for (k, v) in &small {
                batch.put("t", k, v);
            }
            db.write(&batch)
        },
    );
    if !ok || db.checkpoint().is_err() {
        return run;
    }
    run.durable = run.states.len() - 1;
    run.start = fs.control.writes.load(Ordering::SeqCst);
    let big: Vec<u8> = (0..ONE_INDEX_4K + 1).map(|i| (i * 7 % 251) as u8).collect();
    let ok = commit(
        &mut run,
        &|m| {
            m.insert(b"big".to_vec(), big.clone());
        },
        true,
        &|| t.put_with(b"big", &big, tidemark::Durability::Fsync),
    );
    if !ok {
        return run;
    }
    match db.verify() {
        Ok(report) => run.overflow_pages = Some(report.overflow_pages),
        Err(_) => return run,
    }
    let ok = commit(
        &mut run,
        &|m| {
            m.insert(b"big".to_vec(), b"small now".to_vec());
        },
        false,
        &|| t.put(b"big", b"small now"),
    );
    if !ok || db.checkpoint().is_err() {
        return run;
    }
    run.durable = run.states.len() - 1;
    let ok = commit(
        &mut run,
        &|m| {
            m.remove(b"k007".as_slice());
        },
        true,
        &|| {
            t.delete_with(b"k007", tidemark::Durability::Fsync)
                .map(|_| ())
        },
    );
    if ok && db.checkpoint().is_ok() {
        run.durable = run.states.len() - 1;
    }
    run
}

/// The two-level overflow index of 4 KiB pages under a crash at every
/// write from the large value's commit on: its data pages, index pages and
/// root, its log record over many segments, the overwrite that frees them
/// and the checkpoints after. A process crash keeps every acknowledged
/// commit; a power loss, whole or in part, the durable state or a longer
/// prefix of the commits.
#[test]
fn every_crash_point_of_a_two_level_overflow_value_keeps_every_commit() {
    let (dir, fs, run) = run_until_write(u64::MAX, overflow_workload);
    let data_pages = (ONE_INDEX_4K + 1).div_ceil(PAYLOAD_4K) as u64;
    let pages = run
        .overflow_pages
        .expect("the uninterrupted run stores the value");
    assert_eq!(
        pages,
        data_pages + 3,
        "data pages, two index pages and their root"
    );
    assert_eq!(state(&fs.crash_image(true), dir.path()), run.acked);
    let total = fs.control.writes.load(Ordering::SeqCst);
    let images = crash_every_write(run.start..total, overflow_workload, |r| {
        (&r.states, r.durable, &r.acked, r.attempt.as_ref())
    });
    assert!(
        total - run.start > data_pages,
        "{} writes",
        total - run.start
    );
    eprintln!(
        "two-level overflow crash points: {} write indices from the large value on, {images} images",
        total - run.start
    );
}
