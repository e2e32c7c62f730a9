//! Performance and Stress runs end to end on small databases.

mod common;

use std::sync::atomic::AtomicBool;

use edbstress_io::IoClass;
use edbstress_report::{TestType, Verdict};
use edbstress_workload::runner::run;

#[test]
fn throughput_performance_run_writes_a_complete_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let config = common::small_config(tmp.path(), TestType::Performance);
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    for f in [
        "config.toml",
        "test.log",
        "samples.csv",
        "report.html",
        "results.json",
    ] {
        assert!(outcome.dir.join(f).is_file(), "{f} missing");
    }
    assert!(!r.aborted);
    assert_eq!(r.instances.len(), 2);
    assert!(r.measured_seconds >= 2.5, "{}", r.measured_seconds);
    let reads = &r.totals.io[&IoClass::DbRead];
    assert!(
        reads.count > 0,
        "no database reads: cache 2 MiB per instance over 24 MiB databases"
    );
    assert!(
        (reads.avg_bytes - 32768.0).abs() < 1.0,
        "{}",
        reads.avg_bytes
    );
    assert!(r.totals.io[&IoClass::LogWrite].count > 0);
    //BDMSTUB assert!(r.totals.io[&IoClass::BdmRead].count > 0);
    assert!(r.target_transactional_iops.is_none());
    let v = r.verification.as_ref().unwrap();
    assert!(v.passed);
    println!(
        "{}",
        std::fs::read_to_string(outcome.dir.join("test.log")).unwrap()
    );
    for c in &r.failed_criteria {
        println!("failed: {}", c.describe());
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(outcome.dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["test_type"], "performance");
    assert!(matches!(r.overall_result, Verdict::Pass | Verdict::Fail));
}
