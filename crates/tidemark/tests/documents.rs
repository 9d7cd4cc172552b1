//! Documents and capped collections: CRUD, bad input, the ring's placement
//! rule against a model (with crashes and reopens), tailable cursors.

mod common;

use std::collections::VecDeque;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{small_builder, SimFs};
use proptest::prelude::*;
use tidemark::bson::{doc, Bson, Document};
use tidemark::{CappedOptions, Database, Durability, Error, WriteBatch, RECORD_HEADER};

fn ids(c: &tidemark::Collection, reverse: bool) -> Vec<Bson> {
    let cur = if reverse { c.find_reverse() } else { c.find() };
    cur.map(|d| d.unwrap().get("_id").unwrap().clone())
        .collect()
}

#[test]
fn regular_collection_crud() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let users = db.collection("users").unwrap();
    let a = users.insert_one(&doc! {"name": "ann"}).unwrap();
    assert!(matches!(a, Bson::ObjectId(_)));
    users.insert_one(&doc! {"_id": 7, "name": "bob"}).unwrap();
    users.insert_one(&doc! {"_id": "c", "name": "cy"}).unwrap();
    let got = users.find_one(&a).unwrap().unwrap();
    assert_eq!(got.keys().next().map(String::as_str), Some("_id"));
    assert_eq!(got.get_str("name").unwrap(), "ann");
    // The double 7.0 is the same _id as the int 7.
    assert_eq!(
        users
            .find_one(&Bson::Double(7.0))
            .unwrap()
            .unwrap()
            .get_str("name")
            .unwrap(),
        "bob"
    );
    let dup = users.insert_one(&doc! {"_id": 7, "name": "again"});
    assert!(matches!(dup, Err(Error::DuplicateKey { .. })), "{dup:?}");
    assert_eq!(users.count().unwrap(), 3);
    // Natural order is insertion order, both ways.
    assert_eq!(
        ids(&users, false),
        vec![a.clone(), Bson::Int32(7), Bson::String("c".into())]
    );
    assert_eq!(
        ids(&users, true),
        vec![Bson::String("c".into()), Bson::Int32(7), a.clone()]
    );
    // _id order: numbers < strings < ObjectIds.
    let by_id: Vec<Bson> = users
        .find_range(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|d| d.unwrap().get("_id").unwrap().clone())
        .collect();
    assert_eq!(
        by_id,
        vec![Bson::Int32(7), Bson::String("c".into()), a.clone()]
    );
    let lo = Bson::Int32(7);
    let only: Vec<_> = users
        .find_range(Bound::Excluded(&lo), Bound::Excluded(&a))
        .unwrap()
        .collect();
    assert_eq!(only.len(), 1);
    assert!(users
        .replace_one(&Bson::Int32(7), &doc! {"name": "bobby"})
        .unwrap());
    assert_eq!(
        users.find_one(&Bson::Int32(7)).unwrap().unwrap(),
        doc! {"_id": 7, "name": "bobby"}
    );
    assert!(!users.replace_one(&Bson::Int32(99), &doc! {}).unwrap());
    assert!(users.delete_one(&Bson::String("c".into())).unwrap());
    assert!(!users.delete_one(&Bson::String("c".into())).unwrap());
    assert_eq!(users.find_one(&Bson::String("c".into())).unwrap(), None);
    let v = users.validate().unwrap();
    assert_eq!((v.count, v.index_entries), (2, 2));
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    db.close().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let users = db.get_collection("users").unwrap();
    assert_eq!(ids(&users, false), vec![a, Bson::Int32(7)]);
    // New inserts after reopen still go last in natural order.
    users.insert_one(&doc! {"_id": 1}).unwrap();
    assert_eq!(ids(&users, true)[0], Bson::Int32(1));
    assert_eq!(db.list_collections().unwrap(), vec!["users".to_string()]);
}

#[test]
fn bad_input_is_a_typed_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let c = db.collection("c").unwrap();
    c.insert_one(&doc! {"_id": 1}).unwrap();
    for bytes in [
        &b""[..],
        &[5, 0, 0, 0][..],
        &[12, 0, 0, 0, 0x10, b'a', 0, 1, 0, 0, 0][..],
        &[8, 0, 0, 0, 0x99, b'a', 0, 0][..],
    ] {
        assert!(
            matches!(c.insert_one_bson(bytes), Err(Error::InvalidBson(_))),
            "{bytes:?}"
        );
    }
    let big = doc! {"x": "y".repeat(tidemark::MAX_DOCUMENT_SIZE)};
    assert!(matches!(
        c.insert_one(&big),
        Err(Error::DocumentTooLarge { .. })
    ));
    assert!(matches!(
        c.insert_one(&doc! {"_id": [1, 2]}),
        Err(Error::InvalidBson(_))
    ));
    // insert_many is atomic: a duplicate in the middle inserts nothing.
    let docs = [doc! {"_id": 2}, doc! {"_id": 1}, doc! {"_id": 3}];
    assert!(matches!(
        c.insert_many(&docs),
        Err(Error::DuplicateKey { .. })
    ));
    let docs = [doc! {"_id": 4}, doc! {"_id": 4}];
    assert!(matches!(
        c.insert_many(&docs),
        Err(Error::DuplicateKey { .. })
    ));
    assert_eq!(ids(&c, false), vec![Bson::Int32(1)]);
    assert!(matches!(
        db.get_collection("nope"),
        Err(Error::CollectionNotFound(_))
    ));
    assert!(matches!(
        db.create_collection("c", None),
        Err(Error::CollectionExists(_))
    ));
    let small = CappedOptions {
        size: 4096,
        max: None,
    };
    let ring = db.create_collection("ring", Some(small)).unwrap();
    let too_big = doc! {"x": "y".repeat(5000)};
    assert!(matches!(
        ring.insert_one(&too_big),
        Err(Error::CappedRecordTooLarge { .. })
    ));
    ring.insert_one(&doc! {"_id": 1, "v": "aaaa"}).unwrap();
    assert!(matches!(
        ring.delete_one(&Bson::Int32(1)),
        Err(Error::CappedOperation { .. })
    ));
    assert!(matches!(
        ring.replace_one(&Bson::Int32(1), &doc! {"v": "aaaaaaaa"}),
        Err(Error::CappedOperation { .. })
    ));
    // A replace that keeps the size is allowed, in place.
    assert!(ring
        .replace_one(&Bson::Int32(1), &doc! {"v": "bbbb"})
        .unwrap());
    assert_eq!(
        ring.find_one(&Bson::Int32(1)).unwrap().unwrap(),
        doc! {"_id": 1, "v": "bbbb"}
    );
    assert!(matches!(c.layout(), Err(Error::NotCapped(_))));
    assert!(matches!(
        db.create_collection(
            "tiny",
            Some(CappedOptions {
                size: 10,
                max: None
            })
        ),
        Err(Error::InvalidOption(_))
    ));
}

/// Names of the capped ring files in `dir`, sorted.
fn ring_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with("capped-"))
        .collect();
    v.sort();
    v
}

/// A capped collection's ring file is written whole before the creation
/// commits, under a temporary name: it then has its full length, a failed
/// creation leaves no file behind, and a temporary file left by a creation
/// cut short is removed when the database opens.
#[test]
fn capped_ring_files_are_prepared_whole() {
    let dir = tempfile::tempdir().unwrap();
    let size = 1 << 20;
    let opts = Some(CappedOptions { size, max: None });
    let db = small_builder().open(dir.path()).unwrap();
    db.create_collection("r", opts).unwrap();
    let files = ring_files(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].ends_with(".ring"), "{files:?}");
    let ring = dir.path().join(&files[0]);
    assert_eq!(std::fs::metadata(&ring).unwrap().len(), 4096 + size);
    assert!(matches!(
        db.create_collection("r", opts),
        Err(Error::CollectionExists(_))
    ));
    assert_eq!(ring_files(dir.path()), files);
    let c = db.get_collection("r").unwrap();
    c.insert_one(&doc! {"_id": 1, "v": "kept"}).unwrap();
    drop(c);
    db.close().unwrap();

    let leftover = dir.path().join(format!("{}.prep-1-0", files[0]));
    std::fs::write(&leftover, vec![0u8; 8192]).unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    assert!(!leftover.exists());
    assert_eq!(ring_files(dir.path()), files);
    let c = db.get_collection("r").unwrap();
    assert_eq!(
        c.find_one(&Bson::Int32(1)).unwrap().unwrap(),
        doc! {"_id": 1, "v": "kept"}
    );
    // A dropped and recreated collection gets a new, empty ring.
    drop(c);
    db.drop_collection("r").unwrap();
    let c = db.create_collection("r", opts).unwrap();
    assert_eq!(c.count().unwrap(), 0);
    assert_eq!(ring_files(dir.path()), files);
}

/// The placement rule, written independently of the engine: each record's
/// ring position, and which records an insert must remove.
#[derive(Clone, Debug)]
struct ModelRing {
    size: u64,
    max: Option<u64>,
    head: u64,
    /// (id, ring position, length), oldest first.
    recs: VecDeque<(i64, u64, u64)>,
}

impl ModelRing {
    fn insert(&mut self, id: i64, len: u64) -> usize {
        let off = self.head % self.size;
        let start = if off + len > self.size {
            self.head + (self.size - off)
        } else {
            self.head
        };
        let (new_lo, new_hi) = (start % self.size, start % self.size + len);
        let mut removed = 0;
        while let Some(&(_, pos, l)) = self.recs.front() {
            let too_many = self.max.is_some_and(|m| self.recs.len() as u64 >= m);
            let (lo, hi) = (pos % self.size, pos % self.size + l);
            let overlaps = lo < new_hi && new_lo < hi;
            // Bytes from the previous lap between the head and the wrap.
            let skipped = start != self.head && lo >= off && pos < start;
            let behind = pos + self.size < start + len;
            if !(too_many || behind) {
                break;
            }
            assert!(
                too_many || overlaps || skipped,
                "the engine rule would remove record at {pos} which overlaps nothing"
            );
            self.recs.pop_front();
            removed += 1;
        }
        self.recs.push_back((id, start, len));
        self.head = start + len;
        removed
    }
}

fn ring_doc(id: i64, pad: usize) -> (Document, u64) {
    let d = doc! {"_id": Bson::Int64(id), "p": "x".repeat(pad)};
    // Record = header + encoded _id (a number: 9 bytes) + the BSON.
    let len = RECORD_HEADER as u64 + 9 + tidemark::bson::to_vec(&d).unwrap().len() as u64;
    (d, len)
}

fn check_against_model(c: &tidemark::Collection, m: &ModelRing) {
    let want_ids: Vec<Bson> = m.recs.iter().map(|r| Bson::Int64(r.0)).collect();
    assert_eq!(ids(c, false), want_ids);
    let mut rev = want_ids.clone();
    rev.reverse();
    assert_eq!(ids(c, true), rev);
    let want_layout: Vec<u64> = m.recs.iter().map(|r| r.1 % m.size).collect();
    assert_eq!(c.layout().unwrap(), want_layout);
    let v = c.validate().unwrap();
    assert!(v.problems.is_empty(), "{:?}", v.problems);
    assert_eq!(v.count, m.recs.len() as u64);
    assert!(v.fragmentation.unwrap() < 1.005, "{v:?}");
    assert_eq!(v.discontinuities, Some(0), "{v:?}");
    assert!(v.wraps.unwrap() <= 1, "{v:?}");
    // The only waste is the skipped end, shorter than the record after it.
    assert!(v.wasted_bytes < m.recs.iter().map(|r| r.2).max().unwrap_or(0) + 1);
}

#[test]
fn capped_inserts_follow_the_ring_rule() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let size = 64 * 1024;
    let c = db
        .create_collection("log", Some(CappedOptions { size, max: None }))
        .unwrap();
    let mut m = ModelRing {
        size,
        max: None,
        head: 0,
        recs: VecDeque::new(),
    };
    let mut rng = 12345u64;
    for id in 0..3000 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (d, len) = ring_doc(id, (rng >> 33) as usize % 1500);
        m.insert(id, len);
        c.insert_one(&d).unwrap();
        if id % 500 == 0 {
            check_against_model(&c, &m);
        }
    }
    check_against_model(&c, &m);
    // Removals: every record not kept; beyond the minimum of a collection
    // that could use every free byte, at most what the skipped end of the
    // ring (shorter than one record) could hold.
    let s = db.stats();
    assert_eq!(s.capped_records_removed, 3000 - m.recs.len() as u64);
    assert!(s.capped_records_removed >= s.capped_records_removed_min);
    let smallest = RECORD_HEADER as u64 + 9 + 20;
    assert!(
        s.capped_records_removed - s.capped_records_removed_min <= 1580 / smallest + 1,
        "{} removed, minimum {}",
        s.capped_records_removed,
        s.capped_records_removed_min
    );
    // find_one of a removed document finds nothing; of a kept one, it.
    assert_eq!(c.find_one(&Bson::Int64(0)).unwrap(), None);
    let newest = m.recs.back().unwrap().0;
    assert!(c.find_one(&Bson::Int64(newest)).unwrap().is_some());
    db.close().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let c = db.get_collection("log").unwrap();
    check_against_model(&c, &m);
    db.verify()
        .map(|r| assert!(r.problems.is_empty(), "{:?}", r.problems))
        .unwrap();
}

fn snap_ids(cur: tidemark::Result<tidemark::Cursor>) -> tidemark::Result<Vec<Bson>> {
    cur?.map(|d| d.map(|d| d.get("_id").unwrap().clone()))
        .collect()
}

#[test]
fn a_snapshot_sees_collections_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let users = db.collection("users").unwrap();
    let ring = db
        .create_collection(
            "ring",
            Some(CappedOptions {
                size: 16 * 1024,
                max: None,
            }),
        )
        .unwrap();
    for i in 0..100i64 {
        users.insert_one(&doc! {"_id": i, "v": 0}).unwrap();
    }
    for i in 0..20i64 {
        ring.insert_one(&ring_doc(i, 100).0).unwrap();
    }
    let snap = db.begin_read();
    let su = snap.get_collection("users").unwrap();
    let sr = snap.get_collection("ring").unwrap();
    // A collection created after the snapshot began is not in it.
    db.collection("later").unwrap();
    assert!(matches!(
        snap.get_collection("later"),
        Err(Error::CollectionNotFound(_))
    ));
    // Writers go on: new documents, replaced and deleted ones.
    for i in 100..150i64 {
        users.insert_one(&doc! {"_id": i, "v": 0}).unwrap();
    }
    for i in 0..10i64 {
        users.replace_one(&Bson::Int64(i), &doc! {"v": 1}).unwrap();
        users.delete_one(&Bson::Int64(i + 50)).unwrap();
    }
    for i in 20..25i64 {
        ring.insert_one(&ring_doc(i, 100).0).unwrap();
    }
    let before: Vec<Bson> = (0..100i64).map(Bson::Int64).collect();
    assert_eq!(snap_ids(su.find()).unwrap(), before);
    let mut rev = before.clone();
    rev.reverse();
    assert_eq!(snap_ids(su.find_reverse()).unwrap(), rev);
    assert_eq!(su.count().unwrap(), 100);
    assert_eq!(users.count().unwrap(), 140);
    assert_eq!(
        su.find_one(&Bson::Int64(3)).unwrap().unwrap().get_i32("v"),
        Ok(0)
    );
    assert!(su.find_one(&Bson::Int64(55)).unwrap().is_some());
    assert_eq!(su.find_one(&Bson::Int64(120)).unwrap(), None);
    assert_eq!(
        snap_ids(su.find_range(
            Bound::Included(&Bson::Int32(48)),
            Bound::Excluded(&Bson::Int32(52)),
        ))
        .unwrap(),
        (48..52i64).map(Bson::Int64).collect::<Vec<_>>()
    );
    assert_eq!(
        snap_ids(su.find_range_reverse(
            Bound::Included(&Bson::Int32(48)),
            Bound::Excluded(&Bson::Int32(52)),
        ))
        .unwrap(),
        (48..52i64).rev().map(Bson::Int64).collect::<Vec<_>>()
    );
    // The ring: the snapshot sees records 0..20, both ways, though 20..25
    // were appended after it.
    let r20: Vec<Bson> = (0..20i64).map(Bson::Int64).collect();
    assert_eq!(snap_ids(sr.find()).unwrap(), r20);
    let mut r20rev = r20.clone();
    r20rev.reverse();
    assert_eq!(snap_ids(sr.find_reverse()).unwrap(), r20rev);
    assert_eq!(sr.count().unwrap(), 20);
    assert_eq!(sr.find_one(&Bson::Int64(22)).unwrap(), None);
    assert!(sr.find_one(&Bson::Int64(0)).unwrap().is_some());
    // Overwriting the records it sees: its reads report the loss rather
    // than a shorter list.
    for i in 25..200i64 {
        ring.insert_one(&ring_doc(i, 100).0).unwrap();
    }
    assert!(matches!(
        snap_ids(sr.find()),
        Err(Error::CappedPositionLost { .. })
    ));
    assert!(matches!(
        sr.find_one(&Bson::Int64(0)),
        Err(Error::CappedPositionLost { .. })
    ));
    // The regular collection's view is unaffected; a new snapshot sees
    // the present.
    assert_eq!(snap_ids(su.find()).unwrap(), before);
    drop(snap);
    let now = db.begin_read();
    let nr = now.get_collection("ring").unwrap();
    assert_eq!(
        snap_ids(nr.find()).unwrap(),
        snap_ids(Ok(ring.find())).unwrap()
    );
}

#[test]
fn capped_max_documents() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let c = db
        .create_collection(
            "m",
            Some(CappedOptions {
                size: 1 << 20,
                max: Some(5),
            }),
        )
        .unwrap();
    for i in 0..12i64 {
        c.insert_one(&doc! {"_id": i}).unwrap();
    }
    assert_eq!(
        ids(&c, false),
        (7..12i64).map(Bson::Int64).collect::<Vec<_>>()
    );
}

#[test]
fn a_batch_commits_capped_inserts_with_other_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    db.create_collection(
        "oplog",
        Some(CappedOptions {
            size: 1 << 16,
            max: None,
        }),
    )
    .unwrap();
    let kv = db.table("kv").unwrap();
    let mut b = WriteBatch::new();
    b.put("kv", b"x", b"1");
    b.insert_one("oplog", &doc! {"op": "i", "k": "x"}).unwrap();
    db.write(&b).unwrap();
    assert_eq!(kv.get(b"x").unwrap().as_deref(), Some(&b"1"[..]));
    let oplog = db.get_collection("oplog").unwrap();
    assert_eq!(oplog.count().unwrap(), 1);
    // A batch with an invalid part applies nothing.
    let mut b = WriteBatch::new();
    b.put("kv", b"y", b"2");
    b.insert_one("oplog", &doc! {"op": "i", "k": "y"}).unwrap();
    b.put("missing-table", b"z", b"3");
    assert!(matches!(db.write(&b), Err(Error::TableNotFound(_))));
    assert_eq!(kv.get(b"y").unwrap(), None);
    assert_eq!(oplog.count().unwrap(), 1);
}

#[test]
fn tailable_cursor_waits_and_detects_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let db = small_builder().open(dir.path()).unwrap();
    let c = db
        .create_collection(
            "t",
            Some(CappedOptions {
                size: 8192,
                max: None,
            }),
        )
        .unwrap();
    let mut tail = c.tail(Duration::from_millis(50)).unwrap();
    assert!(tail.next_document().unwrap().is_none());
    c.insert_one(&doc! {"_id": 1}).unwrap();
    assert_eq!(tail.next_document().unwrap().unwrap(), doc! {"_id": 1});
    // A writer on another thread wakes a waiting cursor.
    let writer = {
        let c = c.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c.insert_one(&doc! {"_id": 2}).unwrap();
        })
    };
    let mut waiting = c.tail(Duration::from_secs(30)).unwrap();
    assert_eq!(waiting.next_document().unwrap().unwrap(), doc! {"_id": 1});
    let t0 = std::time::Instant::now();
    assert_eq!(waiting.next_document().unwrap().unwrap(), doc! {"_id": 2});
    assert!(t0.elapsed() < Duration::from_secs(30));
    writer.join().unwrap();
    // Fall behind by more than a ring: the next read reports it.
    for i in 3..200i64 {
        c.insert_one(&doc! {"_id": i, "pad": "p".repeat(100)})
            .unwrap();
    }
    assert!(matches!(
        tail.next_document(),
        Err(Error::CappedPositionLost { rid: 2, .. })
    ));
    // A plain cursor that falls behind mid-walk reports it too.
    let mut cur = c.find();
    cur.next().unwrap().unwrap();
    for i in 200..400i64 {
        c.insert_one(&doc! {"_id": i, "pad": "p".repeat(100)})
            .unwrap();
    }
    let rest: Vec<_> = cur.collect();
    assert!(
        matches!(rest.last(), Some(Err(Error::CappedPositionLost { .. }))),
        "{:?}",
        rest.last()
    );
}

fn sim_open(fs: &SimFs, dir: &Path) -> Database {
    sim_try_open(fs, dir).unwrap()
}

fn sim_try_open(fs: &SimFs, dir: &Path) -> tidemark::Result<Database> {
    small_builder().file_system(Arc::new(fs.clone())).open(dir)
}

#[derive(Debug, Clone)]
enum Step {
    Insert { pad: usize, durability: u8 },
    Checkpoint,
    Crash { power_loss: bool },
    Reopen,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        20 => (0usize..1200, 0u8..3).prop_map(|(pad, durability)| Step::Insert { pad, durability }),
        1 => Just(Step::Checkpoint),
        1 => any::<bool>().prop_map(|power_loss| Step::Crash { power_loss }),
        1 => Just(Step::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random sizes, wraps, checkpoints, crashes and reopens against the
    /// model: after a crash the ring holds the model's state after some
    /// prefix of the inserts that includes every acknowledged durable one.
    #[test]
    fn capped_ring_matches_model_across_crashes(
        size in 4096u64..20000,
        steps in proptest::collection::vec(step(), 1..120),
    ) {
        let dir = Path::new("/sim/db");
        let mut fs = SimFs::new();
        let mut db = sim_open(&fs, dir);
        let mut c = db.create_collection("r", Some(CappedOptions { size, max: None })).unwrap();
        // Model states after each insert; index 0 is empty.
        let mut history = vec![ModelRing { size, max: None, head: 0, recs: VecDeque::new() }];
        let (mut durable_fsync, mut durable_write) = (0usize, 0usize);
        let mut next_id = 0i64;
        for s in steps {
            match s {
                Step::Insert { pad, durability } => {
                    let (d, len) = ring_doc(next_id, pad);
                    let dur = [Durability::None, Durability::Write, Durability::Fsync][durability as usize];
                    c.insert_one_with(&d, dur).unwrap();
                    let mut m = history.last().unwrap().clone();
                    m.insert(next_id, len);
                    history.push(m);
                    next_id += 1;
                    match dur {
                        Durability::Fsync => { durable_fsync = history.len() - 1; durable_write = durable_fsync; }
                        Durability::Write => durable_write = history.len() - 1,
                        _ => {}
                    }
                }
                Step::Checkpoint => {
                    db.checkpoint().unwrap();
                    durable_fsync = history.len() - 1;
                    durable_write = durable_fsync;
                }
                Step::Reopen => {
                    drop(c);
                    db.close().unwrap();
                    db = sim_open(&fs, dir);
                    c = db.get_collection("r").unwrap();
                    durable_fsync = history.len() - 1;
                    durable_write = durable_fsync;
                    check_against_model(&c, history.last().unwrap());
                }
                Step::Crash { power_loss } => {
                    let image = fs.crash_image(power_loss);
                    drop(c);
                    drop(db);
                    fs = image;
                    db = sim_open(&fs, dir);
                    c = db.get_collection("r").unwrap();
                    let got = ids(&c, false);
                    let floor = if power_loss { durable_fsync } else { durable_write };
                    let k = (floor..history.len()).find(|&k| {
                        history[k].recs.iter().map(|r| Bson::Int64(r.0)).collect::<Vec<_>>() == got
                    });
                    prop_assert!(k.is_some(), "recovered {:?} matches no state from insert {floor} on", got);
                    let k = k.unwrap();
                    history.truncate(k + 1);
                    check_against_model(&c, &history[k]);
                    let v = db.verify().unwrap();
                    prop_assert!(v.problems.is_empty(), "{:?}", v.problems);
                    durable_fsync = k;
                    durable_write = k;
                }
            }
        }
        check_against_model(&c, history.last().unwrap());
    }
}

/// One I/O fault (a failed or short write, a failed fsync) at each of many
/// points of a capped workload: the failing call and every later write
/// fail; the crash images afterwards (process crash, power loss) reopen to
/// a state of the model that keeps every acknowledged durable insert, with
/// a sound ring.
#[test]
fn capped_inserts_under_io_faults() {
    use common::Fault;
    let dir = Path::new("/sim/faults");
    let size = 8192;
    let plan: Vec<(usize, Durability)> = (0..60)
        .map(|i| {
            let d = [Durability::Write, Durability::Fsync, Durability::None][i % 3];
            ((i * 37) % 700, d)
        })
        .collect();
    // A run: returns the file system, the model states after each insert,
    // the index of the first failing insert (if any), and the durable
    // floors (power loss, process crash) as model indices.
    let run = |fault: Option<Fault>| {
        let fs = SimFs::new();
        *fs.control.fault.lock() = fault;
        let mut history = vec![ModelRing {
            size,
            max: None,
            head: 0,
            recs: VecDeque::new(),
        }];
        let (mut floor_power, mut floor_process) = (0usize, 0usize);
        let Ok(db) = sim_try_open(&fs, dir) else {
            return (fs, history, Some(0), (0, 0));
        };
        let c = match db.create_collection("r", Some(CappedOptions { size, max: None })) {
            Ok(c) => c,
            Err(_) => return (fs, history, Some(0), (0, 0)),
        };
        let mut failed = None;
        for (i, &(pad, d)) in plan.iter().enumerate() {
            if i == 30 {
                match db.checkpoint() {
                    Ok(_) => {
                        floor_power = history.len() - 1;
                        floor_process = floor_power;
                    }
                    Err(_) => {
                        failed = Some(i);
                        break;
                    }
                }
            }
            let (doc, len) = ring_doc(i as i64, pad);
            match c.insert_one_with(&doc, d) {
                Ok(_) => {
                    let mut m = history.last().unwrap().clone();
                    m.insert(i as i64, len);
                    history.push(m);
                    match d {
                        Durability::Fsync => {
                            floor_power = history.len() - 1;
                            floor_process = floor_power;
                        }
                        Durability::Write => floor_process = history.len() - 1,
                        _ => {}
                    }
                }
                Err(_) => {
                    failed = Some(i);
                    // The failing insert's outcome is unknown (it may have
                    // been logged before the failure): its state is allowed
                    // after a crash, as the last one.
                    let mut m = history.last().unwrap().clone();
                    m.insert(i as i64, len);
                    history.push(m);
                    // Every later write is refused too.
                    let (doc, _) = ring_doc(1000 + i as i64, 10);
                    assert!(c.insert_one_with(&doc, Durability::Write).is_err());
                    break;
                }
            }
        }
        drop(c);
        std::mem::forget(db); // a crash: no close, no final checkpoint
        (fs, history, failed, (floor_power, floor_process))
    };
    let (clean, _, failed, _) = run(None);
    assert_eq!(failed, None);
    let (writes, syncs) = (
        clean
            .control
            .writes
            .load(std::sync::atomic::Ordering::SeqCst),
        clean
            .control
            .syncs
            .load(std::sync::atomic::Ordering::SeqCst),
    );
    let mut faults: Vec<Fault> = Vec::new();
    for n in (0..writes).step_by((writes as usize / 40).max(1)) {
        faults.push(Fault::FailWrite(n));
        faults.push(Fault::ShortWrite(n));
    }
    for n in (0..syncs).step_by((syncs as usize / 30).max(1)) {
        faults.push(Fault::FailSync(n));
    }
    let mut failures_seen = 0;
    for fault in faults {
        let (fs, history, failed, (floor_power, floor_process)) = run(Some(fault));
        failures_seen += usize::from(failed.is_some());
        for power_loss in [false, true] {
            let image = fs.crash_image(power_loss);
            *image.control.fault.lock() = None;
            let db = sim_open(&image, dir);
            let c = match db.get_collection("r") {
                Ok(c) => c,
                Err(Error::CollectionNotFound(_)) => {
                    assert!(history.len() == 1 || !power_loss && floor_process == 0);
                    continue;
                }
                Err(e) => panic!("{fault:?}: {e}"),
            };
            let got = ids(&c, false);
            let floor = if power_loss {
                floor_power
            } else {
                floor_process
            };
            let k = (floor..history.len()).find(|&k| {
                history[k]
                    .recs
                    .iter()
                    .map(|r| Bson::Int64(r.0))
                    .collect::<Vec<_>>()
                    == got
            });
            assert!(
                k.is_some(),
                "{fault:?} power_loss={power_loss}: {got:?} is no state from insert {floor} on"
            );
            check_against_model(&c, &history[k.unwrap()]);
            let v = db.verify().unwrap();
            assert!(v.problems.is_empty(), "{fault:?}: {:?}", v.problems);
        }
    }
    assert!(
        failures_seen > 10,
        "only {failures_seen} runs hit their fault"
    );
}
