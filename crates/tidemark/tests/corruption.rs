//! Damaged and foreign files: typed errors, never a panic, and `verify`
//! names the problem.

mod common;

use std::sync::Arc;

use common::SimFs;
use tidemark::{Error, DATA_FILE, PAGE_SIZE};

fn build(fs: &SimFs, dir: &std::path::Path) {
    let db = common::small_builder()
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
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    build(&fs, dir.path());
    let path = dir.path().join(DATA_FILE);
    let blocks = fs.with_file(&path, |d| d.len() / PAGE_SIZE);
    let mut detected = 0;
    for blk in 2..blocks {
        let img = fs.crash_image(false);
        img.with_file(&path, |d| d[blk * PAGE_SIZE + 100 + blk % 1000] ^= 0x5A);
        let opened = common::small_builder()
            .file_system(Arc::new(img.clone()))
            .open(dir.path());
        let db = match opened {
            Err(Error::Corruption { .. }) => {
                detected += 1; // a map or directory block
                continue;
            }
            Err(e) => panic!("block {blk}: unexpected error {e}"),
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
            assert_eq!(scan.unwrap().len(), 3001, "block {blk}: undetected damage");
        }
    }
    assert!(
        detected > 10,
        "only {detected} damaged blocks were detected"
    );
}

#[test]
fn both_meta_pages_damaged_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    build(&fs, dir.path());
    let path = dir.path().join(DATA_FILE);
    fs.with_file(&path, |d| {
        d[200] ^= 1;
        d[PAGE_SIZE + 200] ^= 1;
    });
    let err = common::small_builder()
        .file_system(Arc::new(fs))
        .open(dir.path())
        .unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
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
    build(&fs, dir.path());
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
    let dir = tempfile::tempdir().unwrap();
    let fs = SimFs::new();
    // The first meta page's write was cut short: the first half of slot 1
    // reached the file, slot 0 was never written.
    {
        let full = SimFs::new();
        common::small_builder()
            .file_system(Arc::new(full.clone()))
            .open(dir.path())
            .unwrap()
            .close()
            .unwrap();
        let slot1 = full.with_file(&dir.path().join(DATA_FILE), |d| {
            d[PAGE_SIZE..PAGE_SIZE + PAGE_SIZE / 2].to_vec()
        });
        use tidemark::io::FileSystem;
        let f = fs.open(&dir.path().join(DATA_FILE), true).unwrap();
        f.write_all_at(&slot1, PAGE_SIZE as u64).unwrap();
    }
    let db = common::small_builder()
        .file_system(Arc::new(fs.clone()))
        .open(dir.path())
        .expect("a creation that never finished is redone");
    db.table("t").unwrap().put(b"k", b"v").unwrap();
    assert!(db.verify().unwrap().is_ok());
    db.close().unwrap();
    // The same bytes with anything in slot 0 are someone else's file.
    let path = dir.path().join(DATA_FILE);
    std::fs::write(&path, [vec![1u8; PAGE_SIZE], vec![0u8; 100]].concat()).unwrap();
    assert!(matches!(
        tidemark::Database::open(dir.path()),
        Err(Error::NotADatabase(_))
    ));
}
