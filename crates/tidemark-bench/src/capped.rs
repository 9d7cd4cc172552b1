//! Capped collections under seed 000's workloads (pathology 1).
//!
//! Every workload of SERVER-17561 runs against a capped collection with
//! many inserting threads until the ring has wrapped many times: case 1
//! (small documents, 850 +/- 730 B), case 2 (large, 100 KB +/- 90 KB),
//! case 3 (350 +/- 330 B with a base size that grows), case 4 (case 1
//! rounded up to powers of two), pure GridFS (the seed's file sizes in
//! 255 KB chunks, each file put twice by every thread and then removed,
//! as the oplog entries those operations make), and aggressive (priming
//! with every size from 32 B to 4 MB, then small documents with bursts of
//! 100 x 4 MB). Like the seed's `grabstats`, writers pause at sampling
//! points (every half lap) while the layout is read and the fragmentation
//! ratio computed. The same workloads then run against a regular
//! collection from which each writer deletes the oldest documents once the
//! data passes the ring size: the alternative a user would build.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tidemark::bson::{doc, Binary, Bson, Document};
use tidemark::{CappedOptions, Collection, Database, Durability};

use crate::report::{self, percentile, Target};
use crate::BoxResult;

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub threads: usize,
    /// Ring size in MiB (default 100, also with --quick).
    pub ring_mb: u64,
    /// Laps of the ring each workload writes (default 10; 2 with --quick).
    pub laps: u64,
    /// The smaller ring of the latency-against-ring-size test, in MiB
    /// (default `ring_mb`; 16 with --quick). The other ring is ten times
    /// larger, and both get the same bytes: 20 laps and 2 laps.
    pub size_test_mb: u64,
    /// Only workloads whose name contains this.
    pub only: Option<String>,
    /// Skip the regular-collection alternative.
    pub capped_only: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Workload {
    Small,
    Large,
    Growing,
    Pow2,
    GridFs,
    Aggressive,
}

const WORKLOADS: [Workload; 6] = [
    Workload::Small,
    Workload::Large,
    Workload::Growing,
    Workload::Pow2,
    Workload::GridFs,
    Workload::Aggressive,
];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Small => "case 1 small",
            Workload::Large => "case 2 large",
            Workload::Growing => "case 3 growing",
            Workload::Pow2 => "case 4 powers of 2",
            Workload::GridFs => "pure GridFS",
            Workload::Aggressive => "aggressive",
        }
    }
}

/// The seed's GridFS file sizes.
const FILES: [u64; 19] = [
    41096769, 1886192, 2053004, 46373628, 381256, 5512124, 247320, 3699232, 3834736, 3935780,
    1588448, 1603004, 5587372, 4607272, 5173496, 96968, 249316, 5548184, 5393160,
];
const CHUNK: u64 = 255 * 1024;

/// Makes the documents of one writer, in order.
struct Gen {
    w: Workload,
    rng: rand::rngs::SmallRng,
    n: u64,
    /// GridFS: pending chunk operations (file index, chunk number, put?).
    ops: VecDeque<(usize, u64, bool)>,
    /// Aggressive: priming sizes still to insert; burst countdown.
    prime: Vec<usize>,
    burst_left: u64,
    /// Total bytes inserted by all writers (case 3's base grows with it).
    shared: Arc<AtomicU64>,
    ring: u64,
}

fn padded(p: usize, extra: Document) -> Document {
    let mut d = doc! {"a": "x".repeat(p)};
    d.extend(extra);
    d
}

impl Gen {
    fn new(w: Workload, seed: u64, shared: Arc<AtomicU64>, ring: u64) -> Gen {
        Gen {
            w,
            rng: rand::rngs::SmallRng::seed_from_u64(seed),
            n: 0,
            ops: VecDeque::new(),
            prime: if w == Workload::Aggressive {
                (5..=22).rev().flat_map(|k| [1usize << k; 3]).collect()
            } else {
                Vec::new()
            },
            burst_left: 0,
            shared,
            ring,
        }
    }

    fn spread(&mut self, base: i64, spread: i64) -> usize {
        (base + self.rng.gen_range(-spread..=spread)).max(1) as usize
    }

    fn next(&mut self) -> Document {
        self.n += 1;
        match self.w {
            Workload::Small => padded(self.spread(850, 730), Document::new()),
            Workload::Large => padded(self.spread(100_000, 90_000), Document::new()),
            Workload::Growing => {
                // The seed adds a byte a minute; here a byte per ring
                // fifth written, so the base grows a few bytes a lap.
                let base = 350 + (self.shared.load(Ordering::Relaxed) / (self.ring / 5)) as i64;
                padded(self.spread(base, 330), Document::new())
            }
            Workload::Pow2 => {
                let want = (self.spread(850, 730) + 30).next_power_of_two().max(256);
                // {_id: ObjectId (17 B), a: string}: 4 + 17 + 7 + len + 1.
                padded(want.saturating_sub(29), Document::new())
            }
            Workload::GridFs => {
                if self.ops.is_empty() {
                    for put in [true, true, false] {
                        for (f, &size) in FILES.iter().enumerate() {
                            for c in 0..size.div_ceil(CHUNK) {
                                self.ops.push_back((f, c, put));
                            }
                        }
                    }
                }
                let (f, c, put) = self.ops.pop_front().unwrap_or((0, 0, false));
                if put {
                    let len = (FILES[f] - c * CHUNK).min(CHUNK) as usize;
                    doc! {"op": "i", "ns": "test.fs.chunks", "o": {"files_id": f as i64, "n": c as i64,
                    "data": Bson::Binary(Binary { subtype: tidemark::bson::spec::BinarySubtype::Generic, bytes: vec![7u8; len] })}}
                } else {
                    doc! {"op": "d", "ns": "test.fs.chunks", "o": {"files_id": f as i64, "n": c as i64}}
                }
            }
            Workload::Aggressive => {
                if let Some(p) = self.prime.pop() {
                    return padded(p, Document::new());
                }
                if self.burst_left > 0 {
                    self.burst_left -= 1;
                    return padded(4 << 20, Document::new());
                }
                // A burst of 100 x 4 MB (shared by the writers) every time
                // the small documents have written a fifth of the ring.
                if self.n.is_multiple_of((self.ring / 5 / 200).max(1)) {
                    self.burst_left = 100 / 8;
                }
                padded(self.rng.gen_range(1..200), Document::new())
            }
        }
    }
}

#[derive(Default)]
struct Outcome {
    inserts: u64,
    secs: f64,
    lat_us: Vec<f64>,
    removed: u64,
    removed_min: u64,
    /// Fragmentation ratio at each sampling point.
    frag: Vec<f64>,
    wasted_max: u64,
    /// Discontinuities and validate problems summed over the samples.
    jumps: u64,
    problems: u64,
    /// Seconds the writers spent paused for samples.
    paused: f64,
    file_mib: f64,
    laps: f64,
}

/// The alternative: a regular collection, oldest documents deleted by the
/// writers once the data passes `size`.
struct Fifo {
    q: Mutex<VecDeque<(Bson, u64)>>,
    bytes: AtomicU64,
    size: u64,
    removed: AtomicU64,
}

fn run_one(
    db: &Database,
    coll: &Collection,
    w: Workload,
    a: &Args,
    ring: u64,
    fifo: Option<Arc<Fifo>>,
) -> BoxResult<Outcome> {
    let goal = ring * a.laps;
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(RwLock::new(()));
    let t0 = Instant::now();
    let before = db.stats();
    let mut hs = Vec::new();
    for t in 0..a.threads {
        let (coll, written, stop, pause, fifo) = (
            coll.clone(),
            written.clone(),
            stop.clone(),
            pause.clone(),
            fifo.clone(),
        );
        hs.push(std::thread::spawn(move || -> BoxResult<Vec<f64>> {
            let mut g = Gen::new(w, 1000 + t as u64, written.clone(), ring);
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let d = g.next();
                let len = tidemark::bson::to_vec(&d)?.len() as u64 + 17;
                let _p = pause.read();
                let s = Instant::now();
                let id = coll.insert_one_with(&d, Durability::Write)?;
                if let Some(f) = &fifo {
                    f.q.lock().push_back((id, len));
                    f.bytes.fetch_add(len, Ordering::Relaxed);
                    while f.bytes.load(Ordering::Relaxed) > f.size {
                        let Some((old, l)) = f.q.lock().pop_front() else {
                            break;
                        };
                        coll.delete_one(&old)?;
                        f.bytes.fetch_sub(l, Ordering::Relaxed);
                        f.removed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                lat.push(s.elapsed().as_secs_f64() * 1e6);
                written.fetch_add(len, Ordering::Relaxed);
            }
            Ok(lat)
        }));
    }
    let mut out = Outcome::default();
    let mut next_sample = ring / 2;
    while written.load(Ordering::Relaxed) < goal {
        std::thread::sleep(Duration::from_millis(20));
        if fifo.is_none() && written.load(Ordering::Relaxed) >= next_sample {
            next_sample += ring / 2;
            // Pause the writers (they hold `pause` shared per insert); the
            // pause is not counted in the insert rate.
            let paused = Instant::now();
            let _p = pause.write();
            let v = coll.validate()?;
            out.frag.push(v.fragmentation.unwrap_or(f64::NAN));
            out.jumps += v.discontinuities.unwrap_or(0);
            out.wasted_max = out.wasted_max.max(v.wasted_bytes);
            out.problems += v.problems.len() as u64;
            out.paused += paused.elapsed().as_secs_f64();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in hs {
        out.lat_us
            .extend(h.join().map_err(|_| crate::msg("writer panicked"))??);
    }
    out.secs = t0.elapsed().as_secs_f64() - out.paused;
    out.inserts = out.lat_us.len() as u64;
    out.laps = written.load(Ordering::Relaxed) as f64 / ring as f64;
    let after = db.stats();
    match &fifo {
        None => {
            let v = coll.validate()?;
            if !v.problems.is_empty() || out.problems > 0 {
                return Err(crate::msg(&format!("validate: {:?}", v.problems)));
            }
            out.frag.push(v.fragmentation.unwrap_or(f64::NAN));
            out.jumps += v.discontinuities.unwrap_or(0);
            out.wasted_max = out.wasted_max.max(v.wasted_bytes);
            out.removed = after.capped_records_removed - before.capped_records_removed;
            out.removed_min = after.capped_records_removed_min - before.capped_records_removed_min;
        }
        Some(f) => {
            out.removed = f.removed.load(Ordering::Relaxed);
            out.removed_min = out.removed;
        }
    }
    out.file_mib = after.file_size as f64 / (1 << 20) as f64;
    Ok(out)
}

fn open(dir: &std::path::Path) -> BoxResult<Database> {
    Ok(Database::builder()
        .cache_size(256 << 20)
        .checkpoint_interval(Some(Duration::from_secs(10)))
        .open(dir)?)
}

fn row(w: &str, kind: &str, ring: u64, o: &mut Outcome) -> Value {
    let worst = o.frag.iter().copied().fold(1.0f64, |m, f| {
        if (f - 1.0).abs() > (m - 1.0).abs() {
            f
        } else {
            m
        }
    });
    json!({
        "workload": w, "collection": kind, "ring_bytes": ring, "inserts": o.inserts,
        "inserts_per_s": (o.inserts as f64 / o.secs).round(),
        "p50_us": percentile(&mut o.lat_us, 50.0), "p99_us": percentile(&mut o.lat_us, 99.0),
        "p999_us": percentile(&mut o.lat_us, 99.9), "max_us": percentile(&mut o.lat_us, 100.0),
        "removed_per_insert": o.removed as f64 / o.inserts.max(1) as f64,
        "min_removed_per_insert": o.removed_min as f64 / o.inserts.max(1) as f64,
        "removed_over_min": if o.removed_min == 0 { 1.0 } else { o.removed as f64 / o.removed_min as f64 },
        "wasted_bytes": o.wasted_max, "samples": o.frag.len(), "fragmentation_worst": worst,
        "discontinuities": o.jumps,
        "fragmentation": o.frag, "laps": o.laps, "file_mib": o.file_mib,
    })
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let machine = report::machine(&a.dir);
    let ring = a.ring_mb << 20;
    let mut rows = Vec::new();
    let chosen = WORKLOADS.into_iter().filter(|w| {
        a.only
            .as_ref()
            .is_none_or(|o| w.name().contains(o.as_str()))
    });
    for w in chosen {
        for capped in [true, false] {
            if !capped && a.capped_only {
                continue;
            }
            let dir = tempfile::Builder::new()
                .prefix("tidemark-capped-")
                .tempdir_in(&a.dir)?;
            let db = open(dir.path())?;
            let (coll, fifo) = if capped {
                let c = db.create_collection(
                    "c",
                    Some(CappedOptions {
                        size: ring,
                        max: None,
                    }),
                )?;
                (c, None)
            } else {
                let f = Arc::new(Fifo {
                    q: Mutex::new(VecDeque::new()),
                    bytes: AtomicU64::new(0),
                    size: ring,
                    removed: AtomicU64::new(0),
                });
                (db.collection("c")?, Some(f))
            };
            let mut o = run_one(&db, &coll, w, a, ring, fifo)?;
            let r = row(
                w.name(),
                if capped { "capped" } else { "regular+deletes" },
                ring,
                &mut o,
            );
            if !a.json {
                eprintln!("{}: {}", w.name(), r);
            }
            rows.push(r);
            drop(coll);
            db.close()?;
        }
    }
    // Latency against ring size: case 1 in a ring and in one ten times
    // larger, both given the same bytes (20 laps of the small ring, 2 of the
    // large one), so that only the size differs: not the bytes the page
    // cache, the log and the disk must absorb, nor the share of inserts
    // made before the first wrap.
    let small_ring = a.size_test_mb << 20;
    let mut size_rows = Vec::new();
    for (size, laps) in [(small_ring, 20), (small_ring * 10, 2)] {
        let dir = tempfile::Builder::new()
            .prefix("tidemark-capped-")
            .tempdir_in(&a.dir)?;
        let db = open(dir.path())?;
        let c = db.create_collection("c", Some(CappedOptions { size, max: None }))?;
        let args = Args {
            only: None,
            capped_only: true,
            laps,
            quick: a.quick,
            json: a.json,
            dir: a.dir.clone(),
            threads: a.threads,
            ring_mb: size >> 20,
            size_test_mb: a.size_test_mb,
        };
        let mut o = run_one(&db, &c, Workload::Small, &args, size, None)?;
        let mut r = row(Workload::Small.name(), "capped", size, &mut o);
        r["size_test"] = json!(if size == small_ring { "1x" } else { "10x" });
        if !a.json {
            eprintln!(
                "{} ({} MiB ring, {laps} laps): {}",
                Workload::Small.name(),
                size >> 20,
                r
            );
        }
        size_rows.push(r);
        drop(c);
        db.close()?;
    }

    if !a.json {
        println!(
            "\ncapped: ring {} MiB, {} writer threads, durability write, {} laps per workload; writers paused every half lap to sample the layout",
            a.ring_mb, a.threads, a.laps
        );
        println!(
            "latency against ring size: case 1 in a {} MiB ring (20 laps) and a {} MiB ring (2 laps), the same bytes",
            a.size_test_mb,
            a.size_test_mb * 10
        );
        println!(
            "{:<20} {:<16} {:>9} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>6} {:>7}",
            "workload",
            "collection",
            "ins/s",
            "p50us",
            "p99us",
            "p99.9us",
            "max us",
            "rm/ins",
            "min/ins",
            "rm/min",
            "wasted",
            "frag",
            "file MiB"
        );
        for r in rows.iter().chain(&size_rows) {
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
            println!(
                "{:<20} {:<16} {:>9.0} {:>7.0} {:>7.0} {:>8.0} {:>8.0} {:>8.3} {:>8.3} {:>7.3} {:>8} {:>6} {:>7.0}",
                match r["size_test"].as_str() {
                    Some(t) => format!("{} ({t} {}M)", r["workload"].as_str().unwrap_or(""), r["ring_bytes"].as_u64().unwrap_or(0) >> 20),
                    None => r["workload"].as_str().unwrap_or("").to_string(),
                },
                r["collection"].as_str().unwrap_or(""),
                f("inserts_per_s"), f("p50_us"), f("p99_us"), f("p999_us"), f("max_us"),
                f("removed_per_insert"), f("min_removed_per_insert"), f("removed_over_min"),
                r["wasted_bytes"].as_u64().unwrap_or(0),
                if r["collection"] == "capped" { format!("{:.2}", f("fragmentation_worst")) } else { "-".into() },
                f("file_mib"),
            );
        }
    }
    let mut targets = Vec::new();
    for r in rows.iter().filter(|r| r["collection"] == "capped") {
        let w = r["workload"].as_str().unwrap_or("");
        let worst = r["fragmentation_worst"].as_f64().unwrap_or(f64::NAN);
        targets.push(Target {
            name: format!("fragmentation, worst sample: {w}"),
            measured: worst,
            target: "1.00 (2 decimals)".into(),
            holds: (worst * 100.0).round() == 100.0,
        });
        targets.push(Target::at_most(
            &format!("natural-order discontinuities, all samples: {w}"),
            r["discontinuities"].as_f64().unwrap_or(f64::NAN),
            0.0,
        ));
        let rm = r["removed_over_min"].as_f64().unwrap_or(f64::NAN);
        targets.push(Target {
            name: format!("removed / minimum: {w}"),
            measured: rm,
            target: "1.00 (2 decimals)".into(),
            holds: (rm * 100.0).round() == 100.0,
        });
    }
    let p999 = |i: usize| size_rows[i]["p999_us"].as_f64().unwrap_or(f64::NAN);
    targets.push(Target::at_most(
        &format!(
            "case 1 p99.9 latency, {} MiB ring / {} MiB ring, same bytes",
            a.size_test_mb * 10,
            a.size_test_mb
        ),
        p999(1) / p999(0),
        1.5,
    ));
    let figures = json!({
        "ring_bytes": ring, "threads": a.threads, "laps": a.laps, "durability": "write",
        "rows": rows, "size_test": size_rows,
    });
    Ok(report::finish(a.json, "capped", machine, figures, &targets))
}
