//! CI's crash loop: 25 cycles of a randomized workload in a child process
//! killed with SIGKILL, each reopened, verified and compared with the
//! model, and 10 more on a database of 4 KiB pages
//! (`tidemark-bench crash-loop --cycles N [--page-size N]` runs more; the
//! seed is printed so a failure reproduces with `--seed`).

use std::process::Command;

/// Runs `crash-loop` and checks its report; `cycles` may be overridden
/// with `TIDEMARK_CRASH_CYCLES`.
fn crash_loop(cycles: &str, page_size: &str) {
    let cycles = std::env::var("TIDEMARK_CRASH_CYCLES").unwrap_or_else(|_| cycles.into());
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark-bench"))
        .arg("--dir")
        .arg(dir.path())
        .args(["--json", "crash-loop", "--cycles", &cycles])
        .args(["--page-size", page_size])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["cycles"].as_u64().unwrap().to_string(), cycles);
    assert_eq!(v["page_size"].as_u64().unwrap().to_string(), page_size);
    assert!(v["acknowledged"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["targets"][0]["holds"], true);
    eprintln!("crash loop: {v}");
}

#[test]
fn twenty_five_kill_cycles_lose_nothing() {
    crash_loop("25", "16384");
}

#[test]
fn ten_kill_cycles_at_4_kib_pages_lose_nothing() {
    crash_loop("10", "4096");
}
