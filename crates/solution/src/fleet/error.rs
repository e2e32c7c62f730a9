//! Why a fleet could not run: nothing was started, or nothing could be aggregated.

use std::path::PathBuf;

use edbstress_report::ExportError;
use edbstress_report::aggregate::AggregateError;

use super::{HostCheckError, HostSpecError, RemoteError};

/// Why a fleet could not run (nothing was started, or nothing could be aggregated).
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No host was given.
    #[error("no host: give --host DEST for each host")]
    NoHost,
    /// The hosts as given are wrong.
    #[error(transparent)]
    Hosts(#[from] HostSpecError),
    /// A run option the fleet sets itself.
    #[error(
        "{0} is set by `fleet run` itself (one start time, each host's name, results \
         directory, mailbox share and the fleet's id); leave it out of the run options"
    )]
    ManagedFlag(String),
    /// The configuration file given twice.
    #[error(
        "the configuration file is given twice: to `fleet run --config` (shipped to every \
         host) and among the run options; give it once"
    )]
    ConfigTwice,
    /// The configuration file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The fleet directory holds files.
    #[error(
        "{} already holds files (an earlier fleet's?); a fleet writes into a new directory: \
         give another --output, or leave --output out for a new Fleet_TIME directory",
        .0.display()
    )]
    OutputInUse(PathBuf),
    /// The fleet directory (or a file in it) could not be made.
    #[error("cannot create {}: {source}", path.display())]
    CreateOutput {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The fleet directory cannot be used.
    #[error("cannot use {}: {source}", path.display())]
    UseOutput {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Some hosts failed their checks.
    #[error("not every host is ready; nothing was started:\n  {}", lines(.0))]
    NotReady(Vec<HostCheckError>),
    /// A host's fleet directory could not be made.
    #[error("{0}; nothing was started")]
    FleetDir(RemoteError),
    /// A host's run line could not be written.
    #[error("{0}")]
    RunLine(RemoteError),
    /// ssh could not be started for a host.
    #[error("cannot start ssh for {host}: {source}")]
    Spawn {
        /// The host.
        host: String,
        /// Why.
        source: std::io::Error,
    },
    /// The collected runs could not be aggregated.
    #[error(
        "the runs could not be aggregated: {source}\n  {}\n(each host's run directory is under {})",
        .missing.join("\n  "),
        .hosts_dir.display()
    )]
    Aggregate {
        /// Why.
        source: AggregateError,
        /// Each missing host with why.
        missing: Vec<String>,
        /// Where the hosts' directories are.
        hosts_dir: PathBuf,
    },
    /// The aggregate could not be written.
    #[error("{0}")]
    Write(#[from] ExportError),
}

fn lines(problems: &[HostCheckError]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n  ")
}
