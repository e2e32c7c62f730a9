//! Errors of the transactional engine.

use edbstress_format::Generation;
use edbstress_format::Pgno;
use std::path::{Path, PathBuf};

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
        pgno: Pgno,
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
    /// The log ends before a generation the database records as holding durable data:
    /// the storage lost log files (or their content) after acknowledging writes to
    /// them, so committed transactions are missing.
    #[error(
        "lost log: {what}; the storage lost log writes it had acknowledged, so committed transactions in generation {generation:#x} ({}) and after are missing. Restore the log files from a backup, or start over with `edbstress prepare --recreate`",
        file.display()
    )]
    LostLog {
        /// The log file that is missing or holds no data.
        file: PathBuf,
        /// The generation the database requires.
        generation: Generation,
        /// What was found.
        what: String,
    },
    /// Recovery found a page older than the log says it must be.
    #[error(
        "lost flush: page {pgno} has dbtime {page_dbtime}, but the log record at {position} expects {expected}; the storage acknowledged a write it did not keep"
    )]
    LostFlush {
        /// The page.
        pgno: Pgno,
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
    Locked(#[from] crate::runtime::lock::LockError),
    /// An invalid argument or configuration.
    #[error("{0}")]
    Invalid(String),
    /// A database file is damaged as a whole (truncated, or no header copy valid): an
    /// integrity problem, not a usage error. The message names the file and the fix.
    #[error("{0}")]
    Damaged(String),
    /// A filesystem filled up (ENOSPC) while the engine wrote one of its files.
    #[error(transparent)]
    NoSpace(Box<NoSpaceError>),
    /// A database file would have grown past the growth limit it was given
    /// ([`crate::GrowthAllowance`]); nothing was written.
    #[error(transparent)]
    GrowthLimit(#[from] crate::GrowthLimitReached),
}

/// Where a filesystem filled up, what needed how much, and how much was left.
#[derive(Debug, thiserror::Error)]
#[error(
    "the {place} {} is full: {action} needs {}, {} ({}); {fix}",
    dir.display(),
    edbstress_io::ByteSize(*needed).approx(),
    available.map_or_else(|| "free space unknown".to_string(), |a| format!("{} available", edbstress_io::ByteSize(a).approx())),
    os_reason(source)
)]
pub struct NoSpaceError {
    /// What the directory holds: "log directory", "database directory".
    pub place: &'static str,
    /// The directory.
    pub dir: PathBuf,
    /// What was being done: "creating log file E00tmp.log".
    pub action: String,
    /// Bytes that needed.
    pub needed: u64,
    /// Bytes available on the filesystem right after the failure, when known.
    pub available: Option<u64>,
    /// What to do about it.
    pub fix: &'static str,
    /// The I/O layer's error (an [`IoError::Full`]).
    #[source]
    pub source: IoError,
}

/// The operating system's words for an I/O error ("No space left on device (os error
/// 28)"), or the whole message for errors without one.
fn os_reason(e: &IoError) -> String {
    match e {
        IoError::Full { source, .. } | IoError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

impl EngineError {
    /// Whether the error is evidence about the data — damaged pages, logs or files, a
    /// lost write, files of another database where this one's should be — rather than
    /// a usage, configuration or environment problem: verifying commands report these
    /// with exit code 1.
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            EngineError::CorruptPage { .. }
                | EngineError::CorruptLog { .. }
                | EngineError::LostLog { .. }
                | EngineError::LostFlush { .. }
                | EngineError::Mismatch { .. }
                | EngineError::Damaged(_)
        )
    }

    /// This error, or when it is a full filesystem ([`IoError::Full`]), an
    /// [`EngineError::NoSpace`] saying in which `place` (`dir`) `action` needed `needed`
    /// bytes, and `fix`.
    pub(crate) fn in_full_dir(
        self,
        place: &'static str,
        dir: &Path,
        action: impl FnOnce() -> String,
        needed: u64,
        fix: &'static str,
    ) -> EngineError {
        let EngineError::Io(source) = self else {
            return self;
        };
        let IoError::Full { available, .. } = &source else {
            return EngineError::Io(source);
        };
        EngineError::NoSpace(Box::new(NoSpaceError {
            place,
            dir: dir.to_path_buf(),
            action: action(),
            needed,
            available: *available,
            fix,
            source,
        }))
    }
}
