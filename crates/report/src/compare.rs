//! Several runs side by side (`edbstress compare`): before and after a storage change,
//! or the points of a sweep. A table of the key figures with each run's difference
//! from the first in percent, as terminal text or as an HTML page with the runs'
//! time series and latency distributions overlaid.

use std::fmt::Write;

use edbstress_io::IoClass;

use crate::charts::{Axis, Chart, Draw, RefLine, Series, Ticks};
use crate::export::html::{Cell, Table, page_start};
use crate::model::RunResults;
use crate::text::{escape, fixed3, pct_change, pct_text, quantity, timestamp};
use crate::timeseries::{self, aligned, avg_latency, classes_seen, per_sec, rate};

/// One run in a comparison.
#[derive(Clone, Debug)]
pub struct ComparedRun {
    /// Where it came from (the run directory as given).
    pub source: String,
    /// Its results.
    pub results: RunResults,
}

/// One line of the comparison table.
#[derive(Clone, Debug, PartialEq)]
pub struct ComparisonRow {
    /// What is compared: "Database Reads average latency (ms)".
    pub metric: String,
    /// The value of each run as shown.
    pub texts: Vec<String>,
    /// The numbers behind them (None for text rows and missing values).
    pub values: Vec<Option<f64>>,
    /// Each run's change from the first run, percent (None for the first run, text
    /// rows, and a zero base).
    pub changes: Vec<Option<f64>>,
}

/// Runs to compare; the first is the baseline.
#[derive(Clone, Debug)]
pub struct RunComparison {
    /// The runs, baseline first.
    pub runs: Vec<ComparedRun>,
}

/// Run labels: A, B, … Z, then 27, 28 …
pub fn run_label(i: usize) -> String {
    if i < 26 {
        char::from(b'A' + i as u8).to_string()
    } else {
        (i + 1).to_string()
    }
}

impl RunComparison {
    /// A comparison of `runs` (source, results), baseline first.
    pub fn new(runs: Vec<(String, RunResults)>) -> RunComparison {
        RunComparison {
            runs: runs
                .into_iter()
                .map(|(source, results)| ComparedRun { source, results })
                .collect(),
        }
    }

    /// The I/O classes any run saw I/O of, in class order.
    fn classes(&self) -> Vec<IoClass> {
        IoClass::ALL
            .into_iter()
            .filter(|c| {
                self.runs
                    .iter()
                    .any(|r| r.results.totals.io.get(c).is_some_and(|s| s.count > 0))
            })
            .collect()
    }

    fn text_row(&self, metric: &str, f: impl Fn(&RunResults) -> String) -> ComparisonRow {
        let n = self.runs.len();
        ComparisonRow {
            metric: metric.to_string(),
            texts: self.runs.iter().map(|r| f(&r.results)).collect(),
            values: vec![None; n],
            changes: vec![None; n],
        }
    }

    fn number_row(
        &self,
        metric: &str,
        format: fn(f64) -> String,
        f: impl Fn(&RunResults) -> Option<f64>,
    ) -> ComparisonRow {
        let values: Vec<Option<f64>> = self.runs.iter().map(|r| f(&r.results)).collect();
        let base = values.first().copied().flatten();
        let changes = values
            .iter()
            .enumerate()
            .map(|(i, v)| match (i, base, v) {
                (0, _, _) => None,
                (_, Some(b), Some(v)) => pct_change(b, *v),
                _ => None,
            })
            .collect();
        ComparisonRow {
            metric: metric.to_string(),
            texts: values
                .iter()
                .map(|v| v.map_or("—".to_string(), format))
                .collect(),
            values,
            changes,
        }
    }

    /// The table: verdicts, IOPS, then per I/O class rate, average and p99 latency and
    /// average size, then transactions.
    pub fn rows(&self) -> Vec<ComparisonRow> {
        let mut rows = vec![
            self.text_row("Test", |r| r.test_type.label().to_string()),
            self.text_row("Overall Test Result", |r| {
                let mut v = r.overall_result.label().to_string();
                if r.aborted {
                    v.push_str(" (stopped early)");
                }
                if !r.inconsistencies.is_empty() {
                    v.push_str(" (derived: results.json inconsistent)");
                }
                v
            }),
            self.text_row("Failed criteria", |r| r.failed_criteria.len().to_string()),
            self.number_row("Achieved transactional IOPS", fixed3, |r| {
                Some(r.achieved_transactional_iops)
            }),
            self.number_row("Target transactional IOPS", fixed3, |r| {
                r.target_transactional_iops
            }),
            self.number_row(
                "Sessions",
                |v| format!("{v:.0}"),
                |r| Some(f64::from(r.parameters.threads)),
            ),
            self.number_row(
                "Measured seconds",
                |v| format!("{v:.1}"),
                |r| Some(r.measured_seconds),
            ),
        ];
        for class in self.classes() {
            let get = move |r: &RunResults| r.totals.io.get(&class).cloned();
            let l = class.label();
            rows.push(self.number_row(&format!("{l}/sec"), fixed3, move |r| {
                get(r).map(|s| s.per_sec)
            }));
            rows.push(
                self.number_row(&format!("{l} average latency (ms)"), fixed3, move |r| {
                    get(r).map(|s| s.avg_latency_ms)
                }),
            );
            rows.push(
                self.number_row(&format!("{l} p99 latency (ms)"), fixed3, move |r| {
                    get(r).map(|s| s.p99_ms)
                }),
            );
            rows.push(self.number_row(
                &format!("{l} average bytes"),
                |v| format!("{v:.0}"),
                move |r| get(r).map(|s| s.avg_bytes),
            ));
        }
        if self
            .runs
            .iter()
            .any(|r| r.results.totals.transactions.is_some())
        {
            rows.push(self.number_row("Transactions/sec", fixed3, |r| {
                r.totals.transactions.as_ref().map(|t| t.per_sec)
            }));
            rows.push(
                self.number_row("Transaction p99 latency (ms)", fixed3, |r| {
                    r.totals.transactions.as_ref().map(|t| t.latency.p99_ms)
                }),
            );
        }
        rows
    }

    /// The configuration values in which the runs differ, each as "name: A …, B …":
    /// figures of runs configured differently (a cache holding the whole database,
    /// another test or profile) are not like for like, so these come first.
    pub fn configuration_differences(&self) -> Vec<String> {
        type Value = fn(&RunResults) -> String;
        let fields: [(&str, Value); 18] = [
            ("Test", |r| r.test_type.label().to_string()),
            ("Profile", |r| r.parameters.profile.clone()),
            ("Mailboxes", |r| {
                r.parameters
                    .mailboxes
                    .map_or("none (throughput run)".into(), |m| m.to_string())
            }),
            ("IOPS per mailbox", |r| {
                r.parameters
                    .iops_per_mailbox
                    .map_or("none".into(), |v| v.to_string())
            }),
            ("Databases", |r| r.parameters.databases.to_string()),
            ("Database size", |r| {
                crate::text::mb(r.parameters.database_bytes)
            }),
            ("Minimum database cache (total)", |r| {
                crate::text::mb(r.parameters.cache_min_bytes)
            }),
            ("Maximum database cache (total)", |r| {
                crate::text::mb(r.parameters.cache_max_bytes)
            }),
            ("Database size / cache per database", |r| {
                let p = &r.parameters;
                let per_db = p.cache_max_bytes / u64::from(p.databases.max(1));
                format!("{:.1}", p.database_bytes as f64 / per_db.max(1) as f64)
            }),
            ("Page size", |r| {
                format!("{} KiB", r.parameters.page_size / 1024)
            }),
            ("Copies", |r| r.parameters.copies.to_string()),
            ("Sessions", |r| r.parameters.threads.to_string()),
            ("Operation mix", |r| {
                let m = r.parameters.op_mix;
                format!("{}/{}/{}/{}", m.insert, m.delete, m.replace, m.read)
            }),
            ("Lazy commits", |r| {
                format!("{} %", r.parameters.lazy_commit_pct)
            }),
            ("Background database maintenance", |r| {
                if r.parameters.bdm {
                    format!("on, {:.1} MiB/s", r.parameters.bdm_mb_per_sec)
                } else {
                    "off".into()
                }
            }),
            ("Duration", |r| {
                format!("{:.0} s", r.parameters.duration_seconds)
            }),
            ("I/O mode", |r| r.parameters.io_mode.clone()),
            ("Torn-write protection", |r| {
                r.parameters.torn_write_protection.to_string()
            }),
        ];
        let mut out = Vec::new();
        for (name, value) in fields {
            let values: Vec<String> = self.runs.iter().map(|r| value(&r.results)).collect();
            if values.iter().any(|v| v != &values[0]) {
                let each = values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| format!("{} {v}", run_label(i)))
                    .collect::<Vec<_>>()
                    .join(", ");
                out.push(format!("{name}: {each}"));
            }
        }
        out
    }

    /// Each row's cells as shown: the value, and after the first run its change
    /// ("812.500 (+12.3 %)").
    fn cell_texts(row: &ComparisonRow) -> Vec<String> {
        row.texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if i == 0 || row.values[i].is_none() || row.values[0].is_none() {
                    t.clone()
                } else {
                    format!("{t} ({})", pct_text(row.changes[i]))
                }
            })
            .collect()
    }

    /// The comparison as an aligned text table for the terminal.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        for (i, r) in self.runs.iter().enumerate() {
            let _ = writeln!(o, "{}: {}  ({})", run_label(i), r.source, Self::about(r));
        }
        o.push('\n');
        let differences = self.configuration_differences();
        if differences.is_empty() {
            let _ = writeln!(o, "Configuration: the same in every run.\n");
        } else {
            let _ = writeln!(
                o,
                "Configuration differences (the figures below are not like for like):"
            );
            for d in &differences {
                let _ = writeln!(o, "  {d}");
            }
            o.push('\n');
        }
        let rows = self.rows();
        let mut table: Vec<Vec<String>> = vec![{
            let mut h = vec![String::new()];
            h.extend((0..self.runs.len()).map(run_label));
            h
        }];
        for row in &rows {
            let mut line = vec![row.metric.clone()];
            line.extend(Self::cell_texts(row));
            table.push(line);
        }
        let widths: Vec<usize> = (0..=self.runs.len())
            .map(|c| {
                table
                    .iter()
                    .map(|l| l[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for line in &table {
            let mut s = String::new();
            for (c, cell) in line.iter().enumerate() {
                let pad = widths[c] - cell.chars().count();
                if c == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            let _ = writeln!(o, "{}", s.trim_end());
        }
        let _ = writeln!(
            o,
            "\nDifferences in % are against run A. Latencies in ms; rates per second."
        );
        for (i, failed) in self.failed_lists() {
            let _ = writeln!(o, "{} failed: {failed}", run_label(i));
        }
        o
    }

    /// "Performance, 2026-11-21 14:05:09 +01:00, mail01".
    fn about(r: &ComparedRun) -> String {
        [
            r.results.test_type.label().to_string(),
            timestamp(&r.results.started_at),
            r.results.host.hostname.clone(),
        ]
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .collect::<Vec<_>>()
        .join(", ")
    }

    /// The failed criteria of each run that has some: "db_read_avg_latency
    /// [Instance0001], transactional_iops [Total]".
    fn failed_lists(&self) -> Vec<(usize, String)> {
        self.runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.results.failed_criteria.is_empty())
            .map(|(i, r)| {
                let list = r
                    .results
                    .failed_criteria
                    .iter()
                    .map(|c| format!("{} [{}]", c.key, c.scope))
                    .collect::<Vec<_>>()
                    .join(", ");
                (i, list)
            })
            .collect()
    }

    /// The comparison as a self-contained HTML page with overlaid charts.
    pub fn to_html(&self) -> String {
        let mut o = String::new();
        let title = format!("edbstress Comparison of {} Runs", self.runs.len());
        page_start(&mut o, &title);
        let _ = writeln!(o, "<header><h1>{}</h1></header>", escape(&title));
        o.push_str("<section id=\"runs\"><h2>Runs</h2>");
        let mut t = Table::new(
            "text",
            &[
                "Run",
                "Run directory",
                "Test",
                "Start Time",
                "Machine",
                "Overall Test Result",
            ],
        );
        for (i, r) in self.runs.iter().enumerate() {
            let verdict = r.results.overall_result.label();
            t.row(vec![
                Cell::from(run_label(i)),
                Cell::with(r.source.clone(), "path"),
                Cell::from(r.results.test_type.label()),
                Cell::from(timestamp(&r.results.started_at)),
                Cell::from(r.results.host.hostname.as_str()),
                Cell::with(
                    verdict.to_uppercase(),
                    if verdict == "Pass" { "pass" } else { "fail" },
                ),
            ]);
        }
        t.write(&mut o);
        o.push_str("</section>\n<section id=\"configuration\"><h2>Configuration Differences</h2>");
        let differences = self.configuration_differences();
        if differences.is_empty() {
            o.push_str("<p class=\"note\">The runs have the same configuration.</p>");
        } else {
            o.push_str("<p class=\"note\">The runs are configured differently: the key figures below are not like for like.</p><ul>");
            for d in &differences {
                let _ = write!(o, "<li>{}</li>", escape(d));
            }
            o.push_str("</ul>");
        }
        o.push_str("</section>\n<section id=\"figures\"><h2>Key Figures</h2>");
        let mut head = vec!["".to_string()];
        head.extend((0..self.runs.len()).map(run_label));
        let mut t = Table::new("", &head);
        for row in self.rows() {
            let mut cells = vec![Cell::from(row.metric.as_str())];
            cells.extend(Self::cell_texts(&row).into_iter().map(Cell::from));
            t.row(cells);
        }
        t.write(&mut o);
        o.push_str("<p class=\"note\">Differences in % are against run A.</p>");
        for (i, failed) in self.failed_lists() {
            let _ = write!(
                o,
                "<p class=\"note\">{} failed: {}</p>",
                run_label(i),
                escape(&failed)
            );
        }
        o.push_str("</section>\n");
        o.push_str("<section id=\"charts\"><h2>Charts</h2>");
        for chart in self.charts() {
            o.push_str(&chart.to_svg());
            o.push('\n');
        }
        o.push_str("</section></body></html>\n");
        o
    }

    fn series_name(&self, i: usize) -> String {
        let source = &self.runs[i].source;
        let short = std::path::Path::new(source)
            .file_name()
            .map_or(source.clone(), |n| n.to_string_lossy().into_owned());
        format!("{}: {short}", run_label(i))
    }

    /// The overlaid charts: I/O rate and judged latencies over time, and latency
    /// distributions.
    pub fn charts(&self) -> Vec<Chart> {
        let time = || Axis::linear("time since measurement started", Ticks::Elapsed);
        let mut iops = Chart::new(
            "Transactional I/O per second over the run (database reads + writes; other tests: all I/O)",
            time(),
            Axis::linear("I/O per second", Ticks::Number),
        );
        for (i, run) in self.runs.iter().enumerate() {
            let r = &run.results;
            let points = if r.test_type.is_transactional() {
                timeseries::transactional_iops(&r.samples)
            } else {
                let mut sum: Vec<(f64, f64)> = Vec::new();
                for c in classes_seen(&r.samples, "Total") {
                    let s = rate(&r.samples, "Total", c.name(), per_sec);
                    if sum.is_empty() {
                        sum = s;
                    } else {
                        for (a, b) in sum.iter_mut().zip(s) {
                            a.1 += b.1;
                        }
                    }
                }
                sum
            };
            iops.series
                .push(Series::line(self.series_name(i), i, points));
        }
        let mut charts = vec![iops];
        for class in [IoClass::DbRead, IoClass::LogWrite] {
            let mut chart = Chart::new(
                format!("{} average latency over the run", class.label()),
                time(),
                Axis::log("latency, ms (log scale)", Ticks::Millis),
            );
            for (i, run) in self.runs.iter().enumerate() {
                chart.series.push(Series {
                    name: self.series_name(i),
                    points: aligned(&run.results.samples, "Total", class.name(), avg_latency),
                    style: i,
                    draw: Draw::Line,
                    hollow: false,
                });
            }
            // The baseline's limits (runs of one profile share them).
            let prefix = if class == IoClass::DbRead {
                "db_read"
            } else {
                "log_write"
            };
            for (suffix, what, kind) in
                [("avg_latency", "average", 0), ("max_latency", "maximum", 1)]
            {
                let key = format!("{prefix}_{suffix}");
                if let Some(c) = self.runs[0].results.criteria.iter().find(|c| c.key == key) {
                    chart.h_lines.push(RefLine {
                        label: format!("{what} limit {} (run A)", quantity(c.threshold, "ms")),
                        value: c.threshold,
                        kind,
                    });
                }
            }
            charts.push(chart);
        }
        for class in self.classes() {
            let mut chart = Chart::new(
                format!("{} latency distribution", class.label()),
                Axis::log(
                    "latency (log scale; each band twice the last)",
                    Ticks::Millis,
                ),
                Axis::linear("share of I/Os", Ticks::Percent),
            );
            chart.plot_height = 180.0;
            for (i, run) in self.runs.iter().enumerate() {
                let Some(s) = run.results.totals.io.get(&class).filter(|s| s.count > 0) else {
                    continue;
                };
                let total = s.histogram.count().max(1) as f64;
                let points = s
                    .histogram
                    .buckets()
                    .map(|(bound, n)| ((bound + 1) as f64 / 1e6, n as f64 / total * 100.0))
                    .collect();
                chart
                    .series
                    .push(Series::line(self.series_name(i), i, points));
            }
            charts.push(chart);
        }
        charts
    }
}
