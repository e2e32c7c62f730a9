//! The files of an aggregate directory: `report.html` (self-contained, printable),
//! `summary.md` and `junit.xml` (one test suite per host), and `results.json`.

use std::fmt::Write;
use std::path::Path;

use edbstress_io::IoClass;

use super::{AGGREGATE_KIND, AggregateResults, ESRP_ROWS, EsrpColumn, HostOutcome};
use crate::charts::{Axis, Band, Chart, Series, Ticks};
use crate::export::html::{Cell, Doc, Table, latency_histogram_chart, page_start};
use crate::export::{ExportError, JUNIT_MARKER, MARKDOWN_MARKER, write_atomically};
use crate::model::{Verdict, run_files};
use crate::text::{escape, fixed3, group_thousands, timestamp};

/// Writes the aggregate's files into `out` (which must exist), each under a temporary
/// name then renamed; `results.json` last, so its presence means the others are
/// complete.
pub fn write_aggregate(out: &Path, a: &AggregateResults) -> Result<(), ExportError> {
    for (name, bytes) in [
        (run_files::REPORT_HTML, render_html(a).into_bytes()),
        (run_files::SUMMARY_MD, render_markdown(a).into_bytes()),
        (run_files::JUNIT_XML, render_junit(a).into_bytes()),
        (run_files::RESULTS_JSON, render_json(a)?),
    ] {
        write_atomically(&out.join(name), &bytes)?;
    }
    Ok(())
}

/// Makes `out` ready for an aggregate: created when missing; an empty directory or an
/// earlier aggregate (whose files this module wrote) is used; anything else is refused
/// (nothing of someone else's is overwritten).
pub fn prepare_aggregate_dir(out: &Path) -> Result<(), String> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_none() {
                return Ok(());
            }
            let earlier = std::fs::read(out.join(run_files::RESULTS_JSON))
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some(AGGREGATE_KIND));
            if earlier {
                Ok(())
            } else {
                Err(format!(
                    "{} exists and is not an edbstress aggregate directory; choose another \
                     output directory",
                    out.display()
                ))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display())),
        Err(e) => Err(format!(
            "cannot use {} for the aggregate: {e}",
            out.display()
        )),
    }
}

/// `results.json` of the aggregate.
pub fn render_json(a: &AggregateResults) -> Result<Vec<u8>, ExportError> {
    let mut bytes = serde_json::to_vec_pretty(a).map_err(|e| ExportError::Encode {
        what: run_files::RESULTS_JSON,
        message: e.to_string(),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn verdict_word(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::Pass => ("pass", "PASS"),
        Verdict::Fail => ("fail", "FAIL"),
    }
}

/// Why a host fails, in plain words: incomplete, or its failed criteria.
fn host_failures(h: &HostOutcome) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(why) = &h.incomplete {
        out.push(format!("{} is incomplete: {why}", h.host));
    }
    for c in &h.failed_criteria {
        out.push(format!("{}: {}", h.host, c.describe()));
    }
    out
}

/// Failing servers the verdict box names with their failures; past them it names the
/// next few and counts the rest (a box of a hundred lines would hide the page).
const VERDICT_HOSTS: usize = 3;

/// The verdict box's text: every failure of at most [`VERDICT_HOSTS`] failing servers,
/// else those of the first ones, the count of the others and a link to the table.
fn verdict_text(o: &mut String, a: &AggregateResults) {
    let failing: Vec<&HostOutcome> = a
        .hosts
        .iter()
        .filter(|h| !host_failures(h).is_empty())
        .collect();
    if failing.is_empty() {
        let _ = write!(
            o,
            "<strong>Overall Test Result: Pass.</strong> Every one of the {} servers passed.",
            a.hosts.len()
        );
        return;
    }
    let _ = write!(
        o,
        "<strong>Overall Test Result: Fail.</strong> A solution fails when any server \
         fails{}",
        if a.complete { "" } else { " or did not finish" }
    );
    if failing.len() > VERDICT_HOSTS {
        let named: Vec<&str> = failing[..VERDICT_HOSTS]
            .iter()
            .map(|h| h.host.as_str())
            .collect();
        let _ = write!(
            o,
            "; {} of the {} servers failed: {} and {} more — see \
             <a href=\"#servers\">the per-server table</a>. The first {VERDICT_HOSTS}:",
            failing.len(),
            a.hosts.len(),
            escape(&named.join(", ")),
            failing.len() - VERDICT_HOSTS
        );
    } else {
        o.push(':');
    }
    o.push_str("<ol>");
    for f in failing
        .iter()
        .take(VERDICT_HOSTS)
        .flat_map(|h| host_failures(h))
    {
        let _ = write!(o, "<li>{}</li>", escape(&f));
    }
    o.push_str("</ol>");
}

fn title(a: &AggregateResults) -> String {
    format!(
        "{} Test Result Report — {} servers",
        a.test_type.label(),
        a.hosts.len()
    )
}

/// The aggregate's `report.html`.
pub fn render_html(a: &AggregateResults) -> String {
    let mut doc = Doc::new();
    esrp_tables(&mut doc, a);
    hosts_section(&mut doc, a);
    percentiles(&mut doc, a);
    fleet_latency(&mut doc, a);
    over_time(&mut doc, a);
    windows(&mut doc, a);

    let title = title(a);
    let mut o = String::with_capacity(doc.body.len() + 16 * 1024);
    page_start(&mut o, &title);
    let names: Vec<&str> = a.hosts.iter().map(|h| h.host.as_str()).collect();
    let _ = writeln!(
        o,
        "<header><h1>{}</h1><p class=\"sub\">edbstress {} · {} · {} · common window {}</p></header>",
        escape(&title),
        escape(&a.tool.version),
        escape(&a.profile),
        escape(&names.join(", ")),
        escape(&timestamp(&a.common_window.start))
    );
    let (class, word) = verdict_word(a.overall_result);
    let _ = write!(
        o,
        "<div class=\"verdict {class}\" id=\"verdict\"><div class=\"verdict-word\">{word}</div><div class=\"verdict-text\">"
    );
    verdict_text(&mut o, a);
    o.push_str("</div></div>\n");
    for w in &a.warnings {
        let _ = writeln!(
            o,
            "<p class=\"note\"><strong>Warning:</strong> {}</p>",
            escape(w)
        );
    }
    o.push_str(&doc.toc_html());
    o.push_str(&doc.body);
    o.push_str("</body></html>\n");
    o
}

fn esrp_table(head: &[String], columns: &[EsrpColumn]) -> Table {
    let mut t = Table::new("", head);
    for (i, row) in ESRP_ROWS.iter().enumerate() {
        if i == 0 {
            t.row(vec![Cell::with("Database I/O", "words")]);
        }
        if i == 5 {
            t.row(vec![Cell::with("Transaction Log I/O", "words")]);
        }
        let mut cells = vec![Cell::from(*row)];
        cells.extend(columns.iter().map(|c| Cell::from(fixed3(c.values()[i]))));
        t.row(cells);
    }
    t
}

fn esrp_tables(doc: &mut Doc, a: &AggregateResults) {
    let columns = a.esrp_columns();
    doc.section("individual", "Individual Server Performance", false);
    doc.note(
        "Per server, the sum of its database and log I/O and the average latency over its \
         databases during the measured period, as the ESRP documents show it. Database reads \
         are transactional reads only: background database maintenance reads are left out, \
         as the ESRP tables leave them out.",
    );
    // At most SERVER_STYLES servers a table: more would run off the page.
    for chunk in columns.chunks(SERVER_STYLES) {
        let mut head = vec!["Metric".to_string()];
        head.extend(chunk.iter().map(|(h, _)| h.to_string()));
        let values: Vec<EsrpColumn> = chunk.iter().map(|(_, c)| *c).collect();
        doc.table(&esrp_table(&head, &values));
    }
    let values: Vec<EsrpColumn> = columns.iter().map(|(_, c)| *c).collect();
    doc.end();

    doc.section("aggregate", "Aggregate Server Performance", false);
    doc.note(
        "Across all servers as the ESRP documents compute it: rates summed, latencies the \
         average of the servers' averages. Exact percentiles over every I/O of every server \
         follow in Merged Latency Percentiles.",
    );
    let aggregate = EsrpColumn::esrp_aggregate(&values);
    doc.table(&esrp_table(
        &["Metric".to_string(), "All servers".to_string()],
        &[aggregate],
    ));
    doc.kv(&[
        (
            "Achieved transactional I/O per second",
            fixed3(a.totals.achieved_transactional_iops),
        ),
        (
            "Target transactional I/O per second",
            a.totals
                .target_transactional_iops
                .map_or("—".into(), fixed3),
        ),
    ]);
    doc.end();
}

fn hosts_section(doc: &mut Doc, a: &AggregateResults) {
    doc.section("servers", "Servers", false);
    let mut t = Table::new(
        "",
        &[
            "Server",
            "Result",
            "Databases",
            "Transactional IOPS",
            "Target IOPS",
            "Run directory",
        ],
    );
    for h in &a.hosts {
        let (class, word) = verdict_word(h.overall_result);
        let word = if h.incomplete.is_some() {
            "FAIL (incomplete)"
        } else {
            word
        };
        let cells = vec![
            Cell::from(h.host.as_str()),
            Cell::with(word, class),
            Cell::from(h.databases.to_string()),
            Cell::from(fixed3(h.achieved_transactional_iops)),
            Cell::from(h.target_transactional_iops.map_or("—".into(), fixed3)),
            Cell::with(h.source.as_str(), "path"),
        ];
        if h.overall_result == Verdict::Fail {
            t.failed_row(cells);
        } else {
            t.row(cells);
        }
    }
    doc.table(&t);
    for h in a.hosts.iter().filter(|h| h.overall_result == Verdict::Fail) {
        for f in host_failures(h) {
            doc.note(&f);
        }
    }
    doc.end();
}

fn percentiles(doc: &mut Doc, a: &AggregateResults) {
    doc.section("percentiles", "Merged Latency Percentiles", true);
    doc.note(
        "From the latency histograms of every server merged: exact percentiles over all I/Os \
         of the solution, not averages of averages.",
    );
    let mut t = Table::new(
        "",
        &[
            "I/O class",
            "I/Os",
            "per sec",
            "avg KiB",
            "avg ms",
            "ESRP avg ms",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms",
        ],
    );
    for (class, s) in &a.totals.io {
        t.row(vec![
            Cell::from(class.label()),
            Cell::from(group_thousands(s.count as i64)),
            Cell::from(fixed3(s.per_sec)),
            Cell::from(format!("{:.1}", s.avg_bytes / 1024.0)),
            Cell::from(fixed3(s.avg_latency_ms)),
            Cell::from(fixed3(s.esrp_avg_latency_ms)),
            Cell::from(fixed3(s.p50_ms)),
            Cell::from(fixed3(s.p90_ms)),
            Cell::from(fixed3(s.p99_ms)),
            Cell::from(fixed3(s.p999_ms)),
            Cell::from(fixed3(s.max_ms)),
        ]);
    }
    doc.table(&t);
    for (class, s) in &a.totals.io {
        let chart = latency_histogram_chart(
            format!(
                "{} latency, all servers ({} I/Os)",
                class.label(),
                group_thousands(s.count as i64)
            ),
            &s.histogram,
            (s.p50_ms, s.p99_ms, s.p999_ms),
        );
        doc.svg(&chart.to_svg());
    }
    doc.end();
}

/// The worst latency's place, in words.
pub fn worst_latency_text(a: &AggregateResults) -> Option<String> {
    let w = a.cluster.worst.as_ref()?;
    Some(format!(
        "Worst latency: {} ms ({}) on {}, in its interval {} ending {:.0} s into the common \
         window ({}).",
        fixed3(w.max_ms),
        w.class.label(),
        w.host,
        w.interval,
        w.t,
        timestamp(&w.timestamp)
    ))
}

/// The fleet's p99 per interval, with the servers' spread as a band.
fn fleet_latency(doc: &mut Doc, a: &AggregateResults) {
    if a.cluster.classes.is_empty() {
        return;
    }
    doc.section("fleet-latency", "Fleet Latency Over Time", true);
    doc.note(
        "Per sampling interval, every I/O of every server in that interval (the servers' \
         interval histograms merged): the fleet's 99th percentile as a line, the band from \
         the lowest to the highest server's own 99th percentile. 0 is the start of the \
         common window.",
    );
    if let Some(text) = worst_latency_text(a) {
        doc.note(&text);
    }
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        let Some(intervals) = a.cluster.classes.get(&class) else {
            continue;
        };
        let mut chart = Chart::new(
            format!("{} 99th percentile latency, whole fleet", class.label()),
            Axis::linear("seconds since the common window started", Ticks::Elapsed),
            Axis::log("latency, ms (log scale)", Ticks::Millis),
        );
        chart.bands.push(Band {
            name: "servers' own p99, lowest to highest".into(),
            style: 0,
            points: intervals
                .iter()
                .map(|i| (i.t, i.host_p99_low_ms, i.host_p99_high_ms))
                .collect(),
        });
        // The p99 drawn last, on top: with few I/Os in an interval it is the maximum.
        chart.series.push(Series::line(
            "fleet maximum",
            1,
            intervals.iter().map(|i| (i.t, i.max_ms)).collect(),
        ));
        chart.series.push(Series::line(
            "fleet p50",
            2,
            intervals.iter().map(|i| (i.t, i.p50_ms)).collect(),
        ));
        chart.series.push(Series::line(
            "fleet p99",
            0,
            intervals.iter().map(|i| (i.t, i.p99_ms)).collect(),
        ));
        doc.svg(&chart.to_svg());
    }
    doc.end();
}

/// Servers a chart draws one series each for; past it the series' styles would repeat
/// (and a table of as many columns run off the page).
const SERVER_STYLES: usize = 8;

fn over_time(doc: &mut Doc, a: &AggregateResults) {
    doc.section("over-time", "Servers Over Time", true);
    let spread = a.hosts.len() > SERVER_STYLES;
    if spread {
        doc.note(&format!(
            "{} servers, on one clock (0 is the start of the common window): per sampling \
             interval, the band from the lowest to the highest server and the median \
             server's value (one line per server would repeat the {SERVER_STYLES} styles).",
            a.hosts.len()
        ));
    } else {
        doc.note("One series per server, on one clock: 0 is the start of the common window.");
    }
    let time = || Axis::linear("seconds since the common window started", Ticks::Elapsed);
    let mut iops = Chart::new(
        "Transactional IOPS per server",
        time(),
        Axis::linear("IOPS", Ticks::Number),
    );
    let iops_of: Vec<Vec<(f64, Option<f64>)>> = a
        .hosts
        .iter()
        .map(|h| {
            h.series
                .transactional_iops
                .iter()
                .map(|&(x, y)| (x, Some(y)))
                .collect()
        })
        .collect();
    if spread {
        add_spread(&mut iops, &iops_of, "IOPS");
    } else {
        for (i, (h, points)) in a.hosts.iter().zip(iops_of).enumerate() {
            if !points.is_empty() {
                iops.series.push(Series {
                    points,
                    ..Series::line(h.host.as_str(), i, Vec::new())
                });
            }
        }
    }
    doc.svg(&iops.to_svg());
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        let mut chart = Chart::new(
            format!("{} average latency per server", class.label()),
            time(),
            Axis::log("latency, ms (log scale)", Ticks::Millis),
        );
        let of: Vec<Vec<(f64, Option<f64>)>> = a
            .hosts
            .iter()
            .map(|h| {
                h.series
                    .avg_latency_ms
                    .get(&class)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        if spread {
            add_spread(&mut chart, &of, "average latency");
        } else {
            for (i, (h, points)) in a.hosts.iter().zip(of).enumerate() {
                if !points.is_empty() {
                    chart.series.push(Series {
                        points,
                        ..Series::line(h.host.as_str(), i, Vec::new())
                    });
                }
            }
        }
        if !chart.series.is_empty() {
            doc.svg(&chart.to_svg());
        }
    }
    doc.end();
}

/// The servers' `series` as a band from the lowest to the highest server per sampling
/// interval and a line of the median server (the points of one interval: those within
/// half the typical spacing of one another's slot).
fn add_spread(chart: &mut Chart, series: &[Vec<(f64, Option<f64>)>], what: &str) {
    let mut gaps: Vec<f64> = series
        .iter()
        .flat_map(|s| s.windows(2).map(|w| w[1].0 - w[0].0))
        .filter(|g| *g > 0.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let Some(&step) = gaps.get(gaps.len() / 2) else {
        return;
    };
    let mut slots: std::collections::BTreeMap<i64, (f64, Vec<f64>)> = Default::default();
    for &(x, y) in series.iter().flatten() {
        if let Some(y) = y.filter(|y| y.is_finite()) {
            let e = slots
                .entry((x / step).round() as i64)
                .or_insert((0.0, Vec::new()));
            e.0 += x;
            e.1.push(y);
        }
    }
    let mut band = Vec::new();
    let mut median = Vec::new();
    for (x_sum, mut ys) in slots.into_values() {
        ys.sort_by(f64::total_cmp);
        let x = x_sum / ys.len() as f64;
        band.push((x, ys[0], ys[ys.len() - 1]));
        median.push((x, ys[ys.len() / 2]));
    }
    if band.is_empty() {
        return;
    }
    chart.bands.push(Band {
        name: format!("servers' {what}, lowest to highest"),
        style: 0,
        points: band,
    });
    chart
        .series
        .push(Series::line(format!("median server's {what}"), 0, median));
}

fn windows(doc: &mut Doc, a: &AggregateResults) {
    doc.section("windows", "Measured Windows", true);
    let mut t = Table::new("", &["Server", "Start", "End", "Seconds"]);
    for h in &a.hosts {
        match &h.window {
            Some(w) => t.row(vec![
                Cell::from(h.host.as_str()),
                Cell::from(timestamp(&w.start)),
                Cell::from(timestamp(&w.end)),
                Cell::from(format!("{:.1}", w.seconds)),
            ]),
            None => t.row(vec![
                Cell::from(h.host.as_str()),
                Cell::from("—"),
                Cell::from("—"),
                Cell::from("no results"),
            ]),
        }
    }
    t.foot(vec![
        Cell::from("Common window"),
        Cell::from(timestamp(&a.common_window.start)),
        Cell::from(timestamp(&a.common_window.end)),
        Cell::from(format!("{:.1}", a.common_window.seconds)),
    ]);
    doc.table(&t);
    doc.end();
}

/// The aggregate's `summary.md`.
pub fn render_markdown(a: &AggregateResults) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{MARKDOWN_MARKER}");
    let _ = writeln!(o, "# {}\n", title(a));
    let _ = writeln!(o, "**Overall Test Result: {}**\n", a.overall_result.label());
    for f in a.hosts.iter().flat_map(host_failures) {
        let _ = writeln!(o, "- {}", crate::export::md_cell(&f));
    }
    for w in &a.warnings {
        let _ = writeln!(o, "\n**Warning:** {}", crate::export::md_cell(w));
    }
    let columns = a.esrp_columns();
    let _ = writeln!(o, "\n## Individual Server Performance\n");
    let mut head = String::from("| Metric |");
    let mut rule = String::from("|---|");
    for (h, _) in &columns {
        let _ = write!(head, " {} |", crate::export::md_cell(h));
        rule.push_str("---:|");
    }
    let _ = writeln!(o, "{head}\n{rule}");
    for (i, row) in ESRP_ROWS.iter().enumerate() {
        let _ = write!(o, "| {row} |");
        for (_, c) in &columns {
            let _ = write!(o, " {} |", fixed3(c.values()[i]));
        }
        o.push('\n');
    }
    let values: Vec<EsrpColumn> = columns.iter().map(|(_, c)| *c).collect();
    let aggregate = EsrpColumn::esrp_aggregate(&values);
    let _ = writeln!(
        o,
        "\n## Aggregate Server Performance\n\n| Metric | All servers |\n|---|---:|"
    );
    for (i, row) in ESRP_ROWS.iter().enumerate() {
        let _ = writeln!(o, "| {row} | {} |", fixed3(aggregate.values()[i]));
    }
    let _ = writeln!(
        o,
        "\n## Merged latency percentiles\n\n| I/O class | per sec | avg ms | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for (class, s) in &a.totals.io {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            class.label(),
            fixed3(s.per_sec),
            fixed3(s.avg_latency_ms),
            fixed3(s.p50_ms),
            fixed3(s.p99_ms),
            fixed3(s.p999_ms),
            fixed3(s.max_ms)
        );
    }
    if let Some(text) = worst_latency_text(a) {
        let _ = writeln!(o, "\n{}", crate::export::md_cell(&text));
    }
    o
}

/// The aggregate's `junit.xml`: one test suite per server, one test case per
/// criterion, an error for an incomplete server.
pub fn render_junit(a: &AggregateResults) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(o, "{JUNIT_MARKER}");
    let failures: usize = a.hosts.iter().map(|h| h.failed_criteria.len()).sum();
    let errors = a.hosts.iter().filter(|h| h.incomplete.is_some()).count();
    let _ = writeln!(
        o,
        "<testsuites name=\"edbstress aggregate\" failures=\"{failures}\" errors=\"{errors}\">"
    );
    for h in &a.hosts {
        let e = usize::from(h.incomplete.is_some());
        let _ = writeln!(
            o,
            "  <testsuite name=\"edbstress.{}.{}\" hostname=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{e}\">",
            a.test_type.cli_name(),
            escape(&h.host),
            escape(&h.host),
            h.failed_criteria.len() + e + 1,
            h.failed_criteria.len()
        );
        let _ = writeln!(
            o,
            "    <testcase classname=\"{}\" name=\"overall result\"/>",
            escape(&h.host)
        );
        for c in &h.failed_criteria {
            let _ = writeln!(
                o,
                "    <testcase classname=\"{}\" name=\"{}\"><failure message=\"{}\"/></testcase>",
                escape(&h.host),
                escape(&c.name),
                escape(&c.describe())
            );
        }
        if let Some(why) = &h.incomplete {
            let _ = writeln!(
                o,
                "    <testcase classname=\"{}\" name=\"run completed\"><error message=\"{}\"/></testcase>",
                escape(&h.host),
                escape(why)
            );
        }
        let _ = writeln!(o, "  </testsuite>");
    }
    let _ = writeln!(o, "</testsuites>");
    o
}
