//! What the run saw of the host's storage: the block devices under its paths and their
//! counters, the volumes Jetstress 2007 judged, the device facts of the solution
//! document and the kernel log watched during the run. Part of `results.json`.

use serde::{Deserialize, Serialize};

use super::Range;

/// A block device under a database or log path, over the measured period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSummary {
    /// Kernel name ("nvme0n1", "dm-2").
    pub device: String,
    /// The run's paths on it.
    pub paths: Vec<String>,
    /// Reads per second.
    pub reads_per_sec: f64,
    /// Writes per second.
    pub writes_per_sec: f64,
    /// Average bytes per read.
    pub bytes_per_read: f64,
    /// Average bytes per write.
    pub bytes_per_write: f64,
    /// Average read latency, ms.
    pub avg_read_latency_ms: f64,
    /// Average write latency, ms.
    pub avg_write_latency_ms: f64,
    /// Reads completed (absent in results written before it was recorded: 0).
    #[serde(default)]
    pub reads: u64,
    /// Writes completed.
    #[serde(default)]
    pub writes: u64,
    /// Bytes read.
    #[serde(default)]
    pub bytes_read: u64,
    /// Bytes written.
    #[serde(default)]
    pub bytes_written: u64,
}

/// What a volume holds for the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VolumeRole {
    /// Database files only.
    #[default]
    Database,
    /// Log directories only.
    Log,
    /// Both database files and log directories.
    DatabaseAndLog,
}

impl VolumeRole {
    /// Whether database files are on it (its reads are judged).
    pub fn holds_databases(self) -> bool {
        matches!(self, VolumeRole::Database | VolumeRole::DatabaseAndLog)
    }

    /// Whether log directories are on it (its writes are judged).
    pub fn holds_logs(self) -> bool {
        matches!(self, VolumeRole::Log | VolumeRole::DatabaseAndLog)
    }

    /// "Database", "Log" or "Database and Log", as a 2007 report's LogicalDisk column.
    pub fn label(self) -> &'static str {
        match self {
            VolumeRole::Database => "Database",
            VolumeRole::Log => "Log",
            VolumeRole::DatabaseAndLog => "Database and Log",
        }
    }
}

/// A volume (the block device under database files or log directories) over the
/// measured period, as Jetstress 2007 judged it: `/proc/diskstats` deltas of the device,
/// beside the bytes edbstress itself moved to and from its paths.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    /// Kernel name ("vda", "nvme0n1p2", "dm-1").
    pub device: String,
    /// What it holds.
    pub role: VolumeRole,
    /// The run's paths on it.
    pub paths: Vec<String>,
    /// The instances with files on it.
    pub instances: Vec<String>,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Reads per second.
    pub reads_per_sec: f64,
    /// Writes per second.
    pub writes_per_sec: f64,
    /// Reads and writes per second (Disk Transfers/sec).
    pub transfers_per_sec: f64,
    /// Average bytes per read.
    pub bytes_per_read: f64,
    /// Average bytes per write.
    pub bytes_per_write: f64,
    /// Average read latency, ms (Avg. Disk sec/Read × 1000).
    pub avg_read_latency_ms: f64,
    /// Average write latency, ms (Avg. Disk sec/Write × 1000).
    pub avg_write_latency_ms: f64,
    /// Highest per-interval average read latency, ms.
    pub max_interval_read_latency_ms: f64,
    /// Highest per-interval average write latency, ms.
    pub max_interval_write_latency_ms: f64,
    /// Bytes the device read and wrote.
    pub device_bytes: u64,
    /// Bytes edbstress read from and wrote to its paths on the device.
    pub own_bytes: u64,
    /// Reads edbstress issued to its paths on the device.
    #[serde(default)]
    pub own_reads: u64,
    /// Writes edbstress issued to its paths on the device.
    #[serde(default)]
    pub own_writes: u64,
    /// More than [`Volume::SHARED_FRACTION`] of the device's bytes were not edbstress's:
    /// other programs used it, so its latencies include their I/O.
    pub shared: bool,
}

impl Volume {
    /// Share of a device's bytes from other work above which it counts as shared.
    pub const SHARED_FRACTION: f64 = 0.2;

    /// Share of the device's bytes that were not edbstress's, 0..=1.
    pub fn other_fraction(&self) -> f64 {
        if self.device_bytes == 0 {
            0.0
        } else {
            self.device_bytes.saturating_sub(self.own_bytes) as f64 / self.device_bytes as f64
        }
    }
}

/// Host counters over the measured period (Jetstress's "Host System Performance" and
/// "Disk Subsystem Performance").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCounters {
    /// CPU busy, percent of all CPUs.
    pub cpu_pct: Range,
    /// Available memory, MB.
    pub available_memory_mb: Range,
    /// Page faults per second.
    pub page_faults_per_sec: Range,
    /// Devices under the run's paths.
    pub disks: Vec<DiskSummary>,
    /// The run's paths that are on no block device, each with why ("… is on tmpfs,
    /// which is not on a block device"): they have no disk counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_device: Vec<String>,
}

/// What Linux says about a block device under the run's paths (`/sys/class/block`,
/// `/proc/self/mountinfo`): the Tested Deployment tables of the solution document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageDevice {
    /// Kernel name ("sda1", "nvme0n1", "dm-0").
    pub device: String,
    /// The run's paths on it.
    pub paths: Vec<String>,
    /// Vendor (`device/vendor`), when the kernel knows it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vendor: Option<String>,
    /// Model (`device/model`), of the whole disk for a partition.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    /// Firmware revision (`device/rev` or `device/firmware_rev`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub firmware: Option<String>,
    /// Size in bytes (`size` × 512).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub size_bytes: Option<u64>,
    /// Whether it is rotational (`queue/rotational`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rotational: Option<bool>,
    /// File system type of the mount holding the first path ("ext4", "xfs").
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub filesystem: Option<String>,
}

/// What the kernel log said about the devices under test while the run went (the
/// ESRP documents' "no errors reported in the event log", from facts).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelLog {
    /// Where it was read: "/dev/kmsg" or "journalctl -k"; null when neither could be
    /// read (then nothing was watched, and `unwatched_reason` says why).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub source: Option<String>,
    /// Why the kernel log could not be watched.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unwatched_reason: Option<String>,
    /// The kernel names watched for: the devices under the database and log paths,
    /// their whole disks and the devices beneath them (dm, md).
    pub devices: Vec<String>,
    /// Lines naming one of them with an error, a reset or a timeout; each fails the run.
    pub events: Vec<KernelLogEvent>,
}

/// One kernel log line about a device under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelLogEvent {
    /// The device it names.
    pub device: String,
    /// The line as the kernel wrote it.
    pub message: String,
    /// Local time it was read (RFC 3339).
    pub seen_at: String,
}
