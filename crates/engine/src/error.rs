//! Errors of the transactional engine.

use std::path::PathBuf;

use edbstress_format::log::LogPosition;
use edbstress_io::IoError;

/// Why an engine operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// An I/O error (path, operation and offset are in the message).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A page read from the database failed verification.
    #[error("page {pgno} of {path} is damaged ({what}); run `edbstress checksum` on the database")]
    CorruptPage {
        /// The database file.
        path: PathBuf,
        /// The page.
        pgno: u32,
        /// What is wrong (bad checksum, wrong page number, uninitialized, bad structure).
        what: String,
    },
    /// The log is damaged before its end, or inconsistent.
    #[error("log damaged at {file} segment {segment}: {what}")]
    CorruptLog {
        /// The log file.
        file: PathBuf,
        /// Segment index within the file.
        segment: u32,
        /// What is wrong.
        what: String,
    },
    /// Recovery found a page older than the log says it must be.
    #[error(
        "lost flush: page {pgno} has dbtime {page_dbtime}, but the log record at {position} expects {expected}; the storage acknowledged a write it did not keep"
    )]
    LostFlush {
        /// The page.
        pgno: u32,
        /// dbtime found on the page.
        page_dbtime: u64,
        /// dbtime_before of the log record.
        expected: u64,
        /// Position of the record.
        position: LogPosition,
    },
    /// The database was not shut down cleanly.
    #[error("{path} was not shut down cleanly and needs recovery: run `edbstress recover`")]
    NeedsRecovery {
        /// The database file.
        path: PathBuf,
    },
    /// The database and its log directory do not belong together.
    #[error("{what}")]
    Mismatch {
        /// What does not match.
        what: String,
    },
    /// The engine is shutting down or was stopped after an earlier error.
    #[error("the instance is shut down{}", .0.as_ref().map(|e| format!(" after an earlier error: {e}")).unwrap_or_default())]
    ShutDown(Option<String>),
    /// Another edbstress process holds the database.
    #[error(transparent)]
    Locked(#[from] crate::lock::LockError),
    /// An invalid argument or configuration.
    #[error("{0}")]
    Invalid(String),
}
