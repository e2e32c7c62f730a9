//! DatabaseBackup and SoftRecovery runs end to end through the runner.

use super::common;

use std::sync::atomic::AtomicBool;

use edbstress_io::IoClass;
use edbstress_report::{TestType, Verdict};
use edbstress_workload::runner::run;

#[test]
fn database_backup_run_reports_mb_per_sec_per_database_and_in_total() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = common::small_config(tmp.path(), TestType::DatabaseBackup);
    config.database_size = 16 << 20;
    config.backup_path = Some(tmp.path().join("backup"));
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    assert_eq!(r.overall_result, Verdict::Pass, "{:?}", r.failed_criteria);
    assert!(
        outcome
            .dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("DatabaseBackup_")
    );
    assert_eq!(r.instances.len(), 2);
    for inst in &r.instances {
        assert!(inst.mb_per_sec.unwrap() > 0.0);
        let reads = &inst.io[&IoClass::BackupRead];
        assert_eq!(reads.avg_bytes, 262_144.0);
        assert_eq!(
            inst.bytes_read,
            Some(std::fs::metadata(&inst.database_path).unwrap().len())
        );
    }
    assert!(r.totals.mb_per_sec.unwrap() > 0.0);
    assert!(r.target_transactional_iops.is_none());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(outcome.dir.join("results.json")).unwrap()).unwrap();
    assert!(json["instances"][0]["mb_per_sec"].is_number());
    assert!(json["totals"]["mb_per_sec"].is_number());
    assert!(tmp.path().join("backup/edbstress001.edb.bak").is_file());
}

#[test]
fn soft_recovery_run_reports_logs_replayed_and_elapsed_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let config = common::small_config(tmp.path(), TestType::SoftRecovery);
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    assert_eq!(r.overall_result, Verdict::Pass, "{:?}", r.failed_criteria);
    for inst in &r.instances {
        assert!(inst.logs_generated.unwrap() >= config.logs_to_replay);
        assert!(inst.logs_replayed.unwrap() >= config.logs_to_replay);
        assert!(inst.elapsed_seconds.unwrap() > 0.0);
        assert!(inst.io[&IoClass::RecoveryRead].count > 0);
    }
    assert!(r.totals.seconds_per_log.unwrap() > 0.0);
    let log = std::fs::read_to_string(outcome.dir.join("test.log")).unwrap();
    assert!(log.contains("Average time to replay one log file"), "{log}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(outcome.dir.join("results.json")).unwrap()).unwrap();
    assert!(json["instances"][0]["logs_replayed"].is_number());
    assert!(json["instances"][0]["elapsed_seconds"].is_number());
}
