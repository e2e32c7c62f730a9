//! Lines that tell history instead of describing the present: issue numbers, numbered
//! parts of a piece of work, dated diary entries.

use std::sync::LazyLock;

use regex::Regex;

use crate::{Finding, Rule};

/// The word "issue" and a number, with or without `#`.
static ISSUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bissues?\s*#?\s*\d+").expect("valid pattern"));

/// "part" and a number, or an ordinal and "part".
static PART: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\bparts?\s*\d+|\b(second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth) part\b",
    )
    .expect("valid pattern")
});

/// A calendar date; a date followed by a time of day is a timestamp (an example of a
/// format, a test's fixture) and is allowed.
static DATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b20\d\d-[01]\d-[0-3]\d\b").expect("valid pattern"));
static TIME_OF_DAY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[T ]\d\d:\d\d").expect("valid pattern"));

/// A diary entry's time of day in brackets.
static DIARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\((morning|afternoon|evening|night)\)").expect("valid pattern")
});

/// Every history marker in `text`, one finding per marker with its line.
pub fn history_markers(path: &str, text: &str) -> Vec<Finding> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let mut markers: Vec<&str> = Vec::new();
        for pattern in [&*ISSUE, &*PART, &*DIARY] {
            markers.extend(pattern.find_iter(line).map(|m| m.as_str()));
        }
        markers.extend(
            DATE.find_iter(line)
                .filter(|m| !TIME_OF_DAY.is_match(&line[m.end()..]))
                .map(|m| m.as_str()),
        );
        found.extend(markers.into_iter().map(|marker| Finding {
            rule: Rule::HistoryMarker,
            path: path.to_string(),
            line: index + 1,
            item: marker.to_string(),
        }));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn markers(text: &str) -> Vec<String> {
        history_markers("x.md", text)
            .into_iter()
            .map(|f| format!("{}:{}", f.line, f.item))
            .collect()
    }

    // The examples are assembled at run time so that this file does not name history
    // itself.
    #[test]
    fn issue_numbers_parts_and_diary_entries_are_found() {
        let (issue, part, date) = ("Issue", "part", format!("{}-11-21", 2026));
        let text = format!(
            "## {issue} 18, seventh {part} ({})\nsee {issue}s #4 and {part} 3\nwritten {date}.\n",
            "morning"
        );
        let expected = [
            format!("1:{issue} 18"),
            format!("1:seventh {part}"),
            format!("1:({})", "morning"),
            format!("2:{issue}s #4"),
            format!("2:{part} 3"),
            format!("3:{date}"),
        ];
        assert_eq!(markers(&text), expected);
    }

    #[test]
    fn timestamps_and_ordinary_words_are_not_history() {
        let text = "An RFC 3339 time such as 2026-11-25T14:00:00Z or 2026-11-21 14:05:09.\n\
                    Split the file in two parts; the issue is the page size; a part of it.\n";
        assert!(markers(text).is_empty(), "{:?}", markers(text));
    }
}
