//! `edbstress inject` end to end: what it reports it did is what `checksum` and
//! `recover` find; it refuses foreign files; and a Performance run on a database with
//! an injected bad page fails, naming the fault.

use crate::suite::common;
use common::{edbstress, json};

use std::path::Path;

use edbstress_engine::fault::{FaultKind, FaultRequest, inject_database};
use edbstress_engine::read_header;
use edbstress_io::IoMode;

fn prepare(dir: &Path, databases: &str, size: &str) {
    let out = edbstress(
        &[
            "prepare",
            "--databases",
            databases,
            "--database-size",
            size,
            "--page-size",
            "32KiB",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir,
    );
    assert!(
        out.status.success(),
        "prepare: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `edbstress inject --json` and returns the faults it reports.
fn inject(dir: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["inject", "--json"];
    args.extend_from_slice(extra);
    let out = edbstress(&args, dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)["faults"].as_array().unwrap().clone()
}

const DB: &str = "db/edbstress001.edb";

fn checksum_db(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["checksum", "--json", "--buffered"];
    args.extend_from_slice(extra);
    args.push(DB);
    json(&edbstress(&args, dir))["databases"][0].clone()
}

#[test]
fn inject_reports_what_checksum_and_recover_then_find() {
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path(), "1", "8MiB");
    let flips = inject(
        dir.path(),
        &[
            "--db", DB, "--kind", "bitflip", "--bits", "1", "--seed", "3", "--count", "2",
        ],
    );
    let misdirected = inject(
        dir.path(),
        &["--db", DB, "--kind", "misdirect", "--seed", "4"],
    );
    let d = checksum_db(dir.path(), &[]);
    let problems = d["problems"].as_array().unwrap();
    let find = |pgno: &serde_json::Value| {
        problems
            .iter()
            .find(|p| &p["pgno"] == pgno)
            .unwrap_or_else(|| panic!("page {pgno} not listed: {problems:?}"))
            .clone()
    };
    for f in &flips {
        assert_eq!(f["expected"]["kind"], "correctable");
        let p = find(&f["pgno"]);
        assert_eq!(p["kind"], "correctable");
        assert_eq!(p["bit"], f["bits"][0]);
        assert_eq!(p["offset"], f["offset"]);
    }
    let m = &misdirected[0];
    let p = find(&m["pgno"]);
    assert_eq!(p["kind"], "wrong_page_number");
    assert_eq!(p["found"], m["source_pgno"]);
    // Repair fixes the two flips only.
    assert_eq!(checksum_db(dir.path(), &["--repair"])["repaired_pages"], 2);
    let d = checksum_db(dir.path(), &[]);
    assert_eq!(d["correctable_pages"], 0);
    assert_eq!(d["wrong_pgno_pages"], 1);

    // A dropped write during real transactions: `recover` reports the lost flush.
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path(), "1", "8MiB");
    let lost = inject(
        dir.path(),
        &[
            "--db",
            DB,
            "--log-dir",
            "logs/edbstress001",
            "--kind",
            "lost-flush",
            "--seed",
            "2",
            "--buffered",
        ],
    );
    let out = edbstress(
        &[
            "recover",
            "--json",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["result"], "fail");
    let flushes = v["instances"][0]["lost_flushes"].as_array().unwrap();
    assert_eq!(flushes.len(), 1, "{v}");
    assert_eq!(flushes[0]["pgno"], lost[0]["pgno"]);

    // A log segment (the transactions above filled some): `checksum` of the logs names the segment.
    let seg = inject(
        dir.path(),
        &[
            "--log-dir",
            "logs/edbstress001",
            "--kind",
            "log-segment",
            "--seed",
            "1",
        ],
    );
    let out = edbstress(
        &[
            "checksum",
            "--json",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let logs = &json(&out)["logs"][0];
    assert_eq!(logs["bad_segments"], 1, "{logs}");
    assert_eq!(logs["problems"][0]["segment"], seg[0]["segment"]);
}

#[test]
fn inject_refuses_foreign_files_and_misuse_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("other.edb");
    let content = vec![0x42u8; 256 * 1024];
    std::fs::write(&foreign, &content).unwrap();
    let out = edbstress(
        &[
            "inject",
            "--db",
            foreign.to_str().unwrap(),
            "--kind",
            "zero",
            "--seed",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an edbstress file"), "{err}");
    assert!(std::fs::read(&foreign).unwrap() == content);
    // A page fault aimed at a log directory, and an unknown kind.
    let out = edbstress(
        &["inject", "--log-dir", ".", "--kind", "torn", "--seed", "1"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --db FILE"));
    let out = edbstress(
        &["inject", "--db", "x", "--kind", "melt", "--seed", "1"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown fault kind"));
}

#[test]
fn a_performance_run_on_a_database_with_an_injected_bad_page_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    prepare(dir.path(), "2", "32MiB");
    // A page in use (below the next unused page), so the run cannot simply overwrite
    // it: find the seed on a scratch copy.
    let db = dir.path().join(DB);
    let next_unused = read_header(&db, IoMode::Buffered)
        .unwrap()
        .header
        .next_unused_page;
    let scratch = dir.path().join("scratch.edb");
    let seed = (0..100u64)
        .find(|&seed| {
            std::fs::copy(&db, &scratch).unwrap();
            let request = FaultRequest {
                kind: FaultKind::Bitflip,
                seed,
                count: 1,
                bits: Some(2),
            };
            inject_database(&scratch, &request).unwrap()[0]
                .pgno
                .unwrap()
                < next_unused
        })
        .expect("a seed that hits a page in use");
    std::fs::remove_file(&scratch).unwrap();
    let seed = seed.to_string();
    let out = edbstress(
        &[
            "inject", "--json", "--db", DB, "--kind", "bitflip", "--bits", "2", "--seed", &seed,
        ],
        dir.path(),
    );
    assert!(out.status.success());
    let pgno = json(&out)["faults"][0]["pgno"].as_u64().unwrap();

    let out = edbstress(
        &[
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
            "2",
            "--sample-interval",
            "1s",
            "--bdm-rate",
            "200",
            "--copies",
            "1",
            "--buffered",
            "--db-path",
            "db",
            "--log-path",
            "logs",
            "--results-dir",
            "results",
            "--duration",
            "3s",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let run_dir = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["overall_result"], "Fail");
    let failed: Vec<&str> = r["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert!(
        failed.contains(&"database_checksum_errors") || failed.contains(&"bdm_checksum_errors"),
        "{failed:?}"
    );
    // The test log names the damaged page: BDM's pass finds it, or a transaction reads
    // it first (for instance while the cache fills) and the run aborts naming it.
    let log = std::fs::read_to_string(run_dir.join("test.log")).unwrap();
    let by_bdm = |l: &str| l.contains("BDM found a corrupt page") && l.contains(&pgno.to_string());
    let by_read = |l: &str| l.contains(&format!("page {pgno} of ")) && l.contains("is damaged");
    assert!(
        log.lines().any(|l| by_bdm(l) || by_read(l)),
        "page {pgno} not named in test.log:\n{log}"
    );
}
