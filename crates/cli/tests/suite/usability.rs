//! The mistakes a new user makes and what the tool must say about them: runs whose
//! cache would hold the databases are refused with the numbers and the fix, configuration errors name the value at fault
//! and leave no run directory behind, repaired pages pass, killed runs can be cleaned,
//! and what is written (stderr, result files, config.toml) is readable as it is.

use crate::suite::common;
use common::{assert_exit, command, edbstress, json, run_dirs, stderr, stdout};

use std::fs;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// A small run's paths under the test directory.
const PATHS: [&str; 6] = [
    "--db-path",
    "db",
    "--log-path",
    "logs",
    "--results-dir",
    "results",
];

/// `config init` then the database size a newcomer picks for a first try (256 MiB),
/// leaving the template's per-database cache default (256 MiB) alone.
fn site_toml_with_small_databases(dir: &Path) {
    assert_exit(
        &edbstress(&["config", "init", "site.toml"], dir),
        0,
        "config init",
    );
    let path = dir.join("site.toml");
    let text = fs::read_to_string(&path).unwrap();
    let line = "# database_size = \"256MiB\"  # example";
    assert!(text.contains(line), "template changed: {text}");
    fs::write(&path, text.replace(line, "database_size = \"256MiB\"")).unwrap();
}

#[test]
fn a_cache_that_holds_the_databases_is_refused_with_the_numbers_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    site_toml_with_small_databases(dir.path());
    let mut args = vec!["run", "--config", "site.toml", "--duration", "30s"];
    args.extend_from_slice(&PATHS);
    let out = edbstress(&args, dir.path());
    assert_exit(&out, 2, "run with a cache as large as the databases");
    let err = stderr(&out);
    // The numbers: database size, cache per instance, and what would do.
    for needle in [
        "256MiB",
        "1.0 times its cache",
        "--cache-max",
        "at most 384MiB",
        "--database-size",
        "--allow-cached-databases",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in: {err}");
    }
    assert!(
        !dir.path().join("results").exists() && !dir.path().join("db").exists(),
        "a refused run creates nothing"
    );
    // The same configuration, said to be intended, is accepted.
    let out = edbstress(
        &[
            "config",
            "show",
            "--config",
            "site.toml",
            "--allow-cached-databases",
        ],
        dir.path(),
    );
    assert_exit(&out, 0, "config show with the opt-in");
    assert!(stdout(&out).contains("allow_cached_databases = true"));
    // The key works in the file too (the template names it, commented out).
    let path = dir.path().join("site.toml");
    let text = fs::read_to_string(&path).unwrap();
    let key = "# allow_cached_databases = false";
    assert!(text.contains(key), "{text}");
    fs::write(&path, text.replace(key, "allow_cached_databases = true")).unwrap();
    let out = edbstress(&["config", "show", "--config", "site.toml"], dir.path());
    assert_exit(&out, 0, "config show with the key in the file");
}

#[test]
fn buffered_databases_that_fit_in_memory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "--databases",
        "1",
        "--database-size",
        "64MiB",
        "--cache-max",
        "8MiB",
        "--buffered",
        "--duration",
        "30s",
    ];
    args.extend_from_slice(&PATHS);
    let out = edbstress(&args, dir.path());
    assert_exit(&out, 2, "buffered run on databases smaller than memory");
    let err = stderr(&out);
    assert!(err.contains("of memory"), "{err}");
    assert!(err.contains("--buffered"), "{err}");
    assert!(err.contains("--allow-cached-databases"), "{err}");
    assert!(!dir.path().join("results").exists());
}

#[test]
fn every_option_the_readme_gives_for_several_commands_is_accepted_by_them() {
    // The README's sentence "Useful options of `a`, `b` … : `--x`, `--y`" is a promise:
    // each of those commands takes each of those options.
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let start = readme
        .find("Useful options")
        .expect("README names options common to several commands");
    let paragraph = &readme[start
        ..readme[start..]
            .find("\n\n")
            .map_or(readme.len(), |e| start + e)];
    let (head, tail) = paragraph.split_once(':').expect("a list after a colon");
    let mut commands: Vec<&str> = head.split('`').skip(1).step_by(2).collect();
    if head.contains("everywhere") {
        commands = vec!["run", "prepare", "checksum", "recover", "check"];
    }
    assert!(!commands.is_empty(), "{head}");
    // The options of the first sentence (up to the first full stop after the list).
    let first = tail.replace('\n', " ");
    let first = first.split(". ").next().unwrap();
    let options: Vec<&str> = first
        .split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|o| o.split_whitespace().next())
        .filter(|o| o.starts_with("--"))
        .collect();
    assert!(!options.is_empty(), "{first}");
    let dir = tempfile::tempdir().unwrap();
    for c in &commands {
        let help = stdout(&edbstress(&[c, "--help"], dir.path()));
        for o in &options {
            assert!(
                help.contains(o),
                "README says `{c}` takes {o}, but `edbstress {c} --help` does not list it"
            );
        }
    }
}

#[test]
fn a_db_path_naming_a_file_is_refused_as_such_and_leaves_no_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("afile"), b"mine").unwrap();
    let out = edbstress(
        &[
            "prepare",
            "--databases",
            "1",
            "--database-size",
            "8MiB",
            "--db-path",
            "afile",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_exit(&out, 2, "prepare on a file");
    let err = stderr(&out);
    assert!(
        err.contains("afile is a file, not a directory") && err.contains("--db-path"),
        "{err}"
    );
    assert!(!err.contains("os error 17"), "{err}");
    let out = edbstress(
        &[
            "run",
            "--databases",
            "1",
            "--database-size",
            "32MiB",
            "--cache-max",
            "8MiB",
            "--log-path",
            "afile",
            "--db-path",
            "db",
            "--results-dir",
            "results",
        ],
        dir.path(),
    );
    assert_exit(&out, 2, "run with a log path that is a file");
    let err = stderr(&out);
    assert!(
        err.contains("afile is a file, not a directory") && err.contains("--log-path"),
        "{err}"
    );
    assert!(
        run_dirs(dir.path()).is_empty(),
        "a run refused while preparing leaves no run directory saying Fail"
    );
    assert_eq!(fs::read(dir.path().join("afile")).unwrap(), b"mine");
}

#[test]
fn too_large_sizes_name_the_values_they_came_from_and_a_fix_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let out = edbstress(
        &[
            "prepare",
            "--database-size",
            "1000TiB",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_exit(&out, 2, "prepare 1000TiB");
    let err = stderr(&out);
    assert!(
        !err.contains("larger --page-size"),
        "32 KiB is the largest: {err}"
    );
    assert!(err.contains("128.0 TiB"), "{err}");
    // With 8 KiB pages a larger page size is a fix.
    let out = edbstress(
        &[
            "prepare",
            "--database-size",
            "100TiB",
            "--page-size",
            "8KiB",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_exit(&out, 2, "prepare 100TiB of 8 KiB pages");
    assert!(
        stderr(&out).contains("larger --page-size"),
        "{}",
        stderr(&out)
    );
    // A size derived from mailboxes blames the mailboxes, before any run directory.
    let mut args = vec!["run", "--mailboxes", "100000000"];
    args.extend_from_slice(&PATHS);
    let out = edbstress(&args, dir.path());
    assert_exit(&out, 2, "run with 100,000,000 mailboxes");
    let err = stderr(&out);
    assert!(
        err.contains("--mailboxes") && err.contains("mailbox_quota"),
        "{err}"
    );
    assert!(!err.contains("--database-size"), "never given: {err}");
    assert!(run_dirs(dir.path()).is_empty(), "{err}");
}

/// Flips the bits of `mask` in the byte at `offset` of `path`.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn flip_bits_at(path: &Path, offset: u64, mask: u8) {
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= mask;
    file.write_all_at(&b, offset).unwrap();
}

#[test]
fn checksum_repair_that_fixes_everything_passes() {
    let dir = tempfile::tempdir().unwrap();
    let out = edbstress(
        &[
            "prepare",
            "--databases",
            "1",
            "--database-size",
            "8MiB",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_exit(&out, 0, "prepare");
    // One flipped bit in page 20 (page P starts at (P + 1) × 32 KiB): correctable.
    flip_bits_at(
        &dir.path().join("db/edbstress001.edb"),
        21 * 32 * 1024 + 1000,
        0x10,
    );
    let out = edbstress(&["checksum", "db/edbstress001.edb"], dir.path());
    assert_exit(&out, 1, "checksum of a page with a flipped bit");
    let out = edbstress(&["checksum", "--repair", "db/edbstress001.edb"], dir.path());
    assert_exit(&out, 0, "checksum --repair that repaired the only problem");
    let text = stdout(&out);
    assert!(
        text.contains("Result: PASS (1 correctable page(s) repaired)"),
        "{text}"
    );
    let out = edbstress(&["checksum", "--json", "db/edbstress001.edb"], dir.path());
    assert_exit(&out, 0, "checksum after the repair");
    assert_eq!(json(&out)["result"], "pass");
}

#[test]
fn clean_removes_the_run_directory_of_a_killed_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = command(dir.path())
        .args([
            "run",
            "--databases",
            "1",
            "--database-size",
            "32MiB",
            "--cache-max",
            "8MiB",
            "--duration",
            "60s",
        ])
        .args(PATHS)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let run_dir = loop {
        let dirs = run_dirs(dir.path());
        if let Some(d) = dirs.first() {
            if fs::read_to_string(d.join("test.log")).is_ok_and(|t| t.contains("Preparing")) {
                break d.clone();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no run directory"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!run_dir.join("results.json").exists());
    // A directory of someone else's beside it stays.
    fs::create_dir(dir.path().join("results/mine")).unwrap();
    fs::write(dir.path().join("results/mine/test.log"), "my notes\n").unwrap();
    let out = edbstress(
        &[
            "clean",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--results-dir",
            "results",
            "--yes",
        ],
        dir.path(),
    );
    assert_exit(&out, 0, "clean");
    assert!(!run_dir.exists(), "{}", stdout(&out));
    assert!(dir.path().join("results/mine/test.log").exists());
}

#[test]
fn stderr_redirected_to_a_file_carries_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    // A soft-recovery test abandons a cache on purpose, which logs at info level.
    let mut args = vec![
        "-v",
        "run",
        "--test",
        "soft-recovery",
        "--logs-to-replay",
        "2",
        "--databases",
        "1",
        "--database-size",
        "32MiB",
        "--cache-max",
        "8MiB",
        "--threads",
        "2",
    ];
    args.extend_from_slice(&PATHS);
    let out = edbstress(&args, dir.path());
    assert_exit(&out, 0, "soft recovery");
    let err = stderr(&out);
    assert!(err.contains("page cache abandoned"), "{err}");
    assert!(
        !err.contains('\u{1b}'),
        "ANSI codes in redirected stderr: {err:?}"
    );
}

#[test]
fn config_show_writes_a_derived_database_size_in_a_readable_unit() {
    let dir = tempfile::tempdir().unwrap();
    assert_exit(
        &edbstress(&["config", "init", "site.toml"], dir.path()),
        0,
        "config init",
    );
    // The template: 5,000 mailboxes of 2 GiB over 6 databases.
    let out = edbstress(&["config", "show", "--config", "site.toml"], dir.path());
    assert_exit(&out, 0, "config show");
    let text = stdout(&out);
    assert!(text.contains("database_size = \"1666GiB\""), "{text}");
}

#[test]
fn result_files_are_created_like_other_files_not_private() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "run",
        "--databases",
        "1",
        "--database-size",
        "32MiB",
        "--cache-max",
        "8MiB",
        "--duration",
        "2s",
        "--sample-interval",
        "1s",
        "--threads",
        "2",
        "--no-verify",
    ];
    args.extend_from_slice(&PATHS);
    let out = edbstress(&args, dir.path());
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    // What this process's umask makes of a new file.
    let probe = dir.path().join("probe");
    fs::write(&probe, b"").unwrap();
    let expected = fs::metadata(&probe).unwrap().permissions().mode() & 0o777;
    let run = &run_dirs(dir.path())[0];
    for name in [
        "results.json",
        "report.html",
        "summary.md",
        "junit.xml",
        "samples.csv",
        "config.toml",
    ] {
        let mode = fs::metadata(run.join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, expected,
            "{name}: {mode:o}, other new files {expected:o}"
        );
    }
}

/// A run whose cache fills far too slowly for `warmup_timeout` (from a file): a 64 MiB
/// database under a 32 MiB cache (1 MiB at start) read at 20 transactional I/Os per
/// second; spawned, not
/// waited for.
fn spawn_slow_warm_run(dir: &Path, warmup_timeout: &str) -> std::process::Child {
    spawn_warm_run(
        dir,
        warmup_timeout,
        &[
            "--database-size",
            "64MiB",
            "--cache-max",
            "32MiB",
            "--cache-min",
            "1MiB",
            "--mailboxes",
            "100",
            "--iops-per-mailbox",
            "0.2",
        ],
    )
}

fn spawn_warm_run(dir: &Path, warmup_timeout: &str, sizes: &[&str]) -> std::process::Child {
    fs::write(
        dir.join("warm.toml"),
        format!("warmup_timeout = \"{warmup_timeout}\"\n"),
    )
    .unwrap();
    command(dir)
        .args(["run", "--config", "warm.toml", "--databases", "1"])
        .args(sizes)
        .args([
            "--allow-cached-databases",
            "--threads",
            "2",
            "--duration",
            "2s",
            "--sample-interval",
            "1s",
            "--no-verify",
            // Reads only: the database does not grow.
            "--op-mix",
            "0/0/0/100",
        ])
        .args(PATHS)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn warm_up_shows_progress_and_says_why_it_cannot_finish() {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_slow_warm_run(dir.path(), "4s");
    let out = child.wait_with_output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let log = fs::read_to_string(run_dirs(dir.path())[0].join("test.log")).unwrap();
    assert!(
        log.contains("Attaining prerequisites: filling each database cache to 90 %"),
        "{log}"
    );
    // Progress once per sampling interval: fill per instance in MiB, rate, estimate.
    let progress: Vec<&str> = log.lines().filter(|l| l.contains("-- Warm-up ")).collect();
    assert!(progress.len() >= 2, "{log}");
    assert!(
        progress[0].contains("Instance0001 ") && progress[0].contains("MiB)"),
        "{log}"
    );
    assert!(progress[0].contains("%/s"), "{log}");
    // And why it timed out.
    assert!(log.contains("Caches did not reach 90 %"), "{log}");
    assert!(
        log.contains("raise warmup_timeout above 4s or lower cache_max"),
        "{log}"
    );
}

/// A database smaller than 90 % of its cache can never fill it: the warm-up says so and
/// ends at once instead of waiting for its timeout (5 minutes here; the test would hang).
#[test]
fn a_database_that_fits_in_the_cache_ends_the_warm_up_with_a_statement() {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_warm_run(
        dir.path(),
        "5m",
        &["--database-size", "32MiB", "--cache-max", "64MiB"],
    );
    let out = child.wait_with_output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let log = fs::read_to_string(run_dirs(dir.path())[0].join("test.log")).unwrap();
    assert!(
        log.contains("Attaining prerequisites skipped: Instance0001's database has"),
        "{log}"
    );
    assert!(
        log.contains(
            "the whole database fits in the cache, which can never fill; measuring without waiting"
        ),
        "{log}"
    );
    assert!(!log.contains("-- Warm-up "), "{log}");
    assert!(!log.contains("Caches did not reach"), "{log}");
}

#[test]
fn a_run_stopped_before_measuring_reports_not_measured_and_the_abort_as_the_failure() {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_slow_warm_run(dir.path(), "5m");
    let started = Instant::now();
    loop {
        let warming = run_dirs(dir.path()).first().is_some_and(|d| {
            fs::read_to_string(d.join("test.log")).is_ok_and(|t| t.contains("-- Warm-up "))
        });
        if warming {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never warmed up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ok = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let run = &run_dirs(dir.path())[0];
    let results = common::results(run);
    assert_eq!(results["overall_result"], "Fail");
    let criteria = results["criteria"].as_array().unwrap();
    // The cause of the verdict is a failed criterion of its own.
    assert_eq!(criteria[0]["key"], "run_aborted", "{results}");
    assert_eq!(criteria[0]["passed"], false);
    assert!(
        criteria[0]["note"]
            .as_str()
            .unwrap()
            .contains("interrupted"),
        "{results}"
    );
    // Nothing was measured: no latency, error count or IOPS passes on zeros.
    for key in [
        "db_read_avg_latency",
        "log_write_max_latency",
        "io_errors",
        "transaction_errors",
    ] {
        let c = criteria
            .iter()
            .find(|c| c["key"] == key)
            .unwrap_or_else(|| panic!("no {key}: {results}"));
        assert_eq!(c["not_measured"], true, "{c}");
        assert_eq!(c["passed"], false, "{c}");
    }
    let html = fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("NOT MEASURED") && html.contains("not measured"));
    let summary = stdout(&out);
    assert!(
        summary.contains("FAILED: Total: Test ran to its end"),
        "{summary}"
    );
    assert!(summary.contains("not measured"), "{summary}");
}

#[test]
fn backup_and_soft_recovery_reports_show_devices_sessions_and_elapsed_times() {
    let dir = tempfile::tempdir().unwrap();
    // This machine's temp dir is on a block device (ext4 on a virtio disk); elsewhere
    // (a tmpfs /tmp) the report must say what the path is instead.
    let on_block_device = {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(dir.path()).unwrap().dev() >> 8 != 0
    };
    let common = [
        "--databases",
        "1",
        "--database-size",
        "32MiB",
        "--cache-max",
        "8MiB",
    ];
    for (test, extra) in [
        ("database-backup", &[][..]),
        (
            "soft-recovery",
            &["--logs-to-replay", "2", "--threads", "2"][..],
        ),
    ] {
        let mut args = vec!["run", "--test", test];
        args.extend_from_slice(&common);
        args.extend_from_slice(extra);
        args.extend_from_slice(&PATHS);
        let out = edbstress(&args, dir.path());
        assert_exit(&out, 0, test);
        let run = run_dirs(dir.path()).into_iter().last().unwrap();
        let results = common::results(&run);
        let html = fs::read_to_string(run.join("report.html")).unwrap();
        let disks = results["host_counters"]["disks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if on_block_device {
            assert!(
                !disks.is_empty(),
                "{test}: no device found: {}",
                results["host_counters"]
            );
            assert!(!html.contains("No block device"), "{test}");
        } else {
            assert!(html.contains("No disk counters:"), "{test}");
        }
        assert!(
            results["parameters"]["threads"].as_u64().unwrap() >= 1,
            "{test}"
        );
        assert!(!html.contains(" 0 sessions"), "{test}");
        assert!(!html.contains("1 databases"), "{test}");
        if test == "database-backup" {
            assert!(
                !html.contains("<td>00:00:00</td>"),
                "{test}: elapsed time rounded away"
            );
            assert!(html.contains("<th>MiB Transferred/sec</th>"), "{test}");
        }
        // One unit family: no decimal or Jetstress "MB" labels in what people read.
        for text in [&html, &fs::read_to_string(run.join("test.log")).unwrap()] {
            for bad in [" MB/s", "(MB", "MBytes", " MB ", " KB "] {
                assert!(!text.contains(bad), "{test}: {bad:?} in output");
            }
        }
        assert!(!stdout(&out).contains(" MB/s"), "{}", stdout(&out));
        fs::remove_dir_all(run).unwrap();
    }
}
