//! The write-ahead log through the public API: what each durability
//! survives, torn tails, damage in the middle, table changes, segment
//! recycling, fsync failure, and group commit under many threads.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{dump, SimFs};
use tidemark::{Database, Durability, Error, WriteBatch};

const SEGMENT: u64 = 64 << 10;

fn open(fs: &SimFs, dir: &Path) -> tidemark::Result<Database> {
    common::small_builder()
        .file_system(Arc::new(fs.clone()))
        .open(dir)
}

fn segment(dir: &Path, pos: u64) -> PathBuf {
    dir.join(format!("wal-{:016x}.log", pos / SEGMENT))
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

#[test]
fn each_durability_survives_what_it_promises() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    for i in 0..50 {
        t.put_with(k(i), b"fsync", Durability::Fsync).unwrap();
    }
    for i in 50..100 {
        t.put_with(k(i), b"write", Durability::Write).unwrap();
    }
    let process = fs.crash_image(false);
    let power = fs.crash_image(true);
    drop(t);
    drop(db);

    // A process crash keeps every Write and Fsync commit.
    let db = open(&process, dir.path()).unwrap();
    assert_eq!(db.replayed_records(), 100);
    let got = dump(&db.open_table("t").unwrap());
    assert_eq!(got.len(), 100);
    assert!(db.verify().unwrap().is_ok());
    drop(db);

    // A power loss keeps the Fsync commits (and may keep a prefix of the
    // rest): here nothing synced the Write ones.
    let db = open(&power, dir.path()).unwrap();
    let got = dump(&db.open_table("t").unwrap());
    assert_eq!(got.len(), 50);
    assert!(got.iter().all(|(_, v)| v == b"fsync"));
}

#[test]
fn none_commits_become_durable_with_the_next_logged_write_or_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    t.put_with(b"a", b"1", Durability::None).unwrap();
    // Not written yet: a process crash now loses it.
    let img = fs.crash_image(false);
    {
        let db2 = open(&img, dir.path()).unwrap();
        assert_eq!(db2.open_table("t").unwrap().get(b"a").unwrap(), None);
    }
    // A later Write commit writes the group holding it, in order.
    t.put_with(b"b", b"2", Durability::Write).unwrap();
    let img = fs.crash_image(false);
    let db2 = open(&img, dir.path()).unwrap();
    let t2 = db2.open_table("t").unwrap();
    assert_eq!(t2.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(t2.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_torn_tail_is_cut_and_never_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    for i in 0..10 {
        t.put(k(i), vec![7u8; 300]).unwrap();
    }
    let last = db.stats().log_position;
    t.put(k(10), vec![8u8; 300]).unwrap();
    t.put(k(11), vec![9u8; 300]).unwrap();
    let img = fs.crash_image(false);
    drop(t);
    drop(db);
    // Tear the record of k(10): its second half never reached the file.
    // The record of k(11) after it is sound but was never synced past it.
    img.with_file(&segment(dir.path(), last), |d| {
        let at = (last % SEGMENT) as usize;
        d[at + 200..at + 340].fill(0);
    });
    let db = open(&img, dir.path()).unwrap();
    assert_eq!(db.replayed_records(), 10, "replay stops at the torn record");
    let t = db.open_table("t").unwrap();
    assert_eq!(dump(&t).len(), 10);
    assert_eq!(t.get(k(11)).unwrap(), None);
    // New commits go where the torn one was; a second crash must show
    // them and not the old k(11), whose header recovery erased.
    t.put(b"after", b"x").unwrap();
    let img2 = img.crash_image(false);
    drop(t);
    drop(db);
    let db = open(&img2, dir.path()).unwrap();
    let t = db.open_table("t").unwrap();
    assert_eq!(t.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(t.get(k(11)).unwrap(), None);
    assert_eq!(t.get(k(10)).unwrap(), None);
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn damage_to_a_synced_record_is_corruption_not_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    let first = db.stats().log_position;
    for i in 0..20 {
        t.put_with(k(i), vec![1u8; 100], Durability::Fsync).unwrap();
    }
    let img = fs.crash_image(true);
    drop(t);
    drop(db);
    img.with_file(&segment(dir.path(), first), |d| {
        d[(first % SEGMENT) as usize + 40] ^= 0x10;
    });
    match open(&img, dir.path()) {
        Err(Error::Corruption { reason, .. }) => assert!(reason.contains("log"), "{reason}"),
        Err(e) => panic!("expected Corruption, got {e}"),
        Ok(_) => panic!("opened a log with a damaged synced record"),
    }
}

#[test]
fn table_create_and_drop_are_replayed_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    db.checkpoint().unwrap();
    db.table("gone").unwrap().put(b"x", b"1").unwrap();
    db.table("kept").unwrap().put(b"y", b"2").unwrap();
    db.drop_table("gone").unwrap();
    db.table("gone").unwrap().put(b"z", b"3").unwrap();
    let mut b = WriteBatch::new();
    b.put("kept", b"y2", b"4").delete("kept", b"y");
    db.write(&b).unwrap();
    let img = fs.crash_image(false);
    drop(db);
    let db = open(&img, dir.path()).unwrap();
    assert_eq!(db.list_tables().unwrap(), vec!["gone", "kept"]);
    assert_eq!(
        dump(&db.open_table("gone").unwrap()),
        vec![(b"z".to_vec(), b"3".to_vec())]
    );
    assert_eq!(
        dump(&db.open_table("kept").unwrap()),
        vec![(b"y2".to_vec(), b"4".to_vec())]
    );
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn checkpoints_recycle_segments_so_the_log_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    let mut max_files = 0;
    for round in 0..12u32 {
        for i in 0..200 {
            t.put(k(i), vec![round as u8; 1000]).unwrap();
        }
        db.checkpoint().unwrap();
        let files = fs.list_prefix(dir.path(), "wal-");
        max_files = max_files.max(files);
    }
    let s = db.stats();
    // About 200 KB of log per round against 64 KiB segments: 3 or 4
    // segments a round. A checkpoint keeps the segments it lets go for
    // reuse, so the log holds one round's worth of spares, the segment
    // being written and the one prepared ahead.
    assert!(s.log_segments_recycled > 30, "{s:?}");
    assert!(max_files <= 7, "{max_files} segment files");
    // Rounds write into recycled segments: of the ~40 the log went
    // through, few were new files (keeping only 2 spares, as before,
    // created one or two every round).
    assert!(s.log_segments_created <= 8, "{s:?}");
    assert_eq!(s.log_recycle_errors, 0);
    drop(t);
    db.close().unwrap();
    let db = open(&fs, dir.path()).unwrap();
    assert_eq!(db.replayed_records(), 0);
    assert_eq!(dump(&db.open_table("t").unwrap()).len(), 200);
}

#[test]
fn spare_segments_left_by_a_burst_go_once_the_database_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    let files = || fs.list_prefix(dir.path(), "wal-");
    // A light load: one small commit between checkpoints, over more than
    // the 8 checkpoints whose use sizes the spares.
    for i in 0..10 {
        t.put(k(i), b"light").unwrap();
        db.checkpoint().unwrap();
    }
    let light = files();
    // A burst: about 5 MB of log (some 80 segments of 64 KiB) before one
    // checkpoint, whose segments are all kept for reuse.
    for i in 0..5000 {
        t.put(k(i), vec![7u8; 1000]).unwrap();
    }
    db.checkpoint().unwrap();
    let after_burst = files();
    assert!(
        after_burst >= 70,
        "{after_burst} segment files after the burst"
    );
    // Quiet again: the burst's spares stay while its checkpoint is among
    // the last 8, then go, idle checkpoints included.
    for round in 0..7 {
        db.checkpoint().unwrap();
        assert_eq!(files(), after_burst, "checkpoint {round} after the burst");
    }
    db.checkpoint().unwrap();
    let s = db.stats();
    let quiet = files();
    assert!(quiet <= light.max(8), "{quiet} segment files; {s:?}");
    assert!(
        s.log_segments_removed as usize >= after_burst - quiet,
        "{s:?}"
    );
    assert_eq!(s.log_recycle_errors, 0);
    // The log goes on writing past the segments removed, and everything
    // is there after a crash.
    for i in 0..300 {
        t.put(k(i), b"after").unwrap();
    }
    let crashed = fs.crash_image(false);
    drop(t);
    drop(db);
    let db = open(&crashed, dir.path()).unwrap();
    let got = dump(&db.open_table("t").unwrap());
    assert_eq!(got.len(), 5000);
    assert!(got[..300].iter().all(|(_, v)| v == b"after"));
    assert!(got[300..].iter().all(|(_, v)| v == &vec![7u8; 1000]));
    assert!(db.verify().unwrap().is_ok());
}

/// Spares removed by checkpoints while writers burst and pause: every
/// acknowledged commit survives a crash, so no record went to a segment
/// file that a checkpoint was removing.
#[test]
fn spares_removed_while_writers_burst_lose_no_commit() {
    use std::sync::atomic::{AtomicBool, AtomicU32};
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    db.table("t").unwrap();
    let threads = 3u32;
    let acked: Vec<AtomicU32> = (0..threads).map(|_| AtomicU32::new(0)).collect();
    let done = AtomicBool::new(false);
    let key = |th: u32, i: u32| format!("t{th}-{i:07}").into_bytes();
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..threads)
            .map(|th| {
                let (db, acked, key) = (db.clone(), &acked, &key);
                s.spawn(move || {
                    let t = db.open_table("t").unwrap();
                    let mut i = 0u32;
                    for burst in 0..12u32 {
                        // Bursts of 0.3-3 MB of log (5-50 segments), then
                        // a pause of at least 10 checkpoints (more than
                        // the window of 8, so the spares a burst left can
                        // go): counted, not timed, since on a busy machine
                        // a checkpoint of this test can take 70 ms.
                        let n = 300 * (1 + (burst * 7 + th * 3) % 10);
                        for _ in 0..n {
                            t.put(key(th, i), vec![(i % 251) as u8; 1000]).unwrap();
                            i += 1;
                            acked[th as usize].store(i, Ordering::Release);
                        }
                        let c0 = db.stats().checkpoints;
                        while db.stats().checkpoints < c0 + 10 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                    }
                })
            })
            .collect();
        let (db, done) = (db.clone(), &done);
        s.spawn(move || {
            while !done.load(Ordering::Acquire) {
                db.checkpoint().unwrap();
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    let s = db.stats();
    assert!(s.log_segments_removed > 0, "no spare was removed: {s:?}");
    assert_eq!(s.log_recycle_errors, 0);
    let crashed = fs.crash_image(false);
    drop(db);
    let db = open(&crashed, dir.path()).unwrap();
    let t = db.open_table("t").unwrap();
    for th in 0..threads {
        let n = acked[th as usize].load(Ordering::Acquire);
        for i in 0..n {
            assert_eq!(
                t.get(key(th, i)).unwrap(),
                Some(vec![(i % 251) as u8; 1000]),
                "thread {th}, commit {i} of {n} lost; {s:?}"
            );
        }
    }
    assert!(db.verify().unwrap().is_ok());
}

#[test]
fn the_log_size_starts_checkpoints_and_bounds_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = common::small_builder()
        .checkpoint_log_size(Some(4 * SEGMENT))
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .unwrap();
    let t = db.table("t").unwrap();
    let mut max_files = 0;
    let mut created = Vec::new();
    // 6 MB of log, 24 times the checkpoint size, and no interval: each
    // round writes more than the checkpoint size, so its last commits ask
    // for a checkpoint, which runs on the checkpointer's thread.
    for round in 0..20u32 {
        let before = db.stats().checkpoints;
        for i in 0..300 {
            t.put(k(i), vec![round as u8; 1000]).unwrap();
        }
        max_files = max_files.max(fs.list_prefix(dir.path(), "wal-"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while db.stats().checkpoints == before && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let s = db.stats();
        assert!(
            s.checkpoints > before,
            "round {round}: no checkpoint: {s:?}"
        );
        created.push(s.log_segments_created);
    }
    // Each round writes about 5 segments and ends with a checkpoint: the
    // log never holds much more than one round.
    assert!(max_files <= 14, "{max_files} segment files");
    // Rounds reuse the segments checkpoints let go: of the ~95 segments
    // the log went through, few were new files.
    let s = db.stats();
    assert!(
        s.log_segments_created <= 16 && s.log_segments_recycled >= 70,
        "segment files created, by round: {created:?}; {s:?}"
    );
    drop(t);
    drop(db);
    // Whatever the last checkpoint did not cover is replayed, no more
    // than about one checkpoint size of it.
    let db = open(&fs.crash_image(false), dir.path()).unwrap();
    assert!(db.replayed_records() <= 300, "{}", db.replayed_records());
    assert_eq!(dump(&db.open_table("t").unwrap()).len(), 300);
}

#[test]
fn a_checkpoint_log_size_under_one_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = common::small_builder()
        .checkpoint_log_size(Some(SEGMENT - 4096))
        .open(dir.path())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidOption(_)), "{err}");
}

#[test]
fn a_failed_log_fsync_stops_writes_and_reads_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    t.put_with(b"a", b"1", Durability::Fsync).unwrap();
    fs.control.fail_sync.store(true, Ordering::SeqCst);
    let err = t.put_with(b"b", b"2", Durability::Fsync).unwrap_err();
    assert!(
        matches!(err, Error::Io(_) | Error::WritesStopped(_)),
        "{err}"
    );
    // Even when the disk says fsync works again, nothing more is accepted:
    // a retried fsync can report success after the kernel dropped data.
    fs.control.fail_sync.store(false, Ordering::SeqCst);
    for r in [t.put(b"c", b"3"), t.put_with(b"d", b"4", Durability::None)] {
        assert!(matches!(r, Err(Error::WritesStopped(_))), "{r:?}");
    }
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn concurrent_fsync_commits_share_fsyncs_and_all_survive_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    db.table("t").unwrap();
    db.checkpoint().unwrap();
    let threads = 8u32;
    let per = 300u32;
    std::thread::scope(|s| {
        for th in 0..threads {
            let db = db.clone();
            s.spawn(move || {
                let t = db.open_table("t").unwrap();
                for i in 0..per {
                    let mut b = WriteBatch::new();
                    b.set_durability(Durability::Fsync);
                    b.put("t", k(th * per + i), th.to_le_bytes());
                    // A second key in a shared table makes conflicting
                    // writes: log order must match apply order for it.
                    b.put("t", b"last", (th * per + i).to_le_bytes());
                    db.write(&b).unwrap();
                    let _ = t.get(b"last").unwrap();
                }
            });
        }
    });
    let s = db.stats();
    assert_eq!(s.log_records, u64::from(threads * per) + 1);
    assert!(s.log_fsyncs <= s.log_records, "{s:?}");
    let last = db.open_table("t").unwrap().get(b"last").unwrap();
    let img = fs.crash_image(true);
    drop(db);
    let db = open(&img, dir.path()).unwrap();
    let t = db.open_table("t").unwrap();
    assert_eq!(dump(&t).len() as u32, threads * per + 1);
    assert_eq!(
        t.get(b"last").unwrap(),
        last,
        "replay applied `last` in another order"
    );
}

/// Segments a commit makes for itself are not synced when made: the sync
/// of a later `Fsync` commit makes them durable, names included, so a
/// power loss keeps every commit up to it, through every segment, whoever
/// made them (the commits or the preparer).
#[test]
fn an_fsync_commit_makes_the_segments_before_it_durable_names_and_all() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path()).unwrap();
    let t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    // About eight segments of `Write` commits, each value a third of one.
    let value = vec![3u8; (SEGMENT / 3) as usize];
    for i in 0..24 {
        t.put_with(k(i), &value, Durability::Write).unwrap();
    }
    t.put_with(k(24), b"fsync", Durability::Fsync).unwrap();
    let created = db.stats().log_segments_created;
    assert!(created >= 8, "{created} segments created");
    let img = fs.crash_image(true);
    drop(t);
    drop(db);
    let db = open(&img, dir.path()).unwrap();
    let got = dump(&db.open_table("t").unwrap());
    assert_eq!(got.len(), 25, "commits before the fsync lost");
    assert_eq!(got[24].1, b"fsync");
    assert!(got[..24].iter().all(|(_, v)| v == &value));
}

/// A database with a small cache (so pages are evicted to its data file),
/// written back every `ms`.
fn open_writing_back(fs: &SimFs, dir: &Path, ms: u64) -> tidemark::Result<Database> {
    common::small_builder()
        .checkpoint_log_size(None)
        .write_back_interval(Some(std::time::Duration::from_millis(ms)))
        .file_system(Arc::new(fs.clone()))
        .open(dir)
}

/// Waits up to 10 s for `f` to hold.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Puts twice the cache in values, so pages are evicted to the data file;
/// returns the value put under every key.
fn fill_past_the_cache(db: &Database, t: &tidemark::Table) -> Vec<u8> {
    let value = vec![7u8; 2000];
    for i in 0..1200 {
        t.put(k(i), &value).unwrap();
    }
    assert!(db.stats().pages_written > 0);
    value
}

#[test]
fn the_data_file_is_written_back_between_checkpoints_only_when_written() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open_writing_back(&fs, dir.path(), 50).unwrap();
    let t = db.table("t").unwrap();
    fill_past_the_cache(&db, &t);
    assert!(
        eventually(|| db.stats().data_write_backs > 0),
        "no write-back in 10 s"
    );
    let checkpoints = db.stats().checkpoints;
    // Nothing written since: no write-back has anything to do.
    assert!(eventually(|| {
        let n = db.stats().data_write_backs;
        std::thread::sleep(std::time::Duration::from_millis(200));
        db.stats().data_write_backs == n
    }));
    let n = db.stats().data_write_backs;
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(db.stats().data_write_backs, n);
    // A write-back is not a checkpoint: nothing new became durable.
    assert_eq!(db.stats().checkpoints, checkpoints);
    for i in 0..1200 {
        t.put(k(i), b"x").unwrap();
    }
    assert!(eventually(|| db.stats().data_write_backs > n));
}

/// A checkpoint pushes out only the blocks written before its flush
/// began, so it does not restart the write-back's clock: with checkpoints
/// more frequent than write-backs, what writers wrote after each cut is
/// still written back on the engine's schedule, not left to the kernel.
#[test]
fn checkpoints_that_flush_only_their_own_blocks_leave_write_backs_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = common::small_builder()
        .checkpoint_log_size(None)
        .checkpoint_interval(Some(std::time::Duration::from_millis(20)))
        .write_back_interval(Some(std::time::Duration::from_millis(150)))
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .unwrap();
    let t = db.table("t").unwrap();
    let value = vec![5u8; 2000];
    let mut i = 0;
    let written_back = eventually(|| {
        for _ in 0..50 {
            t.put(k(i % 1200), &value).unwrap();
            i += 1;
        }
        db.stats().data_write_backs > 0
    });
    let s = db.stats();
    assert!(s.checkpoints >= 3, "{} checkpoints", s.checkpoints);
    assert!(
        written_back,
        "no write-back in 10 s beside {} checkpoints",
        s.checkpoints
    );
}

#[test]
fn a_failed_write_back_stops_writes_and_reads_keep_working() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let opened = std::time::Instant::now();
    let db = open_writing_back(&fs, dir.path(), 1000).unwrap();
    let t = db.table("t").unwrap();
    let value = fill_past_the_cache(&db, &t);
    // Well before the first write-back (a second after open), every fsync
    // starts failing; no write follows, so only the write-back syncs.
    assert_eq!(db.stats().data_write_backs, 0, "written too slowly");
    fs.control.fail_sync.store(true, Ordering::SeqCst);
    std::thread::sleep(
        (opened + std::time::Duration::from_millis(2500))
            .saturating_duration_since(std::time::Instant::now()),
    );
    // The write-back's fdatasync failed: writes stop, with the reason,
    // even once the disk says fsync works again.
    fs.control.fail_sync.store(false, Ordering::SeqCst);
    let err = t.put_with(b"z", b"1", Durability::None).unwrap_err();
    assert!(matches!(err, Error::WritesStopped(_)), "{err}");
    assert!(
        err.to_string().contains("writing the data file back"),
        "{err}"
    );
    assert_eq!(t.get(k(5)).unwrap().as_deref(), Some(&value[..]));
    assert_eq!(db.stats().data_write_backs, 0);
}
