//! Crash loops: a running Performance test is killed with SIGKILL at a random moment,
//! again and again on the same databases, recovering each time; every recovery must
//! succeed without a lost flush, every checksum verification must be clean, and the run
//! after the last recovery must pass.
//!
//! Two cycles by default; `EDBSTRESS_LONG_TESTS=1` runs 25.

use crate::suite::common;
use common::{command, edbstress};

use std::process::Stdio;
use std::time::{Duration, Instant};

/// A small open-loop Performance run (target 50 IOPS) under `dir`. The schedule offers
/// 1.5 × the target with loose latency limits (`margin.toml`): a few seconds of Poisson
/// arrivals or latency noise on a busy CI machine must not decide whether the last run
/// passes.
const RUN: &[&str] = &[
    "run",
    "--allow-cached-databases",
    "--config",
    "margin.toml",
    "--mailboxes",
    "100",
    "--iops-per-mailbox",
    "0.5",
    "--databases",
    "2",
    "--database-size",
    "32MiB",
    "--cache-max",
    "8MiB",
    "--cache-min",
    "4MiB",
    "--copies",
    "2",
    "--bdm-rate",
    "20",
    "--sample-interval",
    "1s",
    "--buffered",
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
];

/// A pseudo-random number from the clock (reproducibility is not the point here: each
/// cycle kills at another moment; the moment is printed).
fn jitter(max_ms: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    u64::from(nanos) % max_ms
}

#[test]
fn killed_performance_runs_recover_cleanly_and_the_next_run_passes() {
    let cycles = if std::env::var("EDBSTRESS_LONG_TESTS").is_ok_and(|v| v == "1") {
        25
    } else {
        2
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // The latency limits are loosened too: this test is about recovery, and a 5-second
    // run on a loaded machine can miss a 10 ms average by noise alone.
    std::fs::write(
        dir.join("margin.toml"),
        "target_margin = 1.5\n[thresholds]\ndb_read_avg_ms = 1000.0\ndb_read_max_ms = 10000.0\n\
         log_write_avg_ms = 1000.0\nlog_write_max_ms = 10000.0\n",
    )
    .unwrap();
    // Create the databases once, so every cycle kills a run of the same ones.
    let first = edbstress(&[RUN, &["--duration", "1s", "--no-verify"]].concat(), dir);
    assert!(
        matches!(first.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for cycle in 0..cycles {
        let mut child = command(dir)
            .args(RUN)
            .args(["--duration", "10m"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Anywhere from attaching to well into the measured period.
        let after = Duration::from_millis(300 + jitter(4000));
        let started = Instant::now();
        while started.elapsed() < after {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended by itself"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Recovery must find no lost flush; then every page, log segment and tree is intact.
        for command in ["recover", "checksum", "check"] {
            let out = edbstress(
                &[
                    command,
                    "--db-path",
                    "db",
                    "--log-path",
                    "logs",
                    "--buffered",
                ],
                dir,
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "cycle {cycle} (killed after {after:?}): `{command}` failed\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        println!("cycle {cycle}: killed after {after:?}, recovered, checksums clean");
    }
    let last = edbstress(&[RUN, &["--duration", "5s"]].concat(), dir);
    assert_eq!(
        last.status.code(),
        Some(0),
        "the run after the last recovery must pass\n{}{}",
        String::from_utf8_lossy(&last.stdout),
        String::from_utf8_lossy(&last.stderr)
    );
    // Killed runs leave a test log and config.toml, never a partial results.json.
    for entry in std::fs::read_dir(dir.join("results")).unwrap() {
        let run_dir = entry.unwrap().path();
        assert!(run_dir.join("test.log").is_file());
        let leftovers: Vec<_> = std::fs::read_dir(&run_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(
            leftovers.is_empty(),
            "{leftovers:?} in {}",
            run_dir.display()
        );
    }
}
