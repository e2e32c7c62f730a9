//! The `[fleet]` table of a configuration file: the hosts and how to reach them, so one
//! file (shipped to every host) describes the whole solution test. A run on one host
//! ignores the table.
//!
//! ```toml
//! [fleet]
//! mailboxes = 15000          # split over the hosts without their own
//! lead_time = "3m"
//! ssh_options = ["Port=2222"]
//! max_ssh_sessions = 10      # ssh sessions opening or working at once
//! [[fleet.hosts]]
//! dest = "mbx1.example"      # as ssh takes it
//! db_paths = ["/mnt/db1"]
//! log_paths = ["/mnt/log1"]
//! [[fleet.hosts]]
//! dest = "admin@mbx2.example"
//! name = "mbx2"
//! mailboxes = 4000
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::FleetHost;

/// Why the `[fleet]` table could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FleetFileError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{} is not valid TOML: {source}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// Why.
        source: toml::de::Error,
    },
    /// The table holds something else than the fleet's settings.
    #[error("the [fleet] table of {}: {source}", path.display())]
    Table {
        /// The file.
        path: PathBuf,
        /// Why.
        source: toml::de::Error,
    },
    /// A duration of the table that is not one.
    #[error("[fleet] {key}: {message}")]
    Duration {
        /// The key.
        key: String,
        /// Why.
        message: String,
    },
}

/// The `[fleet]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetFile {
    /// The hosts.
    pub hosts: Vec<HostEntry>,
    /// The solution's mailboxes.
    pub mailboxes: Option<u64>,
    /// Lead time ("3m").
    pub lead_time: Option<String>,
    /// Largest clock offset accepted ("1s").
    pub max_clock_offset: Option<String>,
    /// An ssh configuration file.
    pub ssh_config: Option<PathBuf>,
    /// ssh `-o` options.
    pub ssh_options: Vec<String>,
    /// The edbstress binary on the hosts.
    pub remote_edbstress: Option<String>,
    /// The most ssh sessions opening or working at once.
    pub max_ssh_sessions: Option<usize>,
}

/// One `[[fleet.hosts]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// How ssh reaches it.
    pub dest: String,
    /// Its name in the results.
    pub name: Option<String>,
    /// Its database paths.
    #[serde(default)]
    pub db_paths: Vec<PathBuf>,
    /// Its log paths.
    #[serde(default)]
    pub log_paths: Vec<PathBuf>,
    /// Its mailboxes.
    pub mailboxes: Option<u64>,
    /// Where it keeps its run directories.
    pub results_dir: Option<PathBuf>,
}

impl FleetFile {
    /// The `[fleet]` table of the file at `path` (None when it has none).
    pub fn load(path: &Path) -> Result<Option<FleetFile>, FleetFileError> {
        let path_buf = || path.to_path_buf();
        let text = std::fs::read_to_string(path).map_err(|source| FleetFileError::Read {
            path: path_buf(),
            source,
        })?;
        let table: toml::Table = text.parse().map_err(|source| FleetFileError::Toml {
            path: path_buf(),
            source,
        })?;
        let Some(fleet) = table.get("fleet").cloned() else {
            return Ok(None);
        };
        fleet
            .try_into()
            .map(Some)
            .map_err(|source| FleetFileError::Table {
                path: path_buf(),
                source,
            })
    }

    /// Its hosts.
    pub fn fleet_hosts(&self) -> Vec<FleetHost> {
        self.hosts
            .iter()
            .map(|h| FleetHost {
                dest: h.dest.clone(),
                name: h
                    .name
                    .clone()
                    .unwrap_or_else(|| h.dest.rsplit('@').next().unwrap_or(&h.dest).to_string()),
                db_paths: h.db_paths.clone(),
                log_paths: h.log_paths.clone(),
                mailboxes: h.mailboxes,
                results_dir: h.results_dir.clone(),
            })
            .collect()
    }

    /// A duration of the table (`key` for the message).
    pub fn duration(value: &Option<String>, key: &str) -> Result<Option<Duration>, FleetFileError> {
        value
            .as_deref()
            .map(|v| {
                edbstress_workload::units::parse_duration(v).map_err(|e| FleetFileError::Duration {
                    key: key.into(),
                    message: e.to_string(),
                })
            })
            .transpose()
    }
}
