//! Full disks and read errors through the binary. The full-disk cases need a small
//! filesystem: a 64 MiB tmpfs, which only root can mount; otherwise they are skipped
//! with a message. Results always go to another filesystem (the test's temp dir), so
//! the run directory stays readable when the database filesystem is full.

use crate::suite::common;
use common::{command, text};

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
        // A child of a test running in parallel can hold a descriptor of ours for a
        // moment (between its fork and exec): retry, then detach lazily, so no mount
        // outlives the test.
        for _ in 0..20 {
            let unmounted = Command::new("umount")
                .arg(self.dir.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if unmounted {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
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
    // The abort is the first failed criterion, carrying its cause; nothing that was
    // not measured passes on zeros.
    let criteria = results["criteria"].as_array().unwrap();
    assert_eq!(criteria[0]["key"], "run_aborted", "{results}");
    assert_eq!(criteria[0]["passed"], false);
    assert_eq!(criteria[0]["note"].as_str(), Some(reason));
    for c in criteria {
        if c["not_measured"] == true {
            assert_eq!(c["passed"], false, "{c}");
        }
    }
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
    let out = command(tmp.path())
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

    let out = command(tmp.path())
        .args(["run", "--databases", "2", "--database-size", "48MiB"])
        .args(["--buffered", "--duration", "2s", "--sample-interval", "1s"])
        .arg("--allow-cached-databases")
        .arg("--db-path")
        .arg(&db)
        .arg("--log-path")
        .arg(&logs)
        .args(["--results-dir", "results"])
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    // The refusal names what is needed and the one fix that makes the run fit.
    assert!(message.contains("the run needs"), "{message}");
    assert!(message.contains("add `--database-size"), "{message}");
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "nothing created"
    );
    // Found before anything ran: no run directory claiming a failed test.
    assert!(
        !tmp.path().join("results").exists(),
        "a run refused for space leaves no run directory"
    );
}

#[test]
fn a_run_whose_expected_database_growth_does_not_fit_is_refused_before_writing() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let db = fs.path().join("db");
    let logs = fs.path().join("logs");
    // 8 MiB database and ~28 MiB of log fit in 64 MiB; 1,050 IOPS for 60 s at the
    // budgeted growth per I/O (~100 MiB) does not.
    let out = command(tmp.path())
        .args(["run", "--profile", "exchange2010", "--databases", "1"])
        .args(["--database-size", "8MiB", "--mailboxes", "1000"])
        .args(["--iops-per-mailbox", "1", "--buffered", "--duration", "60s"])
        // The database is tiny on purpose (the filesystem is): the cache guard is not
        // what this test is about.
        .arg("--allow-cached-databases")
        .arg("--db-path")
        .arg(&db)
        .arg("--log-path")
        .arg(&logs)
        .args(["--results-dir", "results"])
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(message.contains("growth expected"), "{message}");
    assert!(message.contains("--duration"), "{message}");
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        0,
        "nothing created"
    );
}

#[test]
fn a_jetstress_paced_run_stops_for_space_at_its_growth_limit_before_the_filesystem_fills() {
    let Some(fs) = SmallFs::mount("96m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("small.toml"),
        "checkpoint_depth = \"4MiB\"\n",
    )
    .unwrap();
    // A target of 1.2 IOPS passes the free-space check; closed loop at 4 threads with
    // an insert-heavy mix grows the database far faster, until the engine's limit of
    // the measured phase (nine tenths of the free space) refuses to grow it further.
    let out = command(tmp.path())
        .args(["run", "--config", "small.toml", "--databases", "1"])
        .args(["--database-size", "16MiB", "--mailboxes", "10"])
        .args(["--cache-max", "4MiB", "--cache-min", "4MiB"])
        .args(["--pacing", "jetstress", "--threads", "4", "--buffered"])
        .args(["--bdm", "off", "--no-verify", "--allow-cached-databases"])
        .args(["--duration", "120s", "--sample-interval", "1s"])
        .args(["--op-mix", "80/0/20/0", "--db-path"])
        .arg(fs.path().join("db"))
        .arg("--log-path")
        .arg(fs.path().join("logs"))
        .args(["--results-dir", "results"])
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(1), "{message}");
    let dir = std::fs::read_dir(tmp.path().join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_to_string(dir.join("test.log")).unwrap();
    assert!(
        log.contains("The engine holds the measured phase's growth to"),
        "{log}"
    );
    assert!(
        log.contains("reached the measured phase's growth limit"),
        "{log}"
    );
    assert!(
        !log.contains("is full"),
        "the filesystem never filled: {log}"
    );
    let free = edbstress_io::available_space(fs.path()).unwrap();
    assert!(free > 4 << 20, "{free} bytes left: {log}");
}

/// Runs a small insert-heavy test with its databases under `db_root` and its logs
/// under `log_root`; once transactions flow, something else takes every free byte of
/// `full` (and keeps taking what circular logging frees), as a full disk does. Returns
/// the output and the run directory.
fn run_until_full(tmp: &Path, db_root: &Path, log_root: &Path, full: &Path) -> (Output, PathBuf) {
    std::fs::write(tmp.join("small.toml"), "checkpoint_depth = \"4MiB\"\n").unwrap();
    let mut child = command(tmp)
        .args(["run", "--config", "small.toml", "--databases", "1"])
        .args(["--database-size", "32MiB", "--buffered", "--threads", "4"])
        .arg("--allow-cached-databases")
        .args(["--duration", "60s", "--sample-interval", "1s", "--op-mix"])
        .args(["80/0/20/0", "--db-path"])
        .arg(db_root.join("db"))
        .arg("--log-path")
        .arg(log_root.join("logs"))
        .args(["--results-dir", "results"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let results = tmp.join("results");
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
        let (done, path) = (done.clone(), full.join("filler"));
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
    (out, only_run_dir(&results))
}

/// The message of a run stopped by a full filesystem: no panic, the OS's words, and
/// `place` is full, naming `dir`, with what `action` needed and how much was available.
fn assert_full_message(out: &Output, place: &str, dir: &Path, action: &str) {
    let message = text(out);
    assert!(!out.status.success(), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(message.contains("No space left"), "{message}");
    let full = format!("the {place} {} is full: {action}", dir.display());
    assert!(message.contains(&full), "{full:?} not in {message}");
    // "... needs 1.0 MiB, 0 B available": the figures, as numbers with units.
    let figures = message[message.find(&full).unwrap()..].to_string();
    let needs = figures.find(" needs ").expect("the space needed");
    let available = figures.find(" available").expect("the space available");
    assert!(needs < available, "{figures}");
    assert!(
        figures[needs..available].contains("iB") || figures[needs..available].contains(" B"),
        "{figures}"
    );
}

#[test]
fn a_run_that_fills_the_database_disk_stops_with_the_path_and_the_space_needed() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (out, run_dir) = run_until_full(tmp.path(), fs.path(), tmp.path(), fs.path());
    let db_dir = fs.path().join("db");
    assert_full_message(
        &out,
        "database directory",
        &db_dir,
        "growing edbstress001.edb by",
    );
    assert_failure_recorded(&run_dir, "No space left");
    assert_failure_recorded(&run_dir, "available");
}

#[test]
fn a_run_that_fills_the_log_disk_stops_with_the_path_and_the_space_needed() {
    let Some(fs) = SmallFs::mount("64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (out, run_dir) = run_until_full(tmp.path(), tmp.path(), fs.path(), fs.path());
    let log_dir = fs.path().join("logs/edbstress001");
    assert_full_message(
        &out,
        "log directory",
        &log_dir,
        "creating log file E00tmp.log needs 1.0 MiB",
    );
    assert_failure_recorded(&run_dir, "log directory");
}

#[test]
fn a_full_results_disk_is_reported_with_the_space_needed() {
    let Some(fs) = SmallFs::mount("16m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut filler = std::fs::File::create(fs.path().join("filler")).unwrap();
    let chunk = vec![0xa5u8; 64 << 10];
    while filler.write_all(&chunk).is_ok() {}
    drop(filler);
    let out = command(tmp.path())
        .args(["run", "--databases", "1", "--database-size", "32MiB"])
        .arg("--allow-cached-databases")
        .args(["--buffered", "--duration", "2s", "--sample-interval", "1s"])
        .args(["--db-path", "db", "--log-path", "logs", "--results-dir"])
        .arg(fs.path().join("results"))
        .output()
        .unwrap();
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    let run_dir = only_run_dir(&fs.path().join("results"));
    assert_full_message(
        &out,
        "results directory",
        &run_dir,
        "writing config.toml needs",
    );
    assert!(message.contains("0 B available"), "{message}");
    assert!(!tmp.path().join("db").exists(), "nothing prepared");
}

#[test]
fn a_truncated_database_is_an_io_error_naming_path_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let out = command(t)
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
    let out = command(t)
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
