//! Safety through the binary: `edbstress clean` removes only what edbstress made
//! (foreign files placed next to ours survive), asks before removing, and respects the
//! database lock; commands refuse databases another process holds, naming its PID.

use crate::suite::common;
use common::{command, text};

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use edbstress_engine::DatabaseLock;

fn run(dir: &Path, args: &[&str]) -> Output {
    command(dir).args(args).output().unwrap()
}

/// Two small databases with their logs under `dir/db` and `dir/logs`.
fn prepare(dir: &Path) {
    let out = run(
        dir,
        &[
            "prepare",
            "--databases",
            "2",
            "--database-size",
            "32MiB",
            "--buffered",
            "--seed",
            "7",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
}

/// A run directory with a results.json edbstress wrote (built by the workload crate).
fn make_run_dir(dir: &Path, extra: Option<&str>) -> PathBuf {
    let config = edbstress_workload::config::RunConfig::resolve(&[]).unwrap();
    let results = edbstress_workload::runner::empty_results(&config, 1);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(&results).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("test.log"), "edbstress testing begins ...\n").unwrap();
    if let Some(name) = extra {
        std::fs::write(dir.join(name), "the user's own notes").unwrap();
    }
    dir.to_path_buf()
}

/// Foreign files next to ours; each must survive every clean.
fn place_foreign_files(tmp: &Path) -> Vec<PathBuf> {
    let files = [
        // Named like a database, but not one.
        ("db/edbstress003.edb", "not a database"),
        ("db/notes.txt", "keep me"),
        ("db/edbstress009.edb.lock", "not a lock file either"),
        ("logs/edbstress001/notes.txt", "keep me"),
        // Named like a log generation, without our signature.
        ("logs/edbstress002/E0000000042.log", "someone else's log"),
        ("logs/edbstress005/E00.chk", "another tool's checkpoint"),
        (
            "results/Performance_keep/mine.txt",
            "user file in a run dir",
        ),
        // results.json that is not ours.
        ("results/other/results.json", "{\"foo\": 1}"),
        ("results/other/test.log", "not ours"),
    ];
    let mut paths = Vec::new();
    for (rel, content) in files {
        let path = tmp.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        paths.push(path);
    }
    paths
}

fn assert_survive(paths: &[PathBuf]) {
    for p in paths {
        assert!(p.exists(), "{} was removed", p.display());
    }
}

const CLEAN: &[&str] = &[
    "clean",
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
];

#[test]
fn clean_removes_only_our_files_and_asks_first() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    prepare(t);
    let foreign = place_foreign_files(t);
    make_run_dir(&t.join("results/Performance_keep"), None);
    let whole = make_run_dir(&t.join("results/Performance_gone"), None);
    let db1 = t.join("db/edbstress001.edb");

    // Not on a terminal and no --yes: refuse, remove nothing.
    let out = run(t, CLEAN);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--yes"), "{}", text(&out));
    assert!(db1.exists());
    assert!(whole.exists());

    // Dry run lists and skips with reasons, removes nothing.
    let mut args = CLEAN.to_vec();
    args.push("--dry-run");
    let out = run(t, &args);
    assert!(out.status.success(), "{}", text(&out));
    let listing = text(&out);
    assert!(listing.contains("would remove"), "{listing}");
    assert!(listing.contains("edbstress001.edb"), "{listing}");
    assert!(
        listing.contains("edbstress003.edb: no edbstress database header"),
        "{listing}"
    );
    assert!(listing.contains("no edbstress log signature"), "{listing}");
    assert!(listing.contains("no edbstress results.json"), "{listing}");
    assert!(db1.exists());

    let mut args = CLEAN.to_vec();
    args.push("--yes");
    let out = run(t, &args);
    assert!(out.status.success(), "{}", text(&out));
    assert_survive(&foreign);
    assert!(!db1.exists());
    assert!(!t.join("db/edbstress002.edb").exists());
    // Log directories: emptied of our files; removed only when nothing else is left.
    assert!(!t.join("logs/edbstress001/E00.chk").exists());
    assert!(!t.join("logs/edbstress001/E0000000001.log").exists());
    assert!(t.join("logs/edbstress001").is_dir());
    assert!(!t.join("logs/edbstress002/E00.chk").exists());
    assert!(!whole.exists(), "a run directory with only our files goes");
    assert!(!t.join("results/Performance_keep/results.json").exists());
    assert!(t.join("results/Performance_keep").is_dir());
    assert!(t.join("results/other/test.log").exists());
}

#[test]
fn clean_removes_empty_log_dirs_and_stale_lock_files() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    prepare(t);
    // A killed process left its lock file behind: nobody holds it, so it goes.
    std::fs::write(t.join("db/edbstress001.edb.lock"), "999999\n").unwrap();
    let out = run(
        t,
        &["clean", "--db-path", "db", "--log-path", "logs", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_dir(t.join("db")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(t.join("logs")).unwrap().count(), 0);
}

/// Rewrites both header copies of `db` (32 KiB pages) as format version `version`.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn set_format_version(db: &Path, version: u32) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(db)
        .unwrap();
    let mut slot = vec![0u8; 4096];
    for offset in [0u64, 32768] {
        file.read_exact_at(&mut slot, offset).unwrap();
        slot[16..20].copy_from_slice(&version.to_le_bytes());
        let sum = edbstress_format::checksum::block_checksum(&slot, 0, true);
        slot[..8].copy_from_slice(&sum.to_le_bytes());
        file.write_all_at(&slot, offset).unwrap();
    }
}

#[test]
fn a_database_of_the_previous_format_is_refused_by_check_and_removed_by_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    prepare(t);
    set_format_version(&t.join("db/edbstress001.edb"), 1);
    let out = run(
        t,
        &[
            "check",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
    );
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("format version 1") && said.contains("--recreate"),
        "{said}"
    );
    let out = run(
        t,
        &["clean", "--db-path", "db", "--log-path", "logs", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_dir(t.join("db")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(t.join("logs")).unwrap().count(), 0);
}

#[test]
fn clean_and_commands_refuse_a_database_another_process_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    prepare(t);
    let db1 = t.join("db/edbstress001.edb");
    let lock = DatabaseLock::acquire(&db1).unwrap();
    let pid = std::process::id().to_string();

    let out = run(
        t,
        &["clean", "--db-path", "db", "--log-path", "logs", "--yes"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let message = text(&out);
    assert!(message.contains(&format!("PID {pid}")), "{message}");
    assert!(message.contains("edbstress001.edb.lock"), "{message}");
    assert!(db1.exists());
    assert!(t.join("db/edbstress002.edb").exists(), "nothing is removed");

    for args in [
        &[
            "recover",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--buffered",
        ][..],
        &[
            "checksum",
            "--repair",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--buffered",
        ],
        &[
            "prepare",
            "--databases",
            "2",
            "--database-size",
            "32MiB",
            "--buffered",
            "--seed",
            "7",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        &[
            "run",
            "--allow-cached-databases",
            "--databases",
            "2",
            "--database-size",
            "32MiB",
            "--buffered",
            "--duration",
            "2s",
            "--sample-interval",
            "1s",
            "--seed",
            "7",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--results-dir",
            "results",
        ],
    ] {
        let out = run(t, args);
        let message = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {message}");
        assert!(
            message.contains(&format!("PID {pid}")),
            "{args:?}: {message}"
        );
        assert!(!message.contains("panicked"), "{args:?}: {message}");
    }
    // Refused before anything ran: no run directory claiming a failed test.
    assert!(
        !t.join("results").exists(),
        "a run refused for a database in use leaves no run directory"
    );
    drop(lock);
    assert!(!t.join("db/edbstress001.edb.lock").exists());
    let out = run(
        t,
        &[
            "recover",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--buffered",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn read_only_commands_wait_for_writers_and_share_with_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    prepare(t);
    let db1 = t.join("db/edbstress001.edb");
    let pid = std::process::id();
    let paths = ["--db-path", "db", "--log-path", "logs", "--buffered"];
    let checksum: Vec<&str> = [&["checksum"][..], &paths].concat();
    let check: Vec<&str> = [&["check"][..], &paths].concat();

    // A writer holds the database: reading it now could show damage that is not there.
    let writer = DatabaseLock::acquire(&db1).unwrap();
    for args in [&checksum, &check] {
        let out = run(t, args);
        let message = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {message}");
        assert!(message.contains(&format!("PID {pid}")), "{message}");
        assert!(message.contains("being written"), "{message}");
        assert!(message.contains("edbstress001.edb.lock"), "{message}");
        assert!(!message.contains("panicked"), "{message}");
    }
    drop(writer);

    // Readers share: with this process reading, checksum and check (and two checksums
    // at once) run, while a writer is refused naming the reader.
    let reader = DatabaseLock::acquire_shared(&db1).unwrap();
    let out = run(t, &checksum);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(t, &check);
    assert!(out.status.success(), "{}", text(&out));
    let both: Vec<_> = (0..2)
        .map(|_| {
            command(t)
                .args(&checksum)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in both {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = run(t, &[&["recover"][..], &paths].concat());
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(message.contains("being read"), "{message}");
    assert!(message.contains(&format!("PID {pid}")), "{message}");
    drop(reader);
    assert!(!t.join("db/edbstress001.edb.lock").exists());
    let out = run(t, &[&["recover"][..], &paths].concat());
    assert!(out.status.success(), "{}", text(&out));
}
