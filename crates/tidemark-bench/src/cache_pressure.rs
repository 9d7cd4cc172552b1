//! Pathology 2 (seed 001): an insert-heavy load with a 10 MB cache over a
//! dataset at least 100x larger. Measures per-second throughput, the worst
//! single operation, cache usage, eviction work and write amplification.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::report::{self, Target};
use crate::{msg, BoxResult};

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub threads: usize,
    pub cache_mb: usize,
    pub dataset_mb: usize,
    pub checkpoint_secs: u64,
    /// Seconds between the data file's write-backs (`None`: the engine's
    /// default; 0: none).
    pub write_back_secs: Option<u64>,
    /// Log size in MB at which a checkpoint starts (`None`: the engine's
    /// default; 0: none).
    pub checkpoint_log_mb: Option<u64>,
    pub stats_log: Option<std::path::PathBuf>,
    pub page_size: usize,
    /// Background eviction workers
    /// ([`tidemark::Builder::eviction_threads`]; `None`: the engine's
    /// default).
    pub eviction_threads: Option<usize>,
    /// Durability of each insert's commit ([`tidemark::Builder::durability`];
    /// `None`: the engine's default).
    pub durability: Option<tidemark::Durability>,
    /// Sample where the host has put the CPUs while the load runs
    /// ([`crate::placement`]).
    pub placement_probe: bool,
    /// Wait for the machine to stop pausing before the database is
    /// opened ([`crate::stalls::settle`]).
    pub settle: bool,
    /// Watch for the machine stopping its CPUs while the load runs
    /// ([`crate::freezes`]), and set the slow inserts beside it.
    pub freeze_probe: bool,
    /// After the load, run its I/O without the engine
    /// ([`crate::cache_twin`]) and print the twin's figures beside the
    /// engine's.
    pub io_twin: bool,
    /// Time a fixed unit of work on each CPU every 5 ms while the load
    /// runs ([`crate::cpu_speed`]), and set each second's rate beside the
    /// speed the machine had in it.
    pub speed_probe: bool,
    /// Time a walk of dependent loads, page copies and a page's read of
    /// the data file on each CPU while the load runs
    /// ([`crate::memory_speed`]), and set each second's rate beside them.
    pub memory_probe: bool,
}

/// An insert at least this slow is kept, with when it began, for the
/// freeze probe's comparison.
const SLOW: Duration = Duration::from_millis(5);
/// At most this many slow inserts are kept per thread.
const SLOW_KEPT_MAX: usize = 100_000;

/// Most time spent waiting for the machine to settle.
const SETTLE_MAX: Duration = Duration::from_secs(45);

/// The target for the slowest second over the median second.
pub(crate) const TARGET_MIN_OVER_MEDIAN: f64 = 0.7;

const KEY_LEN: usize = 16;
const VALUE_LEN: usize = 100;

pub fn run(a: &Args) -> BoxResult<bool> {
    // Memory an earlier run freed makes the host pause the machine for a
    // while; the database is opened, and its periodic checkpoints timed,
    // once that has stopped.
    let settled = a.settle.then(|| crate::stalls::settle(SETTLE_MAX));
    if let (false, Some(st)) = (a.json, &settled) {
        eprintln!("{}", st.line());
    }
    let dir = tempfile::tempdir_in(&a.dir)?;
    let cache = a.cache_mb << 20;
    let write_back_interval = match a.write_back_secs {
        None => Some(tidemark::DEFAULT_WRITE_BACK_INTERVAL),
        Some(0) => None,
        Some(s) => Some(Duration::from_secs(s)),
    };
    let mut builder = tidemark::Builder::new();
    if let Some(n) = a.eviction_threads {
        builder = builder.eviction_threads(n);
    }
    if let Some(d) = a.durability {
        builder = builder.durability(d);
    }
    // As `--durability` names it; `None`: the engine's default.
    let durability = a.durability.map(|d| format!("{d:?}").to_lowercase());
    let db = builder
        .cache_size(cache)
        .page_size(a.page_size)
        .checkpoint_interval(Some(std::time::Duration::from_secs(a.checkpoint_secs)))
        .write_back_interval(write_back_interval)
        .checkpoint_log_size(match a.checkpoint_log_mb {
            None => Some(tidemark::DEFAULT_CHECKPOINT_LOG_SIZE),
            Some(0) => None,
            Some(mb) => Some(mb << 20),
        })
        // The default statistics log (a line every 10 s), or one a second
        // where asked.
        .statistics_log(Some(match &a.stats_log {
            Some(p) => tidemark::StatisticsLog {
                interval: Duration::from_secs(1),
                path: Some(p.clone()),
                ..Default::default()
            },
            None => tidemark::StatisticsLog::default(),
        }))
        .open(dir.path())?;
    let t = db.table("usertable")?;
    let records = (a.dataset_mb << 20) / (KEY_LEN + VALUE_LEN);
    let per_thread = records / a.threads;
    let total = (per_thread * a.threads) as u64;
    // Writers claim inserts from one count, so they all run until the
    // last second: with a fixed share each, one finishes first and the
    // run's last seconds measure fewer writers, not a stall.
    let claimed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    if !a.json {
        eprintln!(
            "cache-pressure: {} records ({} MB of keys+values) into a {} MB cache, {} threads, pages of {} bytes",
            records,
            a.dataset_mb,
            a.cache_mb,
            a.threads,
            db.page_size()
        );
    }

    // Per-second sampler.
    let sampler = {
        let (done, stop, db) = (done.clone(), stop.clone(), db.clone());
        std::thread::spawn(move || {
            let mut windows = Vec::new();
            // Each second's engine: what the data file and the log grew
            // by, whether a checkpoint ran at the second's end, and the
            // write-backs of the data file that ended.
            let mut engine = Vec::new();
            let mut engine_last = db.stats();
            // Each second's host steal: a slow second with steal is one in
            // which the hypervisor took a virtual CPU from the machine.
            let mut steal = Vec::new();
            // Each second's bytes read from the device: reads that missed
            // the operating system's page cache and waited for the disk.
            let mut reads = Vec::new();
            let mut read_last = report::device_read_bytes();
            // Each second's memory the kernel handed out (new page-cache
            // pages of the growing data file, mostly): on a machine that
            // gives freed memory back to its host, each new page first
            // costs the host a fault (BENCHMARKS.md, "Memory the host
            // takes back").
            let mut allocated = Vec::new();
            let mut pages_last = report::pages_allocated();
            let mut last = 0;
            let mut ticks = report::cpu_ticks();
            let start = Instant::now();
            let mut next = start + Duration::from_secs(1);
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += Duration::from_secs(1);
                let now = done.load(Ordering::Relaxed);
                windows.push(now - last);
                last = now;
                let t = report::cpu_ticks();
                steal.push(report::steal_pct(ticks, t));
                ticks = t;
                let r = report::device_read_bytes();
                reads.push(r.zip(read_last).map(|(r, l)| r.saturating_sub(l)));
                read_last = r;
                let p = report::pages_allocated();
                allocated.push(p.zip(pages_last).map(|(p, l)| p.saturating_sub(l)));
                pages_last = p;
                let e = db.stats();
                engine.push(Growth::between(&engine_last, &e));
                engine_last = e;
            }
            (windows, steal, reads, allocated, engine)
        })
    };
    let ticks_at_start = report::cpu_ticks();
    let read_at_start = report::device_read_bytes();
    let start = Instant::now();
    let probe = crate::placement::start_if(a.placement_probe, a.json, start);
    let speed_probe = crate::cpu_speed::start_if(a.speed_probe, a.json, start);
    let memory_probe = crate::memory_speed::start_if(
        a.memory_probe,
        a.json,
        start,
        dir.path().join(tidemark::DATA_FILE),
    );
    let freeze_probe = if a.freeze_probe {
        let p = crate::freezes::start(start);
        if !a.json {
            eprintln!(
                "freeze probe: {}",
                match &p {
                    None => "needs threads that can be pinned; not run",
                    Some(p) if p.realtime => "one SCHED_FIFO thread per CPU",
                    Some(_) => "one thread per CPU, at normal priority (SCHED_FIFO was refused)",
                }
            );
        }
        p
    } else {
        None
    };
    let workers: Vec<_> = (0..a.threads)
        .map(|w| {
            let (t, done, claimed) = (t.clone(), done.clone(), claimed.clone());
            std::thread::spawn(
                move || -> tidemark::Result<(Vec<u64>, Vec<crate::freezes::Span>)> {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed + w as u64);
                    // Worst insert (ns) of each second since the start, by
                    // the second the insert began in.
                    let mut worst: Vec<u64> = Vec::new();
                    // Inserts of at least `SLOW`: (began, ended), in seconds
                    // since the start.
                    let mut slow = Vec::new();
                    let mut value = [0u8; VALUE_LEN];
                    while claimed.fetch_add(1, Ordering::Relaxed) < total {
                        let k: u64 = rng.gen();
                        let key = format!("{k:016x}");
                        rng.fill(&mut value[..]);
                        let t0 = Instant::now();
                        t.put(key.as_bytes(), value)?;
                        let ns = t0.elapsed().as_nanos() as u64;
                        let sec = t0.duration_since(start).as_secs() as usize;
                        if worst.len() <= sec {
                            worst.resize(sec + 1, 0);
                        }
                        worst[sec] = worst[sec].max(ns);
                        if ns >= SLOW.as_nanos() as u64 && slow.len() < SLOW_KEPT_MAX {
                            let began = t0.duration_since(start).as_secs_f64();
                            slow.push((began, began + ns as f64 / 1e9));
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok((worst, slow))
                },
            )
        })
        .collect();
    let mut worst_by_sec: Vec<u64> = Vec::new();
    let mut slow: Vec<crate::freezes::Span> = Vec::new();
    for w in workers {
        let (v, s) = w.join().map_err(|_| msg("writer panicked"))??;
        slow.extend(s);
        if worst_by_sec.len() < v.len() {
            worst_by_sec.resize(v.len(), 0);
        }
        for (acc, x) in worst_by_sec.iter_mut().zip(v) {
            *acc = (*acc).max(x);
        }
    }
    let worst_ns = worst_by_sec.iter().copied().max().unwrap_or(0);
    let worst_ms: Vec<f64> = worst_by_sec
        .iter()
        .map(|&ns| (ns as f64 / 1e4).round() / 100.0)
        .collect();
    let elapsed = start.elapsed();
    let read_mb = report::device_read_bytes()
        .zip(read_at_start)
        .map(|(r, r0)| r.saturating_sub(r0) as f64 / 1048576.0);
    let placement_samples = probe.map(crate::placement::Probe::finish);
    let speed_samples = speed_probe.map(crate::cpu_speed::Probe::finish);
    let memory_samples = memory_probe.map(crate::memory_speed::Probe::finish);
    let freezes = freeze_probe.map(|p| {
        let realtime = p.realtime;
        freeze_figures(&p.finish(), &slow, worst_ns as f64 / 1e6, realtime)
    });
    stop.store(true, Ordering::Relaxed);
    let (windows, steal, reads, allocated, engine) =
        sampler.join().map_err(|_| msg("sampler panicked"))?;
    let s = db.stats();
    // Whole seconds only: the last, partial window is dropped.
    let full: Vec<f64> = windows
        .iter()
        .take(elapsed.as_secs() as usize)
        .map(|&w| w as f64)
        .collect();
    let engine = &engine[..engine.len().min(full.len())];
    let mut sorted = full.clone();
    let med = report::median(&mut sorted);
    let min = sorted.first().copied().unwrap_or(0.0);
    let min_over_median = if med > 0.0 { min / med } else { 0.0 };
    let evicted = (s.pages_evicted_clean + s.pages_evicted_dirty).max(1);
    let examined_per_evicted = s.pages_examined as f64 / evicted as f64;
    // Evictions and cleanings that wrote a page over the block it took
    // earlier in the same checkpoint epoch, of all page writes.
    let in_place_pct = 100.0 * s.pages_rewritten_in_place as f64 / s.pages_written.max(1) as f64;
    let user_bytes = (per_thread * a.threads * (KEY_LEN + VALUE_LEN)) as u64;
    let amp = s.bytes_written as f64 / user_bytes as f64;
    let peak_pct = 100.0 * s.cache_bytes_peak as f64 / s.cache_size as f64;
    let slack_pct = 100.0 * (a.threads as u64 * s.page_size) as f64 / s.cache_size as f64;
    let ops_per_s = (per_thread * a.threads) as f64 / elapsed.as_secs_f64();
    // MB of memory the kernel handed out in each whole second.
    let allocated_mb: Vec<Option<f64>> = allocated
        .into_iter()
        .take(full.len())
        .map(|p| p.map(|p| p as f64 / 256.0))
        .collect();
    let steal: Vec<Option<f64>> = steal
        .into_iter()
        .take(full.len())
        .map(|p| p.map(|p| (p * 10.0).round() / 10.0))
        .collect();
    let run_steal = report::steal_pct(ticks_at_start, report::cpu_ticks());
    let reads: Vec<Option<u64>> = reads.into_iter().take(full.len()).collect();
    let (worst_with_reads, worst_without_reads) = report::worst_by_reads(&worst_ms, &reads);
    let placement = placement_samples.map(|samples| {
        let rtt = crate::placement::per_second(&samples, full.len());
        let far = crate::placement::far(&rtt);
        let mut split = crate::placement::split(&full, &far, med);
        split["rtt_ns_by_second"] =
            json!(rtt.iter().map(|r| r.map(|x| x.round())).collect::<Vec<_>>());
        split["far_by_second"] = json!(far);
        (rtt, split)
    });
    let speed = speed_samples
        .map(|per_cpu| crate::cpu_speed::figures(&full, med, &per_cpu, TARGET_MIN_OVER_MEDIAN));
    let memory = memory_samples
        .map(|per_cpu| crate::memory_speed::figures(&full, med, &per_cpu, TARGET_MIN_OVER_MEDIAN));
    // The seconds the data file was flushed (a checkpoint's or a
    // write-back's steps and `fdatasync`) for half the second or more,
    // against the others.
    let flushed: Vec<Option<bool>> = engine.iter().map(|g| Some(g.flushing >= 0.5)).collect();
    let flush_split = report::split(&full, &flushed, med, ("steady", "flushing"));
    if !a.json {
        per_second("inserts", full.iter().map(|w| format!("{w:.0}")));
        if let Some((by_second, _)) = &speed {
            per_second("CPU speed % of the run's fastest", speed_line(by_second));
        }
        if let Some((by_second, _)) = &memory {
            per_second("memory speed % of the run's fastest", speed_line(by_second));
        }
        per_second(
            "worst insert ms",
            worst_ms.iter().map(|w| format!("{w:.1}")),
        );
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        per_second(
            "host steal % of CPU time",
            steal.iter().map(|p| or_dash(p.map(|p| format!("{p:.1}")))),
        );
        per_second(
            "MB of memory the kernel handed out",
            allocated_mb
                .iter()
                .map(|m| or_dash(m.map(|m| format!("{m:.0}")))),
        );
        per_second(
            "MB the data file grew",
            engine.iter().map(|g| format!("{:.0}", g.file_mb)),
        );
        per_second(
            "MB of grown room populated ahead",
            engine.iter().map(|g| format!("{:.0}", g.populated_mb)),
        );
        per_second(
            "MB first written into room not populated",
            engine.iter().map(|g| format!("{:.0}", g.unpopulated_mb)),
        );
        per_second(
            "file growths on a write's path / while flushing",
            engine
                .iter()
                .map(|g| format!("{}/{}", g.growths_by_writes, g.growths_while_flushing)),
        );
        per_second(
            "log segments created",
            engine.iter().map(|g| format!("{}", g.log_segments)),
        );
        per_second(
            "checkpoint running at the second's end",
            engine
                .iter()
                .map(|g| if g.checkpoint_running { "1" } else { "0" }.to_string()),
        );
        per_second(
            "% of the second flushing the data file",
            engine.iter().map(|g| format!("{:.0}", g.flushing * 100.0)),
        );
        per_second(
            "data-file write-backs ended",
            engine.iter().map(|g| format!("{}", g.write_backs)),
        );
        per_second(
            "pages read per insert",
            engine
                .iter()
                .zip(&full)
                .map(|(g, w)| format!("{:.2}", g.pages_read as f64 / w.max(1.0))),
        );
        per_second(
            "KB read from the device",
            reads
                .iter()
                .map(|r| or_dash(r.map(|b| format!("{}", b / 1024)))),
        );
        if let Some((rtt, split)) = &placement {
            println!(
                "per-second CPU 0-1 round trip ns: {}",
                rtt.iter()
                    .map(|r| r.map_or("-".into(), |x| format!("{x:.0}")))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            print_split(
                split,
                ("near", "far"),
                [
                    "seconds with the CPUs near / far",
                    "near: median / min window ops/s",
                    "far: median / min window ops/s",
                    "min near window / median",
                ],
            );
            println!(
                "{:<36} {:>14}",
                "far median / near median",
                ratio(split, "far_median_over_near_median")
            );
        }
        if let Some((_, split)) = &speed {
            print_speed(split);
        }
        print_split(
            &flush_split,
            ("steady", "flushing"),
            [
                "seconds steady / flushing the file",
                "steady: median / min ops/s",
                "flushing: median / min ops/s",
                "min steady window / median",
            ],
        );
        println!(
            "{:<36} {:>14}",
            "flushing median / steady median",
            ratio(&flush_split, "flushing_median_over_steady_median")
        );
        if let Some(st) = &settled {
            println!("{}", st.line());
        }
        if let Some(f) = &freezes {
            print_freezes(f);
        }
        println!("{:<36} {:>14}", "page size bytes", s.page_size);
        match a.eviction_threads {
            Some(n) => println!("{:<36} {:>14}", "eviction workers", n),
            None => println!("{:<36} {:>14}", "eviction workers", "default"),
        }
        println!(
            "{:<36} {:>14}",
            "durability",
            durability.as_deref().unwrap_or("default")
        );
        println!("{:<36} {:>14}", "inserts", per_thread * a.threads);
        println!("{:<36} {:>14.1}", "elapsed s", elapsed.as_secs_f64());
        println!("{:<36} {:>14.0}", "throughput ops/s", ops_per_s);
        println!("{:<36} {:>14.0}", "median window ops/s", med);
        println!("{:<36} {:>14.0}", "min window ops/s", min);
        println!(
            "{:<36} {:>14.3}",
            "max single-op latency ms",
            worst_ns as f64 / 1e6
        );
        println!("{:<36} {:>14.1}", "peak cache used %", peak_pct);
        println!(
            "{:<36} {:>14}",
            "pages evicted (clean/dirty)",
            format!("{}/{}", s.pages_evicted_clean, s.pages_evicted_dirty)
        );
        println!(
            "{:<36} {:>14.2}",
            "pages examined per page evicted", examined_per_evicted
        );
        println!(
            "{:<36} {:>14.2}",
            "pages read per insert",
            s.pages_read as f64 / (per_thread * a.threads).max(1) as f64
        );
        println!(
            "{:<36} {:>14}",
            "app-thread evictions", s.app_thread_evictions
        );
        println!(
            "{:<36} {:>14.3}",
            "longest wait for cache space ms",
            s.max_cache_wait_us as f64 / 1000.0
        );
        println!(
            "{:<36} {:>14.1}",
            "data-file bytes written per user byte", amp
        );
        println!(
            "{:<36} {:>14.1}",
            "page writes over their own block %", in_place_pct
        );
        println!(
            "{:<36} {:>14}",
            "pages moved out of a write-back step", s.pages_moved_from_write_back
        );
        println!("{:<36} {:>14}", "checkpoints during run", s.checkpoints);
        println!(
            "{:<36} {:>14.1}",
            "longest checkpoint ms",
            s.checkpoint_max_us as f64 / 1000.0
        );
        let ms = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.1}"));
        println!(
            "{:<36} {:>14}",
            "MB read from the device",
            read_mb.map_or("unknown".into(), |m| format!("{m:.1}"))
        );
        println!(
            "{:<36} {:>14}",
            "worst insert ms near / away from reads",
            format!("{}/{}", ms(worst_with_reads), ms(worst_without_reads))
        );
        println!(
            "{:<36} {:>14}",
            "host steal % of CPU time",
            run_steal.map_or("unknown".into(), |p| format!("{p:.2}"))
        );
        println!(
            "{:<36} {:>14.1}",
            "data file MB",
            s.file_size as f64 / 1048576.0
        );
    }
    let targets = [
        Target::at_least(
            "min 1-s window / median",
            min_over_median,
            TARGET_MIN_OVER_MEDIAN,
        ),
        Target::below("max single-op latency ms", worst_ns as f64 / 1e6, 20.0),
        Target::at_most(
            "peak cache % (100 + 1 page/thread)",
            peak_pct,
            ((100.0 + slack_pct) * 1000.0).round() / 1000.0,
        ),
        Target::below("pages examined per page evicted", examined_per_evicted, 4.0),
    ];
    let mut figures = json!({
        "records": per_thread * a.threads, "threads": a.threads, "cache_mb": a.cache_mb, "dataset_mb": a.dataset_mb, "page_size": s.page_size,
        "elapsed_s": elapsed.as_secs_f64(), "ops_per_s": ops_per_s, "windows": full, "median_window": med, "min_window": min,
        "max_latency_ms": worst_ns as f64 / 1e6, "worst_ms_by_second": worst_ms, "peak_cache_pct": peak_pct, "examined_per_evicted": examined_per_evicted,
        "app_thread_evictions": s.app_thread_evictions, "max_cache_wait_ms": s.max_cache_wait_us as f64 / 1000.0,
        "bytes_written_per_user_byte": amp, "in_place_pct": in_place_pct, "pages_moved_from_write_back": s.pages_moved_from_write_back, "data_file_mb": s.file_size as f64 / 1048576.0,
        "checkpoints": s.checkpoints, "checkpoint_max_ms": s.checkpoint_max_us as f64 / 1000.0, "quick": a.quick,
        "steal_pct": run_steal, "steal_pct_by_second": steal,
        "device_read_mb": read_mb, "device_read_kb_by_second": reads.iter().map(|r| r.map(|b| b / 1024)).collect::<Vec<_>>(),
        "worst_ms_with_device_reads": worst_with_reads, "worst_ms_without_device_reads": worst_without_reads,
        "memory_allocated_mb_by_second": allocated_mb,
        "file_grown_mb_by_second": engine.iter().map(|g| g.file_mb).collect::<Vec<_>>(),
        "log_segments_created_by_second": engine.iter().map(|g| g.log_segments).collect::<Vec<_>>(),
        "populated_mb_by_second": engine.iter().map(|g| g.populated_mb).collect::<Vec<_>>(),
        "written_unpopulated_mb_by_second": engine.iter().map(|g| g.unpopulated_mb).collect::<Vec<_>>(),
        "file_growths_by_writes_by_second": engine.iter().map(|g| g.growths_by_writes).collect::<Vec<_>>(),
        "file_growths_while_flushing_by_second": engine.iter().map(|g| g.growths_while_flushing).collect::<Vec<_>>(),
        "checkpoint_running_by_second": engine.iter().map(|g| g.checkpoint_running).collect::<Vec<_>>(),
        "flushing_share_by_second": engine.iter().map(|g| g.flushing).collect::<Vec<_>>(),
        "write_backs_by_second": engine.iter().map(|g| g.write_backs).collect::<Vec<_>>(),
        "pages_read_by_second": engine.iter().map(|g| g.pages_read).collect::<Vec<_>>(), "pages_read_per_insert": s.pages_read as f64 / (per_thread * a.threads).max(1) as f64,
    });
    // `null`: the engine's default.
    figures["eviction_threads"] = json!(a.eviction_threads);
    figures["durability"] = json!(durability);
    if let Some((_, split)) = placement {
        figures["placement"] = split;
    }
    figures["cpu_speed"] = speed.map_or(serde_json::Value::Null, |(_, split)| split);
    if let Some((_, m)) = &memory {
        if !a.json {
            print_memory(m);
        }
        figures["memory_speed"] = m.clone();
    }
    figures["flush_split"] = flush_split;
    figures["freeze_probe"] = freezes.unwrap_or(serde_json::Value::Null);
    figures["settle"] = settled.map_or(serde_json::Value::Null, |st| st.json());
    drop(t);
    db.close()?;
    if a.io_twin {
        // The engine's files go first, so that the twin starts with the
        // memory the engine started with; the host's pauses after memory
        // is freed are waited out as before the load.
        drop(dir);
        let settled = crate::stalls::settle(SETTLE_MAX);
        let ops = (per_thread * a.threads) as u64;
        let plan = crate::cache_twin::Plan {
            ops,
            threads: a.threads,
            read_bytes: (s.bytes_read / ops.max(1)) as usize,
            write_bytes: (s.bytes_written / ops.max(1)) as usize,
            final_len: s.file_size,
            frames_bytes: cache,
            log_bytes: (s.log_bytes_written / ops.max(1)) as usize,
            log_wrap: tidemark::DEFAULT_CHECKPOINT_LOG_SIZE,
            write_back_every: write_back_interval,
        };
        let twin_dir = tempfile::tempdir_in(&a.dir)?;
        // The probe's seconds start a few ms before the twin's, which
        // first preallocates its file's first step.
        let twin_start = Instant::now();
        let twin_probe = crate::cpu_speed::start_if(a.speed_probe, a.json, twin_start);
        let twin_memory_probe = crate::memory_speed::start_if(
            a.memory_probe,
            a.json,
            twin_start,
            twin_dir.path().join(crate::cache_twin::DATA_FILE),
        );
        let r = crate::cache_twin::run(twin_dir.path(), &plan)?;
        let (tmed, tmin) = r.median_and_min();
        let twin_windows: Vec<f64> = r.windows.iter().map(|&w| w as f64).collect();
        let twin_speed = twin_probe.map(|p| {
            crate::cpu_speed::figures(&twin_windows, tmed, &p.finish(), TARGET_MIN_OVER_MEDIAN)
        });
        let twin_memory = twin_memory_probe.map(|p| {
            crate::memory_speed::figures(&twin_windows, tmed, &p.finish(), TARGET_MIN_OVER_MEDIAN)
        });
        let ratio = if tmed > 0.0 { tmin / tmed } else { 0.0 };
        if !a.json {
            println!(
                "io twin: {} operations, each reading {}, writing {} and logging {} bytes, file grown to {:.1} MB",
                plan.ops,
                plan.read_bytes,
                plan.write_bytes,
                plan.log_bytes,
                plan.final_len as f64 / 1048576.0
            );
            println!("{}", settled.line());
            per_second("twin operations", r.windows.iter().map(|w| format!("{w}")));
            if let Some((by_second, _)) = &twin_speed {
                per_second("twin CPU speed %", speed_line(by_second));
            }
            if let Some((by_second, _)) = &twin_memory {
                per_second("twin memory speed %", speed_line(by_second));
            }
            per_second(
                "twin worst operation ms",
                r.worst_ns_by_second
                    .iter()
                    .map(|&ns| format!("{:.1}", ns as f64 / 1e6)),
            );
            println!("{:<36} {:>14.1}", "twin elapsed s", r.elapsed.as_secs_f64());
            println!("{:<36} {:>14.0}", "twin median window ops/s", tmed);
            println!("{:<36} {:>14.0}", "twin min window ops/s", tmin);
            println!(
                "{:<36} {:>14}",
                "min/median: engine / twin",
                format!("{min_over_median:.3}/{ratio:.3}")
            );
            println!(
                "{:<36} {:>14}",
                "worst op ms: engine / twin",
                format!("{:.1}/{:.1}", worst_ns as f64 / 1e6, r.worst_ms())
            );
            println!("{:<36} {:>14}", "twin write-backs", r.write_backs);
            if let Some((_, split)) = &twin_speed {
                println!("the twin's seconds by CPU speed:");
                print_speed(split);
            }
            if let Some((_, m)) = &twin_memory {
                println!("the twin's seconds by memory speed:");
                print_memory(m);
            }
        }
        figures["io_twin"] = json!({
            "ops": plan.ops, "read_bytes_per_op": plan.read_bytes, "write_bytes_per_op": plan.write_bytes, "log_bytes_per_op": plan.log_bytes,
            "file_mb": plan.final_len as f64 / 1048576.0, "elapsed_s": r.elapsed.as_secs_f64(),
            "windows": r.windows, "median_window": tmed, "min_window": tmin, "min_over_median": ratio,
            "worst_ms_by_second": r.worst_ns_by_second.iter().map(|&ns| ns as f64 / 1e6).collect::<Vec<_>>(),
            "max_latency_ms": r.worst_ms(), "write_backs": r.write_backs, "settle": settled.json(),
            "cpu_speed": twin_speed.map_or(serde_json::Value::Null, |(_, split)| split),
            "memory_speed": twin_memory.map_or(serde_json::Value::Null, |(_, m)| m),
        });
    }
    Ok(report::finish(
        a.json,
        "cache-pressure",
        report::machine(&a.dir),
        figures,
        &targets,
    ))
}

/// Prints a [`crate::memory_speed::figures`]'s rows.
fn print_memory(m: &serde_json::Value) {
    let or_dash = |v: &serde_json::Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    let (c, k, w, r) = (
        &m["copy"],
        &m["cold_copy"],
        &m["warm_copy"],
        &m["file_read"],
    );
    // Each unit: where its figures are (`""`: at the top), its name, the
    // label and key of its median time, and that time's divisor and
    // decimals as printed.
    let units = [
        (
            "",
            "memory",
            "median ns per dependent load",
            "median_ns_per_hop",
            1.0,
            1,
        ),
        (
            "copy",
            "copy",
            "median us per 16 KiB copy",
            "median_ns_per_copy",
            1e3,
            2,
        ),
        (
            "cold_copy",
            "cold copy",
            "median us, into a cached block",
            "median_ns_per_copy",
            1e3,
            2,
        ),
        (
            "warm_copy",
            "copy again",
            "median us, 5 ms after the first",
            "median_ns_per_copy",
            1e3,
            2,
        ),
        (
            "file_read",
            "file read",
            "probe's 16 KiB read, median us",
            "median_ns_per_read",
            1e3,
            2,
        ),
    ]
    .map(|(key, name, label, median, div, places)| {
        let fig = if key.is_empty() { m } else { &m[key] };
        let median = fig[median]
            .as_f64()
            .map(|x| format!("{:.*}", places, x / div));
        (fig, name, label, median)
    });
    for (fig, name, median_label, median) in units {
        if fig.is_null() {
            continue;
        }
        println!(
            "{:<36} {:>14}",
            format!("{name}: {median_label}"),
            median.unwrap_or_else(|| "-".into())
        );
        for (label, key) in [
            ("speed: min / median", "speed_min_over_median"),
            ("speed in the slowest second", "speed_in_slowest_second"),
        ] {
            println!(
                "{:<36} {:>14}",
                format!("{name} {label}"),
                or_dash(&fig[key])
            );
        }
        println!(
            "{:<36} {:>14}",
            format!("rate / {name} speed correlation"),
            or_dash(&fig["rate_speed_correlation"])
        );
    }
    if let Some(under) = m["under_target_seconds"].as_array() {
        for (i, u) in under.iter().enumerate() {
            println!(
                "{:<36} {:>14}",
                format!(
                    "second {} at {} of the median",
                    u["second"],
                    or_dash(&u["rate_over_median"])
                ),
                format!(
                    "walk {} copy {} cold {} again {} read {}",
                    or_dash(&u["memory_speed"]),
                    or_dash(&c["under_target_seconds"][i]["memory_speed"]),
                    or_dash(&k["under_target_seconds"][i]["memory_speed"]),
                    or_dash(&w["under_target_seconds"][i]["memory_speed"]),
                    or_dash(&r["under_target_seconds"][i]["memory_speed"])
                )
            );
        }
    }
}

/// Prints a [`crate::cpu_speed::figures`]'s rows.
fn print_speed(split: &serde_json::Value) {
    print_split(
        split,
        ("full", "slow"),
        [
            "seconds at full CPU speed / slower",
            "full speed: median / min ops/s",
            "slower: median / min ops/s",
            "min full-speed window / median",
        ],
    );
    println!(
        "{:<36} {:>14}",
        "seconds < 0.7 median / at full speed",
        format!(
            "{}/{}",
            split["under_target_seconds"], split["under_target_at_full_speed"]
        )
    );
    for (label, key) in [
        ("CPU speed: min / median", "speed_min_over_median"),
        (
            "min/median of ops/s over CPU speed",
            "min_over_median_at_full_speed",
        ),
    ] {
        println!("{:<36} {:>14}", label, ratio(split, key));
    }
}

/// Each second's CPU speed as a percent, `-` where unsampled.
fn speed_line(by_second: &[Option<f64>]) -> impl Iterator<Item = String> + '_ {
    by_second
        .iter()
        .map(|s| s.map_or("-".into(), |s| format!("{:.0}", 100.0 * s)))
}

/// A figure of `v` to three places, `-` where it is missing.
fn ratio(v: &serde_json::Value, key: &str) -> String {
    v[key].as_f64().map_or("-".into(), |x| format!("{x:.3}"))
}

/// Prints the rows of a [`report::split`] with sides `(a, b)`: the
/// seconds of each side, each side's median and lowest rate, and the
/// lowest `a` second over the median of all, under `labels` in that order.
fn print_split(split: &serde_json::Value, (a, b): (&str, &str), labels: [&str; 4]) {
    let rate = |k: String| split[&k].as_f64().map_or("-".into(), |x| format!("{x:.0}"));
    let side = |n: &str| {
        format!(
            "{}/{}",
            rate(format!("{n}_median_window")),
            rate(format!("{n}_min_window"))
        )
    };
    let rows = [
        format!(
            "{}/{}",
            split[format!("{a}_seconds")],
            split[format!("{b}_seconds")]
        ),
        side(a),
        side(b),
        ratio(split, &format!("{a}_min_over_median")),
    ];
    for (label, value) in labels.iter().zip(rows) {
        println!("{label:<36} {value:>14}");
    }
}

/// MB a byte counter moved by between two snapshots.
fn mb_between(before: u64, after: u64) -> f64 {
    after.saturating_sub(before) as f64 / 1048576.0
}

/// What the engine grew by in one second of the load.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Growth {
    /// MB the data file grew by (negative if it was cut).
    file_mb: f64,
    /// Log segments created (not recycled).
    log_segments: u64,
    /// A checkpoint was running when the second ended.
    checkpoint_running: bool,
    /// Share of the second the data file was being flushed (a checkpoint's
    /// or a write-back's steps and `fdatasync`), 0 to 1.
    flushing: f64,
    /// Write-backs of the data file between checkpoints that ended.
    write_backs: u64,
    /// Pages read into the cache.
    pages_read: u64,
    /// MB of grown room the preparer populated.
    populated_mb: f64,
    /// MB of pages first written into grown room not yet populated.
    unpopulated_mb: f64,
    /// Growths of the data file made on a write's path (not ahead of it),
    /// and growths made while the file was flushed.
    growths_by_writes: u64,
    growths_while_flushing: u64,
}

impl Growth {
    fn between(before: &tidemark::Stats, after: &tidemark::Stats) -> Growth {
        Growth {
            file_mb: (after.file_size as f64 - before.file_size as f64) / 1048576.0,
            log_segments: after
                .log_segments_created
                .saturating_sub(before.log_segments_created),
            checkpoint_running: after.checkpoint_running,
            flushing: {
                let us = after.data_flush_us.saturating_sub(before.data_flush_us) as f64;
                let span = after.uptime_us.saturating_sub(before.uptime_us) as f64;
                if span > 0.0 {
                    (us / span).min(1.0)
                } else {
                    0.0
                }
            },
            write_backs: after
                .data_write_backs
                .saturating_sub(before.data_write_backs),
            pages_read: after.pages_read.saturating_sub(before.pages_read),
            populated_mb: mb_between(before.file_bytes_populated, after.file_bytes_populated),
            unpopulated_mb: mb_between(
                before.file_bytes_written_unpopulated,
                after.file_bytes_written_unpopulated,
            ),
            growths_by_writes: after
                .file_growths_by_writes
                .saturating_sub(before.file_growths_by_writes),
            growths_while_flushing: after
                .file_growths_while_flushing
                .saturating_sub(before.file_growths_while_flushing),
        }
    }
}

/// The freeze probe's figures beside the slow inserts (`slow`: each
/// insert of at least [`SLOW`], as (began, ended) in seconds) and the
/// worst insert (`worst_ms`).
fn freeze_figures(
    per_cpu: &[Vec<crate::freezes::Span>],
    slow: &[crate::freezes::Span],
    worst_ms: f64,
    realtime: bool,
) -> serde_json::Value {
    use crate::freezes::{all_at_once, overlap};
    let all = all_at_once(per_cpu);
    let ms = |(a, b): crate::freezes::Span| (b - a) * 1000.0;
    let longest_one = per_cpu.iter().flatten().map(|&s| ms(s)).fold(0.0, f64::max);
    // Each slow insert, slowest first: when it began (s), how long it
    // took, how long every CPU was stopped in it, and the longest any one
    // CPU was (ms; the insert may have run on that one).
    let mut rows: Vec<[f64; 4]> = slow
        .iter()
        .map(|&(a, b)| {
            let one = per_cpu
                .iter()
                .map(|spans| overlap(spans, a, b) * 1000.0)
                .fold(0.0, f64::max);
            [
                (a * 1000.0).round() / 1000.0,
                ms((a, b)),
                overlap(&all, a, b) * 1000.0,
                one,
            ]
        })
        .collect();
    rows.sort_by(|x, y| y[1].total_cmp(&x[1]));
    // The worst slow insert no stop of every CPU fell in (`None`: every
    // slow insert had one, or none was slow).
    let worst_clear = rows.iter().find(|r| r[2] == 0.0).map(|r| r[1]);
    let worst = rows.first().copied();
    json!({
        "slowest_inserts": &rows[..rows.len().min(10)],
        "realtime": realtime,
        "late_ms_min": 4,
        "slow_insert_ms_min": SLOW.as_millis() as u64,
        "spans_by_cpu": per_cpu.iter().map(Vec::len).collect::<Vec<_>>(),
        "longest_one_cpu_ms": longest_one,
        "all_cpus_spans": all.len(),
        "all_cpus_longest_ms": all.iter().map(|&s| ms(s)).fold(0.0, f64::max),
        "all_cpus_total_ms": all.iter().map(|&s| ms(s)).fold(0.0, |t, x| t + x),
        "all_cpus_at": all.iter().map(|&(a, b)| [(a * 1000.0).round() / 1000.0, ((b - a) * 1e4).round() / 10.0]).collect::<Vec<_>>(),
        "slow_inserts": slow.len(),
        "slow_inserts_with_all_cpus_stopped": rows.iter().filter(|r| r[2] > 0.0).count(),
        "worst_insert_ms": worst_ms,
        "worst_insert_all_cpus_stopped_ms": worst.map(|w| w[2]),
        "worst_insert_one_cpu_stopped_ms": worst.map(|w| w[3]),
        "worst_insert_without_all_cpus_stopped_ms": worst_clear,
    })
}

fn print_freezes(f: &serde_json::Value) {
    let n = |k: &str| f[k].as_f64().map_or("-".into(), |x| format!("{x:.1}"));
    println!(
        "{:<36} {:>14}",
        "freeze probe at real-time priority",
        if f["realtime"].as_bool() == Some(true) {
            "yes"
        } else {
            "NO"
        }
    );
    println!(
        "{:<36} {:>14}",
        "all CPUs stopped: times / longest ms",
        format!("{}/{}", f["all_cpus_spans"], n("all_cpus_longest_ms"))
    );
    println!(
        "{:<36} {:>14}",
        "one CPU stopped, longest ms",
        n("longest_one_cpu_ms")
    );
    println!(
        "{:<36} {:>14}",
        "worst insert: one CPU stopped ms",
        n("worst_insert_one_cpu_stopped_ms")
    );
    println!(
        "{:<36} {:>14}",
        "slow inserts (>= 5 ms) / in a stop",
        format!(
            "{}/{}",
            f["slow_inserts"], f["slow_inserts_with_all_cpus_stopped"]
        )
    );
    println!(
        "{:<36} {:>14}",
        "worst insert: all CPUs stopped ms",
        n("worst_insert_all_cpus_stopped_ms")
    );
    println!(
        "{:<36} {:>14}",
        "worst insert with no stop in it ms",
        f["worst_insert_without_all_cpus_stopped_ms"]
            .as_f64()
            .map_or("< 5".into(), |x| format!("{x:.1}"))
    );
    if let Some(s) = f["slowest_inserts"].as_array() {
        println!(
            "slowest inserts (at s: ms, all CPUs / one CPU stopped ms): {}",
            s.iter()
                .map(|x| format!(
                    "{:.1}: {:.1}, {:.1}/{:.1}",
                    x[0].as_f64().unwrap_or(0.0),
                    x[1].as_f64().unwrap_or(0.0),
                    x[2].as_f64().unwrap_or(0.0),
                    x[3].as_f64().unwrap_or(0.0)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
}

/// Prints one figure for each second of the run on one line.
fn per_second(what: &str, values: impl Iterator<Item = String>) {
    println!(
        "per-second {what}: {}",
        values.collect::<Vec<_>>().join(" ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seconds_growth_is_the_difference_of_two_snapshots() {
        let mut before = tidemark::Stats::default();
        before.file_size = 64 << 20;
        before.log_segments_created = 3;
        let mut after = before.clone();
        after.file_size = 96 << 20;
        after.log_segments_created = 5;
        after.checkpoint_running = true;
        after.data_write_backs = 1;
        before.pages_read = 10;
        after.pages_read = 250;
        after.file_bytes_populated = 8 << 20;
        after.file_bytes_written_unpopulated = 3 << 20;
        before.file_growths_by_writes = 1;
        after.file_growths_by_writes = 3;
        after.file_growths_while_flushing = 1;
        before.uptime_us = 1_000_000;
        after.uptime_us = 2_000_000;
        before.data_flush_us = 100;
        after.data_flush_us = 250_100;
        let g = Growth::between(&before, &after);
        assert_eq!(g.flushing, 0.25);
        assert_eq!(g.populated_mb, 8.0);
        assert_eq!(g.unpopulated_mb, 3.0);
        assert_eq!(g.growths_by_writes, 2);
        assert_eq!(g.growths_while_flushing, 1);
        assert_eq!(g.file_mb, 32.0);
        assert_eq!(g.log_segments, 2);
        assert!(g.checkpoint_running);
        assert_eq!(g.write_backs, 1);
        assert_eq!(g.pages_read, 240);
        // A file cut by `compact` shrinks: the growth is negative.
        let cut = Growth::between(&after, &before);
        assert_eq!(cut.file_mb, -32.0);
        assert_eq!(cut.log_segments, 0, "segments created never count down");
        assert!(!cut.checkpoint_running);
        assert_eq!(cut.write_backs, 0);
    }

    /// A slow insert is set beside the time every CPU was stopped inside
    /// it; the worst insert with no such stop is the worst of the others.
    #[test]
    fn slow_inserts_are_split_by_the_stops_inside_them() {
        let per_cpu = vec![
            vec![(10.000, 10.030), (20.000, 20.010)],
            vec![(10.010, 10.040), (30.000, 30.050)],
        ];
        let slow = vec![(9.995, 10.035), (19.999, 20.012), (40.0, 40.008)];
        let f = freeze_figures(&per_cpu, &slow, 40.0, true);
        assert_eq!(f["all_cpus_spans"], 1);
        assert!((f["all_cpus_longest_ms"].as_f64().unwrap() - 20.0).abs() < 1e-6);
        assert!((f["longest_one_cpu_ms"].as_f64().unwrap() - 50.0).abs() < 1e-6);
        assert_eq!(f["slow_inserts_with_all_cpus_stopped"], 1);
        assert!((f["worst_insert_all_cpus_stopped_ms"].as_f64().unwrap() - 20.0).abs() < 1e-6);
        // 20.010 was one CPU's stop only: it counts as clear.
        assert!(
            (f["worst_insert_without_all_cpus_stopped_ms"]
                .as_f64()
                .unwrap()
                - 13.0)
                .abs()
                < 1e-6
        );
        // Every slow insert in a stop: nothing clear to report.
        let f = freeze_figures(&per_cpu, &slow[..1], 40.0, true);
        assert!(f["worst_insert_without_all_cpus_stopped_ms"].is_null());
        // The slowest first, each with its start and its stop.
        let f = freeze_figures(&per_cpu, &slow, 40.0, true);
        let s = f["slowest_inserts"].as_array().unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0][0], 9.995);
        assert!((s[0][2].as_f64().unwrap() - 20.0).abs() < 1e-6);
        // CPU 0 stopped 10.000-10.030 and CPU 1 10.010-10.040: 30 ms of
        // the first insert's 40 ms on one CPU, 25 ms on the other.
        assert!((s[0][3].as_f64().unwrap() - 30.0).abs() < 1e-6);
        assert!((f["worst_insert_one_cpu_stopped_ms"].as_f64().unwrap() - 30.0).abs() < 1e-6);
        assert!(s[1][1].as_f64().unwrap() >= s[2][1].as_f64().unwrap());
    }
}
