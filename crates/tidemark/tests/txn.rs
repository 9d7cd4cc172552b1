//! Transactions: snapshots, atomic visibility, write conflicts, versions
//! kept within the budget, and atomicity across crashes.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::SimFs;
use rand::{Rng, SeedableRng};
use tidemark::{Database, Durability, Error, WriteBatch};

fn open(fs: &SimFs, dir: &Path) -> Database {
    common::small_builder()
        .file_system(Arc::new(fs.clone()))
        .open(dir)
        .unwrap()
}

fn acct(i: u32) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

fn amount(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8-byte balance"))
}

const ACCOUNTS: u32 = 64;
const START: i64 = 1000;

/// Sums every account through a fresh snapshot, by scan and by point
/// reads; both must equal the invariant total. `None` if the snapshot was
/// too old before it finished.
fn audit(db: &Database) -> Option<(i64, i64)> {
    let snap = db.begin_read();
    let mut scanned = 0;
    let mut n = 0;
    for kv in snap.range::<&[u8], _>("bank", ..).unwrap() {
        match kv {
            Ok((_, v)) => {
                scanned += amount(&v);
                n += 1;
            }
            Err(Error::SnapshotTooOld) => return None,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(n, ACCOUNTS, "a snapshot scan saw {n} accounts");
    let mut pointed = 0;
    for i in 0..ACCOUNTS {
        match snap.get("bank", acct(i)) {
            Ok(v) => pointed += amount(&v.expect("account exists")),
            Err(Error::SnapshotTooOld) => return None,
            Err(e) => panic!("{e}"),
        }
    }
    Some((scanned, pointed))
}

/// Runs `transfers` transfers from `threads` threads while two readers
/// audit; returns (committed transfers, audits that completed).
fn bank_round(db: &Database, transfers: u64, threads: u64, seed: u64) -> (u64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let total = i64::from(ACCOUNTS) * START;
    std::thread::scope(|s| {
        let auditors: Vec<_> = (0..2)
            .map(|_| {
                let (db, stop) = (db.clone(), stop.clone());
                s.spawn(move || {
                    let mut audits = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        if let Some((scanned, pointed)) = audit(&db) {
                            assert_eq!(scanned, total, "a scan saw money appear or vanish");
                            assert_eq!(pointed, total, "point reads saw money appear or vanish");
                            audits += 1;
                        }
                    }
                    audits
                })
            })
            .collect();
        let movers: Vec<_> = (0..threads)
            .map(|t| {
                let (db, done) = (db.clone(), done.clone());
                s.spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed * 1000 + t);
                    let per = transfers / threads;
                    let mut ok = 0;
                    while ok < per {
                        let a = rng.gen_range(0..ACCOUNTS);
                        let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
                        let x = rng.gen_range(1..50);
                        let mut tx = db.begin_write();
                        let (va, vb) = match (tx.get("bank", acct(a)), tx.get("bank", acct(b))) {
                            (Ok(Some(va)), Ok(Some(vb))) => (amount(&va), amount(&vb)),
                            // The tiny budget ran out while this one read.
                            (Err(Error::SnapshotTooOld), _) | (_, Err(Error::SnapshotTooOld)) => {
                                continue
                            }
                            other => panic!("{other:?}"),
                        };
                        tx.put("bank", acct(a), (va - x).to_le_bytes()).unwrap();
                        tx.put("bank", acct(b), (vb + x).to_le_bytes()).unwrap();
                        match tx.commit() {
                            Ok(()) => ok += 1,
                            Err(Error::Conflict(_) | Error::SnapshotTooOld) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                    done.fetch_add(ok, Ordering::Relaxed);
                })
            })
            .collect();
        // Stop the auditors even if a mover panicked, so the test fails
        // instead of hanging.
        let movers: Vec<_> = movers.into_iter().map(|m| m.join()).collect();
        stop.store(true, Ordering::Relaxed);
        for m in movers {
            m.unwrap();
        }
        let audits = auditors.into_iter().map(|a| a.join().unwrap()).sum();
        (done.load(Ordering::Relaxed), audits)
    })
}

fn bank_total(db: &Database) -> i64 {
    common::dump(&db.open_table("bank").unwrap())
        .iter()
        .map(|(_, v)| amount(v))
        .sum()
}

/// Money moves between accounts in write transactions while readers sum
/// every account in snapshots: every sum is the invariant total, also in
/// the crash images taken between rounds and after reopening them.
/// `TIDEMARK_BANK_TRANSFERS` sets the number of transfers (a million for
/// the long run).
#[test]
fn bank_transfers_keep_the_total_in_every_snapshot_and_crash() {
    let transfers: u64 = std::env::var("TIDEMARK_BANK_TRANSFERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    let rounds = 4;
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path());
    db.table("bank").unwrap();
    let mut b = WriteBatch::new();
    for i in 0..ACCOUNTS {
        b.put("bank", acct(i), START.to_le_bytes());
    }
    db.write(&b).unwrap();
    // The accounts are durable from here on, also after a power loss.
    db.checkpoint().unwrap();
    let total = i64::from(ACCOUNTS) * START;
    let (mut committed, mut audits) = (0, 0);
    for round in 0..rounds {
        let (c, a) = bank_round(&db, transfers / rounds, 4, round);
        committed += c;
        audits += a;
        if round % 2 == 1 {
            db.checkpoint().unwrap();
        }
        for power_loss in [false, true] {
            let img = fs.crash_image(power_loss);
            let db2 = open(&img, dir.path());
            assert_eq!(
                bank_total(&db2),
                total,
                "round {round}, power loss {power_loss}"
            );
            assert!(db2.verify().unwrap().is_ok());
        }
    }
    assert_eq!(committed, transfers / rounds / 4 * 4 * rounds);
    assert!(audits > 0, "no audit completed");
    let s = db.stats();
    assert!(
        s.txn_conflicts > 0,
        "4 threads over 64 accounts never conflicted: {s:?}"
    );
    eprintln!(
        "{committed} transfers, {audits} audits, {} conflicts, {} too old",
        s.txn_conflicts, s.snapshot_too_old_errors
    );
    drop(db);
    let db = open(&fs, dir.path());
    assert_eq!(bank_total(&db), total);
}

#[test]
fn concurrent_increments_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path());
    db.table("c")
        .unwrap()
        .put(b"n", 0u64.to_le_bytes())
        .unwrap();
    let threads = 8u64;
    let per = 300u64;
    let wins = AtomicU64::new(0);
    let attempts = AtomicU64::new(0);
    let too_old = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine = 0;
                while mine < per {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    let mut tx = db.begin_write();
                    // The test's tiny version budget can run out while a
                    // preempted transaction waits: that attempt is refused
                    // as too old, not as a conflict.
                    let v = match tx.get("c", b"n") {
                        Ok(v) => v.unwrap(),
                        Err(Error::SnapshotTooOld) => {
                            too_old.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    let n = u64::from_le_bytes(v.try_into().unwrap());
                    tx.put("c", b"n", (n + 1).to_le_bytes()).unwrap();
                    match tx.commit() {
                        Ok(()) => mine += 1,
                        Err(Error::Conflict(_)) => {}
                        Err(Error::SnapshotTooOld) => {
                            too_old.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                wins.fetch_add(mine, Ordering::Relaxed);
            });
        }
    });
    let v = db.open_table("c").unwrap().get(b"n").unwrap().unwrap();
    let n = u64::from_le_bytes(v.try_into().unwrap());
    assert_eq!(n, wins.load(Ordering::Relaxed));
    assert_eq!(n, threads * per);
    // Every other attempt was refused as a conflict or as too old, and
    // counted as such.
    let s = db.stats();
    assert_eq!(
        s.txn_conflicts,
        attempts.load(Ordering::Relaxed) - n - too_old.load(Ordering::Relaxed)
    );
    assert_eq!(s.snapshot_too_old_errors, too_old.load(Ordering::Relaxed));
}

#[test]
fn first_committer_wins_and_the_loser_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path());
    let t = db.table("t").unwrap();
    t.put(b"x", b"0").unwrap();
    let mut a = db.begin_write();
    let mut b = db.begin_write();
    a.put("t", b"x", b"a").unwrap();
    b.put("t", b"other", b"b").unwrap();
    b.put("t", b"x", b"b").unwrap();
    a.commit().unwrap();
    assert!(matches!(b.commit(), Err(Error::Conflict(_))));
    assert_eq!(t.get(b"x").unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(
        t.get(b"other").unwrap(),
        None,
        "the loser applied part of itself"
    );
    // A plain write after a transaction began conflicts with it too.
    let mut c = db.begin_write();
    c.put("t", b"x", b"c").unwrap();
    t.put(b"x", b"plain").unwrap();
    assert!(matches!(c.commit(), Err(Error::Conflict(_))));
    // Disjoint keys do not conflict; read-your-own-writes; rollback.
    let mut d = db.begin_write();
    let mut e = db.begin_write();
    d.put("t", b"d", b"1").unwrap();
    e.put("t", b"e", b"1").unwrap();
    e.delete("t", b"x").unwrap();
    assert_eq!(e.get("t", b"e").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(e.get("t", b"x").unwrap(), None);
    assert_eq!(d.get("t", b"x").unwrap().as_deref(), Some(&b"plain"[..]));
    let seen: Vec<_> = e
        .range::<&[u8], _>("t", ..)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(seen, vec![b"e".to_vec()]);
    d.commit().unwrap();
    e.commit_with(Durability::Fsync).unwrap();
    let mut f = db.begin_write();
    f.put("t", b"f", b"1").unwrap();
    drop(f);
    assert_eq!(
        common::dump(&t),
        vec![
            (b"d".to_vec(), b"1".to_vec()),
            (b"e".to_vec(), b"1".to_vec())
        ]
    );
    assert_eq!(db.stats().txn_conflicts, 2);
}

#[test]
fn a_snapshot_sees_one_state_while_writers_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path());
    let t = db.table("t").unwrap();
    for i in 0..500u32 {
        t.put(i.to_be_bytes(), b"before").unwrap();
    }
    let snap = db.begin_read();
    // Overwrite half, delete a quarter, add new keys; drop and recreate
    // another table.
    for i in 0..500u32 {
        match i % 4 {
            0 | 1 => t.put(i.to_be_bytes(), b"after").unwrap(),
            2 => assert!(t.delete(i.to_be_bytes()).unwrap()),
            _ => {}
        }
        t.put((1000 + i).to_be_bytes(), b"new").unwrap();
    }
    db.table("other").unwrap().put(b"k", b"v").unwrap();
    let fwd: Vec<_> = snap
        .range::<&[u8], _>("t", ..)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(fwd.len(), 500);
    assert!(fwd.iter().all(|(_, v)| v == b"before"));
    let back: Vec<_> = snap
        .range::<&[u8], _>("t", ..)
        .unwrap()
        .rev()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), fwd);
    assert_eq!(
        snap.get("t", 2u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(snap.get("t", 1000u32.to_be_bytes()).unwrap(), None);
    // A table created after the snapshot reads empty through it.
    assert_eq!(snap.get("other", b"k").unwrap(), None);
    let s = db.stats();
    assert_eq!(s.snapshots_active, 1);
    assert!(s.versions_kept >= 500, "{s:?}");
    // Checkpoints go on and write the newest committed state.
    db.checkpoint().unwrap();
    assert_eq!(
        snap.get("t", 0u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    drop(snap);
    let s = db.stats();
    assert_eq!(
        (s.snapshots_active, s.versions_kept, s.versions_bytes),
        (0, 0, 0)
    );
    assert_eq!(
        t.get(0u32.to_be_bytes()).unwrap().as_deref(),
        Some(&b"after"[..])
    );
    // Dropping a table ends what older snapshots can read of it.
    let snap = db.begin_read();
    db.drop_table("other").unwrap();
    db.table("other").unwrap();
    assert!(matches!(
        snap.get("other", b"k"),
        Err(Error::TableDropped(_))
    ));
}

#[test]
fn batches_are_seen_whole_by_plain_reads_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = open(&fs, dir.path());
    let t = db.table("t").unwrap();
    let mut b = WriteBatch::new();
    b.put("t", b"a", 0u64.to_le_bytes())
        .put("t", b"b", 0u64.to_le_bytes());
    db.write(&b).unwrap();
    let stop = AtomicBool::new(false);
    let n = |v: Option<Vec<u8>>| u64::from_le_bytes(v.unwrap().try_into().unwrap());
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=5000u64 {
                let mut b = WriteBatch::new();
                b.put("t", b"a", i.to_le_bytes())
                    .put("t", b"b", i.to_le_bytes());
                db.write(&b).unwrap();
            }
            stop.store(true, Ordering::Relaxed);
        });
        s.spawn(|| {
            let mut checks = 0;
            while !stop.load(Ordering::Relaxed) || checks < 100 {
                // Plain reads: once `a` shows batch i, `b` shows i or later.
                let a = n(t.get(b"a").unwrap());
                let b = n(t.get(b"b").unwrap());
                assert!(b >= a, "saw a={a} then b={b}: half a batch");
                // A snapshot: both from one batch. (The test's tiny budget
                // holds about 800 batches' versions; a reader preempted
                // longer than that is refused, and tries again.)
                let snap = db.begin_read();
                match (snap.get("t", b"b"), snap.get("t", b"a")) {
                    (Ok(sb), Ok(sa)) => {
                        assert_eq!(n(sa), n(sb), "a snapshot saw half a batch");
                        checks += 1;
                    }
                    (Err(Error::SnapshotTooOld), _) | (_, Err(Error::SnapshotTooOld)) => {}
                    (Err(e), _) | (_, Err(e)) => panic!("{e}"),
                }
            }
        });
    });
}

/// Many writers and many short snapshots at once: snapshots come and go so
/// often that the first-snapshot drain and the reclaim of versions run all
/// the time, racing commits. Every snapshot, by point reads and by a scan,
/// sees each writer's pair from one batch.
#[test]
fn short_snapshots_racing_many_writers_see_whole_batches() {
    const WRITERS: u64 = 3;
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let db = common::small_builder()
        .cache_size(4 << 20)
        .version_budget(25)
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .unwrap();
    db.table("t").unwrap();
    let pair = |w: u64| (format!("a{w}").into_bytes(), format!("b{w}").into_bytes());
    let mut b = WriteBatch::new();
    for w in 0..WRITERS {
        let (ka, kb) = pair(w);
        b.put("t", ka, 0u64.to_le_bytes())
            .put("t", kb, 0u64.to_le_bytes());
    }
    db.write(&b).unwrap();
    let running = AtomicU64::new(WRITERS);
    let n = |v: &[u8]| u64::from_le_bytes(v.try_into().unwrap());
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, running) = (&db, &running);
            s.spawn(move || {
                let (ka, kb) = pair(w);
                for i in 1..=20_000u64 {
                    let mut b = WriteBatch::new();
                    b.put("t", &ka, i.to_le_bytes())
                        .put("t", &kb, i.to_le_bytes());
                    db.write(&b).unwrap();
                }
                running.fetch_sub(1, Ordering::Relaxed);
            });
        }
        for _ in 0..3 {
            s.spawn(|| {
                let mut checks = 0u64;
                while running.load(Ordering::Relaxed) > 0 || checks < 50 {
                    let snap = db.begin_read();
                    let scan: Result<Vec<_>, _> =
                        snap.range::<&[u8], _>("t", ..).unwrap().collect();
                    let scan = match scan {
                        Ok(v) => v,
                        Err(Error::SnapshotTooOld) => continue,
                        Err(e) => panic!("{e}"),
                    };
                    assert_eq!(scan.len() as u64, 2 * WRITERS);
                    for w in 0..WRITERS {
                        let (ka, kb) = pair(w);
                        let get = |k: &[u8]| scan.iter().find(|(x, _)| x == k).map(|(_, v)| n(v));
                        assert_eq!(get(&ka), get(&kb), "a scan saw half a batch of writer {w}");
                        match (snap.get("t", &ka), snap.get("t", &kb)) {
                            (Ok(Some(va)), Ok(Some(vb))) => {
                                assert_eq!(n(&va), n(&vb), "point reads saw half a batch");
                                assert_eq!(Some(n(&va)), get(&ka), "scan and gets disagree");
                            }
                            (Err(Error::SnapshotTooOld), _) | (_, Err(Error::SnapshotTooOld)) => {}
                            other => panic!("{other:?}"),
                        }
                    }
                    checks += 1;
                }
            });
        }
    });
    let s = db.stats();
    assert_eq!((s.snapshots_active, s.versions_kept), (0, 0), "{s:?}");
}

/// A snapshot held while ten times the cache is written either reads
/// what it saw or is refused with `SnapshotTooOld`; versions never grow
/// past the budget and writers finish without waiting for it.
#[test]
fn a_long_snapshot_never_holds_more_than_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let cache = (1usize << 20) + (1 << 17);
    let db = common::small_builder()
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..200u32 {
        t.put(i.to_be_bytes(), [1u8; 500]).unwrap();
    }
    let snap = db.begin_read();
    let budget = cache as u64 / 10;
    let mut written = 0usize;
    let mut max_kept = 0;
    let mut i = 0u32;
    while written < 10 * cache {
        t.put((i % 400).to_be_bytes(), [2u8; 500]).unwrap();
        written += 500;
        i += 1;
        max_kept = max_kept.max(db.stats().versions_bytes);
    }
    // One commit's versions may pass the budget before it is enforced.
    assert!(
        max_kept <= budget + 1024,
        "kept {max_kept} bytes, budget {budget}"
    );
    match snap.get("t", 5u32.to_be_bytes()) {
        Ok(v) => assert_eq!(v.as_deref(), Some(&[1u8; 500][..])),
        Err(Error::SnapshotTooOld) => {}
        Err(e) => panic!("{e}"),
    }
    assert!(!snap.is_valid(), "ten caches of changes fit the budget?");
    let s = db.stats();
    assert_eq!(s.snapshots_invalidated, 1);
    assert!(s.snapshot_too_old_errors >= 1);
    // A new snapshot works.
    let fresh = db.begin_read();
    assert_eq!(
        fresh.get("t", 5u32.to_be_bytes()).unwrap().as_deref(),
        Some(&[2u8; 500][..])
    );
}

/// A snapshot keeps seeing values stored in overflow pages (and small ones
/// beside them) after they are overwritten and deleted, through point reads
/// and a scan; newer snapshots see the changes.
/// At 4, 16 and 32 KiB pages. `e` holds a value one byte past what one
/// overflow index page lists (two index levels at 4 KiB pages), or the
/// largest value where that is more (16 and 32 KiB).
#[test]
fn snapshots_keep_overwritten_large_values() {
    for ps in [4096, tidemark::DEFAULT_PAGE_SIZE, 32768] {
        snapshots_keep_overwritten_large_values_at(ps);
    }
}

fn snapshots_keep_overwritten_large_values_at(ps: usize) {
    let dir = tempfile::tempdir().unwrap();
    // Versions may take half the cache: the old `e`, up to 16 MiB, stays
    // under the 80 % past which the oldest snapshot is invalidated.
    let db = Database::builder()
        .page_size(ps)
        .cache_size(64 << 20)
        .version_budget(50)
        .open(dir.path())
        .unwrap();
    let t = db.table("t").unwrap();
    let big = |b: u8, n: usize| vec![b; n];
    let huge = ((ps - 32) / 8 * (ps - 32) + 1).min(tidemark::MAX_VALUE_SIZE);
    t.put(b"a", big(1, 200_000)).unwrap();
    t.put(b"b", big(2, 30)).unwrap();
    t.put(b"c", big(3, 70_000)).unwrap();
    t.put(b"e", big(7, huge)).unwrap();
    let snap = db.begin_read();
    t.put(b"a", big(4, 90_000)).unwrap();
    t.put(b"b", big(5, 150_000)).unwrap();
    t.delete(b"c").unwrap();
    t.put(b"d", big(6, 40_000)).unwrap();
    t.put(b"e", big(8, 10)).unwrap();
    assert_eq!(
        snap.get("t", b"e").unwrap(),
        Some(big(7, huge)),
        "pages of {ps}"
    );
    assert_eq!(snap.get("t", b"a").unwrap(), Some(big(1, 200_000)));
    assert_eq!(snap.get("t", b"b").unwrap(), Some(big(2, 30)));
    assert_eq!(snap.get("t", b"c").unwrap(), Some(big(3, 70_000)));
    assert_eq!(snap.get("t", b"d").unwrap(), None);
    let seen: Vec<(Vec<u8>, usize, u8)> = snap
        .range::<&[u8], _>("t", ..)
        .unwrap()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.len(), v[0])
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (b"a".to_vec(), 200_000, 1),
            (b"b".to_vec(), 30, 2),
            (b"c".to_vec(), 70_000, 3),
            (b"e".to_vec(), huge, 7)
        ]
    );
    let now = db.begin_read();
    assert_eq!(now.get("t", b"b").unwrap(), Some(big(5, 150_000)));
    assert_eq!(now.get("t", b"c").unwrap(), None);
    assert_eq!(now.get("t", b"e").unwrap(), Some(big(8, 10)));
    drop(snap);
    drop(now);
    assert_eq!(
        db.stats().versions_bytes,
        0,
        "pages of {ps}: versions outlived the snapshots"
    );
    assert!(db.verify().unwrap().is_ok(), "pages of {ps}");
}

/// Interleaved transactions against a reference that implements snapshot
/// isolation: every read, every commit outcome and the final state agree.
mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Begin,
        Get(usize, u8),
        Put(usize, u8, u8),
        Delete(usize, u8),
        Commit(usize),
        Rollback(usize),
        Plain(u8, u8),
        Scan(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            2 => Just(Step::Begin),
            4 => (0..4usize, 0..6u8).prop_map(|(t, k)| Step::Get(t, k)),
            4 => (0..4usize, 0..6u8, any::<u8>()).prop_map(|(t, k, v)| Step::Put(t, k, v)),
            1 => (0..4usize, 0..6u8).prop_map(|(t, k)| Step::Delete(t, k)),
            3 => (0..4usize).prop_map(Step::Commit),
            1 => (0..4usize).prop_map(Step::Rollback),
            2 => (0..6u8, any::<u8>()).prop_map(|(k, v)| Step::Plain(k, v)),
            1 => (0..4usize).prop_map(Step::Scan),
        ]
    }

    type State = BTreeMap<u8, u8>;

    struct RefTxn {
        start: usize,
        writes: BTreeMap<u8, Option<u8>>,
    }

    impl RefTxn {
        fn view(&self, history: &[State]) -> State {
            let mut s = history[self.start].clone();
            for (k, v) in &self.writes {
                match v {
                    Some(v) => s.insert(*k, *v),
                    None => s.remove(k),
                };
            }
            s
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn interleaved_transactions_match_snapshot_isolation(steps in proptest::collection::vec(step(), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let fs = SimFs::new();
            let db = open(&fs, dir.path());
            let t = db.table("m").unwrap();
            // history[i]: the committed state after i commits; writer[k]:
            // the commit count after the last commit that wrote k.
            let mut history = vec![State::new()];
            let mut last_write: BTreeMap<u8, usize> = BTreeMap::new();
            let mut txns: Vec<Option<(tidemark::WriteTxn, RefTxn)>> = Vec::new();
            for st in steps {
                match st {
                    Step::Begin => {
                        if txns.len() < 4 {
                            txns.push(Some((db.begin_write(), RefTxn { start: history.len() - 1, writes: BTreeMap::new() })));
                        }
                    }
                    Step::Get(i, k) => if let Some(Some((tx, r))) = txns.get(i) {
                        let got = tx.get("m", [k]).unwrap().map(|v| v[0]);
                        prop_assert_eq!(got, r.view(&history).get(&k).copied());
                    },
                    Step::Put(i, k, v) => if let Some(Some((tx, r))) = txns.get_mut(i) {
                        tx.put("m", [k], [v]).unwrap();
                        r.writes.insert(k, Some(v));
                    },
                    Step::Delete(i, k) => if let Some(Some((tx, r))) = txns.get_mut(i) {
                        tx.delete("m", [k]).unwrap();
                        r.writes.insert(k, None);
                    },
                    Step::Scan(i) => if let Some(Some((tx, r))) = txns.get(i) {
                        let got: State = tx.range::<&[u8], _>("m", ..).unwrap()
                            .map(|kv| { let (k, v) = kv.unwrap(); (k[0], v[0]) }).collect();
                        prop_assert_eq!(got, r.view(&history));
                    },
                    Step::Commit(i) | Step::Rollback(i) => {
                        let Some(slot) = txns.get_mut(i) else { continue };
                        let Some((tx, r)) = slot.take() else { continue };
                        if matches!(st, Step::Rollback(_)) {
                            tx.rollback();
                            continue;
                        }
                        let conflict = r.writes.keys().any(|k| last_write.get(k).is_some_and(|&w| w > r.start));
                        let res = tx.commit();
                        if conflict {
                            prop_assert!(matches!(res, Err(Error::Conflict(_))), "{:?}", res);
                        } else {
                            prop_assert!(res.is_ok(), "{:?}", res);
                            if !r.writes.is_empty() {
                                let mut s = history.last().unwrap().clone();
                                for (k, v) in &r.writes {
                                    match v { Some(v) => s.insert(*k, *v), None => s.remove(k) };
                                }
                                history.push(s);
                                for k in r.writes.keys() {
                                    last_write.insert(*k, history.len() - 1);
                                }
                            }
                        }
                    }
                    Step::Plain(k, v) => {
                        t.put([k], [v]).unwrap();
                        let mut s = history.last().unwrap().clone();
                        s.insert(k, v);
                        history.push(s);
                        last_write.insert(k, history.len() - 1);
                    }
                }
            }
            let got: State = common::dump(&t).into_iter().map(|(k, v)| (k[0], v[0])).collect();
            prop_assert_eq!(&got, history.last().unwrap());
        }
    }
}

/// Empty and inverted ranges are empty, also while a snapshot keeps
/// versions (the versions' own range must not be asked for an inverted
/// interval).
#[test]
fn empty_and_inverted_ranges_are_empty_while_versions_are_kept() {
    use std::ops::Bound::{Excluded, Included};
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let t = db.table("t").unwrap();
    for k in [b"a", b"c", b"m", b"x"] {
        t.put(k, b"1").unwrap();
    }
    let snap = db.begin_read();
    for k in [b"a", b"c", b"m", b"x"] {
        t.put(k, b"2").unwrap();
    }
    let m: &[u8] = b"m";
    let a: &[u8] = b"a";
    type Span<'a> = (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>);
    let ranges: [Span<'_>; 4] = [
        (Included(m), Excluded(a)),
        (Excluded(m), Excluded(m)),
        (Included(m), Excluded(m)),
        (Excluded(m), Included(m)),
    ];
    for r in ranges {
        assert_eq!(t.range::<&[u8], _>(r).count(), 0, "{r:?}");
        assert_eq!(t.range::<&[u8], _>(r).rev().count(), 0, "{r:?}");
        assert_eq!(snap.range::<&[u8], _>("t", r).unwrap().count(), 0, "{r:?}");
        assert_eq!(
            snap.range::<&[u8], _>("t", r).unwrap().rev().count(),
            0,
            "{r:?}"
        );
    }
    assert_eq!(snap.get("t", b"m").unwrap().as_deref(), Some(&b"1"[..]));
}

/// `Range::read_ahead` copies fewer entries out of a leaf than the leaf
/// holds; a snapshot's range must still see exactly its own state, when the
/// caller takes fewer entries than the hint, as many, or more, from either
/// end, while keys around the cut were deleted, overwritten and inserted
/// after the snapshot.
#[test]
fn read_ahead_keeps_a_snapshots_entries_exact() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let t = db.table("t").unwrap();
    let val = |i: u32, tag: u8| vec![tag; 200 + (i as usize % 7) * 50];
    // Even keys before the snapshot; a table of many leaves.
    for i in (0..1200u32).step_by(2) {
        t.put(i.to_be_bytes(), val(i, 1)).unwrap();
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..1200u32)
        .step_by(2)
        .map(|i| (i.to_be_bytes().to_vec(), val(i, 1)))
        .collect();
    let snap = db.begin_read();
    // After it: odd keys inserted between them, a third deleted, a third
    // overwritten.
    for i in 0..1200u32 {
        match (i % 2, i % 3) {
            (1, _) => t.put(i.to_be_bytes(), val(i, 2)).unwrap(),
            (0, 0) => assert!(t.delete(i.to_be_bytes()).unwrap()),
            (0, 1) => t.put(i.to_be_bytes(), val(i, 3)).unwrap(),
            _ => {}
        }
    }
    for ahead in [0usize, 1, 2, 3, 7, 40, 299, 600, 5000] {
        for take in [1usize, 5, 13, 60, 301, usize::MAX] {
            let fwd: Vec<_> = snap
                .range::<&[u8], _>("t", ..)
                .unwrap()
                .read_ahead(ahead)
                .take(take)
                .map(|r| r.unwrap())
                .collect();
            let expect: Vec<_> = want.iter().take(take).cloned().collect();
            assert_eq!(fwd, expect, "forward, ahead {ahead}, take {take}");
            let back: Vec<_> = snap
                .range::<&[u8], _>("t", ..)
                .unwrap()
                .read_ahead(ahead)
                .rev()
                .take(take)
                .map(|r| r.unwrap())
                .collect();
            let expect: Vec<_> = want.iter().rev().take(take).cloned().collect();
            assert_eq!(back, expect, "backward, ahead {ahead}, take {take}");
            // From a key in the middle, and from both ends at once.
            let mid = 601u32.to_be_bytes();
            let from_mid: Vec<_> = snap
                .range::<&[u8], _>("t", mid.as_slice()..)
                .unwrap()
                .read_ahead(ahead)
                .take(take)
                .map(|r| r.unwrap())
                .collect();
            let expect: Vec<_> = want
                .iter()
                .filter(|(k, _)| k.as_slice() >= mid.as_slice())
                .take(take)
                .cloned()
                .collect();
            assert_eq!(
                from_mid, expect,
                "from the middle, ahead {ahead}, take {take}"
            );
            let mut both = snap.range::<&[u8], _>("t", ..).unwrap().read_ahead(ahead);
            let (mut front, mut rear) = (Vec::new(), Vec::new());
            while let Some(kv) = both.next() {
                front.push(kv.unwrap());
                match both.next_back() {
                    Some(kv) => rear.push(kv.unwrap()),
                    None => break,
                }
            }
            rear.reverse();
            front.extend(rear);
            assert_eq!(front, want, "both ends, ahead {ahead}");
        }
    }
    // The live table, with the same hints, sees every change.
    let live: Vec<_> = t.range::<&[u8], _>(..).map(|r| r.unwrap()).collect();
    for ahead in [1usize, 3, 40] {
        let got: Vec<_> = t
            .range::<&[u8], _>(..)
            .read_ahead(ahead)
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, live, "live, ahead {ahead}");
    }
    assert_eq!(live.len(), 600 + 400);
}
