//! How full keys inserted in order leave the tree's leaves: the same keys
//! and values inserted ascending, descending, from several writers taking
//! ascending keys from one counter, as interleaved ascending streams, and
//! in random order; and documents with the ObjectIds `insert_one` makes
//! against documents with random `_id`s. Each set goes into a fresh
//! database with a cache that holds it, is checkpointed, and is measured as
//! the data file's blocks in use (file size less free and limbo blocks) per
//! byte of keys and values inserted.
//!
//! Two more rows insert random and ascending keys, then delete nine in ten
//! of them in random order: the space each live key takes then shows
//! whether sparse leaves merge (without merges it grows about tenfold).
//! They are then compacted, and print the data file's size before and
//! after.
//!
//! Splits in the middle leave ordered keys' leaves half full for good,
//! twice the file and half the records per byte of cache; the targets ask
//! ordered keys to take well under what random keys take, side by side in
//! one run. Documents have no target: a regular collection keeps them under
//! ascending record ids whatever their `_id`s, so both document rows are
//! ordered inserts (with an `_id` index in ObjectId or random order).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tidemark::bson::{doc, Bson};
use tidemark::{Database, Durability, WriteBatch};

use crate::report::{self, Target};
use crate::{msg, BoxResult};

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    /// Keys (and documents) of each order.
    pub keys: Option<u64>,
}

const VALUE: usize = 100;

/// The order keys are inserted in.
#[derive(Clone, Copy)]
enum Order {
    Ascending,
    Descending,
    /// Writers taking the next key from one shared counter.
    AscendingWriters(usize),
    /// `n` ascending streams, one key of each in turn.
    Streams(u64),
    Random,
    /// `insert_one` of documents without `_id` (ObjectIds), two writers.
    ObjectIds,
    /// Documents with random 64-bit integer `_id`s, two writers.
    RandomIds,
}

impl Order {
    fn name(self) -> String {
        match self {
            Order::Ascending => "ascending".into(),
            Order::Descending => "descending".into(),
            Order::AscendingWriters(n) => format!("ascending, {n} writers"),
            Order::Streams(n) => format!("{n} ascending streams"),
            Order::Random => "random".into(),
            Order::ObjectIds => "documents, ObjectId _id".into(),
            Order::RandomIds => "documents, random _id".into(),
        }
    }
    fn writers(self) -> usize {
        match self {
            Order::AscendingWriters(n) => n,
            Order::ObjectIds | Order::RandomIds => 2,
            _ => 1,
        }
    }
    fn documents(self) -> bool {
        matches!(self, Order::ObjectIds | Order::RandomIds)
    }
    /// The key of the `i`-th insert (key-value orders).
    fn key(self, i: u64, n: u64, rng: &mut SmallRng) -> u64 {
        match self {
            Order::Ascending | Order::AscendingWriters(_) => i,
            Order::Descending => n - 1 - i,
            Order::Streams(s) => ((i % s) << 40) | (i / s),
            _ => rng.gen(),
        }
    }
}

struct Row {
    order: String,
    /// Live keys when measured.
    keys: u64,
    inserts_per_s: f64,
    /// Deletes per second, for the rows that delete.
    deletes_per_s: Option<f64>,
    /// Leaves merged by those deletes.
    leaves_merged: u64,
    /// The data file's size before and after `compact`, for the rows that
    /// delete.
    compacted: Option<(u64, u64)>,
    user_bytes: u64,
    in_use_bytes: u64,
    tree_pages: u64,
}

impl Row {
    fn per_user(&self) -> f64 {
        self.in_use_bytes as f64 / self.user_bytes.max(1) as f64
    }
}

/// Bytes of one record as the user gave it: key and value, or the BSON
/// document with its `_id` (the same size for every record of an order).
fn record_bytes(order: Order) -> BoxResult<u64> {
    if !order.documents() {
        return Ok((8 + VALUE) as u64);
    }
    let bin = Bson::Binary(tidemark::bson::Binary {
        subtype: tidemark::bson::spec::BinarySubtype::Generic,
        bytes: vec![0; VALUE],
    });
    let d = match order {
        Order::RandomIds => doc! {"_id": 0i64, "v": bin},
        _ => doc! {"_id": tidemark::bson::oid::ObjectId::new(), "v": bin},
    };
    Ok(tidemark::bson::to_vec(&d)?.len() as u64)
}

/// Inserts `n` keys in `order`, then, with `delete_tenths`, deletes that
/// many tenths of them in random order (one writer) and checkpoints twice,
/// so the blocks the deletes gave up are free again when measured.
fn measure(
    order: Order,
    n: u64,
    delete_tenths: Option<u64>,
    dir: &std::path::Path,
) -> BoxResult<Row> {
    let tmp = tempfile::Builder::new()
        .prefix("tidemark-fill-")
        .tempdir_in(dir)?;
    let db = Database::builder().cache_size(1 << 30).open(tmp.path())?;
    if order.documents() {
        db.collection("c")?;
    } else {
        db.table("t")?;
    }
    let next = AtomicU64::new(0);
    let t0 = Instant::now();
    let results: Vec<BoxResult<()>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..order.writers())
            .map(|w| {
                let (db, next) = (&db, &next);
                s.spawn(move || -> BoxResult<()> {
                    let mut rng = SmallRng::seed_from_u64(7 + w as u64);
                    let value = [0x5Au8; VALUE];
                    let coll = if order.documents() {
                        Some(db.collection("c")?)
                    } else {
                        None
                    };
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok(());
                        }
                        if let Some(c) = &coll {
                            let bin = Bson::Binary(tidemark::bson::Binary {
                                subtype: tidemark::bson::spec::BinarySubtype::Generic,
                                bytes: value.to_vec(),
                            });
                            let d = if matches!(order, Order::RandomIds) {
                                doc! {"_id": rng.gen::<i64>(), "v": bin}
                            } else {
                                doc! {"v": bin}
                            };
                            c.insert_one_with(&d, Durability::None)?;
                        } else {
                            let k = order.key(i, n, &mut rng);
                            let mut b = WriteBatch::new();
                            b.set_durability(Durability::None);
                            b.put("t", k.to_be_bytes(), value);
                            db.write(&b)?;
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(msg("writer panicked"))))
            .collect()
    });
    for r in results {
        r?;
    }
    let secs = t0.elapsed().as_secs_f64();
    db.checkpoint()?;
    let mut live = n;
    let mut deletes_per_s = None;
    if let Some(tenths) = delete_tenths {
        // The keys the single writer inserted, again from its seed.
        let mut rng = SmallRng::seed_from_u64(7);
        let mut keys: Vec<u64> = (0..n).map(|i| order.key(i, n, &mut rng)).collect();
        keys.sort_unstable();
        keys.dedup();
        keys.shuffle(&mut rng);
        let gone = keys.len() as u64 * tenths / 10;
        let t1 = Instant::now();
        for k in &keys[..gone as usize] {
            let mut b = WriteBatch::new();
            b.set_durability(Durability::None);
            b.delete("t", k.to_be_bytes());
            db.write(&b)?;
        }
        deletes_per_s = Some(gone as f64 / t1.elapsed().as_secs_f64());
        live = keys.len() as u64 - gone;
        db.checkpoint()?;
        db.checkpoint()?;
    }
    let s = db.stats();
    let report = db.verify()?;
    if !report.is_ok() {
        return Err(msg(&format!(
            "verify found problems: {:?}",
            report.problems
        )));
    }
    let compacted = match delete_tenths {
        Some(_) => {
            let c = db.compact()?;
            Some((c.size_before, c.size_after))
        }
        None => None,
    };
    Ok(Row {
        order: match delete_tenths {
            Some(t) => format!("{}, {}0 % deleted", order.name(), t),
            None => order.name(),
        },
        keys: live,
        inserts_per_s: n as f64 / secs,
        deletes_per_s,
        leaves_merged: s.tree_leaves_merged,
        compacted,
        user_bytes: live * record_bytes(order)?,
        in_use_bytes: s.file_size - s.file_free_bytes - s.file_limbo_bytes,
        tree_pages: report.pages,
    })
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let n = a.keys.unwrap_or(if a.quick { 200_000 } else { 1_000_000 });
    let orders = [
        Order::Ascending,
        Order::Descending,
        Order::AscendingWriters(4),
        Order::Streams(16),
        Order::Random,
        Order::ObjectIds,
        Order::RandomIds,
    ];
    let mut rows = Vec::new();
    for o in orders {
        if !a.json {
            eprintln!("  {} ...", o.name());
        }
        rows.push(measure(o, n, None, &a.dir)?);
    }
    // Nine keys in ten deleted at random: leaves that fall under a quarter
    // full merge with a sibling, so the space a live key takes should stay
    // near what random inserts leave, not grow tenfold.
    for o in [Order::Random, Order::Ascending] {
        if !a.json {
            eprintln!("  {}, 90 % deleted ...", o.name());
        }
        rows.push(measure(o, n, Some(9), &a.dir)?);
    }
    let by = |name: &str| {
        rows.iter()
            .find(|r| r.order == name)
            .map_or(0.0, Row::per_user)
    };
    let random = by("random");
    if !a.json {
        println!(
            "Leaves filled by ordered keys ({n} keys of 8 bytes + {VALUE}-byte values each; documents: {VALUE}-byte binary field; checkpointed)"
        );
        println!(
            "{:<34} {:>9} {:>11} {:>11} {:>9} {:>13} {:>14} {:>11} {:>14} {:>20}",
            "order",
            "live keys",
            "inserts/s",
            "deletes/s",
            "user MB",
            "in use MB",
            "in use / user",
            "tree pages",
            "leaves merged",
            "file MB, compacted"
        );
        for r in &rows {
            println!(
                "{:<34} {:>9} {:>11.0} {:>11} {:>9.1} {:>13.1} {:>14.2} {:>11} {:>14} {:>20}",
                r.order,
                r.keys,
                r.inserts_per_s,
                r.deletes_per_s.map_or("-".into(), |d| format!("{d:.0}")),
                r.user_bytes as f64 / 1e6,
                r.in_use_bytes as f64 / 1e6,
                r.per_user(),
                r.tree_pages,
                r.leaves_merged,
                r.compacted.map_or("-".into(), |(b, a)| format!(
                    "{:.1} -> {:.1}",
                    b as f64 / 1e6,
                    a as f64 / 1e6
                ))
            );
        }
        println!();
    }
    let rel = |name: &str, base: f64| by(name) / base.max(f64::MIN_POSITIVE);
    let targets = vec![
        Target::at_most(
            "ascending: in use / random keys'",
            rel("ascending", random),
            0.75,
        ),
        Target::at_most(
            "descending: in use / random keys'",
            rel("descending", random),
            0.75,
        ),
        Target::at_most(
            "16 streams: in use / random keys'",
            rel("16 ascending streams", random),
            0.75,
        ),
        Target::at_most(
            "4 writers ascending: in use / random keys'",
            rel("ascending, 4 writers", random),
            0.9,
        ),
        Target::at_most(
            "random, 90 % deleted: in use / random keys'",
            rel("random, 90 % deleted", random),
            2.0,
        ),
        Target::at_most(
            "ascending, 90 % deleted: in use / random keys'",
            rel("ascending, 90 % deleted", random),
            2.0,
        ),
    ];
    let figures = json!({
        "keys": n,
        "value_bytes": VALUE,
        "rows": rows.iter().map(|r| json!({
            "order": r.order,
            "keys": r.keys,
            "inserts_per_s": r.inserts_per_s,
            "user_bytes": r.user_bytes,
            "in_use_bytes": r.in_use_bytes,
            "in_use_per_user": r.per_user(),
            "tree_pages": r.tree_pages,
            "deletes_per_s": r.deletes_per_s,
            "leaves_merged": r.leaves_merged,
            "file_bytes_before_compact": r.compacted.map(|c| c.0),
            "file_bytes_after_compact": r.compacted.map(|c| c.1),
        })).collect::<Vec<_>>(),
    });
    Ok(report::finish(
        a.json,
        "fill",
        report::machine(&a.dir),
        figures,
        &targets,
    ))
}
