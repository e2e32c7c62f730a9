//! What Linux says about the devices under test, for the solution document's Tested
//! Deployment tables: model, vendor and firmware revision from `/sys/class/block`
//! (the whole disk's, for a partition), size, whether it rotates, and the file system
//! of the mount holding the paths (`/proc/self/mountinfo`).

use std::fs;
use std::path::{Path, PathBuf};

use edbstress_report::StorageDevice;

use super::MonitoredDevice;

/// Describes each device; what the kernel does not say is left out.
pub fn describe_devices(devices: &[MonitoredDevice]) -> Vec<StorageDevice> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    devices
        .iter()
        .map(|d| {
            let sys = Path::new("/sys/class/block").join(&d.name);
            // A partition has no device/ of its own: its disk's model and firmware.
            let disk = if sys.join("partition").exists() {
                fs::canonicalize(&sys)
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
                    .unwrap_or_else(|| sys.clone())
            } else {
                sys.clone()
            };
            let read = |p: PathBuf| {
                fs::read_to_string(p)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
            };
            StorageDevice {
                device: d.name.clone(),
                paths: d.paths.iter().map(|p| p.display().to_string()).collect(),
                vendor: read(disk.join("device/vendor")),
                model: read(disk.join("device/model")).or_else(|| read(disk.join("dm/name"))),
                firmware: read(disk.join("device/rev"))
                    .or_else(|| read(disk.join("device/firmware_rev"))),
                size_bytes: read(sys.join("size"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|sectors| sectors * 512),
                rotational: read(disk.join("queue/rotational")).map(|r| r == "1"),
                filesystem: d.paths.first().and_then(|p| filesystem_of(p, &mounts)),
            }
        })
        .collect()
}

/// The file system type of the mount holding `path` (its nearest existing ancestor).
fn filesystem_of(path: &Path, mountinfo: &str) -> Option<String> {
    let mut p = path.to_path_buf();
    let real = loop {
        if let Ok(r) = fs::canonicalize(&p) {
            break r;
        }
        if !p.pop() {
            return None;
        }
    };
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split_whitespace().nth(4)?;
            let fstype = right.split_whitespace().next()?;
            real.starts_with(mount_point)
                .then(|| (mount_point.len(), fstype.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_mount_point_holding_the_path_gives_the_file_system() {
        let info = "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
                    30 22 0:26 / /tmp rw shared:2 - tmpfs tmpfs rw\n";
        assert_eq!(filesystem_of(Path::new("/"), info).as_deref(), Some("ext4"));
        assert_eq!(
            filesystem_of(Path::new("/usr"), info).as_deref(),
            Some("ext4")
        );
    }
}
