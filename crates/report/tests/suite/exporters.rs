//! The exporters and the comparison on crafted results: escaping, JUnit counts,
//! Markdown tables, the report's sections, SVG well-formedness, comparisons.

use super::common;
use common::{EVIL, crafted};

use edbstress_io::IoClass;
use edbstress_report::compare::RunComparison;
use edbstress_report::{
    Exporter, HtmlReport, JunitXml, MarkdownSummary, ResultsJson, RunResults, SamplesCsv, TestType,
    Verdict, is_edbstress_output, standard_exporters,
};

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
    // Escaped, and breakable only after a separator.
    assert!(page.contains(
        "/<wbr>mnt/<wbr>&lt;script&gt;alert(1)&lt;/<wbr>script&gt;|db/<wbr>edbstress001.edb"
    ));
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
    // The read latency failed at a count auto-tuning passed on shorter windows: the
    // verdict says so, and what to re-run with.
    assert!(
        top.contains(
            "The 8 threads were auto-tuned on windows of at most 20 s, where they met every limit"
        ),
        "{top}"
    );
    assert!(top.contains("e.g. `--threads 4`"), "{top}");
    // The tuning section says why each count was chosen or not.
    let tuning = &page
        [page.rfind(">Auto-Tuning<").unwrap()..page.rfind(">Checksum Statistics - All<").unwrap()];
    assert!(tuning.contains("within 80 % of its limit"), "{tuning}");
    assert!(tuning.contains(">OVER MARGIN<"), "{tuning}");
    assert!(tuning.contains("over the margin: Instance0001"), "{tuning}");
    assert!(tuning.contains("5 (confirmation)"), "{tuning}");
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
    // The auto-tuned count's note travels with each failure, as in the report.
    let note = edbstress_report::text::tuning_window_note(&r).expect("the crafted run's note");
    assert!(read.text().unwrap().ends_with(&note), "{:?}", read.text());
    let mut untuned = crafted();
    untuned.autotune = None;
    let plain = String::from_utf8(JunitXml.render(&untuned).unwrap()).unwrap();
    assert!(!plain.contains("tuning windows"), "{plain}");

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
    assert!(md.contains("The count came from shorter tuning windows than the test"));
    let mut untuned = crafted();
    untuned.autotune = None;
    let md_untuned = String::from_utf8(MarkdownSummary.render(&untuned).unwrap()).unwrap();
    assert!(!md_untuned.contains("tuning windows"));
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
    assert!(page.contains("<th>MiB Transferred/sec</th>"));
    assert!(page.contains(
        "<tr><td>Instance0002</td><td>64.00</td><td>00:00:03.00</td><td>16.00</td></tr>"
    ));
    assert!(page.contains(
        "<tfoot>\n<tr><td>Total</td><td>128.00</td><td>00:00:03.00</td><td>48.00</td></tr>"
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

#[test]
fn compare_lists_configuration_differences_before_the_figures() {
    let a = crafted();
    let mut b = crafted();
    // The same run with a cache as large as the database: its figures are memory's.
    b.parameters.cache_max_bytes = b.parameters.database_bytes * u64::from(b.parameters.databases);
    let same = RunComparison::new(vec![("a".into(), a.clone()), ("b".into(), a.clone())]);
    assert!(same.configuration_differences().is_empty());
    assert!(
        same.to_text()
            .contains("Configuration: the same in every run.")
    );
    let cmp = RunComparison::new(vec![("a".into(), a.clone()), ("b".into(), b)]);
    let diffs = cmp.configuration_differences();
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("Maximum database cache (total): A ")),
        "{diffs:?}"
    );
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("Database size / cache per database:") && d.ends_with("B 1.0")),
        "{diffs:?}"
    );
    let text = cmp.to_text();
    let differences = text.find("Configuration differences").expect("listed");
    let figures = text.find("Achieved transactional IOPS").unwrap();
    assert!(differences < figures, "{text}");
    let page = cmp.to_html();
    let differences = page.find("Configuration Differences").expect("a section");
    assert!(differences < page.find("Key Figures").unwrap());
}

#[test]
fn databases_smaller_than_the_profile_are_a_warning_in_the_report_and_summary() {
    // 500 mailboxes of 2048 MB over 2 databases on 64 MiB databases.
    let r = crafted();
    let page = html(&r);
    let warning = "Warning: the databases are smaller than the profile: 64.0 MiB each, where \
                   500 mailboxes with a 2048 MB quota over 2 database(s) hold 500.0 GiB each";
    assert!(
        page.contains(&format!("<p class=\"warning\">{warning}")),
        "{page}"
    );
    let md = String::from_utf8(MarkdownSummary.render(&r).unwrap()).unwrap();
    assert!(md.contains(&format!("**{warning}")), "{md}");
    // Sized from the profile: no warning.
    let mut sized = crafted();
    sized.parameters.database_bytes = 500 * (2048 << 20) / 2;
    assert!(!html(&sized).contains("class=\"warning\""));
    let md = String::from_utf8(MarkdownSummary.render(&sized).unwrap()).unwrap();
    assert!(!md.contains("smaller than the profile"), "{md}");
}

#[test]
fn the_engine_counters_table_shows_checkpoint_waits_and_older_results_read_them_as_zero() {
    let mut r = crafted();
    for (k, i) in r.instances.iter_mut().enumerate() {
        i.engine = Some(edbstress_report::model::EngineSummary {
            cache_size_mb: 64.0,
            checkpoint_waits_per_sec: 1.25 * (k + 1) as f64,
            ..Default::default()
        });
    }
    let page = html(&r);
    let table = &page[page
        .find(">Database Engine Counters<")
        .expect("the engine table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains(">Checkpoint Waits/sec<"), "{table}");
    assert!(
        table.contains(">1.250<") && table.contains(">2.500<"),
        "{table}"
    );

    // A results.json written before the counter existed reads it as 0.
    let mut json: serde_json::Value =
        serde_json::from_slice(&ResultsJson.render(&r).unwrap()).unwrap();
    for i in json["instances"].as_array_mut().unwrap() {
        i["engine"]
            .as_object_mut()
            .unwrap()
            .remove("checkpoint_waits_per_sec")
            .expect("the counter in results.json");
    }
    let old: RunResults = serde_json::from_value(json).unwrap();
    assert!(
        old.instances
            .iter()
            .all(|i| i.engine.as_ref().unwrap().checkpoint_waits_per_sec == 0.0)
    );
}

#[test]
fn a_performance_run_at_a_count_tuned_by_stress_is_told_to_re_run_with_fewer_threads() {
    let mut r = crafted();
    r.autotune = None;
    let note = edbstress_report::text::inherited_count_note(&r, 8).expect("a latency failed");
    assert!(
        note.starts_with("Performance ran at the 8 threads the Stress step's auto-tuning chose"),
        "{note}"
    );
    assert!(note.contains("on Instance0002"), "{note}");
    assert!(
        note.contains("re-run the campaign with fewer threads"),
        "{note}"
    );
    // Only criteria that rise with the load: the IOPS failure alone says nothing.
    r.criteria
        .retain(|c| c.passed || c.key == "transactional_iops");
    r.judge();
    assert!(!r.failed_criteria.is_empty());
    assert_eq!(edbstress_report::text::inherited_count_note(&r, 8), None);
    // Nor does a run stopped early.
    let mut stopped = crafted();
    stopped.aborted = true;
    assert_eq!(
        edbstress_report::text::inherited_count_note(&stopped, 8),
        None
    );
}
