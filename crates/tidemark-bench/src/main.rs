//! `tidemark-bench`: benchmark workloads that print tables (and `--json`).
//!
//! Each workload reproduces one pathology of BRIEF.md and prints its
//! targets with the figure measured and whether it holds. Peers (WiredTiger,
//! RocksDB, LMDB, ...) live only in this crate, never in the engine.

mod cache_pressure;
mod cache_twin;
mod capped;
mod checkpoint;
mod cpu_speed;
mod crash_loop;
mod engines;
mod fill;
mod freezes;
mod import_export;
mod io_twin;
mod memcg;
mod memory_speed;
mod pathologies;
mod pinned;
mod placement;
mod plots;
mod read_after_checkpoint;
mod report;
mod snapshots;
mod stalls;
mod versus;
mod wal_scaling;
mod ycsb;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;
pub(crate) fn msg(s: &str) -> Box<dyn std::error::Error + Send + Sync> {
    s.into()
}

#[derive(Parser)]
#[command(
    name = "tidemark-bench",
    version,
    about = "tidemark benchmark workloads"
)]
struct Cli {
    /// Reduced size that runs in about a minute.
    #[arg(long, global = true)]
    quick: bool,
    /// Print one JSON object (figures and a `targets` array) instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Directory for the benchmark databases (a fresh subdirectory is used
    /// and removed).
    #[arg(long, global = true, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// All five pathology workloads at their --quick size, one after the
    /// other, and one verdict table of every guarantee (the main job; a
    /// few minutes; --quick changes nothing).
    Pathologies,
    /// Insert-heavy load, 10 MB cache, dataset >= 100x the cache (pathology 2).
    CachePressure {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, default_value_t = 10)]
        cache_mb: usize,
        /// Bytes of keys+values inserted, in MB (default 1024; 200 with --quick).
        #[arg(long)]
        dataset_mb: Option<usize>,
        /// Seconds between periodic checkpoints (the engine's default is 60).
        #[arg(long, default_value_t = 60)]
        checkpoint_secs: u64,
        /// Seconds between write-backs of the data file between
        /// checkpoints (0: none; the engine's default is 20).
        #[arg(long)]
        write_back_secs: Option<u64>,
        /// Log size, in MB, at which a checkpoint starts (0: none; the
        /// engine's default is 1024).
        #[arg(long)]
        checkpoint_log_mb: Option<u64>,
        /// Keep the statistics log in this directory (a line a second), for
        /// `tidemark report`.
        #[arg(long)]
        stats_log: Option<PathBuf>,
        /// Page size of the database, in bytes (4096, 8192, 16384 or 32768).
        #[arg(long, default_value_t = tidemark::DEFAULT_PAGE_SIZE)]
        page_size: usize,
        /// Background eviction workers (the engine's `eviction_threads`;
        /// 0 leaves all eviction to the inserting threads; without it, the
        /// engine's default).
        #[arg(long)]
        eviction_threads: Option<usize>,
        /// Durability of each insert's commit: none, write or fsync
        /// (without it, the engine's default, write).
        #[arg(long)]
        durability: Option<tidemark::Durability>,
        /// Time a cache line's round trip between CPUs 0 and 1 four times a
        /// second while the load runs, and split the per-second rates by
        /// where the host had put the CPUs (near or far apart). Off by
        /// default: it spins both CPUs briefly at each sample.
        #[arg(long)]
        placement_probe: bool,
        /// Start inserting at once, without first waiting (up to 45 s)
        /// for the machine to stop pausing after memory an earlier run
        /// freed.
        #[arg(long)]
        no_settle: bool,
        /// Watch for the machine stopping its CPUs while the load runs: a
        /// thread pinned to each CPU at real-time priority wakes every
        /// millisecond and notes each wake over 4 ms late; prints the
        /// times every CPU was stopped at once and how much of the worst
        /// insert fell in one. Off by default: the wakes shorten other
        /// threads' waits for a CPU, so such a run is not the plain load.
        #[arg(long)]
        freeze_probe: bool,
        /// After the load, run its I/O without the engine: the same number
        /// of operations on as many threads, each reading and writing what
        /// an insert read from and wrote to the data file on average, over
        /// a file grown to the data file's size, written back as the
        /// engine writes it back. Prints the twin's slowest second against
        /// its median beside the engine's: what the machine gives this I/O
        /// whatever the engine does. Adds about as long as the load took.
        #[arg(long)]
        io_twin: bool,
        /// Do not time a fixed unit of work on each CPU every 5 ms (about
        /// 0.2 % of each CPU) to print the speed the machine ran at in
        /// each second beside the load's rate.
        #[arg(long)]
        no_speed_probe: bool,
        /// Time, on each CPU every 5 ms while the load runs (and its
        /// twin, with --io-twin), a walk of 256 dependent loads over 64
        /// MiB, three 16 KiB copies within it and a 16 KiB pread of the load's
        /// data file, and print each one's speed in the load's slow
        /// seconds. Off by default: it takes about 3 % of each CPU and 64
        /// MiB per CPU.
        #[arg(long)]
        memory_probe: bool,
    },
    /// Idle checkpoint time vs cache size; writer latency during a checkpoint (pathology 3).
    Checkpoint {
        /// Sample where the host has put the CPUs (as `cache-pressure
        /// --placement-probe`) through the writer's rounds, and print each
        /// round's p99s beside the share of its samples taken far apart.
        #[arg(long)]
        placement_probe: bool,
        /// Add a window to each round in which the writer runs beside the
        /// checkpoint's I/O done without the engine (the dirty set's pages
        /// copied, checksummed, written to a file of their own and flushed
        /// as the engine flushes), and print the writer's latency there:
        /// what the device and the kernel take from the writer whatever
        /// the engine does. Adds about a second per round.
        #[arg(long)]
        io_twin: bool,
        /// Time a fixed unit of work on each CPU every 5 ms through the
        /// writer's rounds and print the speed the CPUs ran at in each
        /// round's baseline and beside its checkpoint. Off by default: its
        /// wakes can preempt the writer, whose p99 is the figure measured.
        #[arg(long)]
        speed_probe: bool,
    },
    /// Page faults and read throughput right after a checkpoint (pathology 5).
    ReadAfterCheckpoint {
        #[arg(long, default_value_t = 2)]
        threads: usize,
        /// Time a fixed unit of work on each CPU every 5 ms through the
        /// rounds and print the speed the CPUs ran at in each read window.
        /// Off by default: its wakes take the CPU from the readers, whose
        /// throughput is the figure measured.
        #[arg(long)]
        speed_probe: bool,
    },
    /// Group commit scaling, 1..64 threads, Write and Fsync, against SQLite (pathology 4).
    WalScaling {
        /// Thread counts to measure (targets need 1 and 64 in the list).
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
        threads: Vec<usize>,
    },
    /// Seed 000's workloads on a capped collection and on a regular one with
    /// deletes of the oldest documents (pathology 1).
    Capped {
        /// Inserting threads.
        #[arg(long, default_value_t = 8)]
        threads: usize,
        /// Ring size in MiB.
        #[arg(long, default_value_t = 100)]
        ring_mb: u64,
        /// Laps of the ring each workload writes (default 10; 2 with --quick).
        #[arg(long)]
        laps: Option<u64>,
        /// The smaller ring of the latency-against-ring-size test in MiB
        /// (default --ring-mb; 16 with --quick); the other is ten times
        /// larger, and both get the same bytes.
        #[arg(long)]
        size_test_mb: Option<u64>,
        /// Run only workloads whose name contains this (e.g. "case 1").
        #[arg(long)]
        only: Option<String>,
        /// Skip the regular-collection alternative.
        #[arg(long)]
        capped_only: bool,
    },
    /// A million mixed documents through `tidemark import` and `export`'s
    /// code; checks the round trip is byte-identical BSON (100,000 with
    /// --quick).
    ImportExport {
        /// Documents (default 1,000,000; 100,000 with --quick).
        #[arg(long)]
        docs: Option<u64>,
    },
    /// How long this machine keeps a thread from running, with no database:
    /// one thread pinned to each CPU reads the clock in a loop, alone and
    /// then touching new memory, and prints its longest gaps (the floor
    /// under any latency bound here; 60 s a phase, 15 with --quick).
    Stalls,
    /// Blocks in use per byte inserted, for keys inserted in order
    /// (ascending, descending, several writers, interleaved streams,
    /// ObjectId documents) against random keys.
    Fill {
        /// Keys (and documents) of each order (default 1,000,000; 200,000
        /// with --quick).
        #[arg(long)]
        keys: Option<u64>,
    },
    /// Reliability: a randomized workload in a child process killed with
    /// SIGKILL at random moments; after each kill, reopen, verify and
    /// compare with the model (25 cycles with --quick, 200 by default).
    CrashLoop {
        /// Cycles to run.
        #[arg(long)]
        cycles: Option<u64>,
        /// Seed of the workload (printed when chosen at random).
        #[arg(long)]
        seed: Option<u64>,
        /// Page size of the database the loop creates: 4096, 8192, 16384
        /// or 32768 bytes (default: the engine's, 16384).
        #[arg(long)]
        page_size: Option<usize>,
    },
    /// The child process of crash-loop (not for direct use).
    #[command(hide = true)]
    CrashChild {
        #[arg(long)]
        seed: u64,
        #[arg(long)]
        cycle: u64,
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        page_size: usize,
    },
    /// YCSB core workloads (load, A-F) on tidemark, or with --compare on
    /// every engine built in (peers need `--features peers`).
    Ycsb {
        #[command(flatten)]
        y: YcsbArgs,
        /// Every engine built into this binary, side by side.
        #[arg(long)]
        compare: bool,
        /// Engines to run (ignored with --compare).
        #[arg(long, value_delimiter = ',', default_value = "tidemark")]
        engines: Vec<String>,
        /// Rounds; each engine's figures are medians over them (default 3;
        /// 1 with --quick).
        #[arg(long)]
        rounds: Option<usize>,
    },
    /// One engine's phases (the child process of ycsb; not for direct use).
    #[command(hide = true)]
    YcsbChild {
        #[command(flatten)]
        y: YcsbArgs,
        #[arg(long)]
        engine: String,
    },
    /// A pathology workload on tidemark and every peer built in, side by
    /// side (peers need `--features peers`).
    Versus {
        #[arg(value_enum)]
        workload: versus::Workload,
        /// Engines to run (default: every engine built in).
        #[arg(long, value_delimiter = ',')]
        engines: Option<Vec<String>>,
        /// Draw the plot (SVG) of this workload into this directory.
        #[arg(long)]
        plots: Option<PathBuf>,
        /// Runs of every engine; each reports its median run (default 3;
        /// 1 with --quick).
        #[arg(long)]
        rounds: Option<usize>,
        /// Caps each engine's process at this many MB, heap and page cache
        /// together, with a memory cgroup (as `ycsb --memory-limit-mb`).
        #[arg(long)]
        memory_limit_mb: Option<u64>,
    },
    /// One engine of versus (the child process; not for direct use).
    #[command(hide = true)]
    VersusChild {
        #[arg(value_enum)]
        workload: versus::Workload,
        #[arg(long)]
        engine: String,
        /// The memory cgroup the child joins first (set by the parent).
        #[arg(long)]
        cgroup: Option<PathBuf>,
    },
    /// Writer throughput with 0, 1 and 8 long-lived snapshot readers.
    Snapshots {
        /// Writer threads.
        #[arg(long, default_value_t = 1)]
        writers: usize,
        /// Reads per second of each reader.
        #[arg(long, default_value_t = 2000)]
        reader_rate: u64,
        /// Reads per wake-up of a reader (1: a sleep before every read).
        #[arg(long, default_value_t = 1)]
        burst: u64,
    },
}

#[derive(clap::Args, Clone)]
struct YcsbArgs {
    /// Phases in order (the load always runs first).
    #[arg(long, value_delimiter = ',', default_value = "load,a,b,c,f,d,e")]
    workloads: Vec<String>,
    /// Records loaded (default 1,000,000; 100,000 with --quick).
    #[arg(long)]
    records: Option<u64>,
    /// Operations of each workload (default 1,000,000; 100,000 with --quick).
    #[arg(long)]
    ops: Option<u64>,
    /// Client threads, each with its own worker (session, connection).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// none, write or fsync: what every commit must survive.
    #[arg(long, default_value = "write")]
    durability: String,
    /// Memory budget of every engine's cache, MB.
    #[arg(long, default_value_t = 64)]
    cache_mb: usize,
    /// Bytes of each record's value.
    #[arg(long, default_value_t = 1000)]
    value_size: usize,
    /// Seed of the values and the request streams (keys are fixed by
    /// record number).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Longest each phase runs, seconds (YCSB's maxexecutiontime; a load
    /// cut short is completed in bulk, unmeasured, so every engine runs the
    /// workloads on the same records). Default 120; 5 with --quick.
    #[arg(long)]
    max_secs: Option<f64>,
    /// uniform, zipfian or latest: overrides every workload's own request
    /// distribution.
    #[arg(long)]
    distribution: Option<String>,
    /// Caps each engine's process at this many MB of memory, its heap and
    /// the page cache it uses together, with a memory cgroup (needs write
    /// access to the cgroup hierarchy, e.g. root): the same budget for
    /// engines that cache in their own memory and for those, like LMDB,
    /// whose cache is the kernel's page cache.
    #[arg(long)]
    memory_limit_mb: Option<u64>,
    /// The memory cgroup the child joins first (set by the parent).
    #[arg(long, hide = true)]
    cgroup: Option<PathBuf>,
    /// Page size of tidemark's database, bytes (4096, 8192, 16384 or
    /// 32768; the peers keep their own).
    #[arg(long, default_value_t = tidemark::DEFAULT_PAGE_SIZE)]
    tidemark_page_size: usize,
}

fn ycsb_args(
    y: YcsbArgs,
    engines: Vec<String>,
    rounds: usize,
    quick: bool,
    json: bool,
    dir: PathBuf,
) -> Result<ycsb::Args, Box<dyn std::error::Error + Send + Sync>> {
    ycsb::check_dir(&dir)?;
    Ok(ycsb::Args {
        engines,
        phases: y.workloads.iter().map(|w| w.to_lowercase()).collect(),
        records: y.records.unwrap_or(if quick { 100_000 } else { 1_000_000 }),
        ops: y.ops.unwrap_or(if quick { 100_000 } else { 1_000_000 }),
        threads: y.threads.max(1),
        durability: engines::Durability::parse(&y.durability)?,
        cache_mb: y.cache_mb,
        value_size: y.value_size.max(1),
        rounds: rounds.max(1),
        seed: y.seed,
        max_secs: y.max_secs.unwrap_or(if quick { 5.0 } else { 120.0 }),
        distribution: y
            .distribution
            .as_deref()
            .map(ycsb::Dist::parse)
            .transpose()?,
        memory_limit_mb: y.memory_limit_mb,
        cgroup: y.cgroup,
        tidemark_page_size: y.tidemark_page_size,
        json,
        dir,
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Pathologies => pathologies::run(&pathologies::Args {
            json: cli.json,
            dir: cli.dir,
        }),
        Cmd::CachePressure {
            threads,
            cache_mb,
            dataset_mb,
            checkpoint_secs,
            write_back_secs,
            checkpoint_log_mb,
            stats_log,
            page_size,
            eviction_threads,
            durability,
            placement_probe,
            no_settle,
            freeze_probe,
            io_twin,
            no_speed_probe,
            memory_probe,
        } => cache_pressure::run(&cache_pressure::Args {
            memory_probe,
            eviction_threads,
            durability,
            speed_probe: !no_speed_probe,
            settle: !no_settle,
            freeze_probe,
            io_twin,
            checkpoint_secs,
            write_back_secs,
            checkpoint_log_mb,
            stats_log,
            page_size,
            placement_probe,
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            threads,
            cache_mb,
            dataset_mb: dataset_mb.unwrap_or(if cli.quick { 200 } else { 1024 }),
        }),
        Cmd::Capped {
            threads,
            ring_mb,
            laps,
            size_test_mb,
            only,
            capped_only,
        } => capped::run(&capped::Args {
            only,
            capped_only,
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            threads,
            ring_mb,
            laps: laps.unwrap_or(if cli.quick { 2 } else { 10 }),
            size_test_mb: size_test_mb.unwrap_or(if cli.quick { 16 } else { ring_mb }),
        }),
        Cmd::Checkpoint {
            placement_probe,
            io_twin,
            speed_probe,
        } => checkpoint::run(&checkpoint::Args {
            speed_probe,
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            placement_probe,
            io_twin,
        }),
        Cmd::ReadAfterCheckpoint {
            threads,
            speed_probe,
        } => read_after_checkpoint::run(&read_after_checkpoint::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            threads,
            speed_probe,
        }),
        Cmd::WalScaling { threads } => wal_scaling::run(&wal_scaling::Args {
            threads,
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
        }),
        Cmd::CrashLoop {
            cycles,
            seed,
            page_size,
        } => crash_loop::run(&crash_loop::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            cycles,
            seed,
            page_size,
        }),
        Cmd::CrashChild {
            seed,
            cycle,
            db,
            page_size,
        } => crash_loop::child(&db, seed, cycle, page_size).map(|()| true),
        Cmd::Stalls => stalls::run(&stalls::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
        }),
        Cmd::Fill { keys } => fill::run(&fill::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            keys,
        }),
        Cmd::ImportExport { docs } => import_export::run(&import_export::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            docs,
        }),
        Cmd::Ycsb {
            y,
            compare,
            engines,
            rounds,
        } => {
            let engines = if compare {
                engines::available().iter().map(|s| s.to_string()).collect()
            } else {
                engines
            };
            let rounds = rounds.unwrap_or(if cli.quick { 1 } else { 3 });
            ycsb_args(y, engines, rounds, cli.quick, cli.json, cli.dir).and_then(|a| ycsb::run(&a))
        }
        Cmd::Versus {
            workload,
            engines,
            plots,
            rounds,
            memory_limit_mb,
        } => versus::run(&versus::Args {
            memory_limit_mb,
            rounds: rounds.unwrap_or(if cli.quick { 1 } else { 3 }).max(1),
            workload,
            engines: engines
                .unwrap_or_else(|| engines::available().iter().map(|s| s.to_string()).collect()),
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            plots,
        }),
        Cmd::VersusChild {
            workload,
            engine,
            cgroup,
        } => versus::child(workload, &engine, cli.quick, &cli.dir, cgroup.as_deref()),
        Cmd::YcsbChild { y, engine } => ycsb_args(y, vec![engine], 1, cli.quick, cli.json, cli.dir)
            .and_then(|a| ycsb::child(&a)),
        Cmd::Snapshots {
            writers,
            reader_rate,
            burst,
        } => snapshots::run(&snapshots::Args {
            quick: cli.quick,
            json: cli.json,
            dir: cli.dir,
            writers,
            reader_rate,
            burst,
        }),
    };
    match r {
        // The exit status reports whether every target held.
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("tidemark-bench: {e}");
            ExitCode::from(2)
        }
    }
}
