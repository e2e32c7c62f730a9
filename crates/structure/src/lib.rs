//! Checks that keep the source tree in the shape the project's standards ask for: no
//! source file over 1,000 lines, no function over 150 lines, no line in `crates/` or
//! `docs/` that names an issue number, a numbered "part" or a dated diary entry (the
//! changelog excepted), and no import circle between the files of a crate.
//!
//! It reads source text only (with `syn` for functions and `use` items) and is a
//! development tool: no other crate depends on it, and its integration test runs the
//! checks over the workspace. It must not depend on the project's crates.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod circles;
mod history;
mod lengths;

use std::fmt;
use std::path::{Path, PathBuf};

pub use circles::import_circles;
pub use history::history_markers;
pub use lengths::{long_file, long_functions};

/// The most lines a source file may have.
pub const MAX_FILE_LINES: usize = 1_000;
/// The most lines a function may have, from `fn` to its closing brace.
pub const MAX_FUNCTION_LINES: usize = 150;

/// What a finding breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// A source file longer than [`MAX_FILE_LINES`].
    LongFile {
        /// Its line count.
        lines: usize,
    },
    /// A function longer than [`MAX_FUNCTION_LINES`].
    LongFunction {
        /// Its line count.
        lines: usize,
    },
    /// A line naming an issue number, a numbered part or a dated diary entry.
    HistoryMarker,
    /// Files of one crate that import each other in a circle.
    ImportCircle,
}

/// One place in the tree that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule broken.
    pub rule: Rule,
    /// The file, relative to the workspace root (`/` separated).
    pub path: String,
    /// The line (1-based) where it starts; 0 when the finding is about the whole file.
    pub line: usize,
    /// What it is: `fn Type::name`, the marker's text, or the circle's files.
    pub item: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Rule::LongFile { lines } => write!(
                f,
                "{}: {lines} lines (at most {MAX_FILE_LINES}): split it by responsibility",
                self.path
            ),
            Rule::LongFunction { lines } => write!(
                f,
                "{}:{}: {} is {lines} lines (at most {MAX_FUNCTION_LINES}): split it by phase",
                self.path, self.line, self.item
            ),
            Rule::HistoryMarker => write!(
                f,
                "{}:{}: \"{}\" names history (an issue, a part or a date): say what is, \
                 git keeps the past",
                self.path, self.line, self.item
            ),
            Rule::ImportCircle => write!(
                f,
                "{}: import circle {}: move the misplaced helper",
                self.path, self.item
            ),
        }
    }
}

/// Runs every check over the workspace at `root`: `.rs` files under `crates/*/src`,
/// `crates/*/tests`, `crates/*/benches` and `crates/*/examples` for lengths, every text
/// file under `crates/` and `docs/` for history markers, each crate's `src` for circles.
///
/// Returns the findings, or an error naming a file that cannot be read or parsed.
pub fn check_tree(root: &Path) -> Result<Vec<Finding>, TreeError> {
    let mut findings = Vec::new();
    let crates_dir = root.join("crates");
    let mut crate_dirs = list_dir(&crates_dir)?;
    crate_dirs.retain(|p| p.is_dir());
    for crate_dir in &crate_dirs {
        for part in ["src", "tests", "benches", "examples"] {
            for file in files_under(&crate_dir.join(part), &|p| has_ext(p, "rs"))? {
                let text = read(&file)?;
                let rel = relative(root, &file);
                findings.extend(long_file(&rel, &text, MAX_FILE_LINES));
                findings.extend(long_functions(&rel, &text, MAX_FUNCTION_LINES).map_err(
                    |source| TreeError::Parse {
                        path: rel.clone(),
                        source,
                    },
                )?);
            }
        }
        let src = crate_dir.join("src");
        let mut modules = Vec::new();
        for file in files_under(&src, &|p| has_ext(p, "rs"))? {
            let under_src = relative(&src, &file);
            // Each file under src/bin is a crate of its own; its imports are not the
            // library's.
            if under_src.starts_with("bin/") {
                continue;
            }
            modules.push((under_src, read(&file)?));
        }
        let crate_rel = relative(root, &src);
        findings.extend(import_circles(&crate_rel, &modules).map_err(|source| {
            TreeError::Parse {
                path: crate_rel.clone(),
                source,
            }
        })?);
    }
    for dir in [crates_dir, root.join("docs")] {
        for file in files_under(&dir, &is_text)? {
            if file.file_name().is_some_and(|n| n == "CHANGELOG.md") {
                continue;
            }
            let rel = relative(root, &file);
            findings.extend(history_markers(&rel, &read(&file)?));
        }
    }
    Ok(findings)
}

fn is_text(p: &Path) -> bool {
    [
        "rs", "md", "toml", "sh", "txt", "html", "css", "js", "json", "yml", "yaml",
    ]
    .iter()
    .any(|e| has_ext(p, e))
}

fn has_ext(p: &Path, ext: &str) -> bool {
    p.extension().is_some_and(|e| e == ext)
}

/// Why the tree could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A file or directory could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A Rust file does not parse.
    #[error("{path}: cannot parse: {source}")]
    Parse {
        /// The file (or, for circles, the crate's `src`).
        path: String,
        /// What the parser said.
        source: syn::Error,
    },
}

fn read(p: &Path) -> Result<String, TreeError> {
    std::fs::read_to_string(p).map_err(|source| TreeError::Read {
        path: p.to_path_buf(),
        source,
    })
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, TreeError> {
    let fail = |source| TreeError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(fail)? {
        out.push(entry.map_err(fail)?.path());
    }
    out.sort();
    Ok(out)
}

/// Files under `dir` (recursively, sorted) that `keep` accepts; none if `dir` is absent.
/// Build output (`target`) is skipped.
fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>, TreeError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for path in list_dir(dir)? {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            out.extend(files_under(&path, keep)?);
        } else if keep(&path) {
            out.push(path);
        }
    }
    Ok(out)
}

fn relative(base: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(base).unwrap_or(p);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}
