//! The tests users run: Performance, Stress, DatabaseBackup and SoftRecovery, with
//! Jetstress's rules. It owns the run configuration and the version profiles, the
//! transaction generator (operation mix, lazy commits), the open- and closed-loop
//! schedulers, the background activities of a run (background database maintenance,
//! log replication readers), counter sampling (engine, I/O, host), the pass/fail
//! criteria, auto-tuning, and the run directory with its test log.
//!
//! It drives the engine through its public API (`Instance`, `prepare`, `recover`,
//! `verify`) and never encodes pages or log records itself; it builds the results model
//! of `edbstress-report` and leaves presentation to it; it never prints (the CLI shows
//! progress from the events it reports).

pub mod autotune;
pub mod backup;
pub mod bdm;
pub mod config;
pub mod criteria;
pub mod host;
pub mod profile;
pub mod replication;
pub mod rundir;
pub mod runner;
pub mod schedule;
pub mod soft_recovery;
pub mod transaction;

        /// The engine's message.
        /// What was being done.
        message: String,
        what: String,
    #[error("cannot {what}: {message}")]
    #[error("checksum verification failed to run: {0}")]
    #[error("preparing databases failed: {0}")]
    #[error("{0}")]
    #[error(transparent)]
    /// Creating or reusing databases failed.
    /// The configuration cannot work.
    /// The engine refused or failed.
    /// The run directory.
    /// Verification after the run could not be carried out.
    /// Writing a result file.
    Config(String),
    Engine {
    Export(#[from] edbstress_report::ExportError),
    Prepare(String),
    RunDir(#[from] rundir::RunDirError),
    Verify(String),
    },
#[derive(Debug, thiserror::Error)]
/// Why a run could not be carried out (a failed test is not an error: it is a result).
pub enum RunError {
pub mod transactional;
pub mod units;
}
