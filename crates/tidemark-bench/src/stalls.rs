//! How long this machine itself keeps a thread from running, with no
//! database at all (`tidemark-bench stalls`).
//!
//! One thread per CPU, each pinned to its CPU, reads the monotonic clock
//! in a loop and keeps the longest gap between two readings, and how many
//! gaps passed 5, 20 and 50 ms. Nothing in the loop waits, so a gap is
//! time the thread was not running: another thread or the kernel had the
//! CPU, or the host did not run the virtual CPU at all. Two phases:
//!
//! - *spin*: the loop alone;
//! - *touch*: the loop also writes one byte into each 4 KiB page of
//!   memory it has just allocated, up to a cap, so every step is a first
//!   touch of memory. On a virtual machine whose host hands out memory
//!   lazily (or took it back), a first touch waits for the host.
//!
//! The figures say how much of a latency bound the machine leaves to the
//! engine: `cache-pressure`'s worst insert (under 20 ms) cannot be lower
//! than the gaps a thread of its sees, and its run grows the operating
//! system's page cache by the size of its data file, which is first
//! touches too (BENCHMARKS.md, cache-pressure, "Evictions kept out of the
//! write-back step in flight"). The target row compares the spin phase's
//! longest gap with that bound.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::report::{self, Target};
use crate::BoxResult;

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
}

/// Bytes between two touched bytes: the smallest page.
const PAGE: usize = 4096;
/// Memory each thread allocates at a time in the touch phase.
const CHUNK: usize = 64 << 20;

/// What one thread saw in one phase.
#[derive(Clone, Copy, Default)]
struct Gaps {
    longest: Duration,
    over_5ms: u64,
    over_20ms: u64,
    over_50ms: u64,
    touched_bytes: usize,
}

impl Gaps {
    fn add(&mut self, gap: Duration) {
        self.longest = self.longest.max(gap);
        let ms = gap.as_secs_f64() * 1e3;
        self.over_5ms += u64::from(ms > 5.0);
        self.over_20ms += u64::from(ms > 20.0);
        self.over_50ms += u64::from(ms > 50.0);
    }
}

/// Runs one thread's loop for `secs` on `cpu`, touching up to `cap` bytes
/// of new memory (0: none). The memory is freed only after the loop, so
/// the loop never times its own `munmap`.
fn run_thread(cpu: usize, secs: Duration, cap: usize) -> (Gaps, bool) {
    let pinned = crate::pinned::pin(cpu);
    let mut g = Gaps::default();
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut chunk: Option<Vec<u8>> = None;
    let mut at = 0;
    let start = Instant::now();
    let mut last = start;
    loop {
        let now = Instant::now();
        g.add(now - last);
        last = now;
        if now - start >= secs {
            break;
        }
        if g.touched_bytes < cap {
            let c = chunk.get_or_insert_with(|| {
                // Zeroed by the allocator as fresh pages from the kernel
                // (calloc maps them untouched), so this touches nothing.
                vec![0u8; CHUNK]
            });
            // A volatile write so the store is not optimised away.
            // SAFETY: `at < c.len()` (reset below when the chunk is full),
            // and the pointer is to a live, exclusively borrowed byte.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::write_volatile(c.as_mut_ptr().add(at), 1)
            };
            at += PAGE;
            g.touched_bytes += PAGE;
            if at >= c.len() {
                held.extend(chunk.take());
                at = 0;
            }
        }
    }
    drop(held);
    (g, pinned)
}

/// Both phases' figures for each CPU.
fn phase(cpus: usize, secs: Duration, cap: usize) -> (Vec<Gaps>, bool) {
    let handles: Vec<_> = (0..cpus)
        .map(|cpu| std::thread::spawn(move || run_thread(cpu, secs, cap)))
        .collect();
    let mut all = Vec::new();
    let mut pinned = true;
    for h in handles {
        // A panicking probe thread is a bug of this file: say so.
        let (g, p) = h.join().expect("a stall-probe thread panicked");
        pinned &= p;
        all.push(g);
    }
    (all, pinned)
}

/// Length of one settling probe window: longer than the 2 s period at
/// which Linux reports freed memory to the host (`PAGE_REPORTING_DELAY`
/// in `mm/page_reporting.c`), so a window sees a report's pause whenever
/// reports are still going out.
const SETTLE_WINDOW: Duration = Duration::from_millis(2500);

/// Longest gap a settling window may show for the machine to count as
/// quiet: above this machine's usual spin gaps (4-7 ms), well under the
/// 25-40 ms pauses seen while freed memory is being reported.
const SETTLE_GAP: Duration = Duration::from_millis(10);

/// What [`settle`] saw.
#[derive(Clone, Copy, Debug)]
pub struct Settled {
    /// Time spent probing.
    pub waited: Duration,
    /// Windows probed.
    pub windows: u32,
    /// Longest gap of the last window, on any CPU.
    pub last_longest: Duration,
    /// The last window was quiet; false if `max` ran out first.
    pub quiet: bool,
}

impl Settled {
    /// The figures for a workload's JSON.
    pub fn json(&self) -> serde_json::Value {
        json!({
            "waited_s": self.waited.as_secs_f64(),
            "windows": self.windows,
            "last_longest_gap_ms": self.last_longest.as_secs_f64() * 1e3,
            "quiet": self.quiet,
        })
    }
    /// One line for a workload's table.
    pub fn line(&self) -> String {
        format!(
            "machine {} after {:.1} s of probing (longest gap of the last {:.1} s window: {:.1} ms)",
            if self.quiet { "quiet" } else { "still pausing" },
            self.waited.as_secs_f64(),
            SETTLE_WINDOW.as_secs_f64(),
            self.last_longest.as_secs_f64() * 1e3
        )
    }
}

/// Waits, for at most about `max`, until the machine stops pausing: probes
/// windows of [`SETTLE_WINDOW`] with one spinning thread pinned to each CPU
/// (the spin phase of `stalls`) until one shows no gap over
/// [`SETTLE_GAP`].
///
/// On these VMs, memory a process frees (a benchmark's database deleted
/// at its end: the page cache of its files) is reported to the host every
/// 2 s, and while the reports go out the host stops both virtual CPUs for
/// 25-40 ms at each (BENCHMARKS.md, cache-pressure, "Pauses after memory
/// is freed, waited out"). A latency workload started right after another
/// would time the previous one's clean-up; it calls this first. The time
/// it waited and the last window's gap are printed with its figures.
pub fn settle(max: Duration) -> Settled {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let start = Instant::now();
    let mut windows = 0;
    loop {
        let (gaps, _) = phase(cpus, SETTLE_WINDOW, 0);
        windows += 1;
        let longest = gaps.iter().map(|g| g.longest).max().unwrap_or_default();
        let quiet = longest <= SETTLE_GAP;
        if quiet || start.elapsed() + SETTLE_WINDOW > max {
            return Settled {
                waited: start.elapsed(),
                windows,
                last_longest: longest,
                quiet,
            };
        }
    }
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let secs = Duration::from_secs(if a.quick { 15 } else { 60 });
    // Per thread; at most a sixth of the machine's memory in all.
    let mem = report::machine(&a.dir)["memory_gib"]
        .as_f64()
        .unwrap_or(0.0);
    let room = (mem * f64::from(1u32 << 30) / 6.0 / cpus as f64) as usize;
    let cap = room.min(if a.quick { 1 << 30 } else { 3 << 30 });
    if !a.json {
        eprintln!(
            "stalls: {cpus} threads, one pinned to each CPU, {} s spinning, then {} s touching up to {} MiB each",
            secs.as_secs(),
            secs.as_secs(),
            cap >> 20
        );
    }
    let (spin, pinned_spin) = phase(cpus, secs, 0);
    let (touch, pinned_touch) = phase(cpus, secs, cap);
    let pinned = pinned_spin && pinned_touch;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let longest = |v: &[Gaps]| v.iter().map(|g| ms(g.longest)).fold(0.0, f64::max);
    if !a.json {
        println!(
            "{:<8} {:>4} {:>12} {:>8} {:>8} {:>8} {:>12}",
            "phase", "cpu", "longest ms", "> 5 ms", "> 20 ms", "> 50 ms", "touched MiB"
        );
        for (name, v) in [("spin", &spin), ("touch", &touch)] {
            for (cpu, g) in v.iter().enumerate() {
                println!(
                    "{:<8} {:>4} {:>12.1} {:>8} {:>8} {:>8} {:>12}",
                    name,
                    cpu,
                    ms(g.longest),
                    g.over_5ms,
                    g.over_20ms,
                    g.over_50ms,
                    g.touched_bytes >> 20
                );
            }
        }
        if !pinned {
            println!("(threads could not be pinned to their CPUs)");
        }
    }
    let rows = |v: &[Gaps]| {
        v.iter()
            .enumerate()
            .map(|(cpu, g)| {
                json!({
                    "cpu": cpu, "longest_ms": ms(g.longest), "over_5ms": g.over_5ms,
                    "over_20ms": g.over_20ms, "over_50ms": g.over_50ms,
                    "touched_mib": g.touched_bytes >> 20,
                })
            })
            .collect::<Vec<_>>()
    };
    let figures = json!({
        "seconds_per_phase": secs.as_secs(), "cpus": cpus, "pinned": pinned,
        "spin": rows(&spin), "touch": rows(&touch),
        "spin_longest_ms": longest(&spin), "touch_longest_ms": longest(&touch),
        "quick": a.quick,
    });
    let targets = vec![Target::below(
        "spin: longest gap ms (cache-pressure's bound)",
        longest(&spin),
        20.0,
    )];
    Ok(report::finish(
        a.json,
        "stalls",
        report::machine(&a.dir),
        figures,
        &targets,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each gap counts in every bucket it passes, and the longest is kept.
    #[test]
    fn gaps_count_in_every_bucket_they_pass() {
        let mut g = Gaps::default();
        for ms in [1, 6, 21, 51, 5, 20, 3] {
            g.add(Duration::from_millis(ms));
        }
        assert_eq!(g.longest, Duration::from_millis(51));
        assert_eq!((g.over_5ms, g.over_20ms, g.over_50ms), (4, 2, 1));
    }

    /// Settling probes one whole window at least, and no more windows
    /// than its bound leaves room for, quiet or not.
    #[test]
    fn settling_probes_a_window_and_keeps_to_its_bound() {
        let st = settle(Duration::ZERO);
        assert_eq!(st.windows, 1);
        assert!(st.waited >= SETTLE_WINDOW);
        assert_eq!(st.quiet, st.last_longest <= SETTLE_GAP);
        let max = SETTLE_WINDOW * 2;
        let st = settle(max);
        assert!((1..=2).contains(&st.windows), "{} windows", st.windows);
        // It gives up only when another window would pass the bound.
        assert!(st.quiet || st.waited + SETTLE_WINDOW > max);
    }

    /// The touch phase touches no more than its cap, and a spin phase none.
    #[test]
    fn a_thread_touches_up_to_its_cap_and_no_more() {
        let (g, _) = run_thread(0, Duration::from_millis(300), 8 * PAGE);
        assert_eq!(g.touched_bytes, 8 * PAGE);
        let (g, _) = run_thread(0, Duration::from_millis(50), 0);
        assert_eq!(g.touched_bytes, 0);
        assert!(g.longest > Duration::ZERO);
    }
}
