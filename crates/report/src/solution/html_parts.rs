//! The bodies of the solution document's sections in HTML: the vendor's texts and the
//! deployment (sections 1 to 10), the Test Result Summary, the backup and recovery
//! figures, and the appendices with each run's report and test log.

use std::fmt::Write;

use base64::Engine as _;

use super::html_blocks::{grid, heading, kv, prose, text_grid};
use super::sections::{self, Part};
use super::{
    ServerFigures, SolutionDocument, aggregate_figures, deployment, figures, reliability, topology,
};
use crate::export::html::{appendix_sections, checksum_section, report_title};
use crate::model::TestType;
use crate::text::escape;

/// Overview to Contact for Additional Information.
/// `inline_figures`: the figure as SVG elements (the printed page); otherwise as an
/// image of SVG in a data: address, which pandoc embeds in ODT and DOCX.
pub(super) fn front_sections(
    o: &mut String,
    doc: &SolutionDocument,
    outline: &[Part],
    inline_figures: bool,
) {
    let info = &doc.info;
    heading(o, outline, "overview");
    prose(o, &sections::overview(doc));
    heading(o, outline, "disclaimer");
    prose(o, sections::DISCLAIMER);
    heading(o, outline, "features");
    prose(o, &info.features);
    heading(o, outline, "solution-description");
    prose(o, &info.description);
    heading(o, outline, "dag-architecture");
    dag_architecture(o, doc, inline_figures);
    heading(o, outline, "customer-profile");
    kv(o, &sections::customer_profile(doc));
    heading(o, outline, "tested-deployment");
    o.push_str("<p>The following tables summarize the tested environment: what the vendor states in solution.toml, beside what the runs recorded.</p>");
    heading(o, outline, "simulated-configuration");
    kv(o, &deployment::simulated_configuration(doc));
    o.push_str("<p class=\"note\">Storage performance changes with how full the disks are: a test that uses a small share of the capacity may show more throughput than the same storage filled further.</p>");
    heading(o, outline, "storage-hardware");
    kv(o, &deployment::storage_hardware(doc));
    heading(o, outline, "storage-software");
    kv(o, &deployment::storage_software(doc));
    heading(o, outline, "disk-configuration");
    kv(o, &deployment::disk_configuration(doc));
    heading(o, outline, "devices");
    let devices = sections::devices_table(doc);
    if devices.rows.is_empty() {
        o.push_str("<p class=\"note\">The runs recorded no block device under their paths.</p>");
    } else {
        paths_grid(o, &devices, 6);
    }
    heading(o, outline, "best-practices");
    prose(o, &info.best_practices);
    heading(o, outline, "backup-strategy");
    prose(o, &info.backup_strategy);
    heading(o, outline, "contact");
    prose(o, &info.contact);
    if !info.additional_information.trim().is_empty() {
        prose(o, &info.additional_information);
    }
}

/// The topology text and the data layout table.
fn dag_architecture(o: &mut String, doc: &SolutionDocument, inline_figure: bool) {
    let d = &doc.info.deployment;
    prose(o, &d.topology);
    if d.layout.is_empty() {
        o.push_str("<p class=\"note\">No solution data layout was given in solution.toml ([[deployment.layout]]: server, storage, volume, database, role).</p>");
    } else {
        if let Some(svg) = topology::layout_figure(&d.layout) {
            let figure = if inline_figure {
                svg
            } else {
                format!(
                    "<img src=\"data:image/svg+xml;base64,{}\" alt=\"Solution data layout\">",
                    base64::engine::general_purpose::STANDARD.encode(svg)
                )
            };
            let _ = write!(
                o,
                "<figure class=\"topology\">{figure}<figcaption>Figure 1: Solution data layout: each server's database copies (filled: active, hollow: passive) and the storage that holds them</figcaption></figure>"
            );
        }
        o.push_str("<h3>Solution data layout</h3>");
        text_grid(o, &deployment::layout_table(doc));
    }
    if let Some(s) = deployment::layout_summary(doc) {
        let _ = write!(o, "<p>{}</p>", escape(&s));
    }
}

/// A grid whose column `path_col` holds paths: they break after a `/` only.
fn paths_grid(o: &mut String, t: &sections::Grid, path_col: usize) {
    o.push_str("<table class=\"text\"><thead><tr>");
    for h in &t.head {
        let _ = write!(o, "<th>{}</th>", escape(h));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in &t.rows {
        o.push_str("<tr>");
        for (k, c) in r.iter().enumerate() {
            if k == path_col {
                let _ = write!(o, "<td class=\"path\">{}</td>", crate::text::path_html(c));
            } else {
                let _ = write!(o, "<td>{}</td>", escape(c));
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table>\n");
}

/// The Test Result Summary: reliability, then the performance of each server.
pub(super) fn test_result_summary(o: &mut String, doc: &SolutionDocument, outline: &[Part]) {
    heading(o, outline, "test-result-summary");
    let _ = write!(o, "<p>{}</p>", escape(sections::SUMMARY_INTRO));
    heading(o, outline, "reliability");
    let _ = write!(o, "<p>{}</p>", escape(&sections::reliability_intro(doc)));
    o.push_str("<p>The following list provides an overview:</p><ul class=\"answers\">");
    for (q, a) in sections::reliability_overview(doc) {
        let _ = write!(o, "<li>{} <strong>{}</strong></li>", escape(&q), escape(&a));
    }
    o.push_str("</ul><div class=\"prose\">");
    for p in reliability(doc) {
        let _ = write!(o, "<p>{}</p>", escape(&p));
    }
    o.push_str("</div>\n");
    heading(o, outline, "performance-results");
    let _ = write!(o, "<p>{}</p>", escape(&sections::performance_intro(doc)));
    if let Some(h) = deployment::headroom(doc, TestType::Performance) {
        let _ = write!(o, "<p>{}.</p>", escape(&h.sentence()));
    }
    heading(o, outline, "individual-metrics");
    let _ = write!(o, "<p>{}</p>", escape(sections::INDIVIDUAL_METRICS_INTRO));
    let servers = figures(doc);
    for s in &servers {
        performance_table(o, s, &format!("Server {}", s.host));
    }
    if servers.len() > 1 {
        heading(o, outline, "aggregate-performance");
        o.push_str("<p class=\"note\">Aggregate Performance across all servers: rates are summed over the servers; latencies are averaged over them.</p>");
        performance_table(o, &aggregate_figures(&servers), "All servers");
    }
}

/// Database Backup/Recovery Performance with its two subsections.
pub(super) fn backup_recovery(o: &mut String, doc: &SolutionDocument, outline: &[Part]) {
    let servers = figures(doc);
    heading(o, outline, "backup-recovery");
    let _ = write!(o, "<p>{}</p>", escape(sections::BACKUP_RECOVERY_INTRO));
    heading(o, outline, "read-only");
    let _ = write!(o, "<p>{}</p>", escape(sections::READ_ONLY_INTRO));
    grid(o, &sections::backup_table(&servers));
    heading(o, outline, "log-replay");
    let _ = write!(o, "<p>{}</p>", escape(&sections::log_replay_intro(doc)));
    grid(o, &sections::recovery_table(&servers));
}

fn performance_table(o: &mut String, s: &ServerFigures, caption: &str) {
    let _ = write!(
        o,
        "<table class=\"perf\"><caption>{}</caption><tbody>",
        escape(caption)
    );
    let mut group = "";
    for (g, name, value) in sections::performance_rows(s) {
        if g != group {
            group = g;
            let _ = write!(
                o,
                "<tr class=\"group\"><th colspan=\"2\">{}</th></tr>",
                escape(g)
            );
        }
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(name),
            escape(&value)
        );
    }
    o.push_str("</tbody></table>\n");
}

/// Appendices A to E: each server's report of the step, as the ESRP documents lay
/// them out (the Jetstress report's sections, then its test log).
pub(super) fn appendices(o: &mut String, doc: &SolutionDocument, outline: &[Part]) {
    for part in outline {
        let Some((_, test)) = part.appendix else {
            continue;
        };
        heading(o, outline, part.id);
        let runs = doc.runs(test.unwrap_or(TestType::Stress));
        if runs.is_empty() {
            o.push_str("<p class=\"note\">No run of this step was found.</p>");
        }
        for r in runs {
            let _ = write!(
                o,
                "<div class=\"appendix-run\"><h3>Server {} — edbstress {}</h3><p class=\"note\">Run directory: <span class=\"path\">{}</span></p>",
                escape(&r.host),
                escape(&match test {
                    Some(t) => report_title(t),
                    None => "Checksum Statistics".into(),
                }),
                crate::text::path_html(&r.source)
            );
            match test {
                Some(_) => {
                    o.push_str(&appendix_sections(&r.results));
                    test_log(o, doc, &r.source);
                }
                None if r.results.verification.is_some() => {
                    o.push_str(&checksum_section(&r.results))
                }
                None => o.push_str(
                    "<p class=\"note\">This Stress run has no checksum verification.</p>",
                ),
            }
            o.push_str("</div>\n");
        }
    }
}

/// A run's test log, as the appendices of the ESRP documents end.
fn test_log(o: &mut String, doc: &SolutionDocument, source: &str) {
    o.push_str("<h3>Test Log</h3>");
    match doc.test_logs.get(source) {
        Some(lines) if !lines.is_empty() => {
            o.push_str("<pre class=\"log\">");
            for l in lines {
                o.push_str(&escape(l));
                o.push('\n');
            }
            o.push_str("</pre>\n");
        }
        Some(_) => o.push_str("<p class=\"note\">test.log is empty.</p>"),
        None => o.push_str("<p class=\"note\">test.log was not found in the run directory.</p>"),
    }
}
