//! The run directory (`Performance_2026_11_21_14_05_09/`) and its Jetstress-style test
//! log.
//!
//! The directory is created new (never reused: a name already taken gets a `_2`
//! suffix). `test.log` is appended a line at a time and flushed, so an interrupted run
//! keeps every line written so far; the other files are written whole by the report
//! crate's exporters (temporary name, then rename).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Local};
use edbstress_report::TestType;
use parking_lot::Mutex;

/// Why the run directory could not be made or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {path}: {source} (choose another `results_dir`)")]
pub struct RunDirError {
    what: &'static str,
    path: PathBuf,
    source: std::io::Error,
}

/// A run's directory.
#[derive(Debug)]
pub struct RunDirectory {
    path: PathBuf,
}

impl RunDirectory {
    /// Creates `<results_dir>/<Test>_YYYY_MM_DD_HH_MM_SS` (and `results_dir` if needed).
    pub fn create(
        results_dir: &Path,
        test: TestType,
        at: DateTime<Local>,
    ) -> Result<RunDirectory, RunDirError> {
        std::fs::create_dir_all(results_dir).map_err(|source| RunDirError {
            what: "create the results directory",
            path: results_dir.to_path_buf(),
            source,
        })?;
        let base = format!("{}_{}", test.label(), at.format("%Y_%m_%d_%H_%M_%S"));
        for n in 1..1000 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}_{n}")
            };
            let path = results_dir.join(name);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(RunDirectory { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(source) => {
                    return Err(RunDirError {
                        what: "create the run directory",
                        path,
                        source,
                    });
                }
            }
        }
        Err(RunDirError {
            what: "find a free run directory name in",
            path: results_dir.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `test.log` for appending.
    pub fn test_log(&self) -> Result<TestLog<'static>, RunDirError> {
        let path = self.path.join(edbstress_report::run_files::TEST_LOG);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| RunDirError {
                what: "open",
                path: path.clone(),
                source,
            })?;
        Ok(TestLog {
            file: Mutex::new(Some(file)),
            lines: Mutex::new(Vec::new()),
            path,
            sink: None,
        })
    }
}

/// The timestamped phase log: `2026-11-21 14:05:09 -- Attaching databases ...`.
pub struct TestLog<'s> {
    file: Mutex<Option<File>>,
    lines: Mutex<Vec<String>>,
    path: PathBuf,
    sink: Option<&'s (dyn Fn(&str) + Sync)>,
}

impl<'s> TestLog<'s> {
    /// A log that keeps lines in memory only (tests).
    #[cfg(test)]
    pub fn in_memory() -> TestLog<'s> {
        TestLog {
            file: Mutex::new(None),
            lines: Mutex::new(Vec::new()),
            path: PathBuf::new(),
            sink: None,
        }
    }

    /// Also passes every line to `sink` (the CLI shows them).
    pub fn with_sink<'t>(self, sink: &'t (dyn Fn(&str) + Sync)) -> TestLog<'t> {
        TestLog {
            file: self.file,
            lines: self.lines,
            path: self.path,
            sink: Some(sink),
        }
    }

    /// Appends one line, stamped with the local time, and flushes it. A failing write
    /// is reported once through tracing and the line is still kept in memory: the log
    /// must never stop a run.
    pub fn line(&self, message: impl AsRef<str>) {
        let line = format!(
            "{} -- {}",
            Local::now().format("%Y-%m-%d %H:%M:%S"),
            message.as_ref()
        );
        let mut file = self.file.lock();
        if let Some(f) = file.as_mut() {
            if let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush()) {
                let space = match e.kind() {
                    std::io::ErrorKind::StorageFull => {
                        let available = self.path.parent().map(edbstress_io::available_space);
                        match available {
                            Some(Ok(a)) => format!(
                                " (the line needs {} B, {} available)",
                                line.len() + 1,
                                edbstress_io::ByteSize(a).approx()
                            ),
                            _ => String::new(),
                        }
                    }
                    _ => String::new(),
                };
                tracing::warn!(
                    "cannot write {}: {e}{space}; test log continues in memory",
                    self.path.display()
                );
                *file = None;
            }
        }
        drop(file);
        if let Some(sink) = &self.sink {
            sink(&line);
        }
        self.lines.lock().push(line);
    }

    /// Every line so far.
    #[cfg(test)]
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_jetstress_and_never_reuse_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let at = Local::now();
        let a = RunDirectory::create(tmp.path(), TestType::Performance, at).unwrap();
        let b = RunDirectory::create(tmp.path(), TestType::Performance, at).unwrap();
        let name = a.path().file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("Performance_20"), "{name}");
        assert_eq!(name.len(), "Performance_2026_11_21_14_05_09".len());
        assert_eq!(
            b.path().file_name().unwrap().to_str().unwrap(),
            format!("{name}_2")
        );
        let log = a.test_log().unwrap();
        log.line("Jetstress-style testing begins ...");
        log.line("second");
        let text =
            std::fs::read_to_string(a.path().join(edbstress_report::run_files::TEST_LOG)).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(" -- Jetstress-style testing begins ...")
        );
        assert_eq!(log.lines().len(), 2);
    }
}
