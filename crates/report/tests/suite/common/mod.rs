//! The crafted results the report crate's tests share: two instances, a slow second
//! database, four sampling intervals.

#![allow(dead_code)]

use edbstress_io::{IoClass, IoStats};
use edbstress_report::summary::{io_summary, transactional_iops};
use edbstress_report::{
    AutoTune, AutoTuneStep, Comparison, Criterion, DatabaseSizing, DatabaseVerification,
    HostCounters, HostInfo, InstanceResult, LogVerification, OpMix, Pacing, Range, RunResults,
    SCHEMA_VERSION, Sample, SystemParameters, TestType, ToolInfo, Totals, Verdict, Verification,
};

pub const EVIL: &str = "/mnt/<script>alert(1)</script>|db";

pub fn criterion(
    key: &str,
    name: &str,
    scope: &str,
    measured: f64,
    threshold: f64,
    unit: &str,
) -> Criterion {
    let comparison = if key == "transactional_iops" {
        Comparison::AtLeast
    } else {
        Comparison::AtMost
    };
    Criterion {
        key: key.into(),
        name: name.into(),
        scope: scope.into(),
        measured,
        threshold,
        comparison,
        unit: unit.into(),
        passed: comparison.holds(measured, threshold),
        not_measured: false,
        note: None,
    }
}

/// Two instances, a slow second database (23.4 ms reads), 4 intervals of samples.
pub fn crafted() -> RunResults {
    let mut stats = IoStats::new();
    for inst in 1..=2u16 {
        for i in 0..1000u64 {
            let read_ms = if inst == 2 { 10 + i % 27 } else { 2 + i % 5 };
            stats.record(inst, IoClass::DbRead, 32768, read_ms * 1_000_000 + i, true);
            stats.record(inst, IoClass::DbWrite, 32768, 1_500_000 + i * 10, true);
            stats.record(inst, IoClass::LogWrite, 4608, 400_000 + i * 100, true);
            if i % 10 == 0 {
                stats.record(inst, IoClass::BdmRead, 262144, 5_000_000, true);
                stats.record(inst, IoClass::ReplicationRead, 262144, 900_000, true);
            }
        }
    }
    let seconds = 100.0;
    let max = |_c: IoClass| 30.0;
    let instances: Vec<InstanceResult> = (1..=2u16)
        .map(|n| InstanceResult {
            name: format!("Instance{n:04}"),
            instance: u32::from(n),
            database_path: format!("{EVIL}/edbstress00{n}.edb"),
            log_path: format!("/logs/{n}"),
            initial_bytes: 64 << 20,
            final_bytes: 65 << 20,
            io: io_summary(&stats, Some(n), seconds, &max),
            ..Default::default()
        })
        .collect();
    let totals = Totals {
        io: io_summary(&stats, None, seconds, &max),
        ..Default::default()
    };
    let avg2 = instances[1].io[&IoClass::DbRead].avg_latency_ms;
    let samples = crafted_samples();
    let mut r = RunResults {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "edbstress".into(),
            version: "0.1.0".into(),
        },
        run_id: Some("3f2a1d4e-0000-4000-8000-000000000001".into()),
        fleet_id: None,
        campaign_id: None,
        test_type: TestType::Performance,
        description: Some("Before <b>the</b> SAN upgrade & \"tuning\"".into()),
        overall_result: Verdict::Fail,
        aborted: false,
        abort_reason: None,
        failed_criteria: Vec::new(),
        criteria: crafted_criteria(avg2),
        started_at: "2026-11-21T14:00:00+01:00".into(),
        ended_at: "2026-11-21T14:06:00+01:00".into(),
        measured_seconds: seconds,
        host: HostInfo {
            hostname: "mail<01>".into(),
            os: "Debian GNU/Linux 13 (trixie)".into(),
            kernel: "6.18.0".into(),
            cpus: 2,
            memory_mb: 8192,
        },
        parameters: crafted_parameters(),
        achieved_transactional_iops: 0.0,
        target_transactional_iops: Some(60.0),
        headroom_pct: None,
        sizing: DatabaseSizing {
            database_count: 2,
            initial_bytes: 128 << 20,
            final_bytes: 130 << 20,
        },
        instances,
        totals,
        volumes: Vec::new(),
        achieved_iops_basis: None,
        host_counters: Some(HostCounters {
            cpu_pct: Range {
                min: 5.0,
                avg: 20.0,
                max: 40.0,
            },
            available_memory_mb: Range {
                min: 1000.0,
                avg: 1200.0,
                max: 1300.0,
            },
            page_faults_per_sec: Range::default(),
            disks: Vec::new(),
            no_device: Vec::new(),
        }),
        autotune: Some(crafted_autotune()),
        verification: Some(Verification {
            passed: true,
            databases: vec![DatabaseVerification {
                path: format!("{EVIL}/edbstress001.edb"),
                pages_seen: 2048,
                seconds: 0.5,
                mb_per_sec: 128.0,
                ..Default::default()
            }],
            logs: vec![LogVerification {
                path: "/logs/1".into(),
                files: 3,
                segments_seen: 768,
                bad_segments: 0,
                sequence_problems: Vec::new(),
            }],
        }),
        sampling_stalls: Vec::new(),
        kernel_log: None,
        storage_devices: Vec::new(),
        inconsistencies: Vec::new(),
        samples,
    };
    r.achieved_transactional_iops = transactional_iops(&r.totals.io);
    r.judge();
    r
}

/// The crafted run's criteria: the second instance's reads at `avg2` ms.
fn crafted_criteria(avg2: f64) -> Vec<Criterion> {
    vec![
        criterion(
            "db_read_avg_latency",
            "I/O Database Reads Average Latency",
            "Instance0001",
            4.0,
            20.0,
            "ms",
        ),
        criterion(
            "db_read_avg_latency",
            "I/O Database Reads Average Latency",
            "Instance0002",
            avg2,
            20.0,
            "ms",
        ),
        criterion(
            "db_read_max_latency",
            "I/O Database Reads Maximum Latency",
            "Instance0002",
            30.0,
            100.0,
            "ms",
        ),
        criterion(
            "log_write_avg_latency",
            "I/O Log Writes Average Latency",
            "Instance0001",
            0.45,
            10.0,
            "ms",
        ),
        criterion(
            "log_write_max_latency",
            "I/O Log Writes Maximum Latency",
            "Instance0001",
            0.9,
            100.0,
            "ms",
        ),
        criterion(
            "transactional_iops",
            "Achieved Transactional I/O per Second (target)",
            "Total",
            40.0,
            60.0,
            "IOPS",
        ),
        criterion("io_errors", "I/O errors", "Total", 0.0, 0.0, "count"),
    ]
}

/// The crafted run's parameters: 500 mailboxes on 2 databases with 2 copies.
fn crafted_parameters() -> SystemParameters {
    SystemParameters {
        profile: "exchange2013".into(),
        mailboxes: Some(500),
        iops_per_mailbox: Some(0.12),
        mailbox_quota_mb: Some(2048),
        databases: 2,
        copies: 2,
        page_size: 32768,
        database_bytes: 64 << 20,
        threads: 8,
        session_threads: 2,
        open_loop: true,
        pacing: Some(Pacing::OpenLoop),
        cache_min_bytes: 4 << 20,
        cache_max_bytes: 8 << 20,
        checkpoint_depth_bytes: 4 << 20,
        torn_write_protection: false,
        op_mix: OpMix {
            insert: 40,
            delete: 20,
            replace: 5,
            read: 35,
        },
        lazy_commit_pct: 70,
        bdm: true,
        bdm_mb_per_sec: 1.5,
        duration_seconds: 100.0,
        sample_interval_seconds: 25.0,
        seed: 7,
        io_mode: "direct".into(),
        backend: "io_uring".into(),
    }
}

/// Auto-tuning steps: 4 passes, 16 fails, 8 passes, 12 meets its limits but not the
/// margin, then 8 holds over its confirmation.
fn crafted_autotune() -> AutoTune {
    let step = |threads: u32, iops: f64, read: f64, passed: bool| AutoTuneStep {
        threads,
        achieved_iops: iops,
        db_read_avg_ms: read,
        log_write_avg_ms: 0.5,
        passed,
        seconds: 10.0,
        ..Default::default()
    };
    AutoTune {
        chosen_threads: 8,
        steps: vec![
            step(4, 30.0, 8.0, true),
            AutoTuneStep {
                failed_criteria: vec![
                    "Instance0001: I/O Database Reads Average Latency 25 ms > 20 ms".into(),
                ],
                ..step(16, 45.0, 25.0, false)
            },
            step(8, 40.0, 15.0, true),
            AutoTuneStep {
                over_margin: vec![
                    "Instance0001: I/O Database Reads Average Latency 18 ms is above 80 % of its 20 ms limit".into(),
                ],
                ..step(12, 43.0, 18.0, false)
            },
            AutoTuneStep {
                confirmation: true,
                seconds: 20.0,
                ..step(8, 40.0, 15.5, true)
            },
        ],
        margin: Some(0.8),
        why_chosen: Some(
            "the most sessions with every criterion met within 80 % of its limit, in a 10 s step and a 20 s confirmation"
                .into(),
        ),
        ..Default::default()
    }
}

/// Four intervals of total samples for three I/O classes.
fn crafted_samples() -> Vec<Sample> {
    let mut samples = Vec::new();
    for interval in 1..=4u32 {
        for (class, per_sec, lat) in [
            (
                IoClass::DbRead,
                20.0 + f64::from(interval),
                12.0 + f64::from(interval),
            ),
            (IoClass::DbWrite, 20.0, 1.5),
            (IoClass::LogWrite, 20.0, 0.45),
        ] {
            samples.push(Sample {
                interval,
                elapsed_s: 25.0 * f64::from(interval),
                timestamp: format!("2026-11-21T14:0{}:00+01:00", interval + 1),
                scope: "Total".into(),
                family: class.name().into(),
                per_sec: Some(per_sec),
                avg_latency_ms: Some(lat),
                p99_ms: Some(lat * 2.0),
                avg_bytes: Some(32768.0),
                ..Default::default()
            });
        }
    }
    samples
}
