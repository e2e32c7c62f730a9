//! Exporters: each writes one file of a run directory from the results.
//!
//! Every file is written under a temporary name in the same directory, synced, then
//! renamed over the final name, so an interrupted run never leaves half a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::model::RunResults;

mod csv_samples;
pub(crate) mod html;
mod json;
mod junit;
mod markdown;

pub use csv_samples::SamplesCsv;
pub use html::{HtmlReport, read_test_log};
pub use json::{ResultsJson, read_results};
pub use junit::{JUNIT_MARKER, JunitXml, render_junit};
pub use markdown::{MARKDOWN_MARKER, MarkdownSummary, md_cell, render_markdown};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Writing the file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The results directory's filesystem is full (ENOSPC).
    #[error(
        "the results directory {} is full: writing {} needs {}, {} ({source}); free space there or choose another --results-dir",
        dir.display(),
        file.display(),
        edbstress_io::ByteSize(*needed).approx(),
        available.map_or_else(|| "free space unknown".to_string(), |a| format!("{} available", edbstress_io::ByteSize(a).approx()))
    )]
    NoSpace {
        /// The directory.
        dir: PathBuf,
        /// The file's name.
        file: PathBuf,
        /// Bytes the file needs.
        needed: u64,
        /// Bytes available on the filesystem right after the failure, when known.
        available: Option<u64>,
        /// The error.
        source: std::io::Error,
    },
    /// Encoding the results failed.
    #[error("cannot encode {what}: {message}")]
    Encode {
        /// Which file.
        what: &'static str,
        /// The encoder's message.
        message: String,
    },
}

/// One output format of a run.
pub trait Exporter {
    /// File name in the run directory: "results.json".
    fn file_name(&self) -> &'static str;
    /// The file's bytes.
    fn render(&self, results: &RunResults) -> Result<Vec<u8>, ExportError>;

    /// Renders and writes the file into `dir` atomically; returns its path.
    fn export(&self, results: &RunResults, dir: &Path) -> Result<PathBuf, ExportError> {
        let bytes = self.render(results)?;
        let path = dir.join(self.file_name());
        write_atomically(&path, &bytes)?;
        Ok(path)
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
#[allow(clippy::disallowed_methods)] // results.json is a text file made durable before its rename, not data-file I/O
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ExportError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let io = |source: std::io::Error| {
        if source.kind() == std::io::ErrorKind::StorageFull {
            ExportError::NoSpace {
                dir: dir.to_path_buf(),
                file: PathBuf::from(path.file_name().unwrap_or_default()),
                needed: bytes.len() as u64,
                available: edbstress_io::available_space(dir).ok(),
                source,
            }
        } else {
            ExportError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    };
    // Result files are for sharing (a report for management, results for scripts):
    // created like any other file (0666 less the umask), not tempfile's private 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".edbstress-")
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(io)?;
    tmp.write_all(bytes).map_err(io)?;
    tmp.as_file().sync_data().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// The exporters of every run directory, in writing order (results.json last, so its
/// presence means the others are complete).
pub fn standard_exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(SamplesCsv),
        Box::new(HtmlReport::new()),
        Box::new(MarkdownSummary),
        Box::new(JunitXml),
        Box::new(ResultsJson),
    ]
}

/// Whether `bytes` are a file edbstress wrote (a report, summary, JUnit file, results
/// or comparison): only such files may be overwritten by `edbstress report` and
/// `edbstress compare`.
pub fn is_edbstress_output(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    text.contains("<meta name=\"generator\" content=\"edbstress\">")
        || text.starts_with(MARKDOWN_MARKER)
        || text.contains(JUNIT_MARKER)
        || (text.trim_start().starts_with('{')
            && (read_results(bytes).is_ok()
                || serde_json::from_slice::<crate::aggregate::AggregateResults>(bytes)
                    .is_ok_and(|a| a.kind == crate::aggregate::AGGREGATE_KIND)))
}
