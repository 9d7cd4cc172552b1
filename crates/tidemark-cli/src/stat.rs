//! `tidemark stat`: one line per interval about a running database, like
//! mongostat. It reads the database's control socket when the database
//! serves one (`control_socket`), else it follows the statistics log files as
//! their lines arrive. It never opens the database, so it works while
//! another process has it open.

use std::io::{BufRead, Read, Seek, SeekFrom, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::report::{parse_line, Sample};

type Error = Box<dyn std::error::Error>;

/// A compact count: 950, 12.3k, 4.5m.
pub fn human(x: f64) -> String {
    let x = x.max(0.0);
    if x >= 1e9 {
        format!("{:.1}g", x / 1e9)
    } else if x >= 1e6 {
        format!("{:.1}m", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.0}k", x / 1e3)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else if x >= 10.0 || x == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

const COLUMNS: &[(&str, &str)] = &[
    ("get", "ops_get"),
    ("put", "ops_put"),
    ("del", "ops_delete"),
    ("scan", "ops_scan"),
    ("ins", "ops_doc_insert"),
    ("find", "ops_doc_find"),
    ("commit", "log_records"),
];

pub fn header() -> String {
    let mut h = String::from("    time");
    for (name, _) in COLUMNS {
        h.push_str(&format!(" {name:>7}"));
    }
    h.push_str("   used%  dirty%  appevict  groups  fsyncs  ckpt");
    h
}

/// The line for the interval from `a` to `b`.
pub fn row(a: &Sample, b: &Sample) -> String {
    let dt = (b.time - a.time).max(1e-3);
    let restarted = b.get("uptime_us") < a.get("uptime_us");
    let per = |f: &str| {
        if restarted {
            b.get(f) / (b.get("uptime_us") / 1e6).max(1e-3)
        } else {
            (b.get(f) - a.get(f)) / dt
        }
    };
    let secs = b.time as i64;
    let mut l = format!(
        "{:02}:{:02}:{:02}",
        secs.rem_euclid(86_400) / 3600,
        secs.rem_euclid(3600) / 60,
        secs.rem_euclid(60)
    );
    for (_, f) in COLUMNS {
        l.push_str(&format!(" {:>7}", human(per(f))));
    }
    let cache = b.get("cache_size").max(1.0);
    let checkpoints = if restarted {
        b.get("checkpoints")
    } else {
        b.get("checkpoints") - a.get("checkpoints")
    };
    let ckpt = if b.get("checkpoint_running") > 0.0 {
        "run".to_string()
    } else if checkpoints > 0.0 {
        format!("{checkpoints:.0}")
    } else {
        "-".to_string()
    };
    l.push_str(&format!(
        "  {:>6.1}  {:>6.1}  {:>8}  {:>6}  {:>6}  {ckpt:>4}",
        100.0 * b.get("cache_bytes_used") / cache,
        100.0 * b.get("cache_bytes_dirty") / cache,
        human(per("app_thread_evictions")),
        human(per("log_groups")),
        human(per("log_fsyncs")),
    ));
    l
}

fn from_socket(path: &Path) -> Result<Sample, Error> {
    let text = request(path, "stats", Some(Duration::from_secs(5)))?;
    parse_line(text.trim())
        .ok_or_else(|| format!("{}: not a statistics line", path.display()).into())
}

/// Sends one request line to a database's control socket; returns the
/// answer.
pub fn request(path: &Path, line: &str, timeout: Option<Duration>) -> Result<String, Error> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(timeout)?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

/// The newest statistics file in `dir`.
fn newest(dir: &Path) -> Option<PathBuf> {
    crate::report::stats_files_in(dir).ok()?.pop()
}

/// Follows the statistics files of `dir`: the complete lines appended
/// since the last call (a new file when the log rotates).
struct Follow {
    dir: PathBuf,
    file: Option<(PathBuf, u64)>,
}

impl Follow {
    fn new_lines(&mut self) -> Result<Vec<Sample>, Error> {
        let Some(path) = newest(&self.dir) else {
            return Ok(Vec::new());
        };
        let offset = match &self.file {
            Some((p, off)) if *p == path => *off,
            _ => 0,
        };
        let mut f = std::fs::File::open(&path)?;
        f.seek(SeekFrom::Start(offset))?;
        let mut reader = std::io::BufReader::new(f);
        let mut out = Vec::new();
        let mut pos = offset;
        loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line)?;
            if n == 0 || !line.ends_with('\n') {
                break;
            }
            pos += n as u64;
            if let Some(s) = parse_line(line.trim()) {
                out.push(s);
            }
        }
        self.file = Some((path, pos));
        Ok(out)
    }
}

/// Prints a line per interval until `count` lines (or forever).
pub fn run(
    db: &Path,
    stats_dir: Option<&Path>,
    interval: Duration,
    count: Option<u64>,
    out: &mut impl Write,
) -> Result<(), Error> {
    let sock = db.join(tidemark::CONTROL_SOCKET);
    let mut printed = 0u64;
    let mut line = |out: &mut dyn Write, a: &Sample, b: &Sample| -> Result<bool, Error> {
        if printed.is_multiple_of(20) {
            writeln!(out, "{}", header())?;
        }
        writeln!(out, "{}", row(a, b))?;
        out.flush()?;
        printed += 1;
        Ok(count.is_some_and(|c| printed >= c))
    };
    if sock.exists() {
        if let Ok(mut prev) = from_socket(&sock) {
            let mut next = Instant::now() + interval;
            loop {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += interval;
                let cur = from_socket(&sock)
                    .map_err(|e| format!("{}: {e} (did the database close?)", sock.display()))?;
                if line(out, &prev, &cur)? {
                    return Ok(());
                }
                prev = cur;
            }
        }
    }
    // No socket: follow the statistics log.
    let dir = stats_dir.unwrap_or(db).to_path_buf();
    if newest(&dir).is_none() {
        return Err(format!(
            "no control socket ({}) and no statistics log in {}: open the database with \
             control_socket, or keep its statistics log on",
            sock.display(),
            dir.display()
        )
        .into());
    }
    let mut follow = Follow { dir, file: None };
    let mut prev = follow.new_lines()?.pop();
    eprintln!("following the statistics log: a line per logged interval");
    loop {
        for cur in follow.new_lines()? {
            if let Some(p) = &prev {
                if line(out, p, &cur)? {
                    return Ok(());
                }
            }
            prev = Some(cur);
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_numbers() {
        assert_eq!(human(0.0), "0");
        assert_eq!(human(3.25), "3.2");
        assert_eq!(human(950.0), "950");
        assert_eq!(human(1234.0), "1.2k");
        assert_eq!(human(56_789.0), "57k");
        assert_eq!(human(4_500_000.0), "4.5m");
    }
}
