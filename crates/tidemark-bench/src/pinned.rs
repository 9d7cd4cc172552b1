//! Threads pinned to CPUs: the frame the bench's probes run in
//! ([`crate::placement`], [`crate::freezes`], [`crate::cpu_speed`],
//! [`crate::stalls`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Pins the calling thread to `cpu`; whether it worked.
pub(crate) fn pin(cpu: usize) -> bool {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set (a plain array
    // of integers); CPU_SET writes one bit inside it, `cpu` being below
    // CPU_SETSIZE (checked here).
    #[allow(unsafe_code)]
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        // Pid 0: the calling thread. The set is alive for the call.
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Threads, one pinned to each CPU (at most 64), that run until stopped:
/// the frame of the per-CPU probes ([`crate::freezes`],
/// [`crate::cpu_speed`]).
pub(crate) struct PerCpu<T> {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<T>>,
}

impl<T: Default + Send + 'static> PerCpu<T> {
    /// Starts the threads. Each pins itself, runs `prepare` and reports
    /// both, then runs `body` with the stop flag. `None`, the threads
    /// stopped, where one could not be pinned; otherwise each thread's
    /// `prepare` result.
    pub(crate) fn start(
        prepare: fn() -> bool,
        body: impl Fn(&AtomicBool) -> T + Send + Sync + 'static,
    ) -> Option<(Self, Vec<bool>)> {
        let cpus = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(64);
        let stop = Arc::new(AtomicBool::new(false));
        let body = Arc::new(body);
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..cpus)
            .map(|cpu| {
                let (stop, tx, body) = (stop.clone(), tx.clone(), body.clone());
                std::thread::spawn(move || {
                    let pinned = pin(cpu);
                    let prepared = pinned && prepare();
                    let _ = tx.send((pinned, prepared));
                    if !pinned {
                        return T::default();
                    }
                    body(&stop)
                })
            })
            .collect();
        drop(tx);
        let started: Vec<(bool, bool)> = rx.iter().take(cpus).collect();
        let threads = PerCpu { stop, threads };
        if started.len() < cpus || started.iter().any(|&(pinned, _)| !pinned) {
            threads.finish();
            return None;
        }
        Some((threads, started.into_iter().map(|(_, p)| p).collect()))
    }

    /// Stops the threads and returns what each returned, by CPU.
    pub(crate) fn finish(self) -> Vec<T> {
        self.stop.store(true, Ordering::Release);
        self.threads
            .into_iter()
            .map(|t| t.join().unwrap_or_default())
            .collect()
    }
}

/// `start()` when `on`; prints `cannot` on stderr (unless `json`) when it
/// gave `None`.
pub(crate) fn probe_if<P>(
    on: bool,
    json: bool,
    cannot: &str,
    start: impl FnOnce() -> Option<P>,
) -> Option<P> {
    if !on {
        return None;
    }
    let p = start();
    if p.is_none() && !json {
        eprintln!("{cannot}; not run");
    }
    p
}
