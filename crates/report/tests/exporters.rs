//! The exporters and the comparison on crafted results: escaping, JUnit counts,
//! Markdown tables, the report's sections, SVG well-formedness, comparisons.

use edbstress_io::{IoClass, IoStats};
use edbstress_report::compare::RunComparison;
use edbstress_report::summary::{io_summary, transactional_iops};
use edbstress_report::{
    AutoTune, AutoTuneStep, Comparison, Criterion, DatabaseSizing, DatabaseVerification, Exporter,
    HostCounters, HostInfo, HtmlReport, InstanceResult, JunitXml, LogVerification, MarkdownSummary,
    OpMix, Range, ResultsJson, RunResults, SCHEMA_VERSION, Sample, SamplesCsv, SystemParameters,
    TestType, ToolInfo, Totals, Verdict, Verification, is_edbstress_output, standard_exporters,
};

const EVIL: &str = "/mnt/<script>alert(1)</script>|db";

fn criterion(
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
    }
}

/// Two instances, a slow second database (23.4 ms reads), 4 intervals of samples.
fn crafted() -> RunResults {
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
    let mut r = RunResults {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo {
            name: "edbstress".into(),
            version: "0.1.0".into(),
        },
        test_type: TestType::Performance,
        description: Some("Before <b>the</b> SAN upgrade & \"tuning\"".into()),
        overall_result: Verdict::Fail,
        aborted: false,
        abort_reason: None,
        failed_criteria: Vec::new(),
        criteria: vec![
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
        ],
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
        parameters: SystemParameters {
            profile: "exchange2013".into(),
            mailboxes: Some(500),
            iops_per_mailbox: Some(0.12),
            mailbox_quota_mb: Some(2048),
            databases: 2,
            copies: 2,
            page_size: 32768,
            database_bytes: 64 << 20,
            threads: 8,
            open_loop: true,
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
        },
        achieved_transactional_iops: 0.0,
        target_transactional_iops: Some(60.0),
        sizing: DatabaseSizing {
            database_count: 2,
            initial_bytes: 128 << 20,
            final_bytes: 130 << 20,
        },
        instances,
        totals,
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
        }),
        autotune: Some(AutoTune {
            chosen_threads: 8,
            steps: vec![
                AutoTuneStep {
                    threads: 4,
                    achieved_iops: 30.0,
                    db_read_avg_ms: 8.0,
                    log_write_avg_ms: 0.4,
                    passed: true,
                    seconds: 10.0,
                },
                AutoTuneStep {
                    threads: 16,
                    achieved_iops: 45.0,
                    db_read_avg_ms: 25.0,
                    log_write_avg_ms: 0.6,
                    passed: false,
                    seconds: 10.0,
                },
                AutoTuneStep {
                    threads: 8,
                    achieved_iops: 40.0,
                    db_read_avg_ms: 15.0,
                    log_write_avg_ms: 0.5,
                    passed: true,
                    seconds: 10.0,
                },
            ],
        }),
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
        inconsistencies: Vec::new(),
        samples,
    };
    r.achieved_transactional_iops = transactional_iops(&r.totals.io);
    r.judge();
    r
}

fn html(r: &RunResults) -> String {
    let log = vec![
        "2026-11-21 14:00:00 -- edbstress testing begins ...".to_string(),
        format!("2026-11-21 14:00:01 -- Instance0001: {EVIL}"),
    ];
    String::from_utf8(HtmlReport::with_test_log(Some(log)).render(r).unwrap()).unwrap()
}

#[test]
fn the_crafted_run_fails_two_criteria() {
    let r = crafted();
    assert_eq!(r.overall_result, Verdict::Fail);
    let keys: Vec<_> = r
        .failed_criteria
        .iter()
        .map(|c| (c.key.as_str(), c.scope.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("db_read_avg_latency", "Instance0002"),
            ("transactional_iops", "Total")
        ]
    );
}

#[test]
fn html_escapes_every_text_from_configuration_and_paths() {
    let page = html(&crafted());
    assert!(!page.contains("<script"), "raw script tag in the report");
    assert!(!page.contains("<b>the</b>"));
    assert!(!page.contains("mail<01>"));
    assert!(page.contains("/mnt/&lt;script&gt;alert(1)&lt;/script&gt;|db/edbstress001.edb"));
    assert!(page.contains("Before &lt;b&gt;the&lt;/b&gt; SAN upgrade &amp; &quot;tuning&quot;"));
    assert!(
        page.contains("Instance0001: /mnt/&lt;script&gt;"),
        "test log line escaped"
    );
}

#[test]
fn html_has_jetstress_sections_in_order_then_the_extras_and_the_log_last() {
    let page = html(&crafted());
    let order = [
        "id=\"verdict\"",
        ">Test Summary<",
        ">Database Sizing and Throughput<",
        ">System Parameters<",
        ">Database Configuration<",
        ">Transactional I/O Performance<",
        ">Background Database Maintenance I/O Performance<",
        ">Log Replication I/O Performance<",
        ">Total I/O Performance<",
        ">Host System Performance<",
        ">Pass/Fail Criteria<",
        ">Latency Percentiles<",
        ">Latency Histograms<",
        ">I/O over the Run<",
        ">Request Sizes<",
        ">Auto-Tuning<",
        ">Checksum Statistics - All<",
        ">Test Log<",
    ];
    let mut at = 0;
    for h in order {
        let found = page[at..]
            .find(h)
            .unwrap_or_else(|| panic!("{h} missing or out of order"));
        at += found + h.len();
    }
    // The verdict in words, with the failed criteria in plain words at the top.
    let top = &page[..page.find(">Test Summary<").unwrap()];
    assert!(top.contains(">FAIL</div>"));
    assert!(top.contains("2 of 7 criteria were not met"));
    assert!(top.contains("Database reads on Instance0002 took"), "{top}");
    assert!(top.contains("the limit is 20 ms."));
    assert!(top.contains("the target is 60 IOPS (500 mailboxes × 0.12 IOPS per mailbox)."));
    // Jetstress's column wording and figures.
    assert!(page.contains("<th>I/O Database Reads Average Latency (msec)</th>"));
    assert!(page.contains("<th>Database Maintenance IO Reads/sec</th>"));
    assert!(
        page.contains("<tr><th>Achieved Transactional I/O per Second</th><td>40.000</td></tr>")
    );
    assert!(page.contains("<tr><th>Lazy Commits</th><td>70%</td></tr>"));
    assert!(
        page.contains("<tr><th>Collection Start Time</th><td>2026-11-21 14:01:35 +01:00</td></tr>")
    );
}

#[test]
fn html_charts_are_well_formed_svg_with_the_run_data_and_thresholds() {
    let page = html(&crafted());
    let mut charts = 0;
    let mut rest = page.as_str();
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").unwrap() + start + 6;
        let svg = &rest[start..end];
        roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("bad SVG: {e}\n{svg}"));
        charts += 1;
        rest = &rest[end..];
    }
    // 5 histograms, IOPS, 2 judged latencies, other latencies, request sizes, auto-tune.
    assert_eq!(charts, 11);
    let read_latency = page
        .split("<svg")
        .find(|s| s.contains("Database Reads latency over the run"))
        .unwrap();
    // 4 intervals → 4 points on the average line; both limits drawn.
    let first_line = read_latency.split("points=\"").nth(1).unwrap();
    let points = first_line[..first_line.find('"').unwrap()]
        .split(' ')
        .count();
    assert_eq!(points, 4);
    assert!(read_latency.contains("average limit 20 ms"));
    assert!(read_latency.contains("maximum limit 100 ms"));
    let iops = page
        .split("<svg")
        .find(|s| s.contains("I/O per second over the run"))
        .unwrap();
    assert!(iops.contains("target 60 IOPS"));
}

#[test]
fn junit_has_one_case_per_criterion_and_failures_with_measured_and_threshold() {
    let r = crafted();
    let xml = String::from_utf8(JunitXml.render(&r).unwrap()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("tests"), Some("7"));
    assert_eq!(suite.attribute("failures"), Some("2"));
    assert_eq!(suite.attribute("errors"), Some("0"));
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 7);
    let failures: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .collect();
    assert_eq!(failures.len(), 2);
    let iops = failures
        .iter()
        .find(|f| f.parent().unwrap().attribute("name") == Some("transactional_iops [Total]"))
        .unwrap();
    assert_eq!(
        iops.attribute("message"),
        Some("measured 40 IOPS < threshold 60 IOPS")
    );
    let read = failures
        .iter()
        .find(|f| {
            f.parent().unwrap().attribute("name") == Some("db_read_avg_latency [Instance0002]")
        })
        .unwrap();
    assert!(
        read.attribute("message")
            .unwrap()
            .ends_with("> threshold 20 ms")
    );

    // A stopped run adds an errored case even when no criterion failed.
    let mut stopped = crafted();
    stopped.criteria.retain(|c| c.passed);
    stopped.aborted = true;
    stopped.abort_reason = Some("interrupted <Ctrl-C>".into());
    stopped.judge();
    let xml = String::from_utf8(JunitXml.render(&stopped).unwrap()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    assert_eq!(suite.attribute("tests"), Some("6"));
    assert_eq!(suite.attribute("failures"), Some("0"));
    assert_eq!(suite.attribute("errors"), Some("1"));
    assert!(xml.contains("interrupted &lt;Ctrl-C&gt;"));
}

#[test]
fn markdown_tables_hold_the_verdict_criteria_and_escaped_paths() {
    let md = String::from_utf8(MarkdownSummary.render(&crafted()).unwrap()).unwrap();
    assert!(md.starts_with("<!-- generated by edbstress"));
    assert!(md.contains("# edbstress Performance test: **FAIL**"));
    assert!(
        md.contains("- The storage delivered 40 IOPS of transactional I/O; the target is 60 IOPS")
    );
    assert!(md.contains("| Overall Test Result | Fail |"));
    assert!(md.contains("| Achieved Transactional I/O per Second | 40.000 |"));
    assert!(
        md.contains(
            "| I/O Database Reads Average Latency | Instance0001 | 4 ms | ≤ 20 ms | PASS |"
        )
    );
    assert!(md.contains("| Achieved Transactional I/O per Second (target) | Total | 40 IOPS | ≥ 60 IOPS | **FAIL** |"));
    // A pipe in a path must not split the cell; markup is neutralised.
    assert!(md.contains(
        "| Instance0001 | /logs/1 | /mnt/&lt;script&gt;alert(1)&lt;/script&gt;\\|db/edbstress001.edb |"
    ));
    assert!(!md.contains("<script"));
    let lines: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| Database Reads |"))
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].matches(" | ").count(), 7, "{}", lines[0]);
}

#[test]
fn every_standard_export_is_recognised_as_ours_and_results_json_is_last() {
    let r = crafted();
    let names: Vec<_> = standard_exporters().iter().map(|e| e.file_name()).collect();
    assert_eq!(
        names,
        [
            "samples.csv",
            "report.html",
            "summary.md",
            "junit.xml",
            "results.json"
        ]
    );
    for e in [
        Box::new(HtmlReport::new()) as Box<dyn Exporter>,
        Box::new(MarkdownSummary),
        Box::new(JunitXml),
        Box::new(ResultsJson),
    ] {
        assert!(
            is_edbstress_output(&e.render(&r).unwrap()),
            "{}",
            e.file_name()
        );
    }
    assert!(!is_edbstress_output(b"<html><body>my notes</body></html>"));
    assert!(!is_edbstress_output(b"{\"schema_version\": 1}"));
    assert!(!is_edbstress_output(&SamplesCsv.render(&r).unwrap()));
}

#[test]
fn json_round_trip_renders_the_same_report() {
    let r = crafted();
    let json = ResultsJson.render(&r).unwrap();
    let back = edbstress_report::read_results(&json).unwrap();
    assert_eq!(html(&r), html(&back));
}

#[test]
fn backup_and_soft_recovery_reports_have_the_appendix_shapes() {
    let mut b = crafted();
    b.test_type = TestType::DatabaseBackup;
    b.criteria.clear();
    b.autotune = None;
    b.verification = None;
    b.target_transactional_iops = None;
    for (i, inst) in b.instances.iter_mut().enumerate() {
        inst.bytes_read = Some(64 << 20);
        inst.elapsed_seconds = Some(2.0 + i as f64);
        inst.mb_per_sec = Some(32.0 / (1.0 + i as f64));
        inst.backup_path = Some(format!("/bak/{i}"));
    }
    b.totals.mb_per_sec = Some(48.0);
    b.judge();
    let page = html(&b);
    assert!(page.contains("<h1>Database Backup Test Result Report</h1>"));
    assert!(page.contains(">Database Backup Statistics - All<"));
    assert!(page.contains("<th>MBytes Transferred/sec</th>"));
    assert!(
        page.contains(
            "<tr><td>Instance0002</td><td>64.00</td><td>00:00:03</td><td>16.00</td></tr>"
        )
    );
    assert!(page.contains(
        "<tfoot>\n<tr><td>Total</td><td>128.00</td><td>00:00:03</td><td>48.00</td></tr>"
    ));
    assert!(page.contains("<th>Backup path</th>"));
    assert!(!page.contains(">Log Replication I/O Performance<"));

    let mut s = crafted();
    s.test_type = TestType::SoftRecovery;
    s.criteria.clear();
    s.autotune = None;
    s.target_transactional_iops = None;
    for inst in s.instances.iter_mut() {
        inst.logs_generated = Some(500);
        inst.logs_replayed = Some(507);
        inst.elapsed_seconds = Some(1418.822492);
    }
    s.totals.seconds_per_log = Some(2.798);
    s.judge();
    let page = html(&s);
    assert!(page.contains("<h1>SoftRecovery Test Result Report</h1>"));
    assert!(page.contains(">Soft-Recovery Statistics - All<"));
    assert!(page.contains("<th>Log files replayed</th><th>Elapsed seconds</th>"));
    assert!(page.contains(
        "<tr><td>Instance0001</td><td>500</td><td>507</td><td>1418.822</td><td>2.798</td></tr>"
    ));
    assert!(page.contains("<td>1014</td><td>1418.822</td><td>2.798</td></tr>"));
}

#[test]
fn comparison_shows_each_runs_difference_from_the_first() {
    let a = crafted();
    let mut b = crafted();
    b.achieved_transactional_iops *= 1.5;
    b.totals
        .io
        .get_mut(&IoClass::DbRead)
        .unwrap()
        .avg_latency_ms /= 2.0;
    b.overall_result = Verdict::Pass;
    b.failed_criteria.clear();
    let cmp = RunComparison::new(vec![("runs/before".into(), a), ("runs/after".into(), b)]);
    let rows = cmp.rows();
    let iops = rows
        .iter()
        .find(|r| r.metric == "Achieved transactional IOPS")
        .unwrap();
    assert_eq!(iops.texts, ["40.000", "60.000"]);
    assert_eq!(iops.changes[1].map(|c| c.round()), Some(50.0));
    let text = cmp.to_text();
    assert!(text.contains("A: runs/before"));
    let line = text
        .lines()
        .find(|l| l.starts_with("Achieved transactional IOPS"))
        .unwrap();
    assert!(line.ends_with("40.000  60.000 (+50.0 %)"), "{line}");
    let line = text
        .lines()
        .find(|l| l.starts_with("Database Reads average latency (ms)"))
        .unwrap();
    assert!(line.contains("(-50.0 %)"), "{line}");
    let line = text
        .lines()
        .find(|l| l.starts_with("Overall Test Result"))
        .unwrap();
    assert!(line.contains("Fail") && line.ends_with("Pass"), "{line}");
    let page = cmp.to_html();
    assert!(is_edbstress_output(page.as_bytes()));
    assert!(page.contains("60.000 (+50.0 %)"));
    assert!(page.contains("A: before"), "series named by run");
    assert!(page.matches("<svg").count() >= 4);
}
