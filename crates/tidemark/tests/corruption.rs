//! Damaged and foreign files: typed errors, never a panic, and `verify`
//! names the problem.

mod common;

use std::sync::Arc;

use common::SimFs;
use tidemark::io::FileSystem;
use tidemark::{Error, DATA_FILE, DEFAULT_PAGE_SIZE as PAGE_SIZE};

/// Page sizes the damage tests run at: the smallest and the default.
const SIZES: [usize; 2] = [4096, PAGE_SIZE];

fn build(fs: &SimFs, dir: &std::path::Path, page_size: usize) {
    let db = common::small_builder()
        .page_size(page_size)
        .file_system(Arc::new(fs.clone()))
        .open(dir)
        .unwrap();
    let t = db.table("t").unwrap();
    for i in 0..3000u32 {
        t.put(i.to_be_bytes(), [i as u8; 100]).unwrap();
    }
    t.put(b"big", vec![9u8; 100_000]).unwrap();
    db.close().unwrap();
}

#[test]
fn flipped_bytes_in_any_block_give_corruption_not_panic() {
    for ps in SIZES {
        flipped_bytes_in_any_block(ps);
    }
}

fn flipped_bytes_in_any_block(ps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    build(&fs, dir.path(), ps);
    let path = dir.path().join(DATA_FILE);
    let blocks = fs.with_file(&path, |d| d.len() / ps);
    let mut detected = 0;
    for blk in 2..blocks {
        let img = fs.crash_image(false);
        img.with_file(&path, |d| d[blk * ps + 100 + blk % (ps / 16)] ^= 0x5A);
        let opened = common::small_builder()
            .file_system(Arc::new(img.clone()))
            .open(dir.path());
        let db = match opened {
            Err(Error::Corruption { .. }) => {
                detected += 1; // a map or directory block
                continue;
            }
            Err(e) => panic!("pages of {ps}, block {blk}: unexpected error {e}"),
            Ok(db) => db,
        };
        let report = db.verify().unwrap();
        let t = db.open_table("t");
        let scan: Result<Vec<_>, String> = match &t {
            Ok(t) => t
                .iter()
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if !report.is_ok() {
            detected += 1;
            assert!(
                scan.is_err()
                    || report
                        .problems
                        .iter()
                        .any(|p| p.contains("overflow") || p.contains("big")),
                "verify found {:?} but a scan succeeded",
                report.problems
            );
        } else {
            // The block was free (an old copy): nothing may have changed.
            assert_eq!(
                scan.unwrap().len(),
                3001,
                "pages of {ps}, block {blk}: undetected damage"
            );
        }
    }
    assert!(
        detected > 10,
        "only {detected} damaged blocks were detected"
    );
}

#[test]
fn both_meta_pages_damaged_is_an_error() {
    for ps in SIZES {
        let dir = tempfile::tempdir().unwrap();
        let fs = SimFs::new();
        build(&fs, dir.path(), ps);
        let path = dir.path().join(DATA_FILE);
        fs.with_file(&path, |d| {
            d[200] ^= 1;
            d[ps + 200] ^= 1;
        });
        let err = common::small_builder()
            .file_system(Arc::new(fs))
            .open(dir.path())
            .unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err}");
    }
}

#[test]
fn foreign_and_truncated_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(DATA_FILE), vec![0x42u8; 3 * PAGE_SIZE]).unwrap();
    assert!(matches!(
        tidemark::Database::open(dir.path()),
        Err(Error::NotADatabase(_))
    ));
    std::fs::write(dir.path().join(DATA_FILE), b"hello").unwrap();
    assert!(matches!(
        tidemark::Database::open(dir.path()),
        Err(Error::NotADatabase(_))
    ));
    // The refused file is left as it was.
    assert_eq!(std::fs::read(dir.path().join(DATA_FILE)).unwrap(), b"hello");
}

#[test]
fn truncating_a_real_database_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    build(&fs, dir.path(), PAGE_SIZE);
    let path = dir.path().join(DATA_FILE);
    // The file is preallocated past its last written block; cut half of
    // the part that holds pages, not half of a zero tail.
    fs.with_file(&path, |d| {
        let written = d.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        assert!(written > 4 * PAGE_SIZE, "the database wrote too little");
        d.truncate(written / 2);
    });
    match common::small_builder()
        .file_system(Arc::new(fs))
        .open(dir.path())
    {
        Err(Error::Corruption { .. }) => {}
        Ok(db) => assert!(
            !db.verify().unwrap().is_ok(),
            "half the file is gone but verify is happy"
        ),
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn an_interrupted_creation_is_started_again() {
    for ps in SIZES {
        an_interrupted_creation_at(ps);
    }
}

fn an_interrupted_creation_at(ps: usize) {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    // The first meta page's write was cut short: the first half of slot 1
    // reached the file, slot 0 was never written.
    {
        let full = SimFs::new();
        common::small_builder()
            .page_size(ps)
            .file_system(Arc::new(full.clone()))
            .open(dir.path())
            .unwrap()
            .close()
            .unwrap();
        let slot1 = full.with_file(&dir.path().join(DATA_FILE), |d| d[ps..ps + ps / 2].to_vec());
        use tidemark::io::FileSystem;
        let f = fs.open(&dir.path().join(DATA_FILE), true).unwrap();
        f.write_all_at(&slot1, ps as u64).unwrap();
    }
    let db = common::small_builder()
        .page_size(ps)
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .expect("a creation that never finished is redone");
    assert_eq!(db.page_size(), ps);
    db.table("t").unwrap().put(b"k", b"v").unwrap();
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
    // The same bytes with anything in slot 0 are someone else's file.
    let path = dir.path().join(DATA_FILE);
    std::fs::write(&path, [vec![1u8; ps], vec![0u8; 100]].concat()).unwrap();
    assert!(matches!(
        tidemark::Database::open(dir.path()),
        Err(Error::NotADatabase(_))
    ));
}

/// Random damage, many times: a bit flipped, a byte overwritten or a
/// 512-byte run zeroed at a random place of the data file, a log segment
/// or a capped ring of a database holding a table, documents and a ring,
/// with log records still to replay. Opening, reading everything and
/// `verify` must give typed errors or recover by the rules: never a panic,
/// and never a value, document or ring record that differs from what was
/// written (a record lost from the log's unsynced tail may be missing).
/// 500 trials at each of 4 and 16 KiB pages; `TIDEMARK_CORRUPTION_TRIALS=N`
/// runs N at each.
#[test]
fn random_damage_gives_errors_or_the_right_data() {
    for ps in SIZES {
        random_damage(ps);
    }
}

fn random_damage(ps: usize) {
    use std::collections::BTreeMap;
    use tidemark::bson::{doc, Bson};

    let trials: u64 = std::env::var("TIDEMARK_CORRUPTION_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    {
        let db = common::small_builder()
            .page_size(ps)
            .statistics_log(None)
            .file_system(Arc::new(fs.clone()))
            .open(dir.path())
            .unwrap();
        let t = db.table("t").unwrap();
        let docs = db.collection("docs").unwrap();
        let ring = db
            .create_collection(
                "ring",
                Some(tidemark::CappedOptions {
                    size: 32 * 1024,
                    max: None,
                }),
            )
            .unwrap();
        for i in 0..2500u32 {
            let v = vec![(i % 251) as u8; 60 + (i % 300) as usize];
            t.put(i.to_be_bytes(), &v).unwrap();
            model.insert(i.to_be_bytes().to_vec(), v);
            if i % 5 == 0 {
                docs.insert_one(&doc! {"_id": i as i64, "v": format!("d{i}")})
                    .unwrap();
                ring.insert_one(&doc! {"_id": i as i64, "pad": "r".repeat((i % 200) as usize)})
                    .unwrap();
            }
            if i == 1500 {
                db.checkpoint().unwrap();
            }
        }
        // No close: the commits after the checkpoint are replayed from the
        // log at every open.
        std::mem::forget(db);
    }
    let base = fs.crash_image(false);
    let files: Vec<std::path::PathBuf> = base
        .list(dir.path())
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".tdm") || n.ends_with(".log") || n.ends_with(".ring"))
        .map(|n| dir.path().join(n))
        .collect();
    assert!(files.len() >= 3, "{files:?}");
    let mut rng = common::Rng::new(0xC0FFEE);
    let (mut refused, mut opened, mut read_errors, mut verify_problems, mut missing) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for trial in 0..trials {
        let img = base.crash_image(false);
        let file = &files[rng.below(files.len() as u64) as usize];
        let len = img.with_file(file, |d| d.len() as u64);
        if len == 0 {
            continue;
        }
        let pos = rng.below(len) as usize;
        let how = rng.below(3);
        let bit = rng.below(8);
        let byte = rng.below(256) as u8;
        img.with_file(file, |d| match how {
            0 => d[pos] ^= 1 << bit,
            1 => d[pos] = byte ^ if d[pos] == byte { 0xFF } else { 0 },
            _ => {
                let end = (pos + 512).min(d.len());
                d[pos..end].fill(0);
            }
        });
        let what = format!(
            "pages of {ps}, trial {trial}: {} at {pos} of {}",
            ["bit flip", "byte", "zeroed run"][how as usize],
            file.display()
        );
        let db = match common::small_builder()
            .page_size(ps)
            .statistics_log(None)
            .file_system(Arc::new(img.clone()))
            .open(dir.path())
        {
            Ok(db) => db,
            Err(_) => {
                refused += 1;
                continue;
            }
        };
        opened += 1;
        let mut failed = false;
        match db.open_table("t") {
            Ok(t) => {
                let mut seen = 0u64;
                for kv in t.iter() {
                    match kv {
                        Ok((k, v)) => {
                            assert_eq!(model.get(&k), Some(&v), "{what}: wrong value for {k:?}");
                            seen += 1;
                        }
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                if !failed {
                    missing += model.len() as u64 - seen;
                }
                for i in (0..2500u32).step_by(97) {
                    match t.get(i.to_be_bytes()) {
                        Ok(Some(v)) => assert_eq!(&v, &model[&i.to_be_bytes().to_vec()], "{what}"),
                        Ok(None) => {}
                        Err(_) => failed = true,
                    }
                }
            }
            Err(_) => failed = true,
        }
        if let Ok(c) = db.get_collection("docs") {
            for d in c.find() {
                match d {
                    Ok(d) => {
                        let id = d.get_i64("_id").unwrap_or(-1);
                        assert_eq!(
                            d.get_str("v").ok(),
                            Some(format!("d{id}").as_str()),
                            "{what}"
                        );
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
        }
        if let Ok(r) = db.get_collection("ring") {
            let mut prev: Option<i64> = None;
            for d in r.find() {
                match d {
                    Ok(d) => {
                        let id = d.get_i64("_id").unwrap_or(-1);
                        assert_eq!(
                            d.get_str("pad").map(str::len).ok(),
                            Some((id % 200) as usize),
                            "{what}"
                        );
                        if let Some(p) = prev {
                            assert_eq!(id, p + 5, "{what}: ring out of order");
                        }
                        prev = Some(id);
                    }
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            let _ = r.validate();
        }
        if failed {
            read_errors += 1;
        }
        match db.verify() {
            Ok(r) if !r.problems.is_empty() => verify_problems += 1,
            Err(_) => verify_problems += 1,
            _ => {}
        }
        let _ = Bson::Null;
    }
    eprintln!(
        "random damage, pages of {ps}: {trials} trials: {refused} refused at open, {opened} opened \
         ({read_errors} with read errors, {verify_problems} with verify problems), \
         {missing} keys missing in all (lost log tail), no wrong data"
    );
    assert_eq!(refused + opened, trials);
}
