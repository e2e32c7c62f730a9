//! `solution.html`: the solution document as one self-contained page laid out for
//! print (A4, a title page, numbered sections, page numbers in the margins), which
//! headless Chromium prints to `solution.pdf`. A rehearsal is marked in the running
//! header and across every page.

use std::fmt::Write;

use super::{
    Finding, ServerFigures, SolutionDocument, aggregate_figures, check, figures, reliability,
    sections, tested_profile,
};
use crate::export::html::{STYLE, appendix_sections, checksum_section, report_title};
use crate::model::TestType;
use crate::text::{escape, fixed3};

/// The document's own layout on top of the run report's stylesheet.
const SOLUTION_STYLE: &str = r#"
body.solution{max-width:1000px}
.title-page{min-height:240mm;display:flex;flex-direction:column;justify-content:center;border-left:10px solid #2B506E;padding-left:28px}
.title-page .kicker{font-size:15px;letter-spacing:2px;text-transform:uppercase;color:#2B506E;margin:0}
.title-page h1{font-size:34px;margin:12px 0 10px;line-height:1.15}
.title-page .vendor{font-size:20px;margin:0 0 28px}
.title-page table.kv{font-size:14px}
.title-page .status{margin-top:28px;font-size:15px;font-weight:700}
.title-page .status.ok{color:var(--pass)}
.title-page .status.bad{color:var(--fail)}
h2.part{font-size:22px;border-bottom:3px solid #2B506E}
nav.contents ol{list-style:none;padding-left:0;font-size:14px}
nav.contents li{margin:3px 0;border-bottom:1px dotted #bbb}
nav.contents li.sub{padding-left:24px;font-size:13px;border:none}
nav.contents a{color:#15324a;text-decoration:none}
.findings{border:3px solid var(--fail);background:#fdecea;padding:10px 18px;margin:14px 0;border-radius:4px}
.findings h2{border:none;color:var(--fail);margin-top:6px}
.findings li{margin:4px 0}
.prose p{margin:6px 0 10px;text-align:justify}
table.perf{min-width:520px}
table.perf caption{text-align:left;font-weight:600;padding:4px 0}
table.perf tr.group th{background:var(--head);text-align:left}
table.perf td:first-child{width:75%}
.appendix-run h2{font-size:16px;border-bottom:1px solid #2B506E;margin-top:18px}
.appendix-run{border-top:1px solid var(--line);margin-top:18px}
.rehearsal-mark{position:fixed;top:0;left:0;right:0;text-align:center;background:#B3261E;color:#fff;font-weight:700;font-size:12px;letter-spacing:1px;padding:3px 0;z-index:10}
.rehearsal-watermark{position:fixed;top:45%;left:0;right:0;text-align:center;font-size:120px;font-weight:800;color:rgba(179,38,30,.10);transform:rotate(-30deg);z-index:0;pointer-events:none}
body.rehearsal{padding-top:34px}
@page{size:A4;margin:16mm 14mm 16mm 14mm;@bottom-right{content:"Page " counter(page) " of " counter(pages);font-family:"DejaVu Sans",sans-serif;font-size:8pt;color:#555}@bottom-left{content:var(--doc-footer);font-family:"DejaVu Sans",sans-serif;font-size:8pt;color:#555}}
@media print{
 body.solution{font-size:10pt}
 .title-page{min-height:250mm;break-after:page}
 nav.contents{break-after:page}
 h2.newpage{break-before:page}
 .rehearsal-mark,.rehearsal-watermark,.findings{-webkit-print-color-adjust:exact;print-color-adjust:exact}
 body.rehearsal{padding-top:0}
 .rehearsal-mark{display:none}
}
"#;

/// A rehearsal's mark at the top of every printed page.
const REHEARSAL_PAGE_STYLE: &str = "@page{@top-center{content:\"REHEARSAL \\2014  shortened runs: not a result under the ESRP test rules\";color:#B3261E;font-family:\"DejaVu Sans\",sans-serif;font-weight:700;font-size:9pt}}";

/// The text repeated on every page of a rehearsal.
pub const REHEARSAL_MARK: &str =
    "REHEARSAL — shortened runs: not a result under the ESRP test rules";

/// The whole page.
pub fn render(doc: &SolutionDocument) -> String {
    let findings = check(doc);
    let rehearsal = doc.rehearsal();
    let info = &doc.info;
    let title = if info.name.trim().is_empty() {
        "Storage solution".to_string()
    } else {
        info.name.clone()
    };
    let mut o = String::with_capacity(256 * 1024);
    let footer = format!(
        "{}{}",
        title.replace('"', "'"),
        if rehearsal { " — REHEARSAL" } else { "" }
    );
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\
<meta name=\"generator\" content=\"edbstress {}\"><title>{}</title>\
<style>{STYLE}{SOLUTION_STYLE}:root{{--doc-footer:\"{}\"}}{}</style></head>\n<body class=\"solution{}\">\n",
        escape(&doc.tool_version),
        escape(&title),
        css_string(&footer),
        if rehearsal { REHEARSAL_PAGE_STYLE } else { "" },
        if rehearsal { " rehearsal" } else { "" }
    );
    if rehearsal {
        let _ = writeln!(
            o,
            "<div class=\"rehearsal-mark\">{}</div><div class=\"rehearsal-watermark\">REHEARSAL</div>",
            escape(REHEARSAL_MARK)
        );
    }
    title_page(&mut o, doc, &title, &findings);
    contents(&mut o, doc);
    let mut n = 0;
    let mut part = |o: &mut String, id: &str, name: &str| {
        n += 1;
        // The summary starts a page, as the appendices do; the texts flow.
        let class = if id == "test-result-summary" {
            "part newpage"
        } else {
            "part"
        };
        let _ = writeln!(
            o,
            "<h2 class=\"{class}\" id=\"{id}\">{n}. {}</h2>",
            escape(name)
        );
    };
    if !findings.is_empty() {
        findings_box(&mut o, &findings);
    }
    part(&mut o, "overview", "Overview");
    prose(&mut o, &sections::overview(doc));
    part(&mut o, "disclaimer", "Disclaimer");
    prose(&mut o, sections::DISCLAIMER);
    part(&mut o, "features", "Features");
    prose(&mut o, &info.features);
    part(&mut o, "solution-description", "Solution Description");
    prose(&mut o, &info.description);
    part(&mut o, "customer-profile", "Targeted Customer Profile");
    kv(&mut o, &sections::customer_profile(doc));
    part(&mut o, "tested-deployment", "Tested Deployment");
    h3(&mut o, "Simulated Exchange Configuration");
    kv(&mut o, &sections::simulated_configuration(doc));
    h3(&mut o, "Storage Hardware");
    kv(&mut o, &sections::storage_hardware(doc));
    h3(&mut o, "Storage Software");
    kv(&mut o, &sections::storage_software(doc));
    h3(&mut o, "Storage Disk Configuration");
    kv(&mut o, &sections::disk_configuration(doc));
    grid(&mut o, &sections::devices_table(doc));
    part(&mut o, "best-practices", "Best Practices");
    prose(&mut o, &info.best_practices);
    part(&mut o, "backup-strategy", "Backup Strategy");
    prose(&mut o, &info.backup_strategy);
    part(&mut o, "contact", "Contact");
    prose(&mut o, &info.contact);
    part(&mut o, "test-result-summary", "Test Result Summary");
    test_result_summary(&mut o, doc);
    part(&mut o, "conclusion", "Conclusion");
    prose(&mut o, &info.conclusion);
    if !findings.is_empty() {
        o.push_str(
            "<p><strong>This document does not meet the ESRP test rules; see the findings at its beginning.</strong></p>\n",
        );
    }
    appendices(&mut o, doc);
    o.push_str("</body></html>\n");
    o
}

/// Text for a CSS string in a style element: no quote, backslash or `<` breaks out.
fn css_string(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\22 ")
        .replace('<', "\\3C ")
        .replace('\n', " ")
}

fn title_page(o: &mut String, doc: &SolutionDocument, title: &str, findings: &[Finding]) {
    o.push_str("<section class=\"title-page\" id=\"title\">");
    let _ = write!(
        o,
        "<p class=\"kicker\">Exchange Solution Reviewed Program (ESRP) – Storage style report{}</p>\
<h1>{}</h1><p class=\"vendor\">{}</p>",
        if doc.rehearsal() { " · REHEARSAL" } else { "" },
        escape(title),
        escape(&doc.info.vendor)
    );
    let version = tested_profile(doc).map_or(doc.info.profile.version.clone(), |t| t.version);
    kv(
        o,
        &[
            ("Tested for".into(), sections::profile_sentence(doc)),
            ("Version profile".into(), version),
            (
                "Tested with".into(),
                format!("edbstress {}", doc.tool_version),
            ),
            ("Document written".into(), doc.written_at.clone()),
        ],
    );
    if findings.is_empty() {
        o.push_str("<p class=\"status ok\">Every step of the campaign ran on every server of the campaign, each run carries the campaign's id, and every run passed.</p>");
    } else {
        let _ = write!(
            o,
            "<p class=\"status bad\">Does not meet the ESRP test rules: {} finding(s), listed after the contents.</p>",
            findings.len()
        );
    }
    o.push_str("</section>\n");
}

fn contents(o: &mut String, doc: &SolutionDocument) {
    o.push_str("<nav class=\"contents\" id=\"contents\"><h2>Contents</h2><ol>");
    let mut entries: Vec<(&str, String, bool)> = vec![
        ("overview", "Overview".into(), false),
        ("disclaimer", "Disclaimer".into(), false),
        ("features", "Features".into(), false),
        ("solution-description", "Solution Description".into(), false),
        (
            "customer-profile",
            "Targeted Customer Profile".into(),
            false,
        ),
        ("tested-deployment", "Tested Deployment".into(), false),
        ("best-practices", "Best Practices".into(), false),
        ("backup-strategy", "Backup Strategy".into(), false),
        ("contact", "Contact".into(), false),
        ("test-result-summary", "Test Result Summary".into(), false),
        ("reliability", "Reliability".into(), true),
        (
            "performance-results",
            "Storage Performance Results".into(),
            true,
        ),
        (
            "backup-recovery",
            "Database Backup/Recovery Performance".into(),
            true,
        ),
        ("conclusion", "Conclusion".into(), false),
    ];
    let mut n = 0;
    for (id, name, sub) in entries.drain(..) {
        if sub {
            let _ = write!(
                o,
                "<li class=\"sub\"><a href=\"#{id}\">{}</a></li>",
                escape(&name)
            );
        } else {
            n += 1;
            let _ = write!(o, "<li><a href=\"#{id}\">{n}. {}</a></li>", escape(&name));
        }
    }
    for (letter, test) in sections::appendix_letters() {
        let _ = write!(
            o,
            "<li><a href=\"#appendix-{}\">Appendix {letter} — {}</a></li>",
            letter.to_ascii_lowercase(),
            escape(&sections::appendix_title(test, letter))
        );
    }
    let _ = doc;
    o.push_str("</ol></nav>\n");
}

fn findings_box(o: &mut String, findings: &[Finding]) {
    o.push_str(
        "<section class=\"findings\" id=\"findings\"><h2>Findings: this document does not meet the ESRP test rules</h2><ol>",
    );
    for f in findings {
        let _ = write!(o, "<li>{}</li>", escape(&f.0));
    }
    o.push_str("</ol></section>\n");
}

fn test_result_summary(o: &mut String, doc: &SolutionDocument) {
    o.push_str(
        "<p>The tables below are computed from the runs' results.json; Appendices A–E show each run's full results.</p>",
    );
    let _ = writeln!(o, "<h3 id=\"reliability\">Reliability</h3>");
    o.push_str("<div class=\"prose\">");
    for p in reliability(doc) {
        let _ = write!(o, "<p>{}</p>", escape(&p));
    }
    o.push_str("</div>\n");
    let servers = figures(doc);
    let _ = writeln!(
        o,
        "<h3 id=\"performance-results\">Storage Performance Results</h3>"
    );
    o.push_str("<p class=\"note\">From the Performance test of each server.</p>");
    o.push_str("<h3>Individual Server Metrics</h3>");
    for s in &servers {
        performance_table(o, s, &format!("Server {}", s.host));
    }
    if servers.len() > 1 {
        o.push_str("<h3>Aggregate Performance across all servers</h3>");
        o.push_str("<p class=\"note\">Rates are summed over the servers; latencies are averaged over them.</p>");
        performance_table(o, &aggregate_figures(&servers), "All servers");
    }
    let _ = writeln!(
        o,
        "<h3 id=\"backup-recovery\">Database Backup/Recovery Performance</h3>"
    );
    grid(o, &sections::backup_table(&servers));
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

fn appendices(o: &mut String, doc: &SolutionDocument) {
    for (letter, test) in sections::appendix_letters() {
        let _ = writeln!(
            o,
            "<h2 class=\"part newpage\" id=\"appendix-{}\">Appendix {letter} — {}</h2>",
            letter.to_ascii_lowercase(),
            escape(&sections::appendix_title(test, letter))
        );
        let runs = doc.runs(test.unwrap_or(TestType::Stress));
        if runs.is_empty() {
            o.push_str("<p class=\"note\">No run of this step was found.</p>");
        }
        for r in runs {
            let _ = write!(
                o,
                "<div class=\"appendix-run\"><h3>Server {} — {}</h3><p class=\"note\">{}</p>",
                escape(&r.host),
                escape(&match test {
                    Some(t) => report_title(t),
                    None => "Checksum Statistics".into(),
                }),
                escape(&format!("Run directory: {}", r.source))
            );
            match test {
                Some(_) => o.push_str(&appendix_sections(&r.results)),
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

fn h3(o: &mut String, title: &str) {
    let _ = writeln!(o, "<h3>{}</h3>", escape(title));
}

fn kv(o: &mut String, rows: &[(String, String)]) {
    o.push_str("<table class=\"kv\"><tbody>\n");
    for (k, v) in rows {
        let v = if v.trim().is_empty() { "—" } else { v };
        let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    o.push_str("</tbody></table>\n");
}

fn grid(o: &mut String, t: &sections::Grid) {
    if t.rows.is_empty() {
        return;
    }
    o.push_str("<table><thead><tr>");
    for h in &t.head {
        let _ = write!(o, "<th>{}</th>", escape(h));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in &t.rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", escape(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table>\n");
}

/// What the document allows itself to load: nothing but its own inline styles and
/// `data:` images. Chromium obeys it while printing, so vendor text that slipped past
/// [`prose`] still fetches nothing.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'";

/// Whether a vendor link may stay a link: absolute http(s) and mailto URLs (as the
/// URL standard parses them, so `java\tscript:` or `JAVASCRIPT:` are seen for what
/// they are), and fragments within the document.
fn allowed_link(dest: &str) -> bool {
    if dest.starts_with('#') {
        return !dest.contains(':');
    }
    url::Url::parse(dest).is_ok_and(|u| matches!(u.scheme(), "http" | "https" | "mailto"))
}

/// The vendor's Markdown as HTML, inert: raw HTML in it is shown as text, a link other
/// than http(s) or mailto (`javascript:`, `data:`, `vbscript:`, `file:`) is shown as
/// its text, and an image is shown as its alternative text (the document loads nothing
/// from the network or the disk).
fn prose(o: &mut String, markdown: &str) {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};
    if markdown.trim().is_empty() {
        o.push_str("<p class=\"note\">(not given in solution.toml)</p>\n");
        return;
    }
    let mut dropped_link = false;
    let parser = Parser::new_ext(markdown, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
        Event::Start(Tag::Link { ref dest_url, .. }) if !allowed_link(dest_url) => {
            dropped_link = true;
            Event::Text(CowStr::Borrowed(""))
        }
        Event::End(TagEnd::Link) if dropped_link => {
            dropped_link = false;
            Event::Text(CowStr::Borrowed(""))
        }
        Event::Start(Tag::Image { .. }) => Event::Text(CowStr::Borrowed("[image not shown: ")),
        Event::End(TagEnd::Image) => Event::Text(CowStr::Borrowed("]")),
        e => e,
    });
    o.push_str("<div class=\"prose\">");
    html::push_html(o, parser);
    o.push_str("</div>\n");
}

/// A number as the summary tables show it (three decimals).
pub fn number(v: f64) -> String {
    fixed3(v)
}
