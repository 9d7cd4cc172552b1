//! Many threads writing, reading and scanning while background eviction
//! and checkpoints run, against a per-thread model; then a reopen must give
//! the same state.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};

const WRITERS: u64 = 4;
const OPS_PER_WRITER: u64 = 6000;

#[test]
fn concurrent_writers_readers_and_checkpoints_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB cache with eviction workers and frequent checkpoints: every
    // protocol (shadow copies, evicting pages a checkpoint still owes,
    // splits under contention) gets exercised.
    let db = tidemark::Builder::new()
        .cache_size(2 << 20)
        .eviction_threads(2)
        .checkpoint_interval(Some(Duration::from_millis(20)))
        .open(dir.path())
        .unwrap();
    let t = db.table("t").unwrap();
    let stop = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut scans = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Keys are "w{writer}-{n}"; each scan must be ordered.
                    let mut prev: Option<Vec<u8>> = None;
                    let it: Box<dyn Iterator<Item = _>> = if r == 0 {
                        Box::new(t.iter())
                    } else {
                        Box::new(t.iter().rev())
                    };
                    let mut complete = true;
                    for kv in it {
                        // A scan is one snapshot; a tiny cache cannot keep
                        // its versions for long, and then it is refused.
                        let (k, v) = match kv {
                            Err(tidemark::Error::SnapshotTooOld) => {
                                complete = false;
                                break;
                            }
                            r => r.unwrap(),
                        };
                        assert_eq!(
                            v.len(),
                            200 + (k.len() % 7),
                            "value does not belong to its key"
                        );
                        if let Some(p) = &prev {
                            assert!(if r == 0 { &k > p } else { &k < p }, "scan out of order");
                        }
                        prev = Some(k);
                    }
                    scans += u64::from(complete);
                }
                scans
            })
        })
        .collect();

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(w);
                let mut model = BTreeMap::new();
                for _ in 0..OPS_PER_WRITER {
                    let k = format!("w{w}-{:05}", rng.gen_range(0..3000)).into_bytes();
                    if rng.gen_bool(0.8) {
                        let v = vec![rng.gen::<u8>(); 200 + (k.len() % 7)];
                        t.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else {
                        assert_eq!(t.delete(&k).unwrap(), model.remove(&k).is_some());
                    }
                    if rng.gen_ratio(1, 50) {
                        let probe = format!("w{w}-{:05}", rng.gen_range(0..3000)).into_bytes();
                        assert_eq!(t.get(&probe).unwrap(), model.get(&probe).cloned());
                    }
                }
                model
            })
        })
        .collect();

    let mut model = BTreeMap::new();
    for w in writers {
        model.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let got: BTreeMap<_, _> = common::dump(&t).into_iter().collect();
    assert_eq!(got, model);
    let s = db.stats();
    eprintln!(
        "stress: dirty evictions {}, checkpoints {}, shadow copies {}, app evictions {}",
        s.pages_evicted_dirty, s.checkpoints, s.checkpoint_shadow_copies, s.app_thread_evictions
    );
    assert!(
        s.pages_evicted_dirty > 0 && s.checkpoints > 1,
        "stress did not exercise eviction and checkpoints: {s:?}"
    );
    assert!(db.verify().unwrap().is_ok());
    drop(t);
    db.close().unwrap();

    let db = tidemark::Database::open(dir.path()).unwrap();
    let got: BTreeMap<_, _> = common::dump(&db.open_table("t").unwrap())
        .into_iter()
        .collect();
    assert_eq!(got, model, "state after reopen");
    assert!(db.verify().unwrap().is_ok());
}
