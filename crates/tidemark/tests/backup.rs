//! Online backup under a concurrent write load, and compaction.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tidemark::bson::{doc, Bson};
use tidemark::{CappedOptions, Database, Durability, Error};

#[test]
fn a_backup_under_load_opens_clean_and_holds_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::builder()
        .cache_size(8 << 20)
        .log_segment_size(1 << 20)
        .open(dir.path().join("db"))
        .unwrap();
    let oplog = db
        .create_collection(
            "oplog",
            Some(CappedOptions {
                size: 256 * 1024,
                max: None,
            }),
        )
        .unwrap();
    let docs = db.collection("docs").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    const WRITERS: usize = 3;
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let (db, stop, acked) = (db.clone(), stop.clone(), acked.clone());
        let (oplog, docs) = (oplog.clone(), docs.clone());
        threads.push(std::thread::spawn(move || {
            let t = db.table("kv").unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = format!("{w}-{i:08}");
                let d = if i.is_multiple_of(7) {
                    Durability::Fsync
                } else {
                    Durability::Write
                };
                t.put_with(&key, [w as u8; 200], d).unwrap();
                docs.insert_one(&doc! {"_id": &key, "w": w as i64}).unwrap();
                oplog
                    .insert_one(&doc! {"k": &key, "pad": "x".repeat(300)})
                    .unwrap();
                acked[w].store(i, Ordering::Release);
            }
        }));
    }
    std::thread::sleep(std::time::Duration::from_millis(400));
    let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    let dest = dir.path().join("copy");
    let info = db.backup(&dest).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(before.iter().all(|&n| n > 50), "{before:?}");
    assert!(
        info.data_bytes > 0 && info.ring_bytes >= 256 * 1024,
        "{info:?}"
    );
    let last: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
    db.close().unwrap();

    let copy = Database::builder().cache_size(8 << 20).open(&dest).unwrap();
    let report = copy.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let kv = copy.open_table("kv").unwrap();
    let docs = copy.get_collection("docs").unwrap();
    for w in 0..WRITERS {
        // Every commit acknowledged before the backup began...
        for i in 1..=before[w] {
            let key = format!("{w}-{i:08}");
            assert!(kv.get(&key).unwrap().is_some(), "{key} lost");
            assert!(
                docs.find_one(&Bson::String(key.clone())).unwrap().is_some(),
                "{key} lost"
            );
        }
        // ... and, per writer, a prefix of what followed: no holes.
        let mut n = before[w];
        while kv.get(format!("{w}-{:08}", n + 1)).unwrap().is_some() {
            n += 1;
        }
        assert!(n <= last[w]);
        let extra = kv
            .range::<&[u8], _>(format!("{w}-{:08}", n + 1).as_bytes()..format!("{w}-~").as_bytes());
        assert_eq!(extra.count(), 0, "writer {w}: a hole after {n}");
    }
    // The ring: sound, a contiguous run of the newest oplog entries.
    let o = copy.get_collection("oplog").unwrap();
    let v = o.validate().unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert!(v.count > 10);
    assert_eq!(v.discontinuities, Some(0));
    copy.close().unwrap();
}

#[test]
fn a_backup_needs_an_empty_destination() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db")).unwrap();
    db.table("t").unwrap().put(b"k", b"v").unwrap();
    let busy = dir.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("x"), b"mine").unwrap();
    assert!(matches!(db.backup(&busy), Err(Error::InvalidOption(_))));
    assert_eq!(std::fs::read(busy.join("x")).unwrap(), b"mine");
    assert!(matches!(
        db.backup(dir.path().join("db")),
        Err(Error::InvalidOption(_))
    ));
    // The database itself is unharmed, and an empty directory is fine.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.backup(&empty).unwrap();
    let copy = Database::open(&empty).unwrap();
    assert_eq!(
        copy.open_table("t").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn compact_returns_the_free_tail_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::builder().cache_size(4 << 20).open(&path).unwrap();
    let keep = db.table("keep").unwrap();
    for i in 0..2_000u32 {
        keep.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    db.checkpoint().unwrap();
    // A big table written after, then dropped: its blocks are the end of
    // the file and become free.
    let big = db.table("big").unwrap();
    for i in 0..40_000u32 {
        big.put(i.to_be_bytes(), [2u8; 500]).unwrap();
    }
    db.checkpoint().unwrap();
    drop(big);
    db.drop_table("big").unwrap();
    let on_disk = || {
        std::fs::metadata(path.join(tidemark::DATA_FILE))
            .unwrap()
            .len()
    };
    let before = on_disk();
    let info = db.compact().unwrap();
    let after = on_disk();
    assert_eq!(info.size_before, before);
    assert_eq!(info.size_after, after);
    assert!(after * 4 < before, "{before} -> {after}");
    assert_eq!(db.stats().file_size, after);
    // Writes go on (the file grows again as needed) and nothing was lost.
    for i in 2_000..4_000u32 {
        keep.put(i.to_be_bytes(), [1u8; 100]).unwrap();
    }
    db.close().unwrap();
    let db = Database::open(&path).unwrap();
    assert!(db.verify().unwrap().problems.is_empty());
    assert_eq!(db.open_table("keep").unwrap().iter().count(), 4_000);
}

#[test]
fn compact_moves_pages_stored_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::builder().cache_size(4 << 20).open(&path).unwrap();
    // The big table first, the one kept after it: the kept pages lie
    // beyond the big table's blocks, which are freed by the drop.
    let big = db.table("big").unwrap();
    for i in 0..40_000u32 {
        big.put(i.to_be_bytes(), [2u8; 500]).unwrap();
    }
    db.checkpoint().unwrap();
    let keep = db.table("keep").unwrap();
    for i in 0..5_000u32 {
        keep.put(i.to_be_bytes(), [1u8; 200]).unwrap();
    }
    db.checkpoint().unwrap();
    drop(big);
    db.drop_table("big").unwrap();
    let info = db.compact().unwrap();
    assert!(
        info.size_after * 4 < info.size_before,
        "{} -> {}",
        info.size_before,
        info.size_after
    );
    db.close().unwrap();
    let db = Database::open(&path).unwrap();
    assert!(db.verify().unwrap().problems.is_empty());
    let keep = db.open_table("keep").unwrap();
    assert_eq!(keep.iter().count(), 5_000);
    assert_eq!(
        keep.get(4_999u32.to_be_bytes()).unwrap().unwrap(),
        vec![1u8; 200]
    );
}
