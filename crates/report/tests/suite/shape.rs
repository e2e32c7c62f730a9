//! The Workload shape ratios computed from results counters.

use super::common;

use edbstress_io::IoClass;
use edbstress_report::shape::{LOG_FILE_BYTES, ShapeRow, workload_shape};
use edbstress_report::{ClassSummary, InstanceResult, IoSummary, RunResults, TestType};

fn summary(count: u64, avg_bytes: f64, per_sec: f64) -> ClassSummary {
    ClassSummary {
        count,
        avg_bytes,
        per_sec,
        ..ClassSummary::default()
    }
}

fn row<'a>(rows: &'a [ShapeRow], key: &str) -> &'a ShapeRow {
    rows.iter().find(|r| r.key == key).unwrap()
}

fn results(test_type: TestType, io: IoSummary) -> RunResults {
    let mut r = common::crafted();
    r.test_type = test_type;
    r.totals.io = io;
    r
}

#[test]
fn transactional_ratios_from_the_counters() {
    let mut io = IoSummary::new();
    io.insert(IoClass::DbRead, summary(3_000, 32_768.0, 300.0));
    io.insert(IoClass::DbWrite, summary(1_000, 36_000.0, 100.0));
    io.insert(IoClass::LogWrite, summary(400, 5_000.0, 40.0));
    io.insert(IoClass::BdmRead, summary(100, 262_144.0, 10.0));
    let mut r = results(TestType::Performance, io);
    r.parameters.databases = 2;
    r.sizing.initial_bytes = 1_000_000;
    r.sizing.final_bytes = 3_000_000;
    let rows = workload_shape(&r);
    assert_eq!(row(&rows, "db_read_avg_bytes").value, Some(32_768.0));
    assert_eq!(row(&rows, "reads_per_write").value, Some(3.0));
    assert_eq!(row(&rows, "log_writes_per_db_io").value, Some(0.1));
    assert_eq!(row(&rows, "log_bytes_per_db_io").value, Some(500.0));
    assert_eq!(row(&rows, "bdm_reads_per_sec_per_db").value, Some(5.0));
    assert_eq!(row(&rows, "growth_per_db_io").value, Some(500.0));
    assert_eq!(
        row(&rows, "replication_read_avg_bytes").value,
        None,
        "no replication: nothing to show"
    );
    assert!(
        rows.iter()
            .all(|r| r.references.iter().all(Option::is_some))
    );
}

#[test]
fn soft_recovery_rows_subtract_the_log_files() {
    let mut io = IoSummary::new();
    // 2 logs of 1 MiB plus 64 pages of 32 KiB.
    io.insert(
        IoClass::RecoveryRead,
        summary(96, (2.0 * LOG_FILE_BYTES + 64.0 * 32_768.0) / 96.0, 1.0),
    );
    let mut r = results(TestType::SoftRecovery, io);
    r.parameters.page_size = 32_768;
    r.totals.seconds_per_log = Some(0.5);
    r.instances = vec![InstanceResult {
        logs_replayed: Some(2),
        ..InstanceResult::default()
    }];
    let rows = workload_shape(&r);
    let pages = row(&rows, "recovery_pages_per_log").value.unwrap();
    assert!((pages - 32.0).abs() < 1e-9, "{pages}");
    assert_eq!(row(&rows, "recovery_seconds_per_log").value, Some(0.5));
    assert!(workload_shape(&results(TestType::DatabaseBackup, IoSummary::new())).is_empty());
}
