//! `solution.html`: the solution document as one self-contained page laid out for
//! print (A4, a title page, numbered sections, page numbers in the margins), which
//! headless Chromium prints to `solution.pdf`. A rehearsal is marked in the running
//! header and across every page.

use std::fmt::Write;

use super::html_blocks::{heading, kv, prose, text_grid};
use super::html_parts;
use super::pages::{date_span, human_date};
use super::sections::{self, Part};
use super::{Finding, SolutionDocument, check, tested_profile};
use crate::export::html::STYLE;
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
figure.topology{margin:12px 0 18px;break-inside:avoid}
figure.topology svg{max-width:100%;height:auto}
figure.topology figcaption{font-size:13px;color:#444;margin-top:4px}
nav.contents ol{list-style:none;padding-left:0;font-size:14px}
nav.contents li{margin:3px 0}
nav.contents li.sub{padding-left:24px;font-size:13px}
nav.contents a{color:#15324a;text-decoration:none;display:flex;align-items:baseline}
nav.contents .entry{flex:none}
nav.contents a::after{content:"";flex:1;order:1;border-bottom:1px dotted #888;margin:0 6px}
nav.contents .page{order:2;min-width:3em;text-align:right;font-variant-numeric:tabular-nums}
table.revisions td{text-align:left}
ul.answers{list-style:none;padding-left:0}
ul.answers li{margin:3px 0}
pre.log{font-size:8pt}
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
 body.solution table{break-inside:auto}
 body.solution tr{break-inside:avoid}
 body.solution thead{display:table-header-group}
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
    render_for(doc, true)
}

/// The page a word processor imports (through pandoc): without the printed contents,
/// whose page numbers belong to the PDF (a word processor makes its own), and without
/// the watermark (the rehearsal mark stays in the text).
pub fn render_editable(doc: &SolutionDocument) -> String {
    render_for(doc, false)
}

fn render_for(doc: &SolutionDocument, print: bool) -> String {
    let findings = check(doc);
    let outline = sections::outline(doc);
    let title = document_title(doc);
    let mut o = String::with_capacity(256 * 1024);
    head(&mut o, doc, &title, print);
    title_page(&mut o, doc, &title, &findings);
    if print {
        contents(&mut o, doc, &outline);
    }
    if !findings.is_empty() {
        findings_box(&mut o, &findings);
    }
    html_parts::front_sections(&mut o, doc, &outline, print);
    html_parts::test_result_summary(&mut o, doc, &outline);
    html_parts::backup_recovery(&mut o, doc, &outline);
    heading(&mut o, &outline, "conclusion");
    prose(&mut o, &doc.info.conclusion);
    if !findings.is_empty() {
        o.push_str(
            "<p><strong>This document does not meet the ESRP test rules; see the findings at its beginning.</strong></p>\n",
        );
    }
    html_parts::appendices(&mut o, doc, &outline);
    o.push_str("</body></html>\n");
    o
}

/// The solution's name, or a neutral title without one.
fn document_title(doc: &SolutionDocument) -> String {
    if doc.info.name.trim().is_empty() {
        "Storage solution".to_string()
    } else {
        doc.info.name.clone()
    }
}

/// The HTML head, the styles and the rehearsal marks.
fn head(o: &mut String, doc: &SolutionDocument, title: &str, print: bool) {
    let rehearsal = doc.rehearsal();
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
        escape(title),
        css_string(&footer),
        if rehearsal { REHEARSAL_PAGE_STYLE } else { "" },
        if rehearsal { " rehearsal" } else { "" }
    );
    if rehearsal {
        let _ = writeln!(
            o,
            "<div class=\"rehearsal-mark\">{}</div>{}",
            escape(REHEARSAL_MARK),
            if print {
                "<div class=\"rehearsal-watermark\">REHEARSAL</div>"
            } else {
                ""
            }
        );
    }
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
    let mut rows = vec![("Tested for".into(), sections::profile_sentence(doc))];
    if !doc.info.author.trim().is_empty() {
        rows.push(("Author".into(), doc.info.author.clone()));
    }
    rows.push(("Tested date".into(), tested_date(doc)));
    rows.push(("Version profile".into(), version));
    rows.push((
        "Tested with".into(),
        format!("edbstress {}", doc.tool_version),
    ));
    rows.push(("Document written".into(), human_date(&doc.written_at)));
    kv(o, &rows);
    revisions(o, doc);
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

/// solution.toml's tested date, else the dates the runs started.
pub fn tested_date(doc: &SolutionDocument) -> String {
    if !doc.info.tested_date.trim().is_empty() {
        return doc.info.tested_date.clone();
    }
    let stamps: Vec<&str> = super::STEPS
        .iter()
        .flat_map(|t| doc.runs(*t))
        .flat_map(|r| [r.results.started_at.as_str(), r.results.ended_at.as_str()])
        .collect();
    date_span(&stamps).unwrap_or_else(|| "— (no run was found)".into())
}

/// The revision table (the document's first revision when solution.toml lists none).
fn revisions(o: &mut String, doc: &SolutionDocument) {
    let mut g = sections::Grid {
        head: vec!["Date".into(), "Description".into()],
        rows: doc
            .info
            .revisions
            .iter()
            .map(|r| vec![r.date.clone(), r.description.clone()])
            .collect(),
    };
    if g.rows.is_empty() {
        g.rows.push(vec![
            human_date(&doc.written_at),
            "Initial release (written by edbstress; list revisions in solution.toml)".into(),
        ]);
    }
    o.push_str("<h3>Revisions</h3>");
    text_grid(o, &g);
}

/// The contents: every part of the outline with the page it starts on when the
/// document was printed before (see [`super::pages`]); without pages a blank of the
/// same width, so the contents take the same lines either way.
fn contents(o: &mut String, doc: &SolutionDocument, outline: &[Part]) {
    o.push_str("<nav class=\"contents\" id=\"contents\"><h2>Contents</h2><ol>");
    for p in outline {
        let page = doc
            .pages
            .get(p.id)
            .map_or("\u{a0}".to_string(), |n| n.to_string());
        let _ = write!(
            o,
            "<li{}><a href=\"#{}\"><span class=\"entry\">{}</span><span class=\"page\">{}</span></a></li>",
            if p.sub { " class=\"sub\"" } else { "" },
            p.id,
            escape(&p.heading),
            page
        );
    }
    o.push_str("</ol></nav>\n");
}

/// The headings the contents list, (id, heading), to find their pages in the
/// printed document.
pub fn contents_headings(doc: &SolutionDocument) -> Vec<(String, String)> {
    sections::outline(doc)
        .into_iter()
        .map(|p| (p.id.to_string(), p.heading))
        .collect()
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

/// What the document allows itself to load: nothing but its own inline styles and
/// `data:` images. Chromium obeys it while printing, so vendor text that slipped past
/// [`prose`] still fetches nothing.
pub const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'";

/// A number as the summary tables show it (three decimals).
pub fn number(v: f64) -> String {
    fixed3(v)
}
