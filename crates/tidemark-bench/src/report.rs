//! Output shared by every workload: the machine, a human table, and one
//! JSON object with a `targets` array.

use serde_json::{json, Value};

/// One target: what was measured against what it must be.
pub struct Target {
    pub name: String,
    pub measured: f64,
    pub target: String,
    pub holds: bool,
}

impl Target {
    pub fn at_least(name: &str, measured: f64, min: f64) -> Self {
        Target {
            name: name.into(),
            measured,
            target: format!(">= {min}"),
            holds: measured >= min,
        }
    }
    pub fn below(name: &str, measured: f64, max: f64) -> Self {
        Target {
            name: name.into(),
            measured,
            target: format!("< {max}"),
            holds: measured < max,
        }
    }
    pub fn at_most(name: &str, measured: f64, max: f64) -> Self {
        Target {
            name: name.into(),
            measured,
            target: format!("<= {max}"),
            holds: measured <= max,
        }
    }
}

/// Cores, memory and the file system the benchmark ran on.
pub fn machine(dir: &std::path::Path) -> Value {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let fs = filesystem_of(dir).unwrap_or_else(|| "unknown".into());
    json!({
        "cores": cores,
        "memory_gib": (mem_kb as f64 / 1048576.0 * 10.0).round() / 10.0,
        "filesystem": fs,
        "damon_pageout": damon_pageout(std::path::Path::new(DAMON_ADMIN)),
        "free_page_reporting": free_page_reporting(std::path::Path::new(VIRTIO_DEVICES)),
    })
}

const DAMON_ADMIN: &str = "/sys/kernel/mm/damon/admin/kdamonds";
const VIRTIO_DEVICES: &str = "/sys/bus/virtio/devices";

/// Whether a DAMON worker under `admin` (the kernel's
/// `/sys/kernel/mm/damon/admin/kdamonds`) is on with a `pageout` scheme:
/// the kernel then reclaims memory it saw idle for a while by itself,
/// without memory pressure. A host may set this up in its guests: the page
/// cache of a file left idle is then dropped (and a write into a dropped
/// page that does not cover it whole reads it from the disk first).
pub fn damon_pageout(admin: &std::path::Path) -> bool {
    entries(admin).any(|worker| {
        read_trimmed(&worker.join("state")) == "on"
            && entries(&worker.join("contexts")).any(|context| {
                entries(&context.join("schemes"))
                    .any(|scheme| read_trimmed(&scheme.join("action")) == "pageout")
            })
    })
}

/// The paths in directory `dir`; none if it cannot be read.
fn entries(dir: &std::path::Path) -> impl Iterator<Item = std::path::PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
}

/// The text of a small sysfs file, trimmed; empty if it cannot be read.
fn read_trimmed(path: &std::path::Path) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

/// Whether a virtio balloon under `devices` (`/sys/bus/virtio/devices`)
/// offers free page reporting (feature bit 5): the guest hands the host
/// memory it has freed, and the next use of that memory costs a fault in
/// the host before the guest's own.
pub fn free_page_reporting(devices: &std::path::Path) -> bool {
    const BALLOON: &str = "0x0005";
    const REPORTING_BIT: usize = 5;
    entries(devices).any(|d| {
        read_trimmed(&d.join("device")) == BALLOON
            && read_trimmed(&d.join("features"))
                .as_bytes()
                .get(REPORTING_BIT)
                == Some(&b'1')
    })
}

/// Pages the kernel has handed out since boot (the sum of `/proc/vmstat`'s
/// `pgalloc_*`): read around a window, what it took of memory not in use
/// before (new page-cache pages, new heap), in 4 KiB pages. `None` where
/// the file is missing.
pub fn pages_allocated() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    Some(pgalloc_sum(&text))
}

fn pgalloc_sum(vmstat: &str) -> u64 {
    vmstat
        .lines()
        .filter_map(|l| l.strip_prefix("pgalloc_"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

fn filesystem_of(dir: &std::path::Path) -> Option<String> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    let mut best: Option<(usize, String)> = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 3
            && dir.starts_with(f[1])
            && best.as_ref().is_none_or(|(n, _)| f[1].len() > *n)
        {
            best = Some((f[1].len(), format!("{} on {}", f[2], f[0])));
        }
    }
    best.map(|b| b.1)
}

/// Prints the verdict table, or the JSON object when `json`.
pub fn finish(
    json_out: bool,
    workload: &str,
    machine: Value,
    mut figures: Value,
    targets: &[Target],
) -> bool {
    let all = targets.iter().all(|t| t.holds);
    if json_out {
        figures["workload"] = json!(workload);
        figures["machine"] = machine;
        figures["targets"] = targets.iter().map(|t| json!({"name": t.name, "measured": t.measured, "target": t.target, "holds": t.holds})).collect();
        println!("{figures}");
    } else {
        println!("machine: {machine}");
        println!(
            "{:<44} {:>14} {:>12}  holds",
            "target", "measured", "target"
        );
        for t in targets {
            println!(
                "{:<44} {:>14.3} {:>12}  {}",
                t.name,
                t.measured,
                t.target,
                if t.holds { "yes" } else { "NO" }
            );
        }
    }
    all
}

/// Percentile (0..=100) of unsorted samples.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)]
}

pub fn median(v: &mut [f64]) -> f64 {
    percentile(v, 50.0)
}

/// The machine's CPU time so far, from the first line of `/proc/stat`:
/// all of it, and the part a hypervisor ran something else on a virtual
/// CPU that had work ("steal"), in the kernel's ticks. `None` where the
/// file is missing or has no steal column (not Linux, or an old kernel).
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice];
    // guest time is already counted in user and nice.
    let total = fields.iter().take(8).sum();
    Some((total, *fields.get(7)?))
}

/// Steal as a percentage of the CPU time between two [`cpu_ticks`]
/// readings; `None` if either is missing or no time passed.
pub fn steal_pct(before: Option<(u64, u64)>, after: Option<(u64, u64)>) -> Option<f64> {
    let ((t0, s0), (t1, s1)) = (before?, after?);
    let total = t1.checked_sub(t0).filter(|&t| t > 0)?;
    Some(100.0 * s1.saturating_sub(s0) as f64 / total as f64)
}

/// A counter of this process's `/proc/self/io` (`read_bytes`,
/// `write_bytes`, ...) parsed from `text`; `None` if it is not there.
pub fn proc_io_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// Bytes this process has had fetched from the storage device so far
/// (`read_bytes` of `/proc/self/io`: reads that missed the operating
/// system's page cache); `None` where the file is missing.
pub fn device_read_bytes() -> Option<u64> {
    proc_io_field(
        &std::fs::read_to_string("/proc/self/io").ok()?,
        "read_bytes",
    )
}

/// A workload's per-second rates split in two by a flag per second
/// (`None`: the second is left out), named `names.0` for `false` and
/// `names.1` for `true`: for each side, how many seconds, their median
/// and lowest rate; the lowest `false` second over the median of all
/// seconds (`median_all`); and the `true` side's median over the `false`
/// side's. With names `a` and `b` the keys are `a_seconds`, `b_seconds`,
/// `a_median_window`, `a_min_window`, `b_median_window`, `b_min_window`,
/// `a_min_over_median` and `b_median_over_a_median`.
pub fn split(
    windows: &[f64],
    flags: &[Option<bool>],
    median_all: f64,
    names: (&str, &str),
) -> Value {
    let pick = |want: bool| -> Vec<f64> {
        windows
            .iter()
            .zip(flags)
            .filter(|(_, f)| **f == Some(want))
            .map(|(w, _)| *w)
            .collect()
    };
    let stats = |mut v: Vec<f64>| {
        let n = v.len();
        let med = (n > 0).then(|| median(&mut v));
        let min = v.iter().copied().reduce(f64::min);
        (n, med, min)
    };
    let (na, a_med, a_min) = stats(pick(false));
    let (nb, b_med, b_min) = stats(pick(true));
    let (a, b) = names;
    let mut v = serde_json::Map::new();
    v.insert(format!("{a}_seconds"), na.into());
    v.insert(format!("{b}_seconds"), nb.into());
    v.insert(format!("{a}_median_window"), a_med.into());
    v.insert(format!("{a}_min_window"), a_min.into());
    v.insert(format!("{b}_median_window"), b_med.into());
    v.insert(format!("{b}_min_window"), b_min.into());
    v.insert(
        format!("{a}_min_over_median"),
        a_min
            .filter(|_| median_all > 0.0)
            .map(|m| m / median_all)
            .into(),
    );
    v.insert(
        format!("{b}_median_over_{a}_median"),
        b_med.zip(a_med).map(|(b, a)| b / a).into(),
    );
    Value::Object(v)
}

/// For each second, the worst of `worst_ms` split by whether a device
/// read was counted in that second or the next (an insert that began in
/// second `s` and waited for a read may see it counted in `s + 1`):
/// `(with reads, without)`, `None` where no second fell on that side.
/// `reads` holds each second's bytes read (`None`: not known, counted as
/// neither).
pub fn worst_by_reads(worst_ms: &[f64], reads: &[Option<u64>]) -> (Option<f64>, Option<f64>) {
    let (mut with, mut without): (Option<f64>, Option<f64>) = (None, None);
    for (s, &w) in worst_ms.iter().enumerate() {
        // The next second's count; past the last second, nothing was read.
        let next = reads.get(s + 1).copied().unwrap_or(Some(0));
        let cur = reads.get(s).copied().flatten();
        let side = if cur.is_some_and(|b| b > 0) || next.is_some_and(|b| b > 0) {
            &mut with
        } else if cur == Some(0) && next == Some(0) {
            &mut without
        } else {
            continue;
        };
        *side = Some(side.map_or(w, |x| x.max(w)));
    }
    (with, without)
}

/// `getrusage(who)` (`libc::RUSAGE_SELF` or `libc::RUSAGE_THREAD`);
/// `None` if the call fails.
pub fn rusage(who: libc::c_int) -> Option<libc::rusage> {
    // SAFETY: rusage is a plain C struct of integers, for which all-zero
    // bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; both `who` values callers
    // pass are valid on Linux, the only system the benchmarks build for.
    (unsafe { libc::getrusage(who, &mut ru) } == 0).then_some(ru)
}

/// The calling thread's minor page faults and involuntary context
/// switches (switched out while it could still run) so far; `None` if
/// `getrusage` fails.
pub fn thread_faults_and_preemptions() -> Option<(u64, u64)> {
    rusage(libc::RUSAGE_THREAD).map(|ru| (ru.ru_minflt as u64, ru.ru_nivcsw as u64))
}

/// What one thread met over several windows: operations, a counter of
/// the engine's read around each, and [`thread_faults_and_preemptions`].
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowCounts {
    pub ops: u64,
    pub engine: u64,
    pub faults: u64,
    pub preemptions: u64,
}

impl WindowCounts {
    /// Adds a window of `ops` operations between two readings of
    /// `(engine counter, thread_faults_and_preemptions())`.
    pub fn add(
        &mut self,
        ops: u64,
        before: (u64, Option<(u64, u64)>),
        after: (u64, Option<(u64, u64)>),
    ) {
        self.ops += ops;
        self.engine += after.0.saturating_sub(before.0);
        if let (Some((f0, p0)), Some((f1, p1))) = (before.1, after.1) {
            self.faults += f1.saturating_sub(f0);
            self.preemptions += p1.saturating_sub(p0);
        }
    }

    /// `n` per 1,000 operations.
    pub fn per_k(&self, n: u64) -> f64 {
        1000.0 * n as f64 / self.ops.max(1) as f64
    }
}

/// CPU time and steal summed over several windows (each a pair of
/// [`cpu_ticks`] readings), for one steal figure over all of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Steal {
    total: u64,
    stolen: u64,
}

impl Steal {
    /// Adds the window from `before` to `after`; a missing reading adds
    /// nothing.
    pub fn add(&mut self, before: Option<(u64, u64)>, after: Option<(u64, u64)>) {
        if let (Some((t0, s0)), Some((t1, s1))) = (before, after) {
            self.total += t1.saturating_sub(t0);
            self.stolen += s1.saturating_sub(s0);
        }
    }

    /// Steal as a percentage of the windows' CPU time; `None` if none was
    /// added.
    pub fn pct(&self) -> Option<f64> {
        steal_pct(Some((0, 0)), Some((self.total, self.stolen)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split counts each side's seconds and their rates, and
    /// leaves out unsampled seconds.
    #[test]
    fn split_separates_near_and_far_rates() {
        let w = [100.0, 90.0, 50.0, 60.0, 10.0];
        let f = [Some(false), Some(false), Some(true), Some(true), None];
        let v = split(&w, &f, 80.0, ("near", "far"));
        assert_eq!(v["near_seconds"], 2);
        assert_eq!(v["far_seconds"], 2);
        assert_eq!(v["near_min_window"], 90.0);
        // The median of an even count is the upper middle value.
        assert_eq!(v["far_median_window"], 60.0);
        assert_eq!(v["near_min_over_median"], 90.0 / 80.0);
        assert_eq!(v["far_median_over_near_median"], 60.0 / 100.0);
    }

    #[test]
    fn pages_allocated_sums_every_zone() {
        let text = "nr_free_pages 10\npgalloc_dma 3\npgalloc_dma32 40\npgalloc_normal 500\npgalloc_movable 0\npgfree 7\n";
        assert_eq!(pgalloc_sum(text), 543);
        assert_eq!(pgalloc_sum("pgfree 9\n"), 0);
    }

    #[test]
    fn damon_pageout_needs_a_worker_on_with_a_pageout_scheme() {
        let d = tempfile::tempdir().unwrap();
        let admin = d.path().join("kdamonds");
        assert!(!damon_pageout(&admin), "no tree: no pageout");
        let scheme = admin.join("0/contexts/0/schemes/0");
        std::fs::create_dir_all(&scheme).unwrap();
        std::fs::write(admin.join("0/state"), "on\n").unwrap();
        std::fs::write(scheme.join("action"), "stat\n").unwrap();
        assert!(!damon_pageout(&admin), "a scheme that only counts");
        std::fs::write(scheme.join("action"), "pageout\n").unwrap();
        assert!(damon_pageout(&admin));
        std::fs::write(admin.join("0/state"), "off\n").unwrap();
        assert!(!damon_pageout(&admin), "a worker that is off");
    }

    #[test]
    fn free_page_reporting_is_the_balloons_feature_bit_5() {
        let d = tempfile::tempdir().unwrap();
        let devs = d.path().join("devices");
        assert!(!free_page_reporting(&devs), "no tree: no balloon");
        let balloon = devs.join("virtio0");
        std::fs::create_dir_all(&balloon).unwrap();
        std::fs::write(balloon.join("device"), "0x0005\n").unwrap();
        std::fs::write(balloon.join("features"), "0110000000\n").unwrap();
        assert!(!free_page_reporting(&devs), "bit 5 clear");
        std::fs::write(balloon.join("features"), "0110010000\n").unwrap();
        assert!(free_page_reporting(&devs));
        std::fs::write(balloon.join("device"), "0x0002\n").unwrap();
        assert!(
            !free_page_reporting(&devs),
            "a block device's bit 5 is another feature"
        );
    }

    #[test]
    fn proc_io_fields_are_found_by_their_whole_name() {
        let text = "rchar: 10\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 100\n";
        assert_eq!(proc_io_field(text, "read_bytes"), Some(4096));
        assert_eq!(proc_io_field(text, "write_bytes"), Some(8192));
        assert_eq!(proc_io_field(text, "cancelled_write_bytes"), Some(100));
        assert_eq!(proc_io_field(text, "syscr"), None);
    }

    #[test]
    fn worst_inserts_split_by_device_reads_in_their_second_or_the_next() {
        // Second 1 has a read, so seconds 0 and 1 count as "with"; second 2
        // and 3 have none (3 is the last).
        let worst = [5.0, 7.0, 3.0, 4.0];
        let reads = [Some(0), Some(4096), Some(0), Some(0)];
        assert_eq!(worst_by_reads(&worst, &reads), (Some(7.0), Some(4.0)));
        // No reads anywhere: everything is "without".
        assert_eq!(worst_by_reads(&worst, &[Some(0); 4]), (None, Some(7.0)));
        // Reads not known: neither side.
        assert_eq!(worst_by_reads(&worst, &[None; 4]), (None, None));
    }

    #[test]
    fn steal_over_windows_sums_their_ticks() {
        let mut s = Steal::default();
        assert_eq!(s.pct(), None);
        s.add(Some((1000, 10)), Some((1100, 20)));
        s.add(None, Some((5000, 500)));
        s.add(Some((2000, 50)), Some((2300, 50)));
        assert_eq!(s.pct(), Some(2.5));
    }

    #[test]
    fn steal_is_the_stolen_share_of_the_ticks_between_two_readings() {
        assert_eq!(steal_pct(Some((1000, 10)), Some((1200, 30))), Some(10.0));
        assert_eq!(steal_pct(Some((1000, 10)), Some((1200, 10))), Some(0.0));
        // No time passed, or a reading is missing: no figure.
        assert_eq!(steal_pct(Some((1000, 10)), Some((1000, 10))), None);
        assert_eq!(steal_pct(None, Some((1200, 30))), None);
        assert_eq!(steal_pct(Some((1000, 10)), None), None);
        // Counters never run backwards; if a reading did, no figure.
        assert_eq!(steal_pct(Some((1200, 10)), Some((1000, 10))), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_machine_s_cpu_ticks_are_read_and_grow() {
        let (total, steal) = cpu_ticks().expect("/proc/stat has a cpu line with steal");
        assert!(steal <= total);
        // Burn a little CPU so that the kernel counts ticks.
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let (total2, steal2) = cpu_ticks().expect("still there");
        assert!(total2 > total, "{total2} ticks after {total}");
        assert!(steal2 >= steal);
    }
}
