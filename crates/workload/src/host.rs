//! Host counters: CPU, memory, page faults and the block devices under the run's paths,
//! read from `/proc` and `/sys` (Jetstress's "Host System Performance" and "Disk
//! Subsystem Performance").
//!
//! Where each number comes from:
//!
//! | Number | Source |
//! |---|---|
//! | CPU % | `/proc/stat`, the `cpu` line (all CPUs): user, nice, system, idle, iowait, irq, softirq, steal. busy = total − idle − iowait; percent = Δbusy / Δtotal. guest and guest_nice are left out: the kernel already counts them in user and nice. |
//! | Available memory, MB | `/proc/meminfo` `MemAvailable` (kB / 1024) at the end of the interval; kernels before 3.14 lack it, so MemFree + Buffers + Cached stands in. |
//! | Page faults/sec | `/proc/vmstat` Δ`pgfault` / seconds (minor and major). |
//! | Major faults/sec | `/proc/vmstat` Δ`pgmajfault` / seconds. |
//! | Disk reads/sec, writes/sec | `/proc/diskstats` Δreads completed, Δwrites completed / seconds. |
//! | Disk bytes/read, bytes/write | `/proc/diskstats` Δsectors read × 512 / Δreads (sectors there are always 512 bytes), likewise for writes. |
//! | Disk read, write latency, ms | `/proc/diskstats` Δms spent reading / Δreads, Δms spent writing / Δwrites. |
//! | Host info | `/proc/sys/kernel/hostname`, `PRETTY_NAME` of `/etc/os-release`, `/proc/sys/kernel/osrelease`, `available_parallelism` (or `/proc/cpuinfo`), `/proc/meminfo` `MemTotal`. |
//!
//! Devices: `stat(path).st_dev` → `/sys/dev/block/MAJ:MIN` → the kernel name (`uevent`
//! DEVNAME), which has its own `/proc/diskstats` line (partitions and dm/md devices
//! included). File systems with anonymous device numbers (major 0: btrfs, overlay, tmpfs,
//! zfs) are looked up in `/proc/self/mountinfo` for the mount's source device.
//!
//! Reading these files never fails a run: an unreadable or unparsable file gives zeros
//! for that interval and a debug log line.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use edbstress_report::{DiskSummary, HostCounters, HostInfo, Range, Sample, SampleFamily};
use tracing::debug;

/// `/proc/diskstats` counts in 512-byte sectors whatever the device's sector size.
const DISKSTATS_SECTOR_BYTES: u64 = 512;

/// A block device under some of the run's paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitoredDevice {
    /// Kernel name, as in `/proc/diskstats` ("vda1", "nvme0n1", "dm-0").
    pub name: String,
    /// The run's paths on it, as given.
    pub paths: Vec<PathBuf>,
}

/// Reads host counters for a run: resolves the devices once, then takes snapshots.
#[derive(Clone, Debug)]
pub struct HostSampler {
    devices: Arc<[MonitoredDevice]>,
    unresolved: Vec<PathBuf>,
}

impl HostSampler {
    /// Resolves the block devices holding `paths` (database and log directories; a path that
    /// does not exist yet is resolved through its nearest existing ancestor). Never fails:
    /// a path whose device cannot be found (tmpfs, overlay, container) is kept in
    /// `unresolved()` and logged with tracing::debug.
    pub fn new(paths: &[PathBuf]) -> HostSampler {
        let diskstats = match fs::read_to_string("/proc/diskstats") {
            Ok(text) => parse_diskstats(&text),
            Err(e) => {
                debug!("cannot read /proc/diskstats ({e}); no disk counters this run");
                Vec::new()
            }
        };
        // Read once: every major-0 path would otherwise re-read it.
        let mounts = fs::read_to_string("/proc/self/mountinfo")
            .map(|text| parse_mountinfo(&text))
            .unwrap_or_else(|e| {
                debug!("cannot read /proc/self/mountinfo ({e})");
                Vec::new()
            });
        let mut devices: Vec<MonitoredDevice> = Vec::new();
        let mut unresolved: Vec<PathBuf> = Vec::new();
        for path in paths {
            match resolve_device(path, &diskstats, &mounts) {
                Ok(name) => match devices.iter_mut().find(|d| d.name == name) {
                    Some(device) => {
                        if !device.paths.contains(path) {
                            device.paths.push(path.clone());
                        }
                    }
                    None => devices.push(MonitoredDevice {
                        name,
                        paths: vec![path.clone()],
                    }),
                },
                Err(why) => {
                    debug!("no block device for {}: {why}", path.display());
                    if !unresolved.contains(path) {
                        unresolved.push(path.clone());
                    }
                }
            }
        }
        HostSampler {
            devices: devices.into(),
            unresolved,
        }
    }

    /// The devices found, each with the paths on it.
    pub fn devices(&self) -> &[MonitoredDevice] {
        &self.devices
    }

    /// Paths whose device could not be found; they have no disk counters.
    pub fn unresolved(&self) -> &[PathBuf] {
        &self.unresolved
    }

    /// Reads `/proc` now. A file that cannot be read or parsed gives zeros for the
    /// intervals this snapshot ends or starts (and a debug log line).
    pub fn snapshot(&self) -> HostSnapshot {
        let at = Instant::now();
        let cpu = read_proc("/proc/stat", parse_cpu_times);
        let memory = read_proc("/proc/meminfo", parse_meminfo);
        let faults = read_proc("/proc/vmstat", parse_vmstat_faults);
        let stats = read_proc("/proc/diskstats", |text| Some(parse_diskstats(text)));
        let disks = self
            .devices
            .iter()
            .map(|device| {
                stats
                    .as_ref()
                    .and_then(|lines| lines.iter().find(|line| line.name == device.name))
                    .map(|line| line.counters)
            })
            .collect();
        HostSnapshot {
            at,
            cpu,
            available_memory_kb: memory.map(|m| m.available_kb),
            faults,
            devices: Arc::clone(&self.devices),
            disks,
        }
    }
}

/// Raw host counters at one moment; two of them make a [`HostInterval`].
#[derive(Clone, Debug)]
pub struct HostSnapshot {
    at: Instant,
    /// None: `/proc/stat` could not be read.
    cpu: Option<CpuTimes>,
    available_memory_kb: Option<u64>,
    faults: Option<FaultCounts>,
    devices: Arc<[MonitoredDevice]>,
    /// Parallel to `devices`; None: its diskstats line was missing.
    disks: Vec<Option<DiskCounters>>,
}

impl HostSnapshot {
    /// Rates and averages between `earlier` and this snapshot. Counters missing from
    /// either snapshot give zeros; so do counters that went backwards.
    pub fn interval_since(&self, earlier: &HostSnapshot) -> HostInterval {
        let seconds = self.at.saturating_duration_since(earlier.at).as_secs_f64();
        let per_sec = |delta: u64| {
            if seconds > 0.0 {
                delta as f64 / seconds
            } else {
                0.0
            }
        };
        let cpu_pct = match (earlier.cpu, self.cpu) {
            (Some(a), Some(b)) => cpu_busy_pct(&a, &b),
            _ => 0.0,
        };
        let (page_faults_per_sec, major_faults_per_sec) = match (earlier.faults, self.faults) {
            (Some(a), Some(b)) => (
                per_sec(b.minor_and_major.saturating_sub(a.minor_and_major)),
                per_sec(b.major.saturating_sub(a.major)),
            ),
            _ => (0.0, 0.0),
        };
        let disks = self
            .devices
            .iter()
            .zip(&self.disks)
            .map(|(device, later)| {
                let earlier_counters = earlier
                    .devices
                    .iter()
                    .position(|d| d.name == device.name)
                    .and_then(|i| earlier.disks.get(i).copied().flatten());
                let mut summary = match (earlier_counters, *later) {
                    (Some(a), Some(b)) => disk_summary(&a, &b, seconds),
                    _ => DiskSummary::default(),
                };
                summary.device = device.name.clone();
                summary.paths = device
                    .paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                summary
            })
            .collect();
        HostInterval {
            seconds,
            cpu_pct,
            available_memory_mb: self.available_memory_kb.unwrap_or(0) as f64 / 1024.0,
            page_faults_per_sec,
            major_faults_per_sec,
            disks,
        }
    }
}

/// Host counters over one interval (see the module docs for their sources).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostInterval {
    /// Length of the interval.
    pub seconds: f64,
    /// CPU busy, percent of all CPUs.
    pub cpu_pct: f64,
    /// Available memory at the end of the interval, MB.
    pub available_memory_mb: f64,
    /// Page faults (minor and major) per second.
    pub page_faults_per_sec: f64,
    /// Major page faults (those that read from disk) per second.
    pub major_faults_per_sec: f64,
    /// Per monitored device.
    pub disks: Vec<DiskSummary>,
}

impl HostInterval {
    /// Sample rows (scope "Host": one family "host" row, one family "disk" row per device
    /// with `device` set) — see `edbstress_report::Sample` fields.
    pub fn samples(&self, interval: u32, elapsed_s: f64, timestamp: &str) -> Vec<Sample> {
        let row = |family: SampleFamily| Sample {
            interval,
            elapsed_s,
            timestamp: timestamp.to_string(),
            scope: "Host".to_string(),
            family: family.name().to_string(),
            ..Sample::default()
        };
        let mut rows = Vec::with_capacity(1 + self.disks.len());
        rows.push(Sample {
            cpu_pct: Some(self.cpu_pct),
            available_memory_mb: Some(self.available_memory_mb),
            page_faults_per_sec: Some(self.page_faults_per_sec),
            ..row(SampleFamily::Host)
        });
        rows.extend(self.disks.iter().map(|disk| Sample {
            device: Some(disk.device.clone()),
            reads_per_sec: Some(disk.reads_per_sec),
            writes_per_sec: Some(disk.writes_per_sec),
            bytes_per_read: Some(disk.bytes_per_read),
            bytes_per_write: Some(disk.bytes_per_write),
            avg_read_latency_ms: Some(disk.avg_read_latency_ms),
            avg_write_latency_ms: Some(disk.avg_write_latency_ms),
            ..row(SampleFamily::Disk)
        }));
        rows
    }
}

/// Summary of the measured period: Ranges over the intervals for cpu/memory/faults; disks from
/// `whole` (the interval from the first to the last snapshot). With no intervals (a period
/// shorter than one sample), the ranges are `whole`'s values.
pub fn host_counters(intervals: &[HostInterval], whole: &HostInterval) -> HostCounters {
    let over = |value: fn(&HostInterval) -> f64| {
        if intervals.is_empty() {
            Range::of([value(whole)])
        } else {
            Range::of(intervals.iter().map(value))
        }
    };
    HostCounters {
        cpu_pct: over(|i| i.cpu_pct),
        available_memory_mb: over(|i| i.available_memory_mb),
        page_faults_per_sec: over(|i| i.page_faults_per_sec),
        disks: whole.disks.clone(),
    }
}

/// hostname (/proc/sys/kernel/hostname), os (PRETTY_NAME of /etc/os-release), kernel
/// (/proc/sys/kernel/osrelease), cpus (available_parallelism or /proc/cpuinfo), memory_mb.
/// Anything unreadable is left empty or zero (and logged at debug level).
pub fn host_info() -> HostInfo {
    let text = |path: &str| match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) => {
            debug!("cannot read {path}: {e}");
            None
        }
    };
    let hostname = text("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let kernel = text("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // os-release(5): /etc/os-release, else /usr/lib/os-release.
    let os = fs::read_to_string("/etc/os-release")
        .or_else(|_| fs::read_to_string("/usr/lib/os-release"))
        .ok()
        .and_then(|s| parse_os_release_pretty_name(&s))
        .unwrap_or_else(|| "Linux".to_string());
    // available_parallelism honours CPU affinity and cgroup quotas: the CPUs we may use.
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .ok()
        .or_else(|| text("/proc/cpuinfo").map(|s| count_cpuinfo_processors(&s)))
        .unwrap_or(0);
    let memory_mb = text("/proc/meminfo")
        .and_then(|s| parse_meminfo(&s))
        .map(|m| m.total_kb / 1024)
        .unwrap_or(0);
    HostInfo {
        hostname,
        os,
        kernel,
        cpus,
        memory_mb,
    }
}

/// This host's memory (`MemTotal`), bytes; None when `/proc/meminfo` cannot be read.
pub fn memory_total_bytes() -> Option<u64> {
    read_proc("/proc/meminfo", parse_meminfo).map(|m| m.total_kb.saturating_mul(1024))
}

/// Reads and parses a `/proc` file; None (logged) when either fails.
fn read_proc<T>(path: &str, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    match fs::read_to_string(path) {
        Ok(text) => {
            let parsed = parse(&text);
            if parsed.is_none() {
                debug!("cannot parse {path}; its counters are zero this interval");
            }
            parsed
        }
        Err(e) => {
            debug!("cannot read {path} ({e}); its counters are zero this interval");
            None
        }
    }
}

/// CPU time of all CPUs, in clock ticks, from the `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    total: u64,
    /// idle + iowait: waiting for I/O is not work.
    idle: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 {
        return None;
    }
    // Fields 9 and 10 (guest, guest_nice) are already inside user and nice.
    let total = fields.iter().take(8).sum();
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    Some(CpuTimes { total, idle })
}

/// Percent of CPU time busy between two readings, in 0..=100.
fn cpu_busy_pct(earlier: &CpuTimes, later: &CpuTimes) -> f64 {
    let total = later.total.saturating_sub(earlier.total);
    let idle = later.idle.saturating_sub(earlier.idle);
    if total == 0 {
        return 0.0;
    }
    (100.0 * total.saturating_sub(idle) as f64 / total as f64).clamp(0.0, 100.0)
}

/// The fields of `/proc/meminfo` we use, in kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MemInfo {
    total_kb: u64,
    available_kb: u64,
}

/// Parses `/proc/meminfo`. Needs MemTotal; MemAvailable falls back to
/// MemFree + Buffers + Cached (kernels before 3.14).
fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let fields: BTreeMap<&str, u64> = text
        .lines()
        .filter_map(|line| {
            let (key, rest) = line.split_once(':')?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            Some((key.trim(), value))
        })
        .collect();
    let total_kb = *fields.get("MemTotal")?;
    let available_kb = fields.get("MemAvailable").copied().unwrap_or_else(|| {
        ["MemFree", "Buffers", "Cached"]
            .iter()
            .filter_map(|k| fields.get(k))
            .sum()
    });
    Some(MemInfo {
        total_kb,
        available_kb,
    })
}

/// Page fault counts since boot, from `/proc/vmstat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FaultCounts {
    /// `pgfault`: every fault, minor and major.
    minor_and_major: u64,
    /// `pgmajfault`: faults that needed I/O.
    major: u64,
}

/// Parses `pgfault` and `pgmajfault` from `/proc/vmstat`.
fn parse_vmstat_faults(text: &str) -> Option<FaultCounts> {
    let (mut all, mut major) = (None, None);
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        match key {
            "pgfault" => all = value.parse().ok(),
            "pgmajfault" => major = value.parse().ok(),
            _ => {}
        }
    }
    Some(FaultCounts {
        minor_and_major: all?,
        major: major?,
    })
}

/// Cumulative I/O counters of one block device (fields 1–8 of its diskstats line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct DiskCounters {
    reads: u64,
    sectors_read: u64,
    ms_reading: u64,
    writes: u64,
    sectors_written: u64,
    ms_writing: u64,
}

/// One line of `/proc/diskstats`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DiskstatsLine {
    major: u32,
    minor: u32,
    name: String,
    counters: DiskCounters,
}

/// Parses `/proc/diskstats`: "major minor name" then 11 counters (before 4.18), 15 (4.18+,
/// discards) or 17 (5.5+, flushes); only the first eight are used. Shorter or malformed
/// lines are skipped.
fn parse_diskstats(text: &str) -> Vec<DiskstatsLine> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 14 {
                return None;
            }
            let n = |i: usize| words[i].parse::<u64>().ok();
            Some(DiskstatsLine {
                major: words[0].parse().ok()?,
                minor: words[1].parse().ok()?,
                name: words[2].to_string(),
                counters: DiskCounters {
                    reads: n(3)?,
                    sectors_read: n(5)?,
                    ms_reading: n(6)?,
                    writes: n(7)?,
                    sectors_written: n(9)?,
                    ms_writing: n(10)?,
                },
            })
        })
        .collect()
}

/// Rates and averages of one device between two readings (device and paths left empty).
fn disk_summary(earlier: &DiskCounters, later: &DiskCounters, seconds: f64) -> DiskSummary {
    let delta = |f: fn(&DiskCounters) -> u64| f(later).saturating_sub(f(earlier)) as f64;
    let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
    let reads = delta(|c| c.reads);
    let writes = delta(|c| c.writes);
    let sector = DISKSTATS_SECTOR_BYTES as f64;
    DiskSummary {
        device: String::new(),
        paths: Vec::new(),
        reads_per_sec: ratio(reads, seconds),
        writes_per_sec: ratio(writes, seconds),
        bytes_per_read: ratio(delta(|c| c.sectors_read) * sector, reads),
        bytes_per_write: ratio(delta(|c| c.sectors_written) * sector, writes),
        avg_read_latency_ms: ratio(delta(|c| c.ms_reading), reads),
        avg_write_latency_ms: ratio(delta(|c| c.ms_writing), writes),
    }
}

/// Major and minor numbers of a Linux `dev_t` (glibc's encoding: 12-bit major and 20-bit
/// minor split across the 64 bits).
fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major as u32, minor as u32)
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MountEntry {
    major: u32,
    minor: u32,
    mount_point: PathBuf,
    fs_type: String,
    source: String,
}

/// Parses `/proc/self/mountinfo` (proc(5)): "id parent MAJ:MIN root mount-point options
/// [optional...] - fstype source super-options". Malformed lines are skipped.
fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let (major, minor) = words.get(2)?.split_once(':')?;
            let separator = words.iter().skip(6).position(|w| *w == "-")? + 6;
            Some(MountEntry {
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
                mount_point: PathBuf::from(unescape_mountinfo(words.get(4)?)),
                fs_type: words.get(separator + 1)?.to_string(),
                source: unescape_mountinfo(words.get(separator + 2)?),
            })
        })
        .collect()
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount holding `path` (canonical) on a file system with device number `dev`: the
/// mount with that number, else (btrfs subvolumes have numbers of their own) the one with
/// the longest mount point above `path`; the later line wins, as it is mounted on top.
fn find_mount<'a>(
    mounts: &'a [MountEntry],
    dev: (u32, u32),
    path: &Path,
) -> Option<&'a MountEntry> {
    mounts
        .iter()
        .rev()
        .find(|m| (m.major, m.minor) == dev)
        .or_else(|| {
            mounts
                .iter()
                .rev()
                .filter(|m| path.starts_with(&m.mount_point))
                .max_by_key(|m| m.mount_point.components().count())
        })
}

/// Value of `DEVNAME=` in a sysfs `uevent` file.
fn parse_uevent_devname(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The kernel name of block device MAJ:MIN: from sysfs, else from its diskstats line.
/// Only a name with a diskstats line is useful.
fn kernel_name(major: u32, minor: u32, diskstats: &[DiskstatsLine]) -> Result<String, String> {
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let from_sysfs = fs::read_to_string(sys.join("uevent"))
        .ok()
        .and_then(|t| parse_uevent_devname(&t))
        .or_else(|| {
            let target = fs::read_link(&sys).ok()?;
            Some(target.file_name()?.to_string_lossy().into_owned())
        });
    // No let chains: the workspace's rust-version (1.85) predates them.
    if let Some(name) = from_sysfs.filter(|name| diskstats.iter().any(|l| &l.name == name)) {
        return Ok(name);
    }
    diskstats
        .iter()
        .find(|l| (l.major, l.minor) == (major, minor))
        .map(|l| l.name.clone())
        .ok_or_else(|| format!("block device {major}:{minor} has no /proc/diskstats line"))
}

/// The nearest existing ancestor of `path` (itself if it exists); "" counts as ".".
fn nearest_existing(path: &Path) -> Option<(PathBuf, fs::Metadata)> {
    let mut candidate = path;
    loop {
        let probe = if candidate.as_os_str().is_empty() {
            Path::new(".")
        } else {
            candidate
        };
        if let Ok(meta) = fs::metadata(probe) {
            return Some((probe.to_path_buf(), meta));
        }
        candidate = candidate.parent()?;
    }
}

/// The kernel name of the block device holding `path`, or why there is none.
fn resolve_device(
    path: &Path,
    diskstats: &[DiskstatsLine],
    mounts: &[MountEntry],
) -> Result<String, String> {
    let (existing, meta) =
        nearest_existing(path).ok_or("neither it nor any parent directory can be read")?;
    let (major, minor) = dev_major_minor(meta.dev());
    if major != 0 {
        return kernel_name(major, minor, diskstats);
    }
    // Anonymous device number: the mount's source names the device, if it has one.
    let canonical = fs::canonicalize(&existing).unwrap_or(existing);
    let mount = find_mount(mounts, (major, minor), &canonical)
        .ok_or_else(|| format!("no mount found for device 0:{minor}"))?;
    if !mount.source.starts_with('/') {
        return Err(format!(
            "{} file system from {:?} is not on a block device",
            mount.fs_type, mount.source
        ));
    }
    match fs::metadata(&mount.source) {
        Ok(source) if source.file_type().is_block_device() => {
            let (major, minor) = dev_major_minor(source.rdev());
            kernel_name(major, minor, diskstats)
        }
        // The device node may be missing here (a container): try its name.
        _ => {
            let name = Path::new(&mount.source)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if diskstats.iter().any(|l| l.name == name) {
                Ok(name)
            } else {
                Err(format!(
                    "mount source {} is not a block device with a /proc/diskstats line",
                    mount.source
                ))
            }
        }
    }
}

/// Parses `PRETTY_NAME` from os-release(5) text, undoing its shell quoting.
fn parse_os_release_pretty_name(text: &str) -> Option<String> {
    let raw = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let value = if raw.len() >= 2
        && ((raw.starts_with('"') && raw.ends_with('"'))
            || (raw.starts_with('\'') && raw.ends_with('\'')))
    {
        let inner = &raw[1..raw.len() - 1];
        if raw.starts_with('"') {
            // Inside double quotes, \ escapes ", \, $ and `.
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars().peekable();
            while let Some(c) = chars.next() {
                match (c, chars.peek()) {
                    ('\\', Some(&next)) if matches!(next, '"' | '\\' | '$' | '`') => {
                        out.push(next);
                        chars.next();
                    }
                    _ => out.push(c),
                }
            }
            out
        } else {
            inner.to_string()
        }
    } else {
        raw.to_string()
    };
    Some(value).filter(|v| !v.is_empty())
}

/// Number of `processor` entries in `/proc/cpuinfo`.
fn count_cpuinfo_processors(text: &str) -> u32 {
    text.lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    const STAT: &str = "\
cpu  642308 10 127730 799158 74848 0 8084 4631 300 0
cpu0 310022 0 49198 454744 16503 0 246 1937 0 0
cpu1 332286 10 78532 344413 58345 0 7837 2693 300 0
intr 54612382 0 9 0 0 0 0 0 0 0 0
ctxt 123456789
btime 1700000000
processes 400000
procs_running 2
procs_blocked 0
";

    #[test]
    fn cpu_line_sums_eight_fields_and_counts_iowait_as_idle() {
        let t = parse_cpu_times(STAT).unwrap();
        assert_eq!(t.total, 642308 + 10 + 127730 + 799158 + 74848 + 8084 + 4631);
        assert_eq!(t.idle, 799158 + 74848);
        // Old kernels (2.6.0) had only four fields after "cpu".
        let old = parse_cpu_times("cpu 10 20 30 40\ncpu0 10 20 30 40\n").unwrap();
        assert_eq!(
            old,
            CpuTimes {
                total: 100,
                idle: 40
            }
        );
        assert_eq!(parse_cpu_times("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_cpu_times("cpu 1 x 3 4\n"), None);
    }

    #[test]
    fn cpu_busy_is_delta_busy_over_delta_total() {
        let a = CpuTimes {
            total: 1000,
            idle: 600,
        };
        let b = CpuTimes {
            total: 1400,
            idle: 700,
        };
        assert_eq!(cpu_busy_pct(&a, &b), 75.0);
        assert_eq!(cpu_busy_pct(&a, &a), 0.0);
        // A counter going backwards (a failed read) gives zero, not nonsense.
        assert_eq!(cpu_busy_pct(&b, &a), 0.0);
    }

    #[test]
    fn meminfo_available_and_its_fallback() {
        let text = "\
MemTotal:       49368168 kB
MemFree:         1234567 kB
MemAvailable:   24249868 kB
Buffers:          102400 kB
Cached:         20480000 kB
SwapCached:            0 kB
HugePages_Total:       0
";
        assert_eq!(
            parse_meminfo(text),
            Some(MemInfo {
                total_kb: 49368168,
                available_kb: 24249868
            })
        );
        let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 300 kB\n";
        assert_eq!(
            parse_meminfo(old),
            Some(MemInfo {
                total_kb: 1000,
                available_kb: 420
            })
        );
        assert_eq!(parse_meminfo("MemFree: 100 kB\n"), None);
    }

    #[test]
    fn vmstat_faults() {
        let text = "nr_free_pages 123\npgfault 154758680\npgmajfault 45916\npgfree 1\n";
        assert_eq!(
            parse_vmstat_faults(text),
            Some(FaultCounts {
                minor_and_major: 154758680,
                major: 45916
            })
        );
        assert_eq!(parse_vmstat_faults("pgfault 1\n"), None);
    }

    #[test]
    fn diskstats_old_new_and_newest_forms() {
        let text = "\
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 13665859 62406 593125922 5799269 4201242 107663 472307912 1765389 0 1115460 7679607 102227 55 216188656 49968 923300 64979
 254       1 vda1 13665000 62400 593120000 5799000 4201000 107600 472300000 1765000 0 1115000 7679000 102227 55 216188656 49968
   8      16 sdb 1000 5 64000 2500 2000 7 128000 4000 1 3000 6500
   8      17 sdb1 10 20 30 40
 253       0 dm-0 x 0 0 0 0 0 0 0 0 0 0
";
        let lines = parse_diskstats(text);
        let names: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["loop0", "vda", "vda1", "sdb"]);
        assert_eq!((lines[1].major, lines[1].minor), (254, 0));
        assert_eq!(
            lines[1].counters,
            DiskCounters {
                reads: 13665859,
                sectors_read: 593125922,
                ms_reading: 5799269,
                writes: 4201242,
                sectors_written: 472307912,
                ms_writing: 1765389,
            }
        );
        assert_eq!(lines[2].counters.writes, 4201000);
        // The 14-field form (kernels before 4.18).
        assert_eq!(
            lines[3].counters,
            DiskCounters {
                reads: 1000,
                sectors_read: 64000,
                ms_reading: 2500,
                writes: 2000,
                sectors_written: 128000,
                ms_writing: 4000,
            }
        );
    }

    #[test]
    fn mountinfo_fields_escapes_and_optional_fields() {
        let text = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684084k
60 27 0:45 /@home /home rw,relatime shared:30 master:2 - btrfs /dev/nvme0n1p2 rw,ssd
61 27 0:46 / /mnt/my\\040disk rw - ext4 /dev/sdb1 rw
bad line
";
        let mounts = parse_mountinfo(text);
        assert_eq!(mounts.len(), 4);
        assert_eq!(
            mounts[2],
            MountEntry {
                major: 0,
                minor: 45,
                mount_point: PathBuf::from("/home"),
                fs_type: "btrfs".into(),
                source: "/dev/nvme0n1p2".into(),
            }
        );
        assert_eq!(mounts[3].mount_point, PathBuf::from("/mnt/my disk"));
        assert_eq!(unescape_mountinfo(r"a\134b\011c\0"), "a\\b\tc\\0");

        // By device number first; else the deepest mount point above the path.
        let home = find_mount(&mounts, (0, 45), Path::new("/anything")).unwrap();
        assert_eq!(home.source, "/dev/nvme0n1p2");
        let sub = find_mount(&mounts, (0, 99), Path::new("/home/me/sub")).unwrap();
        assert_eq!(sub.source, "/dev/nvme0n1p2");
        let shm = find_mount(&mounts, (0, 99), Path::new("/dev/shm/x")).unwrap();
        assert_eq!(shm.fs_type, "tmpfs");
        assert!(find_mount(&mounts, (0, 99), Path::new("relative")).is_none());
    }

    #[test]
    fn dev_t_split_and_uevent() {
        assert_eq!(dev_major_minor(0xfe00), (254, 0));
        assert_eq!(dev_major_minor(0x0811), (8, 17));
        // Large minors (nvme partitions past 255) spill into the high bits.
        assert_eq!(dev_major_minor(0x0011_0301), (259, 257));
        assert_eq!(
            parse_uevent_devname("MAJOR=253\nMINOR=0\nDEVNAME=dm-0\nDEVTYPE=disk\n"),
            Some("dm-0".into())
        );
        assert_eq!(parse_uevent_devname("MAJOR=7\n"), None);
    }

    #[test]
    fn os_release_and_cpuinfo() {
        let text =
            "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nID=debian\n";
        assert_eq!(
            parse_os_release_pretty_name(text).as_deref(),
            Some("Debian GNU/Linux 13 (trixie)")
        );
        assert_eq!(
            parse_os_release_pretty_name("PRETTY_NAME='Alpine Linux v3.20'\n").as_deref(),
            Some("Alpine Linux v3.20")
        );
        assert_eq!(
            parse_os_release_pretty_name("PRETTY_NAME=\"say \\\"hi\\\"\"\n").as_deref(),
            Some("say \"hi\"")
        );
        assert_eq!(
            parse_os_release_pretty_name("PRETTY_NAME=Plain\n").as_deref(),
            Some("Plain")
        );
        assert_eq!(parse_os_release_pretty_name("NAME=x\n"), None);
        let cpuinfo = "processor\t: 0\nmodel name\t: X\n\nprocessor\t: 1\nmodel name\t: X\n";
        assert_eq!(count_cpuinfo_processors(cpuinfo), 2);
    }

    fn crafted(
        at: Instant,
        cpu: CpuTimes,
        mem_kb: u64,
        faults: FaultCounts,
        devices: &Arc<[MonitoredDevice]>,
        disks: Vec<Option<DiskCounters>>,
    ) -> HostSnapshot {
        HostSnapshot {
            at,
            cpu: Some(cpu),
            available_memory_kb: Some(mem_kb),
            faults: Some(faults),
            devices: Arc::clone(devices),
            disks,
        }
    }

    #[test]
    fn interval_rates_and_latencies() {
        let devices: Arc<[MonitoredDevice]> = vec![
            MonitoredDevice {
                name: "vda1".into(),
                paths: vec![PathBuf::from("/db"), PathBuf::from("/logs")],
            },
            MonitoredDevice {
                name: "sdb".into(),
                paths: vec![PathBuf::from("/gone")],
            },
        ]
        .into();
        let t0 = Instant::now();
        let a = crafted(
            t0,
            CpuTimes {
                total: 10_000,
                idle: 8_000,
            },
            2_048_000,
            FaultCounts {
                minor_and_major: 1_000,
                major: 10,
            },
            &devices,
            vec![
                Some(DiskCounters {
                    reads: 100,
                    sectors_read: 800,
                    ms_reading: 50,
                    writes: 200,
                    sectors_written: 1_600,
                    ms_writing: 20,
                }),
                None,
            ],
        );
        let b = crafted(
            t0 + Duration::from_secs(4),
            CpuTimes {
                total: 10_800,
                idle: 8_600,
            },
            1_024_000,
            FaultCounts {
                minor_and_major: 5_000,
                major: 30,
            },
            &devices,
            vec![
                Some(DiskCounters {
                    reads: 500,              // 400 reads = 100/s
                    sectors_read: 7_200,     // 6400 sectors × 512 / 400 = 8192 B
                    ms_reading: 1_250,       // 1200 ms / 400 = 3 ms
                    writes: 1_000,           // 800 writes = 200/s
                    sectors_written: 27_200, // 25600 × 512 / 800 = 16384 B
                    ms_writing: 420,         // 400 ms / 800 = 0.5 ms
                }),
                Some(DiskCounters::default()),
            ],
        );
        let i = b.interval_since(&a);
        assert_eq!(i.seconds, 4.0);
        assert_eq!(i.cpu_pct, 25.0);
        assert_eq!(i.available_memory_mb, 1000.0);
        assert_eq!(i.page_faults_per_sec, 1000.0);
        assert_eq!(i.major_faults_per_sec, 5.0);
        assert_eq!(
            i.disks[0],
            DiskSummary {
                device: "vda1".into(),
                paths: vec!["/db".into(), "/logs".into()],
                reads_per_sec: 100.0,
                writes_per_sec: 200.0,
                bytes_per_read: 8192.0,
                bytes_per_write: 16384.0,
                avg_read_latency_ms: 3.0,
                avg_write_latency_ms: 0.5,
            }
        );
        // Missing in the earlier snapshot: zeros, not counts since boot.
        assert_eq!(
            i.disks[1],
            DiskSummary {
                device: "sdb".into(),
                paths: vec!["/gone".into()],
                ..DiskSummary::default()
            }
        );

        let rows = i.samples(3, 12.0, "2025-01-01T00:00:12Z");
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].scope, "Host");
        assert_eq!(rows[0].family, "host");
        assert_eq!(rows[0].cpu_pct, Some(25.0));
        assert_eq!(rows[0].available_memory_mb, Some(1000.0));
        assert_eq!(rows[0].page_faults_per_sec, Some(1000.0));
        assert_eq!(rows[0].device, None);
        assert_eq!(rows[0].reads_per_sec, None);
        assert_eq!(rows[1].family, "disk");
        assert_eq!(rows[1].scope, "Host");
        assert_eq!(rows[1].device.as_deref(), Some("vda1"));
        assert_eq!(rows[1].interval, 3);
        assert_eq!(rows[1].elapsed_s, 12.0);
        assert_eq!(rows[1].timestamp, "2025-01-01T00:00:12Z");
        assert_eq!(rows[1].avg_read_latency_ms, Some(3.0));
        assert_eq!(rows[1].bytes_per_write, Some(16384.0));
        assert_eq!(rows[1].cpu_pct, None);

        // A failed read (None) on either side gives zeros for that counter.
        let failed = HostSnapshot {
            cpu: None,
            faults: None,
            available_memory_kb: None,
            ..b.clone()
        };
        let z = failed.interval_since(&a);
        assert_eq!(
            (z.cpu_pct, z.available_memory_mb, z.page_faults_per_sec),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(z.disks[0], i.disks[0]);
    }

    #[test]
    fn summary_ranges_over_intervals_and_disks_from_whole() {
        let at = |cpu_pct: f64, mem: f64, faults: f64| HostInterval {
            seconds: 1.0,
            cpu_pct,
            available_memory_mb: mem,
            page_faults_per_sec: faults,
            ..HostInterval::default()
        };
        let whole = HostInterval {
            disks: vec![DiskSummary {
                device: "vda".into(),
                reads_per_sec: 7.0,
                ..DiskSummary::default()
            }],
            ..at(30.0, 900.0, 5.0)
        };
        let c = host_counters(&[at(10.0, 1000.0, 2.0), at(50.0, 800.0, 8.0)], &whole);
        assert_eq!(
            c.cpu_pct,
            Range {
                min: 10.0,
                avg: 30.0,
                max: 50.0
            }
        );
        assert_eq!(
            c.available_memory_mb,
            Range {
                min: 800.0,
                avg: 900.0,
                max: 1000.0
            }
        );
        assert_eq!(
            c.page_faults_per_sec,
            Range {
                min: 2.0,
                avg: 5.0,
                max: 8.0
            }
        );
        assert_eq!(c.disks, whole.disks);
        let short = host_counters(&[], &whole);
        assert_eq!(
            short.cpu_pct,
            Range {
                min: 30.0,
                avg: 30.0,
                max: 30.0
            }
        );
    }

    #[test]
    fn paths_on_one_file_system_share_a_device_or_are_all_unresolved() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("not/yet/made");
        let paths = vec![dir.path().to_path_buf(), later.clone(), later.clone()];
        let sampler = HostSampler::new(&paths);
        println!(
            "devices {:?} unresolved {:?}",
            sampler.devices(),
            sampler.unresolved()
        );
        match sampler.devices() {
            [] => assert_eq!(sampler.unresolved(), &paths[..2]),
            [device] => {
                assert_eq!(device.paths, &paths[..2]);
                assert!(sampler.unresolved().is_empty());
            }
            more => panic!("one file system, several devices: {more:?}"),
        }
    }

    #[test]
    fn live_snapshot_while_writing() {
        let dir = tempfile::tempdir().unwrap();
        let sampler = HostSampler::new(&[dir.path().to_path_buf()]);
        println!(
            "devices {:?} unresolved {:?}",
            sampler.devices(),
            sampler.unresolved()
        );
        let before = sampler.snapshot();
        let mut file = fs::File::create(dir.path().join("data")).unwrap();
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..8 {
            file.write_all(&block).unwrap();
        }
        file.sync_all().unwrap();
        let after = sampler.snapshot();
        let interval = after.interval_since(&before);
        println!("{interval:?}");
        assert!(
            (0.0..=100.0).contains(&interval.cpu_pct),
            "{}",
            interval.cpu_pct
        );
        assert!(interval.available_memory_mb > 0.0);
        assert!(interval.page_faults_per_sec >= 0.0);
        assert_eq!(interval.disks.len(), sampler.devices().len());
        let rows = interval.samples(1, interval.seconds, "now");
        assert_eq!(rows.len(), 1 + sampler.devices().len());

        let info = host_info();
        println!("{info:?}");
        assert!(info.cpus >= 1);
        assert!(info.memory_mb > 0);
        assert!(!info.kernel.is_empty());
    }
}
