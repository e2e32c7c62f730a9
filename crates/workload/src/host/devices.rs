//! The block devices under a run's paths and their `/proc/diskstats` counters: from a
//! path's device number through `/sys/dev/block` (or `/proc/self/mountinfo` for
//! anonymous devices) to the kernel name and its diskstats line.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use edbstress_report::DiskSummary;

use super::DISKSTATS_SECTOR_BYTES;

/// Cumulative I/O counters of one block device (fields 1–8 of its diskstats line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct DiskCounters {
    pub(super) reads: u64,
    pub(super) sectors_read: u64,
    pub(super) ms_reading: u64,
    pub(super) writes: u64,
    pub(super) sectors_written: u64,
    pub(super) ms_writing: u64,
}

/// One line of `/proc/diskstats`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DiskstatsLine {
    pub(super) major: u32,
    pub(super) minor: u32,
    pub(super) name: String,
    pub(super) counters: DiskCounters,
}

/// Parses `/proc/diskstats`: "major minor name" then 11 counters (before 4.18), 15 (4.18+,
/// discards) or 17 (5.5+, flushes); only the first eight are used. Shorter or malformed
/// lines are skipped.
pub(super) fn parse_diskstats(text: &str) -> Vec<DiskstatsLine> {
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
pub(super) fn disk_summary(
    earlier: &DiskCounters,
    later: &DiskCounters,
    seconds: f64,
) -> DiskSummary {
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
        reads: reads as u64,
        writes: writes as u64,
        bytes_read: (delta(|c| c.sectors_read) * sector) as u64,
        bytes_written: (delta(|c| c.sectors_written) * sector) as u64,
    }
}

/// Major and minor numbers of a Linux `dev_t` (glibc's encoding: 12-bit major and 20-bit
/// minor split across the 64 bits).
pub(super) fn dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major as u32, minor as u32)
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MountEntry {
    pub(super) major: u32,
    pub(super) minor: u32,
    pub(super) mount_point: PathBuf,
    pub(super) fs_type: String,
    pub(super) source: String,
}

/// Parses `/proc/self/mountinfo` (proc(5)): "id parent MAJ:MIN root mount-point options
/// [optional...] - fstype source super-options". Malformed lines are skipped.
pub(super) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
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
pub(super) fn unescape_mountinfo(field: &str) -> String {
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
pub(super) fn find_mount<'a>(
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
pub(super) fn parse_uevent_devname(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Why no block device could be found for a path (for the test log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoBlockDevice {
    /// The device has no line in /proc/diskstats, so it cannot be sampled.
    #[error("block device {major}:{minor} has no /proc/diskstats line")]
    NoDiskstatsLine {
        /// Major device number.
        major: u32,
        /// Minor device number.
        minor: u32,
    },
    /// Neither the path nor a parent can be read.
    #[error("neither it nor any parent directory can be read")]
    Unreadable,
    /// An anonymous device number with no mount entry.
    #[error("no mount found for device 0:{minor}")]
    NoMount {
        /// Minor device number.
        minor: u32,
    },
    /// A file system not backed by a block device (tmpfs, overlay, …).
    #[error(
        "it is on a {fs_type} file system (source {mount_source:?}), which is not backed by a block device"
    )]
    NotBlockBacked {
        /// The file system type.
        fs_type: String,
        /// The mount's source.
        mount_source: String,
    },
    /// The mount's source names no sampled block device.
    #[error("mount source {0} is not a block device with a /proc/diskstats line")]
    SourceNotSampled(String),
}

/// The kernel name of block device MAJ:MIN: from sysfs, else from its diskstats line.
/// Only a name with a diskstats line is useful.
pub(super) fn kernel_name(
    major: u32,
    minor: u32,
    diskstats: &[DiskstatsLine],
) -> Result<String, NoBlockDevice> {
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
        .ok_or(NoBlockDevice::NoDiskstatsLine { major, minor })
}

/// The nearest existing ancestor of `path` (itself if it exists); "" counts as ".".
pub(super) fn nearest_existing(path: &Path) -> Option<(PathBuf, fs::Metadata)> {
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
pub(super) fn resolve_device(
    path: &Path,
    diskstats: &[DiskstatsLine],
    mounts: &[MountEntry],
) -> Result<String, NoBlockDevice> {
    let (existing, meta) = nearest_existing(path).ok_or(NoBlockDevice::Unreadable)?;
    let (major, minor) = dev_major_minor(meta.dev());
    if major != 0 {
        return kernel_name(major, minor, diskstats);
    }
    // Anonymous device number: the mount's source names the device, if it has one.
    let canonical = fs::canonicalize(&existing).unwrap_or(existing);
    let mount =
        find_mount(mounts, (major, minor), &canonical).ok_or(NoBlockDevice::NoMount { minor })?;
    if !mount.source.starts_with('/') {
        return Err(NoBlockDevice::NotBlockBacked {
            fs_type: mount.fs_type.clone(),
            mount_source: mount.source.clone(),
        });
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
                Err(NoBlockDevice::SourceNotSampled(mount.source.clone()))
            }
        }
    }
}
