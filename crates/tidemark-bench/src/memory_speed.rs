//! How fast each CPU reached memory, second by second, beside a workload
//! (`cache-pressure --memory-probe`): how long a miss, a page's copy and
//! a page's read from the load's file took.
//!
//! [`crate::cpu_speed`] times a loop that lives in registers: it sees a
//! core slowed or shared, but not a memory system shared with other
//! tenants of the host, whose traffic lengthens every miss of the
//! last-level cache while the core itself runs at full speed. This probe
//! pins one thread to each CPU; every [`EVERY`] it follows [`HOPS`] links
//! of a chain laid at random over [`BUFFER_BYTES`] (one link per 64-byte
//! line, each link's address depending on the last, so that the hops
//! cannot overlap) and sleeps. A hop is then one trip to memory, and the
//! unit's time is the latency the load's own misses met in that second.
//! Each second's memory speed is a CPU's reference unit time (its fastest
//! seconds, as in [`crate::cpu_speed::per_second`]) over the second's
//! median, averaged over the CPUs.
//!
//! Right after the walk the same thread copies [`COPY_BYTES`] from a
//! random place in its buffer into a block of its own, as the load's
//! reads copy a page out of the operating system's cache: a copy streams,
//! so it feels a memory system short of bandwidth, which a walk of
//! single misses may not. Its speed is figured the same way.
//!
//! Then, into the same block (now cached), it copies a block not
//! touched lately and then the block its first copy took at the unit
//! before, some 5 ms earlier: the age of the page an eviction writes,
//! which the load read a few milliseconds before. While the last-level
//! cache keeps what a thread touched that recently, the second runs
//! faster than the first. (Beside `cache-pressure` here they ran alike:
//! under that load nothing is still cached 5 ms on; BENCHMARKS.md, "The
//! engine's slow seconds are its own".)
//!
//! Given the load's data file, the thread then reads [`COPY_BYTES`] from
//! a random block of it with `pread`, on a descriptor of its own: the
//! load's own read, made by a thread that otherwise sleeps. If the load's
//! reads slow down and these do not, what slows the load is not the
//! operating system's cache nor the memory under it.
//!
//! It costs each CPU about [`HOPS`] misses, three copies and one read (some
//! 130 us on these machines) in 5 ms, and [`BUFFER_BYTES`] of memory per
//! CPU.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

pub use crate::cpu_speed::Sample;

/// Time between units on each CPU.
pub const EVERY: Duration = Duration::from_millis(5);
/// Links followed per unit.
pub const HOPS: usize = 256;
/// Bytes copied per unit: a page of the load.
pub const COPY_BYTES: usize = 16 << 10;
/// Bytes the chain is laid over, per CPU: well past any last-level
/// cache, so that nearly every hop misses it.
pub const BUFFER_BYTES: usize = 64 << 20;

/// One cache line of the chain: the index of the next line, and padding.
#[repr(align(64))]
#[derive(Clone, Copy)]
struct Line {
    next: u32,
    _pad: [u32; 15],
}

/// A single cycle through `n` lines in random order (Sattolo's
/// algorithm), so that a walk from any line visits every line before it
/// comes back.
fn chain(n: usize, seed: u64) -> Vec<Line> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for i in (1..n).rev() {
        let j = rng.gen_range(0..i);
        order.swap(i, j);
    }
    let mut lines = vec![
        Line {
            next: 0,
            _pad: [0; 15]
        };
        n
    ];
    for i in 0..n {
        lines[order[i] as usize].next = order[(i + 1) % n];
    }
    lines
}

/// Follows `hops` links from `*at`, leaving `*at` where it stopped; the
/// time taken, in ns.
fn unit(lines: &[Line], at: &mut u32, hops: usize) -> f64 {
    let t = Instant::now();
    let mut i = *at;
    for _ in 0..hops {
        i = std::hint::black_box(lines[i as usize].next);
    }
    *at = i;
    t.elapsed().as_nanos() as f64
}

/// Copies [`COPY_BYTES`] from line `from` of `lines` into `to`; the
/// time taken, in ns.
fn copy_unit(lines: &[Line], from: usize, to: &mut [Line]) -> f64 {
    let n = to.len().min(lines.len() - from.min(lines.len()));
    let t = Instant::now();
    to[..n].copy_from_slice(std::hint::black_box(&lines[from..from + n]));
    std::hint::black_box(&to[..n]);
    t.elapsed().as_nanos() as f64
}

/// Each CPU's samples: the walks, the copies, the copies into a cached
/// block from a block not touched lately and from the block copied at
/// the unit before, and the reads of the load's file (none without
/// one).
#[derive(Default)]
pub struct Samples {
    pub walks: Vec<Sample>,
    pub copies: Vec<Sample>,
    pub cold_copies: Vec<Sample>,
    pub warm_copies: Vec<Sample>,
    pub reads: Vec<Sample>,
}

/// Reads [`COPY_BYTES`] from a random whole block of `file` (`len` bytes
/// long) into `buf`; the time taken in ns, `None` if the file is shorter
/// than a block or the read failed.
fn read_unit(file: &std::fs::File, len: u64, buf: &mut [u8], rng: &mut impl Rng) -> Option<f64> {
    use std::os::unix::fs::FileExt;
    let blocks = len / COPY_BYTES as u64;
    if blocks == 0 {
        return None;
    }
    let at = rng.gen_range(0..blocks) * COPY_BYTES as u64;
    let t = Instant::now();
    file.read_exact_at(buf, at).ok()?;
    Some(t.elapsed().as_nanos() as f64)
}

/// A running probe.
pub struct Probe {
    threads: crate::pinned::PerCpu<Samples>,
}

impl Probe {
    /// Stops the probe and returns each CPU's samples.
    pub fn finish(self) -> Vec<Samples> {
        self.threads.finish()
    }
}

/// Starts one probe thread per CPU (at most 64), each pinned, each with
/// its own chain, reading `data_file` too once it exists; `None` where
/// threads cannot be pinned. Samples are timed from `start`.
pub fn start(start: Instant, data_file: std::path::PathBuf) -> Option<Probe> {
    let (threads, _) = crate::pinned::PerCpu::start(
        || true,
        move |stop| {
            let mut file: Option<std::fs::File> = None;
            let mut len = 0u64;
            let mut buf = vec![0u8; COPY_BYTES];
            let seed = 0x3e3 ^ start.elapsed().as_nanos() as u64;
            let lines = chain(BUFFER_BYTES / 64, seed);
            let mut block = vec![lines[0]; COPY_BYTES / 64];
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let mut at = 0;
            let mut last_from = None;
            let mut s = Samples::default();
            while !stop.load(Ordering::Relaxed) {
                let ns = unit(&lines, &mut at, HOPS);
                let t = start.elapsed().as_secs_f64();
                s.walks.push((t, ns));
                let from = rng.gen_range(0..lines.len() - block.len());
                let ns = copy_unit(&lines, from, &mut block);
                s.copies.push((t, ns));
                // Two more into the same block, now cached, so that only
                // their sources differ: one not touched lately, and the
                // one the first copy took at the unit before.
                if let Some(last) = last_from {
                    let other = rng.gen_range(0..lines.len() - block.len());
                    let ns = copy_unit(&lines, other, &mut block);
                    s.cold_copies.push((t, ns));
                    let ns = copy_unit(&lines, last, &mut block);
                    s.warm_copies.push((t, ns));
                }
                last_from = Some(from);
                // Opened once the load has made it; its length looked at
                // every 64 units (the file grows).
                if file.is_none() {
                    file = std::fs::File::open(&data_file).ok();
                }
                if let Some(f) = &file {
                    if s.copies.len() % 64 == 1 {
                        len = f.metadata().map_or(len, |m| m.len());
                    }
                    if let Some(ns) = read_unit(f, len, &mut buf, &mut rng) {
                        s.reads.push((t, ns));
                    }
                }
                std::thread::sleep(EVERY);
            }
            s
        },
    )?;
    Some(Probe { threads })
}

/// [`start`] when `on`; says on stderr (unless `json`) when it cannot run.
pub fn start_if(on: bool, json: bool, at: Instant, data_file: std::path::PathBuf) -> Option<Probe> {
    crate::pinned::probe_if(
        on,
        json,
        "memory probe: needs threads that can be pinned",
        || start(at, data_file),
    )
}

/// Pearson's correlation of the pairs; `None` with fewer than three, or
/// when either side does not vary.
pub fn correlation(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let n = pairs.len() as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for &(x, y) in pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Which of a CPU's [`Samples`] a figure is made of.
type Pick = fn(&Samples) -> &Vec<Sample>;

/// Each second's memory speed beside the rates `windows` (median `med`),
/// from the walks (the top level), the copies (`"copy"`), the copies into
/// a cached block from a block not touched lately (`"cold_copy"`) and
/// from the block copied 5 ms before (`"warm_copy"`), and the reads of
/// the load's file (`"file_read"`, where there are any), each as
/// [`kind_figures`] gives it. Returns the walks' speed by second with
/// the figures.
pub fn figures(
    windows: &[f64],
    med: f64,
    per_cpu: &[Samples],
    target: f64,
) -> (Vec<Option<f64>>, serde_json::Value) {
    let tenth = |x: f64| (x * 10.0).round() / 10.0;
    let of = |pick: Pick| -> Vec<Vec<Sample>> { per_cpu.iter().map(|s| pick(s).clone()).collect() };
    let (by_second, mut fig, walk_ns) = kind_figures(windows, med, &of(|s| &s.walks), target);
    fig["buffer_mb"] = serde_json::json!(BUFFER_BYTES >> 20);
    fig["hops"] = serde_json::json!(HOPS);
    fig["median_ns_per_hop"] = serde_json::json!(walk_ns.map(|ns| tenth(ns / HOPS as f64)));
    // The other kinds, each under its key, with its median time in ns;
    // a kind with no sample anywhere (no file to read) is left out.
    let kinds: [(&str, &str, Pick); 4] = [
        ("copy", "median_ns_per_copy", |s| &s.copies),
        ("cold_copy", "median_ns_per_copy", |s| &s.cold_copies),
        ("warm_copy", "median_ns_per_copy", |s| &s.warm_copies),
        ("file_read", "median_ns_per_read", |s| &s.reads),
    ];
    for (key, median_key, pick) in kinds {
        let samples = of(pick);
        if samples.iter().all(|v| v.is_empty()) {
            continue;
        }
        let (_, mut f, ns) = kind_figures(windows, med, &samples, target);
        f["bytes"] = serde_json::json!(COPY_BYTES);
        f[median_key] = serde_json::json!(ns.map(tenth));
        fig[key] = f;
    }
    (by_second, fig)
}

/// One kind of unit's figures beside the rates `windows` (median `med`):
/// the speed by second, its slowest second over its median, the speed in
/// the load's slowest second, the seconds under `target` times the median
/// with the speed in each, and the correlation of rate with speed over
/// the seconds sampled; with the median unit time in ns.
fn kind_figures(
    windows: &[f64],
    med: f64,
    per_cpu: &[Vec<Sample>],
    target: f64,
) -> (Vec<Option<f64>>, serde_json::Value, Option<f64>) {
    let by_second = crate::cpu_speed::per_second(per_cpu, windows.len());
    let mut known: Vec<f64> = by_second.iter().flatten().copied().collect();
    let speed_min = known.iter().copied().reduce(f64::min);
    let speed_med = (!known.is_empty()).then(|| crate::report::median(&mut known));
    let slowest = (0..windows.len()).min_by(|&a, &b| windows[a].total_cmp(&windows[b]));
    let under: Vec<(usize, Option<f64>)> = (0..windows.len())
        .filter(|&i| windows[i] < target * med)
        .map(|i| (i, by_second[i]))
        .collect();
    let pairs: Vec<(f64, f64)> = windows
        .iter()
        .zip(&by_second)
        .filter_map(|(&w, s)| s.map(|s| (w, s)))
        .collect();
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut all: Vec<f64> = per_cpu.iter().flatten().map(|s| s.1).collect();
    let unit_ns = (!all.is_empty()).then(|| crate::report::median(&mut all));
    let fig = serde_json::json!({
        "speed_min_over_median": speed_min.zip(speed_med).map(|(m, d)| round(m / d)),
        "speed_in_slowest_second": slowest.and_then(|i| by_second[i]).map(round),
        "under_target_seconds": under.iter().map(|&(i, s)| serde_json::json!({
            "second": i,
            "rate_over_median": round(windows[i] / med),
            "memory_speed": s.map(round),
        })).collect::<Vec<_>>(),
        "rate_speed_correlation": correlation(&pairs).map(round),
        "speed_by_second": by_second.iter().map(|s| s.map(round)).collect::<Vec<_>>(),
    });
    (by_second, fig, unit_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain is one cycle through every line.
    #[test]
    fn the_chain_visits_every_line_once_per_lap() {
        let n = 1000;
        let lines = chain(n, 7);
        let mut seen = vec![false; n];
        let mut at = 0u32;
        for _ in 0..n {
            assert!(
                !seen[at as usize],
                "line {at} came back before the lap ended"
            );
            seen[at as usize] = true;
            at = lines[at as usize].next;
        }
        assert_eq!(at, 0, "the lap ends where it began");
        assert!(seen.iter().all(|&s| s));
    }

    /// A unit advances the walk by its hops and is timed.
    #[test]
    fn a_unit_walks_its_hops() {
        let lines = chain(64, 1);
        let (mut a, mut b) = (0u32, 0u32);
        assert!(unit(&lines, &mut a, 10) > 0.0);
        for _ in 0..10 {
            b = lines[b as usize].next;
        }
        assert_eq!(a, b);
    }

    /// A copy moves the lines it names, whole.
    #[test]
    fn a_copy_moves_a_pages_worth_of_lines() {
        let lines = chain(1024, 3);
        let mut block = vec![lines[0]; COPY_BYTES / 64];
        assert!(copy_unit(&lines, 100, &mut block) > 0.0);
        assert!((0..block.len()).all(|i| block[i].next == lines[100 + i].next));
    }

    /// A read takes a whole block of the file; a file shorter than a
    /// block gives none.
    #[test]
    fn a_read_takes_a_whole_block() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        std::fs::write(&path, vec![9u8; 3 * COPY_BYTES + 100]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut buf = vec![0u8; COPY_BYTES];
        for _ in 0..20 {
            assert!(read_unit(&f, 3 * COPY_BYTES as u64 + 100, &mut buf, &mut rng).is_some());
            assert!(buf.iter().all(|&b| b == 9));
        }
        assert_eq!(read_unit(&f, 100, &mut buf, &mut rng), None);
    }

    #[test]
    fn correlation_of_known_pairs() {
        let up = [(1.0, 2.0), (2.0, 4.0), (3.0, 6.5)];
        assert!(correlation(&up).unwrap() > 0.99);
        let down = [(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)];
        assert!((correlation(&down).unwrap() + 1.0).abs() < 1e-9);
        assert_eq!(correlation(&[(1.0, 1.0), (2.0, 1.0), (3.0, 1.0)]), None);
        assert_eq!(correlation(&up[..2]), None);
    }

    /// The slowest second and the seconds under target carry the speed
    /// the probe found in them.
    #[test]
    fn figures_set_the_speed_beside_the_slow_seconds() {
        // CPU 0: 10 us a unit, 20 us in second 2, where the rate halves.
        let c0: Vec<Sample> = (0..40)
            .map(|i| {
                (
                    f64::from(i) * 0.1,
                    if (20..30).contains(&i) { 20e3 } else { 10e3 },
                )
            })
            .collect();
        let w = [100.0, 100.0, 50.0, 100.0];
        let c = Samples {
            walks: c0.clone(),
            copies: c0.clone(),
            cold_copies: c0.clone(),
            warm_copies: c0.clone(),
            reads: c0,
        };
        let (by, fig) = figures(&w, 100.0, &[c], 0.7);
        assert_eq!(by, vec![Some(1.0), Some(1.0), Some(0.5), Some(1.0)]);
        assert_eq!(fig["speed_in_slowest_second"], 0.5);
        assert_eq!(fig["under_target_seconds"][0]["second"], 2);
        assert_eq!(fig["under_target_seconds"][0]["memory_speed"], 0.5);
        assert_eq!(fig["rate_speed_correlation"], 1.0);
        assert_eq!(fig["copy"]["speed_in_slowest_second"], 0.5);
        assert_eq!(fig["copy"]["median_ns_per_copy"], 10e3);
        assert_eq!(fig["file_read"]["speed_in_slowest_second"], 0.5);
        assert_eq!(fig["warm_copy"]["speed_in_slowest_second"], 0.5);
        assert_eq!(fig["cold_copy"]["median_ns_per_copy"], 10e3);
    }

    #[test]
    fn the_probe_samples_each_cpu_and_stops() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("data");
        std::fs::write(&path, vec![7u8; 4 * COPY_BYTES]).unwrap();
        let Some(p) = start(Instant::now(), path) else {
            return; // pinning not allowed here: nothing to sample
        };
        std::thread::sleep(Duration::from_millis(300));
        for s in p.finish() {
            assert!(!s.walks.is_empty(), "a CPU gave no walk in 300 ms");
            assert!(!s.reads.is_empty(), "a CPU read nothing of the file");
            assert_eq!(s.walks.len(), s.copies.len(), "a copy follows each walk");
            assert_eq!(
                s.warm_copies.len() + 1,
                s.copies.len(),
                "every copy but the first is copied again at the next unit"
            );
            assert_eq!(s.cold_copies.len(), s.warm_copies.len());
            assert!(s
                .walks
                .iter()
                .chain(&s.copies)
                .all(|&(t, ns)| t >= 0.0 && ns > 0.0));
        }
    }
}
