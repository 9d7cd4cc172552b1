//! Where the host has put this machine's CPUs, sampled while a workload
//! runs (`cache-pressure --placement-probe`).
//!
//! On a virtual machine the host can move the two virtual CPUs between
//! its cores: onto one die, where a cache line passes from one CPU to the
//! other in tens of nanoseconds, or onto two, where it takes several
//! times as long. Every line that one of the engine's threads writes and
//! another reads (a page an inserting thread modified and the eviction
//! worker writes out, a latch word, a counter) pays that price. The probe
//! pins two threads to CPUs 0 and 1 and, four times a second, times
//! [`ROUND_TRIPS`] round trips of one cache line between them. The
//! workload's slow seconds can then be told apart by where the host had
//! put the CPUs (BENCHMARKS.md, cache-pressure, "The host moves the two
//! CPUs apart").
//!
//! It is opt-in: each sample spins both CPUs for a fraction of a
//! millisecond (under 0.5 % of the machine), and the workload's own
//! figures are taken without it by default.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Round trips of the cache line in one sample.
pub const ROUND_TRIPS: u32 = 500;
/// Time between samples.
const EVERY: Duration = Duration::from_millis(250);
/// How long the timing thread waits for its partner to be running before
/// it gives up on a sample (the partner may be waiting for a core).
const PARTNER_WAIT: Duration = Duration::from_millis(20);
/// A second is "far" when its round trip is more than this many times the
/// run's 10th percentile: near and far differ by 4-6 times on the
/// machine this was written on (55-100 ns against 250-370 ns).
pub const FAR_FACTOR: f64 = 2.0;

/// One sample: seconds since the workload started, and the round trip
/// time in nanoseconds.
pub type Sample = (f64, f64);

/// A running probe.
pub struct Probe {
    stop: Arc<AtomicBool>,
    timer: JoinHandle<Vec<Sample>>,
    partner: JoinHandle<()>,
}

/// The cache line the two threads pass back and forth, alone on its line.
#[repr(align(128))]
struct Line(AtomicU64);

/// Starts the probe, `None` on a machine with fewer than two CPUs or where
/// threads cannot be pinned. Samples are timed from `start`.
pub fn start(start: Instant) -> Option<Probe> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let line = Arc::new(Line(AtomicU64::new(0)));
    // Set while the partner should answer; it parks otherwise.
    let go = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (ok_tx, ok_rx) = std::sync::mpsc::channel();
    let partner = {
        let (line, go, stop) = (line.clone(), go.clone(), stop.clone());
        std::thread::spawn(move || {
            let pinned = crate::pinned::pin(1);
            let _ = ok_tx.send(pinned);
            if !pinned {
                return;
            }
            while !stop.load(Ordering::Acquire) {
                if !go.load(Ordering::Acquire) {
                    std::thread::park_timeout(EVERY);
                    continue;
                }
                // Odd values are the timer's throws; answer each with the
                // next even one.
                let v = line.0.load(Ordering::Acquire);
                if v & 1 == 1 {
                    line.0.store(v + 1, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    if ok_rx.recv() != Ok(true) {
        stop.store(true, Ordering::Release);
        let _ = partner.join();
        return None;
    }
    let partner_thread = partner.thread().clone();
    let timer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            if !crate::pinned::pin(0) {
                return samples;
            }
            while !stop.load(Ordering::Acquire) {
                go.store(true, Ordering::Release);
                partner_thread.unpark();
                if let Some(ns) = sample(&line.0, &stop) {
                    samples.push((start.elapsed().as_secs_f64(), ns));
                }
                go.store(false, Ordering::Release);
                std::thread::sleep(EVERY);
            }
            samples
        })
    };
    Some(Probe {
        stop,
        timer,
        partner,
    })
}

/// One sample: the mean round trip in ns, `None` if the partner did not
/// answer within [`PARTNER_WAIT`].
fn sample(line: &AtomicU64, stop: &AtomicBool) -> Option<f64> {
    // The first throw waits for the partner to be on its CPU.
    let v = line.load(Ordering::Acquire);
    let v = if v & 1 == 1 { v + 1 } else { v };
    line.store(v + 1, Ordering::Release);
    let t = Instant::now();
    while line.load(Ordering::Acquire) != v + 2 {
        if t.elapsed() > PARTNER_WAIT || stop.load(Ordering::Relaxed) {
            // Leave the line even, as if answered, for the next sample.
            line.store(v + 2, Ordering::Release);
            return None;
        }
        std::hint::spin_loop();
    }
    let mut v = v + 2;
    let t = Instant::now();
    for _ in 0..ROUND_TRIPS {
        line.store(v + 1, Ordering::Release);
        let w = Instant::now();
        while line.load(Ordering::Acquire) != v + 2 {
            if w.elapsed() > PARTNER_WAIT {
                line.store(v + 2, Ordering::Release);
                return None;
            }
            std::hint::spin_loop();
        }
        v += 2;
    }
    Some(t.elapsed().as_nanos() as f64 / f64::from(ROUND_TRIPS))
}

/// [`start`] when `on`; says on stderr (unless `json`) when it cannot run.
pub fn start_if(on: bool, json: bool, at: Instant) -> Option<Probe> {
    crate::pinned::probe_if(
        on,
        json,
        "placement probe: needs two CPUs that threads can be pinned to",
        || start(at),
    )
}

impl Probe {
    /// Stops the probe and returns its samples.
    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Release);
        self.partner.thread().unpark();
        let samples = self.timer.join().unwrap_or_default();
        let _ = self.partner.join();
        samples
    }
}

/// The median round trip of each of the first `seconds` whole seconds,
/// `None` for a second without a sample.
pub fn per_second(samples: &[Sample], seconds: usize) -> Vec<Option<f64>> {
    let mut by: Vec<Vec<f64>> = vec![Vec::new(); seconds];
    for &(t, ns) in samples {
        if t >= 0.0 && (t as usize) < seconds {
            by[t as usize].push(ns);
        }
    }
    by.into_iter()
        .map(|mut v| (!v.is_empty()).then(|| crate::report::median(&mut v)))
        .collect()
}

/// The round trip above which a sample or a second is far: [`FAR_FACTOR`]
/// times the 10th percentile of `round_trips`; `None` if there are none.
fn far_limit(round_trips: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = round_trips.collect();
    (!v.is_empty()).then(|| FAR_FACTOR * crate::report::percentile(&mut v, 10.0))
}

/// Which seconds were far ([`far_limit`] over the seconds sampled).
/// `None` where unsampled.
pub fn far(per_second: &[Option<f64>]) -> Vec<Option<bool>> {
    let limit = far_limit(per_second.iter().flatten().copied());
    per_second
        .iter()
        .map(|s| s.zip(limit).map(|(ns, l)| ns > l))
        .collect()
}

/// The share of the samples taken from `from` to `to` seconds that were
/// far ([`far_limit`] over all `samples`), for each window. `None` for a
/// window no sample fell in.
pub fn far_shares(samples: &[Sample], windows: &[(f64, f64)]) -> Vec<Option<f64>> {
    let limit = far_limit(samples.iter().map(|s| s.1));
    windows
        .iter()
        .map(|&(from, to)| {
            let inside = samples.iter().filter(|s| s.0 >= from && s.0 < to);
            let (n, far) = inside.fold((0u32, 0u32), |(n, f), s| {
                (n + 1, f + u32::from(limit.is_some_and(|l| s.1 > l)))
            });
            (n > 0).then(|| f64::from(far) / f64::from(n))
        })
        .collect()
}

/// The workload's figures split by placement ([`crate::report::split`],
/// near against far).
pub fn split(windows: &[f64], far: &[Option<bool>], median_all: f64) -> serde_json::Value {
    crate::report::split(windows, far, median_all, ("near", "far"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples fall into the second they were taken in; a second without
    /// one is `None`; the median is per second.
    #[test]
    fn per_second_takes_each_seconds_median() {
        let s = [
            (0.1, 60.0),
            (0.4, 70.0),
            (0.9, 500.0),
            (2.2, 300.0),
            (3.5, 1.0),
        ];
        assert_eq!(per_second(&s, 3), vec![Some(70.0), None, Some(300.0)]);
    }

    /// A second is far when its round trip is over twice the run's 10th
    /// percentile.
    #[test]
    fn far_seconds_are_over_twice_the_tenth_percentile() {
        let ps = [
            Some(60.0),
            Some(55.0),
            None,
            Some(330.0),
            Some(100.0),
            Some(121.0),
        ];
        let f = far(&ps);
        assert_eq!(
            f,
            vec![
                Some(false),
                Some(false),
                None,
                Some(true),
                Some(false),
                Some(true)
            ]
        );
        assert_eq!(far(&[None, None]), vec![None, None]);
    }

    /// The share of far samples inside each window, against the 10th
    /// percentile of all samples; none in a window gives `None`.
    #[test]
    fn far_shares_count_each_windows_far_samples() {
        let s = [
            (0.1, 60.0),
            (0.3, 60.0),
            (0.6, 300.0),
            (0.9, 310.0),
            (1.2, 65.0),
            (2.5, 50.0),
        ];
        // The 10th percentile is 60 ns: over 120 is far.
        assert_eq!(
            far_shares(&s, &[(0.0, 1.0), (0.5, 1.0), (1.0, 2.0), (3.0, 4.0)]),
            vec![Some(0.5), Some(1.0), Some(0.0), None]
        );
        assert_eq!(far_shares(&[], &[(0.0, 1.0)]), vec![None]);
    }

    /// On a machine of two or more CPUs the probe samples and stops.
    #[test]
    fn the_probe_samples_and_stops() {
        let Some(p) = start(Instant::now()) else {
            return; // one CPU, or pinning not allowed: nothing to sample
        };
        // Up to 3 s: a sample is skipped while its partner waits for a core.
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(300));
        }
        let s = p.finish();
        assert!(!s.is_empty(), "no sample in 3 s");
        assert!(s.iter().all(|&(t, ns)| t >= 0.0 && ns > 0.0));
    }
}
