//! `tidemark`: the command-line interface to a tidemark database.
//!
//! Like `sqlite3`, it creates the database (and a table written to) when
//! it does not exist yet.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use tidemark::bson::Bson;
use tidemark::Database;
use tidemark_cli::{report, stat, transfer};

mod keys;

type KvResult = tidemark::Result<(Vec<u8>, Vec<u8>)>;

#[derive(Parser)]
#[command(
    name = "tidemark",
    version,
    about = "Inspect and modify a tidemark database"
)]
struct Cli {
    /// Database directory (created if missing).
    #[arg(long, global = true, default_value = "tidemark.db")]
    db: PathBuf,
    /// Cache size in MiB.
    #[arg(long, global = true, default_value_t = 64)]
    cache_mb: usize,
    /// Page size in bytes of a database this command creates (4096, 8192,
    /// 16384 or 32768); an existing database keeps its own.
    #[arg(long, global = true, default_value_t = tidemark::DEFAULT_PAGE_SIZE)]
    page_size: usize,
    /// Keys, values and bounds are hex on the command line, and `get` and
    /// `scan` print keys and values as hex: for binary keys and values.
    #[arg(long, global = true)]
    hex: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Draw statistics log files (or directories holding them) as one
    /// self-contained HTML page; does not open the database.
    Report {
        /// Statistics files (`stats.NNNNNN.jsonl`) or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The HTML file to write.
        #[arg(short, long, default_value = "report.html")]
        output: PathBuf,
    },
    /// Set KEY to VALUE in TABLE (creating the table if needed).
    Put {
        table: String,
        key: String,
        #[arg(required_unless_present = "value_file")]
        value: Option<String>,
        /// Take the value from this file's bytes (`-`: standard input)
        /// instead of the command line: values up to the engine's 16 MiB.
        #[arg(long, conflicts_with = "value")]
        value_file: Option<PathBuf>,
        /// When the command may return: none (in memory; the checkpoint at
        /// exit makes it durable), write (handed to the OS), fsync (on
        /// stable storage).
        #[arg(long, default_value = "write")]
        durability: tidemark::Durability,
    },
    /// Print the value of KEY in TABLE.
    Get {
        table: String,
        key: String,
        /// No newline after the value: its bytes alone (for `> file`).
        #[arg(long)]
        raw: bool,
    },
    /// Delete KEY from TABLE.
    Delete { table: String, key: String },
    /// Print `key<TAB>value` lines in key order.
    Scan {
        table: String,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Only keys that start with this.
        #[arg(long, conflicts_with_all = ["from", "to"])]
        prefix: Option<String>,
        /// Highest keys first.
        #[arg(long)]
        reverse: bool,
        /// Print at most this many lines.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// List tables.
    Tables,
    /// Drop a table and free its pages.
    DropTable { table: String },
    /// Print statistics.
    Stats {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write a checkpoint.
    Checkpoint,
    /// Check every page, checksum, key order and tree invariant, every
    /// collection's documents and index, and every capped ring.
    Verify,
    /// Create a collection; capped (a ring of BYTES) with --capped-size.
    CreateCollection {
        name: String,
        /// Make it a capped collection of this many bytes.
        #[arg(long)]
        capped_size: Option<u64>,
        /// Most documents a capped collection keeps.
        #[arg(long, requires = "capped_size")]
        max: Option<u64>,
    },
    /// List collections.
    Collections,
    /// Insert documents read from stdin, one MongoDB Extended JSON document
    /// per line, committed in batches (creating a regular collection if
    /// needed).
    ///
    /// A malformed line (or a document the collection refuses, such as a
    /// duplicate _id) is reported with its line number and skipped; with
    /// --stop-on-error the import stops there, with every line before it
    /// imported and none after.
    Import {
        collection: String,
        /// Documents per committed batch.
        #[arg(long, default_value_t = 1000)]
        batch: usize,
        /// Stop at the first bad line instead of skipping it.
        #[arg(long)]
        stop_on_error: bool,
    },
    /// Write every document of COLLECTION to stdout, one MongoDB Extended
    /// JSON document per line, in natural order.
    Export {
        collection: String,
        /// canonical (every BSON type kept exactly: round-trips) or relaxed.
        #[arg(long, default_value = "canonical", value_parser = ["canonical", "relaxed"])]
        mode: String,
    },
    /// Write a consistent copy of the database into DEST (a new or empty
    /// directory) while writes continue. A database another process has
    /// open is asked through its control socket; otherwise this command
    /// opens it.
    Backup { dest: PathBuf },
    /// Move tree pages from the end of the data file into its free blocks
    /// and return the free space to the file system (four checkpoints).
    Compact,
    /// A line per interval about a database open in another process: ops/s
    /// by kind, cache used and dirty %, application-thread evictions, log
    /// groups and fsyncs, checkpoints. Reads the database's statistics
    /// socket if it serves one, else follows its statistics log.
    Stat {
        /// Seconds between lines.
        #[arg(long, default_value_t = 1.0)]
        interval: f64,
        /// Stop after N lines.
        #[arg(long)]
        count: Option<u64>,
        /// Where the statistics log is, if not in the database directory.
        #[arg(long)]
        stats_dir: Option<PathBuf>,
    },
    /// Print documents as relaxed Extended JSON lines, in natural order.
    Find {
        collection: String,
        /// Newest first.
        #[arg(long)]
        reverse: bool,
        /// Print at most N documents.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print the physical byte offset of every record of a capped
    /// collection, one per line, in natural order (seed 000's layout).
    Layout { collection: String },
    /// Check a collection: counts, wasted bytes, fragmentation, problems.
    Validate {
        collection: String,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // The reader of the output went away (`tidemark layout c | head`):
        // stop quietly, as tools that die of SIGPIPE do.
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tidemark: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    if let Cmd::Report { paths, output } = &cli.cmd {
        let (n, bad) = report::report(paths, output)?;
        eprintln!(
            "wrote {} from {n} statistics lines{}",
            output.display(),
            if bad > 0 {
                format!(" ({bad} other lines skipped)")
            } else {
                String::new()
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    if let Cmd::Backup { dest } = &cli.cmd {
        let sock = cli.db.join(tidemark::CONTROL_SOCKET);
        if sock.exists() {
            let dest = std::path::absolute(dest)?;
            let dest = dest
                .to_str()
                .ok_or("the destination path must be UTF-8")?
                .to_string();
            let reply = stat::request(&sock, &format!("backup {dest}"), None)?;
            let v: serde_json::Value = serde_json::from_str(reply.trim())
                .map_err(|e| format!("{}: unexpected answer {reply:?}: {e}", sock.display()))?;
            if v["ok"] != true {
                return Err(format!("backup failed: {}", v["error"]).into());
            }
            println!(
                "backup of the running database: {} data bytes, {} ring bytes, {} log bytes in {} ms",
                v["data_bytes"],
                v["ring_bytes"],
                v["log_bytes"],
                v["duration_us"].as_u64().unwrap_or(0) / 1000
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
    if let Cmd::Stat {
        interval,
        count,
        stats_dir,
    } = &cli.cmd
    {
        if !(interval.is_finite() && *interval > 0.0) {
            return Err("--interval must be above zero".into());
        }
        let every = std::time::Duration::from_secs_f64(*interval);
        let mut out = std::io::stdout().lock();
        stat::run(&cli.db, stats_dir.as_deref(), every, *count, &mut out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let db = Database::builder()
        .cache_size(cli.cache_mb << 20)
        .page_size(cli.page_size)
        .open(&cli.db)?;
    let mut out = std::io::stdout().lock();
    let code = match cli.cmd {
        Cmd::Backup { dest } => {
            let b = db.backup(&dest)?;
            writeln!(
                out,
                "backup: {} data bytes, {} ring bytes, {} log bytes in {} ms",
                b.data_bytes,
                b.ring_bytes,
                b.log_bytes,
                b.duration_us / 1000
            )?;
            ExitCode::SUCCESS
        }
        Cmd::Compact => {
            let c = db.compact()?;
            writeln!(
                out,
                "compact: data file {} -> {} bytes",
                c.size_before, c.size_after
            )?;
            ExitCode::SUCCESS
        }
        Cmd::Report { .. } | Cmd::Stat { .. } => {
            unreachable!("handled before the database is opened")
        }
        Cmd::Put {
            table,
            key,
            value,
            value_file,
            durability,
        } => {
            let key = keys::decode(&key, cli.hex, "KEY")?;
            let value = match (value, value_file) {
                (Some(v), _) => keys::decode(&v, cli.hex, "VALUE")?,
                (None, Some(path)) => keys::read_value(&path)?,
                (None, None) => unreachable!("clap requires VALUE or --value-file"),
            };
            db.table(&table)?.put_with(&key, &value, durability)?;
            ExitCode::SUCCESS
        }
        Cmd::Get { table, key, raw } => match db
            .open_table(&table)?
            .get(&keys::decode(&key, cli.hex, "KEY")?)?
        {
            Some(v) => {
                keys::write(&mut out, &v, cli.hex)?;
                if !raw {
                    out.write_all(b"\n")?;
                }
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("tidemark: key not found");
                ExitCode::from(1)
            }
        },
        Cmd::Delete { table, key } => {
            if db
                .open_table(&table)?
                .delete(&keys::decode(&key, cli.hex, "KEY")?)?
            {
                ExitCode::SUCCESS
            } else {
                eprintln!("tidemark: key not found");
                ExitCode::from(1)
            }
        }
        Cmd::Scan {
            table,
            from,
            to,
            prefix,
            reverse,
            limit,
        } => {
            let t = db.open_table(&table)?;
            use std::ops::Bound::{Excluded, Included, Unbounded};
            let arg = |a: &Option<String>, what| {
                a.as_deref()
                    .map(|k| keys::decode(k, cli.hex, what))
                    .transpose()
            };
            let (lo, hi) = match arg(&prefix, "--prefix")? {
                Some(p) => {
                    let end = keys::prefix_end(&p);
                    (Some(p), end)
                }
                None => (arg(&from, "--from")?, arg(&to, "--to")?),
            };
            let lo = lo.as_deref().map_or(Unbounded, Included);
            let hi = hi.as_deref().map_or(Unbounded, Excluded);
            let mut range = t.range::<&[u8], _>((lo, hi));
            if let Some(n) = limit {
                range = range.read_ahead(n);
            }
            let it: Box<dyn Iterator<Item = KvResult>> = if reverse {
                Box::new(range.rev())
            } else {
                Box::new(range)
            };
            for kv in it.take(limit.unwrap_or(usize::MAX)) {
                let (k, v) = kv?;
                keys::write(&mut out, &k, cli.hex)?;
                out.write_all(b"\t")?;
                keys::write(&mut out, &v, cli.hex)?;
                out.write_all(b"\n")?;
            }
            ExitCode::SUCCESS
        }
        Cmd::Tables => {
            for name in db.list_tables()? {
                writeln!(out, "{name}")?;
            }
            ExitCode::SUCCESS
        }
        Cmd::DropTable { table } => {
            db.drop_table(&table)?;
            ExitCode::SUCCESS
        }
        Cmd::Stats { json } => {
            let s = db.stats();
            if json {
                let obj: serde_json::Map<String, serde_json::Value> = s
                    .fields()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.into()))
                    .collect();
                writeln!(out, "{}", serde_json::Value::Object(obj))?;
            } else {
                for (k, v) in s.fields() {
                    writeln!(out, "{k:<28} {v}")?;
                }
            }
            ExitCode::SUCCESS
        }
        Cmd::Checkpoint => {
            let info = db.checkpoint()?;
            writeln!(
                out,
                "checkpoint: {} pages written in {} us",
                info.pages_written, info.duration_us
            )?;
            ExitCode::SUCCESS
        }
        Cmd::Verify => {
            let r = db.verify()?;
            writeln!(
                out,
                "tables {}  pages {}  overflow pages {}  entries {}",
                r.tables, r.pages, r.overflow_pages, r.entries
            )?;
            for p in &r.problems {
                writeln!(out, "problem: {p}")?;
            }
            if r.is_ok() {
                writeln!(out, "ok")?;
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Cmd::CreateCollection {
            name,
            capped_size,
            max,
        } => {
            let capped = capped_size.map(|size| tidemark::CappedOptions { size, max });
            db.create_collection(&name, capped)?;
            ExitCode::SUCCESS
        }
        Cmd::Collections => {
            for name in db.list_collections()? {
                writeln!(out, "{name}")?;
            }
            ExitCode::SUCCESS
        }
        Cmd::Import {
            collection,
            batch,
            stop_on_error,
        } => {
            let started = std::time::Instant::now();
            let stdin = std::io::stdin();
            let size = std::fs::metadata("/dev/stdin")
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            let r = transfer::import(
                &db,
                &collection,
                batch.max(1),
                stop_on_error,
                stdin.lock(),
                size,
            )?;
            for (line, why) in &r.skipped {
                eprintln!("line {line}: {why} (skipped)");
            }
            eprintln!("{}", transfer::summary(&r, started));
            match &r.stopped_at {
                Some((line, why)) => {
                    eprintln!(
                        "stopped at line {line}: {why}; every line before it was imported, none after"
                    );
                    ExitCode::from(1)
                }
                None if r.skipped.is_empty() => ExitCode::SUCCESS,
                None => ExitCode::from(1),
            }
        }
        Cmd::Export { collection, mode } => {
            let started = std::time::Instant::now();
            let n = transfer::export(&db, &collection, mode == "canonical", &mut out)?;
            let secs = started.elapsed().as_secs_f64().max(1e-6);
            eprintln!(
                "exported {n} documents in {secs:.1} s ({:.0} documents/s)",
                n as f64 / secs
            );
            ExitCode::SUCCESS
        }
        Cmd::Find {
            collection,
            reverse,
            limit,
        } => {
            let c = db.get_collection(&collection)?;
            let cur = if reverse { c.find_reverse() } else { c.find() };
            for d in cur.take(limit.unwrap_or(usize::MAX)) {
                let json = Bson::Document(d?).into_relaxed_extjson();
                writeln!(out, "{json}")?;
            }
            ExitCode::SUCCESS
        }
        Cmd::Layout { collection } => {
            for off in db.get_collection(&collection)?.layout()? {
                writeln!(out, "{off}")?;
            }
            ExitCode::SUCCESS
        }
        Cmd::Validate { collection, json } => {
            let v = db.get_collection(&collection)?.validate()?;
            if json {
                let obj = serde_json::json!({
                    "collection": collection,
                    "count": v.count,
                    "data_bytes": v.data_bytes,
                    "wasted_bytes": v.wasted_bytes,
                    "ring_size": v.ring_size,
                    "fragmentation": v.fragmentation,
                    "discontinuities": v.discontinuities,
                    "wraps": v.wraps,
                    "index_entries": v.index_entries,
                    "problems": v.problems,
                    "valid": v.problems.is_empty(),
                });
                writeln!(out, "{obj}")?;
            } else {
                writeln!(out, "count          {}", v.count)?;
                writeln!(out, "data_bytes     {}", v.data_bytes)?;
                writeln!(out, "index_entries  {}", v.index_entries)?;
                if let Some(size) = v.ring_size {
                    writeln!(out, "ring_size      {size}")?;
                    writeln!(out, "wasted_bytes   {}", v.wasted_bytes)?;
                }
                if let Some(f) = v.fragmentation {
                    writeln!(out, "fragmentation  {f:.2}")?;
                }
                if let (Some(d), Some(w)) = (v.discontinuities, v.wraps) {
                    writeln!(out, "discontinuities {d}  wraps {w}")?;
                }
                for p in &v.problems {
                    writeln!(out, "problem: {p}")?;
                }
                if v.problems.is_empty() {
                    writeln!(out, "ok")?;
                }
            }
            if v.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    };
    out.flush()?;
    db.close()?;
    Ok(code)
}
