//! One memory budget for every engine, enforced by the kernel: a memory
//! cgroup per benchmark child process.
//!
//! An engine's `cache_size` bounds only the memory the engine manages.
//! An mmap engine (LMDB) has no such option: its cache is the kernel's page
//! cache, which takes whatever memory the machine has free. Engines that
//! read with `pread` also lean on the page cache below their own cache.
//! A memory cgroup charges a process for its heap *and* for the page cache
//! it reads or writes, and reclaims from it at the limit, so a limit on the
//! cgroup is the same budget for all of them, however each one caches.
//!
//! The child joins the group itself, as its first act, before it opens an
//! engine (`--cgroup`); the parent creates the group and removes it after
//! the child exits. Both cgroup versions are handled: v1's `memory`
//! hierarchy (`memory.limit_in_bytes`) and v2's unified one
//! (`memory.max`). Creating a group needs write access to the current
//! cgroup's directory (root, or a delegated subtree).

use std::path::{Path, PathBuf};

use crate::{msg, BoxResult};

/// A memory cgroup created for one child process; removed on drop.
pub struct MemCgroup {
    path: PathBuf,
    v2: bool,
}

/// Where this process's memory cgroup lives, and whether it is v2 (the
/// engine's own lookup, which `Builder::os_cache` uses to find a limit).
fn own_group() -> BoxResult<(PathBuf, bool)> {
    tidemark::os_cache::memory_cgroup()
        .map(|g| (g.dir, g.v2))
        .ok_or_else(|| {
            msg(
                "no memory cgroup controller found (neither a v1 `memory` hierarchy nor v2 \
                 with `memory` in cgroup.controllers); --memory-limit-mb needs one",
            )
        })
}

fn write(path: &Path, what: &str) -> BoxResult<()> {
    std::fs::write(path, what)
        .map_err(|e| msg(&format!("cannot write {what:?} to {}: {e}", path.display())))
}

impl MemCgroup {
    /// A new cgroup, a child of this process's own, holding at most
    /// `limit` bytes (heap and page cache together).
    pub fn create(limit: u64) -> BoxResult<MemCgroup> {
        let (parent, v2) = own_group()?;
        if v2 {
            // A v2 group's children get the memory controller only if the
            // parent hands it down. Fails where processes sit in the
            // parent itself (the "no internal processes" rule) unless it
            // is the root: then the error says so.
            let sub = parent.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&sub)
                .map(|s| s.split_whitespace().any(|c| c == "memory"))
                .unwrap_or(false);
            if !on {
                write(&sub, "+memory").map_err(|e| {
                    msg(&format!(
                        "{e} (cgroup v2 hands the memory controller to child groups only \
                         from a group with no processes of its own: run from a delegated \
                         subtree, e.g. `systemd-run --user --scope -p Delegate=yes`, or as root)"
                    ))
                })?;
            }
        }
        let path = parent.join(format!(
            "tidemark-bench-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir(&path)
            .map_err(|e| msg(&format!("cannot create cgroup {}: {e}", path.display())))?;
        let g = MemCgroup { path, v2 };
        let file = tidemark::os_cache::limit_name(v2);
        write(&g.path.join(file), &limit.to_string())?;
        if v2 {
            // Without swap the limit is the whole budget, as with v1 here.
            let _ = std::fs::write(g.path.join("memory.swap.max"), "0");
        }
        Ok(g)
    }

    /// The directory a child passes to [`join`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The most the group held at once, bytes (v1 `memory.max_usage_in_bytes`,
    /// v2 `memory.peak`, which kernels before 5.19 lack).
    pub fn peak(&self) -> Option<u64> {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(self.path.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        // Its process has exited; page cache still charged to it moves to
        // the parent. Nothing to report if it is already gone.
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// What a child run by [`output_within`] did.
pub struct ChildRun {
    pub output: std::process::Output,
    /// Whether it was under a limit and died of SIGKILL: most likely the
    /// kernel's out-of-memory kill at the group's limit.
    pub killed_at_limit: bool,
}

/// Runs `cmd`, a child of this binary whose subcommand takes `--cgroup`,
/// in a fresh group of `limit_mb` MB if one is given (`--cgroup` is
/// appended), and reports the group's peak on stderr under `label`.
pub fn output_within(
    cmd: &mut std::process::Command,
    limit_mb: Option<u64>,
    label: &str,
) -> BoxResult<ChildRun> {
    let group = limit_mb.map(|mb| MemCgroup::create(mb << 20)).transpose()?;
    if let Some(g) = &group {
        cmd.arg("--cgroup").arg(g.path());
    }
    let output = cmd.output()?;
    if let Some(g) = &group {
        match g.peak() {
            Some(b) => eprintln!(
                "  {label}: memory cgroup peak {:.1} MB",
                b as f64 / 1048576.0
            ),
            None => eprintln!("  {label}: memory cgroup peak not reported by this kernel"),
        }
    }
    let killed_at_limit = group.is_some() && {
        use std::os::unix::process::ExitStatusExt;
        output.status.signal() == Some(9)
    };
    Ok(ChildRun {
        output,
        killed_at_limit,
    })
}

impl ChildRun {
    /// The child's result: `Ok` when it exited successfully, else what
    /// went wrong with `engine`, for the report.
    pub fn status(&self, engine: &str) -> Result<(), String> {
        if self.output.status.success() {
            return Ok(());
        }
        Err(format!(
            "{engine} failed ({}{}): {}",
            self.output.status,
            if self.killed_at_limit {
                "; killed, most likely by the kernel at the memory cgroup's limit"
            } else {
                ""
            },
            String::from_utf8_lossy(&self.output.stderr).trim()
        ))
    }
}

/// A child's result in a run of rounds. Under a memory limit a failed
/// child is a result (an engine killed at the limit): it is reported,
/// recorded in `failures`, and `None` returned. Without a limit a failure
/// stops the run.
pub fn tolerate<T>(
    result: Result<T, String>,
    limited: bool,
    engine: &str,
    round: usize,
    failures: &mut Vec<serde_json::Value>,
) -> BoxResult<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(why) if limited => {
            eprintln!("  {why}");
            failures.push(serde_json::json!({"engine": engine, "round": round, "error": why}));
            Ok(None)
        }
        Err(why) => Err(msg(&why)),
    }
}

/// Prints the failures [`tolerate`] recorded, one line each.
pub fn print_failures(failures: &[serde_json::Value]) {
    for f in failures {
        println!(
            "round {}: {}",
            f["round"],
            f["error"].as_str().unwrap_or("?")
        );
    }
}

/// Moves the calling process into the cgroup at `path`.
pub fn join(path: &Path) -> BoxResult<()> {
    write(&path.join("cgroup.procs"), &std::process::id().to_string())
}

/// A number no other group of this process has.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
