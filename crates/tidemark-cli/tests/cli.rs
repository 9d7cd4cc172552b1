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

/// A database at `path` written for about `ms` milliseconds with a
/// statistics line every 100 ms, then closed.
fn logged_database(path: &std::path::Path, ms: u64, docs: bool) {
    let db = tidemark::Database::builder()
        .cache_size(4 << 20)
        .statistics_log(Some(tidemark::StatisticsLog {
            interval: std::time::Duration::from_millis(100),
            ..Default::default()
        }))
        .open(path)
        .unwrap();
    let t = db.table("kv").unwrap();
    let c = db.collection("docs").unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    let mut i = 0u32;
    while std::time::Instant::now() < end {
        t.put(i.to_be_bytes(), [7u8; 300]).unwrap();
        if docs {
            c.insert_one(&tidemark::bson::doc! {"i": i}).unwrap();
        }
        i += 1;
    }
    db.close().unwrap();
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
fn hex_keys_prefix_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Big-endian integers and bytes no shell argument can hold.
    for (k, v) in [("0000000000000002", "0a09"), ("0000000000000001", "ff00")] {
        assert_eq!(tm(&db, &["--hex", "put", "t", k, v]).0, 0);
    }
    assert_eq!(tm(&db, &["put", "t", "abc", "x"]).0, 0);
    assert_eq!(tm(&db, &["put", "t", "abd", "y"]).0, 0);
    assert_eq!(tm(&db, &["put", "t", "b", "z"]).0, 0);
    assert_eq!(
        tm(&db, &["--hex", "get", "t", "0000000000000001"]),
        (0, "ff00\n".into(), String::new())
    );
    // Text keys print as hex too under --hex.
    assert_eq!(
        tm(&db, &["--hex", "scan", "t", "--prefix", "00"]).1,
        "0000000000000001\tff00\n0000000000000002\t0a09\n"
    );
    assert_eq!(
        tm(&db, &["--hex", "scan", "t", "--from", "61", "--limit", "1"]).1,
        "616263\t78\n"
    );
    assert_eq!(
        tm(&db, &["scan", "t", "--prefix", "ab"]).1,
        "abc\tx\nabd\ty\n"
    );
    assert_eq!(
        tm(
            &db,
            &["scan", "t", "--prefix", "ab", "--reverse", "--limit", "1"]
        )
        .1,
        "abd\ty\n"
    );
    assert_eq!(tm(&db, &["scan", "t", "--limit", "0"]).1, "");
    // Malformed hex fails with the argument named, and writes nothing.
    let (code, _, err) = tm(&db, &["--hex", "put", "t", "00", "0g"]);
    assert_ne!(code, 0);
    assert!(err.contains("VALUE \"0g\" is not hex"), "{err}");
    assert_eq!(tm(&db, &["--hex", "get", "t", "00"]).0, 1);
    let (code, _, err) = tm(&db, &["--hex", "delete", "t", "abc"]);
    assert_ne!(code, 0);
    assert!(err.contains("KEY \"abc\" is not hex"), "{err}");
    assert_eq!(
        tm(&db, &["scan", "t", "--prefix", "a"]).1,
        "abc\tx\nabd\ty\n"
    );
    // A prefix and explicit bounds do not mix.
    assert_ne!(tm(&db, &["scan", "t", "--prefix", "a", "--to", "b"]).0, 0);
    assert_eq!(tm(&db, &["--hex", "delete", "t", "0000000000000001"]).0, 0);
    assert_eq!(tm(&db, &["--hex", "get", "t", "0000000000000001"]).0, 1);
}

#[test]
fn values_from_files_and_stdin_and_raw_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Every byte value, and more than a shell argument may hold.
    let blob: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let file = dir.path().join("blob");
    std::fs::write(&file, &blob).unwrap();
    let f = file.to_str().unwrap();
    assert_eq!(tm(&db, &["put", "t", "blob", "--value-file", f]).0, 0);
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .arg("--db")
        .arg(&db)
        .args(["get", "t", "blob", "--raw"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout == blob, "the value read back differs");
    assert_eq!(
        tm_stdin(&db, &["put", "t", "s", "--value-file", "-"], "a\tb\n").0,
        0
    );
    assert_eq!(tm(&db, &["get", "t", "s", "--raw"]).1, "a\tb\n");
    assert_eq!(tm(&db, &["get", "t", "s"]).1, "a\tb\n\n");
    // One byte over the engine's limit is refused, typed, and not written.
    let big = dir.path().join("big");
    std::fs::write(&big, vec![0u8; tidemark::MAX_VALUE_SIZE + 1]).unwrap();
    let (code, _, err) = tm(
        &db,
        &["put", "t", "big", "--value-file", big.to_str().unwrap()],
    );
    assert_ne!(code, 0);
    assert!(err.contains("exceeds the limit"), "{err}");
    assert_eq!(tm(&db, &["get", "t", "big"]).0, 1);
    // A value on the command line and a file do not mix; a missing file is
    // named.
    assert_ne!(tm(&db, &["put", "t", "k", "v", "--value-file", f]).0, 0);
    assert_ne!(tm(&db, &["put", "t", "k"]).0, 0);
    let (code, _, err) = tm(&db, &["put", "t", "k", "--value-file", "/nonexistent/v"]);
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent/v"), "{err}");
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
fn page_size_applies_to_a_new_database_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (code, _, err) = tm(&db, &["--page-size", "3000", "put", "t", "k", "v"]);
    assert_ne!(code, 0);
    assert!(err.contains("page_size"), "{err}");
    assert!(!db.exists(), "a refused page size made the database");
    assert_eq!(tm(&db, &["--page-size", "4096", "put", "t", "k", "v"]).0, 0);
    let long = "k".repeat(1025);
    let (code, _, err) = tm(&db, &["put", "t", &long, "v"]);
    assert_ne!(code, 0, "a key past a 4 KiB page's limit went in");
    assert!(err.contains("1024"), "{err}");
    // Opened again with the default, it keeps its 4 KiB pages.
    let (code, out, _) = tm(&db, &["stats", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["page_size"].as_u64(), Some(4096), "{out}");
    assert_eq!(tm(&db, &["get", "t", "k"]).1, "v\n");
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
    assert!(err.contains("imported 200 of 200 documents"), "{err}");
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

#[test]
fn import_skips_or_stops_at_bad_lines_and_export_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // Skip and count: a malformed line, a duplicate _id, a non-document.
    let input = "{\"_id\": 1}\nnot json\n{\"_id\": 2}\n{\"_id\": 1}\n[1, 2]\n{\"_id\": 3}\n";
    let (code, _, err) = tm_stdin(&db, &["import", "c", "--batch", "2"], input);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 2: not JSON"), "{err}");
    assert!(err.contains("line 4: duplicate _id"), "{err}");
    assert!(err.contains("line 5: not a document"), "{err}");
    assert!(err.contains("imported 3 of 6 documents"), "{err}");
    let (_, found, _) = tm(&db, &["find", "c"]);
    assert_eq!(found, "{\"_id\":1}\n{\"_id\":2}\n{\"_id\":3}\n");
    // Stop on error: every line before the bad one, none after.
    let input = "{\"_id\": 10}\n{\"_id\": 11}\n{\"_id\": 12}\n{\"_id\": 1}\n{\"_id\": 13}\n";
    let (code, _, err) = tm_stdin(
        &db,
        &["import", "c", "--batch", "3", "--stop-on-error"],
        input,
    );
    assert_eq!(code, 1);
    assert!(err.contains("stopped at line 4: duplicate _id"), "{err}");
    let (_, found, _) = tm(&db, &["find", "c"]);
    let ids: Vec<&str> = found.lines().collect();
    assert_eq!(ids.len(), 6, "{found}");
    assert_eq!(ids[5], "{\"_id\":12}");
    // Export in canonical Extended JSON and import again: the same BSON,
    // byte for byte, for every type.
    let mixed = [
        r#"{"_id": {"$oid": "5f1e0a1b2c3d4e5f60718293"}, "i32": {"$numberInt": "7"}, "i64": {"$numberLong": "9007199254740993"}, "d": {"$numberDouble": "2.5"}}"#,
        r#"{"_id": {"$numberLong": "4"}, "dec": {"$numberDecimal": "1234.5678"}, "t": {"$date": {"$numberLong": "1700000000123"}}, "bin": {"$binary": {"base64": "AAEC", "subType": "00"}}}"#,
        r#"{"_id": "s", "nested": {"z": 1, "a": [true, null, {"$minKey": 1}]}, "re": {"$regularExpression": {"pattern": "^a", "options": "i"}}, "ts": {"$timestamp": {"t": 5, "i": 6}}}"#,
    ];
    let input: String = mixed.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(tm_stdin(&db, &["import", "m"], &input).0, 0);
    let (code, exported, err) = tm(&db, &["export", "m"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported 3 documents"), "{err}");
    assert_eq!(tm_stdin(&db, &["import", "m2"], &exported).0, 0);
    let (_, again, _) = tm(&db, &["export", "m2"]);
    assert_eq!(exported, again);
    for (orig, out) in mixed.iter().zip(exported.lines()) {
        let bytes = |l: &str| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let tidemark::bson::Bson::Document(d) = tidemark::bson::Bson::try_from(v).unwrap()
            else {
                panic!("not a document")
            };
            tidemark::bson::to_vec(&d).unwrap()
        };
        assert_eq!(bytes(orig), bytes(out), "{out}");
    }
    let (_, relaxed, _) = tm(&db, &["export", "m", "--mode", "relaxed"]);
    assert!(relaxed.contains("\"i32\":7"), "{relaxed}");
}

#[test]
fn report_draws_the_statistics_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    logged_database(&path, 700, true);
    let out = dir.path().join("report.html");
    let (code, _, err) = tm(
        &path,
        &[
            "report",
            path.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Self-contained: no scripts, nothing fetched (the only URL is the SVG
    // namespace).
    for banned in ["<script", "src=", "href=\"http", "url(", "@import"] {
        assert!(!html.contains(banned), "{banned}");
    }
    assert_eq!(
        html.matches("http").count(),
        html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    for anchor in [
        "cache",
        "ops",
        "eviction",
        "log",
        "groups",
        "checkpoints",
        "tables",
        "collections",
        "file-room",
    ] {
        assert!(
            html.contains(&format!("<figure id=\"{anchor}\"><svg")),
            "{anchor} missing"
        );
    }
    assert_eq!(html.matches("<svg").count(), 14);
    // The operations chart draws the puts and inserts; the tables chart
    // names the table.
    let legend = |name: &str| html.contains(&format!(">\n{name}\n</text>"));
    assert!(legend("put") && legend("doc insert"), "legend");
    assert!(legend("kv writes"));
    // Not statistics: a clear error.
    std::fs::write(dir.path().join("junk.jsonl"), "hello\n").unwrap();
    let (code, _, err) = tm(
        &path,
        &["report", dir.path().join("junk.jsonl").to_str().unwrap()],
    );
    assert_eq!(code, 2);
    assert!(err.contains("needs at least two"), "{err}");
}

#[test]
fn stat_reads_a_running_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = tidemark::Database::builder()
        .cache_size(4 << 20)
        .control_socket(true)
        .statistics_log(Some(tidemark::StatisticsLog {
            interval: std::time::Duration::from_millis(150),
            ..Default::default()
        }))
        .open(&path)
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (t, stop) = (db.table("kv").unwrap(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                t.put(i.to_be_bytes(), b"v").unwrap();
                i += 1;
            }
        })
    };
    // Through the socket, while this process has the database open.
    let (code, out, err) = tm(&path, &["stat", "--interval", "0.2", "--count", "3"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].contains("put") && lines[0].contains("dirty%"));
    let put_col = lines[0]
        .split_whitespace()
        .position(|c| c == "put")
        .unwrap();
    for l in &lines[1..] {
        let put = l.split_whitespace().nth(put_col).unwrap();
        assert_ne!(put, "0", "puts are running: {l}");
    }
    // Without the socket: by following the statistics log.
    std::fs::remove_file(path.join(tidemark::CONTROL_SOCKET)).unwrap();
    let (code, out, err) = tm(&path, &["stat", "--interval", "0.1", "--count", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    db.close().unwrap();
    // Nothing to read: a clear error.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, _, err) = tm(&empty, &["stat", "--count", "1"]);
    assert_eq!(code, 2);
    assert!(err.contains("no control socket"), "{err}");
}

#[test]
fn backup_of_a_running_database_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = tidemark::Database::builder()
        .cache_size(4 << 20)
        .control_socket(true)
        .open(&path)
        .unwrap();
    let t = db.table("kv").unwrap();
    for i in 0..5_000u32 {
        t.put(i.to_be_bytes(), [3u8; 100]).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (t, stop) = (t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 5_000u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                t.put(i.to_be_bytes(), [3u8; 100]).unwrap();
                i += 1;
            }
        })
    };
    // Through the control socket: this process keeps the database open.
    let dest = dir.path().join("copy");
    let (code, out, err) = tm(&path, &["backup", dest.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("backup of the running database"), "{out}");
    // A second backup into the same place is refused, with the reason.
    let (code, _, err) = tm(&path, &["backup", dest.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not empty"), "{err}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    db.close().unwrap();
    let (code, out, _) = tm(&dest, &["verify"]);
    assert_eq!(code, 0, "{out}");
    let (_, scan, _) = tm(&dest, &["scan", "kv"]);
    assert!(scan.lines().count() >= 5_000);
    // Not running: the command opens the database itself.
    let (code, out, err) = tm(
        &path,
        &["backup", dir.path().join("copy2").to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("backup: "), "{out}");
    let (code, out, _) = tm(&path, &["compact"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("compact: data file "), "{out}");
}

/// Opt-in (`TIDEMARK_BROWSER_TEST=1`, needs Debian's `chromium`): renders
/// a report in headless Chromium and checks the charts are there, in the
/// DOM the browser built and in the pixels: the page rendered with its
/// charts must be far larger as a PNG than the same page without them.
#[test]
fn report_renders_in_chromium() {
    if std::env::var_os("TIDEMARK_BROWSER_TEST").is_none() {
        eprintln!("skipped: set TIDEMARK_BROWSER_TEST=1 (needs chromium) to run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    logged_database(&path, 800, false);
    let html = dir.path().join("report.html");
    let (code, _, err) = tm(
        &path,
        &[
            "report",
            path.to_str().unwrap(),
            "-o",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    // The same page without its charts, for comparison.
    let mut bare = String::new();
    let mut rest = page.as_str();
    while let Some(i) = rest.find("<svg") {
        bare.push_str(&rest[..i]);
        let j = rest[i..].find("</svg>").unwrap() + i + "</svg>".len();
        rest = &rest[j..];
    }
    bare.push_str(rest);
    let bare_html = dir.path().join("bare.html");
    std::fs::write(&bare_html, bare).unwrap();
    let chromium = |args: &[&str]| {
        let profile = tempfile::tempdir().unwrap();
        let out = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1040,4600",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(args)
            .output()
            .expect("TIDEMARK_BROWSER_TEST needs chromium (apt-get install chromium)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let url = |p: &std::path::Path| format!("file://{}", p.display());
    // The DOM Chromium built: every chart with drawn lines in it.
    let dom = chromium(&["--dump-dom", &url(&html)]);
    assert_eq!(dom.matches("<svg").count(), 13);
    assert!(dom.matches("<polyline").count() >= 13, "lines drawn");
    // The pixels: the first series colour of the charts (plotters'
    // Palette99 red, 230,25,75) is on the rendered page with the charts and
    // nowhere on the page without them.
    let red_pixels = |page: &std::path::Path, png_path: &std::path::Path| {
        chromium(&[&format!("--screenshot={}", png_path.display()), &url(page)]);
        let decoder = png::Decoder::new(std::fs::File::open(png_path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let step = info.color_type.samples();
        assert!(step >= 3, "{:?}", info.color_type);
        buf[..info.buffer_size()]
            .chunks(step)
            .filter(|p| p[0] == 230 && p[1] == 25 && p[2] == 75)
            .count()
    };
    let with = red_pixels(&html, &dir.path().join("with.png"));
    let without = red_pixels(&bare_html, &dir.path().join("without.png"));
    assert_eq!(without, 0);
    assert!(with > 2_000, "{with} chart pixels");
}

/// A reader that stops early (`tidemark layout c | head`) ends the output
/// quietly: no error message, success.
#[test]
fn output_to_a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let d = tidemark::Database::builder().open(&db).unwrap();
        let c = d.collection("c").unwrap();
        // Far more output than a pipe buffers.
        for i in 0..30_000 {
            c.insert_one(&tidemark::bson::doc! {"_id": i}).unwrap();
        }
        d.close().unwrap();
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .arg("--db")
        .arg(&db)
        .args(["find", "c"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), r#"{"_id":0}"#);
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(out.status.success(), "{:?}", out.status);
}
