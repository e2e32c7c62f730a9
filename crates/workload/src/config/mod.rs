//! The configuration of a run: the resolved [`RunConfig`] every test reads, and how it
//! is built from a profile's defaults, a TOML file and command-line overrides.
//!
//! Precedence, lowest first: the profile's defaults, the quick preset, the TOML file,
//! the command line. Each of the last three is a [`ConfigFile`] layer;
//! [`RunConfig::resolve`] merges them, derives what was not given and validates the
//! result. The resolved configuration is written to the run directory as `config.toml`
//! ([`RunConfig::to_toml`]) and reads back to the same run.
//!
//! - [`model`]: the resolved configuration, [`RunConfig`];
//! - [`settings`]: every run setting defined once — its key and type in a layer as
//!   written in TOML ([`ConfigFile`]), its flag, help and place in the commented
//!   template;
//! - [`file`]: the textual forms of values and the `[thresholds]` table;
//! - [`resolve`]: merging layers over the profile's defaults, the quick preset, and
//!   the database size derived from mailboxes;
//! - [`validate`]: the range of every value and the rules between them;
//! - [`guard`]: refusing runs whose cache (or page cache) would hold the databases;
//! - [`capacity`]: the database size from the free space under the database path (the
//!   one part that reads the filesystem).
//!
//! Errors name the configuration key at fault (`databases`, `thresholds.db_read_avg_ms`);
//! the library knows nothing of command-line flag spellings: the CLI maps keys to its
//! flags when it prints an error.

use std::path::PathBuf;
use std::time::Duration;

pub mod capacity;
pub mod file;
pub mod guard;
pub mod model;
pub mod resolve;
pub mod settings;
pub mod validate;

#[cfg(test)]
mod tests;

pub use file::{
    ThresholdsFile, format_op_mix, humantime_serde_compat, page_size_bytes, parse_compressibility,
    parse_on_off, parse_op_mix, parse_profile, parse_test_type,
};
pub use model::RunConfig;
pub use resolve::quick_preset;
pub use settings::{
    ConfigFile, FlagForm, SETTINGS, Setting, SettingKey, ToArgsError, config_template,
    flag_for_key, keys,
};

/// Default directory of database files (the quick start's).
pub const DEFAULT_DB_PATH: &str = "edbstress-data/db";
/// Default directory of instance log directories (the quick start's).
pub const DEFAULT_LOG_PATH: &str = "edbstress-data/logs";
/// Default directory where run directories are created.
pub const DEFAULT_RESULTS_DIR: &str = "edbstress-results";

pub(crate) const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Default transactional IOPS per mailbox (Jetstress asks for it; 0.12 is a common
/// figure for a mailbox of average activity).
const DEFAULT_IOPS_PER_MAILBOX: f64 = 0.12;
/// Default mailbox quota.
const DEFAULT_MAILBOX_QUOTA: u64 = 2 << 30;
/// Smallest database file a run accepts: a few MiB leave the B+trees room to work.
pub(crate) const MIN_DATABASE_SIZE: u64 = 4 * MIB;
/// Database size of throughput runs given neither a size nor a capacity share.
const DEFAULT_THROUGHPUT_DATABASE_SIZE: u64 = GIB;
/// Longest duration, sampling interval or warm-up a run accepts: a year is far beyond
/// any real test (Stress is 24 hours), and it keeps every deadline computed from a
/// user value far from the limits of the clock arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// Highest IOPS per mailbox: Exchange profiles ask for 0.06 to about 1.
const MAX_IOPS_PER_MAILBOX: f64 = 1000.0;
/// Highest target a run accepts (mailboxes × IOPS per mailbox), far above any storage.
const MAX_TARGET_IOPS: f64 = 100_000_000.0;
/// Highest BDM rate per database, MB/s.
const MAX_BDM_MB_PER_SEC: f64 = 100_000.0;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("cannot read the configuration file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The TOML does not parse, has an unknown key or a value of the wrong form.
    #[error("{origin}: {message}")]
    Parse {
        /// The file, or "configuration".
        origin: String,
        /// The parser's message: line, column, key and what was expected.
        message: String,
    },
    /// A value is out of range or contradicts another.
    #[error("`{key}`: {message}")]
    Invalid {
        /// The configuration key, e.g. `databases` or `thresholds.db_read_avg_ms`.
        key: SettingKey,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The free space of the database path could not be read (for `capacity_pct`).
    #[error("`capacity_pct`: cannot read the free space of {}: {source}; set database_size instead", .path.display())]
    FreeSpace {
        /// The directory asked.
        path: PathBuf,
        /// What went wrong.
        source: edbstress_io::IoError,
    },
}

impl ConfigError {
    /// The key a validation error is about.
    pub fn key(&self) -> Option<&'static str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key.name()),
            ConfigError::FreeSpace { .. } => Some("capacity_pct"),
            _ => None,
        }
    }
}

fn invalid(key: SettingKey, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}
