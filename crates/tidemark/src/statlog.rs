//! The statistics log: every interval, one JSON line holding a timestamp
//! and every counter of [`crate::Stats`], appended to rotating files
//! `stats.NNNNNN.jsonl` in the database directory (or a directory of the
//! user's). Its own thread writes it and reads only counters, so it never
//! waits for an operation nor makes one wait; a line it cannot write is
//! counted and the next interval tries again. `tidemark report` draws these
//! files and `tidemark stat` follows them.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::io::{FileIo, FileSystem};
use crate::stats::{NamedStats, Stats};

/// Names of statistics log files start with this.
pub const STATS_FILE_PREFIX: &str = "stats.";
/// ... and end with this.
pub const STATS_FILE_SUFFIX: &str = ".jsonl";

/// Options of the statistics log (see [`crate::Builder::statistics_log`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatisticsLog {
    /// Time between lines.
    pub interval: Duration,
    /// Directory of the files; `None`: the database directory.
    pub path: Option<PathBuf>,
    /// A file that reaches this size is closed and the next one begun.
    pub file_size: u64,
    /// Files kept; the oldest beyond this are removed.
    pub files: usize,
}

impl Default for StatisticsLog {
    /// A line every 10 s, in files of up to 16 MiB, the newest 8 kept
    /// (at about 3 KiB a line: over a month of history).
    fn default() -> Self {
        StatisticsLog {
            interval: Duration::from_secs(10),
            path: None,
            file_size: 16 << 20,
            files: 8,
        }
    }
}

fn escape(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn named(list: &[NamedStats], out: &mut String) {
    out.push('{');
    for (i, n) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape(&n.name, out);
        out.push_str(&format!(
            ":{{\"reads\":{},\"writes\":{},\"scans\":{}}}",
            n.reads, n.writes, n.scans
        ));
    }
    out.push('}');
}

/// One line of the log: `time` (Unix seconds), `interval_s`, every field
/// of `s`, and the per-table and per-collection counts.
pub fn line(s: &Stats, time: SystemTime, interval: Duration) -> String {
    let t = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = format!(
        "{{\"time\":{}.{:03},\"interval_s\":{}",
        t.as_secs(),
        t.subsec_millis(),
        interval.as_secs_f64()
    );
    for (k, v) in s.fields() {
        out.push_str(&format!(",\"{k}\":{v}"));
    }
    out.push_str(",\"tables\":");
    named(&s.tables, &mut out);
    out.push_str(",\"collections\":");
    named(&s.collections, &mut out);
    out.push_str("}\n");
    out
}

/// Sequence numbers of the log files in `dir`, ascending.
fn sequence(fs: &dyn FileSystem, dir: &Path) -> io::Result<Vec<u64>> {
    let mut seqs: Vec<u64> = fs
        .list(dir)?
        .iter()
        .filter_map(|n| {
            n.strip_prefix(STATS_FILE_PREFIX)?
                .strip_suffix(STATS_FILE_SUFFIX)?
                .parse()
                .ok()
        })
        .collect();
    seqs.sort_unstable();
    Ok(seqs)
}

fn file_name(seq: u64) -> String {
    format!("{STATS_FILE_PREFIX}{seq:06}{STATS_FILE_SUFFIX}")
}

/// Appends lines to the current file, rotating by size.
pub(crate) struct Writer {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    cfg: StatisticsLog,
    current: Option<(Arc<dyn FileIo>, u64, u64)>,
}

impl Writer {
    pub(crate) fn new(fs: Arc<dyn FileSystem>, db_dir: &Path, cfg: StatisticsLog) -> Writer {
        let dir = cfg.path.clone().unwrap_or_else(|| db_dir.to_path_buf());
        Writer {
            fs,
            dir,
            cfg,
            current: None,
        }
    }

    /// Appends `line`; opens the newest file first, or the next one when
    /// the line would not fit in it.
    pub(crate) fn append(&mut self, line: &str) -> io::Result<()> {
        let len = line.len() as u64;
        let full = self
            .current
            .as_ref()
            .is_some_and(|(_, size, _)| *size > 0 && size + len > self.cfg.file_size);
        if self.current.is_none() || full {
            self.fs.create_dir_all(&self.dir)?;
            let seqs = sequence(&*self.fs, &self.dir)?;
            let seq = match (&self.current, seqs.last()) {
                (Some((_, _, cur)), Some(&last)) => last.max(*cur) + 1,
                (Some((_, _, cur)), None) => cur + 1,
                // A new process goes on with the newest file.
                (None, Some(&last)) => last,
                (None, None) => 1,
            };
            let f = self.fs.open(&self.dir.join(file_name(seq)), true)?;
            let size = f.len()?;
            self.current = Some((f, size, seq));
            // Keep the newest `files`, this one included.
            let keep = self.cfg.files.max(1);
            let mut all = sequence(&*self.fs, &self.dir)?;
            all.retain(|&s| s != seq);
            all.push(seq);
            all.sort_unstable();
            let drop = all.len().saturating_sub(keep);
            for old in &all[..drop] {
                let _ = self.fs.remove(&self.dir.join(file_name(*old)));
            }
            if size > 0 && size + len > self.cfg.file_size {
                return self.append(line);
            }
        }
        let Some((f, size, _)) = self.current.as_mut() else {
            return Err(io::Error::other("no statistics file open"));
        };
        f.write_all_at(line.as_bytes(), *size)?;
        *size += len;
        Ok(())
    }
}

/// Name of the control socket in the database directory.
pub const CONTROL_SOCKET: &str = "control.sock";

/// Answers one request of the control socket: `stats` (or nothing) gets a
/// statistics line; `backup DEST` runs [`crate::Database::backup`] into DEST
/// and gets `{"ok":true,...}` or `{"ok":false,"error":...}`.
fn answer(engine: &crate::engine::Engine, request: &str) -> String {
    let request = request.trim();
    if let Some(dest) = request.strip_prefix("backup ") {
        let mut out = String::new();
        match crate::backup::backup(engine, Path::new(dest)) {
            Ok(b) => out.push_str(&format!(
                "{{\"ok\":true,\"data_bytes\":{},\"ring_bytes\":{},\"log_bytes\":{},\"duration_us\":{}}}\n",
                b.data_bytes, b.ring_bytes, b.log_bytes, b.duration_us
            )),
            Err(e) => {
                out.push_str("{\"ok\":false,\"error\":");
                escape(&e.to_string(), &mut out);
                out.push_str("}\n");
            }
        }
        return out;
    }
    if request.is_empty() || request == "stats" {
        return line(
            &crate::stats::collect(engine),
            SystemTime::now(),
            Duration::ZERO,
        );
    }
    let mut out = String::from("{\"ok\":false,\"error\":");
    escape(
        &format!("unknown request {request:?}: expected stats or backup DEST"),
        &mut out,
    );
    out.push_str("}\n");
    out
}

/// The control socket (see [`crate::Builder::control_socket`]): a Unix
/// socket in the database directory, readable and writable by its owner
/// only. Each connection sends one request line (see [`answer`]), gets one
/// answer and is closed; `tidemark stat` asks for statistics once a second
/// and `tidemark backup` for a backup, while another process has the
/// database open. The listener does not block: between connections its
/// thread waits on a condition variable for 50 ms or until close wakes it,
/// so close never depends on the socket file.
pub(crate) struct Socket {
    path: PathBuf,
    stop: Arc<(parking_lot::Mutex<bool>, parking_lot::Condvar)>,
}

impl Socket {
    /// Binds the socket and starts the thread serving it.
    pub(crate) fn start(
        dir: &Path,
        engine: Arc<crate::engine::Engine>,
    ) -> io::Result<(Socket, std::thread::JoinHandle<()>)> {
        use std::io::{BufRead, Write};
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::net::UnixListener;
        let path = dir.join(CONTROL_SOCKET);
        // The directory lock is held: a socket file left here belongs to
        // a process that is gone.
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let stop = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tidemark-control".into())
            .spawn(move || loop {
                match listener.accept() {
                    Ok((c, _)) => {
                        // A client that goes away or never writes is its
                        // own business; it cannot hold the thread long.
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut request = String::new();
                        let mut reader = std::io::BufReader::new(&c);
                        let _ = reader.read_line(&mut request);
                        let reply = answer(&engine, &request);
                        let _ = (&c).write_all(reply.as_bytes());
                        if *s.0.lock() {
                            return;
                        }
                    }
                    Err(_) => {
                        let mut stopped = s.0.lock();
                        if !*stopped {
                            s.1.wait_for(&mut stopped, Duration::from_millis(50));
                        }
                        if *stopped {
                            return;
                        }
                    }
                }
            })?;
        Ok((Socket { path, stop }, handle))
    }

    /// Stops the serving thread (it is joined with the others) and removes
    /// the socket file.
    pub(crate) fn stop(&self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::OsFileSystem;

    #[test]
    fn lines_are_json_with_every_field_and_files_rotate() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Stats {
            ops_put: 7,
            ..Default::default()
        };
        s.tables.push(NamedStats {
            name: "we\"ird\\name".into(),
            reads: 1,
            writes: 2,
            scans: 3,
        });
        let l = line(
            &s,
            UNIX_EPOCH + Duration::from_millis(1_500),
            Duration::from_secs(10),
        );
        assert!(l.starts_with("{\"time\":1.500,\"interval_s\":10,"), "{l}");
        assert!(l.ends_with("}\n"));
        for (k, _) in s.fields() {
            assert!(l.contains(&format!("\"{k}\":")), "{k} missing");
        }
        assert!(l.contains("\"ops_put\":7"));
        assert!(
            l.contains(r#""we\"ird\\name":{"reads":1,"writes":2,"scans":3}"#),
            "{l}"
        );
        let cfg = StatisticsLog {
            file_size: 3 * l.len() as u64,
            files: 2,
            ..Default::default()
        };
        let mut w = Writer::new(Arc::new(OsFileSystem), dir.path(), cfg.clone());
        for _ in 0..10 {
            w.append(&l).unwrap();
        }
        // 10 lines, 3 per file: files 1..=4, the newest two kept.
        let names = sequence(&OsFileSystem, dir.path()).unwrap();
        assert_eq!(names, vec![3, 4]);
        let third = std::fs::read_to_string(dir.path().join(file_name(3))).unwrap();
        assert_eq!(third.lines().count(), 3);
        // A new writer (a new process) appends to the newest file.
        let mut w = Writer::new(Arc::new(OsFileSystem), dir.path(), cfg);
        w.append(&l).unwrap();
        let fourth = std::fs::read_to_string(dir.path().join(file_name(4))).unwrap();
        assert_eq!(fourth.lines().count(), 2);
    }
}
