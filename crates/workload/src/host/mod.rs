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

mod devices;
pub mod kernel_log;
mod proc;
mod storage;
#[cfg(test)]
mod tests;

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use edbstress_report::{DiskSummary, HostCounters, HostInfo, Range, Sample, SampleFamily};
use tracing::debug;

use devices::*;
use proc::*;
pub use storage::describe_devices;

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
    // Read by the tests; a run logs them when the sampler is made.
    #[cfg_attr(not(test), allow(dead_code))]
    unresolved: Vec<PathBuf>,
    /// Why each unresolved path has no device, as "PATH: why".
    reasons: Vec<String>,
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
        let mut reasons: Vec<String> = Vec::new();
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
                        reasons.push(format!("{}: {why}", path.display()));
                    }
                }
            }
        }
        HostSampler {
            devices: devices.into(),
            unresolved,
            reasons,
        }
    }

    /// The devices found, each with the paths on it.
    pub fn devices(&self) -> &[MonitoredDevice] {
        &self.devices
    }

    /// Paths whose device could not be found; they have no disk counters.
    #[cfg(test)]
    pub fn unresolved(&self) -> &[PathBuf] {
        &self.unresolved
    }

    /// Why each unresolved path has no device: "PATH: what it is".
    pub fn unresolved_reasons(&self) -> &[String] {
        &self.reasons
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
        no_device: Vec::new(),
    }
}

/// Host and device counters over one period, for tests that take no periodic samples
/// (DatabaseBackup, SoftRecovery): a snapshot at the start, the summary at the end.
pub struct HostPeriod {
    sampler: HostSampler,
    start: HostSnapshot,
}

impl HostPeriod {
    /// Starts the period now, over the devices holding `paths`.
    pub fn start(paths: &[PathBuf]) -> HostPeriod {
        let sampler = HostSampler::new(paths);
        let start = sampler.snapshot();
        HostPeriod { sampler, start }
    }

    /// The counters from the start to now.
    pub fn finish(&self) -> HostCounters {
        let whole = self.sampler.snapshot().interval_since(&self.start);
        let mut counters = host_counters(&[], &whole);
        counters.no_device = self.sampler.unresolved_reasons().to_vec();
        counters
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
