//! `edbstress run` end to end through the binary: a short run, a clean Ctrl-C, and
//! configuration errors.

use crate::suite::common;
use common::{command, results, run_dirs};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A short run on two small databases under `dir`, through the page cache.
const SMALL: &[&str] = &[
    "run",
    "--allow-cached-databases",
    "--databases",
    "2",
    "--database-size",
    "32MiB",
    "--cache-max",
    "8MiB",
    "--cache-min",
    "4MiB",
    "--threads",
    "4",
    "--sample-interval",
    "1s",
    "--bdm-rate",
    "20",
    "--copies",
    "2",
    "--buffered",
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
];

#[test]
fn a_short_run_prints_the_verdict_and_writes_a_complete_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let out = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "3s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("Performance test: "), "{stdout}");
    assert!(stdout.contains("report: "), "{stdout}");
    assert!(stderr.contains("Attaining prerequisites"), "{stderr}");
    let dirs = run_dirs(tmp.path());
    assert_eq!(dirs.len(), 1);
    for f in [
        "config.toml",
        "test.log",
        "samples.csv",
        "report.html",
        "results.json",
    ] {
        assert!(dirs[0].join(f).is_file(), "{f}");
    }
    let r = results(&dirs[0]);
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["aborted"], false);
    let expected = if out.status.code() == Some(0) {
        "Pass"
    } else {
        "Fail"
    };
    assert_eq!(r["overall_result"], expected);
    for class in [
        "db_read",
        "db_write",
        "log_write",
        "log_read",
        "bdm_read",
        "replication_read",
    ] {
        for key in [
            "count",
            "per_sec",
            "avg_bytes",
            "avg_latency_ms",
            "max_interval_latency_ms",
            "p50_ms",
            "p90_ms",
            "p99_ms",
            "p999_ms",
            "max_ms",
        ] {
            assert!(
                r["totals"]["io"][class][key].is_number(),
                "totals.io.{class}.{key}"
            );
            assert!(
                r["instances"][0]["io"][class][key].is_number(),
                "instances[0].io.{class}.{key}"
            );
        }
    }
    // The effective configuration repeats the run.
    let again = command(tmp.path())
        .args(["config", "show", "--config"])
        .arg(dirs[0].join("config.toml"))
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn ctrl_c_stops_cleanly_and_writes_an_aborted_result() {
    let tmp = tempfile::tempdir().unwrap();
    let child = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "10m"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until measurement has started, then interrupt.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let started = run_dirs(tmp.path()).first().is_some_and(|d| {
            std::fs::read_to_string(d.join("test.log"))
                .is_ok_and(|t| t.contains("Performance logging started"))
        });
        if started {
            break;
        }
        assert!(Instant::now() < deadline, "the run did not start measuring");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // kill -INT is what a terminal sends on Ctrl-C.
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let dirs = run_dirs(tmp.path());
    let r = results(&dirs[0]);
    assert_eq!(r["aborted"], true);
    assert_eq!(r["overall_result"], "Fail");
    assert!(r["measured_seconds"].as_f64().unwrap() > 1.0);
    assert!(r["totals"]["io"]["db_read"]["count"].as_u64().unwrap() > 0);
    // The databases were shut down cleanly: an offline checksum passes and a new run
    // opens them without recovery.
    let check = command(tmp.path())
        .args([
            "checksum",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--buffered",
        ])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let again = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "1s", "--no-verify"])
        .output()
        .unwrap();
    assert!(
        matches!(again.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn bad_configuration_is_a_clear_error_with_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = command(tmp.path())
        .args(["run", "--op-mix", "50/50/50/50", "--results-dir", "results"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("op"), "{stderr}");
    assert!(
        !tmp.path().join("results").exists(),
        "nothing is written for a bad configuration"
    );
}

#[test]
fn without_a_terminal_a_run_logs_progress_lines_to_stderr_and_the_test_log() {
    let tmp = tempfile::tempdir().unwrap();
    let stderr_path = tmp.path().join("stderr.txt");
    let stderr_file = std::fs::File::create(&stderr_path).unwrap();
    let status = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "4s"])
        // A second instead of a minute, so a short run shows several lines.
        .env("EDBSTRESS_PROGRESS_INTERVAL", "1s")
        .stdout(Stdio::null())
        .stderr(stderr_file)
        .status()
        .unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        status.code() == Some(0) || status.code() == Some(1),
        "{stderr}"
    );
    let measuring: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Progress: measuring, "))
        .collect();
    assert!(measuring.len() >= 2, "{stderr}");
    for line in &measuring {
        assert!(line.contains(" elapsed, "), "{line}");
        assert!(line.contains(" transactions/s"), "{line}");
        assert!(line.contains("Database Reads "), "{line}");
        assert!(line.contains(" ms"), "{line}");
    }
    assert!(stderr.contains("Progress is logged every 1s."), "{stderr}");
    let dirs = run_dirs(tmp.path());
    let log = std::fs::read_to_string(dirs[0].join("test.log")).unwrap();
    for line in &measuring {
        assert!(log.contains(line), "test.log lacks {line}:\n{log}");
    }
}

#[test]
fn a_bad_progress_interval_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "4s"])
        .env("EDBSTRESS_PROGRESS_INTERVAL", "soon")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("EDBSTRESS_PROGRESS_INTERVAL"), "{stderr}");
    assert!(run_dirs(tmp.path()).is_empty(), "nothing ran");
}

/// With copies, circular logging removes a generation only once every replication
/// reader has read it (the readers' retention floor): a run whose checkpoint depth is
/// far below the log it writes ships every generation, misses none, and still deletes
/// the generations behind the readers.
#[test]
fn replication_readers_hold_circular_logging_until_they_have_read_each_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let out = command(tmp.path())
        .args(SMALL)
        .args(["--duration", "3s", "--checkpoint-depth", "1MiB"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{stderr}"
    );
    let dirs = run_dirs(tmp.path());
    let log = std::fs::read_to_string(dirs[0].join("test.log")).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Log replication of Instance"))
        .collect();
    assert_eq!(lines.len(), 2, "one line per database:\n{log}");
    for line in lines {
        eprintln!("{line}");
        let number = |before: &str| -> u64 {
            let head = &line[..line.find(before).unwrap_or_else(|| panic!("{line}"))];
            head.rsplit(" ")
                .next()
                .unwrap()
                .replace(',', "")
                .parse()
                .unwrap()
        };
        assert_eq!(number(" removed before"), 0, "{line}");
        assert!(number(" log files shipped") > 4, "{line}");
        let deleted: u64 = line
            .rsplit("deleted ")
            .next()
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(deleted > 0, "the floor let read generations go: {line}");
    }
}
