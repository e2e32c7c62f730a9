//! `edbstress config init` and `config show` on real files.

use crate::suite::common;
use common::{edbstress, stderr, stdout};

#[test]
fn init_writes_a_file_show_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = edbstress(&["config", "init"], dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let written = std::fs::read_to_string(dir.path().join("edbstress.toml")).unwrap();
    assert!(written.contains("mailboxes = 5000"));

    let out = edbstress(
        &["config", "show", "--config", "edbstress.toml"],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(shown.starts_with("# effective configuration of this run"));
    assert!(shown.contains("mailboxes = 5000"), "{shown}");
    assert!(shown.contains("databases = 6"), "{shown}");

    // Flags override the file, and what show prints is itself a valid configuration
    // that shows the same again.
    let out = edbstress(
        &[
            "config",
            "show",
            "--config",
            "edbstress.toml",
            "--databases",
            "3",
            "--duration",
            "30m",
            "--op-mix",
            "25/10/50/15",
            "--bdm",
            "off",
            "--db-path",
            "/mnt/a",
            "--db-path",
            "/mnt/b",
            "--no-verify",
            "--torn-write-protection",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    for line in [
        "databases = 3",
        "duration = \"30m\"",
        "op_mix = \"25/10/50/15\"",
        "bdm = false",
        "db_paths = [\"/mnt/a\", \"/mnt/b\"]",
        "verify_after = false",
        "torn_write_protection = true",
    ] {
        assert!(shown.contains(line), "{line} missing from\n{shown}");
    }
    std::fs::write(dir.path().join("effective.toml"), &shown).unwrap();
    let again = edbstress(
        &["config", "show", "--config", "effective.toml"],
        dir.path(),
    );
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(stdout(&again), shown);
}

#[test]
fn init_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, "# my own settings\n").unwrap();
    let out = edbstress(&["config", "init", "mine.toml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# my own settings\n"
    );
}

#[test]
fn bad_key_or_value_is_a_usage_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("typo.toml"), "databses = 4\n").unwrap();
    let out = edbstress(&["config", "show", "--config", "typo.toml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("databses") && err.contains("typo.toml"),
        "{err}"
    );

    let out = edbstress(
        &["config", "show", "--quick", "--op-mix", "50/50/50/50"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("op_mix"), "{}", stderr(&out));

    let out = edbstress(&["config", "show", "--config", "missing.toml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));
}

#[test]
fn top_level_help_says_what_the_tool_does_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let out = edbstress(&["--help"], dir.path());
    assert!(out.status.success());
    let help = stdout(&out);
    for needle in [
        "Validate storage for Exchange-style mailbox databases",
        "mailboxes",
        "latency",
        "checksums",
        "Examples:",
        "edbstress run --quick",
        "edbstress run --mailboxes 5000",
        "edbstress checksum --db-path",
        "edbstress recover --db-path",
    ] {
        assert!(help.contains(needle), "{needle} missing from\n{help}");
    }
    assert!(!help.contains("thin front end"), "{help}");
}
