//! YCSB core workloads A-F (and the load phase) on any engine, written
//! from the YCSB workload definitions, with a fixed seed.
//!
//! | workload | operations                      | request distribution |
//! |----------|---------------------------------|----------------------|
//! | load     | insert every record             | record order (hashed keys) |
//! | A        | 50% read, 50% update            | zipfian              |
//! | B        | 95% read, 5% update             | zipfian              |
//! | C        | 100% read                       | zipfian              |
//! | D        | 95% read, 5% insert             | latest               |
//! | E        | 95% scan (1-100 records), 5% insert | zipfian          |
//! | F        | 50% read, 50% read-modify-write | zipfian              |
//!
//! A record is one key ("user" + FNV hash of its number, YCSB's default
//! hashed order) and one value of `--value-size` random bytes (YCSB's ten
//! 100-byte fields stored as one value); an update writes the whole value.
//! Each phase of each engine runs in its own child process of this binary,
//! so peak RSS and bytes written are that engine's alone; `--compare` runs
//! every engine built in, in rounds with the order rotated each round, and
//! reports medians.

pub mod gen;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Value};

use crate::engines::{self, proc_stats, Config, Durability, Engine, Op};
use crate::report::{self, Target};
use crate::{msg, BoxResult};
use gen::Chooser;

/// One YCSB workload: operation mix and request distribution.
#[derive(Clone, Copy)]
pub struct Workload {
    pub name: &'static str,
    read: f64,
    update: f64,
    insert: f64,
    scan: f64,
    rmw: f64,
    dist: Dist,
}

/// Request distribution (YCSB's `requestdistribution`).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Dist {
    Uniform,
    Zipfian,
    Latest,
}

impl Dist {
    pub fn parse(s: &str) -> BoxResult<Self> {
        match s {
            "uniform" => Ok(Dist::Uniform),
            "zipfian" => Ok(Dist::Zipfian),
            "latest" => Ok(Dist::Latest),
            _ => Err(msg(&format!(
                "distribution must be uniform, zipfian or latest, not {s:?}"
            ))),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Zipfian => "zipfian",
            Dist::Latest => "latest",
        }
    }
}

pub const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "a",
        read: 0.5,
        update: 0.5,
        insert: 0.0,
        scan: 0.0,
        rmw: 0.0,
        dist: Dist::Zipfian,
    },
    Workload {
        name: "b",
        read: 0.95,
        update: 0.05,
        insert: 0.0,
        scan: 0.0,
        rmw: 0.0,
        dist: Dist::Zipfian,
    },
    Workload {
        name: "c",
        read: 1.0,
        update: 0.0,
        insert: 0.0,
        scan: 0.0,
        rmw: 0.0,
        dist: Dist::Zipfian,
    },
    Workload {
        name: "d",
        read: 0.95,
        update: 0.0,
        insert: 0.05,
        scan: 0.0,
        rmw: 0.0,
        dist: Dist::Latest,
    },
    Workload {
        name: "e",
        read: 0.0,
        update: 0.0,
        insert: 0.05,
        scan: 0.95,
        rmw: 0.0,
        dist: Dist::Zipfian,
    },
    Workload {
        name: "f",
        read: 0.5,
        update: 0.0,
        insert: 0.0,
        scan: 0.0,
        rmw: 0.5,
        dist: Dist::Zipfian,
    },
];

/// The longest latency the histograms hold (longer ones are recorded as
/// this): ten minutes.
const LATENCY_MAX_NS: u64 = 600_000_000_000;

/// YCSB's longest scan (scan lengths are uniform in 1..=MAX_SCAN).
const MAX_SCAN: usize = 100;

#[derive(Clone)]
pub struct Args {
    pub engines: Vec<String>,
    pub phases: Vec<String>,
    pub records: u64,
    pub ops: u64,
    pub threads: usize,
    pub durability: Durability,
    pub cache_mb: usize,
    pub value_size: usize,
    pub rounds: usize,
    pub seed: u64,
    /// Longest a phase runs, seconds (YCSB's maxexecutiontime).
    pub max_secs: f64,
    /// Overrides every workload's request distribution.
    pub distribution: Option<Dist>,
    /// Each engine process's memory cgroup limit, MB (heap and page cache).
    pub memory_limit_mb: Option<u64>,
    /// Page size of tidemark's database, bytes.
    pub tidemark_page_size: usize,
    /// The cgroup a child joins before it opens its engine.
    pub cgroup: Option<PathBuf>,
    pub json: bool,
    pub dir: PathBuf,
}

/// What one phase of one engine measured.
#[derive(Clone, Debug)]
struct Phase {
    engine: String,
    phase: String,
    ops: u64,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    peak_rss: u64,
    write_bytes: u64,
    not_found: u64,
    /// Records of a time-capped load written afterwards in bulk, unmeasured.
    bulk_loaded: u64,
    durability: String,
    weaker: bool,
}

impl Phase {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.secs.max(1e-9)
    }
    fn to_json(&self) -> Value {
        json!({
            "engine": self.engine, "phase": self.phase, "ops": self.ops, "secs": self.secs,
            "ops_per_sec": self.ops_per_sec(), "p50_us": self.p50_us, "p99_us": self.p99_us,
            "p999_us": self.p999_us, "max_us": self.max_us, "peak_rss": self.peak_rss,
            "write_bytes": self.write_bytes, "not_found": self.not_found, "bulk_loaded": self.bulk_loaded,
            "durability": self.durability, "weaker": self.weaker,
        })
    }
    fn from_json(v: &Value) -> Option<Phase> {
        Some(Phase {
            engine: v["engine"].as_str()?.into(),
            phase: v["phase"].as_str()?.into(),
            ops: v["ops"].as_u64()?,
            secs: v["secs"].as_f64()?,
            p50_us: v["p50_us"].as_f64()?,
            p99_us: v["p99_us"].as_f64()?,
            p999_us: v["p999_us"].as_f64()?,
            max_us: v["max_us"].as_f64()?,
            peak_rss: v["peak_rss"].as_u64()?,
            write_bytes: v["write_bytes"].as_u64()?,
            not_found: v["not_found"].as_u64()?,
            bulk_loaded: v["bulk_loaded"].as_u64()?,
            durability: v["durability"].as_str()?.into(),
            weaker: v["weaker"].as_bool()?,
        })
    }
}

/// Shared state of a phase: how many records exist.
struct Keyspace {
    /// Next record number to insert.
    next: AtomicU64,
    /// Records acknowledged (reads choose below this).
    acked: AtomicU64,
}

/// A thread's random values: slices of a random buffer at random offsets.
struct Values {
    buf: Vec<u8>,
    size: usize,
}

impl Values {
    fn new(rng: &mut SmallRng, size: usize) -> Self {
        let mut buf = vec![0u8; size * 8 + 4096];
        rng.fill_bytes(&mut buf);
        Values { buf, size }
    }
    fn next(&self, rng: &mut SmallRng) -> &[u8] {
        let off = rng.gen_range(0..self.buf.len() - self.size);
        &self.buf[off..off + self.size]
    }
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// Runs one phase on `e` from `threads` threads, for at most `max_secs`
/// (YCSB's `maxexecutiontime`); returns ops, seconds, latency histogram
/// (ns), reads that found nothing, and records a time-capped load left to
/// the unmeasured bulk load.
fn run_phase(
    e: &dyn Engine,
    phase: &str,
    a: &Args,
    ks: &Keyspace,
    round_seed: u64,
) -> BoxResult<(u64, f64, Histogram<u64>, u64, u64)> {
    let wl = WORKLOADS.iter().find(|w| w.name == phase).copied();
    if phase != "load" && wl.is_none() {
        return Err(msg(&format!("unknown workload {phase:?} (load, a..f)")));
    }
    // YCSB sizes the zipfian space for the records plus twice the inserts
    // the run expects.
    let expected_inserts = wl.map_or(0, |w| (a.ops as f64 * w.insert * 2.0) as u64);
    let space = ks.acked.load(Ordering::Relaxed) + expected_inserts;
    let per_thread = |t: usize, total: u64| {
        total / a.threads as u64 + u64::from((t as u64) < total % a.threads as u64)
    };
    let max = std::time::Duration::from_secs_f64(a.max_secs);
    let t0 = Instant::now();
    let results: Vec<BoxResult<(u64, Histogram<u64>, u64)>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..a.threads)
            .map(|t| {
                s.spawn(move || -> BoxResult<(u64, Histogram<u64>, u64)> {
                    let mut rng = SmallRng::seed_from_u64(
                        round_seed
                            ^ gen::fnv64(t as u64 + 1)
                            ^ gen::fnv64(phase.as_bytes()[0] as u64),
                    );
                    let values = Values::new(&mut rng, a.value_size);
                    let mut w = e.worker()?;
                    let mut h = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3)?;
                    let mut not_found = 0u64;
                    let mut done = 0u64;
                    match wl {
                        None => {
                            while t0.elapsed() < max {
                                let n = ks.next.fetch_add(1, Ordering::Relaxed);
                                if n >= a.records {
                                    break;
                                }
                                let k = gen::key(n);
                                let v = values.next(&mut rng);
                                let s = Instant::now();
                                w.put(&k, v)?;
                                h.saturating_record(s.elapsed().as_nanos() as u64);
                                ks.acked.fetch_max(n + 1, Ordering::Relaxed);
                                done += 1;
                            }
                        }
                        Some(wl) => {
                            let mut chooser = match a.distribution.unwrap_or(wl.dist) {
                                Dist::Uniform => Chooser::Uniform,
                                Dist::Zipfian => Chooser::zipfian(space),
                                Dist::Latest => Chooser::latest(ks.acked.load(Ordering::Relaxed)),
                            };
                            for i in 0..per_thread(t, a.ops) {
                                if i % 16 == 0 && t0.elapsed() >= max {
                                    break;
                                }
                                let x: f64 = rng.gen();
                                let s;
                                if x < wl.insert {
                                    let n = ks.next.fetch_add(1, Ordering::Relaxed);
                                    let k = gen::key(n);
                                    let v = values.next(&mut rng);
                                    s = Instant::now();
                                    w.put(&k, v)?;
                                    ks.acked.fetch_max(n + 1, Ordering::Relaxed);
                                } else {
                                    let n =
                                        chooser.next(&mut rng, ks.acked.load(Ordering::Relaxed));
                                    let k = gen::key(n);
                                    let x = x - wl.insert;
                                    if x < wl.read {
                                        s = Instant::now();
                                        not_found += u64::from(w.get(&k)?.is_none());
                                    } else if x < wl.read + wl.update {
                                        let v = values.next(&mut rng);
                                        s = Instant::now();
                                        w.put(&k, v)?;
                                    } else if x < wl.read + wl.update + wl.scan {
                                        let len = rng.gen_range(1..=MAX_SCAN);
                                        s = Instant::now();
                                        w.scan(&k, len)?;
                                    } else {
                                        // The rest of the mix is read-modify-write.
                                        debug_assert!(wl.rmw > 0.0);
                                        let v = values.next(&mut rng);
                                        s = Instant::now();
                                        not_found += u64::from(w.get(&k)?.is_none());
                                        w.put(&k, v)?;
                                    }
                                }
                                h.saturating_record(s.elapsed().as_nanos() as u64);
                                done += 1;
                            }
                        }
                    }
                    Ok((done, h, not_found))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(msg("a benchmark thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let bulk = if wl.is_none() {
        bulk_load(e, a, ks)?
    } else {
        0
    };
    let mut hist = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3)?;
    let (mut ops, mut nf) = (0, 0);
    for r in results {
        let (d, h, n) = r?;
        ops += d;
        nf += n;
        hist.add(&h)?;
    }
    Ok((ops, secs, hist, nf, bulk))
}

/// Loads the records a time-capped load phase did not reach, in commits
/// of 1,000, unmeasured, so every engine runs the workloads on the same
/// records. Returns how many.
fn bulk_load(e: &dyn Engine, a: &Args, ks: &Keyspace) -> BoxResult<u64> {
    let from = ks.next.load(Ordering::Relaxed).min(a.records);
    if from >= a.records {
        return Ok(0);
    }
    let rest: Vec<u64> = (from..a.records).collect();
    let chunks: Vec<&[u64]> = rest.chunks(1000).collect();
    let next_chunk = AtomicU64::new(0);
    std::thread::scope(|s| -> BoxResult<()> {
        let hs: Vec<_> = (0..a.threads)
            .map(|t| {
                let (chunks, next_chunk) = (&chunks, &next_chunk);
                s.spawn(move || -> BoxResult<()> {
                    let mut rng = SmallRng::seed_from_u64(a.seed ^ 0xB01C ^ t as u64);
                    let values = Values::new(&mut rng, a.value_size);
                    let mut w = e.worker()?;
                    loop {
                        let i = next_chunk.fetch_add(1, Ordering::Relaxed) as usize;
                        let Some(chunk) = chunks.get(i) else {
                            return Ok(());
                        };
                        let keys: Vec<Vec<u8>> = chunk.iter().map(|&n| gen::key(n)).collect();
                        let ops: Vec<Op<'_>> = keys
                            .iter()
                            .map(|k| Op::Put(k, values.next(&mut rng)))
                            .collect();
                        w.write(&ops)?;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().map_err(|_| msg("a loading thread panicked"))??;
        }
        Ok(())
    })?;
    ks.next.store(a.records, Ordering::Relaxed);
    ks.acked.store(a.records, Ordering::Relaxed);
    Ok(a.records - from)
}

/// The child process: opens `engine` in a fresh directory under `dir`,
/// runs the phases in order, prints one JSON line per phase.
pub fn child(a: &Args) -> BoxResult<bool> {
    let name = a.engines.first().ok_or_else(|| msg("no engine"))?;
    if let Some(g) = &a.cgroup {
        // Before the engine allocates or reads anything.
        crate::memcg::join(g)?;
    }
    let path = a
        .dir
        .join(format!("tidemark-ycsb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    let cfg = Config {
        tidemark_page_size: a.tidemark_page_size,
        cache_bytes: a.cache_mb << 20,
        durability: a.durability,
        threads: a.threads,
    };
    let result = (|| -> BoxResult<()> {
        let e = engines::open(name, &path, &cfg)?;
        // Loading is a phase whether or not it is reported: the workloads
        // need the records.
        let ks = Keyspace {
            next: AtomicU64::new(0),
            acked: AtomicU64::new(0),
        };
        let mut phases = a.phases.clone();
        if phases.first().map(String::as_str) != Some("load") {
            phases.insert(0, "load".into());
        }
        for (i, p) in phases.iter().enumerate() {
            proc_stats::reset_peak_rss();
            let w0 = proc_stats::write_bytes();
            let (ops, secs, h, nf, bulk) =
                run_phase(&*e, p, a, &ks, a.seed.wrapping_add(i as u64))?;
            let ph = Phase {
                engine: name.clone(),
                phase: p.clone(),
                ops,
                secs,
                p50_us: us(&h, 0.5),
                p99_us: us(&h, 0.99),
                p999_us: us(&h, 0.999),
                max_us: h.max() as f64 / 1000.0,
                peak_rss: proc_stats::peak_rss(),
                write_bytes: proc_stats::write_bytes().saturating_sub(w0),
                not_found: nf,
                bulk_loaded: bulk,
                durability: e.durability_note(),
                weaker: e.weaker(),
            };
            println!("{}", ph.to_json());
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&path);
    result.map(|()| true)
}

/// Runs one engine's child process. The outer error is ours (no process,
/// no cgroup); the inner one says the child failed or was killed.
fn spawn_child(a: &Args, engine: &str) -> BoxResult<Result<Vec<Phase>, String>> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("ycsb-child")
        .args(["--engine", engine])
        .args(["--workloads", &a.phases.join(",")])
        .args(["--records", &a.records.to_string()])
        .args(["--ops", &a.ops.to_string()])
        .args(["--threads", &a.threads.to_string()])
        .args(["--durability", a.durability.name()])
        .args(["--cache-mb", &a.cache_mb.to_string()])
        .args(["--tidemark-page-size", &a.tidemark_page_size.to_string()])
        .args(["--value-size", &a.value_size.to_string()])
        .args(["--seed", &a.seed.to_string()])
        .args(["--max-secs", &a.max_secs.to_string()])
        .args(
            a.distribution
                .map(|d| ["--distribution", d.name()])
                .into_iter()
                .flatten(),
        )
        .arg("--dir")
        .arg(&a.dir);
    let run = crate::memcg::output_within(&mut cmd, a.memory_limit_mb, engine)?;
    if let Err(why) = run.status(engine) {
        return Ok(Err(why));
    }
    let phases: BoxResult<Vec<Phase>> = String::from_utf8_lossy(&run.output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| Phase::from_json(&v))
                .ok_or_else(|| msg(&format!("{engine}: unreadable result {l}")))
        })
        .collect();
    phases.map(Ok)
}

fn median_of(v: &[Phase], f: impl Fn(&Phase) -> f64) -> f64 {
    let mut xs: Vec<f64> = v.iter().map(f).collect();
    report::median(&mut xs)
}

/// The median figures of one engine in one phase over the rounds.
#[derive(Clone)]
struct Summary {
    engine: String,
    /// Operations measured (fewer than asked where the time cap hit).
    ops: f64,
    ops_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    peak_rss_mb: f64,
    written_mb: f64,
    durability: String,
    weaker: bool,
}

fn summarize(runs: &[Phase]) -> Summary {
    Summary {
        engine: runs[0].engine.clone(),
        ops: median_of(runs, |p| p.ops as f64),
        ops_per_sec: median_of(runs, Phase::ops_per_sec),
        p50_us: median_of(runs, |p| p.p50_us),
        p99_us: median_of(runs, |p| p.p99_us),
        p999_us: median_of(runs, |p| p.p999_us),
        max_us: median_of(runs, |p| p.max_us),
        peak_rss_mb: median_of(runs, |p| p.peak_rss as f64 / 1048576.0),
        written_mb: median_of(runs, |p| p.write_bytes as f64 / 1048576.0),
        durability: runs[0].durability.clone(),
        weaker: runs[0].weaker,
    }
}

pub fn run(a: &Args) -> BoxResult<bool> {
    for e in &a.engines {
        if !engines::available().contains(&e.as_str()) {
            return Err(msg(&format!(
                "engine {e:?} is not in this build (built: {}; see BENCHMARKS.md for --features peers)",
                engines::available().join(", ")
            )));
        }
    }
    let mut runs: Vec<Phase> = Vec::new();
    let mut failures = Vec::new();
    for r in 0..a.rounds {
        let n = a.engines.len();
        for i in 0..n {
            // Rotated each round, so no engine always runs first (on a cold
            // page cache) or last.
            let engine = &a.engines[(i + r) % n];
            eprintln!("round {}/{}: {engine}", r + 1, a.rounds);
            let limited = a.memory_limit_mb.is_some();
            let done = spawn_child(a, engine)?;
            if let Some(phases) =
                crate::memcg::tolerate(done, limited, engine, r + 1, &mut failures)?
            {
                runs.extend(phases);
            }
        }
    }
    let mut phases: Vec<String> = a.phases.clone();
    if phases.first().map(String::as_str) != Some("load") {
        phases.insert(0, "load".into());
    }
    let mut tables = Vec::new();
    let mut targets = Vec::new();
    for p in &phases {
        let mut sums: Vec<Summary> = a
            .engines
            .iter()
            .filter_map(|e| {
                let rs: Vec<Phase> = runs
                    .iter()
                    .filter(|x| &x.engine == e && &x.phase == p)
                    .cloned()
                    .collect();
                (!rs.is_empty()).then(|| summarize(&rs))
            })
            .collect();
        let tm = sums
            .iter()
            .find(|s| s.engine == "tidemark")
            .map(|s| s.ops_per_sec);
        if !a.json {
            println!(
                "\nYCSB {}{} ({} records, {} ops, {} threads, {} B values, durability {}, cache {} MB{}, tidemark pages of {} B, median of {} rounds)",
                if p == "load" { "load".to_string() } else { format!("workload {}", p.to_uppercase()) },
                a.distribution.map_or(String::new(), |d| format!(" ({} requests)", d.name())),
                a.records, a.ops, a.threads, a.value_size, a.durability.name(), a.cache_mb,
                a.memory_limit_mb.map_or(String::new(), |m| format!(", {m} MB per process in all")),
                a.tidemark_page_size,
                a.rounds
            );
            println!(
                "{:<11} {:>9} {:>11} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}  durability",
                "engine",
                "ops",
                "ops/s",
                "vs tm",
                "p50 us",
                "p99 us",
                "p99.9 us",
                "max us",
                "RSS MB",
                "written MB"
            );
            for s in &sums {
                println!(
                    "{:<11} {:>9.0} {:>11.0} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.0} {:>9.1} {:>10.1}  {}",
                    s.engine,
                    s.ops,
                    s.ops_per_sec,
                    tm.map_or("-".into(), |t| format!("{:.2}x", s.ops_per_sec / t)),
                    s.p50_us,
                    s.p99_us,
                    s.p999_us,
                    s.max_us,
                    s.peak_rss_mb,
                    s.written_mb,
                    s.durability
                );
            }
        }
        if let Some(t) = tm {
            let peers: Vec<&Summary> = sums.iter().filter(|s| s.engine != "tidemark").collect();
            let name = if p == "load" {
                "load".to_string()
            } else {
                p.to_uppercase()
            };
            match p.as_str() {
                "load" | "a" => {
                    if let Some(best) = peers
                        .iter()
                        .filter(|s| !s.weaker)
                        .map(|s| s.ops_per_sec)
                        .reduce(f64::max)
                    {
                        targets.push(Target::at_least(
                            &format!("YCSB {name}: tidemark / best peer, equal dur."),
                            t / best,
                            1.0,
                        ));
                    }
                }
                "c" | "e" => {
                    if let Some(best) = peers.iter().map(|s| s.ops_per_sec).reduce(f64::max) {
                        targets.push(Target {
                            name: format!("YCSB {name}: tidemark / fastest peer"),
                            measured: t / best,
                            target: ">= 1/1.3".into(),
                            holds: t / best >= 1.0 / 1.3,
                        });
                    }
                }
                _ => {}
            }
        }
        sums.sort_by(|x, y| y.ops_per_sec.total_cmp(&x.ops_per_sec));
        tables.push(json!({
            "phase": p,
            "engines": sums.iter().map(|s| json!({
                "engine": s.engine, "ops": s.ops, "ops_per_sec": s.ops_per_sec,
                "ratio_to_tidemark": tm.map(|t| s.ops_per_sec / t),
                "p50_us": s.p50_us, "p99_us": s.p99_us, "p999_us": s.p999_us, "max_us": s.max_us,
                "peak_rss_mb": s.peak_rss_mb, "written_mb": s.written_mb,
                "durability": s.durability, "weaker": s.weaker,
            })).collect::<Vec<_>>(),
        }));
    }
    let figures = json!({
        "records": a.records, "ops": a.ops, "threads": a.threads, "value_size": a.value_size,
        "durability": a.durability.name(), "cache_mb": a.cache_mb, "rounds": a.rounds, "seed": a.seed,
        "tidemark_page_size": a.tidemark_page_size,
        "distribution": a.distribution.map(Dist::name),
        "memory_limit_mb": a.memory_limit_mb,
        "phases": tables,
        "runs": runs.iter().map(Phase::to_json).collect::<Vec<_>>(),
        "failures": failures,
    });
    if !a.json {
        if !failures.is_empty() {
            println!();
            crate::memcg::print_failures(&failures);
        }
        println!();
    }
    Ok(report::finish(
        a.json,
        "ycsb",
        report::machine(&a.dir),
        figures,
        &targets,
    ))
}

/// The directory a run uses must exist.
pub fn check_dir(dir: &Path) -> BoxResult<()> {
    if dir.is_dir() {
        Ok(())
    } else {
        Err(msg(&format!("{} is not a directory", dir.display())))
    }
}
