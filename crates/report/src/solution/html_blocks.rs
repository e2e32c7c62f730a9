//! The solution document's HTML building blocks: headings from the outline, tables
//! and the vendor's Markdown made inert; the document's pages (html.rs) and sections
//! (html_parts.rs) are written with them.

use std::fmt::Write;

use super::sections::{self, Part};
use crate::text::escape;

/// The heading of outline part `id`: a numbered section starts a level-2 heading, a
/// subsection a level-3 one; the summary and the appendices start a page.
pub(super) fn heading(o: &mut String, outline: &[Part], id: &str) {
    let Some(p) = outline.iter().find(|p| p.id == id) else {
        return;
    };
    let newpage = id == "test-result-summary" || p.appendix.is_some();
    if p.sub {
        let _ = writeln!(o, "<h3 id=\"{id}\">{}</h3>", escape(&p.heading));
    } else {
        let _ = writeln!(
            o,
            "<h2 class=\"part{}\" id=\"{id}\">{}</h2>",
            if newpage { " newpage" } else { "" },
            escape(&p.heading)
        );
    }
}

/// A table of names and values.
pub(super) fn kv(o: &mut String, rows: &[(String, String)]) {
    o.push_str("<table class=\"kv\"><tbody>\n");
    for (k, v) in rows {
        let v = if v.trim().is_empty() { "—" } else { v };
        let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    o.push_str("</tbody></table>\n");
}

/// A table of figures (numbers right-aligned).
pub(super) fn grid(o: &mut String, t: &sections::Grid) {
    table(o, t, "");
}

/// A table of words (every cell left-aligned).
pub(super) fn text_grid(o: &mut String, t: &sections::Grid) {
    table(o, t, " class=\"text\"");
}

fn table(o: &mut String, t: &sections::Grid, class: &str) {
    if t.rows.is_empty() {
        return;
    }
    let _ = write!(o, "<table{class}><thead><tr>");
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
pub(super) fn prose(o: &mut String, markdown: &str) {
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
