//! End-to-end: `edbstress probe` on a small real file in a temp dir.

use crate::suite::common;
use common::{assert_exit, edbstress, json};

use std::path::Path;

/// tmpfs refuses O_DIRECT; measure through the page cache there.
fn io_flags(dir: &Path) -> Vec<&'static str> {
    let check = dir.join("direct-check");
    let direct = edbstress_io::DataFile::create_new(&check, edbstress_io::IoMode::Direct).is_ok();
    let _ = std::fs::remove_file(check);
    if direct { vec![] } else { vec!["--buffered"] }
}

#[test]
fn each_pattern_reports_sane_numbers_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for pattern in ["randread", "randwrite", "read", "write", "logwrite"] {
        let mut args = vec![
            "probe",
            "--path",
            d,
            "--size",
            "8MiB",
            "--duration",
            "300ms",
            "--pattern",
            pattern,
            "--json",
        ];
        args.extend(io_flags(dir.path()));
        let out = edbstress(&args, dir.path());
        assert_exit(&out, 0, "probe");
        let v = json(&out);
        assert_eq!(v["pattern"], pattern);
        assert!(v["ops"].as_u64().unwrap() > 0, "{v}");
        for key in ["iops", "mb_per_sec", "avg_latency_ms", "p99_ms"] {
            assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
        }
        let cpu = v["cpu_seconds"].as_f64().unwrap();
        assert!((0.0..5.0).contains(&cpu), "{v}");
        assert!(v["p99_ms"].as_f64() >= v["p50_ms"].as_f64(), "{v}");
        assert!(!dir.path().join("edbstress-probe.dat").exists());
    }
}

#[test]
fn default_table_keeps_the_file_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut args = vec![
        "probe",
        "--path",
        d,
        "--size",
        "8MiB",
        "--duration",
        "100ms",
        "--keep",
        "--json",
    ];
    args.extend(io_flags(dir.path()));
    let out = edbstress(&args, dir.path());
    assert_exit(&out, 0, "probe");
    let v = json(&out);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 12);
    assert!(results.iter().all(|r| r["ops"].as_u64().unwrap() > 0));
    assert!(dir.path().join("edbstress-probe.dat").exists());
}

#[test]
fn refuses_a_foreign_file() {
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("precious.db");
    std::fs::write(&foreign, vec![1u8; 4 << 20]).unwrap();
    let out = edbstress(
        &[
            "probe",
            "--file",
            foreign.to_str().unwrap(),
            "--pattern",
            "randwrite",
            "--duration",
            "100ms",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an edbstress probe file"), "{err}");
    assert_eq!(std::fs::read(&foreign).unwrap(), vec![1u8; 4 << 20]);
}
