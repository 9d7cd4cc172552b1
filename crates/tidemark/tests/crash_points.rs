//! Every crash point of a small workload: the disk stops accepting writes
//! after the N-th write, for every N. Reopening must give exactly the last
//! checkpoint that completed (power loss: only synced bytes survive) or, for
//! a process crash, the last checkpoint whose meta page reached the OS.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{dump, SimFs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The workload: rounds of puts/deletes (with splits, overflow values and a
/// table drop), each followed by a checkpoint. Returns the model after each
/// checkpoint that reported success, and the one being attempted when the
/// disk stopped.
fn workload(fs: &SimFs, dir: &std::path::Path) -> (Vec<Model>, Option<Model>) {
    let mut done = vec![Model::new()];
    // No background eviction worker: application threads evict, so the
    // sequence of writes, and thus each crash point, is deterministic.
    let builder = common::small_builder()
        .eviction_threads(0)
        .file_system(Arc::new(fs.clone()));
    let Ok(db) = builder.open(dir) else {
        return (done, None);
    };
    let mut model = Model::new();
    for round in 0..3u32 {
        let step = (|| -> tidemark::Result<()> {
            let t = db.table("t")?;
            // About 1.4 MB of live data against a 1 MiB cache: dirty pages
            // are evicted to new blocks between checkpoints.
            for i in 0..1600u32 {
                let k = format!("k{:04}", (i * 7 + round * 13) % 1600).into_bytes();
                let v = if i % 400 == 0 {
                    vec![round as u8; 20_000]
                } else {
                    vec![i as u8; 900]
                };
                t.put(&k, &v)?;
                model.insert(k, v);
            }
            for i in 0..20u32 {
                let k = format!("k{:04}", i * 11 + round).into_bytes();
                t.delete(&k)?;
                model.remove(&k);
            }
            if round == 1 {
                db.table("scratch")?.put(b"x", b"y")?;
            }
            if round == 2 {
                db.table("scratch")?.put(b"z", b"y")?;
                db.drop_table("scratch")?;
            }
            Ok(())
        })();
        if round == 0 && step.is_ok() {
            assert!(
                db.stats().pages_evicted_dirty > 0,
                "workload must evict dirty pages between checkpoints"
            );
        }
        if step.is_err() {
            return (done, Some(model));
        }
        match db.checkpoint() {
            Ok(_) => done.push(model.clone()),
            Err(_) => return (done, Some(model)),
        }
    }
    (done, None)
}

fn state(fs: &SimFs, dir: &std::path::Path) -> Model {
    let db = common::small_builder()
        .file_system(Arc::new(fs.clone()))
        .open(dir)
        .expect("reopen after crash");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "verify after crash: {:?}", report.problems);
    match db.open_table("t") {
        Ok(t) => dump(&t).into_iter().collect(),
        Err(tidemark::Error::TableNotFound(_)) => Model::new(),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn every_write_index_recovers_to_a_completed_checkpoint() {
    // Count the writes of an uninterrupted run.
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let (done, _) = workload(&fs, dir.path());
    assert_eq!(done.len(), 4);
    let total = fs.control.writes.load(Ordering::SeqCst);
    assert!(
        total > 50,
        "workload too small to be interesting: {total} writes"
    );
    eprintln!("crash points: {total} writes");

    for n in 0..total {
        let dir = tempfile::tempdir().unwrap();
        let fs = SimFs::new();
        fs.control.limit.store(n, Ordering::SeqCst);
        let (done, _attempt) = workload(&fs, dir.path());
        let last_done = done.last().cloned().unwrap_or_default();

        // Power loss: exactly the last checkpoint that reported success.
        let got = state(&fs.crash_image(true), dir.path());
        assert!(
            got == last_done,
            "power loss at write {n}: state is not the last completed checkpoint ({} vs {} keys)",
            got.len(),
            last_done.len()
        );

        // Process crash: the OS kept every completed write, so a checkpoint
        // whose meta write landed but whose final fsync failed may also be
        // the one found; nothing else may be.
        let got = state(&fs.crash_image(false), dir.path());
        let ok = got == last_done || _attempt.as_ref().is_some_and(|a| &got == a);
        assert!(
            ok,
            "process crash at write {n}: state matches no checkpoint"
        );
    }
}
