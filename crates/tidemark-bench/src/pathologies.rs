//! `pathologies`: the five pathology workloads at their `--quick` size, one
//! after the other, and one verdict table of every guarantee.
//!
//! Each workload runs as a child process of this same binary (`<workload>
//! --quick --json`), so one cannot inherit another's threads, cache or
//! page-cache state, and each figure is exactly what the workload prints
//! when run alone.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

use crate::report::{self, Target};
use crate::{msg, BoxResult};

pub struct Args {
    pub json: bool,
    pub dir: PathBuf,
}

/// The pathologies, in BRIEF.md's order: the guarantee, and the workload
/// (with any arguments beyond `--quick --json`) that proves it.
const PATHOLOGIES: [(&str, &str, &[&str]); 5] = [
    ("1 capped collections are true ring buffers", "capped", &[]),
    ("2 eviction never stalls writers", "cache-pressure", &[]),
    (
        "3 checkpoint cost follows dirty data, blocks no one",
        "checkpoint",
        &[],
    ),
    ("4 group commit scales with threads", "wal-scaling", &[]),
    (
        "5 reads never depend on mmap or page faults",
        "read-after-checkpoint",
        &[],
    ),
];

/// One workload's result: its JSON object and its wall time.
struct Outcome {
    pathology: &'static str,
    workload: &'static str,
    secs: f64,
    /// Host steal (% of the machine's CPU time) while the workload ran.
    steal: Option<f64>,
    figures: Value,
}

fn run_one(dir: &std::path::Path, workload: &str, extra: &[&str]) -> BoxResult<Value> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .arg(workload)
        .args(extra)
        .args(["--quick", "--json", "--dir"])
        .arg(dir)
        .output()?;
    // Exit 1 means some target missed: a result like any other. Anything
    // else without a JSON object is a failure of the workload.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().rev().find(|l| l.starts_with('{'));
    match (out.status.code(), line) {
        (Some(0 | 1), Some(l)) => Ok(serde_json::from_str(l)?),
        _ => Err(msg(&format!(
            "{workload} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// A rate in thousands, one decimal: `134.7k`.
fn thousands(x: f64) -> String {
    format!("{:.1}k", x / 1000.0)
}

/// The figures behind a workload's targets, in one or two lines, so that a
/// miss in the verdict table can be read without running the workload
/// again: the seconds of `cache-pressure`, the writer's tail around a
/// checkpoint, each paired round of `wal-scaling`, each round of
/// `read-after-checkpoint`. `None` for a workload whose targets say it all
/// (or whose JSON lacks the figures).
fn detail(workload: &str, f: &Value) -> Option<Vec<String>> {
    let num = |v: &Value| v.as_f64();
    // `a/b, a/b, ...` in thousands; `None` if any figure is missing.
    let slashed = |pairs: Vec<(&Value, &Value)>| -> Option<String> {
        let parts: Option<Vec<String>> = pairs
            .into_iter()
            .map(|(a, b)| Some(format!("{}/{}", thousands(num(a)?), thousands(num(b)?))))
            .collect();
        Some(parts?.join(", "))
    };
    match workload {
        "cache-pressure" => {
            let windows: Vec<f64> = f["windows"].as_array()?.iter().filter_map(num).collect();
            let (slowest, at) = windows
                .iter()
                .enumerate()
                .min_by(|x, y| x.1.total_cmp(y.1))
                .map(|(i, w)| (*w, i + 1))?;
            let mut lines = vec![format!(
                "inserts/s {}; 1-s windows: median {}, slowest {} (second {at} of {})",
                thousands(num(&f["ops_per_s"])?),
                thousands(num(&f["median_window"])?),
                thousands(slowest),
                windows.len()
            )];
            let st = &f["settle"];
            if let (Some(w), Some(q)) = (num(&st["waited_s"]), st["quiet"].as_bool()) {
                lines.push(format!(
                    "started after {w:.1} s waiting for the machine to stop pausing ({})",
                    if q { "it did" } else { "it had not" }
                ));
            }
            Some(lines)
        }
        "checkpoint" => {
            let w = &f["writer"];
            let mut lines = vec![format!(
                "writer p99 {:.1} us alone, {:.1} us beside a checkpoint of {:.0} ms",
                num(&w["baseline_p99_us"])?,
                num(&w["during_p99_us"])?,
                num(&w["checkpoint_ms"])?
            )];
            if let (Some(r), Some(n)) = (
                num(&w["p99_ratio_without_log_growth"]),
                w["rounds_without_log_growth"].as_u64(),
            ) {
                lines.push(format!(
                    "p99 ratio over the {n} round(s) in which the log created no segment: {r:.3}"
                ));
            }
            Some(lines)
        }
        "wal-scaling" => {
            let mut lines = Vec::new();
            for mode in ["write", "fsync"] {
                let p = &f[format!("{mode}_paired_rounds")];
                let rounds = p["rounds"].as_array().map(|rs| {
                    rs.iter()
                        .map(|r| (&r["commits_per_s"], &r["commits_per_s_64"]))
                        .collect()
                });
                if let (Some(n), Some(r)) = (p["threads"].as_u64(), rounds.and_then(slashed)) {
                    lines.push(format!(
                        "{mode} paired rounds, commits/s at {n} / 64 threads: {r}"
                    ));
                }
            }
            let fp = &f["flush_probe"];
            if let (Some(b), Some(a)) = (num(&fp["before_median_us"]), num(&fp["after_median_us"]))
            {
                lines.push(format!(
                    "the disk's flush (4 KiB overwrite + fdatasync, median): {b:.0} us before the fsync runs, {a:.0} us after"
                ));
            }
            (!lines.is_empty()).then_some(lines)
        }
        "read-after-checkpoint" => {
            let before = f["rounds_reads_per_s_before"].as_array()?;
            let after = f["rounds_reads_per_s_after"].as_array()?;
            Some(vec![format!(
                "rounds, reads/s before / right after a checkpoint: {}",
                slashed(before.iter().zip(after).collect())?
            )])
        }
        _ => None,
    }
}

pub fn run(a: &Args) -> BoxResult<bool> {
    let t0 = Instant::now();
    let mut outcomes = Vec::new();
    for (i, (pathology, workload, extra)) in PATHOLOGIES.iter().enumerate() {
        eprintln!(
            "[{}/{}] {workload} --quick  ({pathology})",
            i + 1,
            PATHOLOGIES.len()
        );
        let t = Instant::now();
        let ticks = report::cpu_ticks();
        let figures = run_one(&a.dir, workload, extra)?;
        let steal = report::steal_pct(ticks, report::cpu_ticks());
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "      done in {secs:.0} s, host steal {}",
            steal.map_or("unknown".into(), |p| format!("{p:.2} %"))
        );
        outcomes.push(Outcome {
            pathology,
            workload,
            secs,
            steal,
            figures,
        });
    }
    let total = t0.elapsed().as_secs_f64();

    // Every workload's targets, named after their pathology.
    let mut targets = Vec::new();
    for o in &outcomes {
        let list = o.figures["targets"]
            .as_array()
            .ok_or_else(|| msg(&format!("{} printed no targets", o.workload)))?;
        for t in list {
            targets.push((
                o.pathology,
                Target {
                    name: t["name"].as_str().unwrap_or("?").to_string(),
                    measured: t["measured"].as_f64().unwrap_or(f64::NAN),
                    target: t["target"].as_str().unwrap_or("?").to_string(),
                    holds: t["holds"].as_bool().unwrap_or(false),
                },
            ));
        }
    }
    let all = targets.iter().all(|(_, t)| t.holds);
    let machine = report::machine(&a.dir);
    if a.json {
        let per: Value = outcomes
            .iter()
            .map(|o| {
                (
                    o.workload.to_string(),
                    json!({"pathology": o.pathology, "seconds": o.secs, "steal_pct": o.steal, "result": o.figures}),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into();
        let out = json!({
            "workload": "pathologies",
            "machine": machine,
            "seconds": total,
            "workloads": per,
            "targets": targets.iter().map(|(p, t)| json!({
                "name": format!("{}: {}", p, t.name),
                "measured": t.measured,
                "target": t.target,
                "holds": t.holds,
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
        return Ok(all);
    }
    println!();
    println!("machine: {machine}");
    println!("five pathologies, each workload at its --quick size, {total:.0} s in all");
    let mut last = "";
    for (p, t) in &targets {
        if *p != last {
            println!();
            let steal = outcomes
                .iter()
                .find(|o| o.pathology == *p)
                .and_then(|o| o.steal);
            println!(
                "{p}  (host steal {})",
                steal.map_or("unknown".into(), |s| format!("{s:.2} % of CPU time"))
            );
            if let Some(o) = outcomes.iter().find(|o| o.pathology == *p) {
                for line in detail(o.workload, &o.figures).unwrap_or_default() {
                    println!("  {line}");
                }
            }
            println!(
                "  {:<60} {:>10} {:>18}  holds",
                "target", "measured", "target"
            );
            last = p;
        }
        println!(
            "  {:<60} {:>10.3} {:>18}  {}",
            t.name,
            t.measured,
            t.target,
            if t.holds { "yes" } else { "NO" }
        );
    }
    let held = targets.iter().filter(|(_, t)| t.holds).count();
    println!();
    println!(
        "{held} of {} targets hold. Each workload alone: `tidemark-bench <workload> --quick` (tables and figures); BENCHMARKS.md has full-size runs.",
        targets.len()
    );
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_name_the_slowest_second_and_every_round() {
        let cp = json!({"ops_per_s": 150_000.0, "median_window": 152_000.0,
            "windows": [160_000.0, 99_000.0, 152_000.0]});
        assert_eq!(
            detail("cache-pressure", &cp).unwrap(),
            ["inserts/s 150.0k; 1-s windows: median 152.0k, slowest 99.0k (second 2 of 3)"]
        );
        let mut settled = cp.clone();
        settled["settle"] = json!({"waited_s": 17.54, "quiet": true});
        assert_eq!(
            detail("cache-pressure", &settled).unwrap()[1],
            "started after 17.5 s waiting for the machine to stop pausing (it did)"
        );
        let ws = json!({
            "write_paired_rounds": {"threads": 4, "rounds": [
                {"commits_per_s": 125_600.0, "commits_per_s_64": 110_700.0}]},
            "fsync_paired_rounds": {"threads": 1, "rounds": [
                {"commits_per_s": 7_537.0, "commits_per_s_64": 134_691.0},
                {"commits_per_s": 8_891.0, "commits_per_s_64": 136_947.0}]},
            "flush_probe": {"before_median_us": 96.4, "after_median_us": 131.6}});
        assert_eq!(
            detail("wal-scaling", &ws).unwrap(),
            [
                "write paired rounds, commits/s at 4 / 64 threads: 125.6k/110.7k",
                "fsync paired rounds, commits/s at 1 / 64 threads: 7.5k/134.7k, 8.9k/136.9k",
                "the disk's flush (4 KiB overwrite + fdatasync, median): 96 us before the fsync runs, 132 us after"
            ]
        );
        let rc = json!({"rounds_reads_per_s_before": [1_300_000.0, 1_200_000.0],
            "rounds_reads_per_s_after": [1_250_000.0, 1_310_000.0]});
        assert_eq!(
            detail("read-after-checkpoint", &rc).unwrap(),
            ["rounds, reads/s before / right after a checkpoint: 1300.0k/1250.0k, 1200.0k/1310.0k"]
        );
        let ck = json!({"writer": {"baseline_p99_us": 12.04, "during_p99_us": 30.0, "checkpoint_ms": 786.4}});
        assert_eq!(
            detail("checkpoint", &ck).unwrap(),
            ["writer p99 12.0 us alone, 30.0 us beside a checkpoint of 786 ms"]
        );
        let mut ck = ck;
        ck["writer"]["p99_ratio_without_log_growth"] = json!(1.5);
        ck["writer"]["rounds_without_log_growth"] = json!(2);
        assert_eq!(
            detail("checkpoint", &ck).unwrap(),
            [
                "writer p99 12.0 us alone, 30.0 us beside a checkpoint of 786 ms",
                "p99 ratio over the 2 round(s) in which the log created no segment: 1.500"
            ]
        );
    }

    #[test]
    fn a_workload_without_its_figures_gets_no_detail() {
        assert!(detail("capped", &json!({})).is_none());
        assert!(detail("cache-pressure", &json!({"windows": []})).is_none());
        assert!(detail("wal-scaling", &json!({})).is_none());
        assert!(detail(
            "read-after-checkpoint",
            &json!({"rounds_reads_per_s_before": [1.0]})
        )
        .is_none());
    }
}
