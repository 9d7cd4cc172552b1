//! Every crash point of a small workload: the disk stops accepting writes
//! after the N-th write, for every N. Commits use durability `Write`, so
//! after a power loss (only synced bytes survive) reopening must give
//! exactly the last checkpoint that completed; after a process crash (the
//! OS kept every completed write) it must give every acknowledged commit,
//! plus at most the one in flight, replayed from the log.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::{dump, SimFs};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a run of the workload saw.
struct Run {
    /// The model after each checkpoint that reported success.
    done: Vec<Model>,
    /// The model after the last acknowledged commit.
    acked: Model,
    /// The model had the commit in flight when the disk stopped succeeded.
    attempt: Option<Model>,
}

/// The workload: rounds of batches and single puts/deletes (with splits,
/// overflow values, a table create and drop), each followed by a
/// checkpoint.
fn workload(fs: &SimFs, dir: &std::path::Path) -> Run {
    let mut run = Run {
        done: vec![Model::new()],
        acked: Model::new(),
        attempt: None,
    };
    // No background eviction worker: application threads evict, so the
    // sequence of writes, and thus each crash point, is deterministic.
    let builder = common::small_builder()
        .eviction_threads(0)
        .file_system(Arc::new(fs.clone()));
    let Ok(db) = builder.open(dir) else {
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
                run.acked = next;
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
                &|| t.delete(&k).map(|_| ()),
            );
            if !ok {
                return run;
            }
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
            assert!(
                db.stats().pages_evicted_dirty > 0,
                "workload must evict dirty pages between checkpoints"
            );
        }
        match db.checkpoint() {
            Ok(_) => run.done.push(run.acked.clone()),
            Err(_) => return run,
        }
    }
    run
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
    let run = workload(&fs, dir.path());
    assert_eq!(run.done.len(), 4);
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
        let run = workload(&fs, dir.path());
        let last_done = run.done.last().cloned().unwrap_or_default();

        // Power loss: exactly the last checkpoint that reported success.
        let got = state(&fs.crash_image(true), dir.path());
        assert!(
            got == last_done,
            "power loss at write {n}: state is not the last completed checkpoint ({} vs {} keys)",
            got.len(),
            last_done.len()
        );

        // Process crash: the OS kept every completed write, so every
        // acknowledged commit is there; the one in flight may be too.
        let got = state(&fs.crash_image(false), dir.path());
        let ok = got == run.acked || run.attempt.as_ref().is_some_and(|a| &got == a);
        assert!(
            ok,
            "process crash at write {n}: {} keys, acknowledged commits give {}",
            got.len(),
            run.acked.len()
        );
    }
}
