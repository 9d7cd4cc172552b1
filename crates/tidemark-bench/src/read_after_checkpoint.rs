//! Pathology 5 (seed 004): after a durability flush, readers must not take
//! page faults or slow down. Reads go through the buffer pool (pread),
//! never mmap, so a checkpoint unmaps nothing.
//!
//! Each round reads for a while, dirties a tenth of the keys, checkpoints,
//! and reads again right after. The throughput target's figure is the
//! median of the rounds' own ratios (after / before, seconds apart). On
//! these shared machines the host's speed can change for ten seconds or
//! more at a time; a change between two rounds then moves both windows of
//! a round alike, where a ratio of the medians of all "before" and all
//! "after" windows could set a fast "before" against a slow "after". The
//! ratio of the medians is printed beside it.
//!
//! Beside each window it prints what else went on in it: the host's
//! steal, the engine's own work that readers could feel (pages read from
//! the file, log segments made or removed, write-backs, the data file's
//! growths and the room populated ahead in it), and with
//! `--speed-probe` the speed the CPUs ran at.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::report::{self, Target};
use crate::BoxResult;

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub threads: usize,
    /// Time a fixed unit of work on each CPU through the rounds
    /// ([`crate::cpu_speed`]) and print the CPUs' speed in each window.
    pub speed_probe: bool,
}

/// What went on in one read window beside the reads.
#[derive(Clone, Copy)]
struct Beside {
    /// Host steal, % of the machine's CPU time.
    steal_pct: Option<f64>,
    pages_read: u64,
    log_segments_made: u64,
    log_segments_removed: u64,
    write_backs: u64,
    file_growths: u64,
    populated_bytes: u64,
    /// Seconds since the probe's start: the window, for the speed probe.
    from: f64,
    to: f64,
}

impl Beside {
    fn json(&self, speed: Option<f64>) -> serde_json::Value {
        json!({
            "steal_pct": self.steal_pct, "pages_read": self.pages_read,
            "log_segments_made": self.log_segments_made,
            "log_segments_removed": self.log_segments_removed,
            "write_backs": self.write_backs, "file_growths": self.file_growths,
            "populated_mb": self.populated_bytes as f64 / 1048576.0, "cpu_speed": speed,
        })
    }
}

/// [`read_phase`], with what went on beside it ([`Beside`]).
fn read_window(
    db: &tidemark::Database,
    t: &tidemark::Table,
    keys: u64,
    threads: usize,
    dur: Duration,
    since: Instant,
) -> BoxResult<(f64, f64, Beside)> {
    let (s0, ticks0) = (db.stats(), report::cpu_ticks());
    let from = since.elapsed().as_secs_f64();
    let (tp, f) = read_phase(t, keys, threads, dur)?;
    let to = since.elapsed().as_secs_f64();
    let (s1, ticks1) = (db.stats(), report::cpu_ticks());
    let beside = Beside {
        steal_pct: report::steal_pct(ticks0, ticks1),
        pages_read: s1.pages_read - s0.pages_read,
        log_segments_made: s1.log_segments_created - s0.log_segments_created,
        log_segments_removed: s1.log_segments_removed - s0.log_segments_removed,
        write_backs: s1.data_write_backs - s0.data_write_backs,
        file_growths: s1.file_growths - s0.file_growths,
        populated_bytes: s1.file_bytes_populated - s0.file_bytes_populated,
        from,
        to,
    };
    Ok((tp, f, beside))
}

/// Reads random hot keys from `threads` threads for `dur`; returns
/// (reads/s, minor faults per 1,000 reads).
fn read_phase(
    t: &tidemark::Table,
    keys: u64,
    threads: usize,
    dur: Duration,
) -> BoxResult<(f64, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let f0 = crate::engines::proc_stats::page_faults().0;
    let t0 = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let (t, stop, reads) = (t.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || -> tidemark::Result<()> {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(i as u64);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.gen_range(0..keys);
                    if t.get(format!("{k:016}"))?.is_none() {
                        return Err(tidemark::Error::TableNotFound("missing key".into()));
                    }
                    n += 1;
                }
                reads.fetch_add(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        h.join().map_err(|_| crate::msg("reader panicked"))??;
    }
    let el = t0.elapsed().as_secs_f64();
    let faults = crate::engines::proc_stats::page_faults().0 - f0;
    let n = reads.load(Ordering::Relaxed) as f64;
    Ok((n / el, 1000.0 * faults as f64 / n.max(1.0)))
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let d = tempfile::tempdir_in(&a.dir)?;
    let cache_mb = if a.quick { 256 } else { 1024 };
    let db = tidemark::Builder::new()
        .cache_size(cache_mb << 20)
        .checkpoint_interval(None)
        .open(d.path())?;
    let t = db.table("t")?;
    let value = vec![0x42u8; 200];
    let keys = ((cache_mb << 20) / 2 / 300) as u64;
    for i in 0..keys {
        t.put(format!("{i:016}"), &value)?;
    }
    db.checkpoint()?;
    let dur = Duration::from_secs(if a.quick { 2 } else { 5 });
    let rounds = if a.quick { 3 } else { 5 };
    let (mut before, mut after, mut fb, mut fa, mut ck) = (vec![], vec![], vec![], vec![], vec![]);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(99);
    // Warm the cache once.
    read_phase(&t, keys, a.threads, Duration::from_millis(500))?;
    let since = Instant::now();
    let probe = crate::cpu_speed::start_if(a.speed_probe, a.json, since);
    let mut beside: Vec<[Beside; 2]> = Vec::new();
    for _ in 0..rounds {
        let (tp, f, b0) = read_window(&db, &t, keys, a.threads, dur, since)?;
        before.push(tp);
        fb.push(f);
        // Modify a tenth of the pages and flush them: the durability step
        // that, with mmap + fsync, made readers fault afterwards.
        for _ in 0..keys / 10 {
            let k = rng.gen_range(0..keys);
            t.put(format!("{k:016}"), &value)?;
        }
        let c0 = Instant::now();
        db.checkpoint()?;
        ck.push(c0.elapsed().as_secs_f64() * 1000.0);
        let (tp, f, b1) = read_window(&db, &t, keys, a.threads, dur, since)?;
        after.push(tp);
        fa.push(f);
        beside.push([b0, b1]);
    }
    let windows: Vec<(f64, f64)> = beside.iter().flatten().map(|b| (b.from, b.to)).collect();
    let speeds = match probe {
        Some(p) => crate::cpu_speed::over_windows(&p.finish(), &windows),
        None => vec![None; windows.len()],
    };
    let m = |v: &mut Vec<f64>| report::median(v);
    let ratios: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a / b.max(1.0))
        .collect();
    // `median` sorts what it is given: the rounds stay in order for the
    // table and the JSON below, so it gets copies of them.
    let paired = m(&mut ratios.clone());
    let (b, af) = (m(&mut before.clone()), m(&mut after.clone()));
    let of_medians = af / b.max(1.0);
    let (fbm, fam) = (m(&mut fb), m(&mut fa));
    if !a.json {
        println!(
            "{} keys ({} MB cache), {} reader threads, {} rounds of {:?}, checkpoint {:.0} ms",
            keys,
            cache_mb,
            a.threads,
            rounds,
            dur,
            m(&mut ck)
        );
        println!(
            "{:>22} {:>14} {:>22}",
            "", "reads/s", "minor faults/1k reads"
        );
        println!("{:>22} {:>14.0} {:>22.4}", "before checkpoint", b, fbm);
        println!("{:>22} {:>14.0} {:>22.4}", "right after", af, fam);
        println!(
            "{:>8} {:>16} {:>16} {:>14}",
            "round", "before reads/s", "after reads/s", "after/before"
        );
        for (i, ((b, a), r)) in before.iter().zip(&after).zip(&ratios).enumerate() {
            println!("{:>8} {:>16.0} {:>16.0} {:>14.3}", i + 1, b, a, r);
        }
        println!("after / before from the medians above: {of_medians:.3}");
        println!(
            "beside each window: host steal, the CPUs' speed (--speed-probe), and the engine's"
        );
        println!(
            "pages read from the data file, log segments made / removed, data-file write-backs,"
        );
        println!("the data file's growths and MB populated ahead in it:");
        println!(
            "{:>8} {:>7} {:>8} {:>7} {:>11} {:>9} {:>8} {:>12} {:>8} {:>10}",
            "round",
            "window",
            "steal %",
            "speed",
            "pages read",
            "segs made",
            "removed",
            "write-backs",
            "growths",
            "populated"
        );
        let opt =
            |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
        for (i, pair) in beside.iter().enumerate() {
            for (j, (b, name)) in pair.iter().zip(["before", "after"]).enumerate() {
                println!(
                    "{:>8} {:>7} {:>8} {:>7} {:>11} {:>9} {:>8} {:>12} {:>8} {:>10.1}",
                    i + 1,
                    name,
                    opt(b.steal_pct, 2),
                    opt(speeds[2 * i + j], 3),
                    b.pages_read,
                    b.log_segments_made,
                    b.log_segments_removed,
                    b.write_backs,
                    b.file_growths,
                    b.populated_bytes as f64 / 1048576.0
                );
            }
        }
    }
    let targets = [
        Target::below("minor faults per 1,000 reads after checkpoint", fam, 1.0),
        Target::at_least(
            "read throughput after / before, paired median",
            paired,
            0.95,
        ),
    ];
    let figures = json!({"keys": keys, "cache_mb": cache_mb, "threads": a.threads, "rounds": rounds,
        "reads_per_s_before": b, "reads_per_s_after": af, "faults_per_1k_before": fbm, "faults_per_1k_after": fam,
        "rounds_reads_per_s_before": before, "rounds_reads_per_s_after": after,
        "after_before_paired_median": paired, "after_before_of_medians": of_medians,
        "checkpoint_ms": m(&mut ck), "quick": a.quick,
        "rounds_beside": beside.iter().enumerate().map(|(i, [b0, b1])| json!({
            "before": b0.json(speeds[2 * i]), "after": b1.json(speeds[2 * i + 1]),
        })).collect::<Vec<_>>()});
    drop(t);
    db.close()?;
    Ok(report::finish(
        a.json,
        "read-after-checkpoint",
        report::machine(&a.dir),
        figures,
        &targets,
    ))
}
