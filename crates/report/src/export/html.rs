//! `report.html`: a self-contained page in Jetstress's section order (the summary,
//! the verdict with every failed criterion, and the I/O tables per instance).

use std::fmt::Write;

use edbstress_io::IoClass;

use super::{ExportError, Exporter};
use crate::model::{IoSummary, RunResults, Verdict};

/// Writes `report.html`.
pub struct HtmlReport;

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}\
th:first-child,td:first-child{text-align:left}\
th{background:#eef}.pass{color:#070;font-weight:bold}.fail{color:#b00;font-weight:bold}";

fn row(out: &mut String, cells: &[String], header: bool) {
    let tag = if header { "th" } else { "td" };
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<{tag}>{}</{tag}>", escape(c));
    }
    out.push_str("</tr>\n");
}

fn io_table(out: &mut String, title: &str, rows: &[(String, &IoSummary)], classes: &[IoClass]) {
    let _ = writeln!(out, "<h3>{}</h3><table>", escape(title));
    let mut head = vec!["Instance".to_string()];
    for c in classes {
        head.push(format!("{} /sec", c.label()));
        head.push(format!("{} Average Latency (msec)", c.label()));
        head.push(format!("{} Average Bytes", c.label()));
        head.push(format!("{} p99 (msec)", c.label()));
    }
    row(out, &head, true);
    for (name, io) in rows {
        let mut cells = vec![name.clone()];
        for c in classes {
            let s = io.get(c).cloned().unwrap_or_default();
            cells.push(format!("{:.3}", s.per_sec));
            cells.push(format!("{:.3}", s.avg_latency_ms));
            cells.push(format!("{:.0}", s.avg_bytes));
            cells.push(format!("{:.3}", s.p99_ms));
        }
        row(out, &cells, false);
    }
    out.push_str("</table>\n");
}

impl Exporter for HtmlReport {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, r: &RunResults) -> Result<Vec<u8>, ExportError> {
        let mut o = String::new();
        let title = format!("edbstress {} Test Result Report", r.test_type.label());
        let _ = writeln!(
            o,
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
            t = escape(&title)
        );
        let class = match r.overall_result {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
        };
        o.push_str("<h2>Test Summary</h2><table>\n");
        let target = r
            .target_transactional_iops
            .map_or("none (throughput run)".to_string(), |t| format!("{t:.3}"));
        for (k, v) in [
            ("Overall Test Result", r.overall_result.label().to_string()),
            ("Machine Name", r.host.hostname.clone()),
            (
                "Operating System",
                format!("{} (kernel {})", r.host.os, r.host.kernel),
            ),
            ("Tool", format!("{} {}", r.tool.name, r.tool.version)),
            ("Start Time", r.started_at.clone()),
            ("End Time", r.ended_at.clone()),
            ("Measured Seconds", format!("{:.0}", r.measured_seconds)),
            (
                "Achieved Transactional I/O per Second",
                format!("{:.3}", r.achieved_transactional_iops),
            ),
            ("Target Transactional I/O per Second", target),
        ] {
            let cls = if k == "Overall Test Result" {
                class
            } else {
                ""
            };
            let _ = writeln!(
                o,
                "<tr><th>{}</th><td class=\"{cls}\">{}</td></tr>",
                escape(k),
                escape(&v)
            );
        }
        o.push_str("</table>\n");
        if r.aborted {
            let _ = writeln!(
                o,
                "<p class=\"fail\">The run was aborted: {}</p>",
                escape(r.abort_reason.as_deref().unwrap_or("stopped early"))
            );
        }
        if !r.failed_criteria.is_empty() {
            o.push_str("<h2>Failed Criteria</h2><ul>\n");
            for c in &r.failed_criteria {
                let _ = writeln!(o, "<li class=\"fail\">{}</li>", escape(&c.describe()));
            }
            o.push_str("</ul>\n");
        }
        o.push_str("<h2>Database Configuration</h2><table>\n");
        row(
            &mut o,
            &["Instance".into(), "Log path".into(), "Database path".into()],
            true,
        );
        for i in &r.instances {
            row(
                &mut o,
                &[i.name.clone(), i.log_path.clone(), i.database_path.clone()],
                false,
            );
        }
        o.push_str("</table>\n");
        let mut rows: Vec<(String, &IoSummary)> = r
            .instances
            .iter()
            .map(|i| (i.name.clone(), &i.io))
            .collect();
        rows.push(("Total".into(), &r.totals.io));
        if r.test_type.is_transactional() {
            io_table(
                &mut o,
                "Transactional I/O Performance",
                &rows,
                &[
                    IoClass::DbRead,
                    IoClass::DbWrite,
                    IoClass::LogRead,
                    IoClass::LogWrite,
                ],
            );
            io_table(
                &mut o,
                "Background Database Maintenance I/O Performance",
                &rows,
                &[IoClass::BdmRead],
            );
            io_table(
                &mut o,
                "Log Replication I/O Performance",
                &rows,
                &[IoClass::ReplicationRead],
            );
        } else {
            let classes: Vec<IoClass> = r
                .totals
                .io
                .keys()
                .copied()
                .filter(|c| r.totals.io[c].count > 0)
                .collect();
            io_table(&mut o, "I/O Performance", &rows, &classes);
        }
        o.push_str("</body></html>\n");
        Ok(o.into_bytes())
    }
}
