//! Import and export of mixed documents through `tidemark import` and
//! `tidemark export`'s own code (`tidemark_cli::transfer`): a million
//! documents of every common BSON type as canonical Extended JSON lines,
//! imported, exported, and compared BSON byte for byte with what went in.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tidemark::bson::{self, doc, Bson, Document};

use crate::report::{self, Target};
use crate::{msg, BoxResult};

pub struct Args {
    pub quick: bool,
    pub json: bool,
    pub dir: std::path::PathBuf,
    pub docs: Option<u64>,
}

/// Document `i` of the fixed-seed stream: ints of both widths, doubles,
/// decimals, dates, ObjectIds, binary, strings with escapes and non-ASCII,
/// nested documents and arrays, booleans, nulls, regexes, timestamps, in
/// varying key order and size.
fn document(i: u64, rng: &mut SmallRng) -> Document {
    let mut d = Document::new();
    d.insert("_id", Bson::Int64(i as i64));
    let kinds = rng.gen_range(3..12);
    for k in 0..kinds {
        let key = format!("f{}", rng.gen_range(0..20) * 10 + k);
        let v = match rng.gen_range(0..14) {
            0 => Bson::Int32(rng.gen()),
            1 => Bson::Int64(rng.gen()),
            2 => Bson::Double(rng.gen::<f64>() * 1e6 - 5e5),
            3 => Bson::Decimal128(
                format!(
                    "{}.{:04}",
                    rng.gen_range(-99999..99999),
                    rng.gen_range(0..10000)
                )
                .parse()
                .unwrap_or_else(|_| bson::Decimal128::from_bytes([0; 16])),
            ),
            4 => Bson::DateTime(bson::DateTime::from_millis(
                1_600_000_000_000 + rng.gen_range(0..200_000_000_000i64),
            )),
            5 => Bson::ObjectId(bson::oid::ObjectId::from_bytes(rng.gen())),
            6 => Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect(),
            }),
            7 => Bson::String(format!("naïve \"quoted\"\\ line\n{} ✓", rng.gen::<u32>())),
            8 => Bson::Document(doc! {"a": rng.gen::<i32>(), "b": {"c": [1, "two", 3.5]}}),
            9 => Bson::Array(
                (0..rng.gen_range(0..6))
                    .map(|j| Bson::Int32(j * rng.gen_range(1..9)))
                    .collect(),
            ),
            10 => Bson::Boolean(rng.gen()),
            11 => Bson::Null,
            12 => Bson::RegularExpression(bson::Regex {
                pattern: "^ab+c".into(),
                options: "i".into(),
            }),
            _ => Bson::Timestamp(bson::Timestamp {
                time: rng.gen(),
                increment: rng.gen(),
            }),
        };
        d.insert(key, v);
    }
    d
}

fn bytes_of(line: &str) -> BoxResult<Vec<u8>> {
    let d = tidemark_cli::transfer::parse(line).map_err(|e| msg(&e))?;
    Ok(bson::to_vec(&d)?)
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let n = a.docs.unwrap_or(if a.quick { 100_000 } else { 1_000_000 });
    let dir = tempfile::tempdir_in(&a.dir)?;
    let input = dir.path().join("in.jsonl");
    let output = dir.path().join("out.jsonl");
    let mut rng = SmallRng::seed_from_u64(42);
    {
        let mut w = BufWriter::new(std::fs::File::create(&input)?);
        for i in 0..n {
            let b = Bson::Document(document(i, &mut rng)).into_canonical_extjson();
            serde_json::to_writer(&mut w, &b)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
    }
    let in_bytes = std::fs::metadata(&input)?.len();
    if !a.json {
        eprintln!(
            "import-export: {n} mixed documents, {:.1} MB of canonical Extended JSON",
            in_bytes as f64 / 1e6
        );
    }
    let db = tidemark::Database::builder()
        .cache_size(256 << 20)
        .open(dir.path().join("db"))?;
    let t0 = Instant::now();
    let r = tidemark_cli::transfer::import(
        &db,
        "docs",
        1000,
        true,
        BufReader::new(std::fs::File::open(&input)?),
        None,
    )
    .map_err(|e| msg(&e.to_string()))?;
    let import_s = t0.elapsed().as_secs_f64();
    if let Some((line, why)) = &r.stopped_at {
        return Err(msg(&format!("import stopped at line {line}: {why}")));
    }
    let t1 = Instant::now();
    let exported = {
        let mut w = BufWriter::new(std::fs::File::create(&output)?);
        tidemark_cli::transfer::export(&db, "docs", true, &mut w)
            .map_err(|e| msg(&e.to_string()))?
    };
    let export_s = t1.elapsed().as_secs_f64();
    db.close()?;
    // Compare line by line: the export is in natural (= insertion) order.
    let t2 = Instant::now();
    let mut mismatches = 0u64;
    let mut compared = 0u64;
    let ins = BufReader::new(std::fs::File::open(&input)?).lines();
    let outs = BufReader::new(std::fs::File::open(&output)?).lines();
    for (x, y) in ins.zip(outs) {
        if bytes_of(&x?)? != bytes_of(&y?)? {
            mismatches += 1;
        }
        compared += 1;
    }
    let compare_s = t2.elapsed().as_secs_f64();
    let import_rate = r.inserted as f64 / import_s;
    let export_rate = exported as f64 / export_s;
    if !a.json {
        println!("documents                                  {n}");
        println!("imported                                   {}", r.inserted);
        println!("import s                                   {import_s:.1}");
        println!("import documents/s                         {import_rate:.0}");
        println!(
            "import MB/s (Extended JSON)                {:.1}",
            in_bytes as f64 / 1e6 / import_s
        );
        println!("exported                                   {exported}");
        println!("export documents/s                         {export_rate:.0}");
        println!("compared (BSON bytes)                      {compared}");
        println!("mismatches                                 {mismatches}");
        println!("compare s                                  {compare_s:.1}");
    }
    let targets = vec![
        Target::at_most(
            "documents differing after the round trip",
            mismatches as f64,
            0.0,
        ),
        Target::at_least(
            "documents imported, exported and compared",
            r.inserted.min(exported).min(compared) as f64,
            n as f64,
        ),
    ];
    Ok(report::finish(
        a.json,
        "import-export",
        report::machine(&a.dir),
        json!({
            "documents": n,
            "imported": r.inserted,
            "exported": exported,
            "compared": compared,
            "mismatches": mismatches,
            "import_s": import_s,
            "import_docs_per_s": import_rate,
            "export_docs_per_s": export_rate,
            "extended_json_bytes": in_bytes,
        }),
        &targets,
    ))
}
