//! Snapshots under write load: writer throughput with 0, 1 and 8
//! long-lived readers, side by side, and the readers' own throughput.
//!
//! Writers overwrite random keys of a prefilled table (100-byte values,
//! durability `Write`). Each reader holds one snapshot for as long as the
//! engine keeps it (until `SnapshotTooOld`, then it begins a new one, which
//! is counted), and reads through it: random point reads plus a 100-key
//! range scan every 50 reads. Readers are paced (`--reader-rate` reads per
//! second each): on this 2-core machine, 8 unpaced readers would take the
//! writers' CPU whatever the engine did, and the question is what holding
//! snapshots costs writers (kept versions, no stalls), not how the
//! scheduler shares two cores among nine threads. Configurations are
//! interleaved and repeated; medians are printed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::json;
use tidemark::{Database, Durability, Error, WriteBatch};

use crate::report::{self, median, Target};
use crate::BoxResult;

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub writers: usize,
    pub reader_rate: u64,
    /// Reads a reader does per wake-up (the pacing sleeps between bursts).
    pub burst: u64,
}

const KEYS: u64 = 100_000;
const VALUE: usize = 100;
const READERS: [usize; 3] = [0, 1, 8];

#[derive(Default, Clone)]
struct Sample {
    writes: f64,
    reads: f64,
    too_old: u64,
    snapshots: u64,
    peak_versions_bytes: u64,
}

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn measure(
    db: &Database,
    writers: usize,
    readers: usize,
    (rate, burst): (u64, u64),
    dur: Duration,
) -> BoxResult<Sample> {
    let burst = burst.max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let too_old = Arc::new(AtomicU64::new(0));
    let snapshots = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut hs = Vec::new();
    for w in 0..writers {
        let (db, stop, writes) = (db.clone(), stop.clone(), writes.clone());
        hs.push(std::thread::spawn(move || -> BoxResult<()> {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(w as u64 + 1);
            let t = db.open_table("t")?;
            while !stop.load(Ordering::Relaxed) {
                let k = rng.gen_range(0..KEYS);
                t.put_with(key(k), [rng.gen::<u8>(); VALUE], Durability::Write)?;
                writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    for r in 0..readers {
        let (db, stop, reads, too_old, snapshots) = (
            db.clone(),
            stop.clone(),
            reads.clone(),
            too_old.clone(),
            snapshots.clone(),
        );
        hs.push(std::thread::spawn(move || -> BoxResult<()> {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1000 + r as u64);
            let gap = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
            let start = Instant::now();
            let mut n = 0u64;
            'outer: while !stop.load(Ordering::Relaxed) {
                let snap = db.begin_read();
                snapshots.fetch_add(1, Ordering::Relaxed);
                while !stop.load(Ordering::Relaxed) {
                    // Paced: the n-th read is due at start + n * gap; a
                    // reader sleeps only before each burst of reads.
                    if n.is_multiple_of(burst) {
                        let due = start + gap * n as u32;
                        if let Some(wait) = due.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    n += 1;
                    let k = rng.gen_range(0..KEYS);
                    let r = if n.is_multiple_of(50) {
                        let hi = (k + 100).min(KEYS);
                        snap.range("t", key(k)..key(hi)).and_then(|it| {
                            let mut c = 0;
                            for kv in it {
                                kv?;
                                c += 1;
                            }
                            Ok(c)
                        })
                    } else {
                        snap.get("t", key(k)).and_then(|v| {
                            v.map(|_| 1).ok_or_else(|| {
                                Error::InvalidOption("a prefilled key is missing".into())
                            })
                        })
                    };
                    match r {
                        Ok(c) => {
                            reads.fetch_add(c, Ordering::Relaxed);
                        }
                        Err(Error::SnapshotTooOld) => {
                            too_old.fetch_add(1, Ordering::Relaxed);
                            continue 'outer;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Ok(())
        }));
    }
    let mut peak = 0;
    while t0.elapsed() < dur {
        std::thread::sleep(Duration::from_millis(50));
        peak = peak.max(db.stats().versions_bytes);
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join()
            .map_err(|_| crate::msg("benchmark thread panicked"))??;
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(Sample {
        writes: writes.load(Ordering::Relaxed) as f64 / secs,
        reads: reads.load(Ordering::Relaxed) as f64 / secs,
        too_old: too_old.load(Ordering::Relaxed),
        snapshots: snapshots.load(Ordering::Relaxed),
        peak_versions_bytes: peak,
    })
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let (dur, reps) = if a.quick {
        (Duration::from_millis(2500), 3)
    } else {
        (Duration::from_secs(6), 5)
    };
    let cache: usize = 64 << 20;
    let machine = report::machine(&a.dir);
    let dir = tempfile::Builder::new()
        .prefix("tidemark-snapshots-")
        .tempdir_in(&a.dir)?;
    let db = Database::builder().cache_size(cache).open(dir.path())?;
    db.table("t")?;
    for chunk in 0..KEYS / 1000 {
        let mut b = WriteBatch::new();
        b.set_durability(Durability::None);
        for k in chunk * 1000..(chunk + 1) * 1000 {
            b.put("t", key(k), [k as u8; VALUE]);
        }
        db.write(&b)?;
    }
    db.checkpoint()?;
    // Interleaved repetitions: machine noise hits every configuration.
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); READERS.len()];
    for _ in 0..reps {
        for (i, &r) in READERS.iter().enumerate() {
            samples[i].push(measure(&db, a.writers, r, (a.reader_rate, a.burst), dur)?);
        }
    }
    let budget = db.stats().versions_budget;
    db.close()?;
    let med = |i: usize, f: &dyn Fn(&Sample) -> f64| -> f64 {
        let mut v: Vec<f64> = samples[i].iter().map(f).collect();
        median(&mut v)
    };
    let base = med(0, &|s| s.writes);
    let mut rows = Vec::new();
    for (i, &r) in READERS.iter().enumerate() {
        let w = med(i, &|s| s.writes);
        let reads = med(i, &|s| s.reads);
        let too_old: u64 = samples[i].iter().map(|s| s.too_old).sum();
        let snaps: u64 = samples[i].iter().map(|s| s.snapshots).sum();
        let peak = samples[i]
            .iter()
            .map(|s| s.peak_versions_bytes)
            .max()
            .unwrap_or(0);
        rows.push(json!({
            "readers": r, "writer_ops_per_s": w.round(), "ratio_to_no_readers": w / base.max(1e-9),
            "reader_reads_per_s": reads.round(), "snapshots_begun": snaps, "snapshot_too_old": too_old,
            "peak_versions_bytes": peak,
        }));
    }
    if !a.json {
        println!(
            "\nsnapshots: {} writer thread(s), {KEYS} keys of {VALUE} B, cache {} MiB (versions budget {:.1} MiB), readers paced at {} reads/s each in bursts of {}, {} x {:.1} s per configuration, medians",
            a.writers,
            cache >> 20,
            budget as f64 / (1 << 20) as f64,
            a.reader_rate,
            a.burst,
            reps,
            dur.as_secs_f64()
        );
        println!(
            "{:>8} {:>14} {:>10} {:>14} {:>10} {:>10} {:>14}",
            "readers",
            "writer ops/s",
            "vs 0",
            "reader rows/s",
            "snapshots",
            "too old",
            "peak versions"
        );
        for r in &rows {
            println!(
                "{:>8} {:>14.0} {:>10.3} {:>14.0} {:>10} {:>10} {:>11.1}MiB",
                r["readers"].as_u64().unwrap_or(0),
                r["writer_ops_per_s"].as_f64().unwrap_or(0.0),
                r["ratio_to_no_readers"].as_f64().unwrap_or(0.0),
                r["reader_reads_per_s"].as_f64().unwrap_or(0.0),
                r["snapshots_begun"].as_u64().unwrap_or(0),
                r["snapshot_too_old"].as_u64().unwrap_or(0),
                r["peak_versions_bytes"].as_f64().unwrap_or(0.0) / (1u64 << 20) as f64
            );
        }
    }
    let ratio = |i: usize| rows[i]["ratio_to_no_readers"].as_f64().unwrap_or(f64::NAN);
    let targets = vec![
        Target::at_least(
            "writer ops/s with 1 long-lived reader / with none",
            ratio(1),
            0.8,
        ),
        Target::at_least(
            "writer ops/s with 8 long-lived readers / with none",
            ratio(2),
            0.8,
        ),
    ];
    let figures = json!({
        "writers": a.writers, "keys": KEYS, "value_bytes": VALUE, "cache_bytes": cache,
        "reader_rate_per_s": a.reader_rate, "reader_burst": a.burst, "versions_budget_bytes": budget, "seconds_per_point": dur.as_secs_f64(), "repetitions": reps,
        "rows": rows,
    });
    Ok(report::finish(
        a.json,
        "snapshots",
        machine,
        figures,
        &targets,
    ))
}
