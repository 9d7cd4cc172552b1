//! A full disk: every write that meets it is refused with
//! `Error::DiskFull` before anything of it is logged or applied; the
//! database keeps accepting writes (no reopen), loses nothing acknowledged,
//! and once space returns the same handle writes, checkpoints and reopens
//! with everything. The disk is a simulated one with a capacity in bytes;
//! the capacity is swept so the disk fills at different moments (a log
//! segment's creation, the data file's growth, a checkpoint).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::SimFs;
use tidemark::{Database, Durability, Error, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Opens the database; `page_size` applies if this creates it.
fn open(fs: &SimFs, dir: &std::path::Path, page_size: usize) -> tidemark::Result<Database> {
    common::small_builder()
        .page_size(page_size)
        .statistics_log(None)
        .file_system(Arc::new(fs.clone()))
        .open(dir)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    // Sizes from 100 bytes to 6 KB, and every 97th an overflow value.
    let len = if i.is_multiple_of(97) {
        40_000
    } else {
        100 + (i * 7919 % 6000) as usize
    };
    vec![(i % 251) as u8; len]
}

/// What one commit does: a batch of new keys (the database only grows)
/// and a delete of an older key.
fn commit(db: &Database, model: &Model, i: u64) -> tidemark::Result<Model> {
    let mut next = model.clone();
    let mut batch = WriteBatch::new();
    for j in 0..4 {
        let k = i * 4 + j;
        batch.put("t", key(k), value(k));
        next.insert(key(k), value(k));
    }
    if i.is_multiple_of(5) && i > 0 {
        let old = key((i / 2) * 4);
        batch.delete("t", &old);
        next.remove(&old);
    }
    let durability = if i.is_multiple_of(3) {
        Durability::Fsync
    } else {
        Durability::Write
    };
    batch.set_durability(durability);
    db.write(&batch)?;
    Ok(next)
}

fn contents(db: &Database, table: &str) -> Model {
    match db.open_table(table) {
        Ok(t) => common::dump(&t).into_iter().collect(),
        Err(Error::TableNotFound(_)) => Model::new(),
        Err(e) => panic!("{e}"),
    }
}

/// How the disk fills.
#[derive(Clone, Copy, Debug)]
enum Fill {
    /// A disk of this many bytes from the start, checkpoints every 40
    /// commits: the data file and the log compete for it.
    Total(u64),
    /// After a first checkpoint (which grows the data file by a large
    /// step), only this many more bytes, and no more checkpoints: the log
    /// fills the disk while the data file still has room.
    LogOnly(u64),
}

/// Fills the disk, then gives space back. Returns the commits refused
/// while it was full and the checkpoints refused.
fn run(fill: Fill, ps: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    if let Fill::Total(c) = fill {
        fs.control.capacity.store(c, Ordering::SeqCst);
    }
    let capacity = format!("{fill:?} (pages of {ps})");
    let db = open(&fs, dir.path(), ps).expect("open on an empty disk");
    db.table("t").expect("create table");
    let mut model = Model::new();
    let (mut i, mut refused, mut ckpt_refused) = (0u64, 0u64, 0u64);
    let checkpoints = match fill {
        Fill::Total(_) => true,
        Fill::LogOnly(extra) => {
            for _ in 0..10 {
                model = commit(&db, &model, i).expect("commit with room");
                i += 1;
            }
            db.checkpoint().expect("checkpoint with room");
            let used = fs.control.used.load(Ordering::SeqCst);
            fs.control.capacity.store(used + extra, Ordering::SeqCst);
            false
        }
    };
    // Fill the disk: commits until 20 in a row were refused.
    let mut in_a_row = 0;
    while in_a_row < 20 {
        assert!(i < 100_000, "the disk of {capacity} bytes never filled");
        match commit(&db, &model, i) {
            Ok(next) => {
                model = next;
                in_a_row = 0;
            }
            Err(Error::DiskFull(_)) => {
                refused += 1;
                in_a_row += 1;
            }
            Err(e) => panic!("capacity {capacity}, commit {i}: {e} (expected DiskFull)"),
        }
        i += 1;
        if checkpoints && i % 40 == 0 {
            match db.checkpoint() {
                Ok(_) => {}
                Err(Error::DiskFull(_)) => ckpt_refused += 1,
                Err(e) => panic!("capacity {capacity}, checkpoint: {e} (expected DiskFull)"),
            }
        }
    }
    // Full (the last 20 commits were refused with DiskFull, not
    // WritesStopped): nothing acknowledged is missing, nothing refused is
    // there.
    assert_eq!(
        contents(&db, "t"),
        model,
        "capacity {capacity}: state while full"
    );
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "capacity {capacity}: {:?}", report.problems);

    // Space returns: the same handle writes and checkpoints again.
    fs.control.capacity.store(u64::MAX, Ordering::SeqCst);
    for _ in 0..100 {
        model = commit(&db, &model, i)
            .unwrap_or_else(|e| panic!("capacity {capacity}: after space returned: {e}"));
        i += 1;
    }
    db.checkpoint().expect("checkpoint after space returned");
    assert_eq!(contents(&db, "t"), model);
    db.close().expect("close");

    // Reopened: every acknowledged commit, and a clean verify.
    let db = open(&fs, dir.path(), ps).expect("reopen");
    assert_eq!(db.page_size(), ps);
    assert_eq!(
        contents(&db, "t"),
        model,
        "capacity {capacity}: after reopen"
    );
    assert!(db.verify().unwrap().is_ok());
    (refused, ckpt_refused)
}

#[test]
fn a_full_disk_refuses_writes_and_they_resume_when_space_returns() {
    full_disks(tidemark::DEFAULT_PAGE_SIZE);
}

/// The same on databases of 4 KiB pages: the room a commit and a
/// checkpoint are promised is counted in other pages.
#[test]
fn a_full_disk_at_4_kib_pages_refuses_writes_and_they_resume() {
    full_disks(4096);
}

fn full_disks(ps: usize) {
    let (mut runs, mut refused, mut ckpt_refused) = (0u64, 0u64, 0u64);
    // From a disk just big enough to open the database and create its
    // first segments, up to one that fills after a few checkpoints; then
    // disks where only the log runs out of room.
    let fills = (0..25)
        .map(|k| Fill::Total((3 << 20) + k * (384 << 10)))
        .chain((0..12).map(|k| Fill::LogOnly(k * (96 << 10))));
    for fill in fills {
        let (r, c) = run(fill, ps);
        assert!(r >= 20);
        runs += 1;
        refused += r;
        ckpt_refused += c;
    }
    eprintln!(
        "disk full, pages of {ps}: {runs} disks, {refused} commits and {ckpt_refused} checkpoints refused with DiskFull, writes resumed in every run"
    );
}

/// A 4 MB cache that lets most of its pages stay dirty (70 % target, 85 %
/// trigger): the reserve for dirty pages is then most of what a commit
/// must find room for.
fn open_dirty(fs: &SimFs, dir: &std::path::Path, page_size: usize) -> tidemark::Result<Database> {
    common::small_builder()
        .page_size(page_size)
        .cache_size(4 << 20)
        .eviction_dirty_target(70)
        .eviction_dirty_trigger(85)
        .statistics_log(None)
        .file_system(Arc::new(fs.clone()))
        .open(dir)
}

/// Batches that each change keys spread over many leaves already on disk,
/// from two threads at once: a small record that dirties far more pages
/// than its bytes would fill. With the cache smaller than the pages a batch
/// dirties, applying it evicts dirty pages to new blocks while it runs, and
/// a checkpoint after each commit sends the blocks it replaces to limbo.
/// As the disk fills, each batch must be refused whole with `DiskFull`
/// before anything of it is logged, or applied whole: writes never stop
/// half-way, and nothing acknowledged is lost.
#[test]
fn batches_spread_over_many_leaves_are_refused_whole_on_a_full_disk() {
    spread_batches(tidemark::DEFAULT_PAGE_SIZE);
}

/// The same at 4 KiB pages: four times the leaves for a batch to dirty.
#[test]
fn batches_spread_over_many_4_kib_leaves_are_refused_whole_on_a_full_disk() {
    spread_batches(4096);
}

fn spread_batches(ps: usize) {
    const KEYS: u64 = 40_000;
    fn spread_value(i: u64, round: u64) -> Vec<u8> {
        vec![(i + round) as u8; 120]
    }
    /// One writer's rounds on its own table until the disk is full for
    /// both: five of its batches in a row refused with no commit by either
    /// writer since the first of them. (A batch may be refused while the
    /// other writer's admitted batch holds the last room; that refusal is
    /// right, but it does not mean the disk is full.) Returns its model
    /// and how many of its batches were refused.
    fn writer(
        db: &Database,
        table: &str,
        mut model: Model,
        room_kb: u64,
        commits: &AtomicU64,
    ) -> (Model, u64) {
        let (mut in_a_row, mut round, mut refused, mut mine) = (0, 1u64, 0, 0);
        let mut seen = commits.load(Ordering::SeqCst);
        while in_a_row < 5 {
            assert!(mine < 2000, "room {room_kb} KB: the disk never filled");
            assert!(
                round < 100_000,
                "room {room_kb} KB, {table}: never admitted"
            );
            let mut b = WriteBatch::new();
            let mut next = model.clone();
            // Every 10th key, offset by the round: the batch touches
            // nearly every leaf of the table; and new keys, so that the
            // database grows until the disk is full.
            let new = KEYS + round * 40..KEYS + round * 40 + 40;
            for i in (round % 10..KEYS).step_by(10).chain(new) {
                let v = if i < KEYS {
                    spread_value(i, round)
                } else {
                    vec![7; 2000]
                };
                b.put(table, key(i), &v);
                next.insert(key(i), v);
            }
            match db.write(&b) {
                Ok(()) => {
                    model = next;
                    in_a_row = 0;
                    mine += 1;
                    commits.fetch_add(1, Ordering::SeqCst);
                    checkpoint_unless_full(
                        db,
                        &format!("room {room_kb} KB, {table} round {round}"),
                    );
                }
                Err(Error::DiskFull(_)) => {
                    refused += 1;
                    let now = commits.load(Ordering::SeqCst);
                    in_a_row = if now == seen { in_a_row + 1 } else { 1 };
                    seen = now;
                    // What a user does on a full disk: a checkpoint, which
                    // frees the blocks the last one replaced (one refused
                    // while the other writer's batch held the room leaves
                    // them in limbo, and no batch fits until one runs).
                    // Then a pause, for an admitted batch of the other
                    // writer to finish.
                    checkpoint_unless_full(db, &format!("room {room_kb} KB, {table} when full"));
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(e) => {
                    panic!("room {room_kb} KB, {table} round {round}: {e} (expected DiskFull)")
                }
            }
            round += 1;
        }
        (model, refused)
    }
    /// A checkpoint that may be refused for want of room, and nothing else.
    fn checkpoint_unless_full(db: &Database, what: &str) {
        match db.checkpoint() {
            Ok(_) | Err(Error::DiskFull(_)) => {}
            Err(e) => panic!("{what}: checkpoint: {e}"),
        }
    }
    let (mut refused_total, mut evicted_total, mut commits_total) = (0, 0, 0);
    // Room beyond the blocks in use once the tables are filled: the data
    // file's free blocks and the disk's free bytes together. A batch is
    // admitted only with room for two blocks for each key it changes (at
    // most the blocks in use) and the dirty pages' reserve. How much of
    // the room is free blocks in the file already depends on how far the
    // file preparer had grown it ahead when the fill's checkpoint cut it
    // off (at 4 KiB pages 13.0 MiB in most runs, 9.5 MiB in some, and
    // those made 4-10 commits instead of about 30; the preparer grows
    // nothing more after the cut), so the disk is capped to make the sum
    // the same in every run. The fill leaves about 21.1
    // MiB free in the file at 16 KiB pages. At 4 KiB pages (four times the
    // blocks in use, and a reserve of four times the frames) every batch
    // was refused with about 14.5 MiB of room (2026-11-28: no commit, no
    // eviction), and with 21 MiB they go through until the disk fills.
    let sizes = [0u64, 256, 768, 1536].map(|kb| (22 << 10) + kb);
    for room_kb in sizes {
        let dir = tempfile::tempdir().unwrap();
        let fs = SimFs::new();
        let db = open_dirty(&fs, dir.path(), ps).expect("open");
        let mut models = vec![Model::new(), Model::new()];
        for (n, model) in models.iter_mut().enumerate() {
            let table = format!("t{n}");
            db.table(&table).expect("create table");
            for chunk in 0..KEYS / 100 {
                let mut b = WriteBatch::new();
                for i in chunk * 100..(chunk + 1) * 100 {
                    b.put(&table, key(i), spread_value(i, 0));
                    model.insert(key(i), spread_value(i, 0));
                }
                db.write(&b).expect("fill");
            }
        }
        db.checkpoint().expect("checkpoint with room");
        // The disk's used bytes and the file's free bytes as of one
        // moment: read again if a preparer grew the file in between.
        let (used, in_file) = loop {
            let used = fs.control.used.load(Ordering::SeqCst);
            let in_file = db.stats().file_free_bytes;
            if fs.control.used.load(Ordering::SeqCst) == used {
                break (used, in_file);
            }
        };
        fs.control.capacity.store(
            used + (room_kb << 10).saturating_sub(in_file),
            Ordering::SeqCst,
        );
        let commits = AtomicU64::new(0);
        let before = db.stats();
        models = std::thread::scope(|s| {
            let handles: Vec<_> = models
                .into_iter()
                .enumerate()
                .map(|(n, m)| {
                    let (db, commits) = (&db, &commits);
                    s.spawn(move || writer(db, &format!("t{n}"), m, room_kb, commits))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    let (m, r) = h.join().expect("writer");
                    refused_total += r;
                    m
                })
                .collect()
        });
        let st = db.stats();
        // The batches did evict dirty pages while they were applied.
        let evicted = st.pages_evicted_dirty - before.pages_evicted_dirty;
        commits_total += commits.load(Ordering::SeqCst);
        assert!(
            evicted > 1000,
            "room {room_kb} KB: {evicted} dirty pages evicted"
        );
        evicted_total += evicted;
        for (n, m) in models.iter().enumerate() {
            assert_eq!(
                &contents(&db, &format!("t{n}")),
                m,
                "room {room_kb} KB, t{n}: state while full"
            );
        }
        fs.control.capacity.store(u64::MAX, Ordering::SeqCst);
        db.open_table("t0")
            .unwrap()
            .put(key(0), b"after")
            .expect("a write once space returned");
        models[0].insert(key(0), b"after".to_vec());
        db.checkpoint().expect("checkpoint after space returned");
        db.close().expect("close");
        let db = open_dirty(&fs, dir.path(), ps).expect("reopen");
        assert_eq!(db.page_size(), ps);
        for (n, m) in models.iter().enumerate() {
            assert_eq!(
                &contents(&db, &format!("t{n}")),
                m,
                "room {room_kb} KB, t{n}: after reopen"
            );
        }
        assert!(db.verify().unwrap().is_ok());
    }
    assert!(refused_total > 0);
    eprintln!(
        "spread batches, pages of {ps}: {} disks, {commits_total} batches committed and {refused_total} refused with DiskFull, {evicted_total} dirty pages evicted while filling, writes never stopped",
        sizes.len()
    );
}

/// A log segment the background preparer could not fill on a full disk
/// gives its room back at once: its temporary file is removed, not left
/// taking the room until the next open. (Left behind, it also refused the
/// commit that then had to create the same segment itself.)
#[test]
fn a_log_segment_preparation_cut_short_leaves_no_file_behind() {
    use tidemark::io::FileSystem;
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path(), tidemark::DEFAULT_PAGE_SIZE).expect("open");
    db.table("t").expect("create table");
    let mut model = Model::new();
    for i in 0..10 {
        model = commit(&db, &model, i).expect("commit with room");
    }
    // Room for less than one 64 KiB segment: every preparation from now on
    // is cut short, and so is every segment a commit creates itself.
    let used = fs.control.used.load(Ordering::SeqCst);
    fs.control
        .capacity
        .store(used + (16 << 10), Ordering::SeqCst);
    let mut refused = 0;
    for i in 10..2_000 {
        match commit(&db, &model, i) {
            Ok(next) => model = next,
            Err(Error::DiskFull(_)) => {
                refused += 1;
                if refused == 20 {
                    break;
                }
            }
            Err(e) => panic!("commit {i}: {e} (expected DiskFull)"),
        }
    }
    assert_eq!(refused, 20, "the log never ran out of room");
    // A commit's own creation of a segment that failed for want of room
    // leaves nothing either: every segment file there is whole. (Checked
    // before the close, whose checkpoint may recycle an old segment into
    // that name.)
    let short: Vec<(String, u64)> = fs
        .list(dir.path())
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("wal-") && n.ends_with(".log"))
        .map(|n| {
            let len = fs.open(&dir.path().join(&n), false).unwrap().len().unwrap();
            (n, len)
        })
        .filter(|&(_, len)| len < common::SMALL_SEGMENT)
        .collect();
    assert_eq!(short, Vec::<(String, u64)>::new());
    // Closing waits for the background preparer: whatever it left now
    // stays. Each refusal above came at a segment whose preparation began
    // after the disk was capped, and could not finish.
    assert_eq!(contents(&db, "t"), model);
    db.close().expect("close");
    let prep: Vec<String> = fs
        .list(dir.path())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".prep"))
        .collect();
    assert_eq!(prep, Vec::<String>::new());
    fs.control.capacity.store(u64::MAX, Ordering::SeqCst);
    let db = open(&fs, dir.path(), tidemark::DEFAULT_PAGE_SIZE).expect("reopen");
    assert_eq!(contents(&db, "t"), model);
}
