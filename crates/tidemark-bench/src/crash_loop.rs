//! The crash loop: a randomized workload in a child process, killed with
//! SIGKILL at a random moment, again and again, on one database. After each
//! kill the parent reopens the database, runs `verify`, and checks it
//! against a model it rebuilds from the seed:
//!
//! - every commit acknowledged with `Write` or `Fsync` is present;
//! - what is present is exactly a prefix of the commit order (no holes, no
//!   batch or transaction partly visible);
//! - the capped oplog holds a contiguous run of the newest entries.
//!
//! Commit `i` of cycle `c` is a function of (seed, c, i): the child and the
//! parent generate the same stream. Every commit is a batch or a
//! transaction that also sets `seq[c] = i`, so the recovered prefix length
//! can be read back directly and the whole state compared with the model at
//! that point. The child prints one line per acknowledged commit (`i
//! durability`) and flushes it before the next commit starts.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tidemark::bson::{doc, Bson};
use tidemark::{CappedOptions, Database, Durability, WriteBatch};

use crate::report::{self, Target};
use crate::{msg, BoxResult};

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub cycles: Option<u64>,
    pub seed: Option<u64>,
    /// Page size of the database the loop creates (the engine's default
    /// when `None`).
    pub page_size: Option<usize>,
}

const TABLES: [&str; 3] = ["t0", "t1", "t2"];
const OPLOG_SIZE: u64 = 64 * 1024;

/// One commit of the stream.
#[derive(Debug, Clone)]
struct Commit {
    durability: Durability,
    /// (table, key, Some(value) or None for a delete).
    writes: Vec<(usize, String, Option<Vec<u8>>)>,
    /// A document `{_id: key}` into `docs`.
    doc: Option<String>,
    /// An oplog entry `{c, i}`; only in batches.
    oplog: bool,
    /// Run as a write transaction (else a batch).
    txn: bool,
    /// Checkpoint after it.
    checkpoint: bool,
}

fn key(cycle: u64, i: u64) -> String {
    format!("c{cycle:04}-{i:07}")
}

fn value(cycle: u64, i: u64, t: usize) -> Vec<u8> {
    let len = 20 + ((cycle * 31 + i * 7 + t as u64) % 400) as usize;
    let mut v = format!("{cycle}:{i}:{t}:").into_bytes();
    v.resize(len, b'x');
    v
}

/// The commits of cycle `cycle`, generated in order.
struct Stream {
    cycle: u64,
    rng: SmallRng,
    next: u64,
}

impl Stream {
    fn new(seed: u64, cycle: u64) -> Stream {
        Stream {
            cycle,
            rng: SmallRng::seed_from_u64(seed ^ cycle.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            next: 1,
        }
    }

    fn next_commit(&mut self) -> (u64, Commit) {
        let (c, i) = (self.cycle, self.next);
        self.next += 1;
        let r = &mut self.rng;
        let durability = match r.gen_range(0..10) {
            0..=1 => Durability::None,
            2..=7 => Durability::Write,
            _ => Durability::Fsync,
        };
        let txn = r.gen_bool(0.25);
        let mut writes = Vec::new();
        for t in 0..TABLES.len() {
            if r.gen_bool(0.6) {
                writes.push((t, key(c, i), Some(value(c, i, t))));
            }
        }
        // Delete what an earlier commit of this cycle may have written.
        if i > 1 && r.gen_bool(0.3) {
            let j = r.gen_range(1..i);
            writes.push((r.gen_range(0..TABLES.len()), key(c, j), None));
        }
        let doc = (!txn && r.gen_bool(0.5)).then(|| key(c, i));
        let oplog = !txn && r.gen_bool(0.7);
        let checkpoint = r.gen_range(0..300) == 0;
        (
            i,
            Commit {
                durability,
                writes,
                doc,
                oplog,
                txn,
                checkpoint,
            },
        )
    }
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::None => "none",
        Durability::Write => "write",
        _ => "fsync",
    }
}

fn open(dir: &Path, page_size: usize) -> BoxResult<Database> {
    Ok(Database::builder()
        .page_size(page_size)
        .cache_size(4 << 20)
        .checkpoint_interval(None)
        .log_segment_size(1 << 20)
        .open(dir)?)
}

/// The child: applies the stream of `cycle` until killed.
pub fn child(dir: &Path, seed: u64, cycle: u64, page_size: usize) -> BoxResult<()> {
    let db = open(dir, page_size)?;
    let oplog = match db.get_collection("oplog") {
        Ok(c) => c,
        Err(tidemark::Error::CollectionNotFound(_)) => db.create_collection(
            "oplog",
            Some(CappedOptions {
                size: OPLOG_SIZE,
                max: None,
            }),
        )?,
        Err(e) => return Err(e.into()),
    };
    drop(oplog);
    db.collection("docs")?;
    for t in TABLES {
        db.table(t)?;
    }
    db.table("seq")?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut s = Stream::new(seed, cycle);
    let seq_key = format!("c{cycle:04}");
    loop {
        let (i, c) = s.next_commit();
        let seq_val = i.to_be_bytes();
        if c.txn {
            let mut tx = db.begin_write();
            for (t, k, v) in &c.writes {
                match v {
                    Some(v) => tx.put(TABLES[*t], k, v)?,
                    None => tx.delete(TABLES[*t], k)?,
                }
            }
            tx.put("seq", &seq_key, seq_val)?;
            tx.commit_with(c.durability)?;
        } else {
            let mut b = WriteBatch::new();
            for (t, k, v) in &c.writes {
                match v {
                    Some(v) => b.put(TABLES[*t], k, v),
                    None => b.delete(TABLES[*t], k),
                };
            }
            b.put("seq", &seq_key, seq_val);
            if let Some(id) = &c.doc {
                b.insert_one("docs", &doc! {"_id": id, "c": cycle as i64, "i": i as i64})?;
            }
            if c.oplog {
                b.insert_one(
                    "oplog",
                    &doc! {"c": cycle as i64, "i": i as i64, "pad": "o".repeat((i % 300) as usize)},
                )?;
            }
            b.set_durability(c.durability);
            db.write(&b)?;
        }
        writeln!(out, "{i} {}", durability_name(c.durability))?;
        out.flush()?;
        if c.checkpoint {
            db.checkpoint()?;
        }
    }
}

/// The model: every table's contents and the documents' ids.
#[derive(Default, Clone)]
struct Model {
    tables: [BTreeMap<String, Vec<u8>>; 3],
    docs: BTreeSet<String>,
    /// Oplog entries in commit order: (cycle, i).
    oplog: Vec<(u64, u64)>,
}

impl Model {
    fn apply(&mut self, cycle: u64, i: u64, c: &Commit) {
        for (t, k, v) in &c.writes {
            match v {
                Some(v) => {
                    self.tables[*t].insert(k.clone(), v.clone());
                }
                None => {
                    self.tables[*t].remove(k);
                }
            }
        }
        if let Some(id) = &c.doc {
            self.docs.insert(id.clone());
        }
        if c.oplog {
            self.oplog.push((cycle, i));
        }
    }
}

/// What one cycle found.
struct Cycle {
    acked: u64,
    acked_durable: u64,
    recovered: u64,
    checked_keys: u64,
}

/// Reopens after a kill and checks the database against the model;
/// returns the prefix length recovered and advances `model` to it.
fn check(
    dir: &Path,
    seed: u64,
    cycle: u64,
    acked: u64,
    acked_durable: u64,
    page_size: usize,
    model: &mut Model,
) -> BoxResult<Cycle> {
    let db = open(dir, page_size)?;
    if db.page_size() != page_size {
        return Err(msg(&format!(
            "cycle {cycle}: the database has pages of {} bytes, not {page_size}",
            db.page_size()
        )));
    }
    let report = db.verify()?;
    if !report.problems.is_empty() {
        return Err(msg(&format!(
            "cycle {cycle}: verify: {:?}",
            report.problems
        )));
    }
    let seq = match db.open_table("seq") {
        Ok(t) => t.get(format!("c{cycle:04}"))?,
        Err(tidemark::Error::TableNotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let m = match seq {
        Some(v) => u64::from_be_bytes(
            v.as_slice()
                .try_into()
                .map_err(|_| msg("seq value is not 8 bytes"))?,
        ),
        None => 0,
    };
    if m < acked_durable {
        return Err(msg(&format!(
            "cycle {cycle}: LOST: commit {acked_durable} was acknowledged durable but only {m} commits survived"
        )));
    }
    if m > acked + 1 {
        return Err(msg(&format!(
            "cycle {cycle}: {m} commits recovered but only {} were attempted",
            acked + 1
        )));
    }
    let mut s = Stream::new(seed, cycle);
    for _ in 0..m {
        let (i, c) = s.next_commit();
        model.apply(cycle, i, &c);
    }
    // The whole state equals the model's at m: no holes, no partial batch.
    let mut checked = 0u64;
    for (t, name) in TABLES.iter().enumerate() {
        let got: BTreeMap<String, Vec<u8>> = match db.open_table(name) {
            Ok(tab) => tab
                .iter()
                .map(|kv| kv.map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v)))
                .collect::<tidemark::Result<_>>()?,
            Err(tidemark::Error::TableNotFound(_)) => BTreeMap::new(),
            Err(e) => return Err(e.into()),
        };
        if got != model.tables[t] {
            let missing: Vec<_> = model.tables[t]
                .keys()
                .filter(|k| !got.contains_key(*k))
                .take(3)
                .collect();
            let extra: Vec<_> = got
                .keys()
                .filter(|k| !model.tables[t].contains_key(*k))
                .take(3)
                .collect();
            return Err(msg(&format!(
                "cycle {cycle}: table {name} differs from the model at commit {m}: missing {missing:?}, extra {extra:?}"
            )));
        }
        checked += got.len() as u64;
    }
    let docs: BTreeSet<String> = match db.get_collection("docs") {
        Ok(c) => c
            .find()
            .map(|d| {
                d.map(|d| match d.get("_id") {
                    Some(Bson::String(s)) => s.clone(),
                    other => format!("{other:?}"),
                })
            })
            .collect::<tidemark::Result<_>>()?,
        Err(tidemark::Error::CollectionNotFound(_)) => BTreeSet::new(),
        Err(e) => return Err(e.into()),
    };
    if docs != model.docs {
        return Err(msg(&format!(
            "cycle {cycle}: documents differ from the model at commit {m} ({} vs {})",
            docs.len(),
            model.docs.len()
        )));
    }
    checked += docs.len() as u64;
    // The oplog: a contiguous run of the newest entries.
    if let Ok(o) = db.get_collection("oplog") {
        let v = o.validate()?;
        if !v.problems.is_empty() {
            return Err(msg(&format!("cycle {cycle}: oplog: {:?}", v.problems)));
        }
        let got: Vec<(u64, u64)> = o
            .find()
            .map(|d| {
                d.map(|d| {
                    (
                        d.get_i64("c").unwrap_or(-1) as u64,
                        d.get_i64("i").unwrap_or(-1) as u64,
                    )
                })
            })
            .collect::<tidemark::Result<_>>()?;
        let want = &model.oplog[model.oplog.len() - got.len().min(model.oplog.len())..];
        if got.as_slice() != want || (got.is_empty() && !model.oplog.is_empty()) {
            return Err(msg(&format!(
                "cycle {cycle}: the oplog is not the newest {} entries (ends {:?}, model ends {:?})",
                got.len(),
                got.last(),
                model.oplog.last()
            )));
        }
        checked += got.len() as u64;
    }
    // Keep the database small across many cycles: the parent deletes what
    // earlier cycles wrote (one batch), and the model follows.
    let mine = format!("c{cycle:04}-");
    let mut b = WriteBatch::new();
    for (t, name) in TABLES.iter().enumerate() {
        let old: Vec<String> = model.tables[t]
            .keys()
            .filter(|k| !k.starts_with(&mine))
            .cloned()
            .collect();
        for k in old {
            b.delete(name, &k);
            model.tables[t].remove(&k);
        }
    }
    if !b.is_empty() {
        db.write(&b)?;
    }
    if let Ok(docs) = db.get_collection("docs") {
        let old: Vec<String> = model
            .docs
            .iter()
            .filter(|k| !k.starts_with(&mine))
            .cloned()
            .collect();
        for k in old {
            docs.delete_one(&Bson::String(k.clone()))?;
            model.docs.remove(&k);
        }
    }
    db.close()?;
    Ok(Cycle {
        acked,
        acked_durable,
        recovered: m,
        checked_keys: checked,
    })
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let cycles = a.cycles.unwrap_or(if a.quick { 25 } else { 200 });
    // The engine refuses a size no database can have (the child's first
    // open reports it).
    let page_size = a.page_size.unwrap_or(tidemark::DEFAULT_PAGE_SIZE);
    let seed = a.seed.unwrap_or_else(|| rand::thread_rng().gen());
    let tmp = tempfile::tempdir_in(&a.dir)?;
    let dir = tmp.path().join("db");
    let exe = std::env::current_exe()?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::default();
    if !a.json {
        eprintln!(
            "crash-loop: {cycles} cycles, pages of {page_size} bytes, seed {seed} (--seed {seed} reproduces the workload)"
        );
    }
    let started = Instant::now();
    let (mut total_acked, mut total_durable, mut total_lost_none, mut total_checked) = (0, 0, 0, 0);
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .arg("--dir")
            .arg(&a.dir)
            .args([
                "crash-child",
                "--seed",
                &seed.to_string(),
                "--cycle",
                &cycle.to_string(),
                "--page-size",
                &page_size.to_string(),
            ])
            .arg("--db")
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| msg("no child stdout"))?;
        let reader = std::thread::spawn(move || {
            let mut acked = 0u64;
            let mut durable = 0u64;
            let mut ready = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    ready = true;
                    continue;
                }
                let mut f = line.split(' ');
                if let (Some(i), Some(d)) = (f.next(), f.next()) {
                    if let Ok(i) = i.parse::<u64>() {
                        acked = i;
                        if d != "none" {
                            durable = i;
                        }
                    }
                }
            }
            (ready, acked, durable)
        });
        let life = Duration::from_millis(rng.gen_range(150..900));
        std::thread::sleep(life);
        // SIGKILL: no destructor, no flush, no checkpoint.
        child.kill()?;
        let status = child.wait()?;
        let (ready, acked, durable) = reader.join().map_err(|_| msg("reader thread panicked"))?;
        if !ready && status.code().is_some() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                std::io::Read::read_to_string(&mut e, &mut err)?;
            }
            return Err(msg(&format!("cycle {cycle}: the child failed: {err}")));
        }
        let r = check(&dir, seed, cycle, acked, durable, page_size, &mut model)
            .map_err(|e| msg(&format!("{e} (seed {seed})")))?;
        total_acked += r.acked;
        total_durable += r.acked_durable;
        total_lost_none += r.acked.saturating_sub(r.recovered);
        total_checked += r.checked_keys;
        if !a.json {
            eprintln!(
                "cycle {cycle:4}: killed after {:4} ms, {:5} acknowledged ({:5} up to the last durable one), {:5} recovered, {} keys/documents checked",
                life.as_millis(),
                r.acked,
                r.acked_durable,
                r.recovered,
                r.checked_keys
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if !a.json {
        println!("seed                                        {seed}");
        println!("page size                                   {page_size}");
        println!("cycles (SIGKILL, reopen, verify, compare)    {cycles}");
        println!("commits acknowledged                        {total_acked}");
        println!("  of which up to a durable acknowledgement  {total_durable}");
        println!("acknowledged 'none' commits not recovered   {total_lost_none}");
        println!("keys, documents and oplog entries compared  {total_checked}");
        println!("elapsed s                                   {secs:.1}");
    }
    // Reaching here means every cycle passed every check; a failure
    // returns an error (exit status 2) naming the cycle and the seed.
    let targets = vec![Target::at_least(
        "cycles passed",
        cycles as f64,
        cycles as f64,
    )];
    Ok(report::finish(
        a.json,
        "crash-loop",
        report::machine(&a.dir),
        json!({
            "seed": seed,
            "page_size": page_size,
            "cycles": cycles,
            "acknowledged": total_acked,
            "acknowledged_durable": total_durable,
            "none_not_recovered": total_lost_none,
            "checked": total_checked,
            "elapsed_s": secs,
        }),
        &targets,
    ))
}
