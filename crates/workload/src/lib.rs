//! The tests users run: Performance, Stress, DatabaseBackup and SoftRecovery, with
//! Jetstress's rules. It owns the run configuration and the version profiles, the
//! transaction generator (operation mix, lazy commits), the open- and closed-loop
//! schedulers, the background activities of a run (background database maintenance,
//! log replication readers), counter sampling (engine, I/O, host), the kernel-log
//! watch on the devices under test and what Linux says about them, the pass/fail
//! criteria (per instance, or per volume as Jetstress 2007 judged), auto-tuning, the
//! run directory with its test log (with progress lines at an interval, for runs
//! without a terminal), and the live counters a run publishes while it
//! goes (OpenMetrics text, for a scraper).
//!
//! It drives the engine through its public API (`Instance`, `prepare`, `recover`,
//! `verify`) and never encodes pages or log records itself; it builds the results model
//! of `edbstress-report` and leaves presentation to it; it never prints (the CLI shows
//! progress from the events it reports).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// What other crates use by path: the run's settings and the units they are written in,
// running a test, its live counters, and the background activities and offline tests
// the workload's own integration tests drive one by one.
pub mod backup;
pub mod bdm;
pub mod config;
pub mod live;
pub mod profile;
pub mod replication;
pub mod runner;
pub mod soft_recovery;
pub mod transaction;
pub mod units;

// Internals of a run.
mod autotune;
mod criteria;
mod fit;
mod host;
mod measured_growth;
mod per_instance;
mod progress;
mod run_results;
mod rundir;
mod schedule;
mod stop;
mod transactional;
mod volumes;

// The curated surface: what the command line and the solution level call.
pub use autotune::AutoTuneOptions;
pub use host::host_info;
pub use live::{LiveCounters, LiveStatus};
pub use rundir::RunDirError;
pub use runner::{INTERRUPTED, RunEvent, RunOutcome, empty_results, run};

/// Why a run could not be carried out (a failed test is not an error: it is a result).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
    /// Creating or reusing databases failed.
    #[error("preparing databases failed: {0}")]
    Prepare(String),
    /// The engine refused or failed.
    #[error("cannot {what}: {message}")]
    Engine {
        /// What was being done.
        what: String,
        /// The engine's message.
        message: String,
    },
    /// A database is damaged (truncated, or no valid header copy): the run fails
    /// before it starts, and says which file and what to do.
    #[error("{0}")]
    Damaged(String),
    /// Verification after the run could not be carried out.
    #[error("checksum verification failed to run: {0}")]
    Verify(String),
    /// The run directory.
    #[error(transparent)]
    RunDir(#[from] rundir::RunDirError),
    /// Writing a result file.
    #[error(transparent)]
    Export(#[from] edbstress_report::ExportError),
}
