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

/// 2 MiB cache with eviction workers and frequent checkpoints: every
/// protocol (shadow copies, evicting pages a checkpoint still owes, splits
/// and unlinks under contention) gets exercised.
fn busy_db(dir: &std::path::Path) -> tidemark::Database {
    tidemark::Builder::new()
        .cache_size(2 << 20)
        .eviction_threads(2)
        .checkpoint_interval(Some(Duration::from_millis(20)))
        .open(dir)
        .unwrap()
}

#[test]
fn concurrent_writers_readers_and_checkpoints_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = busy_db(dir.path());
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

/// Queues under concurrency: writers append keys at one end and delete at
/// the other, so leaves empty and are unlinked while scanners walk the
/// tree, eviction works a small cache and checkpoints run. Every scan sees
/// each writer's keys as one gap-free run, in order.
#[test]
fn queues_unlink_leaves_under_concurrent_scans_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = busy_db(dir.path());
    let t = db.table("q").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let key = |w: u64, i: u64| {
        let mut k = w.to_be_bytes().to_vec();
        k.extend_from_slice(&i.to_be_bytes());
        k
    };
    let live = 500u64;
    let writers: Vec<_> = (0..3u64)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..20_000u64 {
                    t.put(key(w, i), [w as u8; 150]).unwrap();
                    if i >= live {
                        assert!(t.delete(key(w, i - live)).unwrap());
                    }
                }
            })
        })
        .collect();
    let scanners: Vec<_> = (0..2)
        .map(|s| {
            let (t, stop) = (t.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut scans = 0;
                while !stop.load(Ordering::Relaxed) {
                    // A scan that outlives the version budget of this small
                    // cache is refused (SnapshotTooOld) and retried.
                    let scan: Result<Vec<Vec<u8>>, _> = if s == 0 {
                        t.iter().map(|kv| kv.map(|(k, _)| k)).collect()
                    } else {
                        t.iter().rev().map(|kv| kv.map(|(k, _)| k)).collect()
                    };
                    let mut entries = match scan {
                        Ok(e) => e,
                        Err(tidemark::Error::SnapshotTooOld) => continue,
                        Err(e) => panic!("{e}"),
                    };
                    if s == 1 {
                        entries.reverse();
                    }
                    assert!(entries.windows(2).all(|p| p[0] < p[1]), "scan out of order");
                    for w in 0..3u64 {
                        let ids: Vec<u64> = entries
                            .iter()
                            .filter(|k| k[..8] == w.to_be_bytes())
                            .map(|k| u64::from_be_bytes(k[8..16].try_into().unwrap()))
                            .collect();
                        assert!(
                            ids.windows(2).all(|p| p[1] == p[0] + 1),
                            "writer {w}: gap in a scan"
                        );
                        assert!(ids.len() as u64 <= live + 1);
                    }
                    scans += 1;
                }
                scans
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let scans: u64 = scanners.into_iter().map(|s| s.join().unwrap()).sum();
    assert!(scans > 0);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert!(
        report.pages < 100,
        "{} pages for {} live keys",
        report.pages,
        3 * live
    );
    assert_eq!(t.iter().count() as u64, 3 * live);
    db.close().unwrap();
}
