//! The kernel log fails a run: on a loop device with ext4 (so the line names a device
//! nobody else uses), a line reporting an I/O error on that device is written into
//! /dev/kmsg while a short run goes; the run fails through `kernel_log_errors`, its
//! results.json lists the line and its report shows it. Needs root (losetup, mount,
//! writing /dev/kmsg); skips loudly otherwise.

use crate::suite::common;
use common::*;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skip(why: &str) {
    eprintln!("\n!!!!!!!!!!\n!!! SKIPPED: the kernel-log test {why}\n!!!!!!!!!!\n");
}

/// A loop device with ext4 mounted at `mnt`; unmounted and detached on drop.
struct LoopMount {
    device: String,
    mnt: PathBuf,
    mounted: bool,
}

impl LoopMount {
    fn new(image: &Path, mnt: &Path) -> Result<LoopMount, String> {
        let f = fs::File::create(image).map_err(|e| e.to_string())?;
        f.set_len(320 << 20).map_err(|e| e.to_string())?;
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(image)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut m = LoopMount {
            device,
            mnt: mnt.to_path_buf(),
            mounted: false,
        };
        let ok = |c: &mut Command| c.output().is_ok_and(|o| o.status.success());
        if !ok(Command::new("mkfs.ext4").args(["-q", "-F", &m.device])) {
            return Err("mkfs.ext4 failed".into());
        }
        fs::create_dir_all(mnt).map_err(|e| e.to_string())?;
        if !ok(Command::new("mount").arg(&m.device).arg(mnt)) {
            return Err("mount failed".into());
        }
        m.mounted = true;
        Ok(m)
    }

    /// "loop7".
    fn name(&self) -> &str {
        self.device.trim_start_matches("/dev/")
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mnt).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

#[test]
fn an_io_error_in_the_kernel_log_on_the_device_under_test_fails_the_run() {
    let root_user = fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root_user {
        return skip("needs root (a loop device, a mount, writing /dev/kmsg)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let lm = match LoopMount::new(&root.join("disk.img"), &root.join("mnt")) {
        Ok(m) => m,
        Err(e) => return skip(&format!("cannot make a loop file system: {e}")),
    };
    let mnt = root.join("mnt");
    fs::create_dir_all(mnt.join("db")).unwrap();
    fs::create_dir_all(mnt.join("logs")).unwrap();
    let limits = write_loose_limits(root);
    let mut args: Vec<String> = vec![
        "run".into(),
        "--config".into(),
        limits.display().to_string(),
        "--mailboxes".into(),
        "50".into(),
        "--db-path".into(),
        mnt.join("db").display().to_string(),
        "--log-path".into(),
        mnt.join("logs").display().to_string(),
        "--results-dir".into(),
        root.join("results").display().to_string(),
    ];
    args.extend(SHORT_RUN.iter().map(|s| s.to_string()));
    let child = command(root)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the run is under way, the kernel "reports" an I/O error on its device.
    let deadline = Instant::now() + Duration::from_secs(60);
    while run_dirs(root).is_empty() {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let line = format!(
        "<3>edbstress-test: blk_update_request: I/O error, dev {}, sector 2048 op 0x1:(WRITE) flags 0x0\n",
        lm.name()
    );
    fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .and_then(|mut k| k.write_all(line.as_bytes()))
        .expect("write /dev/kmsg");
    let out = child.wait_with_output().unwrap();
    let dir = run_dirs(root).pop().unwrap();
    let r = results(&dir);
    eprintln!("kernel_log: {:#}", r["kernel_log"]);
    assert_exit(&out, 1, "a run with an I/O error in the kernel log");

    let k = &r["kernel_log"];
    assert_eq!(k["source"], "/dev/kmsg", "{k:#}");
    assert!(
        k["devices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d == lm.name()),
        "{k:#}"
    );
    let events = k["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{k:#}");
    assert_eq!(events[0]["device"], lm.name());
    assert!(
        events[0]["message"]
            .as_str()
            .unwrap()
            .contains("I/O error, dev loop"),
        "{k:#}"
    );
    assert_eq!(r["overall_result"], "Fail");
    let failed: Vec<&str> = r["failed_criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        failed,
        ["kernel_log_errors"],
        "only the kernel log failed it"
    );
    let report = fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("Kernel Log"));
    assert!(report.contains(&format!("I/O error, dev {}", lm.name())));
    let log = fs::read_to_string(dir.join("test.log")).unwrap();
    assert!(
        log.contains(&format!("Kernel log on {}", lm.name())),
        "{log}"
    );
    assert_eq!(r["storage_devices"][0]["device"], lm.name());
    assert_eq!(r["storage_devices"][0]["filesystem"], "ext4");
}
