//! End-to-end: `prepare` then `checksum` on real files, with faults injected at the
//! offsets docs/format.md gives (page P starts at byte (P + 1) × page_size).

use crate::suite::common;
use common::{edbstress, json};

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Output;

const PAGE: u64 = 32 * 1024;

/// `prepare` with small defaults; `extra` may override --databases / --database-size.
fn prepare(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["prepare"];
    if !extra.contains(&"--databases") {
        args.extend_from_slice(&["--databases", "2"]);
    }
    if !extra.contains(&"--database-size") {
        args.extend_from_slice(&["--database-size", "8MiB"]);
    }
    args.extend_from_slice(&[
        "--page-size",
        "32KiB",
        "--db-path",
        "db",
        "--log-path",
        "logs",
    ]);
    args.extend_from_slice(extra);
    edbstress(&args, dir)
}

/// `checksum --json` over every database and log stream under `dir`.
fn checksum_all(dir: &Path) -> Output {
    edbstress(
        &[
            "checksum",
            "--json",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir,
    )
}

fn page_offset(pgno: u64) -> u64 {
    (pgno + 1) * PAGE
}

#[allow(clippy::disallowed_methods)] // reads what is on disk, behind the engine's back
fn read_page(file: &std::fs::File, pgno: u64) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE as usize];
    file.read_exact_at(&mut buf, page_offset(pgno)).unwrap();
    buf
}

#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn flip_bit(file: &std::fs::File, pgno: u64, byte: u64, bit: u8) {
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, page_offset(pgno) + byte)
        .unwrap();
    b[0] ^= 1 << bit;
    file.write_all_at(&b, page_offset(pgno) + byte).unwrap();
}

#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn write_page(file: &std::fs::File, pgno: u64, page: &[u8]) {
    file.write_all_at(page, page_offset(pgno)).unwrap();
}

/// Overwrites `bytes` at `offset` of the file at `path`.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn overwrite(path: &Path, bytes: &[u8], offset: u64) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, offset).unwrap();
}

#[test]
fn prepare_checksum_detects_each_fault_kind_and_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let out = prepare(dir.path(), &[]);
    assert!(
        out.status.success(),
        "prepare failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("MiB/s"));

    let out = checksum_all(dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json(&out);
    assert_eq!(v["result"], "pass");
    let dbs = v["databases"].as_array().unwrap();
    assert_eq!(dbs.len(), 2);
    for db in dbs {
        assert_eq!(db["pages_seen"], 8 * 1024 * 1024 / PAGE - 2);
        for key in [
            "bad_pages",
            "correctable_pages",
            "wrong_pgno_pages",
            "uninitialized_pages",
        ] {
            assert_eq!(db[key], 0, "{key}");
        }
        assert!(db["path"].as_str().unwrap().ends_with(".edb"));
    }
    assert_eq!(v["logs"].as_array().unwrap().len(), 2);

    // Inject one fault of each kind into database 1.
    let db = dir.path().join("db/edbstress001.edb");
    let file = OpenOptions::new().read(true).write(true).open(&db).unwrap();
    flip_bit(&file, 10, 5000, 3); // correctable
    flip_bit(&file, 20, 100, 1); // two bits: bad
    flip_bit(&file, 20, 20000, 6);
    let page40 = read_page(&file, 40); // page 40 copied over page 30: wrong page number
    write_page(&file, 30, &page40);
    write_page(&file, 50, &vec![0u8; PAGE as usize]); // uninitialized

    let out = checksum_all(dir.path());
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["result"], "fail");
    let d = &v["databases"][0];
    assert_eq!(d["correctable_pages"], 1);
    assert_eq!(d["bad_pages"], 1);
    assert_eq!(d["wrong_pgno_pages"], 1);
    assert_eq!(d["uninitialized_pages"], 1);
    let problems = d["problems"].as_array().unwrap();
    let find = |pgno: u64| {
        problems
            .iter()
            .find(|p| p["pgno"] == pgno)
            .unwrap_or_else(|| panic!("page {pgno} not listed"))
    };
    assert_eq!(find(10)["kind"], "correctable");
    assert_eq!(find(10)["bit"], 5000 * 8 + 3);
    assert_eq!(find(20)["kind"], "bad");
    assert_eq!(find(30)["kind"], "wrong_page_number");
    assert_eq!(find(30)["found"], 40);
    assert_eq!(find(50)["kind"], "uninitialized");
    assert_eq!(
        v["databases"][1]["correctable_pages"], 0,
        "other database untouched"
    );

    // The text report names the same problems.
    let out = edbstress(&["checksum", "db/edbstress001.edb"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("holds page 40"), "{text}");
    assert!(text.contains("Result: FAIL"), "{text}");

    // --repair fixes exactly the correctable page.
    let before = read_page(&file, 20);
    let out = edbstress(
        &["checksum", "--json", "--repair", "db/edbstress001.edb"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["databases"][0]["repaired_pages"], 1);
    assert_eq!(
        read_page(&file, 20),
        before,
        "bad page must not be rewritten"
    );
    let out = edbstress(&["checksum", "--json", "db/edbstress001.edb"], dir.path());
    let d = &json(&out)["databases"][0];
    assert_eq!(d["correctable_pages"], 0);
    assert_eq!(d["bad_pages"], 1);
    assert_eq!(d["wrong_pgno_pages"], 1);
    assert_eq!(d["uninitialized_pages"], 1);
}

#[test]
fn damaged_log_segment_and_header_copy_fail_the_check() {
    let dir = tempfile::tempdir().unwrap();
    assert!(prepare(dir.path(), &["--databases", "1"]).status.success());
    // Corrupt the primary database header (slot 0): the shadow keeps the database usable.
    overwrite(&dir.path().join("db/edbstress001.edb"), &[0xAA; 4], 100);
    // Two bits in the log file header segment.
    let log = dir.path().join("logs/edbstress001/E0000000001.log");
    overwrite(&log, &[0x11], 70);
    let out = checksum_all(dir.path());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["databases"][0]["header"]["primary_valid"], false);
    assert_eq!(v["databases"][0]["header"]["shadow_valid"], true);
    assert_eq!(v["databases"][0]["bad_pages"], 0);
    assert_eq!(v["logs"][0]["bad_segments"], 1);
}

#[test]
fn refuses_to_overwrite_foreign_files_and_reuses_its_own() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("db")).unwrap();
    let foreign = dir.path().join("db/edbstress001.edb");
    std::fs::write(&foreign, vec![7u8; 100_000]).unwrap();
    let out = prepare(dir.path(), &["--databases", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an edbstress database"), "{err}");
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        vec![7u8; 100_000],
        "foreign file untouched"
    );

    std::fs::remove_file(&foreign).unwrap();
    assert!(prepare(dir.path(), &["--databases", "1"]).status.success());
    let first = std::fs::read(&foreign).unwrap();
    let out = prepare(dir.path(), &["--databases", "1"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("reused"));
    assert_eq!(
        std::fs::read(&foreign).unwrap(),
        first,
        "reuse must not rewrite"
    );

    // Another size is refused without --recreate and rebuilt with it.
    let out = prepare(
        dir.path(),
        &["--databases", "1", "--database-size", "12MiB"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--recreate"));
    let out = prepare(
        dir.path(),
        &["--databases", "1", "--database-size", "12MiB", "--recreate"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::metadata(&foreign).unwrap().len(), 12 * 1024 * 1024);
}

#[test]
fn bad_input_gets_a_clear_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expect) in [
        (
            vec!["prepare", "--database-size", "12 parsecs"],
            "unknown unit",
        ),
        (
            vec!["prepare", "--page-size", "64KiB"],
            "4KiB, 8KiB, 16KiB or 32KiB",
        ),
        (vec!["prepare", "--databases", "0"], "databases"),
        (vec!["prepare", "--database-size", "64KiB"], "too small"),
        (
            vec!["prepare", "--database-size", "100TiB"],
            "not enough free space",
        ),
        (vec!["prepare", "--database-size", "1000TiB"], "too large"),
        (vec!["checksum", "--db-path", "nowhere"], "nowhere"),
        (vec!["checksum", "Cargo.toml"], "Cargo.toml"),
        (vec!["prepare", "--frobnicate"], "--frobnicate"),
    ] {
        if args[1] == "Cargo.toml" {
            std::fs::write(dir.path().join("Cargo.toml"), vec![b'x'; 70_000]).unwrap();
        }
        let out = edbstress(&args, dir.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(expect),
            "{args:?}: expected '{expect}' in: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // The filesystem is named by an absolute path ("." says nothing to a reader).
    let out = edbstress(&["prepare", "--database-size", "100TiB"], dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    let cwd = dir.path().canonicalize().unwrap();
    let holding = format!("filesystem holding {}:", cwd.display());
    assert!(err.contains(&holding), "expected '{holding}' in: {err}");
}
