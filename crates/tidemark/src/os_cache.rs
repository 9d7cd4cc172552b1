//! The operating system's page cache under a memory limit.
//!
//! Pages evicted from the buffer pool are written to the data file, and
//! pages missed are read from it, through the kernel's page cache. With
//! memory to spare that cache is a second level below the pool: a page
//! evicted and soon wanted again comes back as a copy, not a disk read.
//!
//! Inside a memory cgroup (a container) the page cache a process fills is
//! charged to it, beside its heap. Once the data file outgrows what the
//! limit leaves, every new page-cache page must first be reclaimed from
//! the group, and the kernel throttles the charging thread while the
//! pages it would reclaim are still being written back (100 ms sleeps in
//! `mm_vmscan_throttled`, reason `VMSCAN_THROTTLE_WRITEBACK`). An insert
//! that evicts a page then stalls for 100 ms: BENCHMARKS.md, versus
//! cache-pressure, "What the 100 ms inserts under the limit wait for".
//!
//! So when the limit leaves little room, the data file is read and written
//! with Linux's `RWF_DONTCACHE` (6.14 and later): buffered I/O whose pages
//! leave the cache as soon as the read is done or the write has reached
//! the device. The cache then holds little of the file and little of it
//! dirty, and charging a page seldom waits on write-back. Without a limit
//! this would make every miss a disk read, so the default, [`OsCache::Auto`],
//! only does it when a limit is found and the file is large against it.

use std::path::{Path, PathBuf};

/// Whether the data file's pages stay in the operating system's page cache
/// after tidemark reads or writes them ([`crate::Builder::os_cache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OsCache {
    /// Drop them once the process has a memory limit (a cgroup's, found at
    /// open) and the data file is larger than half of what the limit
    /// leaves beside `cache_size`; keep them otherwise. Checked again each
    /// time the file grows or shrinks.
    #[default]
    Auto,
    /// Keep them: the kernel caches the file as it does any other.
    Keep,
    /// Drop them (where the kernel can: Linux 6.14 and later; elsewhere
    /// the same as [`OsCache::Keep`]).
    DropBehind,
}

impl std::str::FromStr for OsCache {
    type Err = crate::Error;
    /// `auto`, `keep` or `drop` (any case).
    fn from_str(s: &str) -> crate::Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(OsCache::Auto),
            "keep" => Ok(OsCache::Keep),
            "drop" => Ok(OsCache::DropBehind),
            _ => Err(crate::Error::InvalidOption(format!(
                "os_cache {s:?}: expected auto, keep or drop"
            ))),
        }
    }
}

impl OsCache {
    /// Whether pages should be dropped for a data file of `file_len`
    /// bytes, a buffer pool of `cache_size` bytes and the process's memory
    /// limit `limit` (`None`: none).
    pub(crate) fn drops(self, limit: Option<u64>, cache_size: u64, file_len: u64) -> bool {
        match self {
            OsCache::Keep => false,
            OsCache::DropBehind => true,
            OsCache::Auto => limit.is_some_and(|l| {
                let room = l.saturating_sub(cache_size);
                file_len.saturating_mul(2) > room
            }),
        }
    }
}

/// This process's memory cgroup: its directory, and whether it is in the
/// v2 (unified) hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCgroup {
    /// The cgroup's directory under `/sys/fs/cgroup`.
    pub dir: PathBuf,
    /// The v2 hierarchy (`memory.max`) rather than v1's `memory`
    /// controller (`memory.limit_in_bytes`).
    pub v2: bool,
    /// The hierarchy's root directory (where the walk up to parents stops).
    pub root: PathBuf,
}

/// The name of the file that holds a memory cgroup's limit, in the v2
/// hierarchy (`v2`) or in v1's `memory` controller.
pub fn limit_name(v2: bool) -> &'static str {
    if v2 {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    }
}

/// This process's cgroup paths in `/proc/self/cgroup` text: in the v1
/// `memory` hierarchy ("N:memory:/path", the controller possibly sharing
/// its line with others) and in the v2 unified one ("0::/path").
fn own_paths(map: &str) -> (Option<&str>, Option<&str>) {
    let mut v1 = None;
    let mut v2 = None;
    for line in map.lines() {
        let mut f = line.splitn(3, ':');
        if let (Some(_), Some(ctls), Some(rel)) = (f.next(), f.next(), f.next()) {
            if ctls.is_empty() {
                v2 = Some(rel);
            } else if ctls.split(',').any(|c| c == "memory") {
                v1 = Some(rel);
            }
        }
    }
    (v1, v2)
}

fn join_rel(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

/// Finds this process's memory cgroup (`/proc/self/cgroup`, then the
/// hierarchy mounted under `/sys/fs/cgroup`); `None` where there is none
/// (not Linux, no memory controller).
pub fn memory_cgroup() -> Option<MemoryCgroup> {
    let map = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let (v1, v2) = own_paths(&map);
    if let Some(rel) = v1 {
        let root = Path::new("/sys/fs/cgroup/memory");
        if root.join("memory.limit_in_bytes").exists() {
            return Some(MemoryCgroup {
                dir: join_rel(root, rel),
                v2: false,
                root: root.to_path_buf(),
            });
        }
    }
    let rel = v2?;
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(Path::new)
        .find(|root| {
            std::fs::read_to_string(root.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        })
        .map(|root| MemoryCgroup {
            dir: join_rel(root, rel),
            v2: true,
            root: root.to_path_buf(),
        })
}

/// A limit as the kernel prints it: bytes, or `max` (v2) or a value near
/// 2^63 (v1) for none.
fn parse_limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&l| l < 1 << 62)
}

/// The memory limit this process runs under: the smallest limit of its
/// memory cgroup and the cgroup's ancestors (each bounds it), in bytes;
/// `None` if there is none.
pub fn memory_limit() -> Option<u64> {
    let g = memory_cgroup()?;
    let name = limit_name(g.v2);
    let mut dir = g.dir.as_path();
    let mut least: Option<u64> = None;
    loop {
        if let Some(l) = std::fs::read_to_string(dir.join(name))
            .ok()
            .and_then(|t| parse_limit(&t))
        {
            least = Some(least.map_or(l, |m| m.min(l)));
        }
        if dir == g.root {
            return least;
        }
        match dir.parent() {
            Some(p) if p.starts_with(&g.root) => dir = p,
            _ => return least,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_memory_hierarchy_in_either_version() {
        let v1 = "9:name=systemd:/\n4:memory:/a/b\n3:cpu,cpuacct:/\n0::/\n";
        assert_eq!(own_paths(v1), (Some("/a/b"), Some("/")));
        let shared = "5:cpu,memory:/x\n";
        assert_eq!(own_paths(shared), (Some("/x"), None));
        let v2 = "0::/user.slice/u.scope\n";
        assert_eq!(own_paths(v2), (None, Some("/user.slice/u.scope")));
        assert_eq!(own_paths(""), (None, None));
        assert_eq!(
            join_rel(Path::new("/sys/fs/cgroup/memory"), "/a/b"),
            PathBuf::from("/sys/fs/cgroup/memory/a/b")
        );
    }

    #[test]
    fn policies_by_name() {
        assert_eq!("auto".parse::<OsCache>().unwrap(), OsCache::Auto);
        assert_eq!("Keep".parse::<OsCache>().unwrap(), OsCache::Keep);
        assert_eq!("DROP".parse::<OsCache>().unwrap(), OsCache::DropBehind);
        assert!(matches!(
            "sometimes".parse::<OsCache>(),
            Err(crate::Error::InvalidOption(_))
        ));
    }

    #[test]
    fn limits_as_the_kernel_prints_them() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("67108864\n"), Some(64 << 20));
        // v1's "no limit": the largest page-aligned signed value.
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("garbage"), None);
    }

    #[test]
    fn auto_drops_only_under_a_limit_the_file_outgrows() {
        let mb = 1u64 << 20;
        let auto = OsCache::Auto;
        assert!(!auto.drops(None, 10 * mb, 100_000 * mb), "no limit");
        // 64 MB limit, 10 MB pool: 54 MB of room, dropped past 27 MB.
        assert!(!auto.drops(Some(64 * mb), 10 * mb, 27 * mb));
        assert!(auto.drops(Some(64 * mb), 10 * mb, 28 * mb));
        // A pool as large as the limit leaves no room at all.
        assert!(auto.drops(Some(64 * mb), 64 * mb, 1));
        assert!(!auto.drops(Some(64 << 30), 256 * mb, 1 << 30));
        assert!(!OsCache::Keep.drops(Some(1), 10 * mb, 1 << 40));
        assert!(OsCache::DropBehind.drops(None, 10 * mb, 0));
    }

    #[test]
    fn the_limit_lookup_does_not_fail_here() {
        // Whatever this machine has: a group or none, a limit or none. A
        // limit found is a real one (under 2^62 bytes, over nothing).
        if let Some(l) = memory_limit() {
            assert!(l > 0 && l < 1 << 62);
        }
        if let Some(g) = memory_cgroup() {
            assert!(g.dir.starts_with(&g.root));
        }
    }
}
