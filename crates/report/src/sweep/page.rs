//! `sweep.html`: the recommendation, charts with the swept parameter on the x axis
//! (database read and write latency, log write latency — average and 99th percentile
//! — transactional IOPS, MB/s per volume type, the measured column), one series per
//! combination of the other axes' values, thresholds drawn; and a table of every run
//! linking to its report. Self-contained, like the run reports.

use std::fmt::Write;

use super::best::{PointStats, RULE, point_stats, recommend};
use super::table::measure_column;
use super::{ClassFigures, SweepResults};
use crate::charts::{Axis, Chart, RefLine, Series, Ticks};
use crate::export::html::page_start;
use crate::text::escape;

/// Extra style of the sweep page: charts two to a row on wide screens.
const SWEEP_STYLE: &str = "<style>.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:0 18px}\
.best{border:2px solid #2B506E;border-radius:6px;padding:8px 16px;margin:8px 0 14px;background:#f4f6f8}\
.best p{margin:6px 0}</style>\n";

/// A figure of a point drawn on a chart.
type Figure = fn(&PointStats) -> Option<f64>;

fn class_of(p: &PointStats, which: usize) -> &ClassFigures {
    match which {
        0 => &p.db_read,
        1 => &p.db_write,
        _ => &p.log_write,
    }
}

/// The series of a chart: one per combination of the other axes' values, each with
/// the x position (index of the x axis value) and the figure of that point.
fn series_of(s: &SweepResults, stats: &[PointStats], x: usize, figure: Figure) -> Vec<Series> {
    let mut names: Vec<String> = Vec::new();
    let mut series: Vec<Series> = Vec::new();
    for p in stats {
        let values = &s.points[p.point].values;
        let Some(xv) = values.get(x) else { continue };
        let Some(pos) = s.axes[x].values.iter().position(|v| v == xv) else {
            continue;
        };
        let name = s
            .axes
            .iter()
            .zip(values)
            .enumerate()
            .filter(|(i, _)| *i != x)
            .map(|(_, (a, v))| format!("{}={v}", a.name))
            .collect::<Vec<_>>()
            .join(", ");
        let i = match names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                names.push(name.clone());
                let label = if name.is_empty() {
                    "mean of the repeats".to_string()
                } else {
                    name
                };
                series.push(Series::line(label, series.len(), Vec::new()));
                names.len() - 1
            }
        };
        if let Some(y) = figure(p) {
            series[i].points.push((pos as f64, Some(y)));
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// A threshold line: its label and value.
type Limit = Option<(String, f64)>;

struct ChartSpec {
    title: String,
    y: Axis,
    figure: Figure,
    limit: Limit,
}

fn chart(s: &SweepResults, stats: &[PointStats], x: usize, spec: ChartSpec) -> String {
    let axis = &s.axes[x];
    let mut c = Chart::new(
        spec.title,
        Axis::categories(axis.name.clone(), axis.values.clone()),
        spec.y,
    );
    c.series = series_of(s, stats, x, spec.figure);
    if let Some((label, value)) = spec.limit {
        c.h_lines.push(RefLine {
            label,
            value,
            kind: 0,
        });
    }
    c.plot_height = 200.0;
    c.to_svg()
}

/// Logarithmic, as the run report's latency charts: sub-millisecond points and the
/// 20 ms limit fit on one chart instead of the points lying flat under the limit.
fn latency(title: &str) -> Axis {
    Axis::log(format!("{title} (ms, log scale)"), Ticks::Millis)
}

/// The charts, in the order of the study: latency per volume type, then throughput.
fn charts(s: &SweepResults, stats: &[PointStats], x: usize) -> Vec<String> {
    let first = s.done().next().map(|(_, f)| f);
    let read_limit = first
        .and_then(|f| f.db_read_avg_limit_ms)
        .map(|v| (format!("average limit {v} ms"), v));
    let log_limit = first
        .and_then(|f| f.log_write_avg_limit_ms)
        .map(|v| (format!("average limit {v} ms"), v));
    let on = &s.axes[x].name;
    let mut specs = Vec::new();
    let classes: [(&str, usize, Limit); 3] = [
        ("Database read", 0, read_limit),
        ("Database write", 1, None),
        ("Log write", 2, log_limit),
    ];
    for (name, which, limit) in classes {
        let (avg, p99): (Figure, Figure) = match which {
            0 => (
                |p| Some(class_of(p, 0).avg_ms),
                |p| Some(class_of(p, 0).p99_ms),
            ),
            1 => (
                |p| Some(class_of(p, 1).avg_ms),
                |p| Some(class_of(p, 1).p99_ms),
            ),
            _ => (
                |p| Some(class_of(p, 2).avg_ms),
                |p| Some(class_of(p, 2).p99_ms),
            ),
        };
        specs.push(ChartSpec {
            title: format!("{name} latency by {on} — average"),
            y: latency("average latency"),
            figure: avg,
            limit,
        });
        specs.push(ChartSpec {
            title: format!("{name} latency by {on} — 99th percentile"),
            y: latency("99th percentile latency"),
            figure: p99,
            limit: None,
        });
    }
    specs.push(ChartSpec {
        title: format!("Transactional IOPS by {on}"),
        y: Axis::linear("transactional IOPS", Ticks::Number),
        figure: |p| Some(p.iops),
        limit: None,
    });
    let throughput: [(&str, Figure); 3] = [
        ("Database read throughput", |p| Some(p.db_read.mb_per_sec)),
        ("Database write throughput", |p| Some(p.db_write.mb_per_sec)),
        ("Log write throughput", |p| Some(p.log_write.mb_per_sec)),
    ];
    for (name, figure) in throughput {
        specs.push(ChartSpec {
            title: format!("{name} by {on}"),
            y: Axis::linear("MB/s", Ticks::Number),
            figure,
            limit: None,
        });
    }
    if let Some(m) = &s.measure_name {
        specs.push(ChartSpec {
            title: format!("{m} by {on}"),
            y: Axis::linear(m.clone(), Ticks::Number),
            figure: |p| p.measured,
            limit: None,
        });
    }
    specs
        .into_iter()
        .map(|spec| chart(s, stats, x, spec))
        .collect()
}

fn recommendation(o: &mut String, s: &SweepResults) {
    let r = recommend(s);
    let _ = write!(
        o,
        "<section id=\"best\"><h2>Recommendation</h2><div class=\"best\"><p><strong>Rule:</strong> {}.</p>",
        escape(RULE)
    );
    for line in r.describe(s) {
        let _ = write!(o, "<p>{}</p>", escape(&line));
    }
    o.push_str("</div></section>\n");
}

fn runs_table(o: &mut String, s: &SweepResults) {
    o.push_str("<section id=\"runs\"><h2>Every run</h2><p class=\"note\">In the order they ran; each links to its run report.</p><table><thead><tr><th>point</th><th>repeat</th>");
    for a in &s.axes {
        let _ = write!(o, "<th>{}</th>", escape(&a.name));
    }
    let _ = writeln!(
        o,
        "<th>status</th><th>verdict</th><th>transactional IOPS</th><th>db read avg ms</th>\
         <th>db read p99 ms</th><th>db write avg ms</th><th>log write avg ms</th>\
         <th>log write p99 ms</th><th>db MB/s</th><th>log MB/s</th><th>{}</th><th>report</th></tr></thead><tbody>",
        escape(s.measure_name.as_deref().unwrap_or("measured"))
    );
    for r in &s.runs {
        let Some(point) = s.points.get(r.point) else {
            continue;
        };
        let failed = r
            .figures
            .as_ref()
            .is_some_and(|f| f.verdict != crate::model::Verdict::Pass);
        o.push_str(if failed || r.status == "failed" {
            "<tr class=\"failed\">"
        } else {
            "<tr>"
        });
        let _ = write!(o, "<td>{}</td><td>{}</td>", escape(&point.id), r.repeat);
        for v in &point.values {
            let _ = write!(o, "<td>{}</td>", escape(v));
        }
        let _ = write!(o, "<td>{}</td>", escape(&r.status));
        match &r.figures {
            Some(f) => {
                let verdict = match f.verdict {
                    crate::model::Verdict::Pass => "<td class=\"pass\">Pass</td>".to_string(),
                    // A failed run says why: the criteria it failed.
                    crate::model::Verdict::Fail if !f.failed.is_empty() => format!(
                        "<td class=\"fail words\">Fail: {}</td>",
                        escape(&f.failed.join("; "))
                    ),
                    crate::model::Verdict::Fail => "<td class=\"fail\">Fail</td>".to_string(),
                };
                let _ = write!(
                    o,
                    "{verdict}<td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>",
                    f.transactional_iops,
                    f.db_read.avg_ms,
                    f.db_read.p99_ms,
                    f.db_write.avg_ms,
                    f.log_write.avg_ms,
                    f.log_write.p99_ms,
                    f.db_read.mb_per_sec + f.db_write.mb_per_sec,
                    f.log_write.mb_per_sec
                );
            }
            None => {
                let _ = write!(
                    o,
                    "<td class=\"words\" colspan=\"9\">{}</td>",
                    escape(r.error.as_deref().unwrap_or("—"))
                );
            }
        }
        let _ = write!(
            o,
            "<td>{}</td>",
            escape(r.measured.as_deref().unwrap_or("—"))
        );
        match &r.run_dir {
            Some(d) => {
                let _ = writeln!(
                    o,
                    "<td><a href=\"{}/{}\">report</a></td></tr>",
                    escape(d),
                    crate::run_files::REPORT_HTML
                );
            }
            None => o.push_str("<td>—</td></tr>\n"),
        }
    }
    o.push_str("</tbody></table></section>\n");
}

/// The sweep's `sweep.html`.
pub fn render(s: &SweepResults) -> String {
    let title = format!("Parameter sweep: {}", s.name);
    let mut o = String::with_capacity(64 * 1024);
    page_start(&mut o, &title);
    o.push_str(SWEEP_STYLE);
    let done = s.done().count();
    let axes = s
        .axes
        .iter()
        .map(|a| format!("{} ({}: {})", a.name, a.kind, a.values.join(", ")))
        .collect::<Vec<_>>()
        .join("; ");
    let _ = writeln!(
        o,
        "<header><h1>{}</h1><p class=\"sub\">edbstress {} · {} of {} runs finished · {} \
         · {} repeat(s), order {} (seed {}), databases {} · started {}</p></header>",
        escape(&title),
        escape(&s.tool.version),
        done,
        s.runs.len(),
        escape(&s.state),
        s.repeats,
        escape(&s.order),
        s.seed,
        escape(&s.databases),
        escape(&s.started_at)
    );
    let _ = writeln!(o, "<p class=\"note\">Axes: {}.</p>", escape(&axes));
    if let Some(why) = &s.stop_reason {
        let _ = writeln!(
            o,
            "<p class=\"note\"><strong>Stopped before the end:</strong> {}</p>",
            escape(why)
        );
    }
    recommendation(&mut o, s);
    let stats = point_stats(s);
    let x = s.axes.iter().position(|a| a.name == s.x_axis).unwrap_or(0);
    o.push_str("<section id=\"charts\"><h2>Charts</h2>");
    if s.axes.is_empty() || stats.is_empty() {
        o.push_str("<p class=\"note\">No finished run yet.</p>");
    } else {
        let _ = write!(
            o,
            "<p class=\"note\">{} on the x axis; each point is the mean of its finished \
             repeats; one line per combination of the other axes' values.</p><div class=\"charts\">",
            escape(&s.axes[x].name)
        );
        for svg in charts(s, &stats, x) {
            o.push_str(&svg);
            o.push('\n');
        }
        o.push_str("</div>");
    }
    o.push_str("</section>\n");
    runs_table(&mut o, s);
    let _ = writeln!(
        o,
        "<section id=\"config\"><h2>Sweep file</h2><p class=\"note\">CSV column of the \
         measure: {}.</p><pre class=\"log\">{}</pre></section>",
        escape(&measure_column(s)),
        escape(&s.config_text)
    );
    o.push_str("</body></html>\n");
    o
}
