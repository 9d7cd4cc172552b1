//! Random operation sequences against a `BTreeMap` model, with checkpoints,
//! clean reopens and crashes (power loss and process kill) in between, and
//! a random durability per commit. After a crash the state must be the
//! model as of some commit (a prefix of the commit order, no holes) no
//! earlier than the last one the crash cannot lose: for a process crash the
//! last `Write` or `Fsync` commit, for a power loss the last `Fsync` commit
//! (or checkpoint, or reopen). Each sequence runs on a database of a
//! random page size.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{dump, SimFs};
use proptest::prelude::*;
use tidemark::Durability;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![
        Just(Durability::None),
        Just(Durability::Write),
        Just(Durability::Fsync)
    ]
}

/// States a crash may bring back: the model after each commit since the
/// last one that kind of crash cannot lose.
struct Survivors {
    process: Vec<Model>,
    power: Vec<Model>,
}

impl Survivors {
    fn new(m: &Model) -> Self {
        Survivors {
            process: vec![m.clone()],
            power: vec![m.clone()],
        }
    }
    fn committed(&mut self, m: &Model, d: Durability) {
        if d == Durability::None {
            self.process.push(m.clone());
        } else {
            self.process = vec![m.clone()];
        }
        if d == Durability::Fsync {
            self.power = vec![m.clone()];
        } else {
            self.power.push(m.clone());
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize, u8, Durability),
    Delete(u16),
    Get(u16),
    /// Puts of `n` consecutive keys from the first, one commit each,
    /// ascending or (when true) descending: runs of ordered inserts, which
    /// split leaves where the run goes rather than in the middle.
    Run(u16, u16, bool, usize, Durability),
    Batch(Vec<(u16, Option<usize>)>, Durability),
    /// Deletes of every `step`-th key in `first..first + n`, one batch:
    /// leaves left sparse, which merge with their siblings.
    Thin(u16, u16, u16, Durability),
    /// Keys from, keys to, reversed, the read-ahead hint, entries taken.
    Scan(u16, u16, bool, Option<u16>, Option<u16>),
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
        30 => (0u16..1500, len.clone(), any::<u8>(), durability()).prop_map(|(k, l, b, d)| Op::Put(k, l, b, d)),
        8 => (0u16..1500).prop_map(Op::Delete),
        6 => (0u16..1500).prop_map(Op::Get),
        3 => (0u16..1500, 1u16..120, any::<bool>(), 0usize..400, durability())
            .prop_map(|(k, n, desc, l, d)| Op::Run(k, n, desc, l, d)),
        4 => (prop::collection::vec((0u16..1500, prop::option::of(0usize..300)), 1..20), durability())
            .prop_map(|(items, d)| Op::Batch(items, d)),
        3 => (0u16..1500, 1u16..800, 1u16..3, durability())
            .prop_map(|(k, n, step, d)| Op::Thin(k, n, step, d)),
        3 => (
            0u16..1500,
            0u16..1500,
            any::<bool>(),
            prop::option::of(0u16..200),
            prop::option::of(0u16..200)
        )
            .prop_map(|(a, b, r, ahead, take)| Op::Scan(a, b, r, ahead, take)),
        3 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => any::<bool>().prop_map(Op::Crash),
    ]
}

fn open(fs: &SimFs, dir: &Path, page_size: usize) -> tidemark::Database {
    common::small_builder()
        .page_size(page_size)
        .file_system(std::sync::Arc::new(fs.clone()))
        .open(dir)
        .unwrap()
}

fn run(ops: Vec<Op>, page_size: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut fs = SimFs::new();
    let mut db = open(&fs, dir.path(), page_size);
    let mut t = db.table("t").unwrap();
    db.checkpoint().unwrap();
    let mut model = Model::new();
    let mut survivors = Survivors::new(&model);
    for op in ops {
        match op {
            Op::Put(k, l, b, d) => {
                t.put_with(key(k), value(l, b), d).unwrap();
                model.insert(key(k), value(l, b));
                survivors.committed(&model, d);
            }
            Op::Delete(k) => {
                assert_eq!(t.delete(key(k)).unwrap(), model.remove(&key(k)).is_some());
                survivors.committed(&model, db.default_durability());
            }
            Op::Get(k) => assert_eq!(t.get(key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Run(first, n, desc, l, d) => {
                let last = first.saturating_add(n).min(1500);
                let ks: Vec<u16> = if desc {
                    (first..last).rev().collect()
                } else {
                    (first..last).collect()
                };
                for k in ks {
                    t.put_with(key(k), value(l, k as u8), d).unwrap();
                    model.insert(key(k), value(l, k as u8));
                    survivors.committed(&model, d);
                }
            }
            Op::Batch(items, d) => {
                let mut b = tidemark::WriteBatch::new();
                b.set_durability(d);
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
                survivors.committed(&model, d);
            }
            Op::Thin(first, n, step, d) => {
                let last = first.saturating_add(n).min(1500);
                let mut b = tidemark::WriteBatch::new();
                b.set_durability(d);
                for k in (first..last).step_by(usize::from(step)) {
                    b.delete("t", key(k));
                    model.remove(&key(k));
                }
                db.write(&b).unwrap();
                survivors.committed(&model, d);
            }
            Op::Scan(a, z, rev, ahead, take) => {
                let (lo, hi) = (key(a.min(z)), key(a.max(z)));
                let mut it = t.range(lo.as_slice()..hi.as_slice());
                if let Some(n) = ahead {
                    it = it.read_ahead(usize::from(n));
                }
                let take = take.map_or(usize::MAX, usize::from);
                let got: Vec<(Vec<u8>, Vec<u8>)> = if rev {
                    it.rev().take(take).map(|r| r.unwrap()).collect()
                } else {
                    it.take(take).map(|r| r.unwrap()).collect()
                };
                let all = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone()));
                let want: Vec<(Vec<u8>, Vec<u8>)> = if rev {
                    all.rev().take(take).collect()
                } else {
                    all.take(take).collect()
                };
                assert_eq!(got, want);
            }
            Op::Checkpoint => {
                db.checkpoint().unwrap();
                survivors = Survivors::new(&model);
            }
            Op::Reopen => {
                db.close().unwrap();
                db = open(&fs, dir.path(), page_size);
                t = db.open_table("t").unwrap();
                survivors = Survivors::new(&model);
            }
            Op::Crash(power_loss) => {
                let image = fs.crash_image(power_loss);
                // The old handle's close would write to the old file system
                // only; the crash image is already taken.
                drop(t);
                drop(db);
                fs = image;
                db = open(&fs, dir.path(), page_size);
                t = db.open_table("t").unwrap();
                let got: Model = dump(&t).into_iter().collect();
                let allowed = if power_loss {
                    &survivors.power
                } else {
                    &survivors.process
                };
                assert!(
                    allowed.contains(&got),
                    "after a {} the state ({} keys) is none of the {} allowed (first has {} keys)",
                    if power_loss {
                        "power loss"
                    } else {
                        "process crash"
                    },
                    got.len(),
                    allowed.len(),
                    allowed[0].len()
                );
                model = got;
                survivors = Survivors::new(&model);
            }
        }
    }
    let got: Model = dump(&t).into_iter().collect();
    assert_eq!(got, model);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn matches_btreemap_model(
        ops in prop::collection::vec(op(), 1..400),
        page_size in prop::sample::select(vec![4096usize, 8192, 16384]),
    ) {
        run(ops, page_size);
    }
}
