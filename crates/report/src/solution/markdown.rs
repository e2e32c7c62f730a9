//! `solution.md`: the solution document in Markdown, the same sections and figures as
//! the HTML; the appendices point to each run's own report.

use std::fmt::Write;

use super::html::REHEARSAL_MARK;
use super::pages::human_date;
use super::sections::{self, Grid};
use super::{SolutionDocument, aggregate_figures, check, deployment, figures, reliability};
use crate::export::md_cell;
use crate::model::TestType;

/// The whole Markdown document.
pub fn render(doc: &SolutionDocument) -> String {
    let findings = check(doc);
    let info = &doc.info;
    let outline = sections::outline(doc);
    let mut o = String::new();
    mark(&mut o, doc);
    let _ = writeln!(
        o,
        "# {}\n\n**{}** · {}tested {} with edbstress {} · written {}\n",
        if info.name.trim().is_empty() {
            "Storage solution"
        } else {
            &info.name
        },
        info.vendor,
        if info.author.trim().is_empty() {
            String::new()
        } else {
            format!("{} · ", info.author)
        },
        super::html::tested_date(doc),
        doc.tool_version,
        human_date(&doc.written_at)
    );
    if !findings.is_empty() {
        o.push_str("## Findings: this document does not meet the ESRP test rules\n\n");
        for f in &findings {
            let _ = writeln!(o, "- {}", f.0);
        }
        o.push('\n');
    }
    let h = |o: &mut String, id: &str| {
        let p = outline.iter().find(|p| p.id == id);
        if let Some(p) = p {
            if !p.sub {
                mark(o, doc);
            }
            let _ = writeln!(o, "{} {}\n", if p.sub { "###" } else { "##" }, p.heading);
        }
    };
    h(&mut o, "overview");
    let _ = writeln!(o, "{}\n", sections::overview(doc));
    h(&mut o, "disclaimer");
    let _ = writeln!(o, "{}\n", sections::DISCLAIMER);
    h(&mut o, "features");
    prose(&mut o, &info.features);
    h(&mut o, "solution-description");
    prose(&mut o, &info.description);
    h(&mut o, "dag-architecture");
    prose(&mut o, &info.deployment.topology);
    grid(&mut o, &deployment::layout_table(doc));
    h(&mut o, "customer-profile");
    kv(&mut o, &sections::customer_profile(doc));
    h(&mut o, "tested-deployment");
    for (id, rows) in [
        (
            "simulated-configuration",
            deployment::simulated_configuration(doc),
        ),
        ("storage-hardware", deployment::storage_hardware(doc)),
        ("storage-software", deployment::storage_software(doc)),
        ("disk-configuration", deployment::disk_configuration(doc)),
    ] {
        h(&mut o, id);
        kv(&mut o, &rows);
    }
    h(&mut o, "devices");
    grid(&mut o, &sections::devices_table(doc));
    for (id, text) in [
        ("best-practices", &info.best_practices),
        ("backup-strategy", &info.backup_strategy),
        ("contact", &info.contact),
    ] {
        h(&mut o, id);
        prose(&mut o, text);
    }
    h(&mut o, "test-result-summary");
    let _ = writeln!(o, "{}\n", sections::SUMMARY_INTRO);
    h(&mut o, "reliability");
    let _ = writeln!(o, "{}\n", sections::reliability_intro(doc));
    for (q, a) in sections::reliability_overview(doc) {
        let _ = writeln!(o, "- {q} **{a}**");
    }
    o.push('\n');
    for p in reliability(doc) {
        let _ = writeln!(o, "{p}\n");
    }
    h(&mut o, "performance-results");
    let _ = writeln!(o, "{}\n", sections::performance_intro(doc));
    h(&mut o, "individual-metrics");
    let servers = figures(doc);
    for s in &servers {
        let _ = writeln!(o, "Server {}:\n", s.host);
        perf(&mut o, s);
    }
    if servers.len() > 1 {
        h(&mut o, "aggregate-performance");
        o.push_str("Aggregate Performance across all servers: rates are summed over the servers; latencies are averaged over them.\n\n");
        perf(&mut o, &aggregate_figures(&servers));
    }
    h(&mut o, "backup-recovery");
    let _ = writeln!(o, "{}\n", sections::BACKUP_RECOVERY_INTRO);
    h(&mut o, "read-only");
    grid(&mut o, &sections::backup_table(&servers));
    h(&mut o, "log-replay");
    grid(&mut o, &sections::recovery_table(&servers));
    h(&mut o, "conclusion");
    prose(&mut o, &info.conclusion);
    appendices(&mut o, doc);
    o
}

fn mark(o: &mut String, doc: &SolutionDocument) {
    if doc.rehearsal() {
        let _ = writeln!(o, "> **{REHEARSAL_MARK}**\n");
    }
}

/// The appendices: each server's verdict and where its full report is.
fn appendices(o: &mut String, doc: &SolutionDocument) {
    for (letter, test) in sections::appendix_letters() {
        mark(o, doc);
        let _ = writeln!(o, "## {}\n", sections::appendix_heading(test, letter));
        for r in doc.runs(test.unwrap_or(TestType::Stress)) {
            let verdict =
                match test {
                    Some(_) => r.results.overall_result.label().to_string(),
                    None => r.results.verification.as_ref().map_or(
                        "no checksum verification".into(),
                        |v| {
                            if v.passed {
                                "all intact"
                            } else {
                                "damage found"
                            }
                            .into()
                        },
                    ),
                };
            let _ = writeln!(
                o,
                "- Server {}: {verdict} — `{}/{}`",
                md_cell(&r.host),
                r.source,
                crate::run_files::REPORT_HTML
            );
        }
        o.push('\n');
    }
}

fn prose(o: &mut String, text: &str) {
    if text.trim().is_empty() {
        o.push_str("_(not given in solution.toml)_\n\n");
    } else {
        let _ = writeln!(o, "{}\n", text.trim_end());
    }
}

fn kv(o: &mut String, rows: &[(String, String)]) {
    o.push_str("| | |\n|---|---|\n");
    for (k, v) in rows {
        let v = if v.trim().is_empty() { "—" } else { v };
        let _ = writeln!(o, "| {} | {} |", md_cell(k), md_cell(v));
    }
    o.push('\n');
}

fn perf(o: &mut String, s: &super::ServerFigures) {
    o.push_str("| | Metric | Value |\n|---|---|---:|\n");
    for (group, name, value) in sections::performance_rows(s) {
        let _ = writeln!(o, "| {group} | {name} | {value} |");
    }
    o.push('\n');
}

fn grid(o: &mut String, g: &Grid) {
    if g.rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "| {} |",
        g.head
            .iter()
            .map(|h| md_cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(o, "|{}", "---|".repeat(g.head.len()));
    for r in &g.rows {
        let _ = writeln!(
            o,
            "| {} |",
            r.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    o.push('\n');
}
