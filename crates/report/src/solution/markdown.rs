//! `solution.md`: the solution document in Markdown, the same sections and figures as
//! the HTML; the appendices point to each run's own report.

use std::fmt::Write;

use super::html::REHEARSAL_MARK;
use super::sections::{self, Grid};
use super::{SolutionDocument, aggregate_figures, check, figures, reliability};
use crate::export::md_cell;
use crate::model::TestType;

/// The whole Markdown document.
pub fn render(doc: &SolutionDocument) -> String {
    let findings = check(doc);
    let info = &doc.info;
    let mut o = String::new();
    let mark = |o: &mut String| {
        if doc.rehearsal() {
            let _ = writeln!(o, "> **{REHEARSAL_MARK}**\n");
        }
    };
    mark(&mut o);
    let _ = writeln!(
        o,
        "# {}\n\n**{}** · tested with edbstress {} · written {}\n",
        if info.name.trim().is_empty() {
            "Storage solution"
        } else {
            &info.name
        },
        info.vendor,
        doc.tool_version,
        doc.written_at
    );
    if !findings.is_empty() {
        o.push_str("## Findings: this document does not meet the ESRP test rules\n\n");
        for f in &findings {
            let _ = writeln!(o, "- {}", f.0);
        }
        o.push('\n');
    }
    let mut n = 0;
    let mut part = |o: &mut String, name: &str| {
        n += 1;
        mark(o);
        let _ = writeln!(o, "## {n}. {name}\n");
    };
    part(&mut o, "Overview");
    let _ = writeln!(o, "{}\n", sections::overview(doc));
    part(&mut o, "Disclaimer");
    let _ = writeln!(o, "{}\n", sections::DISCLAIMER);
    for (name, text) in [
        ("Features", &info.features),
        ("Solution Description", &info.description),
    ] {
        part(&mut o, name);
        prose(&mut o, text);
    }
    part(&mut o, "Targeted Customer Profile");
    kv(&mut o, &sections::customer_profile(doc));
    part(&mut o, "Tested Deployment");
    o.push_str("### Simulated Exchange Configuration\n\n");
    kv(&mut o, &sections::simulated_configuration(doc));
    o.push_str("### Storage Hardware\n\n");
    kv(&mut o, &sections::storage_hardware(doc));
    o.push_str("### Storage Software\n\n");
    kv(&mut o, &sections::storage_software(doc));
    o.push_str("### Storage Disk Configuration\n\n");
    kv(&mut o, &sections::disk_configuration(doc));
    grid(&mut o, &sections::devices_table(doc));
    for (name, text) in [
        ("Best Practices", &info.best_practices),
        ("Backup Strategy", &info.backup_strategy),
        ("Contact", &info.contact),
    ] {
        part(&mut o, name);
        prose(&mut o, text);
    }
    part(&mut o, "Test Result Summary");
    o.push_str("### Reliability\n\n");
    for p in reliability(doc) {
        let _ = writeln!(o, "{p}\n");
    }
    o.push_str("### Storage Performance Results\n\n#### Individual Server Metrics\n\n");
    let servers = figures(doc);
    for s in &servers {
        let _ = writeln!(o, "Server {}:\n", s.host);
        perf(&mut o, s);
    }
    if servers.len() > 1 {
        o.push_str("#### Aggregate Performance across all servers\n\n");
        o.push_str("Rates are summed over the servers; latencies are averaged over them.\n\n");
        perf(&mut o, &aggregate_figures(&servers));
    }
    o.push_str("### Database Backup/Recovery Performance\n\n");
    grid(&mut o, &sections::backup_table(&servers));
    grid(&mut o, &sections::recovery_table(&servers));
    part(&mut o, "Conclusion");
    prose(&mut o, &info.conclusion);
    for (letter, test) in sections::appendix_letters() {
        mark(&mut o);
        let _ = writeln!(
            o,
            "## Appendix {letter} — {}\n",
            sections::appendix_title(test, letter)
        );
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
    o
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
