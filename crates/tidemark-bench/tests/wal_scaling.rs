//! `wal-scaling --quick` at three thread counts: both targets come from
//! paired rounds (the sweep's best N other than 64 against 64 for `Write`,
//! 1 against 64 for `Fsync`), and their figures are the medians of those
//! rounds' ratios. Timings are not asserted (the machine is shared); the
//! plumbing from rounds to targets is.

use std::process::Command;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn targets_are_the_medians_of_paired_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark-bench"))
        .arg("--dir")
        .arg(dir.path())
        .args(["--json", "wal-scaling", "--quick", "--threads", "1,2,64"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 1 is a missed target, a result like any other.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stderr}\n{stdout}"
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let sweep_best = v["write_tidemark"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["threads"] != 64)
        .max_by(|a, b| {
            a["ops_per_s"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["ops_per_s"].as_f64().unwrap())
        })
        .unwrap()["threads"]
        .as_u64()
        .unwrap();
    for (mode, few, name) in [
        (
            "write",
            sweep_best,
            "write: ops/s 64 thr / best N, paired median",
        ),
        ("fsync", 1, "fsync: commits/s 64 thr / 1, paired median"),
    ] {
        let paired = &v[format!("{mode}_paired_rounds")];
        assert_eq!(paired["threads"].as_u64(), Some(few), "{v}");
        let rounds = paired["rounds"].as_array().unwrap();
        assert_eq!(rounds.len(), 3, "{v}");
        let ratios: Vec<f64> = rounds
            .iter()
            .map(|r| {
                let (a, b) = (
                    r["commits_per_s"].as_f64().unwrap(),
                    r["commits_per_s_64"].as_f64().unwrap(),
                );
                assert!(a > 0.0 && b > 0.0, "{v}");
                r["ratio"].as_f64().unwrap()
            })
            .collect();
        let target = v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no target {name}: {v}"));
        assert_eq!(target["measured"].as_f64(), Some(median(ratios)), "{v}");
        assert!(v[format!(
            "{mode}_64_over_{}_sweep",
            if mode == "write" { "best" } else { "1" }
        )]
        .as_f64()
        .is_some_and(|x| x > 0.0));
    }
}
