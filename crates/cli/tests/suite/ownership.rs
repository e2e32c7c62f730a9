//! Attacks on what belongs to whom, through the real binary.
//! A log directory is its instance's own (locked while in use, holding only its
//! database's logs), a database lock follows the real file, lock files are never
//! followed or made beside foreign files, and `clean` never leaves the directories it
//! was given. Every test also checks that a sentinel directory no command was given
//! stays untouched.

use crate::suite::common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Sentinel, assert_exit, command, edbstress, text};
use edbstress_engine::read_header;
use edbstress_format::header::DbState;
use edbstress_io::IoMode;

const SIZE: &[&str] = &["--databases", "1", "--database-size", "64MiB", "--buffered"];

/// `prepare` of one small database at `db` with its logs under `logs`.
fn prepare(tmp: &Path, db: &str, logs: &str, extra: &[&str]) {
    let mut args = vec!["prepare"];
    args.extend_from_slice(SIZE);
    args.extend_from_slice(&["--db-path", db, "--log-path", logs]);
    args.extend_from_slice(extra);
    let out = edbstress(&args, tmp);
    assert_exit(&out, 0, "prepare");
}

/// Every file under `dir` (recursively) with its content.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.extend(files(&path));
        } else if meta.is_file() {
            out.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    out
}

/// Whether `pid` holds an exclusive flock on `path` (from `/proc/locks`).
fn locked_by(path: &Path, pid: u32) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let dev = meta.dev();
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 5
                && f[1] == "FLOCK"
                && f[3] == "WRITE"
                && f[4] == pid.to_string()
                && f[5] == id
        })
}

/// A live edbstress process (a run or the durability probe), killed on drop.
struct Live {
    child: Child,
}

impl Live {
    /// Starts `args` in `tmp` and waits until its instance is open: it holds the lock
    /// of the database `db` and has marked it in use (prepare holds the lock too).
    fn start(tmp: &Path, args: &[&str], db: &str) -> Live {
        let child = command(tmp)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn edbstress");
        let mut live = Live { child };
        let started = Instant::now();
        let in_use = || {
            read_header(&tmp.join(db), IoMode::Buffered)
                .is_ok_and(|h| h.header.state == DbState::DirtyNeedsRecovery)
        };
        let lock = tmp.join(format!("{db}.lock"));
        while !(locked_by(&lock, live.pid()) && in_use()) {
            if let Some(status) = live.child.try_wait().unwrap() {
                panic!("{args:?} exited early with {status}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "{args:?} never opened its instance"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        live
    }

    /// A run on `db` / `logs` that lasts far longer than the test.
    fn run(tmp: &Path, db: &str, logs: &str) -> Live {
        let mut args = vec!["run", "--allow-cached-databases"];
        args.extend_from_slice(SIZE);
        args.extend_from_slice(&[
            "--cache-max",
            "8MiB",
            "--cache-min",
            "4MiB",
            "--threads",
            "2",
            "--sample-interval",
            "1s",
            "--duration",
            "10m",
            "--db-path",
            db,
            "--log-path",
            logs,
            "--results-dir",
            "live-results",
        ]);
        Live::start(tmp, &args, &format!("{db}/edbstress001.edb"))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asserts it is still running (no attack stopped it), then kills it (SIGKILL).
    fn kill(mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the live process died during the attack"
        );
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A database crashed while committing: the durability probe killed mid-flight.
fn crashed_instance(tmp: &Path, db: &str, logs: &str) {
    prepare(tmp, db, logs, &[]);
    let probe = Live::start(
        tmp,
        &[
            "durability-probe",
            "--buffered",
            "--db-path",
            db,
            "--log-path",
            logs,
        ],
        &format!("{db}/edbstress001.edb"),
    );
    std::thread::sleep(Duration::from_millis(1500));
    probe.kill();
}

/// Recovery, the deep check and checksum all pass on `db` / `logs`.
#[track_caller]
fn assert_intact(tmp: &Path, db: &str, logs: &str) {
    for cmd in ["recover", "check", "checksum"] {
        let out = edbstress(
            &[cmd, "--buffered", "--db-path", db, "--log-path", logs],
            tmp,
        );
        assert_exit(&out, 0, cmd);
    }
}

#[test]
fn prepare_refuses_the_log_directory_of_a_crashed_database() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    crashed_instance(tmp.path(), "db", "logs");
    let before = files(&tmp.path().join("logs"));
    assert!(before.len() > 2, "the crash left several log files");

    let mut args = vec!["prepare"];
    args.extend_from_slice(SIZE);
    args.extend_from_slice(&["--db-path", "Y", "--log-path", "logs"]);
    let out = edbstress(&args, tmp.path());
    assert_exit(&out, 2, "prepare over another database's logs");
    let message = text(&out);
    assert!(
        message.contains("holds the logs of another database"),
        "{message}"
    );
    assert!(
        message.contains("Y/edbstress001.edb is a new database"),
        "{message}"
    );
    assert!(message.contains("another --log-path"), "{message}");
    assert!(message.contains("edbstress clean"), "{message}");
    assert!(!tmp.path().join("Y/edbstress001.edb").exists());
    assert_eq!(
        files(&tmp.path().join("logs")),
        before,
        "victim logs changed"
    );
    // The victim still recovers with every log it had.
    assert_intact(tmp.path(), "db", "logs");
    sentinel.assert_untouched();
}

#[test]
fn a_live_instances_log_directory_is_refused_to_every_other_command() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    std::fs::create_dir(tmp.path().join("OTHER")).unwrap();
    let live = Live::run(tmp.path(), "db", "logs");
    let pid = format!("PID {}", live.pid());

    // prepare of another database, a second run, and clean from another database path.
    let mut prep = vec!["prepare"];
    prep.extend_from_slice(SIZE);
    prep.extend_from_slice(&["--db-path", "Y", "--log-path", "logs"]);
    let mut run = vec!["run", "--allow-cached-databases"];
    run.extend_from_slice(SIZE);
    run.extend_from_slice(&[
        "--duration",
        "5s",
        "--sample-interval",
        "1s",
        "--db-path",
        "B",
        "--log-path",
        "logs",
        "--results-dir",
        "results-b",
    ]);
    let clean = ["clean", "--db-path", "OTHER", "--log-path", "logs", "--yes"];
    let recover = [
        "recover",
        "--buffered",
        "--db-path",
        "OTHER2",
        "--log-path",
        "logs",
    ];
    std::fs::create_dir(tmp.path().join("OTHER2")).unwrap();
    std::os::unix::fs::symlink(
        "../db/edbstress001.edb",
        tmp.path().join("OTHER2/edbstress001.edb"),
    )
    .unwrap();
    for (what, args) in [
        ("prepare", &prep[..]),
        ("second run", &run[..]),
        ("clean", &clean[..]),
        ("recover", &recover[..]),
    ] {
        let out = edbstress(args, tmp.path());
        assert_exit(&out, 2, what);
        let message = text(&out);
        assert!(message.contains(&pid), "{what}: {message}");
        assert!(message.contains("logs/edbstress001"), "{what}: {message}");
    }
    assert!(!tmp.path().join("Y/edbstress001.edb").exists());
    assert!(!tmp.path().join("B/edbstress001.edb").exists());
    live.kill();
    // Killed mid-run: its logs are all there to recover it.
    assert_intact(tmp.path(), "db", "logs");
    sentinel.assert_untouched();
}

#[test]
fn every_database_gets_its_own_identity_and_logs_of_another_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    // The same seed (as every run's default seed) gives the same content, not the same
    // identity.
    prepare(tmp.path(), "a", "la", &["--seed", "7"]);
    prepare(tmp.path(), "b", "lb", &["--seed", "7"]);
    let header = |p: &str| {
        read_header(&tmp.path().join(p), IoMode::Buffered)
            .unwrap()
            .header
    };
    let (a, b) = (header("a/edbstress001.edb"), header("b/edbstress001.edb"));
    assert_eq!(a.signature, b.signature, "the seed fixes the content");
    assert_ne!(a.log_signature, b.log_signature, "identities must differ");
    // Unseeded, in the same second: distinct signatures too.
    let mut args = vec![
        "prepare",
        "--databases",
        "2",
        "--database-size",
        "64MiB",
        "--buffered",
    ];
    args.extend_from_slice(&["--db-path", "c", "--log-path", "lc"]);
    assert_exit(&edbstress(&args, tmp.path()), 0, "prepare two");
    let (c1, c2) = (header("c/edbstress001.edb"), header("c/edbstress002.edb"));
    assert_ne!(c1.signature, c2.signature);
    assert_ne!(c1.log_signature, c2.log_signature);

    // b reused with a's logs: same database signature, another database.
    std::fs::remove_dir_all(tmp.path().join("lb")).unwrap();
    let before = files(&tmp.path().join("la"));
    let mut args = vec!["prepare"];
    args.extend_from_slice(SIZE);
    args.extend_from_slice(&["--seed", "7", "--db-path", "b", "--log-path", "la"]);
    let out = edbstress(&args, tmp.path());
    assert_exit(&out, 2, "prepare b over a's logs");
    let message = text(&out);
    assert!(
        message.contains("holds the logs of another database"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{:#018x}", a.log_signature)),
        "{message}"
    );
    assert!(
        message.contains(&format!("{:#018x}", b.log_signature)),
        "{message}"
    );
    assert_eq!(files(&tmp.path().join("la")), before);
    sentinel.assert_untouched();
}

#[test]
fn a_symlinked_or_hard_linked_database_meets_the_lock_of_the_real_file() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let live = Live::run(tmp.path(), "Y", "Ylogs");
    let pid = format!("PID {}", live.pid());
    std::fs::create_dir(tmp.path().join("X")).unwrap();
    std::os::unix::fs::symlink(
        "../Y/edbstress001.edb",
        tmp.path().join("X/edbstress001.edb"),
    )
    .unwrap();
    std::fs::create_dir(tmp.path().join("H")).unwrap();
    std::fs::hard_link(
        tmp.path().join("Y/edbstress001.edb"),
        tmp.path().join("H/edbstress001.edb"),
    )
    .unwrap();
    for dir in ["X", "H"] {
        for cmd in ["recover", "checksum", "check"] {
            let out = edbstress(&[cmd, "--buffered", "--db-path", dir], tmp.path());
            assert_exit(&out, 2, &format!("{cmd} through {dir}"));
            let message = text(&out);
            assert!(message.contains(&pid), "{cmd} through {dir}: {message}");
        }
    }
    // The lock file is the real database's, none beside the links.
    assert!(!tmp.path().join("X/edbstress001.edb.lock").exists());
    assert!(!tmp.path().join("H/edbstress001.edb.lock").exists());
    live.kill();
    std::fs::remove_file(tmp.path().join("H/edbstress001.edb")).unwrap();
    assert_intact(tmp.path(), "Y", "Ylogs");
    sentinel.assert_untouched();
}

#[test]
fn lock_files_are_not_followed_nor_made_beside_foreign_files() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    prepare(tmp.path(), "db", "logs", &[]);
    // A symlinked lock file pointing at a file that looks like a lock file.
    let victim = tmp.path().join("victim.pid");
    std::fs::write(&victim, "12345\n").unwrap();
    let lock = tmp.path().join("db/edbstress001.edb.lock");
    std::os::unix::fs::symlink("../victim.pid", &lock).unwrap();
    for args in [
        &[
            "recover",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ][..],
        &["checksum", "--buffered", "--repair", "db/edbstress001.edb"][..],
        &["checksum", "--buffered", "db/edbstress001.edb"][..],
    ] {
        let out = edbstress(args, tmp.path());
        assert_exit(&out, 2, &format!("{args:?}"));
        let message = text(&out);
        assert!(message.contains("edbstress001.edb.lock"), "{message}");
        assert!(message.contains("move it away"), "{message}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "12345\n");
    assert!(
        std::fs::symlink_metadata(&lock)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A foreign file, and one with another program's lock (a live PID, no flock).
    std::fs::create_dir(tmp.path().join("other")).unwrap();
    let foreign = tmp.path().join("other/data.bin");
    std::fs::write(&foreign, vec![0x5a; 65536]).unwrap();
    let passwd = tmp.path().join("other/passwd");
    std::fs::write(&passwd, vec![0x41; 65536]).unwrap();
    let passwd_lock = tmp.path().join("other/passwd.lock");
    let live_pid = format!("{}\n", std::process::id());
    std::fs::write(&passwd_lock, &live_pid).unwrap();
    for file in ["other/data.bin", "other/passwd"] {
        let out = edbstress(&["checksum", "--buffered", file], tmp.path());
        assert_exit(&out, 2, file);
        assert!(
            text(&out).contains("not an edbstress database"),
            "{}",
            text(&out)
        );
    }
    assert!(!tmp.path().join("other/data.bin.lock").exists());
    assert_eq!(std::fs::read_to_string(&passwd_lock).unwrap(), live_pid);
    sentinel.assert_untouched();
}

/// A run directory with a results.json edbstress wrote and a samples.csv.
fn run_dir(dir: &Path) {
    let config = edbstress_workload::config::RunConfig::resolve(&[]).unwrap();
    let results = edbstress_workload::runner::empty_results(&config, 1);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(&results).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("samples.csv"), "time,iops\n").unwrap();
}

#[test]
fn clean_does_not_follow_symlinks_out_of_the_results_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    // Someone else's run directory, linked into res; and a link to a file in a real one.
    run_dir(&tmp.path().join("elsewhere/Performance_kept"));
    std::fs::create_dir(tmp.path().join("res")).unwrap();
    std::os::unix::fs::symlink(
        "../elsewhere/Performance_kept",
        tmp.path().join("res/Performance_link"),
    )
    .unwrap();
    let own = tmp.path().join("res/Performance_own");
    run_dir(&own);
    std::fs::write(tmp.path().join("elsewhere/notes.txt"), "keep me").unwrap();
    std::fs::remove_file(own.join("samples.csv")).unwrap();
    std::os::unix::fs::symlink("../../elsewhere/notes.txt", own.join("samples.csv")).unwrap();
    let before = files(&tmp.path().join("elsewhere"));

    let out = edbstress(&["clean", "--results-dir", "res", "--yes"], tmp.path());
    assert_exit(&out, 0, "clean");
    assert!(text(&out).contains("symbolic link"), "{}", text(&out));
    assert_eq!(
        files(&tmp.path().join("elsewhere")),
        before,
        "clean left res"
    );
    assert!(
        !own.join("results.json").exists(),
        "our own run directory is cleaned"
    );
    assert!(std::fs::symlink_metadata(tmp.path().join("res/Performance_link")).is_ok());
    sentinel.assert_untouched();
}

#[test]
fn a_cleanly_shut_down_database_without_logs_gets_a_new_log_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    prepare(tmp.path(), "db", "logs", &[]);
    // Commits move the checkpoint past the first log; then a clean shutdown.
    let out = edbstress(
        &[
            "durability-probe",
            "--buffered",
            "--seconds",
            "2",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        tmp.path(),
    );
    assert_exit(&out, 0, "probe");
    let db_before = std::fs::read(tmp.path().join("db/edbstress001.edb")).unwrap();
    for entry in std::fs::read_dir(tmp.path().join("logs/edbstress001")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }

    let mut run = vec!["run", "--allow-cached-databases"];
    run.extend_from_slice(SIZE);
    run.extend_from_slice(&[
        "--cache-max",
        "8MiB",
        "--cache-min",
        "4MiB",
        "--threads",
        "2",
        "--duration",
        "3s",
        "--sample-interval",
        "1s",
        "--db-path",
        "db",
        "--log-path",
        "logs",
        "--results-dir",
        "res",
    ]);
    let out = edbstress(&run, tmp.path());
    assert_exit(&out, 2, "run without logs");
    let message = text(&out);
    assert!(message.contains("holds no log files"), "{message}");
    assert!(message.contains("edbstress prepare"), "{message}");
    assert!(message.contains("new log stream"), "{message}");
    assert_eq!(
        std::fs::read(tmp.path().join("db/edbstress001.edb")).unwrap(),
        db_before,
        "the refused run changed the database"
    );

    let mut args = vec!["prepare"];
    args.extend_from_slice(SIZE);
    args.extend_from_slice(&["--db-path", "db", "--log-path", "logs"]);
    let out = edbstress(&args, tmp.path());
    assert_exit(&out, 0, "prepare");
    assert!(text(&out).contains("new log stream"), "{}", text(&out));
    assert!(text(&out).contains("reused"), "{}", text(&out));
    let out = edbstress(&run, tmp.path());
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "run after prepare: {}",
        text(&out)
    );
    assert!(text(&out).contains("Performance test: "), "{}", text(&out));
    assert_intact(tmp.path(), "db", "logs");
    sentinel.assert_untouched();
}
