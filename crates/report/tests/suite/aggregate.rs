//! Aggregating one test on several hosts: sums, exact percentiles from the merged
//! histograms (recomputed here independently), the ESRP averages, the verdict naming
//! host and criterion, incomplete hosts, and every refusal.

use super::common;
use common::crafted;

use edbstress_io::{IoClass, IoStats, LatencyHistogram};
use edbstress_report::aggregate::page::{render_html, render_junit, render_markdown};
use edbstress_report::aggregate::{
    AggregateResults, ESRP_ROWS, EsrpColumn, HostRun, MissingHost, aggregate, measured_window,
};
use edbstress_report::summary::{io_summary, transactional_iops};
use edbstress_report::text::shift_timestamp;
use edbstress_report::{RunResults, TestType, ToolInfo, Verdict};

fn tool() -> ToolInfo {
    ToolInfo {
        name: "edbstress".into(),
        version: "test".into(),
    }
}

/// The crafted run as host `name`: its I/O latencies scaled by `factor` (so every host
/// has its own distribution), its clock moved by `shift_s`, every criterion passing
/// unless `failing`.
fn host(name: &str, factor: u64, shift_s: f64, failing: bool) -> HostRun {
    let mut r: RunResults = crafted();
    let mut stats = IoStats::new();
    for i in 0..(1000 * factor) {
        let inst = 1 + (i % 2) as u16;
        stats.record(
            inst,
            IoClass::DbRead,
            32768,
            (1 + i % 40) * 250_000 * factor,
            true,
        );
        stats.record(inst, IoClass::DbWrite, 32768, 900_000 + i * 37, true);
        stats.record(inst, IoClass::LogWrite, 8192, 300_000 * factor + i, true);
        if i % 10 == 0 {
            stats.record(inst, IoClass::BdmRead, 262144, 4_000_000, true);
        }
    }
    let max = |_c: IoClass| 30.0;
    r.totals.io = io_summary(&stats, None, r.measured_seconds, &max);
    r.achieved_transactional_iops = transactional_iops(&r.totals.io);
    r.host.hostname = format!("{name}.example");
    r.run_id = Some(format!("run-of-{name}"));
    for s in &mut r.samples {
        s.timestamp = shift_timestamp(&s.timestamp, shift_s).unwrap();
    }
    r.ended_at = shift_timestamp(&r.ended_at, shift_s).unwrap();
    if !failing {
        for c in &mut r.criteria {
            c.passed = true;
        }
    }
    r.judge();
    HostRun {
        host: name.into(),
        source: format!("/runs/{name}"),
        results: r,
    }
}

fn three() -> Vec<HostRun> {
    vec![
        host("db1", 1, 0.0, false),
        host("db2", 2, 1.5, false),
        host("db3", 3, 3.0, false),
    ]
}

#[test]
fn rates_are_summed_and_percentiles_come_from_the_merged_histograms() {
    let runs = three();
    let a = aggregate(runs.clone(), Vec::new(), tool()).unwrap();
    assert_eq!(a.overall_result, Verdict::Pass);
    assert!(a.complete);
    let sum = |f: &dyn Fn(&RunResults) -> f64| runs.iter().map(|r| f(&r.results)).sum::<f64>();
    assert!(
        (a.totals.achieved_transactional_iops - sum(&|r| r.achieved_transactional_iops)).abs()
            < 1e-9
    );
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        let got = &a.totals.io[&class];
        let per_host: Vec<_> = runs.iter().map(|r| &r.results.totals.io[&class]).collect();
        assert_eq!(got.count, per_host.iter().map(|s| s.count).sum::<u64>());
        assert!((got.per_sec - per_host.iter().map(|s| s.per_sec).sum::<f64>()).abs() < 1e-9);
        // Merged here, independently of the aggregate module.
        let mut merged = LatencyHistogram::new();
        for s in &per_host {
            merged.merge(&s.histogram);
        }
        assert_eq!(merged.count(), got.count);
        assert_eq!(
            got.p99_ms,
            merged.percentile_ns(99.0) as f64 / 1e6,
            "{class:?}"
        );
        assert_eq!(got.p50_ms, merged.percentile_ns(50.0) as f64 / 1e6);
        assert_eq!(got.max_ms, merged.max_ns() as f64 / 1e6);
        // The ESRP figure is the average of the hosts' averages, labelled as such.
        let esrp = per_host.iter().map(|s| s.avg_latency_ms).sum::<f64>() / 3.0;
        assert!((got.esrp_avg_latency_ms - esrp).abs() < 1e-9);
        assert!((got.avg_latency_ms - merged.mean_ns() / 1e6).abs() < 1e-9);
    }
    // The common window: from the latest start to the earliest end.
    assert!((a.common_window.seconds - (100.0 - 3.0)).abs() < 1e-6);
}

#[test]
fn the_esrp_tables_sum_rates_and_average_latencies_over_servers() {
    let a = aggregate(three(), Vec::new(), tool()).unwrap();
    let columns: Vec<EsrpColumn> = a.esrp_columns().into_iter().map(|(_, c)| c).collect();
    assert_eq!(columns.len(), 3);
    let all = EsrpColumn::esrp_aggregate(&columns);
    let reads: f64 = columns.iter().map(|c| c.db_reads_per_sec).sum();
    assert!((all.db_reads_per_sec - reads).abs() < 1e-9);
    assert!(
        (all.db_transfers_per_sec - (all.db_reads_per_sec + all.db_writes_per_sec)).abs() < 1e-9
    );
    let lat = columns.iter().map(|c| c.log_write_latency_ms).sum::<f64>() / 3.0;
    assert!((all.log_write_latency_ms - lat).abs() < 1e-9);
    // Database reads are the transactional reads only, as the ESRP documents count
    // them: the BDM reads recorded beside them are left out.
    let io = &a.hosts[0].io;
    assert!(io[&IoClass::BdmRead].per_sec > 0.0);
    let expected = io[&IoClass::DbRead].per_sec;
    assert!((columns[0].db_reads_per_sec - expected).abs() < 1e-9);

    let html = render_html(&a);
    for text in [
        "Individual Server Performance",
        "Aggregate Server Performance",
        "Merged Latency Percentiles",
        "db1",
        "db2",
        "db3",
    ] {
        assert!(html.contains(text), "report lacks {text}");
    }
    for row in ESRP_ROWS {
        // In both tables.
        assert!(
            html.matches(&row).count() >= 2,
            "row {row} should be in both ESRP tables"
        );
    }
    let md = render_markdown(&a);
    assert!(md.contains("## Aggregate Server Performance"));
    assert!(md.contains("| Log Disks Writes/sec |"));
}

#[test]
fn a_failing_server_fails_the_solution_and_is_named_with_its_criterion() {
    let mut runs = three();
    runs[1] = host("db2", 2, 1.5, true);
    let failed = runs[1].results.failed_criteria.clone();
    assert!(!failed.is_empty());
    let a = aggregate(runs, Vec::new(), tool()).unwrap();
    assert_eq!(a.overall_result, Verdict::Fail);
    let html = render_html(&a);
    let verdict = &html[html.find("id=\"verdict\"").unwrap()..];
    let verdict = &verdict[..verdict.find("</div></div>").unwrap()];
    assert!(verdict.contains("FAIL"));
    assert!(verdict.contains("db2:"), "{verdict}");
    assert!(!verdict.contains("db1:"));
    let junit = render_junit(&a);
    let doc = roxmltree::Document::parse(&junit).unwrap();
    let suites: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testsuite"))
        .collect();
    assert_eq!(suites.len(), 3);
    assert_eq!(suites[1].attribute("hostname"), Some("db2"));
    assert_eq!(
        suites[1].attribute("failures"),
        Some(failed.len().to_string().as_str())
    );
    assert_eq!(suites[0].attribute("failures"), Some("0"));
}

#[test]
fn a_verdict_of_many_failing_servers_names_three_and_counts_the_rest() {
    let runs: Vec<HostRun> = (1..=16)
        .map(|i| host(&format!("db{i}"), 1, 0.0, true))
        .collect();
    let a = aggregate(runs, Vec::new(), tool()).unwrap();
    assert_eq!(a.overall_result, Verdict::Fail);
    let html = render_html(&a);
    let verdict = &html[html.find("id=\"verdict\"").unwrap()..];
    let verdict = &verdict[..verdict.find("</div></div>").unwrap()];
    assert!(
        verdict.contains("16 of the 16 servers failed: db1, db2, db3 and 13 more"),
        "{verdict}"
    );
    assert!(verdict.contains("href=\"#servers\""), "{verdict}");
    assert!(html.contains("id=\"servers\""), "the link has no target");
    assert!(
        verdict.contains("db3:") && !verdict.contains("db4:"),
        "{verdict}"
    );
    // Every failure is still on the page, in the per-server section.
    let servers = &html[html.find("id=\"servers\"").unwrap()..];
    for i in 1..=16 {
        assert!(
            servers.contains(&format!("db{i}:")),
            "db{i}'s failure is gone"
        );
    }

    // Three failing servers are listed in full.
    let runs: Vec<HostRun> = (1..=5)
        .map(|i| host(&format!("db{i}"), 1, 0.0, i <= 3))
        .collect();
    let html = render_html(&aggregate(runs, Vec::new(), tool()).unwrap());
    let verdict = &html[html.find("id=\"verdict\"").unwrap()..];
    let verdict = &verdict[..verdict.find("</div></div>").unwrap()];
    assert!(!verdict.contains("more"), "{verdict}");
    for name in ["db1:", "db2:", "db3:"] {
        assert!(verdict.contains(name), "{verdict}");
    }
}

#[test]
fn a_stopped_or_missing_host_is_named_incomplete_and_left_out_of_the_totals() {
    let mut runs = three();
    runs[2].results.aborted = true;
    runs[2].results.abort_reason = Some("the host stopped responding".into());
    let missing = vec![MissingHost {
        host: "db4".into(),
        source: "/runs/db4".into(),
        reason: "no results.json: its run did not finish".into(),
    }];
    let a: AggregateResults = aggregate(runs.clone(), missing, tool()).unwrap();
    assert!(!a.complete);
    assert_eq!(a.overall_result, Verdict::Fail);
    let incomplete: Vec<&str> = a
        .hosts
        .iter()
        .filter(|h| h.incomplete.is_some())
        .map(|h| h.host.as_str())
        .collect();
    assert_eq!(incomplete, ["db3", "db4"]);
    let two: u64 = runs[..2]
        .iter()
        .map(|r| r.results.totals.io[&IoClass::DbRead].count)
        .sum();
    assert_eq!(a.totals.io[&IoClass::DbRead].count, two);
    let html = render_html(&a);
    assert!(html.contains("db3 is incomplete: its run was stopped before its end"));
    assert!(html.contains("db4 is incomplete: no results.json"));
}

#[test]
fn runs_that_do_not_belong_together_are_refused_saying_what_differs() {
    let err = |runs: Vec<HostRun>| aggregate(runs, Vec::new(), tool()).unwrap_err().0;

    let mut mixed = three();
    mixed[2].results.test_type = TestType::Stress;
    let e = err(mixed);
    assert!(e.contains("test type") && e.contains("Stress (db3)"), "{e}");

    let mut profiles = three();
    profiles[0].results.parameters.profile = "exchange2010".into();
    let e = err(profiles);
    assert!(
        e.contains("version profile") && e.contains("exchange2010 (db1)"),
        "{e}"
    );

    let mut twice = three();
    twice[2].host = "db1".into();
    assert!(err(twice).contains("host db1 is given twice"));

    // Windows 20 s apart on 100 s runs overlap by 80 s: less than 90 % of the shortest.
    let apart = vec![host("db1", 1, 0.0, false), host("db2", 1, 20.0, false)];
    let e = err(apart.clone());
    assert!(e.contains("overlap by 80.0 s"), "{e}");
    for r in &apart {
        let (start, _) = measured_window(&r.results).unwrap();
        let start = start.to_rfc3339_opts(chrono::SecondsFormat::Millis, false);
        assert!(e.contains(&format!("{}: {start}", r.host)), "{e}");
    }
    // 9 s apart: 91 % overlap, accepted.
    assert!(
        aggregate(
            vec![host("db1", 1, 0.0, false), host("db2", 1, 9.0, false)],
            Vec::new(),
            tool()
        )
        .is_ok()
    );
    // A soft recovery or a backup is judged per server: its windows are as long as the
    // work on each host, and 20 s apart is no reason to refuse. The window is the span.
    for test_type in [TestType::SoftRecovery, TestType::DatabaseBackup] {
        let mut runs = apart.clone();
        for r in &mut runs {
            r.results.test_type = test_type;
        }
        let a = aggregate(runs, Vec::new(), tool()).unwrap();
        assert!(
            (a.common_window.seconds - 120.0).abs() < 0.01,
            "{test_type:?}"
        );
    }
    assert!(err(Vec::new()).contains("no host left results"));
}

#[test]
fn one_run_twice_and_sums_past_the_largest_number_are_refused() {
    let err = |runs: Vec<HostRun>| aggregate(runs, Vec::new(), tool()).unwrap_err().0;
    let mut twice = three();
    twice[1].results.run_id = twice[0].results.run_id.clone();
    let e = err(twice);
    assert!(e.contains("run run-of-db1 is given twice"), "{e}");

    let mut rates = three();
    for r in &mut rates[..2] {
        r.results.achieved_transactional_iops = 1.7e308;
    }
    let e = err(rates);
    assert!(
        e.contains("achieved_transactional_iops") && e.contains("db1: 1.7e308"),
        "{e}"
    );
    let mut per_sec = three();
    for r in &mut per_sec {
        r.results
            .totals
            .io
            .get_mut(&IoClass::LogWrite)
            .unwrap()
            .per_sec = f64::MAX;
    }
    assert!(err(per_sec).contains("log_write per_sec"));
    let mut counts = three();
    for r in &mut counts[..2] {
        r.results.totals.io.get_mut(&IoClass::DbRead).unwrap().count = u64::MAX - 1;
    }
    let e = err(counts);
    assert!(e.contains("db_read count") && e.contains("db2:"), "{e}");
}

#[test]
fn runs_of_different_versions_aggregate_with_a_warning_naming_them() {
    let mut runs = three();
    runs[2].results.tool.version = "0.0.9".into();
    let a = aggregate(runs, Vec::new(), tool()).unwrap();
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("0.0.9 on db3"), "{:?}", a.warnings);
    assert!(render_markdown(&a).contains("0.0.9 on db3"));
    assert!(render_html(&a).contains("0.0.9 on db3"));
    assert!(
        aggregate(three(), Vec::new(), tool())
            .unwrap()
            .warnings
            .is_empty()
    );
}
