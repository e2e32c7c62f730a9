//! Watching the kernel log during a run for I/O errors, resets and timeouts on the
//! devices under test: the ESRP documents state "no errors reported in the event log",
//! and on Linux the storage stack reports such trouble there, not to the application
//! (a retried command, a reset link, a file system error).
//!
//! `/dev/kmsg` is read from the run's start (seeked to its end; every read returns one
//! record); where it cannot be read, `journalctl -k -f` is followed instead. A line
//! counts when it names a watched device as a whole word (`sda`, `sda1`, `dm-0`,
//! `loop3`) and says error, reset, timeout or abort.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use chrono::Local;
use edbstress_report::{KernelLog, KernelLogEvent};

use super::MonitoredDevice;

/// Words that make a line about a watched device a problem (lower case).
const TROUBLE: [&str; 9] = [
    "error",
    "timing out",
    "reset",
    "timeout",
    "timed out",
    "abort",
    "offline",
    "failed",
    "failure",
];

/// How often the watcher looks for new records when there are none.
const POLL: Duration = Duration::from_millis(100);

/// A running watch of the kernel log; [`KernelLogWatch::finish`] ends it.
pub struct KernelLogWatch {
    source: Option<String>,
    unwatched_reason: Option<String>,
    devices: Arc<Vec<String>>,
    events: Arc<Mutex<Vec<KernelLogEvent>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    child: Option<Child>,
}

impl KernelLogWatch {
    /// Starts watching for lines about `devices` (and the disks they are partitions
    /// of, and the devices beneath dm/md devices). Never fails: a kernel log that
    /// cannot be read is recorded as unwatched, with why.
    pub fn start(devices: &[MonitoredDevice]) -> KernelLogWatch {
        let names = Arc::new(related_devices(devices));
        let events = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = KernelLogWatch {
            source: None,
            unwatched_reason: None,
            devices: Arc::clone(&names),
            events: Arc::clone(&events),
            stop: Arc::clone(&stop),
            thread: None,
            child: None,
        };
        if names.is_empty() {
            watch.unwatched_reason =
                Some("no block device was found under the database and log paths".into());
            return watch;
        }
        let kmsg = open_kmsg();
        match kmsg {
            Ok(file) => {
                watch.source = Some("/dev/kmsg".into());
                watch.thread = Some(std::thread::spawn(move || {
                    read_kmsg(file, &names, &events, &stop)
                }));
            }
            Err(kmsg_error) => match start_journalctl() {
                Ok(mut child) => {
                    let stdout = child.stdout.take();
                    watch.source = Some("journalctl -k".into());
                    watch.child = Some(child);
                    watch.thread = stdout.map(|out| {
                        std::thread::spawn(move || {
                            for line in BufReader::new(out).lines() {
                                let Ok(line) = line else { break };
                                record(&line, &names, &events);
                            }
                        })
                    });
                }
                Err(journal_error) => {
                    watch.unwatched_reason = Some(format!(
                        "/dev/kmsg: {kmsg_error}; journalctl -k: {journal_error}"
                    ));
                }
            },
        }
        watch
    }

    /// Reads what is left and ends the watch.
    pub fn finish(mut self) -> KernelLog {
        if let Some(child) = &mut self.child {
            // journalctl hands lines on with a small delay; give the last ones time.
            std::thread::sleep(Duration::from_millis(500));
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let events = std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()));
        KernelLog {
            source: self.source.take(),
            unwatched_reason: self.unwatched_reason.take(),
            devices: self.devices.as_ref().clone(),
            events,
        }
    }
}

/// `/dev/kmsg`, non-blocking, positioned after the last record so only lines from now
/// on are read.
fn open_kmsg() -> std::io::Result<File> {
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")?;
    file.seek(SeekFrom::End(0))?;
    Ok(file)
}

fn start_journalctl() -> std::io::Result<Child> {
    Command::new("journalctl")
        .args(["-k", "-f", "-n", "0", "-o", "cat", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
}

/// Reads records until `stop`, then drains what is there.
fn read_kmsg(
    mut file: File,
    names: &[String],
    events: &Mutex<Vec<KernelLogEvent>>,
    stop: &AtomicBool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                if let Some(message) = kmsg_message(&text) {
                    record(message, names, events);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(POLL);
            }
            // EPIPE: records were overwritten before we read them; go on with the next.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("reading /dev/kmsg: {e}");
                break;
            }
        }
    }
}

/// The message of one `/dev/kmsg` record: "prio,seq,usec,flags;text" then optional
/// " KEY=value" continuation lines.
fn kmsg_message(record: &str) -> Option<&str> {
    let first = record.lines().next()?;
    first.split_once(';').map(|(_, m)| m)
}

fn record(line: &str, names: &[String], events: &Mutex<Vec<KernelLogEvent>>) {
    if let Some(device) = matching_device(line, names) {
        events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(KernelLogEvent {
                device: device.to_string(),
                message: line.trim_end().to_string(),
                seen_at: Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
            });
    }
}

/// The watched device `line` reports trouble on, if any.
pub(crate) fn matching_device<'a>(line: &str, names: &'a [String]) -> Option<&'a str> {
    let lower = line.to_ascii_lowercase();
    if !TROUBLE.iter().any(|w| lower.contains(w)) {
        return None;
    }
    names
        .iter()
        .find(|n| names_word(line, n))
        .map(String::as_str)
}

/// Whether `name` occurs in `line` as a whole word (not inside `sda1` when watching
/// `sda`, nor inside `loop10` when watching `loop1`).
fn names_word(line: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    line.match_indices(name).any(|(i, _)| {
        !word(line[..i].chars().next_back()) && !word(line[i + name.len()..].chars().next())
    })
}

/// The watched devices, the whole disks of partitions among them, and the devices
/// beneath dm and md devices (their `slaves`), from `/sys/class/block`.
fn related_devices(devices: &[MonitoredDevice]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let push = |n: String, out: &mut Vec<String>| {
        if !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    };
    for d in devices {
        let mut todo = vec![d.name.clone()];
        while let Some(name) = todo.pop() {
            if out.contains(&name) {
                continue;
            }
            let sys = Path::new("/sys/class/block").join(&name);
            push(name.clone(), &mut out);
            if sys.join("partition").exists()
                && let Ok(real) = fs::canonicalize(&sys)
                && let Some(parent) = real.parent().and_then(|p| p.file_name())
            {
                todo.push(parent.to_string_lossy().into_owned());
            }
            if let Ok(slaves) = fs::read_dir(sys.join("slaves")) {
                for s in slaves.flatten() {
                    todo.push(s.file_name().to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_line_counts_when_it_names_a_watched_device_with_trouble() {
        let n = names(&["sda1", "sda", "loop1"]);
        let io = "blk_update_request: I/O error, dev sda, sector 2048 op 0x1:(WRITE)";
        assert_eq!(matching_device(io, &n), Some("sda"));
        let fs = "EXT4-fs error (device sda1): ext4_find_entry:1455: reading directory";
        assert_eq!(matching_device(fs, &n), Some("sda1"));
        let reset = "ata1.00: exception Emask 0x0 SAct 0x0; hard resetting link sda";
        assert_eq!(matching_device(reset, &n), Some("sda"));
        assert_eq!(
            matching_device(
                "sd 0:0:0:0: [sda] tag#3 timing out command, waited 180s",
                &n
            ),
            Some("sda")
        );
        assert_eq!(
            matching_device(
                "sd 2:0:0:0: [sda] tag#1 FAILED Result: hostbyte=DID_TIME_OUT",
                &n
            ),
            Some("sda")
        );
    }

    #[test]
    fn other_devices_and_harmless_lines_do_not_count() {
        let n = names(&["sda", "loop1"]);
        assert_eq!(matching_device("I/O error, dev sdb, sector 8", &n), None);
        assert_eq!(matching_device("I/O error, dev loop10, sector 8", &n), None);
        assert_eq!(
            matching_device("Buffer I/O error on dev sda2, block 4", &n),
            None
        );
        assert_eq!(
            matching_device(
                "EXT4-fs (sda): mounted filesystem with ordered data mode",
                &n
            ),
            None
        );
        assert_eq!(
            matching_device("print_req_error: I/O error, dev loop1, sector 0", &n),
            Some("loop1")
        );
    }

    #[test]
    fn kmsg_records_give_their_message() {
        let r = "3,1234,5678901,-;blk_update_request: I/O error, dev vda\n SUBSYSTEM=block\n";
        assert_eq!(
            kmsg_message(r),
            Some("blk_update_request: I/O error, dev vda")
        );
        assert_eq!(kmsg_message("garbage"), None);
    }
}
