//! `import` and `export`: MongoDB Extended JSON lines in and out of a
//! collection, in batches, with a progress bar on a terminal and a plain
//! summary otherwise.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use tidemark::bson::{Bson, Document};
use tidemark::{Database, Error as DbError, WriteBatch};

type Error = Box<dyn std::error::Error>;

/// What an import did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Imported {
    pub lines: u64,
    pub inserted: u64,
    /// (line number, why) of each line not imported.
    pub skipped: Vec<(u64, String)>,
    /// The line that stopped the import (`--stop-on-error`).
    pub stopped_at: Option<(u64, String)>,
}

fn bar(total: Option<u64>, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    let tmpl = if total.is_some() {
        format!("{what} {{bar:40}} {{pos}}/{{len}} {{per_sec}} {{elapsed}}")
    } else {
        format!("{what} {{spinner}} {{pos}} {{per_sec}} {{elapsed}}")
    };
    if let Ok(style) = ProgressStyle::with_template(&tmpl) {
        pb.set_style(style);
    }
    pb
}

/// Parses one Extended JSON line into a document.
pub fn parse(line: &str) -> Result<Document, String> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(_) => Err("not a document".into()),
        Err(e) => Err(format!("not Extended JSON: {e}")),
    }
}

/// Whether an error concerns one document (skip it) rather than the
/// database (stop).
fn document_error(e: &DbError) -> bool {
    matches!(
        e,
        DbError::InvalidBson(_)
            | DbError::DocumentTooLarge { .. }
            | DbError::DuplicateKey { .. }
            | DbError::CappedRecordTooLarge { .. }
    )
}

/// Imports Extended JSON lines from `input` into `collection` (created as
/// a regular collection if missing), `batch` documents per commit. A bad
/// line is skipped and reported with its number, or with `stop_on_error`
/// ends the import: every line before it is imported, none after. A batch
/// commits whole or not at all, so no document is ever half-written.
pub fn import(
    db: &Database,
    collection: &str,
    batch: usize,
    stop_on_error: bool,
    input: impl BufRead,
    total_bytes: Option<u64>,
) -> Result<Imported, Error> {
    let coll = db.collection(collection)?;
    let pb = bar(total_bytes, "importing (bytes)");
    let mut r = Imported::default();
    let mut pending: Vec<(u64, Document)> = Vec::with_capacity(batch);
    let flush = |pending: &mut Vec<(u64, Document)>, r: &mut Imported| -> Result<(), Error> {
        if pending.is_empty() {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        for (_, d) in pending.iter() {
            b.insert_one(collection, d)?;
        }
        match db.write(&b) {
            Ok(()) => r.inserted += pending.len() as u64,
            Err(e) if document_error(&e) => {
                // Find the culprits one by one; the others go in.
                for (line, d) in pending.iter() {
                    match coll.insert_one(d) {
                        Ok(_) => r.inserted += 1,
                        Err(e) if document_error(&e) => {
                            if stop_on_error {
                                r.stopped_at = Some((*line, e.to_string()));
                                break;
                            }
                            r.skipped.push((*line, e.to_string()));
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        pending.clear();
        Ok(())
    };
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        let no = i as u64 + 1;
        pb.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        r.lines += 1;
        match parse(&line) {
            Ok(d) => pending.push((no, d)),
            Err(why) => {
                if stop_on_error {
                    flush(&mut pending, &mut r)?;
                    if r.stopped_at.is_none() {
                        r.stopped_at = Some((no, why));
                    }
                    break;
                }
                r.skipped.push((no, why));
            }
        }
        if pending.len() >= batch.max(1) {
            flush(&mut pending, &mut r)?;
            if r.stopped_at.is_some() {
                break;
            }
        }
    }
    if r.stopped_at.is_none() {
        flush(&mut pending, &mut r)?;
    }
    pb.finish_and_clear();
    // Document errors are found when their batch commits, after later
    // parse errors: report in line order.
    r.skipped.sort_by_key(|(line, _)| *line);
    Ok(r)
}

/// Writes every document of `collection` as one Extended JSON line each
/// (canonical keeps every BSON type exactly; relaxed is easier to read),
/// in natural order; returns the count.
pub fn export(
    db: &Database,
    collection: &str,
    canonical: bool,
    out: &mut impl Write,
) -> Result<u64, Error> {
    let coll = db.get_collection(collection)?;
    let pb = bar(Some(coll.count()?), "exporting");
    let mut n = 0u64;
    for d in coll.find() {
        let b = Bson::Document(d?);
        let json = if canonical {
            b.into_canonical_extjson()
        } else {
            b.into_relaxed_extjson()
        };
        serde_json::to_writer(&mut *out, &json)?;
        out.write_all(b"\n")?;
        n += 1;
        if n.is_multiple_of(1024) {
            pb.set_position(n);
        }
    }
    out.flush()?;
    pb.finish_and_clear();
    Ok(n)
}

/// The summary an import prints on stderr.
pub fn summary(r: &Imported, started: Instant) -> String {
    let secs = started.elapsed().as_secs_f64().max(1e-6);
    let mut s = format!(
        "imported {} of {} documents in {:.1} s ({:.0} documents/s)",
        r.inserted,
        r.lines,
        secs,
        r.inserted as f64 / secs
    );
    if !r.skipped.is_empty() {
        s.push_str(&format!("; {} line(s) skipped", r.skipped.len()));
    }
    s
}
