//! A probe for the times the machine itself stops running threads, beside
//! a workload: one thread pinned to each CPU at real-time priority
//! (`SCHED_FIFO` 1, where the process may take it) sleeps 1 ms at a time
//! and records every wake that came more than [`LATE`] after it was due.
//! At that priority only interrupts and the host can hold such a thread
//! up, so a late wake on every CPU at the same instant is the virtual
//! machine stopped as a whole (BENCHMARKS.md, "The whole machine stops").
//!
//! The probe changes what it watches a little: waking each CPU every
//! millisecond makes the scheduler choose again that often, which
//! shortens the waits of runnable threads behind busy ones. It is
//! therefore off by default, and its figures belong to the run that had
//! it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The probe's sleep between wakes.
const EVERY: Duration = Duration::from_millis(1);
/// A wake this much later than due is recorded: above the 250 Hz tick of
/// a kernel without preemption, which a FIFO thread does not wait for,
/// with room for the timer's slack.
const LATE: Duration = Duration::from_millis(4);

/// A span in which one CPU's probe did not run, in seconds since the
/// probe's start: `(from, to)`.
pub type Span = (f64, f64);

/// A running probe.
pub struct Probe {
    threads: crate::pinned::PerCpu<Vec<Span>>,
    /// Whether every thread got `SCHED_FIFO`.
    pub realtime: bool,
}

/// Starts one probe thread per CPU (at most 64), each pinned; `None`
/// where threads cannot be pinned. Spans are timed from `start`.
pub fn start(start: Instant) -> Option<Probe> {
    let (threads, realtime) =
        crate::pinned::PerCpu::start(set_fifo, move |stop| watch(stop, start))?;
    Some(Probe {
        threads,
        realtime: realtime.iter().all(|&rt| rt),
    })
}

/// Gives the calling thread `SCHED_FIFO` priority 1; whether it worked
/// (it needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` of at least 1).
fn set_fifo() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 names the calling thread; `param` is a valid
    // `sched_param` that lives for the call.
    #[allow(unsafe_code)]
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0
    }
}

/// The probe thread's loop: the spans in which it did not run.
fn watch(stop: &AtomicBool, start: Instant) -> Vec<Span> {
    let mut spans = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let due = Instant::now() + EVERY;
        std::thread::sleep(EVERY);
        let woke = Instant::now();
        if woke.duration_since(due) > LATE {
            spans.push((
                due.duration_since(start).as_secs_f64(),
                woke.duration_since(start).as_secs_f64(),
            ));
        }
    }
    spans
}

impl Probe {
    /// Stops the probe; each CPU's spans, in time order.
    pub fn finish(self) -> Vec<Vec<Span>> {
        self.threads.finish()
    }
}

/// The spans in which every CPU's probe was held up at once: the
/// intersection of the CPUs' span lists (each in time order, spans not
/// overlapping), in time order.
pub fn all_at_once(per_cpu: &[Vec<Span>]) -> Vec<Span> {
    let Some((first, rest)) = per_cpu.split_first() else {
        return Vec::new();
    };
    rest.iter()
        .fold(first.clone(), |acc, spans| intersect(&acc, spans))
}

/// The intersection of two lists of spans, each in time order without
/// overlaps.
fn intersect(a: &[Span], b: &[Span]) -> Vec<Span> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let from = a[i].0.max(b[j].0);
        let to = a[i].1.min(b[j].1);
        if from < to {
            out.push((from, to));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// How long `spans` cover of the interval `(from, to)`, in seconds.
pub fn overlap(spans: &[Span], from: f64, to: f64) -> f64 {
    // A fold from +0.0: an empty float sum is -0.0, printed as such.
    spans
        .iter()
        .map(|&(a, b)| (b.min(to) - a.max(from)).max(0.0))
        .fold(0.0, |acc, x| acc + x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_at_once_keeps_only_what_every_cpu_shares() {
        let cpu0 = vec![(1.0, 1.05), (2.0, 2.02), (3.0, 3.1)];
        let cpu1 = vec![(1.01, 1.06), (2.5, 2.6), (3.05, 3.2)];
        let both = all_at_once(&[cpu0.clone(), cpu1]);
        assert_eq!(both.len(), 2);
        assert!((both[0].0 - 1.01).abs() < 1e-9 && (both[0].1 - 1.05).abs() < 1e-9);
        assert!((both[1].0 - 3.05).abs() < 1e-9 && (both[1].1 - 3.1).abs() < 1e-9);
        // One CPU: its own spans; none: nothing.
        assert_eq!(all_at_once(std::slice::from_ref(&cpu0)), cpu0);
        assert!(all_at_once(&[]).is_empty());
    }

    #[test]
    fn overlap_counts_only_the_part_inside_the_interval() {
        let spans = vec![(1.0, 1.05), (2.0, 2.1)];
        assert!((overlap(&spans, 1.02, 2.05) - 0.08).abs() < 1e-9);
        assert_eq!(overlap(&spans, 1.1, 1.9), 0.0);
    }

    #[test]
    fn the_probe_runs_and_stops() {
        let Some(p) = start(Instant::now()) else {
            // Threads cannot be pinned here: nothing to check.
            return;
        };
        std::thread::sleep(Duration::from_millis(50));
        let spans = p.finish();
        assert_eq!(
            spans.len(),
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(64)
        );
        for cpu in &spans {
            assert!(cpu
                .iter()
                .all(|&(a, b)| a < b && b - a > LATE.as_secs_f64()));
        }
    }
}
