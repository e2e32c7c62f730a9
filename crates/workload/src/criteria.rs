//! The pass/fail rules (product spec §4), evaluated on measured results.
//!
//! Per instance: average database read latency, the highest per-interval average
//! database read latency, the same two for log writes, and average database page fault
//! stalls per second, each against the profile's threshold (optional p99 limits when
//! configured). For the run: achieved transactional IOPS against the target
//! (mailbox-profile runs), no I/O errors, and an intact checksum verification.
//! A threshold met exactly passes.
//!
//! exchange2007 runs are judged as Jetstress 2007 judged them, per volume rather than
//! per instance: Avg. Disk sec/Read of each volume holding databases and Avg. Disk
//! sec/Write of each volume holding logs (average and highest interval average), from
//! the volume's own counters.

use edbstress_io::IoClass;
use edbstress_report::{
    Comparison, Criterion, InstanceResult, IoSummary, KernelLog, Verification, Volume,
};

use crate::profile::Thresholds;

/// What the rules look at.
pub struct Measurements<'a> {
    /// Per-instance results (their `io` and `engine` summaries).
    pub instances: &'a [InstanceResult],
    /// Some (and not empty): judge latency per volume (exchange2007), not per instance.
    pub volumes: Option<&'a [Volume]>,
    /// Totals over all instances.
    pub totals: &'a IoSummary,
    /// Transactional IOPS achieved over all instances.
    pub achieved_iops: f64,
    /// The target, for mailbox-profile runs.
    pub target_iops: Option<f64>,
    /// Checksum verification after the run, when it ran.
    pub verification: Option<&'a Verification>,
    /// Transactions that failed with an engine error.
    pub transaction_errors: u64,
    /// Corrupt pages background database maintenance found during the run.
    pub bdm_bad_pages: u64,
    /// Instances that could not be shut down cleanly.
    pub shutdown_errors: u64,
    /// The longest sampling interval and the longest one allowed, seconds (runs that
    /// measured).
    pub sampling: Option<(f64, f64)>,
    /// Whether a measured period produced figures; when not, the criteria that need
    /// them say "not measured" and fail.
    pub measured: bool,
    /// Why the run was aborted, when it was: a failed criterion of its own.
    pub abort_reason: Option<&'a str>,
    /// Instances of the run (their criteria are listed even when nothing was measured).
    pub instance_count: u32,
}

struct CriterionSpec {
    key: &'static str,
    name: &'static str,
    unit: &'static str,
    comparison: Comparison,
}

fn criterion(spec: &CriterionSpec, scope: &str, measured: f64, threshold: f64) -> Criterion {
    Criterion {
        key: spec.key.to_string(),
        name: spec.name.to_string(),
        scope: scope.to_string(),
        measured,
        threshold,
        comparison: spec.comparison,
        unit: spec.unit.to_string(),
        passed: spec.comparison.holds(measured, threshold),
        not_measured: false,
        note: None,
    }
}

/// A criterion whose inputs were not measured: it says so and is not met (a run that
/// measured nothing must not pass on zeros).
fn not_measured(spec: &CriterionSpec, scope: &str, threshold: f64, why: &str) -> Criterion {
    Criterion {
        not_measured: true,
        passed: false,
        note: Some(why.to_string()),
        ..criterion(spec, scope, 0.0, threshold)
    }
}

/// `criterion`, or [`not_measured`] when `measured` is None.
fn judged(
    spec: &CriterionSpec,
    scope: &str,
    measured: Option<f64>,
    threshold: f64,
    why: &str,
) -> Criterion {
    match measured {
        Some(v) => criterion(spec, scope, v, threshold),
        None => not_measured(spec, scope, threshold, why),
    }
}

const ABORTED: CriterionSpec = at_most("run_aborted", "Test ran to its end (aborts)", "count");

/// The criterion an aborted run fails, its cause in the note: the verdict's reason
/// is then a failed criterion like any other, never a table of passes.
pub fn abort_criterion(reason: &str) -> Criterion {
    Criterion {
        note: Some(reason.to_string()),
        ..criterion(&ABORTED, "Total", 1.0, 0.0)
    }
}

const fn at_most(key: &'static str, name: &'static str, unit: &'static str) -> CriterionSpec {
    CriterionSpec {
        key,
        name,
        unit,
        comparison: Comparison::AtMost,
    }
}

const DB_READ_AVG: CriterionSpec = at_most(
    "db_read_avg_latency",
    "I/O Database Reads Average Latency",
    "ms",
);
const DB_READ_MAX: CriterionSpec = at_most(
    "db_read_max_latency",
    "I/O Database Reads Maximum Latency (highest interval average)",
    "ms",
);
const DB_READ_P99: CriterionSpec = at_most(
    "db_read_p99_latency",
    "I/O Database Reads 99th Percentile Latency",
    "ms",
);
const LOG_WRITE_AVG: CriterionSpec = at_most(
    "log_write_avg_latency",
    "I/O Log Writes Average Latency",
    "ms",
);
const LOG_WRITE_MAX: CriterionSpec = at_most(
    "log_write_max_latency",
    "I/O Log Writes Maximum Latency (highest interval average)",
    "ms",
);
const LOG_WRITE_P99: CriterionSpec = at_most(
    "log_write_p99_latency",
    "I/O Log Writes 99th Percentile Latency",
    "ms",
);
const VOLUME_READ_AVG: CriterionSpec = at_most(
    "volume_db_read_avg_latency",
    "Database volume Avg. Disk sec/Read (average)",
    "ms",
);
const VOLUME_READ_MAX: CriterionSpec = at_most(
    "volume_db_read_max_latency",
    "Database volume Avg. Disk sec/Read (highest interval average)",
    "ms",
);
const VOLUME_WRITE_AVG: CriterionSpec = at_most(
    "volume_log_write_avg_latency",
    "Log volume Avg. Disk sec/Write (average)",
    "ms",
);
const VOLUME_WRITE_MAX: CriterionSpec = at_most(
    "volume_log_write_max_latency",
    "Log volume Avg. Disk sec/Write (highest interval average)",
    "ms",
);
const STALLS: CriterionSpec = at_most(
    "page_fault_stalls",
    "Database Page Fault Stalls/sec",
    "per sec",
);
const IOPS: CriterionSpec = CriterionSpec {
    key: "transactional_iops",
    name: "Achieved Transactional I/O per Second (target)",
    unit: "IOPS",
    comparison: Comparison::AtLeast,
};
/// exchange2007: Jetstress 2007's "Achieved I/O per Second", the database volumes'
/// transfers, against the target (same key: the same rule, counted as 2007 counted).
const IOPS_VOLUMES: CriterionSpec = CriterionSpec {
    key: "transactional_iops",
    name: "Achieved I/O per Second (Disk Transfers/sec of the database volumes; target)",
    unit: "IOPS",
    comparison: Comparison::AtLeast,
};
const IO_ERRORS: CriterionSpec = at_most("io_errors", "I/O errors", "count");
const TXN_ERRORS: CriterionSpec = at_most("transaction_errors", "Failed transactions", "count");
const BDM_CHECKSUMS: CriterionSpec = at_most(
    "bdm_checksum_errors",
    "Database pages failing checksum verification during the run (BDM)",
    "pages",
);
const SHUTDOWN: CriterionSpec = at_most(
    "shutdown_errors",
    "Instances not shut down cleanly",
    "count",
);
const SAMPLING: CriterionSpec = at_most(
    "sampling_stalls",
    "Longest sampling interval (longer: the process or the storage stopped responding)",
    "s",
);
const DB_CHECKSUMS: CriterionSpec = at_most(
    "database_checksum_errors",
    "Database pages failing checksum verification",
    "pages",
);
const LOG_CHECKSUMS: CriterionSpec = at_most(
    "log_checksum_errors",
    "Log segments failing checksum verification",
    "segments",
);

/// What a criterion shows when the run stopped before measuring anything.
const NOTHING_MEASURED: &str = "the run stopped before its measured period";

/// Evaluates every rule; the result lists each criterion with its measured value,
/// threshold and whether it passed.
pub fn evaluate(m: &Measurements<'_>, t: &Thresholds) -> Vec<Criterion> {
    let mut out = Vec::new();
    if let Some(reason) = m.abort_reason {
        out.push(abort_criterion(reason));
    }
    let volumes = m.volumes.filter(|v| !v.is_empty());
    push_volumes(&mut out, volumes.unwrap_or_default(), t);
    // A run stopped before measuring has no instance results: its instances' criteria
    // are still listed, as not measured.
    let unmeasured: Vec<InstanceResult> = if m.instances.is_empty() {
        (1..=m.instance_count)
            .map(|n| InstanceResult {
                name: edbstress_report::instance_name(n),
                ..InstanceResult::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    for inst in m.instances.iter().chain(&unmeasured) {
        // Judged per volume, an instance keeps only its stall rule.
        if volumes.is_none() {
            push_latencies(&mut out, inst, m, t);
        }
        push_stalls(&mut out, inst, t, m.measured);
    }
    push_totals(&mut out, m, volumes.is_some());
    out
}

/// The latency rules of each volume, as Jetstress 2007 judged them.
fn push_volumes(out: &mut Vec<Criterion>, volumes: &[Volume], t: &Thresholds) {
    for v in volumes {
        let scope = format!("Volume {}", v.device);
        if v.role.holds_databases() {
            out.push(criterion(
                &VOLUME_READ_AVG,
                &scope,
                v.avg_read_latency_ms,
                t.db_read_avg_ms,
            ));
            out.push(criterion(
                &VOLUME_READ_MAX,
                &scope,
                v.max_interval_read_latency_ms,
                t.db_read_max_ms,
            ));
        }
        if v.role.holds_logs() {
            out.push(criterion(
                &VOLUME_WRITE_AVG,
                &scope,
                v.avg_write_latency_ms,
                t.log_write_avg_ms,
            ));
            out.push(criterion(
                &VOLUME_WRITE_MAX,
                &scope,
                v.max_interval_write_latency_ms,
                t.log_write_max_ms,
            ));
        }
    }
}

/// The latency rules of one instance (database reads, log writes).
fn push_latencies(
    out: &mut Vec<Criterion>,
    inst: &InstanceResult,
    m: &Measurements<'_>,
    t: &Thresholds,
) {
    let scope = inst.name.as_str();
    let class = |c: IoClass| {
        inst.io
            .get(&c)
            .filter(|s| m.measured && s.count > 0)
            .cloned()
    };
    let no_io = |what: &str| {
        if m.measured {
            format!("no {what} completed")
        } else {
            NOTHING_MEASURED.to_string()
        }
    };
    let reads = class(IoClass::DbRead);
    let why = no_io("database read");
    out.push(judged(
        &DB_READ_AVG,
        scope,
        reads.as_ref().map(|r| r.avg_latency_ms),
        t.db_read_avg_ms,
        &why,
    ));
    out.push(judged(
        &DB_READ_MAX,
        scope,
        reads.as_ref().map(|r| r.max_interval_latency_ms),
        t.db_read_max_ms,
        &why,
    ));
    if let Some(p99) = t.db_read_p99_ms {
        out.push(judged(
            &DB_READ_P99,
            scope,
            reads.as_ref().map(|r| r.p99_ms),
            p99,
            &why,
        ));
    }
    let logs = class(IoClass::LogWrite);
    let why = no_io("log write");
    out.push(judged(
        &LOG_WRITE_AVG,
        scope,
        logs.as_ref().map(|l| l.avg_latency_ms),
        t.log_write_avg_ms,
        &why,
    ));
    out.push(judged(
        &LOG_WRITE_MAX,
        scope,
        logs.as_ref().map(|l| l.max_interval_latency_ms),
        t.log_write_max_ms,
        &why,
    ));
    if let Some(p99) = t.log_write_p99_ms {
        out.push(judged(
            &LOG_WRITE_P99,
            scope,
            logs.as_ref().map(|l| l.p99_ms),
            p99,
            &why,
        ));
    }
}

/// The rules on the whole run: throughput, errors, shutdown, sampling, verification.
fn push_totals(out: &mut Vec<Criterion>, m: &Measurements<'_>, per_volume: bool) {
    let nothing = NOTHING_MEASURED;
    let total = |v: f64| m.measured.then_some(v);
    if let Some(target) = m.target_iops {
        let spec = if per_volume { &IOPS_VOLUMES } else { &IOPS };
        out.push(judged(
            spec,
            "Total",
            total(m.achieved_iops),
            target,
            nothing,
        ));
    }
    let io_errors: u64 = m.totals.values().map(|c| c.errors).sum();
    out.push(judged(
        &IO_ERRORS,
        "Total",
        total(io_errors as f64),
        0.0,
        nothing,
    ));
    out.push(judged(
        &TXN_ERRORS,
        "Total",
        total(m.transaction_errors as f64),
        0.0,
        nothing,
    ));
    out.push(criterion(
        &BDM_CHECKSUMS,
        "Total",
        m.bdm_bad_pages as f64,
        0.0,
    ));
    out.push(criterion(&SHUTDOWN, "Total", m.shutdown_errors as f64, 0.0));
    if let Some((longest, limit)) = m.sampling {
        out.push(criterion(&SAMPLING, "Total", longest, limit));
    }
    if let Some(v) = m.verification {
        let bad_pages: u64 = v
            .databases
            .iter()
            .map(|d| d.bad_pages + d.correctable_pages + d.wrong_page_number)
            .sum();
        let bad_segments: u64 = v
            .logs
            .iter()
            .map(|l| l.bad_segments + l.sequence_problems.len() as u64)
            .sum();
        out.push(criterion(&DB_CHECKSUMS, "Total", bad_pages as f64, 0.0));
        out.push(criterion(&LOG_CHECKSUMS, "Total", bad_segments as f64, 0.0));
    }
}

const KERNEL_LOG: CriterionSpec = at_most(
    "kernel_log_errors",
    "Kernel log lines reporting errors, resets or timeouts on the devices under test",
    "lines",
);

/// The kernel log's criterion: no line about trouble on a device under test. None
/// when the kernel log could not be watched (nothing was measured).
pub fn kernel_log_criterion(log: &KernelLog) -> Option<Criterion> {
    log.source
        .as_ref()
        .map(|_| criterion(&KERNEL_LOG, "Total", log.events.len() as f64, 0.0))
}

/// The page fault stall rule of one instance.
fn push_stalls(out: &mut Vec<Criterion>, inst: &InstanceResult, t: &Thresholds, measured: bool) {
    let stalls = inst
        .engine
        .as_ref()
        .filter(|_| measured)
        .map(|e| e.page_fault_stalls_per_sec);
    let why = if measured {
        "no engine counter sample"
    } else {
        "the run stopped before its measured period"
    };
    out.push(judged(
        &STALLS,
        &inst.name,
        stalls,
        t.page_fault_stalls_per_sec,
        why,
    ));
}

/// The criteria of the DatabaseBackup and SoftRecovery tests, which have no latency
/// thresholds: no I/O error, and no `problem` (pages failing their checksum, instances
/// not recovered), named by `key` and `name`.
pub fn offline_criteria(
    totals: &IoSummary,
    key: &'static str,
    name: &'static str,
    problems: u64,
) -> Vec<Criterion> {
    let io_errors: u64 = totals.values().map(|c| c.errors).sum();
    let problem = at_most(key, name, "count");
    vec![
        criterion(&IO_ERRORS, "Total", io_errors as f64, 0.0),
        criterion(&problem, "Total", problems as f64, 0.0),
    ]
}

#[cfg(test)]
mod tests {
    use edbstress_report::{ClassSummary, EngineSummary, instance_name};

    use super::*;
    use crate::profile::Profile;
    use edbstress_report::TestType;

    fn instance(
        db_avg: f64,
        db_max: f64,
        log_avg: f64,
        log_max: f64,
        stalls: f64,
    ) -> InstanceResult {
        let mut io = IoSummary::new();
        io.insert(
            IoClass::DbRead,
            ClassSummary {
                avg_latency_ms: db_avg,
                max_interval_latency_ms: db_max,
                p99_ms: db_avg * 2.0,
                count: 100,
                ..Default::default()
            },
        );
        io.insert(
            IoClass::LogWrite,
            ClassSummary {
                avg_latency_ms: log_avg,
                max_interval_latency_ms: log_max,
                p99_ms: log_avg * 2.0,
                count: 100,
                ..Default::default()
            },
        );
        InstanceResult {
            name: instance_name(0),
            io,
            engine: Some(EngineSummary {
                page_fault_stalls_per_sec: stalls,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Measurements of `instances` with nothing else wrong.
    fn clean<'a>(
        instances: &'a [InstanceResult],
        totals: &'a IoSummary,
        achieved: f64,
    ) -> Measurements<'a> {
        Measurements {
            instances,
            volumes: None,
            totals,
            achieved_iops: achieved,
            target_iops: None,
            verification: None,
            transaction_errors: 0,
            bdm_bad_pages: 0,
            shutdown_errors: 0,
            sampling: None,
            measured: true,
            abort_reason: None,
            instance_count: instances.len() as u32,
        }
    }

    fn failed(instances: &[InstanceResult], achieved: f64, target: Option<f64>) -> Vec<String> {
        let totals = IoSummary::new();
        let m = Measurements {
            target_iops: target,
            ..clean(instances, &totals, achieved)
        };
        let t = Profile::Exchange2013.thresholds(TestType::Performance);
        evaluate(&m, &t)
            .into_iter()
            .filter(|c| !c.passed)
            .map(|c| c.key)
            .collect()
    }

    #[test]
    fn criteria_without_inputs_say_not_measured_and_fail() {
        // An instance that completed no database read: its read latency was not
        // measured, which must not pass as "0 ms".
        let mut inst = instance(1.0, 1.0, 1.0, 1.0, 0.0);
        inst.io.get_mut(&IoClass::DbRead).unwrap().count = 0;
        let totals = IoSummary::new();
        let t = Profile::Exchange2013.thresholds(TestType::Performance);
        let all = evaluate(&clean(std::slice::from_ref(&inst), &totals, 1.0), &t);
        let read_avg = all.iter().find(|c| c.key == "db_read_avg_latency").unwrap();
        assert!(read_avg.not_measured && !read_avg.passed, "{read_avg:?}");
        assert!(read_avg.describe().contains("not measured"));
        assert!(!read_avg.holds());
        let log_avg = all
            .iter()
            .find(|c| c.key == "log_write_avg_latency")
            .unwrap();
        assert!(log_avg.passed && !log_avg.not_measured);

        // A run aborted before measuring: nothing per instance or in total passes,
        // and the abort is a failed criterion carrying its cause.
        let m = Measurements {
            measured: false,
            abort_reason: Some("Insert transaction failed: No space left on device"),
            target_iops: Some(100.0),
            instances: &[],
            instance_count: 1,
            ..clean(std::slice::from_ref(&inst), &totals, 0.0)
        };
        let all = evaluate(&m, &t);
        assert_eq!(all[0].key, "run_aborted");
        assert!(!all[0].passed);
        assert!(
            all[0].describe().contains("No space left"),
            "{}",
            all[0].describe()
        );
        for key in [
            "db_read_avg_latency",
            "log_write_max_latency",
            "page_fault_stalls",
            "transactional_iops",
            "io_errors",
            "transaction_errors",
        ] {
            let c = all.iter().find(|c| c.key == key).unwrap();
            assert!(c.not_measured && !c.passed, "{key}: {c:?}");
        }
    }

    #[test]
    fn thresholds_met_exactly_pass() {
        let inst = [instance(20.0, 100.0, 10.0, 100.0, 1.0)];
        assert!(failed(&inst, 500.0, Some(500.0)).is_empty());
    }

    #[test]
    fn each_criterion_fails_alone() {
        let cases = [
            (
                instance(20.001, 100.0, 10.0, 100.0, 1.0),
                500.0,
                "db_read_avg_latency",
            ),
            (
                instance(20.0, 100.001, 10.0, 100.0, 1.0),
                500.0,
                "db_read_max_latency",
            ),
            (
                instance(20.0, 100.0, 10.001, 100.0, 1.0),
                500.0,
                "log_write_avg_latency",
            ),
            (
                instance(20.0, 100.0, 10.0, 100.001, 1.0),
                500.0,
                "log_write_max_latency",
            ),
            (
                instance(20.0, 100.0, 10.0, 100.0, 1.001),
                500.0,
                "page_fault_stalls",
            ),
            (
                instance(20.0, 100.0, 10.0, 100.0, 1.0),
                499.999,
                "transactional_iops",
            ),
        ];
        for (inst, achieved, key) in cases {
            assert_eq!(failed(&[inst], achieved, Some(500.0)), [key]);
        }
    }

    #[test]
    fn throughput_runs_have_no_iops_criterion_and_stress_is_lenient() {
        let inst = [instance(5.0, 150.0, 1.0, 150.0, 0.0)];
        assert_eq!(
            failed(&inst, 1.0, None),
            ["db_read_max_latency", "log_write_max_latency"]
        );
        let totals = IoSummary::new();
        let m = clean(&inst, &totals, 1.0);
        let stress = Profile::Exchange2013.thresholds(TestType::Stress);
        assert!(evaluate(&m, &stress).iter().all(|c| c.passed));
    }

    #[test]
    fn errors_and_checksum_failures_fail_the_run() {
        let inst = [instance(1.0, 1.0, 1.0, 1.0, 0.0)];
        let mut totals = IoSummary::new();
        totals.insert(
            IoClass::DbWrite,
            ClassSummary {
                errors: 2,
                ..Default::default()
            },
        );
        let verification = Verification {
            passed: false,
            databases: vec![edbstress_report::DatabaseVerification {
                bad_pages: 1,
                ..Default::default()
            }],
            logs: vec![],
        };
        let m = Measurements {
            verification: Some(&verification),
            transaction_errors: 3,
            ..clean(&inst, &totals, 1.0)
        };
        let t = Profile::Exchange2013.thresholds(TestType::Performance);
        let failed: Vec<_> = evaluate(&m, &t).into_iter().filter(|c| !c.passed).collect();
        let keys: Vec<_> = failed.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "io_errors",
                "transaction_errors",
                "database_checksum_errors"
            ]
        );
        assert_eq!(failed[0].measured, 2.0);
        assert!(
            failed[0].describe().contains("I/O errors 2 count > 0"),
            "{}",
            failed[0].describe()
        );
    }

    #[test]
    fn exchange2007_judges_volumes_not_instances() {
        // Instance latencies far over the limits: per-volume judging ignores them.
        let inst = [instance(500.0, 500.0, 500.0, 500.0, 0.0)];
        let volume = |device: &str, role, read: f64, read_max: f64, write: f64| Volume {
            device: device.into(),
            role,
            avg_read_latency_ms: read,
            max_interval_read_latency_ms: read_max,
            avg_write_latency_ms: write,
            max_interval_write_latency_ms: write,
            ..Volume::default()
        };
        use edbstress_report::VolumeRole;
        let volumes = [
            volume("sdb", VolumeRole::Database, 20.0, 50.001, 900.0),
            volume("sdc", VolumeRole::Log, 900.0, 900.0, 10.001),
        ];
        let totals = IoSummary::new();
        let m = Measurements {
            volumes: Some(&volumes),
            ..clean(&inst, &totals, 1.0)
        };
        let t = Profile::Exchange2007.thresholds(TestType::Performance);
        let all = evaluate(&m, &t);
        let failed: Vec<_> = all
            .iter()
            .filter(|c| !c.passed)
            .map(|c| (c.key.as_str(), c.scope.as_str()))
            .collect();
        assert_eq!(
            failed,
            [
                ("volume_db_read_max_latency", "Volume sdb"),
                ("volume_log_write_avg_latency", "Volume sdc")
            ]
        );
        assert_eq!(
            all.iter().filter(|c| c.key.starts_with("volume_")).count(),
            4
        );
        assert!(all.iter().any(|c| c.key == "page_fault_stalls"));
        assert!(!all.iter().any(|c| c.key == "db_read_avg_latency"));
    }

    #[test]
    fn optional_percentile_limits() {
        let inst = [instance(10.0, 10.0, 1.0, 1.0, 0.0)];
        let totals = IoSummary::new();
        let m = clean(&inst, &totals, 1.0);
        let mut t = Profile::Exchange2010.thresholds(TestType::Performance);
        t.db_read_p99_ms = Some(19.0);
        let failed: Vec<_> = evaluate(&m, &t).into_iter().filter(|c| !c.passed).collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].key, "db_read_p99_latency");
        assert_eq!(failed[0].measured, 20.0);
    }
}
