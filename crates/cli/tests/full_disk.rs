//! Full disks and read errors through the binary. The full-disk cases need a small
//! filesystem: a 64 MiB tmpfs, which only root can mount; otherwise they are skipped
//! with a message. Results always go to another filesystem (the test's temp dir), so
//! the run directory stays readable when the database filesystem is full.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A small tmpfs mounted for one test, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            eprintln!("skipping: mounting a small tmpfs needs root (run the tests as root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipping: cannot mount a tmpfs here");
            return None;
        }
        Some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn edbstress(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_edbstress"));
    c.current_dir(dir).stdin(Stdio::null());
    c
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn only_run_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.into_iter().next().unwrap()
}

/// The run directory tells what happened: aborted, failed, the reason naming `word`,
/// the reason in test.log, and no partial files.
fn assert_failure_recorded(run_dir: &Path, word: &str) {
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["aborted"], true, "{results}");
    assert_eq!(results["overall_result"], "Fail");
    let reason = results["abort_reason"].as_str().unwrap();
    assert!(reason.contains(word), "{reason}");
    let log = std::fs::read_to_string(run_dir.join("test.log")).unwrap();
    assert!(log.contains("aborted"), "{log}");
    for entry in std::fs::read_dir(run_dir).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(
            !name.to_string_lossy().ends_with(".tmp"),
            "partial file {name:?} left"
        );
    }
}

#[test]
fn prepare_and_run_bigger_than_free_space_are_refused_before_writing() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = fs.path().join("db");
    let logs = fs.path().join("logs");
    let out = edbstress(tmp.path())
        .args(["prepare", "--databases", "2", "--database-size", "48MiB"])
        .args(["--buffered", "--db-path"])
        .arg(&db)
        .arg("--log-path")
        .arg(&logs)
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(
        message.contains(&fs.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("needed"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "nothing created"
    );

    let out = edbstress(tmp.path())
        .args(["run", "--databases", "2", "--database-size", "48MiB"])
        .args(["--buffered", "--duration", "2s", "--sample-interval", "1s"])
        .arg("--db-path")
        .arg(&db)
        .arg("--log-path")
        .arg(&logs)
        .args(["--results-dir", "results"])
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(message.contains("needed"), "{message}");
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "nothing created"
    );
    assert_failure_recorded(&only_run_dir(&tmp.path().join("results")), "needed");
}

#[test]
fn a_run_that_fills_the_disk_stops_with_the_path_and_records_the_failure() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("small.toml"),
        "checkpoint_depth = \"4MiB\"\n",
    )
    .unwrap();
    let mut child = edbstress(tmp.path())
        .args(["run", "--config", "small.toml", "--databases", "1"])
        .args(["--database-size", "32MiB", "--buffered", "--threads", "4"])
        .args(["--duration", "60s", "--sample-interval", "1s", "--op-mix"])
        .args(["80/0/20/0", "--db-path"])
        .arg(fs.path().join("db"))
        .arg("--log-path")
        .arg(fs.path().join("logs"))
        .args(["--results-dir", "results"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once transactions flow, something else takes every free byte of the filesystem
    // (and keeps taking what circular logging frees), as a full disk does.
    let results = tmp.path().join("results");
    let started = Instant::now();
    loop {
        let dispatching = std::fs::read_dir(&results)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("test.log")).ok())
            .is_some_and(|log| log.contains("Starting transaction dispatch"));
        if dispatching {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run never started"
        );
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("run ended early ({status}): {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let done = Arc::new(AtomicBool::new(false));
    let filler = {
        let (done, path) = (done.clone(), fs.path().join("filler"));
        std::thread::spawn(move || {
            let mut file = std::fs::File::create(path).unwrap();
            let chunk = vec![0xa5u8; 64 << 10];
            while !done.load(Ordering::Relaxed) {
                if file.write_all(&chunk).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    let out = child.wait_with_output().unwrap();
    done.store(true, Ordering::Relaxed);
    filler.join().unwrap();
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(message.contains("No space left"), "{message}");
    assert!(
        message.contains(&fs.path().display().to_string()),
        "{message}"
    );
    assert_failure_recorded(&only_run_dir(&results), "No space left");
}

#[test]
fn a_truncated_database_is_an_io_error_naming_path_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let out = edbstress(t)
        .args(["prepare", "--databases", "1", "--database-size", "32MiB"])
        .args(["--buffered", "--db-path", "db", "--log-path", "logs"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // Cut the file in half: reads of the second half come back short.
    let db = t.join("db/edbstress001.edb");
    let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    file.set_len(16 << 20).unwrap();
    drop(file);
    let out = edbstress(t)
        .args([
            "checksum",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ])
        .output()
        .unwrap();
    let message = text(&out);
    assert!(!out.status.success(), "{message}");
    assert!(message.contains("edbstress001.edb"), "{message}");
    assert!(message.contains("offset"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
}
