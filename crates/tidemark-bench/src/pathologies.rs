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
