//! The benchmark harness against peers, on the engines every build has
//! (tidemark and SQLite): YCSB load and A-F, and one pathology workload
//! side by side. Figures are not asserted (they are benchmarks); what is
//! asserted is that every engine ran every phase to completion on the
//! same work, and read back every record the load wrote.

use std::process::Command;

use serde_json::Value;

fn bench(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark-bench"))
        .arg("--dir")
        .arg(dir.path())
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 1 is a target missed, which is a figure, not a failure here.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stderr}\n{stdout}"
    );
    // Nothing was left behind in the run's directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    serde_json::from_str(stdout.trim()).unwrap()
}

#[test]
fn ycsb_runs_every_workload_on_every_engine() {
    let v = bench(&[
        "ycsb",
        "--engines",
        "tidemark,sqlite",
        "--records",
        "3000",
        "--ops",
        "3000",
        "--rounds",
        "1",
    ]);
    let phases = v["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["load", "a", "b", "c", "f", "d", "e"]);
    for run in v["runs"].as_array().unwrap() {
        let phase = run["phase"].as_str().unwrap();
        // The load inserts every record; each workload runs every op.
        assert_eq!(run["ops"], 3000, "{run}");
        assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["p50_us"].as_f64().unwrap() > 0.0, "{run}");
        assert!(
            run["p99_us"].as_f64().unwrap() >= run["p50_us"].as_f64().unwrap(),
            "{run}"
        );
        // Every record the load acknowledged reads back (D and E insert
        // while others read, so a read may race an insert there).
        if ["a", "b", "c", "f"].contains(&phase) {
            assert_eq!(run["not_found"], 0, "{run}");
        }
    }
    assert_eq!(v["runs"].as_array().unwrap().len(), 14);
    // Each engine's load wrote at least its records' bytes to disk.
    for p in phases[0]["engines"].as_array().unwrap() {
        assert!(
            p["written_mb"].as_f64().unwrap() > 3000.0 * 1000.0 / 1048576.0,
            "{p}"
        );
    }
}

#[test]
fn ycsb_rejects_an_engine_not_built_in() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark-bench"))
        .arg("--dir")
        .arg(dir.path())
        .args([
            "ycsb",
            "--engines",
            "tidemark,nosuchdb",
            "--records",
            "10",
            "--ops",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in this build"));
}

#[test]
fn versus_read_after_sync_reads_every_key_on_both_engines() {
    let v = bench(&[
        "versus",
        "read-after-sync",
        "--quick",
        "--engines",
        "tidemark,sqlite",
    ]);
    let engines = v["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    for e in engines {
        assert!(e["reads_per_sec_before"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["reads_per_sec_after"].as_f64().unwrap() > 0.0, "{e}");
    }
    assert_eq!(v["targets"].as_array().unwrap().len(), 2);
}
