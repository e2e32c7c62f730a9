//! Page numbers for the contents, and dates as the title page writes them. Chromium
//! prints the document but does not support CSS `target-counter()`, so the document
//! is printed once, its text read back page by page (`pdftotext`, pages separated by
//! form feeds), the page of each section's heading found, and the document printed
//! again with those numbers; the contents keep the same lines either way, so the
//! numbers stay true.

use std::collections::BTreeMap;

/// Where each heading is: the first page after the contents whose text has a line
/// starting with the heading. `headings` are (section id, heading text as printed);
/// `pdf_text` is `pdftotext -layout` output. Pages count from 1.
pub fn find_pages(pdf_text: &str, headings: &[(String, String)]) -> BTreeMap<String, u32> {
    let pages: Vec<Vec<String>> = pdf_text
        .split('\u{c}')
        .map(|p| p.lines().map(normalize).collect())
        .collect();
    let starts = |page: &[String], heading: &str| page.iter().any(|l| l.starts_with(heading));
    // The contents list every heading; the sections come after its last entry.
    let after_contents = headings
        .last()
        .and_then(|(_, last)| {
            let last = normalize(last);
            pages.iter().position(|p| starts(p, &last))
        })
        .map_or(0, |k| k + 1);
    let mut out = BTreeMap::new();
    let mut from = after_contents;
    for (id, heading) in headings {
        let h = normalize(heading);
        if let Some(k) = (from..pages.len()).find(|&k| starts(&pages[k], &h)) {
            out.insert(id.clone(), k as u32 + 1);
            // Sections are in order: the next one is on this page or a later one.
            from = k;
        }
    }
    out
}

/// A line with its runs of white space made one space and no leading space.
fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// "2026-11-28T16:51:10+00:00" → "28 November 2026"; text that is not RFC 3339 as it
/// is.
pub fn human_date(rfc3339: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(rfc3339.trim()) {
        Ok(t) => t.format("%-d %B %Y").to_string(),
        Err(_) => rfc3339.to_string(),
    }
}

/// The span of the runs' dates: "28 November 2026", or "27–28 November 2026", or
/// "30 November – 1 December 2026", or across years in full. None without dates.
pub fn date_span(stamps: &[&str]) -> Option<String> {
    let mut dates: Vec<chrono::NaiveDate> = stamps
        .iter()
        .filter_map(|s| chrono::DateTime::parse_from_rfc3339(s.trim()).ok())
        .map(|t| t.date_naive())
        .collect();
    dates.sort();
    let (first, last) = (*dates.first()?, *dates.last()?);
    use chrono::Datelike;
    Some(if first == last {
        first.format("%-d %B %Y").to_string()
    } else if (first.year(), first.month()) == (last.year(), last.month()) {
        format!("{}–{}", first.format("%-d"), last.format("%-d %B %Y"))
    } else if first.year() == last.year() {
        format!("{} – {}", first.format("%-d %B"), last.format("%-d %B %Y"))
    } else {
        format!(
            "{} – {}",
            first.format("%-d %B %Y"),
            last.format("%-d %B %Y")
        )
    })
}
