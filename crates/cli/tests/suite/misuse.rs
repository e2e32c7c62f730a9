//! Every misuse of every command gets one clear message and exit code 2, never a panic:
//! unknown flags, bad sizes, negative counts, operation mixes not summing to 100, paths
//! that do not exist or cannot be written, and database files from another tool.

use crate::suite::common;
use common::command;

use std::path::Path;
use std::process::Command;

/// A directory layout with the obstacles the cases need.
struct Fixture {
    dir: tempfile::TempDir,
    /// A read-only directory (a read-only tmpfs when root, since root ignores modes).
    read_only: Option<String>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join("afile"), "a regular file").unwrap();
        // A file named like our database, written by another tool.
        std::fs::create_dir_all(t.join("foreign")).unwrap();
        let junk: Vec<u8> = (0..1u32 << 20).map(|i| (i * 7 + 3) as u8).collect();
        std::fs::write(t.join("foreign/edbstress001.edb"), &junk).unwrap();
        std::fs::create_dir_all(t.join("ro")).unwrap();
        let read_only = if is_root() {
            let ok = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
                .arg(t.join("ro"))
                .status()
                .is_ok_and(|s| s.success());
            ok.then(|| "ro".to_string())
        } else {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(t.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
            Some("ro".to_string())
        };
        if read_only.is_none() {
            eprintln!("skipping read-only directory cases: cannot mount a read-only tmpfs");
        }
        Fixture { dir, read_only }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if is_root() && self.read_only.is_some() {
            let _ = Command::new("umount").arg(self.path().join("ro")).status();
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Small, quick settings so a case that got past validation would not run for long.
const QUICK: &[&str] = &[
    "--databases",
    "1",
    "--database-size",
    "32MiB",
    "--buffered",
    "--allow-cached-databases",
    "--duration",
    "2s",
    "--sample-interval",
    "1s",
];

/// (command line, a word the message must contain). `{ro}` is the read-only directory.
fn cases() -> Vec<(Vec<&'static str>, &'static str)> {
    let mut cases: Vec<(Vec<&str>, &str)> = vec![
        // Unknown flags, every command.
        (vec!["run", "--bogus"], "--bogus"),
        (vec!["prepare", "--bogus"], "--bogus"),
        (vec!["checksum", "--bogus"], "--bogus"),
        (vec!["recover", "--bogus"], "--bogus"),
        (vec!["check", "--bogus"], "--bogus"),
        (vec!["config", "show", "--bogus"], "--bogus"),
        (vec!["report", "--bogus"], "--bogus"),
        (vec!["compare", "--bogus"], "--bogus"),
        (vec!["clean", "--bogus"], "--bogus"),
        (vec!["no-such-command"], "no-such-command"),
        // Bad sizes.
        (vec!["prepare", "--database-size", "12XB"], "12XB"),
        (vec!["run", "--database-size", "lots"], "lots"),
        // Negative sizes reach the parser (not taken for flags) and are named as such.
        (
            vec!["run", "--cache-max", "-5MiB"],
            "a size cannot be negative",
        ),
        (
            vec!["config", "show", "--cache-min", "-1"],
            "a size cannot be negative",
        ),
        (
            vec!["prepare", "--database-size", "-1GiB"],
            "a size cannot be negative",
        ),
        (
            vec!["prepare", "--write-size", "-1MiB"],
            "a size cannot be negative",
        ),
        (
            vec!["checksum", "--read-size", "-1MiB"],
            "a size cannot be negative",
        ),
        (
            vec!["recover", "--cache", "-4MiB"],
            "a size cannot be negative",
        ),
        (vec!["run", "--page-size", "-8KiB"], "cannot be negative"),
        (vec!["run", "--duration", "-5s"], "cannot be negative"),
        (
            vec!["probe", "--path", ".", "--size", "-1GiB"],
            "a size cannot be negative",
        ),
        // A flag where a value belongs.
        (vec!["run", "--cache-max", "--buffered"], "is a flag"),
        (vec!["prepare", "--page-size", "3KiB"], "3KiB"),
        (vec!["config", "show", "--database-size", "0"], "database"),
        // Negative and zero counts.
        (
            vec!["prepare", "--databases", "-1"],
            "a count cannot be negative",
        ),
        (
            vec!["run", "--databases", "-2"],
            "a count cannot be negative",
        ),
        (vec!["run", "--threads", "-3"], "a count cannot be negative"),
        (
            vec!["config", "show", "--threads", "-3"],
            "a count cannot be negative",
        ),
        (vec!["prepare", "--databases", "0"], "0"),
        (
            vec!["prepare", "--mailboxes", "-10"],
            "a count cannot be negative",
        ),
        (
            vec!["run", "--mailboxes", "-10"],
            "a count cannot be negative",
        ),
        (vec!["run", "--seed", "-1"], "a seed cannot be negative"),
        (vec!["run", "--lazy-commits", "-5"], "cannot be negative"),
        (
            vec!["checksum", "--queue-depth", "-4"],
            "a queue depth cannot be negative",
        ),
        (
            vec!["probe", "--path", ".", "--queue-depth", "-4"],
            "cannot be negative",
        ),
        (vec!["run", "--databases", "2.5"], "not a whole number"),
        // Operation mixes not summing to 100.
        (vec!["run", "--op-mix", "50/20/20/20"], "100"),
        (vec!["config", "show", "--op-mix", "10/10/10/10"], "100"),
        (vec!["run", "--op-mix", "50/50"], "op"),
        // Paths that do not exist.
        (vec!["checksum", "--db-path", "missing"], "missing"),
        (vec!["recover", "--db-path", "missing"], "missing"),
        (vec!["check", "--db-path", "missing"], "missing"),
        (vec!["clean", "--db-path", "missing", "--yes"], "missing"),
        (vec!["report", "missing"], "missing"),
        (vec!["compare", "missing", "missing2"], "missing"),
        (
            vec!["config", "show", "--config", "missing.toml"],
            "missing.toml",
        ),
        // Paths under a regular file.
        (vec!["prepare", "--db-path", "afile/db"], "afile"),
        (vec!["prepare", "--log-path", "afile/logs"], "afile"),
        (vec!["config", "init", "afile/edbstress.toml"], "afile"),
        // Databases from another tool.
        (
            vec!["checksum", "--db-path", "foreign"],
            "not an edbstress database",
        ),
        (vec!["check", "--db-path", "foreign"], "edbstress"),
        (vec!["recover", "--db-path", "foreign"], "edbstress"),
        (vec!["prepare", "--db-path", "foreign"], "edbstress001.edb"),
        (
            vec!["clean", "--db-path", "foreign", "--yes"],
            "nothing to remove",
        ),
    ];
    // Run cases that get past argument parsing carry the quick settings.
    let run_paths: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "--db-path", "afile/db"], "afile"),
        (vec!["run", "--log-path", "afile/logs"], "afile"),
        (vec!["run", "--results-dir", "afile/results"], "afile"),
        (vec!["run", "--db-path", "foreign"], "edbstress001.edb"),
    ];
    for (mut args, word) in run_paths {
        args.extend_from_slice(QUICK);
        cases.push((args, word));
    }
    for (args, word) in [
        (vec!["prepare", "--db-path", "{ro}/db"], "{ro}"),
        (vec!["prepare", "--db-path", "{ro}"], "{ro}"),
        (vec!["run", "--db-path", "{ro}"], "{ro}"),
        (vec!["run", "--results-dir", "{ro}"], "{ro}"),
    ] {
        let mut args = args;
        if args[0] == "run" {
            args.extend_from_slice(QUICK);
        } else {
            args.extend_from_slice(&["--database-size", "32MiB", "--buffered"]);
        }
        cases.push((args, word));
    }
    cases
}

#[test]
fn every_misuse_gets_one_clear_message_and_exit_code_2() {
    let fixture = Fixture::new();
    let mut failures = Vec::new();
    for (args, word) in cases() {
        let uses_ro = args.iter().any(|a| a.contains("{ro}"));
        let ro = match (&fixture.read_only, uses_ro) {
            (None, true) => continue,
            (Some(ro), _) => ro.clone(),
            (None, false) => String::new(),
        };
        let args: Vec<String> = args.iter().map(|a| a.replace("{ro}", &ro)).collect();
        let word = word.replace("{ro}", &ro);
        // Every case gets its own copy of the paths it may create in.
        let out = command(fixture.path())
            .args(&args)
            .args(extra_paths(&args))
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        let expected_ok = word == "nothing to remove";
        let problem = if expected_ok {
            (!out.status.success() || !stdout.contains(&word))
                .then(|| "expected success with nothing removed".to_string())
        } else if out.status.code() != Some(2) {
            Some(format!("exit code {:?}, expected 2", out.status.code()))
        } else if errors.len() != 1 {
            Some(format!("{} error lines, expected 1", errors.len()))
        } else if !stderr.contains(&word) {
            Some(format!("message does not mention {word:?}"))
        } else if stderr.contains("panicked") || stderr.contains("stack backtrace") {
            Some("panicked".to_string())
        } else {
            None
        };
        if let Some(problem) = problem {
            failures.push(format!(
                "edbstress {}: {problem}\n--- stderr:\n{stderr}--- stdout:\n{stdout}",
                args.join(" ")
            ));
        }
    }
    // Nothing was created next to the obstacles or in the foreign directory.
    assert_eq!(
        std::fs::read_to_string(fixture.path().join("afile")).unwrap(),
        "a regular file"
    );
    let foreign: Vec<_> = std::fs::read_dir(fixture.path().join("foreign"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(foreign, vec!["edbstress001.edb"], "foreign dir changed");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Paths a case does not set itself, pointed somewhere harmless inside the fixture.
fn extra_paths(args: &[String]) -> Vec<String> {
    let cmd = args[0].as_str();
    if !matches!(cmd, "run" | "prepare") || args.iter().any(|a| a == "--bogus") {
        return Vec::new();
    }
    let mut extra = Vec::new();
    for (flag, default) in [
        ("--db-path", "scratch/db"),
        ("--log-path", "scratch/logs"),
        ("--results-dir", "scratch/results"),
    ] {
        if flag == "--results-dir" && cmd != "run" {
            continue;
        }
        if !args.iter().any(|a| a == flag) {
            extra.push(flag.to_string());
            extra.push(default.to_string());
        }
    }
    extra
}

/// The write end of a pipe whose reader has already gone (what `| head -3` leaves once
/// head has its lines): every write to it fails with EPIPE.
fn closed_pipe() -> std::process::Stdio {
    let mut reader = Command::new("true")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("start true");
    let writer = reader.stdin.take().unwrap();
    reader.wait().unwrap();
    writer.into()
}

#[test]
fn a_closed_standard_output_ends_the_printing_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path();
    let sentinel = common::Sentinel::new(t);
    let limits = common::write_loose_limits(t);
    let limits = limits.to_str().unwrap();
    let mut run: Vec<&str> = vec!["run", "--config", limits];
    run.extend(common::SHORT_RUN);
    run.extend([
        "--db-path",
        "db",
        "--log-path",
        "log",
        "--results-dir",
        "results",
    ]);
    let mut problems = Vec::new();
    // `code`: the exit code the command gives with its output read; a closed pipe must
    // not change it.
    let mut check = |args: &[&str], code: i32| {
        let out = command(t)
            .args(args)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let said = err
            .lines()
            .filter(|l| {
                l.contains("panicked") || l.contains("Broken pipe") || l.starts_with("error")
            })
            .collect::<Vec<_>>();
        if out.status.code() != Some(code) || !said.is_empty() {
            problems.push(format!(
                "`edbstress {}` into a closed pipe: {:?} (expected exit {code}): {}",
                args.join(" "),
                out.status,
                said.join(" / ")
            ));
        }
    };
    // The run's own verdict (a loaded machine may fail it) is its exit code.
    let mut run_problems = Vec::new();
    let out = command(t)
        .args(&run)
        .stdout(closed_pipe())
        .output()
        .unwrap();
    let runs = common::run_dirs(t);
    assert_eq!(
        runs.len(),
        1,
        "the run wrote its results although nobody read its output"
    );
    let run_dir = runs[0].to_str().unwrap();
    let verdict = if common::results(&runs[0])["overall_result"] == "Pass" {
        0
    } else {
        1
    };
    if out.status.code() != Some(verdict) {
        run_problems.push(format!(
            "`edbstress run` into a closed pipe: {:?}, its verdict says exit {verdict}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| l.contains("panicked") || l.starts_with("error"))
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    check(&["aggregate", run_dir], verdict);
    check(&["report", run_dir, "--format", "md", "--output", "-"], 0);
    check(&["compare", run_dir, run_dir], 0);
    check(&["config", "show", "--quick"], 0);
    check(&["completions", "bash"], 0);
    check(&["man"], 0);
    check(&["esrp", "init", "solution.toml"], 0);
    check(&["sweep", "init", "sweep.toml"], 0);
    check(&["recover", "--db-path", "db", "--log-path", "log"], 0);
    check(&["check", "--db-path", "db", "--log-path", "log"], 0);
    problems.extend(run_problems);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    sentinel.assert_untouched();
}
