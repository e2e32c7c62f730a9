//! The workload shape of a run: the ratios that say how Exchange-like its I/O was
//! (request sizes, the read/write balance, log traffic per database I/O, replication
//! and maintenance reads, what a soft recovery reads per log file, database growth),
//! computed from the results' counters alone, beside the same ratios in two published
//! Jetstress reports.
//!
//! The reference values come from the Performance and SoftRecovery appendices of two
//! ESRP-Storage documents (per database; "~" marks a value derived from several
//! counters of the report rather than printed in it):
//! - Jetstress 2013: Dell EqualLogic PS6210E, 5,000 mailboxes, 6 databases, 2 copies.
//! - Jetstress 2010: Cisco UCS C210 M2, exchange 2010 profile.
//!
//! The arithmetic behind every value is in docs/fidelity.md ("Reference figures");
//! bench/fidelity/compare.py uses the same values. Soft-recovery pages per log file are
//! the reports' reads per log file × their average read size ÷ 32 KiB.

use edbstress_io::IoClass;

use crate::model::{ClassSummary, RunResults, TestType};

/// The size of one log file (the soft-recovery rows count log files of this size).
pub const LOG_FILE_BYTES: f64 = 1_048_576.0;

/// One published value of a ratio.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reference {
    /// The value.
    pub value: f64,
    /// Derived from several counters of the report (shown with "~").
    pub derived: bool,
}

/// The reports the reference columns come from, in column order.
pub const REFERENCE_REPORTS: [&str; 2] = [
    "Jetstress 2013 (Dell PS6210E ESRP)",
    "Jetstress 2010 (Cisco UCS C210 ESRP)",
];

/// One row of the Workload shape table.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeRow {
    /// Machine name: "db_read_avg_bytes", ...
    pub key: &'static str,
    /// What the ratio is.
    pub name: &'static str,
    /// Decimals to show.
    pub decimals: usize,
    /// This run's value; None when the run has nothing to compute it from (no
    /// replication, BDM off, no I/O of the kind).
    pub value: Option<f64>,
    /// How the value was computed from `results.json`, for the reader.
    pub from: &'static str,
    /// The value in each of [`REFERENCE_REPORTS`].
    pub references: [Option<Reference>; 2],
}

const fn exact(value: f64) -> Option<Reference> {
    Some(Reference {
        value,
        derived: false,
    })
}

const fn derived(value: f64) -> Option<Reference> {
    Some(Reference {
        value,
        derived: true,
    })
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

fn bytes(s: &ClassSummary) -> f64 {
    s.avg_bytes * s.count as f64
}

/// The rows for `r`: the transactional rows for Performance and Stress runs, the
/// soft-recovery rows for SoftRecovery runs, none for DatabaseBackup.
pub fn workload_shape(r: &RunResults) -> Vec<ShapeRow> {
    let io = &r.totals.io;
    let class = |c: IoClass| io.get(&c).cloned().unwrap_or_default();
    let avg_bytes = |s: &ClassSummary| (s.count > 0).then_some(s.avg_bytes);
    match r.test_type {
        TestType::Performance | TestType::Stress => {
            let (reads, writes) = (class(IoClass::DbRead), class(IoClass::DbWrite));
            let logs = class(IoClass::LogWrite);
            let replication = class(IoClass::ReplicationRead);
            let bdm = class(IoClass::BdmRead);
            let db_ios = (reads.count + writes.count) as f64;
            let databases = f64::from(r.parameters.databases.max(1));
            let growth = r.sizing.final_bytes as f64 - r.sizing.initial_bytes as f64;
            vec![
                ShapeRow {
                    key: "db_read_avg_bytes",
                    name: "Database read, average bytes",
                    decimals: 0,
                    value: avg_bytes(&reads),
                    from: "totals.io.db_read.avg_bytes",
                    references: [exact(32_825.0), exact(34_876.0)],
                },
                ShapeRow {
                    key: "db_write_avg_bytes",
                    name: "Database write, average bytes",
                    decimals: 0,
                    value: avg_bytes(&writes),
                    from: "totals.io.db_write.avg_bytes",
                    references: [exact(35_970.0), exact(36_426.0)],
                },
                ShapeRow {
                    key: "reads_per_write",
                    name: "Transactional database reads per write",
                    decimals: 2,
                    value: ratio(reads.count as f64, writes.count as f64),
                    from: "db_read.count / db_write.count",
                    references: [derived(2.352), derived(1.322)],
                },
                ShapeRow {
                    key: "log_write_avg_bytes",
                    name: "Log write, average bytes",
                    decimals: 0,
                    value: avg_bytes(&logs),
                    from: "totals.io.log_write.avg_bytes",
                    references: [exact(20_299.0), exact(4_662.0)],
                },
                ShapeRow {
                    key: "log_writes_per_db_io",
                    name: "Log writes per database read or write",
                    decimals: 3,
                    value: ratio(logs.count as f64, db_ios),
                    from: "log_write.count / (db_read.count + db_write.count)",
                    references: [derived(0.0715), derived(0.381)],
                },
                ShapeRow {
                    key: "log_bytes_per_db_io",
                    name: "Log bytes per database read or write",
                    decimals: 0,
                    value: ratio(bytes(&logs), db_ios),
                    from: "log_write.count × avg_bytes / (db_read.count + db_write.count)",
                    references: [derived(1_451.0), derived(1_776.0)],
                },
                ShapeRow {
                    key: "replication_read_avg_bytes",
                    name: "Log replication read, average bytes",
                    decimals: 0,
                    value: avg_bytes(&replication),
                    from: "totals.io.replication_read.avg_bytes",
                    references: [exact(232_568.0), exact(213_310.0)],
                },
                ShapeRow {
                    key: "bdm_reads_per_sec_per_db",
                    name: "BDM reads/sec per database",
                    decimals: 2,
                    value: (bdm.count > 0).then(|| bdm.per_sec / databases),
                    from: "totals.io.bdm_read.per_sec / parameters.databases",
                    references: [exact(8.61), exact(27.29)],
                },
                ShapeRow {
                    key: "bdm_read_avg_bytes",
                    name: "BDM read, average bytes",
                    decimals: 0,
                    value: avg_bytes(&bdm),
                    from: "totals.io.bdm_read.avg_bytes",
                    references: [exact(261_897.0), exact(261_229.0)],
                },
                ShapeRow {
                    key: "growth_per_db_io",
                    name: "Database growth per transactional I/O, bytes",
                    decimals: 0,
                    value: ratio(growth, db_ios),
                    from: "(sizing.final_bytes − sizing.initial_bytes) / (db_read.count + db_write.count)",
                    references: [derived(333.0), derived(519.0)],
                },
            ]
        }
        TestType::SoftRecovery => {
            let recovery = class(IoClass::RecoveryRead);
            let logs: u32 = r.instances.iter().filter_map(|i| i.logs_replayed).sum();
            let page = f64::from(r.parameters.page_size.max(1));
            // Recovery reads are the replayed log files and the database pages they
            // touch; the log part is one file per log replayed.
            let database_bytes = (bytes(&recovery) - f64::from(logs) * LOG_FILE_BYTES).max(0.0);
            vec![
                ShapeRow {
                    key: "recovery_pages_per_log",
                    name: "Soft recovery: database pages read per replayed log file",
                    decimals: 0,
                    value: (recovery.count > 0)
                        .then(|| ratio(database_bytes / page, f64::from(logs)))
                        .flatten(),
                    from: "(recovery_read bytes − logs replayed × 1 MiB) / page_size / logs replayed",
                    references: [derived(789.0), derived(1_016.0)],
                },
                ShapeRow {
                    key: "recovery_seconds_per_log",
                    name: "Soft recovery: seconds per log file (depends on the storage)",
                    decimals: 3,
                    value: r.totals.seconds_per_log,
                    from: "totals.seconds_per_log",
                    references: [derived(2.018), derived(2.843)],
                },
            ]
        }
        TestType::DatabaseBackup => Vec::new(),
    }
}

/// "+12 %" of `value` against `reference`.
pub fn difference_pct(value: f64, reference: f64) -> Option<f64> {
    (reference != 0.0).then(|| (value - reference) / reference.abs() * 100.0)
}
