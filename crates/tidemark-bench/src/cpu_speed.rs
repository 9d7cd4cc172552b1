//! How fast each CPU ran, second by second, beside a workload
//! (`cache-pressure`, where `--no-speed-probe` turns it off; `checkpoint
//! --speed-probe`).
//!
//! On a shared host a virtual CPU does not always get a whole core: while
//! something else runs on the core's other hardware thread, or the host
//! slows the core, the same instructions take longer, and the guest sees
//! no steal for it. The probe pins one thread to each CPU; every
//! [`EVERY`] it times one fixed unit of work ([`UNIT_ITERATIONS`] steps of
//! a loop, about 10 us on an unloaded core) and sleeps. Each second's
//! median unit time, against the run's fastest seconds, gives that CPU's
//! speed for the second; the machine's speed is the mean over its CPUs.
//! A slow second of the workload can then be set beside the speed the
//! machine had in it (BENCHMARKS.md, cache-pressure, "The CPUs' own
//! speed").
//!
//! It costs each CPU about 10 us in 5 ms (0.2 %). A unit interrupted by
//! another thread counts that thread's time too; the per-second median
//! keeps those few out.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Time between units on each CPU.
pub const EVERY: Duration = Duration::from_millis(5);
/// Steps of the timed loop.
pub const UNIT_ITERATIONS: u64 = 20_000;
/// A CPU's reference time is this percentile of its per-second medians:
/// its fastest seconds, without trusting the single fastest.
const REFERENCE_PERCENTILE: f64 = 10.0;
/// A second is at full speed when the machine ran at least this share of
/// its reference speed. One CPU at half speed puts the machine at 0.75.
pub const FULL_SPEED: f64 = 0.9;

/// One unit: seconds since the workload started, and its time in ns.
pub type Sample = (f64, f64);

/// A running probe.
pub struct Probe {
    threads: crate::pinned::PerCpu<Vec<Sample>>,
}

/// The fixed unit of work, timed, in ns.
fn unit() -> f64 {
    let t = Instant::now();
    let mut acc = 0u64;
    for i in 0..UNIT_ITERATIONS {
        acc = acc.wrapping_add(std::hint::black_box(i));
    }
    std::hint::black_box(acc);
    t.elapsed().as_nanos() as f64
}

/// Starts one probe thread per CPU (at most 64), each pinned; `None` where
/// threads cannot be pinned. Samples are timed from `start`.
pub fn start(start: Instant) -> Option<Probe> {
    let (threads, _) = crate::pinned::PerCpu::start(
        || true,
        move |stop| {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let ns = unit();
                samples.push((start.elapsed().as_secs_f64(), ns));
                std::thread::sleep(EVERY);
            }
            samples
        },
    )?;
    Some(Probe { threads })
}

/// [`start`] when `on`; says on stderr (unless `json`) when it cannot run.
pub fn start_if(on: bool, json: bool, at: Instant) -> Option<Probe> {
    crate::pinned::probe_if(
        on,
        json,
        "speed probe: needs threads that can be pinned",
        || start(at),
    )
}

impl Probe {
    /// Stops the probe and returns each CPU's samples.
    pub fn finish(self) -> Vec<Vec<Sample>> {
        self.threads.finish()
    }
}

/// The machine's speed in each of the first `seconds` whole seconds: for
/// each CPU, its reference unit time ([`REFERENCE_PERCENTILE`] of its
/// per-second medians) over the second's median, and the mean of that
/// over the CPUs sampled in the second. `None` for a second no CPU was
/// sampled in.
pub fn per_second(per_cpu: &[Vec<Sample>], seconds: usize) -> Vec<Option<f64>> {
    let speeds: Vec<Vec<Option<f64>>> = per_cpu
        .iter()
        .map(|samples| {
            let medians = crate::placement::per_second(samples, seconds);
            let reference = reference(&medians).unwrap_or(0.0);
            medians
                .into_iter()
                .map(|m| m.filter(|&m| m > 0.0).map(|m| reference / m))
                .collect()
        })
        .collect();
    (0..seconds)
        .map(|s| {
            let v: Vec<f64> = speeds.iter().filter_map(|c| c[s]).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect()
}

/// A CPU's reference unit time: [`REFERENCE_PERCENTILE`] of its
/// per-second medians; `None` if no second has one.
fn reference(medians: &[Option<f64>]) -> Option<f64> {
    let mut known: Vec<f64> = medians.iter().flatten().copied().collect();
    (!known.is_empty()).then(|| crate::report::percentile(&mut known, REFERENCE_PERCENTILE))
}

/// Which seconds ran below [`FULL_SPEED`]; `None` where unsampled.
pub fn slow(speed: &[Option<f64>]) -> Vec<Option<bool>> {
    speed.iter().map(|s| s.map(|s| s < FULL_SPEED)).collect()
}

/// The lowest second over the median, of `windows` each divided by the
/// machine's speed in it: what the load's slowest second would have been
/// had every second had the CPUs' reference speed. Unsampled seconds are
/// left out; `None` if none is left.
pub fn min_over_median_at_full_speed(windows: &[f64], speed: &[Option<f64>]) -> Option<f64> {
    let mut v: Vec<f64> = windows
        .iter()
        .zip(speed)
        .filter_map(|(w, s)| s.filter(|&s| s > 0.0).map(|s| w / s))
        .collect();
    let min = v.iter().copied().reduce(f64::min)?;
    let med = crate::report::median(&mut v);
    (med > 0.0).then(|| min / med)
}

/// Each second's speed ([`per_second`]) beside the rates `windows`
/// (median `med`): the rates split by speed ([`crate::report::split`],
/// `full` against `slow`), the seconds under `target` times the median
/// and how many of them had full speed, the CPUs' own slowest second over
/// their median, and the rates' min/median once each is divided by its
/// second's speed ([`min_over_median_at_full_speed`]).
pub fn figures(
    windows: &[f64],
    med: f64,
    per_cpu: &[Vec<Sample>],
    target: f64,
) -> (Vec<Option<f64>>, serde_json::Value) {
    let by_second = per_second(per_cpu, windows.len());
    let mut split = crate::report::split(windows, &slow(&by_second), med, ("full", "slow"));
    let mut known: Vec<f64> = by_second.iter().flatten().copied().collect();
    let speed_min = known.iter().copied().reduce(f64::min);
    let speed_med = (!known.is_empty()).then(|| crate::report::median(&mut known));
    split["speed_min_over_median"] =
        serde_json::json!(speed_min.zip(speed_med).map(|(m, d)| m / d));
    split["min_over_median_at_full_speed"] =
        serde_json::json!(min_over_median_at_full_speed(windows, &by_second));
    let under: Vec<usize> = (0..windows.len())
        .filter(|&i| windows[i] < target * med)
        .collect();
    split["under_target_seconds"] = serde_json::json!(under.len());
    split["under_target_at_full_speed"] = serde_json::json!(under
        .iter()
        .filter(|&&i| by_second[i].is_some_and(|s| s >= FULL_SPEED))
        .count());
    split["speed_by_second"] = serde_json::json!(by_second
        .iter()
        .map(|s| s.map(|s| (s * 1000.0).round() / 1000.0))
        .collect::<Vec<_>>());
    (by_second, split)
}

/// The machine's speed over each window `(from, to)` (seconds since the
/// probe's start): for each CPU, its reference unit time (as in
/// [`per_second`], over every whole second of its samples) over the
/// median of its units inside the window, averaged over the CPUs with a
/// unit there. `None` for a window no unit fell in.
pub fn over_windows(per_cpu: &[Vec<Sample>], windows: &[(f64, f64)]) -> Vec<Option<f64>> {
    let references: Vec<Option<f64>> = per_cpu
        .iter()
        .map(|samples| {
            let seconds = samples.iter().map(|s| s.0).fold(0.0, f64::max) as usize;
            reference(&crate::placement::per_second(samples, seconds))
        })
        .collect();
    windows
        .iter()
        .map(|&(from, to)| {
            let v: Vec<f64> = per_cpu
                .iter()
                .zip(&references)
                .filter_map(|(samples, reference)| {
                    let mut inside: Vec<f64> = samples
                        .iter()
                        .filter(|s| s.0 >= from && s.0 < to)
                        .map(|s| s.1)
                        .collect();
                    let med = (!inside.is_empty()).then(|| crate::report::median(&mut inside))?;
                    reference.filter(|_| med > 0.0).map(|r| r / med)
                })
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each CPU's speed is its reference time over the second's median;
    /// the machine's is the mean over the CPUs sampled that second.
    #[test]
    fn a_seconds_speed_is_the_mean_of_its_cpus() {
        // CPU 0: 10 us in seconds 0, 1 and 3, 20 us in second 2.
        let c0 = vec![(0.1, 10e3), (1.5, 10e3), (2.5, 20e3), (3.2, 10e3)];
        // CPU 1: 10 us throughout, no sample in second 3.
        let c1 = vec![(0.2, 10e3), (1.1, 10e3), (2.9, 10e3)];
        let s = per_second(&[c0, c1], 5);
        assert_eq!(s, vec![Some(1.0), Some(1.0), Some(0.75), Some(1.0), None]);
        assert_eq!(
            slow(&s),
            vec![Some(false), Some(false), Some(true), Some(false), None]
        );
    }

    /// A window's speed is each CPU's reference over the window's median,
    /// averaged; a window without units is `None`.
    #[test]
    fn a_windows_speed_uses_the_units_inside_it() {
        // CPU 0 at 10 us for three seconds, then 20 us; CPU 1 at 10 us.
        let c0: Vec<Sample> = (0..40)
            .map(|i| (f64::from(i) * 0.1, if i < 30 { 10e3 } else { 20e3 }))
            .collect();
        let c1: Vec<Sample> = (0..40).map(|i| (f64::from(i) * 0.1, 10e3)).collect();
        let w = over_windows(&[c0, c1], &[(0.0, 2.0), (3.0, 4.0), (5.0, 6.0)]);
        assert_eq!(w, vec![Some(1.0), Some(0.75), None]);
    }

    /// The rates divided by the speed: a second at half speed with half
    /// the rate is no longer the slowest.
    #[test]
    fn rates_at_full_speed_divide_by_each_seconds_speed() {
        let w = [100.0, 100.0, 50.0, 90.0, 1.0];
        let s = [Some(1.0), Some(1.0), Some(0.5), Some(1.0), None];
        assert_eq!(min_over_median_at_full_speed(&w, &s), Some(0.9));
        assert_eq!(min_over_median_at_full_speed(&w, &[None; 5]), None);
    }

    /// On a machine whose threads can be pinned the probe samples every
    /// CPU and stops.
    #[test]
    fn the_probe_samples_each_cpu_and_stops() {
        let Some(p) = start(Instant::now()) else {
            return; // pinning not allowed here: nothing to sample
        };
        std::thread::sleep(Duration::from_millis(300));
        let per_cpu = p.finish();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(per_cpu.len(), cpus.min(64));
        for s in &per_cpu {
            assert!(!s.is_empty(), "a CPU gave no sample in 300 ms");
            assert!(s.iter().all(|&(t, ns)| t >= 0.0 && ns > 0.0));
        }
    }
}
