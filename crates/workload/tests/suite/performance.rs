//! Performance and Stress runs end to end on small databases.

use super::common;

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
    // Sessions ran as tasks, one thread per CPU (at most one per session).
    assert!(r.parameters.session_threads >= 1);
    assert_eq!(
        r.parameters.session_threads,
        config.session_threads_for(r.parameters.threads)
    );
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
    assert!(r.totals.io[&IoClass::BdmRead].count > 0);
    assert!(r.target_transactional_iops.is_none());
    // Every sample is stamped to the millisecond, and its stamp less its elapsed time
    // is one instant: when measuring started (a fleet lines hosts up by it).
    let starts: Vec<i64> = r
        .samples
        .iter()
        .map(|s| {
            let t = chrono::DateTime::parse_from_rfc3339(&s.timestamp).unwrap();
            assert!(
                s.timestamp.contains('.'),
                "a sample stamped to the whole second: {}",
                s.timestamp
            );
            t.timestamp_millis() - (s.elapsed_s * 1000.0).round() as i64
        })
        .collect();
    assert!(!starts.is_empty());
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(spread <= 50, "measurement starts disagree by {spread} ms");
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

#[test]
fn open_loop_overload_fails_with_high_latency_instead_of_passing_at_lower_iops() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = common::small_config(tmp.path(), TestType::Performance);
    // 200,000 transactional IOPS: far beyond this engine on any device here (and this
    // CPU), yet a database growth budget (~1 GB for 3 s) the free-space check allows.
    config.mailboxes = Some(200_000);
    config.iops_per_mailbox = 1.0;
    config.bdm = false;
    config.copies = 1;
    config.verify_after = false;
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    assert_eq!(r.overall_result, Verdict::Fail);
    assert_eq!(r.target_transactional_iops, Some(200_000.0));
    let iops = r
        .failed_criteria
        .iter()
        .find(|c| c.key == "transactional_iops")
        .expect("the target criterion fails");
    assert!(iops.measured < iops.threshold);
    assert!(r.parameters.open_loop);
    // Latency is measured from each transaction's intended start: the backlog of a
    // schedule the storage cannot keep shows as latency growing through the run.
    let t = r.totals.transactions.as_ref().unwrap();
    assert!(t.count > 0);
    assert!(
        t.latency.p99_ms > 1000.0,
        "p99 {} ms: an overloaded schedule must show its backlog",
        t.latency.p99_ms
    );
}

#[test]
fn stress_run_uses_the_lenient_maxima() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = common::small_config(tmp.path(), TestType::Stress);
    config.duration = std::time::Duration::from_secs(2);
    // The model before tasks: every session a thread of its own.
    config.session_threads = Some(0);
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    assert_eq!(r.test_type, TestType::Stress);
    assert!(
        outcome
            .dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("Stress_")
    );
    let max = r
        .criteria
        .iter()
        .find(|c| c.key == "db_read_max_latency")
        .unwrap();
    assert_eq!(max.threshold, 200.0);
    assert!(r.verification.as_ref().unwrap().passed);
    assert_eq!(r.parameters.session_threads, 0);
}

/// A short auto-tuned Performance run without the checksum pass afterwards.
fn auto_tuned_config(root: &std::path::Path) -> edbstress_workload::config::RunConfig {
    let mut config = common::small_config(root, TestType::Performance);
    config.threads = None;
    config.auto_tune = true;
    config.duration = std::time::Duration::from_secs(2);
    config.verify_after = false;
    config
}

#[test]
fn auto_tune_reports_its_curve_and_runs_with_the_chosen_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = auto_tuned_config(tmp.path());
    // A limit no storage meets: the first step fails, so the search ends at once and
    // falls back to one session per database.
    config.thresholds.log_write_avg_ms = 0.000_001;
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    let tune = r.autotune.as_ref().expect("auto-tune results");
    assert_eq!(tune.steps.len(), 1);
    assert!(!tune.steps[0].passed);
    assert_eq!(tune.steps[0].threads, config.databases);
    assert!(tune.steps[0].achieved_iops > 0.0);
    assert_eq!(tune.chosen_threads, config.databases);
    assert_eq!(r.parameters.threads, tune.chosen_threads);
    assert!(r.measured_seconds >= 1.5);
    let log = std::fs::read_to_string(outcome.dir.join("test.log")).unwrap();
    assert!(
        log.contains("Auto-tune chose 2 sessions: no session count"),
        "{log}"
    );
    assert!(tune.why_chosen.as_ref().unwrap().contains("using 2"));
}

#[test]
fn auto_tune_does_not_choose_a_count_within_its_limits_but_over_the_margin() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = auto_tuned_config(tmp.path());
    // Latency limits of 1,000 s that every step meets, and a margin that puts the
    // chosen count's latencies under a microsecond, which no real I/O meets: the first
    // step is within the limits and over the margin, so it is not chosen.
    config.thresholds.db_read_avg_ms = 1e6;
    config.thresholds.db_read_max_ms = 1e6;
    config.thresholds.log_write_avg_ms = 1e6;
    config.thresholds.log_write_max_ms = 1e6;
    config.thresholds.page_fault_stalls_per_sec = 1e12;
    config.auto_tune_margin = 1e-9;
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    let log = std::fs::read_to_string(outcome.dir.join("test.log")).unwrap();
    let tune = r.autotune.as_ref().expect("auto-tune results");
    assert_eq!(tune.margin, Some(1e-9));
    let first = &tune.steps[0];
    assert!(
        first.failed_criteria.is_empty(),
        "within every limit: {first:?}"
    );
    assert!(!first.passed, "{first:?}");
    assert!(
        first
            .over_margin
            .iter()
            .any(|c| c.contains("Average Latency") && c.contains("of its 1,000,000 ms limit")),
        "{first:?}"
    );
    // Nothing passed, so nothing was confirmed; the fallback says why.
    assert_eq!(tune.steps.len(), 1, "{tune:?}");
    assert_eq!(tune.chosen_threads, config.databases);
    assert!(
        log.contains("within the limits but not within") && log.contains("so not chosen"),
        "{log}"
    );
    assert!(
        log.contains("Auto-tune chose 2 sessions: no session count had every criterion met within"),
        "{log}"
    );
    // The measured phase is judged at the limits themselves, not at the margin.
    assert!(
        r.criteria
            .iter()
            .filter(|c| c.key.ends_with("_latency"))
            .all(|c| c.passed),
        "{:?}",
        r.criteria
    );
}

#[test]
fn auto_tune_never_grows_the_databases_past_a_tight_space_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = common::small_config(tmp.path(), TestType::Performance);
    // A mailbox-profile run (12 IOPS open loop) that auto-tunes: its closed-loop steps
    // would grow the databases by far more than the 2 MiB each may grow while tuning.
    config.mailboxes = Some(100);
    config.threads = None;
    config.auto_tune = true;
    config.auto_tune_growth = Some(2 << 20);
    config.bdm = false;
    config.copies = 1;
    config.verify_after = false;
    config.duration = std::time::Duration::from_secs(2);
    // Limits every step meets, so the search would climb on: only the budget stops it.
    config.thresholds.db_read_avg_ms = 10_000.0;
    config.thresholds.db_read_max_ms = 100_000.0;
    config.thresholds.log_write_avg_ms = 10_000.0;
    config.thresholds.log_write_max_ms = 100_000.0;
    config.thresholds.page_fault_stalls_per_sec = 1e9;
    let budget = config.expected_growth_per_database().unwrap() * u64::from(config.databases);
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let r = &outcome.results;
    let tune = r.autotune.as_ref().expect("auto-tune results");
    assert_eq!(tune.growth_budget_bytes, Some(2 * (2 << 20)));
    let grown = tune.growth_bytes.unwrap();
    assert!(
        grown <= 2 * (2 << 20),
        "tuning grew the databases by {grown} bytes, past its 4 MiB"
    );
    assert!(
        !tune.space_notes.is_empty(),
        "the budget stopped or shortened a step and says so: {tune:?}"
    );
    // The whole run stays within what the free-space check budgeted.
    let log = std::fs::read_to_string(outcome.dir.join("test.log")).unwrap();
    let total = r.sizing.final_bytes - r.sizing.initial_bytes;
    assert!(
        total <= budget,
        "grew {total} of {budget} bytes budgeted: {log}"
    );
    assert!(
        log.contains("Auto-tune may grow each database by up to 2"),
        "{log}"
    );
    assert!(
        log.contains("Auto-tune stopped for space") || log.contains("was shortened"),
        "{log}"
    );
}

#[test]
fn the_warm_up_reads_closed_loop_whatever_the_target_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = common::small_config(tmp.path(), TestType::Performance);
    // 0.01 transactional IOPS: at the target rate the cache would take hours to fill.
    config.mailboxes = Some(1);
    config.iops_per_mailbox = 0.01;
    config.database_size = 128 << 20;
    config.cache_max = 16 << 20;
    config.bdm = false;
    config.copies = 1;
    config.verify_after = false;
    config.duration = std::time::Duration::from_secs(1);
    config.warmup_timeout = std::time::Duration::from_secs(60);
    let stop = AtomicBool::new(false);
    let outcome = run(&config, &stop, &|_| {}).unwrap();
    let log = std::fs::read_to_string(outcome.dir.join("test.log")).unwrap();
    assert!(
        log.contains("Database Cache Size, Last:"),
        "the caches filled before the timeout: {log}"
    );
    assert!(!log.contains("did not reach 90 %"), "{log}");
    assert!(
        log.contains("closed loop, as fast as the storage allows"),
        "{log}"
    );
}
