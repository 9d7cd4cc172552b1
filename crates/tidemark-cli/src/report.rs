//! `tidemark report`: draws statistics log files as one self-contained
//! HTML page, a chart per counter group (SVG by plotters, inline; no
//! scripts, nothing fetched). Monotonic counters are drawn as rates per
//! second between consecutive lines, gauges as levels. A line whose
//! uptime is below the previous one starts a new process: rates are not
//! drawn across it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

type Error = Box<dyn std::error::Error>;

/// Fields that are levels, not counts since open.
const GAUGES: &[&str] = &[
    "uptime_us",
    "cache_size",
    "cache_bytes_used",
    "cache_bytes_dirty",
    "cache_bytes_peak",
    "cache_eviction_target",
    "cache_eviction_trigger",
    "cache_dirty_target",
    "cache_dirty_trigger",
    "max_cache_wait_us",
    "checkpoint_last_us",
    "checkpoint_max_us",
    "checkpoint_running",
    "file_size",
    "file_free_bytes",
    "file_high_water_bytes",
    "file_limbo_bytes",
    "memory_limit_bytes",
    "os_cache_drop_behind",
    "log_max_group",
    "log_position",
    "log_synced",
    "snapshots_active",
    "snapshot_oldest_age_us",
    "versions_kept",
    "versions_bytes",
    "versions_budget",
    "capped_collections",
    "capped_records",
    "capped_bytes",
    "capped_pending_bytes",
];

/// Whether `field` is a level (else a counter drawn as a rate).
pub fn is_gauge(field: &str) -> bool {
    GAUGES.contains(&field)
}

/// One line of a statistics log.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Unix seconds.
    pub time: f64,
    pub fields: BTreeMap<String, f64>,
    /// Per table and per collection: name -> (reads, writes, scans).
    pub tables: BTreeMap<String, [f64; 3]>,
    pub collections: BTreeMap<String, [f64; 3]>,
}

impl Sample {
    pub fn get(&self, f: &str) -> f64 {
        self.fields.get(f).copied().unwrap_or(0.0)
    }
}

fn named(v: Option<&Value>) -> BTreeMap<String, [f64; 3]> {
    let mut out = BTreeMap::new();
    if let Some(Value::Object(m)) = v {
        for (name, c) in m {
            let g = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            out.insert(name.clone(), [g("reads"), g("writes"), g("scans")]);
        }
    }
    out
}

/// Parses one line; `None` if it is not a statistics line.
pub fn parse_line(line: &str) -> Option<Sample> {
    let v: Value = serde_json::from_str(line).ok()?;
    let obj = v.as_object()?;
    let time = obj.get("time")?.as_f64()?;
    let mut fields = BTreeMap::new();
    for (k, val) in obj {
        if let Some(x) = val.as_f64() {
            fields.insert(k.clone(), x);
        }
    }
    Some(Sample {
        time,
        fields,
        tables: named(obj.get("tables")),
        collections: named(obj.get("collections")),
    })
}

/// The statistics log files (`stats.NNNNNN.jsonl`) in `dir`, oldest first.
pub fn stats_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| {
            f.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(tidemark::STATS_FILE_PREFIX)
                    && n.ends_with(tidemark::STATS_FILE_SUFFIX)
            })
        })
        .collect();
    found.sort();
    Ok(found)
}

/// The statistics files named: files as given, directories by their
/// `stats.*.jsonl` files.
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let found = stats_files_in(p)?;
            if found.is_empty() {
                return Err(format!("no statistics files in {}", p.display()).into());
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Every sample of `files`, in time order, and the count of lines that
/// were not statistics lines.
pub fn load(files: &[PathBuf]) -> Result<(Vec<Sample>, usize), Error> {
    let mut samples = Vec::new();
    let mut bad = 0;
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match parse_line(line) {
                Some(s) => samples.push(s),
                None => bad += 1,
            }
        }
    }
    samples.sort_by(|a, b| a.time.total_cmp(&b.time));
    Ok((samples, bad))
}

/// Whether `b` comes from the same process as `a` (counters continue).
fn continues(a: &Sample, b: &Sample) -> bool {
    b.get("uptime_us") >= a.get("uptime_us") && b.time > a.time
}

/// A series: runs of (x, y) points, broken where a process restarted.
type Runs = Vec<Vec<(f64, f64)>>;

struct Series {
    name: String,
    runs: Runs,
    dashed: bool,
}

/// Rate per second of `f(sample)` between consecutive samples, drawn at
/// the later one; `scale` divides it.
fn rate(samples: &[Sample], t0: f64, scale: f64, f: impl Fn(&Sample) -> f64) -> Runs {
    let mut runs: Runs = vec![Vec::new()];
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if !continues(a, b) {
            runs.push(Vec::new());
            continue;
        }
        let dt = b.time - a.time;
        let r = ((f(b) - f(a)) / dt / scale).max(0.0);
        if let Some(run) = runs.last_mut() {
            run.push((b.time - t0, r));
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// Level of `f(sample)`, divided by `scale`.
fn level(samples: &[Sample], t0: f64, scale: f64, f: impl Fn(&Sample) -> f64) -> Runs {
    let mut runs: Runs = vec![Vec::new()];
    for (i, s) in samples.iter().enumerate() {
        if i > 0 && !continues(&samples[i - 1], s) {
            runs.push(Vec::new());
        }
        if let Some(run) = runs.last_mut() {
            run.push((s.time - t0, f(s) / scale));
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// Records per group in each interval.
fn group_size(samples: &[Sample], t0: f64) -> Runs {
    let mut runs: Runs = vec![Vec::new()];
    for w in samples.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if !continues(a, b) {
            runs.push(Vec::new());
            continue;
        }
        let groups = b.get("log_groups") - a.get("log_groups");
        if groups > 0.0 {
            let recs = b.get("log_records") - a.get("log_records");
            if let Some(run) = runs.last_mut() {
                run.push((b.time - t0, recs / groups));
            }
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

fn series(name: &str, runs: Runs) -> Series {
    Series {
        name: name.to_string(),
        runs,
        dashed: false,
    }
}

fn dashed(name: &str, runs: Runs) -> Series {
    Series {
        name: name.to_string(),
        runs,
        dashed: true,
    }
}

fn nonzero(s: &Series) -> bool {
    s.runs.iter().flatten().any(|p| p.1 != 0.0)
}

/// One chart as an SVG string.
fn chart(title: &str, unit: &str, x_max: f64, all: Vec<Series>) -> Result<String, Error> {
    let all: Vec<Series> = all.into_iter().filter(|s| nonzero(s) || s.dashed).collect();
    let y_max = all
        .iter()
        .flat_map(|s| s.runs.iter().flatten())
        .map(|p| p.1)
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let x_max = x_max.max(1.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 320)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
        c.configure_mesh()
            .x_desc("seconds since the first line")
            .y_desc(unit)
            .light_line_style(WHITE.mix(0.0))
            .draw()?;
        if all.is_empty() {
            root.draw(&Text::new(
                "(all zero)",
                (440, 160),
                ("sans-serif", 16).into_font(),
            ))?;
        }
        for (i, s) in all.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let style = color.stroke_width(2);
            let mut first = true;
            for run in &s.runs {
                let anno = if s.dashed {
                    c.draw_series(DashedLineSeries::new(run.clone(), 6, 4, style))?
                } else if run.len() == 1 {
                    c.draw_series(std::iter::once(Circle::new(run[0], 3, color.filled())))?
                } else {
                    c.draw_series(LineSeries::new(run.clone(), style))?
                };
                if first {
                    anno.label(s.name.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                    first = false;
                }
            }
        }
        if !all.is_empty() {
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 13))
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}

const MIB: f64 = 1024.0 * 1024.0;

fn pct(samples: &[Sample], t0: f64, field: &'static str) -> Runs {
    level(samples, t0, 1.0, move |s| {
        100.0 * s.get(field) / s.get("cache_size").max(1.0)
    })
}

/// The report's charts, in page order: (anchor, SVG).
fn charts(samples: &[Sample]) -> Result<Vec<(String, String)>, Error> {
    let t0 = samples[0].time;
    let x_max = samples[samples.len() - 1].time - t0;
    let r = |f: &'static str, scale: f64| rate(samples, t0, scale, move |s| s.get(f));
    let l = |f: &'static str, scale: f64| level(samples, t0, scale, move |s| s.get(f));
    let mut out = Vec::new();
    let mut add = |anchor: &str, svg: String| out.push((anchor.to_string(), svg));

    add(
        "cache",
        chart(
            "Cache: used and dirty, against eviction targets and triggers",
            "% of cache_size",
            x_max,
            vec![
                series("used %", pct(samples, t0, "cache_bytes_used")),
                series("dirty %", pct(samples, t0, "cache_bytes_dirty")),
                dashed("eviction_target", pct(samples, t0, "cache_eviction_target")),
                dashed(
                    "eviction_trigger",
                    pct(samples, t0, "cache_eviction_trigger"),
                ),
                dashed(
                    "eviction_dirty_target",
                    pct(samples, t0, "cache_dirty_target"),
                ),
                dashed(
                    "eviction_dirty_trigger",
                    pct(samples, t0, "cache_dirty_trigger"),
                ),
            ],
        )?,
    );
    let kinds = [
        ("get", "ops_get"),
        ("put", "ops_put"),
        ("delete", "ops_delete"),
        ("scan", "ops_scan"),
        ("batch", "ops_batch"),
        ("txn commit", "ops_txn_commit"),
        ("doc insert", "ops_doc_insert"),
        ("doc find", "ops_doc_find"),
        ("doc replace", "ops_doc_replace"),
        ("doc delete", "ops_doc_delete"),
    ];
    add(
        "ops",
        chart(
            "Operations by kind",
            "per second",
            x_max,
            kinds.iter().map(|(n, f)| series(n, r(f, 1.0))).collect(),
        )?,
    );
    add(
        "eviction",
        chart(
            "Eviction: pages examined, evicted and cleaned",
            "pages per second",
            x_max,
            vec![
                series("examined", r("pages_examined", 1.0)),
                series("evicted clean", r("pages_evicted_clean", 1.0)),
                series("evicted dirty", r("pages_evicted_dirty", 1.0)),
                series("cleaned (written, kept)", r("pages_cleaned", 1.0)),
                series(
                    "taken back from standby",
                    r("pages_reclaimed_from_standby", 1.0),
                ),
                series(
                    "evicted by application threads",
                    r("app_thread_evictions", 1.0),
                ),
            ],
        )?,
    );
    add(
        "waits",
        chart(
            "Application threads: time spent evicting, longest wait for cache",
            "ms per second / ms",
            x_max,
            vec![
                series(
                    "evicting (ms per s, all threads)",
                    r("app_thread_eviction_us", 1000.0),
                ),
                series(
                    "longest wait for cache since open (ms)",
                    l("max_cache_wait_us", 1000.0),
                ),
            ],
        )?,
    );
    add(
        "log",
        chart(
            "Log: records, group writes and fsyncs",
            "per second",
            x_max,
            vec![
                series("records (commits)", r("log_records", 1.0)),
                series("groups written", r("log_groups", 1.0)),
                series("fsyncs", r("log_fsyncs", 1.0)),
            ],
        )?,
    );
    add(
        "groups",
        chart(
            "Group commit: records per group",
            "records",
            x_max,
            vec![
                series("average in the interval", group_size(samples, t0)),
                series("largest since open", l("log_max_group", 1.0)),
            ],
        )?,
    );
    add(
        "checkpoints",
        chart(
            "Checkpoints: duration and pages written",
            "ms / pages per second",
            x_max,
            vec![
                series("last checkpoint (ms)", l("checkpoint_last_us", 1000.0)),
                series("longest since open (ms)", l("checkpoint_max_us", 1000.0)),
                series(
                    "pages written by checkpoints (per s)",
                    r("checkpoint_pages_written", 1.0),
                ),
                series("running (1) at the sample", l("checkpoint_running", 1.0)),
                series(
                    "share of the second flushing the data file (1 = all)",
                    r("data_flush_us", 1e6),
                ),
            ],
        )?,
    );
    add(
        "io",
        chart(
            "Disk traffic",
            "MiB per second",
            x_max,
            vec![
                series("data file written", r("bytes_written", MIB)),
                series("log written", r("log_bytes_written", MIB)),
                series(
                    "data file read",
                    // Logs written before `bytes_read` existed count pages (all of
                    // the default size: page sizes came later).
                    rate(samples, t0, MIB, |s| match s.fields.get("bytes_read") {
                        Some(&b) => b,
                        None => s.get("pages_read") * tidemark::DEFAULT_PAGE_SIZE as f64,
                    }),
                ),
            ],
        )?,
    );
    add(
        "file",
        chart(
            "Data file: size, free and awaiting a checkpoint",
            "MiB",
            x_max,
            vec![
                series("size", l("file_size", MIB)),
                series("free", l("file_free_bytes", MIB)),
                series("freed at the next checkpoint", l("file_limbo_bytes", MIB)),
            ],
        )?,
    );
    add(
        "file-room",
        chart(
            "Data file room: populated ahead, or first written unpopulated",
            "MiB/s",
            x_max,
            vec![
                series("populated ahead", r("file_bytes_populated", MIB)),
                series(
                    "first written unpopulated",
                    r("file_bytes_written_unpopulated", MIB),
                ),
            ],
        )?,
    );
    add(
        "snapshots",
        chart(
            "Snapshots and the versions kept for them",
            "count / MiB",
            x_max,
            vec![
                series("snapshots active", l("snapshots_active", 1.0)),
                series("versions (MiB)", l("versions_bytes", MIB)),
                dashed("version budget (MiB)", l("versions_budget", MIB)),
                series("conflicts per s", r("txn_conflicts", 1.0)),
                series("SnapshotTooOld per s", r("snapshot_too_old_errors", 1.0)),
            ],
        )?,
    );
    add(
        "capped",
        chart(
            "Capped collections",
            "records / per second / MiB",
            x_max,
            vec![
                series("records", l("capped_records", 1.0)),
                series("removed per s", r("capped_records_removed", 1.0)),
                series("waiting for the log (MiB)", l("capped_pending_bytes", MIB)),
            ],
        )?,
    );
    // Per table and collection: the busiest eight of each.
    for (anchor, title, pick) in [
        (
            "tables",
            "Tables: writes and reads",
            (|s: &Sample| &s.tables) as fn(&Sample) -> &BTreeMap<String, [f64; 3]>,
        ),
        (
            "collections",
            "Collections: writes and reads",
            |s: &Sample| &s.collections,
        ),
    ] {
        let last = &samples[samples.len() - 1];
        let mut names: Vec<(&String, f64)> = pick(last)
            .iter()
            .map(|(n, c)| (n, c[0] + c[1] + c[2]))
            .collect();
        names.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut all = Vec::new();
        for (name, _) in names.into_iter().take(8) {
            let n = name.clone();
            let get = move |s: &Sample, i: usize| pick(s).get(&n).map_or(0.0, |c| c[i]);
            let g1 = get.clone();
            all.push(series(
                &format!("{name} writes"),
                rate(samples, t0, 1.0, move |s| g1(s, 1)),
            ));
            all.push(series(
                &format!("{name} reads"),
                rate(samples, t0, 1.0, move |s| get(s, 0)),
            ));
        }
        add(anchor, chart(title, "per second", x_max, all)?);
    }
    Ok(out)
}

fn utc(unix: f64) -> String {
    let secs = unix.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Writes the report of `paths` to `out`; returns (samples, bad lines).
pub fn report(paths: &[PathBuf], out: &Path) -> Result<(usize, usize), Error> {
    let files = files(paths)?;
    let (samples, bad) = load(&files)?;
    if samples.len() < 2 {
        return Err(format!(
            "{} statistics lines in {} file(s): a report needs at least two",
            samples.len(),
            files.len()
        )
        .into());
    }
    let first = &samples[0];
    let last = &samples[samples.len() - 1];
    let peak = |f: &str| samples.iter().map(|s| s.get(f)).fold(0.0f64, f64::max);
    let peak_pct = |f: &str| {
        samples
            .iter()
            .map(|s| 100.0 * s.get(f) / s.get("cache_size").max(1.0))
            .fold(0.0f64, f64::max)
    };
    let restarts = samples
        .windows(2)
        .filter(|w| !continues(&w[0], &w[1]))
        .count();
    let mut html = String::new();
    write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>tidemark statistics report</title><style>\
         body{{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}}\
         table{{border-collapse:collapse;margin:12px 0}}\
         td,th{{border:1px solid #ccc;padding:3px 10px;text-align:right}}\
         th{{background:#f4f4f4}} td:first-child,th:first-child{{text-align:left}}\
         figure{{margin:18px 0}} nav a{{margin-right:10px}}\
         </style></head><body>\n<h1>tidemark statistics report</h1>\n"
    )?;
    writeln!(
        html,
        "<p>{} lines from {} file(s), {} to {} ({:.0} s){}{}.</p>",
        samples.len(),
        files.len(),
        utc(first.time),
        utc(last.time),
        last.time - first.time,
        if restarts > 0 {
            format!("; {restarts} restart(s), where rates break")
        } else {
            String::new()
        },
        if bad > 0 {
            format!("; {bad} line(s) that were not statistics skipped")
        } else {
            String::new()
        }
    )?;
    html.push_str("<table><tr><th>figure</th><th>value</th></tr>\n");
    let rows = [
        (
            "cache used, peak of the samples",
            format!("{:.1} %", peak_pct("cache_bytes_used")),
        ),
        (
            "cache dirty, peak of the samples",
            format!("{:.1} %", peak_pct("cache_bytes_dirty")),
        ),
        (
            "eviction trigger / dirty trigger",
            format!(
                "{:.0} % / {:.0} %",
                100.0 * last.get("cache_eviction_trigger") / last.get("cache_size").max(1.0),
                100.0 * last.get("cache_dirty_trigger") / last.get("cache_size").max(1.0)
            ),
        ),
        (
            "longest wait for cache (ms)",
            format!("{:.1}", peak("max_cache_wait_us") / 1000.0),
        ),
        (
            "longest checkpoint (ms)",
            format!("{:.1}", peak("checkpoint_max_us") / 1000.0),
        ),
        (
            "largest log group (records)",
            format!("{:.0}", peak("log_max_group")),
        ),
        (
            "data file, largest (MiB)",
            format!("{:.1}", peak("file_size") / MIB),
        ),
    ];
    for (k, v) in rows {
        writeln!(html, "<tr><td>{}</td><td>{}</td></tr>", esc(k), esc(&v))?;
    }
    html.push_str("</table>\n<nav>");
    let charts = charts(&samples)?;
    for (anchor, _) in &charts {
        write!(html, "<a href=\"#{anchor}\">{anchor}</a>")?;
    }
    html.push_str("</nav>\n");
    for (anchor, svg) in &charts {
        writeln!(html, "<figure id=\"{anchor}\">{svg}</figure>")?;
    }
    // Every field: gauges by their last and highest level, counters by
    // their average rate over the last process's lines.
    let run_start = samples
        .iter()
        .rposition(|s| s.get("uptime_us") > last.get("uptime_us"))
        .map_or(0, |i| i + 1);
    let base = &samples[run_start];
    let span = (last.time - base.time).max(1e-3);
    html.push_str("<h2 id=\"all\">Every counter</h2>\n<table><tr><th>field</th><th>kind</th><th>last</th><th>highest / average per s</th></tr>\n");
    for (k, v) in &last.fields {
        if k == "time" || k == "interval_s" {
            continue;
        }
        let (kind, extra) = if is_gauge(k) {
            ("level", format!("{:.0}", peak(k)))
        } else {
            (
                "count",
                format!("{:.1}/s", (v - base.get(k)).max(0.0) / span),
            )
        };
        writeln!(
            html,
            "<tr><td>{}</td><td>{kind}</td><td>{v:.0}</td><td>{extra}</td></tr>",
            esc(k)
        )?;
    }
    html.push_str("</table>\n");
    html.push_str("<p>Counters are drawn as rates per second between consecutive lines, gauges as levels. Files:</p><ul>");
    for f in &files {
        write!(html, "<li>{}</li>", esc(&f.display().to_string()))?;
    }
    html.push_str("</ul></body></html>\n");
    std::fs::write(out, html).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((samples.len(), bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_763_771_502.0), "2025-11-22 00:31:42 UTC");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn rates_break_at_restarts() {
        let mk = |time: f64, up: f64, puts: f64| Sample {
            time,
            fields: [("uptime_us", up), ("ops_put", puts)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            tables: BTreeMap::new(),
            collections: BTreeMap::new(),
        };
        let s = vec![
            mk(100.0, 0.0, 0.0),
            mk(110.0, 10e6, 100.0),
            mk(120.0, 20e6, 300.0),
            mk(130.0, 1e6, 5.0),
            mk(140.0, 11e6, 105.0),
        ];
        let runs = rate(&s, 100.0, 1.0, |x| x.get("ops_put"));
        assert_eq!(
            runs,
            vec![vec![(10.0, 10.0), (20.0, 20.0)], vec![(40.0, 10.0)]]
        );
        assert!(is_gauge("cache_bytes_used") && !is_gauge("ops_put"));
    }
}
