//! Log attacks through the binary, on real runs killed with SIGKILL: the
//! newest log files deleted or emptied, logs that `checksum` must reject as
//! recovery does, the checkpoint file lost after circular logging removed the
//! first generations, and a crash loop whose storage loses the newest log.
//! Every test keeps a sentinel directory beside its paths that must stay untouched.
//!
//! `EDBSTRESS_TEST_BIN=/path/to/old/edbstress` runs them against another build.

use crate::suite::common;
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{Instance, InstanceConfig};

/// A throughput run of one 64 MiB database (the attacker's set-up), long enough to be
/// killed while it writes.
const RUN: &[&str] = &[
    "run",
    "--databases",
    "1",
    "--database-size",
    "64MiB",
    "--cache-max",
    "8MiB",
    "--cache-min",
    "4MiB",
    "--threads",
    "4",
    "--buffered",
    // A tiny buffered database sits in the page cache: this test is about logs.
    "--allow-cached-databases",
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
    "--duration",
    "10m",
];

const PATHS: &[&str] = &["--db-path", "db", "--log-path", "logs", "--buffered"];

fn log_dir(dir: &Path) -> PathBuf {
    dir.join("logs/edbstress001")
}

/// Log generations present, ascending, with their paths.
fn generations(dir: &Path) -> Vec<(edbstress_format::Generation, PathBuf)> {
    let mut out: Vec<(edbstress_format::Generation, PathBuf)> = fs::read_dir(log_dir(dir))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    edbstress_format::log::parse_log_file_name(&name).map(|g| (g, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Whether a log file holds any data after its file header.
fn holds_data(path: &Path) -> bool {
    fs::read(path).is_ok_and(|b| b.len() > 4096 && b[4096..].iter().any(|&x| x != 0))
}

/// Starts the run under `dir`, waits until `ready` holds for the log (at most 60 s),
/// then kills it with SIGKILL.
fn run_and_kill(dir: &Path, ready: impl Fn(&[(edbstress_format::Generation, PathBuf)]) -> bool) {
    let mut child = command(dir)
        .args(RUN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn run");
    let started = Instant::now();
    while !ready(&generations(dir)) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended by itself"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the log never reached the state the test needs: {:?}",
            generations(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Enough log written: the newest generation is at least `n`.
fn reached(n: u32) -> impl Fn(&[(edbstress_format::Generation, PathBuf)]) -> bool {
    move |g| g.last().is_some_and(|(last, _)| last.get() >= n)
}

/// `recover` and `checksum` both fail (exit 1) and name the lost log; the database
/// stays marked as needing recovery.
#[track_caller]
fn assert_refused(dir: &Path, what: &str, names: &[String]) {
    let out = edbstress(&[&["recover"], PATHS].concat(), dir);
    assert_exit(&out, 1, &format!("{what}: recover"));
    let said = text(&out);
    assert!(
        said.contains("lost log") || said.contains("log damaged"),
        "{what}: {said}"
    );
    assert!(
        names.iter().any(|n| said.contains(n.as_str())),
        "{what}: the message names none of {names:?}: {said}"
    );
    let out = edbstress(&[&["checksum"], PATHS].concat(), dir);
    assert_exit(&out, 1, &format!("{what}: checksum"));
    // Still refused: a run cannot start on the database.
    let out = edbstress(&[&["recover"], PATHS].concat(), dir);
    assert_exit(&out, 1, &format!("{what}: second recover"));
}

#[test]
fn the_newest_logs_deleted_after_a_kill_are_a_lost_log() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let dir = tmp.path().join("work");
    fs::create_dir(&dir).unwrap();
    run_and_kill(&dir, reached(5));
    let gens = generations(&dir);
    let _ = fs::remove_file(log_dir(&dir).join("E00tmp.log"));
    let mut names = Vec::new();
    for (_, path) in gens.iter().rev().take(3) {
        names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        fs::remove_file(path).unwrap();
    }
    assert_refused(&dir, "three newest logs deleted", &names);
    sentinel.assert_untouched();
}

#[test]
fn the_newest_log_deleted_or_emptied_is_a_lost_log() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    for (n, empty) in [(0, false), (1, true)] {
        let dir = tmp.path().join(format!("work{n}"));
        fs::create_dir(&dir).unwrap();
        run_and_kill(&dir, reached(3));
        // The generation the database's header records as holding its newest durable
        // write (acknowledged commits are in it): lose it, and anything newer. (A newer
        // file may hold a write whose recording the kill interrupted: nothing in it
        // was acknowledged, so losing only that one loses nothing.)
        let required = edbstress_engine::read_header(
            &dir.join("db/edbstress001.edb"),
            edbstress_io::IoMode::Buffered,
        )
        .unwrap()
        .header
        .log_required;
        assert!(
            required.get() >= 2,
            "the run recorded no generation: {required}"
        );
        let gens = generations(&dir);
        let newest = log_dir(&dir).join(edbstress_format::log::log_file_name(required));
        let name = newest.file_name().unwrap().to_string_lossy().into_owned();
        for (_, path) in gens.iter().filter(|(g, _)| *g > required) {
            fs::remove_file(path).unwrap();
        }
        if empty {
            let mut bytes = fs::read(&newest).unwrap();
            bytes[4096..].fill(0);
            fs::write(&newest, bytes).unwrap();
        } else {
            fs::remove_file(&newest).unwrap();
        }
        let what = if empty {
            "newest log emptied"
        } else {
            "newest log deleted"
        };
        assert_refused(&dir, what, &[name]);
    }
    sentinel.assert_untouched();
}

#[test]
fn checksum_rejects_a_hole_in_the_log_as_recovery_does() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let dir = tmp.path().join("work");
    fs::create_dir(&dir).unwrap();
    // Three files present at least, so one lies between two others.
    run_and_kill(&dir, |g| {
        g.len() >= 3 && g.iter().all(|(_, p)| holds_data(p))
    });
    let gens = generations(&dir);
    let (middle, path) = gens[gens.len() - 2].clone();
    fs::remove_file(&path).unwrap();
    let out = edbstress(&[&["checksum", "--json"], PATHS].concat(), &dir);
    assert_exit(&out, 1, "checksum of a log with a hole");
    let doc = json(&out);
    let problems = doc["logs"][0]["sequence"]["problems"].to_string();
    assert!(
        problems.contains(&format!("{middle:#x}")) || problems.contains("missing"),
        "{problems}"
    );
    let out = edbstress(&[&["recover"], PATHS].concat(), &dir);
    assert_exit(&out, 1, "recover of a log with a hole");
    sentinel.assert_untouched();
}

#[test]
fn recovery_without_the_checkpoint_file_after_circular_logging() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let dir = tmp.path().join("work");
    fs::create_dir(&dir).unwrap();
    // Circular logging has removed generation 1 and the log has moved well on.
    run_and_kill(&dir, |g| {
        g.first().is_some_and(|(first, _)| first.get() > 2) && reached(6)(g)
    });
    fs::remove_file(log_dir(&dir).join("E00.chk")).unwrap();
    for command in ["recover", "checksum", "check"] {
        let out = edbstress(&[&[command], PATHS].concat(), &dir);
        assert_exit(&out, 0, command);
    }
    sentinel.assert_untouched();
}

/// The crash loop's lost-log model: a durability probe commits, is killed, and the
/// storage then loses the newest log file holding data (deleted or emptied). Recovery
/// must refuse, or every acknowledged commit must be there — never a pass over a
/// missing one. 4 cycles; `EDBSTRESS_LONG_TESTS=1` runs 100.
#[test]
fn crash_loop_with_a_lost_newest_log_never_passes_over_a_missing_commit() {
    let cycles = if std::env::var("EDBSTRESS_LONG_TESTS").is_ok_and(|v| v == "1") {
        100
    } else {
        4
    };
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let (mut refused, mut survived, mut acked_total) = (0u32, 0u32, 0usize);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for cycle in 0..cycles {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let dir = tmp.path().join(format!("cycle{cycle}"));
        fs::create_dir(&dir).unwrap();
        prepare_probe_database(&dir);
        let acked = probe_and_kill(&dir, 300 + seed % 900);
        acked_total += acked.len();
        let gens = generations(&dir);
        let Some((_, newest)) = gens.iter().rev().find(|(_, p)| holds_data(p)).cloned() else {
            continue;
        };
        if seed % 2 == 0 {
            let mut bytes = fs::read(&newest).unwrap();
            bytes[4096..].fill(0);
            fs::write(&newest, bytes).unwrap();
        } else {
            for (_, path) in gens.iter().filter(|(_, p)| *p >= newest) {
                fs::remove_file(path).unwrap();
            }
        }
        let out = edbstress(&["recover", "--db-path", "db", "--log-path", "logs"], &dir);
        match out.status.code() {
            Some(1) => {
                refused += 1;
                continue;
            }
            Some(0) => {}
            _ => panic!("cycle {cycle}: recover: {}", text(&out)),
        }
        // Recovery passed: then nothing acknowledged may be missing.
        let layout = InstanceLayout::new(InstanceId::new(1), &dir.join("db"), &dir.join("logs"));
        let instance = Instance::open(InstanceConfig::new(layout)).unwrap();
        for (key, len, hash) in &acked {
            let m = instance.read(*key, true).unwrap().unwrap_or_else(|| {
                panic!("cycle {cycle}: recovery passed, but acknowledged {key:?} is missing")
            });
            let body = m.body.unwrap();
            assert_eq!((body.len(), fnv64(&body)), (*len, *hash), "cycle {cycle}");
        }
        instance.shutdown().unwrap();
        survived += 1;
    }
    println!(
        "lost newest log after SIGKILL: {cycles} cycles, {refused} refused, {survived} \
         recovered with every commit, {acked_total} commits acknowledged"
    );
    assert!(
        refused > 0,
        "no cycle lost an acknowledged commit: the model tests nothing"
    );
    sentinel.assert_untouched();
}
