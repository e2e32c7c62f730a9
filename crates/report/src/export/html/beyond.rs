//! What Jetstress lacks: every criterion with its measured value, latency percentiles
//! and histograms per I/O class, time series with the thresholds drawn, the
//! request-size distribution, the workload shape beside published Jetstress figures,
//! the auto-tuning curve and the checksum verification
//! (in the shape of the reference report's checksum appendix).

use edbstress_io::IoClass;

use super::{Cell, Doc, Table, latency_histogram_chart};
use crate::charts::{Axis, BarRow, Chart, Draw, RefLine, Series, Ticks, hbar_chart};
use crate::model::{ClassSummary, RunResults};
use crate::shape;
use crate::text::{fixed3, group_thousands, plain_words, quantity, request_size};
use crate::timeseries::{self, aligned, avg_latency, classes_seen, p99, per_sec, rate};

/// Every section beyond Jetstress that has something to show.
pub(super) fn sections(doc: &mut Doc, r: &RunResults) {
    criteria(doc, r);
    percentiles(doc, r);
    histograms(doc, r);
    time_series(doc, r);
    request_sizes(doc, r);
    workload_shape(doc, r);
    if r.autotune.is_some() {
        autotune(doc, r);
    }
    if r.verification.is_some() {
        verification(doc, r);
    }
    if r.kernel_log.is_some() {
        kernel_log(doc, r);
    }
}

/// What the kernel log said about the devices under test during the run.
fn kernel_log(doc: &mut Doc, r: &RunResults) {
    let Some(k) = &r.kernel_log else { return };
    doc.section("kernel-log", "Kernel Log", true);
    let devices = if k.devices.is_empty() {
        "none found".to_string()
    } else {
        k.devices.join(", ")
    };
    match (&k.source, k.events.is_empty()) {
        (None, _) => doc.note(&format!(
            "The kernel log was not watched: {}.",
            k.unwatched_reason.as_deref().unwrap_or("unknown reason")
        )),
        (Some(source), true) => doc.note(&format!(
            "No error, reset or timeout was reported in the kernel log ({source}) for the devices under test ({devices}) during the run."
        )),
        (Some(source), false) => {
            doc.note(&format!(
                "The kernel log ({source}) reported {} line(s) of errors, resets or timeouts on the devices under test ({devices}); each fails the run.",
                k.events.len()
            ));
            let mut t = Table::new("text", &["Seen at", "Device", "Kernel log line"]);
            for e in &k.events {
                t.failed_row(vec![
                    Cell::from(e.seen_at.clone()),
                    Cell::from(e.device.clone()),
                    Cell::with(e.message.clone(), "words"),
                ]);
            }
            doc.table(&t);
        }
    }
    doc.end();
}

fn criteria(doc: &mut Doc, r: &RunResults) {
    doc.section("criteria", "Pass/Fail Criteria", true);
    if r.criteria.is_empty() {
        doc.note("No criterion was evaluated (the test stopped before measuring).");
        doc.end();
        return;
    }
    let mut t = Table::new(
        "",
        &[
            "Criterion",
            "Scope",
            "Measured",
            "Limit",
            "Result",
            "In plain words",
        ],
    );
    for c in &r.criteria {
        let limit = format!(
            "{} {}",
            c.comparison.symbol(),
            quantity(c.threshold, &c.unit)
        );
        let cells = vec![
            Cell::from(c.name.as_str()),
            Cell::from(c.scope.as_str()),
            Cell::from(c.measured_text()),
            Cell::from(limit),
            if c.passed {
                Cell::with("PASS", "pass")
            } else {
                Cell::with(c.result_word(), "fail")
            },
            // Failed ones only: they are what the reader must act on.
            Cell::with(
                if c.passed {
                    String::new()
                } else {
                    plain_words(c, r)
                },
                "words",
            ),
        ];
        if c.passed {
            t.row(cells);
        } else {
            t.failed_row(cells);
        }
    }
    doc.table(&t);
    doc.note("Maximum latency criteria use the highest average of one sampling interval, as Jetstress does; a limit met exactly passes.");
    doc.end();
}

/// The classes of `r` that saw I/O, in class order.
fn used_classes(r: &RunResults) -> Vec<(IoClass, &ClassSummary)> {
    r.totals
        .io
        .iter()
        .filter(|(_, s)| s.count > 0)
        .map(|(c, s)| (*c, s))
        .collect()
}

fn percentile_cells(name: String, s: &ClassSummary) -> Vec<Cell> {
    vec![
        Cell::from(name),
        Cell::from(group_thousands(s.count as i64)),
        Cell::from(fixed3(s.per_sec)),
        Cell::from(fixed3(s.avg_latency_ms)),
        Cell::from(fixed3(s.p50_ms)),
        Cell::from(fixed3(s.p90_ms)),
        Cell::from(fixed3(s.p99_ms)),
        Cell::from(fixed3(s.p999_ms)),
        Cell::from(fixed3(s.max_ms)),
        Cell::from(fixed3(s.max_interval_latency_ms)),
    ]
}

const PERCENTILE_HEAD: [&str; 10] = [
    "I/O class",
    "I/Os",
    "I/O per sec",
    "Average (msec)",
    "p50 (msec)",
    "p90 (msec)",
    "p99 (msec)",
    "p99.9 (msec)",
    "Maximum (msec)",
    "Highest Interval Average (msec)",
];

fn percentiles(doc: &mut Doc, r: &RunResults) {
    doc.section("percentiles", "Latency Percentiles", true);
    let classes = used_classes(r);
    if classes.is_empty() {
        doc.note("No I/O was measured.");
        doc.end();
        return;
    }
    doc.h3("All instances");
    let mut t = Table::new("", &PERCENTILE_HEAD);
    for (c, s) in &classes {
        t.row(percentile_cells(c.label().to_string(), s));
    }
    doc.table(&t);
    if r.instances.len() > 1 {
        doc.h3("Per instance");
        let mut head = PERCENTILE_HEAD;
        head[0] = "Instance — I/O class";
        let mut t = Table::new("", &head);
        for (c, _) in &classes {
            for i in &r.instances {
                if let Some(s) = i.io.get(c).filter(|s| s.count > 0) {
                    t.row(percentile_cells(format!("{} — {}", i.name, c.label()), s));
                }
            }
        }
        doc.table(&t);
    }
    if let Some(x) = &r.totals.transactions {
        doc.h3("Transactions");
        let l = &x.latency;
        doc.kv(&[
            ("Transactions", group_thousands(x.count as i64)),
            (
                "Average / p50 / p90 (msec)",
                format!(
                    "{} / {} / {}",
                    fixed3(l.avg_ms),
                    fixed3(l.p50_ms),
                    fixed3(l.p90_ms)
                ),
            ),
            (
                "p99 / p99.9 / Maximum (msec)",
                format!(
                    "{} / {} / {}",
                    fixed3(l.p99_ms),
                    fixed3(l.p999_ms),
                    fixed3(l.max_ms)
                ),
            ),
        ]);
    }
    doc.note("Percentiles come from the full latency histogram of every I/O (submission to completion), within 0.1 %.");
    doc.end();
}

/// The average-latency limit of `class` from the criteria, if it is judged.
fn limits(r: &RunResults, class: IoClass) -> (Option<f64>, Option<f64>) {
    let key = match class {
        IoClass::DbRead => "db_read",
        IoClass::LogWrite => "log_write",
        _ => return (None, None),
    };
    let find = |suffix: &str| {
        r.criteria
            .iter()
            .find(|c| c.key == format!("{key}_{suffix}"))
            .map(|c| c.threshold)
    };
    (find("avg_latency"), find("max_latency"))
}

fn histograms(doc: &mut Doc, r: &RunResults) {
    doc.section("histograms", "Latency Histograms", true);
    let classes = used_classes(r);
    if classes.is_empty() {
        doc.note("No I/O was measured.");
    }
    for (class, s) in classes {
        let mut chart = latency_histogram_chart(
            format!(
                "{} latency, all instances ({} I/Os)",
                class.label(),
                group_thousands(s.count as i64)
            ),
            &s.histogram,
            (s.p50_ms, s.p99_ms, s.p999_ms),
        );
        if let (Some(avg), _) = limits(r, class) {
            chart.v_lines.push(RefLine {
                label: format!("average limit {}", quantity(avg, "ms")),
                value: avg,
                kind: 0,
            });
        }
        doc.svg(&chart.to_svg());
    }
    doc.end();
}

fn time_axis() -> Axis {
    Axis::linear("time since measurement started", Ticks::Elapsed)
}

fn latency_chart(r: &RunResults, class: IoClass) -> Chart {
    let s = &r.samples;
    let mut chart = Chart::new(
        format!("{} latency over the run (all instances)", class.label()),
        time_axis(),
        Axis::log("latency, ms (log scale)", Ticks::Millis),
    );
    let series = |name: &str, style: usize, field: timeseries::Field| Series {
        name: name.to_string(),
        points: aligned(s, "Total", class.name(), field),
        style,
        draw: Draw::Line,
        hollow: false,
    };
    chart
        .series
        .push(series("interval average", 0, avg_latency));
    chart.series.push(series("interval p99", 1, p99));
    let (avg, max) = limits(r, class);
    if let Some(v) = avg {
        chart.h_lines.push(RefLine {
            label: format!("average limit {}", quantity(v, "ms")),
            value: v,
            kind: 0,
        });
    }
    if let Some(v) = max {
        chart.h_lines.push(RefLine {
            label: format!(
                "maximum limit {} (highest interval average)",
                quantity(v, "ms")
            ),
            value: v,
            kind: 1,
        });
    }
    chart
}

fn time_series(doc: &mut Doc, r: &RunResults) {
    doc.section("time-series", "I/O over the Run", true);
    let s = &r.samples;
    if s.is_empty() {
        doc.note("No sampling interval was recorded.");
        doc.end();
        return;
    }
    let classes = classes_seen(s, "Total");
    let mut iops = Chart::new(
        "I/O per second over the run (all instances)",
        time_axis(),
        Axis::linear("I/O per second", Ticks::Number),
    );
    if r.test_type.is_transactional() {
        iops.series.push(Series::line(
            "transactional (database reads + writes)",
            6,
            timeseries::transactional_iops(s),
        ));
        if let Some(t) = r.target_transactional_iops {
            iops.h_lines.push(RefLine {
                label: format!("target {}", quantity(t, "IOPS")),
                value: t,
                kind: 2,
            });
        }
    }
    // The engine's bookkeeping and classes with no I/O in any interval would be lines
    // flat at zero hiding the others; the tables have their rates.
    for (i, c) in classes.iter().enumerate() {
        let points = rate(s, "Total", c.name(), per_sec);
        if c.is_bookkeeping() || points.iter().all(|&(_, v)| v == 0.0) {
            continue;
        }
        iops.series.push(Series::line(c.label(), i, points));
    }
    doc.svg(&iops.to_svg());
    if !r.test_type.is_transactional() {
        let mut mbs = Chart::new(
            "Throughput over the run (all instances)",
            time_axis(),
            Axis::linear("MiB per second", Ticks::Number),
        );
        for (i, c) in classes.iter().enumerate() {
            mbs.series.push(Series::line(
                c.label(),
                i,
                rate(s, "Total", c.name(), timeseries::mb_per_sec),
            ));
        }
        doc.svg(&mbs.to_svg());
    }
    let judged = [IoClass::DbRead, IoClass::LogWrite];
    if r.test_type.is_transactional() {
        for class in judged {
            doc.svg(&latency_chart(r, class).to_svg());
        }
    }
    let others: Vec<IoClass> = classes
        .iter()
        .copied()
        .filter(|c| !r.test_type.is_transactional() || !judged.contains(c))
        .collect();
    if !others.is_empty() {
        let mut chart = Chart::new(
            if r.test_type.is_transactional() {
                "Latency of the other I/O classes over the run (interval averages)"
            } else {
                "Latency over the run (interval averages, all instances)"
            },
            time_axis(),
            Axis::log("latency, ms (log scale)", Ticks::Millis),
        );
        for (i, c) in classes.iter().enumerate() {
            if others.contains(c) {
                chart.series.push(Series {
                    name: c.label().to_string(),
                    points: aligned(s, "Total", c.name(), avg_latency),
                    style: i,
                    draw: Draw::Line,
                    hollow: false,
                });
            }
        }
        doc.svg(&chart.to_svg());
    }
    doc.note("One point per sampling interval. Latency axes are logarithmic so the limits and sub-millisecond devices fit on one chart; a gap means no I/O of that class in the interval.");
    doc.end();
}

fn request_sizes(doc: &mut Doc, r: &RunResults) {
    doc.section("request-sizes", "Request Sizes", true);
    let classes = used_classes(r);
    let ios: f64 = classes.iter().map(|(_, s)| s.per_sec).sum();
    let bytes: f64 = classes.iter().map(|(_, s)| s.per_sec * s.avg_bytes).sum();
    if classes.is_empty() || ios <= 0.0 {
        doc.note("No I/O was measured.");
        doc.end();
        return;
    }
    let rows: Vec<BarRow> = classes
        .iter()
        .map(|(c, s)| {
            let io_share = s.per_sec / ios * 100.0;
            let byte_share = if bytes > 0.0 {
                s.per_sec * s.avg_bytes / bytes * 100.0
            } else {
                0.0
            };
            BarRow {
                label: format!("{} ({})", c.label(), request_size(s.avg_bytes)),
                values: vec![io_share, byte_share],
                texts: vec![
                    format!("{io_share:.1} % of I/Os ({:.1}/s)", s.per_sec),
                    format!(
                        "{byte_share:.1} % of bytes ({:.2} MiB/s)",
                        s.per_sec * s.avg_bytes / 1_048_576.0
                    ),
                ],
            }
        })
        .collect();
    doc.svg(&hbar_chart(
        "Share of I/Os and of bytes by I/O class and average request size",
        &["share of I/Os", "share of bytes"],
        &rows,
        100.0,
    ));
    doc.note("Each class is shown at its average request size (the results keep averages per class, not a size histogram).");
    doc.end();
}

fn autotune(doc: &mut Doc, r: &RunResults) {
    let Some(t) = &r.autotune else { return };
    doc.section("autotune", "Auto-Tuning", true);
    let margin = match t.margin {
        Some(m) if m < 1.0 => format!(
            ", with each latency and page-fault-stall criterion within {} of its limit",
            crate::text::quantity(m * 100.0, "%")
        ),
        _ => String::new(),
    };
    doc.note(&format!(
        "Sessions were doubled until a step failed (a step passes when it meets every threshold{margin}), then bisected{}. The run used {} sessions: {}.",
        if t.steps.iter().any(|s| s.confirmation) {
            "; the count found was confirmed over a longer window, stepping down to the next count that passed when it did not hold"
        } else {
            ""
        },
        t.chosen_threads,
        t.why_chosen
            .as_deref()
            .unwrap_or("the largest count that passed")
    ));
    let mut sorted: Vec<_> = t
        .steps
        .iter()
        .filter(|s| !s.confirmation)
        .cloned()
        .collect();
    sorted.sort_by_key(|s| s.threads);
    let mut chart = Chart::new(
        "Achieved transactional IOPS by session count",
        Axis::linear("sessions", Ticks::Number),
        Axis::linear("transactional IOPS", Ticks::Number),
    );
    chart.series.push(Series::line(
        "achieved IOPS",
        0,
        sorted
            .iter()
            .map(|s| (f64::from(s.threads), s.achieved_iops))
            .collect(),
    ));
    for (passed, name, style) in [(true, "step passed", 2), (false, "step failed", 1)] {
        let pts: Vec<(f64, Option<f64>)> = sorted
            .iter()
            .filter(|s| s.passed == passed)
            .map(|s| (f64::from(s.threads), Some(s.achieved_iops)))
            .collect();
        if !pts.is_empty() {
            chart.series.push(Series {
                name: name.into(),
                points: pts,
                style,
                draw: Draw::Markers,
                hollow: !passed,
            });
        }
    }
    chart.v_lines.push(RefLine {
        label: format!("chosen: {} sessions", t.chosen_threads),
        value: f64::from(t.chosen_threads),
        kind: 2,
    });
    doc.svg(&chart.to_svg());
    let mut table = Table::new(
        "",
        &[
            "Step",
            "Sessions",
            "Achieved Transactional IOPS",
            "Database Reads Average Latency (msec)",
            "Log Writes Average Latency (msec)",
            "Database Page Fault Stalls/sec (highest instance)",
            "Seconds",
            "Result",
            "Criteria not met, or not within the margin",
        ],
    );
    for (n, s) in t.steps.iter().enumerate() {
        let why: Vec<String> = s
            .failed_criteria
            .iter()
            .cloned()
            .chain(
                s.over_margin
                    .iter()
                    .map(|c| format!("over the margin: {c}")),
            )
            .collect();
        table.row(vec![
            Cell::from(if s.confirmation {
                format!("{} (confirmation)", n + 1)
            } else {
                (n + 1).to_string()
            }),
            Cell::from(s.threads.to_string()),
            Cell::from(fixed3(s.achieved_iops)),
            Cell::from(fixed3(s.db_read_avg_ms)),
            Cell::from(fixed3(s.log_write_avg_ms)),
            Cell::from(
                s.page_fault_stalls_per_sec
                    .map_or("n/a".to_string(), fixed3),
            ),
            Cell::from(format!("{:.1}", s.seconds)),
            if s.passed {
                Cell::with("PASS", "pass")
            } else if s.failed_criteria.is_empty() {
                Cell::with("OVER MARGIN", "fail")
            } else {
                Cell::with("FAIL", "fail")
            },
            Cell::with(why.join("; "), "words"),
        ]);
    }
    doc.table(&table);
    doc.end();
}

pub(super) fn verification(doc: &mut Doc, r: &RunResults) {
    let Some(v) = &r.verification else { return };
    // Jetstress reports it too (Checksum Statistics - All): not "beyond Jetstress".
    doc.section("checksum", "Checksum Statistics - All", false);
    doc.note(&format!(
        "Offline checksum verification of every database page and log segment after the run (like eseutil /k): {}.",
        if v.passed { "all intact" } else { "DAMAGE FOUND" }
    ));
    let page = f64::from(r.parameters.page_size.max(1));
    let mut t = Table::new(
        "",
        &[
            "Database",
            "Seen pages",
            "Bad pages",
            "Correctable pages",
            "Wrong page-number pages",
            "File length / seconds taken",
            "MiB/sec",
        ],
    );
    let length = |pages: u64, secs: f64| {
        let secs = if secs < 10.0 {
            format!("{secs:.2}")
        } else {
            format!("{secs:.0}")
        };
        format!("{:.0} MiB/{secs} sec", pages as f64 * page / 1_048_576.0)
    };
    let (mut seen, mut bad, mut corr, mut wrong, mut secs) = (0, 0, 0, 0, 0.0);
    for d in &v.databases {
        seen += d.pages_seen;
        bad += d.bad_pages;
        corr += d.correctable_pages;
        wrong += d.wrong_page_number;
        secs += d.seconds;
        let cells = vec![
            Cell::with(d.path.clone(), "path"),
            Cell::from(d.pages_seen.to_string()),
            Cell::from(d.bad_pages.to_string()),
            Cell::from(d.correctable_pages.to_string()),
            Cell::from(d.wrong_page_number.to_string()),
            Cell::from(length(d.pages_seen, d.seconds)),
            Cell::from(format!("{:.1}", d.mb_per_sec)),
        ];
        if d.bad_pages + d.correctable_pages + d.wrong_page_number > 0 {
            t.failed_row(cells);
        } else {
            t.row(cells);
        }
    }
    t.foot(vec![
        Cell::from("(Sum)"),
        Cell::from(seen.to_string()),
        Cell::from(bad.to_string()),
        Cell::from(corr.to_string()),
        Cell::from(wrong.to_string()),
        Cell::from(length(seen, secs)),
        Cell::from(""),
    ]);
    doc.table(&t);
    let mut t = Table::new(
        "",
        &[
            "Log directory",
            "Log files",
            "Segments checked",
            "Bad segments",
        ],
    );
    for l in &v.logs {
        let cells = vec![
            Cell::with(l.path.clone(), "path"),
            Cell::from(l.files.to_string()),
            Cell::from(l.segments_seen.to_string()),
            Cell::from(l.bad_segments.to_string()),
        ];
        if l.bad_segments > 0 {
            t.failed_row(cells);
        } else {
            t.row(cells);
        }
    }
    doc.table(&t);
    doc.end();
}

/// The Workload Shape table: this run's ratios beside the reference reports'.
fn workload_shape(doc: &mut Doc, r: &RunResults) {
    let rows = shape::workload_shape(r);
    if rows.is_empty() {
        return;
    }
    doc.section("workload-shape", "Workload Shape", true);
    doc.note("How Exchange-like this run's I/O was: ratios computed from the counters in results.json, beside the same ratios in two published Jetstress reports (per database; \"~\" marks a value derived from several of the report's counters). A ratio far from both references means the run's log, read/write or growth pattern differs from Exchange's.");
    if r.parameters.profile == "exchange2007" {
        doc.note("The references are Exchange 2010 and 2013 runs with 32 KB pages; an exchange2007 run uses 8 KB pages, so its request sizes differ by design — compare its ratios.");
    }
    let mut head = vec!["Ratio".to_string(), "This run".to_string()];
    for name in shape::REFERENCE_REPORTS {
        head.push(name.to_string());
        head.push(format!("vs {}", name.split(" (").next().unwrap_or(name)));
    }
    head.push("Computed from".to_string());
    let mut t = Table::new("", &head);
    for row in &rows {
        let number = |v: f64| {
            if row.decimals == 0 {
                group_thousands(v.round() as i64)
            } else {
                format!("{v:.*}", row.decimals)
            }
        };
        let mut cells = vec![
            Cell::from(row.name),
            Cell::from(row.value.map_or("—".to_string(), number)),
        ];
        for reference in &row.references {
            match reference {
                Some(x) => {
                    let mark = if x.derived { "~" } else { "" };
                    cells.push(Cell::from(format!("{mark}{}", number(x.value))));
                    cells.push(Cell::from(
                        row.value
                            .and_then(|v| shape::difference_pct(v, x.value))
                            .map_or("—".to_string(), |d| format!("{d:+.0} %")),
                    ));
                }
                None => {
                    cells.push(Cell::from("—"));
                    cells.push(Cell::from("—"));
                }
            }
        }
        cells.push(Cell::with(row.from, "words"));
        t.row(cells);
    }
    doc.table(&t);
    doc.end();
}
