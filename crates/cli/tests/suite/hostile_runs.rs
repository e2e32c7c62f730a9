//! Attacks on runs and their inputs: a stopped process must not pass, an
//! absurd duration must not panic, a truncated or forged database must not be reused,
//! and a results file, a signal or an out-of-range value must never yield a false Pass
//! or an unbounded message. Every test runs the real binary on real files and checks
//! that nothing outside the paths it gave was touched.

use crate::suite::common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Sentinel, assert_exit, command, edbstress, results, run_dirs, stderr, stdout, text};

/// Small databases through the page cache, one per test directory.
const PATHS: &[&str] = &[
    "--buffered",
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
];

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "--databases",
        "1",
        "--database-size",
        "16MiB",
        "--cache-max",
        "4MiB",
        "--cache-min",
        "2MiB",
        "--threads",
        "2",
        "--sample-interval",
        "1s",
        "--copies",
        "1",
        "--bdm",
        "off",
        // Tiny buffered databases: these runs are about attacks, not latency.
        "--allow-cached-databases",
    ];
    args.extend_from_slice(PATHS);
    args.extend_from_slice(extra);
    args
}

fn prepare(dir: &Path, size: &str) {
    let mut args = vec!["prepare", "--databases", "1", "--database-size", size];
    args.extend_from_slice(&PATHS[..5]);
    let out = edbstress(&args, dir);
    assert_exit(&out, 0, "prepare");
}

fn test_log(dir: &Path) -> String {
    run_dirs(dir)
        .first()
        .and_then(|d| std::fs::read_to_string(d.join("test.log")).ok())
        .unwrap_or_default()
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig}");
}

/// Waits until the run's test.log contains `line` (panics after `limit`).
fn wait_for_log(dir: &Path, child: &mut Child, line: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !test_log(dir).contains(line) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before logging {line:?}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no {line:?} in test.log within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The child's output once it exits; killed (by its PID) if it outlives `limit`.
fn finish(mut child: Child, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; killed\nstdout:\n{}\nstderr:\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), started.elapsed())
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    command(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A run whose process is stopped for many sample intervals fails with the
/// named stall, recorded in results.json, test.log and the summary.
#[test]
fn a_stopped_run_fails_with_a_sampling_stall() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let mut child = spawn(tmp.path(), &run_args(&["--duration", "6s"]));
    wait_for_log(
        tmp.path(),
        &mut child,
        "Performance logging started",
        Duration::from_secs(120),
    );
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "-STOP");
    std::thread::sleep(Duration::from_secs(9));
    signal(&child, "-CONT");
    let (out, _) = finish(child, Duration::from_secs(120));
    assert_exit(&out, 1, "stalled run");
    assert!(
        stdout(&out).contains("sampling stalled: interval"),
        "{}",
        text(&out)
    );
    let dir = &run_dirs(tmp.path())[0];
    let r = results(dir);
    assert_eq!(r["overall_result"], "Fail");
    let stalls = r["sampling_stalls"].as_array().expect("sampling_stalls");
    assert!(!stalls.is_empty());
    assert!(stalls[0]["seconds"].as_f64().unwrap() > 6.0, "{stalls:?}");
    assert_eq!(stalls[0]["expected_seconds"], 1.0);
    let failed: Vec<&str> = r["failed_criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(failed.contains(&"sampling_stalls"), "{failed:?}");
    let log = std::fs::read_to_string(dir.join("test.log")).unwrap();
    assert!(log.contains("sampling stalled: interval"), "{log}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("sampling stalled: interval"));
    sentinel.assert_untouched();
}

/// A duration no clock can add is refused before anything is created, with
/// the limit named; never a panic that leaves a database in use.
#[test]
fn an_absurd_duration_is_refused_with_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let huge = "9223372036854775807";
    for (flag, args) in [
        ("--duration", vec!["--duration", huge]),
        (
            "--sample-interval",
            vec!["config", "show", "--sample-interval", huge],
        ),
    ] {
        let args = if args[0] == "config" {
            args
        } else {
            run_args(&args)
        };
        let child = spawn(tmp.path(), &args);
        let (out, _) = finish(child, Duration::from_secs(60));
        assert_exit(&out, 2, flag);
        let msg = stderr(&out);
        assert!(
            msg.contains("too long") && msg.contains("365 days"),
            "{msg}"
        );
        assert!(!msg.contains("panicked"), "{msg}");
    }
    std::fs::write(
        tmp.path().join("long.toml"),
        "warmup_timeout = 9223372036854775807\n",
    )
    .unwrap();
    let out = edbstress(&["config", "show", "--config", "long.toml"], tmp.path());
    assert_exit(&out, 2, "warmup_timeout");
    assert!(stderr(&out).contains("warmup_timeout"), "{}", text(&out));
    assert!(!tmp.path().join("db").exists(), "nothing is prepared");
    sentinel.assert_untouched();
}

/// A truncated database is named as damaged by prepare, check, checksum and
/// run (exit 1, the fix in the message), left as it is, and rebuilt by --recreate.
#[test]
fn a_truncated_database_is_damaged_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    prepare(tmp.path(), "16MiB");
    let db = tmp.path().join("db/edbstress001.edb");
    let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    file.set_len(8 << 20).unwrap();
    drop(file);
    let expected = "truncated: the file has 8388608 bytes, its header says 16777216";
    let mut prep = vec!["prepare", "--databases", "1", "--database-size", "16MiB"];
    prep.extend_from_slice(&PATHS[..5]);
    let out = edbstress(&prep, tmp.path());
    assert_exit(&out, 1, "prepare");
    assert!(text(&out).contains(expected), "{}", text(&out));
    assert!(text(&out).contains("prepare --recreate"), "{}", text(&out));
    assert!(!text(&out).contains("reuse"), "{}", text(&out));
    for cmd in ["check", "checksum"] {
        let out = edbstress(
            &[cmd, "--buffered", "--db-path", "db", "--log-path", "logs"],
            tmp.path(),
        );
        assert_exit(&out, 1, cmd);
        assert!(text(&out).contains(expected), "{cmd}: {}", text(&out));
        assert!(!text(&out).contains("fill whole buffer"), "{}", text(&out));
    }
    let child = spawn(tmp.path(), &run_args(&["--duration", "2s"]));
    let (out, _) = finish(child, Duration::from_secs(120));
    assert_exit(&out, 1, "run");
    assert!(text(&out).contains(expected), "{}", text(&out));
    let r = results(&run_dirs(tmp.path())[0]);
    assert_eq!(r["overall_result"], "Fail");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 8 << 20, "left alone");
    prep.push("--recreate");
    let out = edbstress(&prep, tmp.path());
    assert_exit(&out, 0, "prepare --recreate");
    let out = edbstress(
        &[
            "check",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        tmp.path(),
    );
    assert_exit(&out, 0, "check after --recreate");
    sentinel.assert_untouched();
}

/// Random bytes carrying a copied signature are not a database: prepare
/// neither reuses nor overwrites them, and no command takes them for one.
#[test]
fn random_data_with_a_copied_signature_is_not_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    std::fs::create_dir_all(tmp.path().join("db")).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes: Vec<u8> = (0..16 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    bytes[8..16].copy_from_slice(b"EDBSTRES");
    let db = tmp.path().join("db/edbstress001.edb");
    std::fs::write(&db, &bytes).unwrap();
    let mut prep = vec!["prepare", "--databases", "1", "--database-size", "16MiB"];
    prep.extend_from_slice(&PATHS[..5]);
    for args in [prep.clone(), {
        let mut a = prep.clone();
        a.push("--recreate");
        a
    }] {
        let out = edbstress(&args, tmp.path());
        assert_exit(&out, 1, "prepare");
        let msg = text(&out);
        assert!(
            msg.contains("not a valid edbstress database") && msg.contains("bad header checksum"),
            "{msg}"
        );
        assert!(!msg.contains("reuse"), "{msg}");
    }
    let out = edbstress(
        &[
            "check",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        tmp.path(),
    );
    assert_exit(&out, 1, "check");
    assert!(
        text(&out).contains("not a valid edbstress database"),
        "{}",
        text(&out)
    );
    let child = spawn(tmp.path(), &run_args(&["--duration", "2s"]));
    let (out, _) = finish(child, Duration::from_secs(120));
    assert_exit(&out, 1, "run");
    assert!(
        text(&out).contains("not a valid edbstress database"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "the file is untouched");
    sentinel.assert_untouched();
}

/// A results.json whose stored verdict its criteria contradict is shown with
/// the derived verdict, and said to be inconsistent, in every rendering.
#[test]
fn a_hand_edited_verdict_is_re_derived_everywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    // A real results.json, of a short run.
    let out = edbstress(&run_args(&["--duration", "2s"]), tmp.path());
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let dir = run_dirs(tmp.path()).remove(0);
    let mut r = results(&dir);
    let criterion = |key: &str, measured: f64, passed: bool| {
        serde_json::json!({"key": key, "name": key, "scope": "Total", "measured": measured,
            "threshold": 20.0, "comparison": "at_most", "unit": "ms", "passed": passed})
    };
    r["aborted"] = false.into();
    r.as_object_mut().unwrap().remove("abort_reason");
    r["overall_result"] = "Pass".into();
    r["failed_criteria"] = serde_json::json!([]);
    r["criteria"] = serde_json::json!([
        criterion("db_read_avg_latency", 23.4, false),
        criterion("log_write_avg_latency", 31.0, true),
        criterion("db_read_max_latency", 5.0, true),
    ]);
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(&r).unwrap(),
    )
    .unwrap();
    let d = dir.to_str().unwrap();
    let md = edbstress(
        &["report", d, "--format", "md", "--output", "-"],
        tmp.path(),
    );
    assert_exit(&md, 0, "report md");
    let md = stdout(&md);
    assert!(md.contains("test: **FAIL**"), "{md}");
    assert!(!md.contains("**PASS**"), "{md}");
    assert!(md.contains("2 of 3 criteria not met"), "{md}");
    assert!(md.contains("inconsistent"), "{md}");
    let junit = stdout(&edbstress(
        &["report", d, "--format", "junit", "--output", "-"],
        tmp.path(),
    ));
    assert!(
        junit.contains("name=\"overall_result\" value=\"Fail\""),
        "{junit}"
    );
    assert!(junit.contains("inconsistent"), "{junit}");
    let out = edbstress(&["report", d], tmp.path());
    assert_exit(&out, 0, "report html");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Overall Test Result: Fail."));
    assert!(!html.contains("Overall Test Result: Pass."));
    assert!(html.contains("inconsistent"));
    let out = edbstress(&["compare", d, d], tmp.path());
    assert_exit(&out, 0, "compare");
    assert!(stdout(&out).contains("Fail (derived"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("Pass"), "{}", stdout(&out));
    sentinel.assert_untouched();
}

/// SIGTERM while the databases are verified after the run stops the run
/// promptly and marks it aborted (exit 130), never Pass.
#[test]
fn sigterm_during_verification_aborts_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let mut args = run_args(&["--duration", "2s"]);
    // Databases large enough that verifying them takes a while.
    args[2] = "2";
    args[4] = "96MiB";
    let mut child = spawn(tmp.path(), &args);
    wait_for_log(
        tmp.path(),
        &mut child,
        "Verifying database and log checksums",
        Duration::from_secs(180),
    );
    signal(&child, "-TERM");
    let (out, took) = finish(child, Duration::from_secs(60));
    assert_exit(&out, 130, "SIGTERM during verification");
    assert!(took < Duration::from_secs(10), "stopped after {took:?}");
    let dir = &run_dirs(tmp.path())[0];
    let r = results(dir);
    assert_eq!(r["aborted"], true);
    assert_eq!(r["overall_result"], "Fail");
    let log = std::fs::read_to_string(dir.join("test.log")).unwrap();
    assert!(log.contains("The test was aborted"), "{log}");
    sentinel.assert_untouched();
}

/// Values that would make a target of inf, a cache larger than memory and a
/// 10 MB string in a configuration file each get one short, correct message (exit 2).
#[test]
fn out_of_range_values_get_short_correct_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["--mailboxes", "100", "--iops-per-mailbox", "1e308"],
            &["iops_per_mailbox", "at most 1000"],
        ),
        (
            &["--mailboxes", "100", "--iops-per-mailbox", "NaN"],
            &["iops_per_mailbox"],
        ),
        (
            &["--cache-max", "18446744073709551615"],
            &["cache_max", "too large", "memory", "give at most"],
        ),
        (&["--bdm-rate", "1e308"], &["bdm_rate"]),
    ];
    for (args, words) in cases {
        let mut all = vec!["config", "show"];
        all.extend_from_slice(args);
        let out = edbstress(&all, tmp.path());
        assert_exit(&out, 2, &args.join(" "));
        let msg = stderr(&out);
        for w in words {
            assert!(msg.contains(w), "{args:?}: no {w:?} in {msg}");
        }
        assert!(
            !msg.contains("more memory") && !msg.contains("inf"),
            "{msg}"
        );
    }
    std::fs::write(
        tmp.path().join("big.toml"),
        format!("duration = \"{}\"\n", "x".repeat(10 << 20)),
    )
    .unwrap();
    let out = edbstress(&["config", "show", "--config", "big.toml"], tmp.path());
    assert_exit(&out, 2, "10 MB string");
    let msg = stderr(&out);
    assert!(msg.len() < 2000, "{} bytes of error", msg.len());
    assert!(msg.contains("big.toml") && msg.contains('…'), "{msg}");
    sentinel.assert_untouched();
}
