//! Random operation sequences against a `BTreeMap` model, with checkpoints,
//! clean reopens and crashes (power loss and process kill) in between.
//! A crash must bring back exactly the state of the last checkpoint.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{dump, SimFs};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize, u8),
    Delete(u16),
    Get(u16),
    Batch(Vec<(u16, Option<usize>)>),
    Scan(u16, u16, bool),
    Checkpoint,
    Reopen,
    Crash(bool),
}

fn key(k: u16) -> Vec<u8> {
    format!("key-{k:05}").into_bytes()
}
fn value(len: usize, b: u8) -> Vec<u8> {
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let len = prop_oneof![8 => 0usize..64, 4 => 200usize..1500, 1 => 6000usize..40_000];
    prop_oneof![
        30 => (0u16..1500, len.clone(), any::<u8>()).prop_map(|(k, l, b)| Op::Put(k, l, b)),
        8 => (0u16..1500).prop_map(Op::Delete),
        6 => (0u16..1500).prop_map(Op::Get),
        4 => prop::collection::vec((0u16..1500, prop::option::of(0usize..300)), 1..20).prop_map(Op::Batch),
        3 => (0u16..1500, 0u16..1500, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a, b, r)),
        3 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(Op::Crash),
    ]
}

fn open(fs: &SimFs, dir: &Path) -> tidemark::Database {
    common::small_builder()
        .file_system(std::sync::Arc::new(fs.clone()))
        .open(dir)
        .unwrap()
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = SimFs::new();
    let mut db = open(&fs, dir.path());
    let mut t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut durable = model.clone();
    for op in ops {
        match op {
            Op::Put(k, l, b) => {
                t.put(key(k), value(l, b)).unwrap();
                model.insert(key(k), value(l, b));
            }
            Op::Delete(k) => {
                assert_eq!(t.delete(key(k)).unwrap(), model.remove(&key(k)).is_some());
            }
            Op::Get(k) => assert_eq!(t.get(key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Batch(items) => {
                let mut b = tidemark::WriteBatch::new();
                for (k, v) in items {
                    match v {
                        Some(l) => {
                            b.put("t", key(k), value(l, k as u8));
                            model.insert(key(k), value(l, k as u8));
                        }
                        None => {
                            b.delete("t", key(k));
                            model.remove(&key(k));
                        }
                    }
                }
                db.write(&b).unwrap();
            }
            Op::Scan(a, z, rev) => {
                let (lo, hi) = (key(a.min(z)), key(a.max(z)));
                let mut got: Vec<(Vec<u8>, Vec<u8>)> = if rev {
                    t.range(lo.as_slice()..hi.as_slice())
                        .rev()
                        .map(|r| r.unwrap())
                        .collect()
                } else {
                    t.range(lo.as_slice()..hi.as_slice())
                        .map(|r| r.unwrap())
                        .collect()
                };
                if rev {
                    got.reverse();
                }
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want);
            }
            Op::Checkpoint => {
                db.checkpoint().unwrap();
                durable = model.clone();
            }
            Op::Reopen => {
                db.close().unwrap();
                db = open(&fs, dir.path());
                t = db.open_table("t").unwrap();
                durable = model.clone();
            }
            Op::Crash(power_loss) => {
                let image = fs.crash_image(power_loss);
                // The old handle's close would write to the old file system
                // only; the crash image is already taken.
                drop(t);
                drop(db);
                fs = image;
                db = open(&fs, dir.path());
                t = db.open_table("t").unwrap();
                model = durable.clone();
            }
        }
    }
    let got: BTreeMap<Vec<u8>, Vec<u8>> = dump(&t).into_iter().collect();
    assert_eq!(got, model);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn matches_btreemap_model(ops in prop::collection::vec(op(), 1..400)) {
        run(ops);
    }
}
