//! `report.html`: the self-contained report (inline CSS and SVG, no script, no
//! network), printable.
//!
//! Layout: the verdict and the failed criteria in plain words at the top, then
//! Jetstress's sections in Jetstress's order and wording (so a reader of ESRP reports
//! finds everything where they expect it), then what Jetstress lacks (every criterion,
//! latency percentiles and histograms, time series with the thresholds drawn, request
//! sizes, auto-tuning, checksum verification), and the test log last. DatabaseBackup
//! and SoftRecovery runs get the shapes of the reference report's appendices.
//!
//! The page is a pure function of the results and the test log, so `edbstress report`
//! re-renders a run directory to the same bytes.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::{ExportError, Exporter, write_atomically};
use crate::model::{RunResults, TestType, Verdict};
use crate::text::{escape, inconsistency_note, plain_words};

mod beyond;
mod jetstress;

pub(crate) use jetstress::description;

/// Writes `report.html`. Exporting into a run directory reads its `test.log` for the
/// Test Log section unless lines were given.
#[derive(Clone, Debug, Default)]
pub struct HtmlReport {
    test_log: TestLogSource,
}

/// Where the Test Log section comes from.
#[derive(Clone, Debug, Default)]
enum TestLogSource {
    /// `test.log` of the directory exported into (nothing when only rendering).
    #[default]
    RunDirectory,
    /// These lines; None: the section says the log is missing.
    Given(Option<Vec<String>>),
}

impl HtmlReport {
    /// A report that takes the test log from the run directory it is exported into.
    pub fn new() -> HtmlReport {
        HtmlReport::default()
    }

    /// A report with these test log lines (None: the log is missing, and the report
    /// says so), as [`read_test_log`] returns them.
    pub fn with_test_log(lines: Option<Vec<String>>) -> HtmlReport {
        HtmlReport {
            test_log: TestLogSource::Given(lines),
        }
    }

    /// The page for `results` with `test_log` (None: the section says it is missing).
    pub fn page(results: &RunResults, test_log: Option<&[String]>) -> String {
        render_page(results, test_log)
    }
}

/// The lines of `dir/test.log`, None when the file does not exist. Invalid UTF-8 is
/// replaced, never fatal: the log is shown, not parsed.
pub fn read_test_log(dir: &Path) -> Result<Option<Vec<String>>, ExportError> {
    let path = dir.join(crate::model::run_files::TEST_LOG);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(str::to_string)
                .collect(),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ExportError::Io { path, source }),
    }
}

impl Exporter for HtmlReport {
    fn file_name(&self) -> &'static str {
        crate::model::run_files::REPORT_HTML
    }

    fn render(&self, results: &RunResults) -> Result<Vec<u8>, ExportError> {
        let log = match &self.test_log {
            TestLogSource::RunDirectory => None,
            TestLogSource::Given(lines) => lines.as_deref(),
        };
        Ok(render_page(results, log).into_bytes())
    }

    fn export(&self, results: &RunResults, dir: &Path) -> Result<PathBuf, ExportError> {
        let log = match &self.test_log {
            TestLogSource::Given(lines) => lines.clone(),
            TestLogSource::RunDirectory => read_test_log(dir)?,
        };
        let path = dir.join(self.file_name());
        write_atomically(&path, render_page(results, log.as_deref()).as_bytes())?;
        Ok(path)
    }
}

/// The stylesheet: screen and print. Colours carry no meaning alone (verdicts are
/// spelled out, chart series differ by dash and marker), so a black-and-white print
/// reads the same.
pub(crate) const STYLE: &str = r#"
:root{--pass:#1E7B34;--fail:#B3261E;--line:#c8c8c8;--head:#e8edf3}
*{box-sizing:border-box}
body{font-family:"Segoe UI",system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:0 auto;padding:24px 32px;max-width:1240px;color:#1d1d1f;font-size:14px;line-height:1.4;background:#fff}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:28px 0 8px;padding-bottom:4px;border-bottom:2px solid #2B506E;color:#15324a}
h3{font-size:15px;margin:18px 0 6px;color:#15324a}
p.sub{margin:0 0 16px;color:#555}
p.note{color:#555;font-size:13px;margin:4px 0 10px}
p.warning{color:#8a4b00;background:#fff4e0;border-left:4px solid #d98200;padding:6px 10px;font-size:13px;margin:6px 0 10px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}
th,td{border:1px solid var(--line);padding:3px 8px;vertical-align:top}
thead th{background:var(--head);font-weight:600;text-align:center}
td{text-align:right;font-variant-numeric:tabular-nums}
td:first-child,th[scope=row]{text-align:left;white-space:nowrap}
table.kv th{background:var(--head);text-align:left;font-weight:600;white-space:nowrap}
table.kv td{text-align:left}
table.text td{text-align:left}
td.words{text-align:left;white-space:normal;min-width:260px}
td.path,span.path{font-family:"DejaVu Sans Mono",monospace;font-size:12px;word-break:normal;overflow-wrap:normal;white-space:normal;hyphens:none}
tfoot td{font-weight:600;background:#f6f6f6}
td.pass,span.pass{color:var(--pass);font-weight:700}
td.fail,span.fail{color:var(--fail);font-weight:700}
tr.failed td{background:#fdecea}
.verdict{display:flex;align-items:center;gap:24px;padding:16px 24px;margin:12px 0 16px;border-radius:6px;color:#fff}
.verdict.pass{background:var(--pass);border:3px solid var(--pass)}
.verdict.fail{background:var(--fail);border:6px double #fff;outline:3px solid var(--fail)}
.verdict-word{font-size:56px;font-weight:800;letter-spacing:4px;line-height:1}
.verdict-text{font-size:16px}
.verdict-text ol{margin:8px 0 0;padding-left:22px}
.verdict-text li{margin:4px 0}
.verdict-text small{display:block;opacity:.85;font-size:12px}
.verdict-text a{color:inherit;text-decoration:underline;font-weight:600}
.glance{display:flex;gap:12px;margin:0 0 14px;flex-wrap:wrap}
.glance div{flex:1;min-width:180px;border:1px solid var(--line);border-radius:4px;padding:8px 12px}
.g-name{display:block;font-size:12px;color:#555}
.g-value{display:block;font-size:22px;font-weight:700;font-variant-numeric:tabular-nums}
.g-note{display:block;font-size:12px;color:#555}
nav.toc{columns:3;font-size:13px;margin:0 0 8px;padding:8px 16px;background:#f4f6f8;border-radius:4px}
nav.toc a{color:#15324a;text-decoration:none;display:block}
nav.toc a.extra{font-style:italic}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0 14px}
pre.log{white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px;background:#f7f7f7;border:1px solid var(--line);padding:8px;margin:6px 0}
.tag{font-size:11px;font-weight:600;color:#555;border:1px solid #999;border-radius:3px;padding:0 4px;margin-left:8px;vertical-align:middle}
@page{size:A4;margin:12mm}
@media print{
 body{padding:0;max-width:none;font-size:10pt}
 .glance{display:flex;gap:12px;margin:0 0 14px;flex-wrap:wrap}
.glance div{flex:1;min-width:180px;border:1px solid var(--line);border-radius:4px;padding:8px 12px}
.g-name{display:block;font-size:12px;color:#555}
.g-value{display:block;font-size:22px;font-weight:700;font-variant-numeric:tabular-nums}
.g-note{display:block;font-size:12px;color:#555}
nav.toc{display:none}
 .verdict,.verdict *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 h2{break-after:avoid}
 h3{break-after:avoid}
 table,svg.chart,.verdict{break-inside:avoid}
 pre.log{background:none;font-size:8pt}
 tr.failed td{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"#;

/// The HTML head and the opening of the body.
pub(crate) fn page_start(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"generator\" content=\"edbstress\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{}</title><style>{STYLE}</style></head>\n<body>\n",
        escape(title)
    );
}

/// A table: header cells, body rows, footer rows (totals). Cell text is escaped here;
/// the first cell of each row is a row header.
pub(crate) struct Table {
    class: &'static str,
    head: Vec<String>,
    rows: Vec<(Vec<Cell>, bool)>,
    foot: Vec<Vec<Cell>>,
}

/// A table cell: text and an optional class ("path", "pass", "fail").
pub(crate) struct Cell {
    text: String,
    class: &'static str,
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, class: "" }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell {
            text: text.to_string(),
            class: "",
        }
    }
}

impl Cell {
    /// A cell with a class.
    pub(crate) fn with(text: impl Into<String>, class: &'static str) -> Cell {
        Cell {
            text: text.into(),
            class,
        }
    }
}

impl Table {
    pub(crate) fn new<S: AsRef<str>>(class: &'static str, head: &[S]) -> Table {
        Table {
            class,
            head: head.iter().map(|h| h.as_ref().to_string()).collect(),
            rows: Vec::new(),
            foot: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push((cells, false));
    }

    /// A row highlighted as failed.
    pub(crate) fn failed_row(&mut self, cells: Vec<Cell>) {
        self.rows.push((cells, true));
    }

    pub(crate) fn foot(&mut self, cells: Vec<Cell>) {
        self.foot.push(cells);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.foot.is_empty()
    }

    pub(crate) fn write(&self, o: &mut String) {
        if self.class.is_empty() {
            o.push_str("<table>");
        } else {
            let _ = write!(o, "<table class=\"{}\">", self.class);
        }
        if !self.head.is_empty() {
            o.push_str("<thead><tr>");
            for h in &self.head {
                let _ = write!(o, "<th>{}</th>", escape(h));
            }
            o.push_str("</tr></thead>");
        }
        o.push_str("<tbody>\n");
        for (cells, failed) in &self.rows {
            write_row(o, cells, *failed);
        }
        o.push_str("</tbody>");
        if !self.foot.is_empty() {
            o.push_str("<tfoot>\n");
            for cells in &self.foot {
                write_row(o, cells, false);
            }
            o.push_str("</tfoot>");
        }
        o.push_str("</table>\n");
    }
}

fn write_row(o: &mut String, cells: &[Cell], failed: bool) {
    o.push_str(if failed {
        "<tr class=\"failed\">"
    } else {
        "<tr>"
    });
    for c in cells {
        if c.class.is_empty() {
            let _ = write!(o, "<td>{}</td>", escape(&c.text));
        } else if c.class == "path" {
            let _ = write!(
                o,
                "<td class=\"path\">{}</td>",
                crate::text::path_html(&c.text)
            );
        } else {
            let _ = write!(o, "<td class=\"{}\">{}</td>", c.class, escape(&c.text));
        }
    }
    o.push_str("</tr>\n");
}

/// A two-column table of names and values (Test Summary, System Parameters).
pub(crate) fn kv_table(o: &mut String, rows: &[(&str, String)]) {
    o.push_str("<table class=\"kv\"><tbody>\n");
    for (k, v) in rows {
        let v = if v.trim().is_empty() {
            "—"
        } else {
            v.as_str()
        };
        let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    o.push_str("</tbody></table>\n");
}

/// The body being written and its table of contents.
pub(crate) struct Doc {
    pub(crate) body: String,
    toc: Vec<(String, String, bool)>,
}

impl Doc {
    pub(crate) fn new() -> Doc {
        Doc {
            body: String::new(),
            toc: Vec::new(),
        }
    }

    /// Opens a section; `extra` marks what Jetstress lacks (tagged in the heading).
    pub(crate) fn section(&mut self, id: &str, title: &str, extra: bool) {
        self.toc.push((id.to_string(), title.to_string(), extra));
        let tag = if extra {
            "<span class=\"tag\">beyond Jetstress</span>"
        } else {
            ""
        };
        let _ = writeln!(
            self.body,
            "<section id=\"{id}\"><h2>{}{tag}</h2>",
            escape(title)
        );
    }

    pub(crate) fn end(&mut self) {
        self.body.push_str("</section>\n");
    }

    pub(crate) fn h3(&mut self, title: &str) {
        let _ = writeln!(self.body, "<h3>{}</h3>", escape(title));
    }

    /// A warning the reader must not miss (set apart from the notes).
    pub(crate) fn warning(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"warning\">{}</p>", escape(text));
    }

    pub(crate) fn note(&mut self, text: &str) {
        let _ = writeln!(self.body, "<p class=\"note\">{}</p>", escape(text));
    }

    pub(crate) fn table(&mut self, t: &Table) {
        t.write(&mut self.body);
    }

    pub(crate) fn kv(&mut self, rows: &[(&str, String)]) {
        kv_table(&mut self.body, rows);
    }

    pub(crate) fn svg(&mut self, svg: &str) {
        self.body.push_str(svg);
        self.body.push('\n');
    }

    pub(crate) fn toc_html(&self) -> String {
        let mut o = String::from("<nav class=\"toc\">");
        for (id, title, extra) in &self.toc {
            let _ = write!(
                o,
                "<a href=\"#{id}\"{}>{}</a>",
                if *extra { " class=\"extra\"" } else { "" },
                escape(title)
            );
        }
        o.push_str("</nav>\n");
        o
    }
}

/// Report title in Jetstress's words: "Performance Test Result Report".
pub(crate) fn report_title(t: TestType) -> String {
    match t {
        TestType::DatabaseBackup => "Database Backup Test Result Report".into(),
        TestType::SoftRecovery => "SoftRecovery Test Result Report".into(),
        _ => format!("{} Test Result Report", t.label()),
    }
}

/// The verdict banner: the word big and coloured (PASS / FAIL in text, so it reads in
/// black and white), then each failed criterion in plain words.
pub(crate) fn verdict_banner(o: &mut String, r: &RunResults) {
    let (class, word) = match r.overall_result {
        Verdict::Pass => ("pass", "PASS"),
        Verdict::Fail => ("fail", "FAIL"),
    };
    let _ = write!(
        o,
        "<div class=\"verdict {class}\" id=\"verdict\"><div class=\"verdict-word\">{word}</div><div class=\"verdict-text\">"
    );
    let total = r.criteria.len();
    let failed = r.failed_criteria.len();
    match r.overall_result {
        Verdict::Pass => {
            let _ = write!(
                o,
                "<strong>Overall Test Result: Pass.</strong> All {total} criteria were met."
            );
        }
        Verdict::Fail => {
            let _ = write!(o, "<strong>Overall Test Result: Fail.</strong> ");
            if r.aborted {
                let _ = write!(
                    o,
                    "The test was stopped before its end ({}); a stopped test always fails. ",
                    escape(r.abort_reason.as_deref().unwrap_or("no reason recorded"))
                );
            }
            if failed > 0 {
                let _ = write!(
                    o,
                    "{failed} of {total} criteria {} not met:<ol>",
                    if failed == 1 { "was" } else { "were" }
                );
                for c in &r.failed_criteria {
                    let _ = write!(
                        o,
                        "<li>{}<small>{}</small></li>",
                        escape(&plain_words(c, r)),
                        escape(&c.describe())
                    );
                }
                o.push_str("</ol>");
            }
            if let Some(note) = crate::text::tuning_window_note(r) {
                let _ = write!(o, "<p>{}</p>", escape(&note));
            }
        }
    }
    if let Some(note) = inconsistency_note(r) {
        let _ = write!(
            o,
            "<p class=\"inconsistent\"><strong>{}</strong></p>",
            escape(&note)
        );
    }
    o.push_str("</div></div>\n");
}

/// The few figures a reader looks for first, under the verdict.
fn glance(o: &mut String, r: &RunResults) {
    use crate::text::quantity;
    use edbstress_io::IoClass;
    let mut items: Vec<(String, String, String)> = Vec::new();
    let limit = |key: &str| {
        r.criteria
            .iter()
            .find(|c| c.key == key)
            .map(|c| format!("limit {}", quantity(c.threshold, &c.unit)))
            .unwrap_or_default()
    };
    if r.test_type.is_transactional() {
        items.push((
            "Transactional IOPS".into(),
            format!("{:.1}", r.achieved_transactional_iops),
            r.target_transactional_iops
                .map_or("no target (throughput run)".into(), |t| {
                    format!("target {}", quantity(t, ""))
                }),
        ));
        for (class, key) in [
            (IoClass::DbRead, "db_read_avg_latency"),
            (IoClass::LogWrite, "log_write_avg_latency"),
        ] {
            if let Some(s) = r.totals.io.get(&class) {
                items.push((
                    format!("{} average", class.label()),
                    format!("{:.3} ms", s.avg_latency_ms),
                    format!("p99 {:.3} ms · {}", s.p99_ms, limit(key)),
                ));
            }
        }
    } else {
        if let Some(mbs) = r.totals.mb_per_sec {
            items.push((
                "Throughput".into(),
                format!("{mbs:.1} MiB/s"),
                "all databases".into(),
            ));
        }
        if let Some(spl) = r.totals.seconds_per_log {
            items.push((
                "Replay".into(),
                format!("{spl:.3} s"),
                "per log file".into(),
            ));
        }
    }
    items.push((
        "Measured".into(),
        if r.measured_seconds < 60.0 {
            crate::text::hms_precise(r.measured_seconds)
        } else {
            crate::text::hms(r.measured_seconds)
        },
        crate::text::count_of(u64::from(r.sizing.database_count), "database"),
    ));
    o.push_str("<div class=\"glance\">");
    for (name, value, note) in items {
        let _ = write!(
            o,
            "<div><span class=\"g-name\">{}</span><span class=\"g-value\">{}</span><span class=\"g-note\">{}</span></div>",
            escape(&name),
            escape(&value),
            escape(&note)
        );
    }
    o.push_str("</div>\n");
}

/// The Jetstress-shaped sections of a run's report (Test Summary to Host System
/// Performance), without page, verdict or contents: an appendix of the solution
/// document.
pub(crate) fn appendix_sections(r: &RunResults) -> String {
    let mut doc = Doc::new();
    jetstress::sections(&mut doc, r);
    doc.body
}

/// The checksum statistics of a run (its verification after the test), in the shape
/// of the run report's section: the solution document's checksum appendix.
pub(crate) fn checksum_section(r: &RunResults) -> String {
    let mut doc = Doc::new();
    beyond::verification(&mut doc, r);
    doc.body
}

fn render_page(r: &RunResults, test_log: Option<&[String]>) -> String {
    let title = report_title(r.test_type);
    let mut doc = Doc::new();
    jetstress::sections(&mut doc, r);
    beyond::sections(&mut doc, r);
    test_log_section(&mut doc, test_log);
    let mut o = String::with_capacity(doc.body.len() + 16 * 1024);
    page_start(
        &mut o,
        &format!("{title} — {} — {}", r.host.hostname, r.started_at),
    );
    let sub: Vec<String> = [
        format!("edbstress {}", r.tool.version),
        r.host.hostname.clone(),
        crate::text::timestamp(&r.started_at),
    ]
    .into_iter()
    .filter(|s| !s.trim().is_empty())
    .collect();
    let _ = writeln!(
        o,
        "<header><h1>{}</h1><p class=\"sub\">{}</p></header>",
        escape(&title),
        escape(&sub.join(" · "))
    );
    verdict_banner(&mut o, r);
    glance(&mut o, r);
    o.push_str(&doc.toc_html());
    o.push_str(&doc.body);
    o.push_str("</body></html>\n");
    o
}

fn test_log_section(doc: &mut Doc, lines: Option<&[String]>) {
    doc.section("test-log", "Test Log", false);
    match lines {
        Some(lines) if !lines.is_empty() => {
            doc.body.push_str("<pre class=\"log\">");
            for l in lines {
                doc.body.push_str(&escape(l));
                doc.body.push('\n');
            }
            doc.body.push_str("</pre>\n");
        }
        Some(_) => doc.note("test.log is empty."),
        None => doc.note("test.log was not found in the run directory."),
    }
    doc.end();
}

/// A latency histogram as bars on a log axis (each bucket twice the last), with the
/// p50, p99 and p99.9 marked: the "Latency Histograms" of a run report and of an
/// aggregate. `percentiles_ms` are (p50, p99, p99.9).
pub(crate) fn latency_histogram_chart(
    title: String,
    histogram: &edbstress_io::LatencyHistogram,
    percentiles_ms: (f64, f64, f64),
) -> crate::charts::Chart {
    let total = histogram.count().max(1) as f64;
    let mut chart = crate::charts::Chart::new(
        title,
        crate::charts::Axis::log("latency (log scale)", crate::charts::Ticks::Millis),
        crate::charts::Axis::linear("share of I/Os", crate::charts::Ticks::Percent),
    );
    chart.plot_height = 170.0;
    // Buckets double: (bound+1)/2 .. bound+1 ns.
    chart.bars = histogram
        .buckets()
        .map(|(bound, n)| crate::charts::Bar {
            x0: (bound + 1) as f64 / 2.0 / 1e6,
            x1: (bound + 1) as f64 / 1e6,
            y: n as f64 / total * 100.0,
        })
        .collect();
    chart.bars_label = Some("I/Os per latency band (each band twice the last)".into());
    let (p50, p99, p999) = percentiles_ms;
    for (label, v) in [("p50", p50), ("p99", p99), ("p99.9", p999)] {
        chart.v_lines.push(crate::charts::RefLine {
            label: format!("{label} {}", crate::text::quantity(v, "ms")),
            value: v,
            kind: 2,
        });
    }
    chart
}
