//! The CLI end to end, through the built binary.

use std::process::Command;

fn tm(db: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn put_get_scan_stats_checkpoint_verify() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
        assert_eq!(tm(&db, &["put", "t", k, v]).0, 0);
    }
    assert_eq!(
        tm(&db, &["get", "t", "b"]),
        (0, "2\n".into(), String::new())
    );
    let (code, _, err) = tm(&db, &["get", "t", "zz"]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"));
    assert_eq!(tm(&db, &["scan", "t"]).1, "a\t1\nb\t2\nc\t3\n");
    assert_eq!(
        tm(&db, &["scan", "t", "--from", "b", "--reverse"]).1,
        "c\t3\nb\t2\n"
    );
    assert_eq!(tm(&db, &["scan", "t", "--to", "b"]).1, "a\t1\n");
    assert_eq!(tm(&db, &["tables"]).1, "t\n");
    let (code, json, _) = tm(&db, &["stats", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["file_size"].as_u64().unwrap() > 0);
    assert!(tm(&db, &["stats"]).1.contains("cache_bytes_used"));
    assert!(tm(&db, &["checkpoint"]).1.starts_with("checkpoint:"));
    let (code, out, _) = tm(&db, &["verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("ok\n"));
}

#[test]
fn missing_table_and_corrupt_file_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (code, _, err) = tm(&db, &["get", "nope", "k"]);
    assert_eq!(code, 2);
    assert!(err.contains("does not exist"), "{err}");
    std::fs::write(db.join(tidemark::DATA_FILE), vec![7u8; 70_000]).unwrap();
    let (code, _, err) = tm(&db, &["verify"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a tidemark database"), "{err}");
}

#[test]
fn put_takes_a_durability_and_rejects_unknown_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    for d in ["none", "write", "fsync"] {
        assert_eq!(
            tm(&db, &["put", "t", d, "v", "--durability", d]).0,
            0,
            "{d}"
        );
    }
    assert_eq!(tm(&db, &["scan", "t"]).1, "fsync\tv\nnone\tv\nwrite\tv\n");
    let (code, _, err) = tm(&db, &["put", "t", "k", "v", "--durability", "maybe"]);
    assert_ne!(code, 0);
    assert!(err.contains("none, write or fsync"), "{err}");
    assert_eq!(
        tm(&db, &["get", "t", "k"]).0,
        1,
        "a rejected put wrote nothing"
    );
}

fn tm_stdin(db: &std::path::Path, args: &[&str], input: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn capped_collection_import_find_layout_validate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (code, _, err) = tm(
        &db,
        &["create-collection", "oplog", "--capped-size", "8192"],
    );
    assert_eq!(code, 0, "{err}");
    let lines: String = (0..200)
        .map(|i| format!("{{\"_id\": {i}, \"pad\": \"{}\"}}\n", "x".repeat(i % 90)))
        .collect();
    let (code, _, err) = tm_stdin(&db, &["import", "oplog", "--batch", "7"], &lines);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 200 documents"), "{err}");
    // The newest documents, in natural order and reversed.
    let (_, newest, _) = tm(&db, &["find", "oplog", "--reverse", "--limit", "2"]);
    let ids: Vec<&str> = newest.lines().collect();
    assert_eq!(ids.len(), 2);
    assert!(ids[0].starts_with("{\"_id\":199"), "{newest}");
    assert!(ids[1].starts_with("{\"_id\":198"), "{newest}");
    let (_, all, _) = tm(&db, &["find", "oplog"]);
    assert!(
        all.lines().count() < 200,
        "the 8 KiB ring cannot hold 200 documents"
    );
    assert!(all.lines().last().unwrap().starts_with("{\"_id\":199"));
    // Layout: one offset per line, ascending apart from one wrap.
    let (_, layout, _) = tm(&db, &["layout", "oplog"]);
    let offs: Vec<u64> = layout.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(offs.len(), all.lines().count());
    assert!(offs.windows(2).filter(|w| w[1] < w[0]).count() <= 1);
    let (code, json, _) = tm(&db, &["validate", "oplog", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["discontinuities"], 0);
    assert_eq!(v["count"].as_u64().unwrap() as usize, offs.len());
    // A bad line stops the import with its number and a non-zero status.
    let (code, _, err) = tm_stdin(&db, &["import", "oplog"], "{\"a\": 1}\nnot json\n");
    assert_ne!(code, 0);
    assert!(err.contains("line 2"), "{err}");
    assert_eq!(tm(&db, &["layout", "nope"]).0, 2);
    assert_eq!(tm(&db, &["verify"]).0, 0);
}
