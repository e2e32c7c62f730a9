//! The configuration of a run: the resolved [`RunConfig`] every test reads, and how it
//! is built from a profile's defaults, a TOML file and command-line overrides.
//!
//! Precedence, lowest first: the profile's defaults, `--quick`'s preset, the TOML file,
//! flags. Each of the last three is a [`ConfigFile`] layer; [`RunConfig::resolve`]
//! merges them, derives what was not given and validates the result. The resolved
//! configuration is written to the run directory as `config.toml`
//! ([`RunConfig::to_toml`]) and reads back to the same run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{OpMix, TestType};
use serde::{Deserialize, Serialize};

use crate::profile::{Profile, Thresholds};
use crate::units::{bounded, format_duration, format_size};

/// Default directory of database files (the quick start's).
pub const DEFAULT_DB_PATH: &str = "edbstress-data/db";
/// Default directory of instance log directories (the quick start's).
pub const DEFAULT_LOG_PATH: &str = "edbstress-data/logs";
/// Default directory where run directories are created.
pub const DEFAULT_RESULTS_DIR: &str = "edbstress-results";

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Default transactional IOPS per mailbox (Jetstress asks for it; 0.12 is a common
/// figure for a mailbox of average activity).
const DEFAULT_IOPS_PER_MAILBOX: f64 = 0.12;
/// Default mailbox quota.
const DEFAULT_MAILBOX_QUOTA: u64 = 2 << 30;
/// Smallest database file a run accepts: a few MiB leave the B+trees room to work.
const MIN_DATABASE_SIZE: u64 = 4 * MIB;
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

/// A fully resolved run configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Which test.
    pub test: TestType,
    /// Version profile.
    pub profile: Profile,
    /// Mailbox-profile runs: number of mailboxes (None: a throughput run).
    pub mailboxes: Option<u64>,
    /// Transactional IOPS per mailbox.
    pub iops_per_mailbox: f64,
    /// Mailbox quota, bytes.
    pub mailbox_quota: u64,
    /// Number of databases (instances).
    pub databases: u32,
    /// Size of each database file, bytes (from the profile, or given).
    pub database_size: u64,
    /// Database copies (1 = none; each extra copy adds a log replication reader).
    pub copies: u32,
    /// Directories for database files; instances are spread over them.
    pub db_paths: Vec<PathBuf>,
    /// Directories for log directories; instances are spread over them.
    pub log_paths: Vec<PathBuf>,
    /// Database page size (for new databases; existing ones must match).
    #[serde(with = "page_size_bytes")]
    pub page_size: PageSize,
    /// Minimum database cache, bytes, for the whole run (split over instances).
    pub cache_min: u64,
    /// Maximum database cache, bytes, for the whole run (split over instances).
    pub cache_max: u64,
    /// Checkpoint depth per instance, bytes.
    pub checkpoint_depth: u64,
    /// Largest database write the page writer makes of contiguous dirty pages, bytes
    /// (default one page: see the user guide).
    pub write_coalesce: u64,
    /// Log each page's on-disk image before the change that makes it dirty, so that
    /// recovery can rebuild pages torn by a power cut (off by default, like ESE).
    pub torn_write_protection: bool,
    /// Sessions running transactions over all instances (None: chosen by the tool).
    pub threads: Option<u32>,
    /// Find the largest session count that meets the thresholds.
    pub auto_tune: bool,
    /// Measured duration of the test.
    #[serde(with = "humantime_serde_compat")]
    pub duration: Duration,
    /// Counter sampling interval.
    #[serde(with = "humantime_serde_compat")]
    pub sample_interval: Duration,
    /// Longest wait for the caches to warm before measuring anyway (logged).
    #[serde(with = "humantime_serde_compat")]
    pub warmup_timeout: Duration,
    /// Operation mix.
    pub op_mix: OpMix,
    /// Share of lazy commits, percent.
    pub lazy_commit_pct: u32,
    /// Background database maintenance.
    pub bdm: bool,
    /// BDM read rate per database, MB/s.
    pub bdm_mb_per_sec: f64,
    /// Open-loop runs start transactions at this many times the rate that yields the
    /// target (the margin that makes a healthy device exceed the target).
    pub target_margin: f64,
    /// Pass/fail thresholds.
    pub thresholds: Thresholds,
    /// Where run directories are created.
    pub results_dir: PathBuf,
    /// Seed of the transaction generator and of new databases' content.
    pub seed: u64,
    /// DatabaseBackup: also write the copy here.
    pub backup_path: Option<PathBuf>,
    /// SoftRecovery: log files to generate per instance before the crash.
    pub logs_to_replay: u32,
    /// Target lz4 compression ratio of page content (new databases).
    pub compressibility: f64,
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// Backend of background writes.
    pub backend: BackendKind,
    /// Verify database and log checksums after Performance and Stress.
    pub verify_after: bool,
}

impl RunConfig {
    /// Mailboxes × IOPS per mailbox; None for throughput runs.
    pub fn target_iops(&self) -> Option<f64> {
        self.mailboxes.map(|m| m as f64 * self.iops_per_mailbox)
    }

    /// Whether transactions start on an open-loop schedule (mailbox-profile runs).
    pub fn open_loop(&self) -> bool {
        self.target_iops().is_some()
    }

    /// Minimum cache per instance, bytes.
    pub fn cache_min_per_instance(&self) -> u64 {
        self.cache_min / u64::from(self.databases.max(1))
    }

    /// Maximum cache per instance, bytes.
    pub fn cache_max_per_instance(&self) -> u64 {
        self.cache_max / u64::from(self.databases.max(1))
    }

    /// Sessions when none were asked for: four per database (at least eight), enough to
    /// keep an open-loop schedule fed on a device with a few ms of latency.
    pub fn default_threads(&self) -> u32 {
        (self.databases * 4).max(8)
    }

    /// The session count used when not auto-tuning.
    pub fn sessions(&self) -> u32 {
        self.threads.unwrap_or_else(|| self.default_threads())
    }
}

/// One layer of configuration as written in TOML: a `--config` file, the `--quick`
/// preset or the command-line flags. Every key is optional; a key a layer leaves out
/// comes from an earlier layer or the defaults. Unknown keys are an error naming them.
///
/// Sizes accept `"256MiB"`, `"2GB"` or a number of bytes; durations `"2h"`, `"15s"` or
/// a number of seconds; `op_mix` a table `{ insert, delete, replace, read }` or a string
/// `"40/20/5/35"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfigFile {
    /// Which test: performance, stress, database-backup, soft-recovery.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::test_type")]
    pub test: Option<TestType>,
    /// Version profile: exchange2007, exchange2010, exchange2013.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::profile")]
    pub profile: Option<Profile>,
    /// Number of mailboxes (set: a mailbox-profile run with an IOPS target).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mailboxes: Option<u64>,
    /// Transactional IOPS per mailbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops_per_mailbox: Option<f64>,
    /// Mailbox quota, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub mailbox_quota: Option<u64>,
    /// Number of databases (instances).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub databases: Option<u32>,
    /// Size of each database file, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub database_size: Option<u64>,
    /// Throughput runs: percent of the free space of the database paths to fill, split
    /// over the databases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_pct: Option<f64>,
    /// Database copies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<u32>,
    /// Directories for database files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_paths: Option<Vec<PathBuf>>,
    /// Directories for instance log directories.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_paths: Option<Vec<PathBuf>>,
    /// Database page size.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::page_size")]
    pub page_size: Option<PageSize>,
    /// Minimum database cache for the whole run, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub cache_min: Option<u64>,
    /// Maximum database cache for the whole run, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub cache_max: Option<u64>,
    /// Checkpoint depth per instance, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub checkpoint_depth: Option<u64>,
    /// Largest coalesced database write, bytes.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::size")]
    pub write_coalesce: Option<u64>,
    /// Log page images for torn-write protection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn_write_protection: Option<bool>,
    /// Sessions over all instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Find the largest session count that meets the thresholds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_tune: Option<bool>,
    /// Measured duration.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::duration")]
    pub duration: Option<Duration>,
    /// Counter sampling interval.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::duration")]
    pub sample_interval: Option<Duration>,
    /// Longest wait for the caches to warm.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::duration")]
    pub warmup_timeout: Option<Duration>,
    /// Operation mix.
    #[serde(skip_serializing_if = "Option::is_none", with = "forms::op_mix")]
    pub op_mix: Option<OpMix>,
    /// Share of lazy commits, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lazy_commits: Option<u32>,
    /// Background database maintenance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdm: Option<bool>,
    /// BDM read rate per database, MB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdm_rate: Option<f64>,
    /// Open-loop start rate over the target rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_margin: Option<f64>,
    /// Where run directories are created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results_dir: Option<PathBuf>,
    /// Seed of the transaction generator and of new databases' content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// DatabaseBackup: also write the copy here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup_path: Option<PathBuf>,
    /// SoftRecovery: log files to generate per instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs_to_replay: Option<u32>,
    /// Target lz4 compression ratio of new page content.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "forms::compressibility"
    )]
    pub compressibility: Option<f64>,
    /// Direct or buffered I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_mode: Option<IoMode>,
    /// Backend of background writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendKind>,
    /// Verify checksums after Performance and Stress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_after: Option<bool>,
    /// Pass/fail threshold overrides, per field. Last so that TOML writes the table
    /// after the plain keys.
    #[serde(skip_serializing_if = "ThresholdsFile::is_empty")]
    pub thresholds: ThresholdsFile,
}

/// The `[thresholds]` table: overrides of single pass/fail thresholds, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdsFile {
    /// Average database read latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_avg_ms: Option<f64>,
    /// Highest per-interval average database read latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_max_ms: Option<f64>,
    /// Average log write latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_avg_ms: Option<f64>,
    /// Highest per-interval average log write latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_max_ms: Option<f64>,
    /// Average database page fault stalls per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_fault_stalls_per_sec: Option<f64>,
    /// 99th percentile database read latency (an extra criterion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_read_p99_ms: Option<f64>,
    /// 99th percentile log write latency (an extra criterion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_write_p99_ms: Option<f64>,
}

impl ThresholdsFile {
    /// Whether no threshold is set.
    pub fn is_empty(&self) -> bool {
        *self == ThresholdsFile::default()
    }

    /// `base` with the thresholds this layer sets replaced.
    fn apply(&self, base: Thresholds) -> Thresholds {
        Thresholds {
            db_read_avg_ms: self.db_read_avg_ms.unwrap_or(base.db_read_avg_ms),
            db_read_max_ms: self.db_read_max_ms.unwrap_or(base.db_read_max_ms),
            log_write_avg_ms: self.log_write_avg_ms.unwrap_or(base.log_write_avg_ms),
            log_write_max_ms: self.log_write_max_ms.unwrap_or(base.log_write_max_ms),
            page_fault_stalls_per_sec: self
                .page_fault_stalls_per_sec
                .unwrap_or(base.page_fault_stalls_per_sec),
            db_read_p99_ms: self.db_read_p99_ms.or(base.db_read_p99_ms),
            log_write_p99_ms: self.log_write_p99_ms.or(base.log_write_p99_ms),
        }
    }
}

impl From<Thresholds> for ThresholdsFile {
    fn from(t: Thresholds) -> Self {
        ThresholdsFile {
            db_read_avg_ms: Some(t.db_read_avg_ms),
            db_read_max_ms: Some(t.db_read_max_ms),
            log_write_avg_ms: Some(t.log_write_avg_ms),
            log_write_max_ms: Some(t.log_write_max_ms),
            page_fault_stalls_per_sec: Some(t.page_fault_stalls_per_sec),
            db_read_p99_ms: t.db_read_p99_ms,
            log_write_p99_ms: t.log_write_p99_ms,
        }
    }
}

impl ConfigFile {
    /// Parses TOML text. Errors give the line and name the offending key.
    pub fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: "configuration".to_string(),
            message: bounded(&e.to_string()),
        })
    }

    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            origin: path.display().to_string(),
            message: bounded(&e.to_string()),
        })
    }
}

impl From<&RunConfig> for ConfigFile {
    /// Every setting of a resolved configuration, explicitly.
    fn from(c: &RunConfig) -> Self {
        ConfigFile {
            test: Some(c.test),
            profile: Some(c.profile),
            mailboxes: c.mailboxes,
            iops_per_mailbox: Some(c.iops_per_mailbox),
            mailbox_quota: Some(c.mailbox_quota),
            databases: Some(c.databases),
            database_size: Some(c.database_size),
            // The size it gave is written instead, so the run repeats on any free space.
            capacity_pct: None,
            copies: Some(c.copies),
            db_paths: Some(c.db_paths.clone()),
            log_paths: Some(c.log_paths.clone()),
            page_size: Some(c.page_size),
            cache_min: Some(c.cache_min),
            cache_max: Some(c.cache_max),
            checkpoint_depth: Some(c.checkpoint_depth),
            write_coalesce: Some(c.write_coalesce),
            torn_write_protection: Some(c.torn_write_protection),
            threads: c.threads,
            auto_tune: Some(c.auto_tune),
            duration: Some(c.duration),
            sample_interval: Some(c.sample_interval),
            warmup_timeout: Some(c.warmup_timeout),
            op_mix: Some(c.op_mix),
            lazy_commits: Some(c.lazy_commit_pct),
            bdm: Some(c.bdm),
            bdm_rate: Some(c.bdm_mb_per_sec),
            target_margin: Some(c.target_margin),
            results_dir: Some(c.results_dir.clone()),
            seed: Some(c.seed),
            backup_path: c.backup_path.clone(),
            logs_to_replay: Some(c.logs_to_replay),
            compressibility: Some(c.compressibility),
            io_mode: Some(c.io_mode),
            backend: Some(c.backend),
            verify_after: Some(c.verify_after),
            thresholds: c.thresholds.into(),
        }
    }
}

/// The `--quick` preset: a small mailbox-profile Performance run of under a minute on
/// two 256 MiB databases, for a first look at a machine.
pub fn quick_preset() -> ConfigFile {
    ConfigFile {
        test: Some(TestType::Performance),
        profile: Some(Profile::Exchange2013),
        mailboxes: Some(1000),
        iops_per_mailbox: Some(DEFAULT_IOPS_PER_MAILBOX),
        databases: Some(2),
        database_size: Some(256 * MIB),
        cache_min: Some(8 * MIB),
        cache_max: Some(16 * MIB),
        copies: Some(2),
        // BDM is left to the profile (on for exchange2013): forcing it on would make
        // `--quick --profile exchange2007`, whose profile has no BDM rate, an error.
        duration: Some(Duration::from_secs(45)),
        sample_interval: Some(Duration::from_secs(5)),
        warmup_timeout: Some(Duration::from_secs(30)),
        results_dir: Some(PathBuf::from(DEFAULT_RESULTS_DIR)),
        ..ConfigFile::default()
    }
}

/// The commented TOML `edbstress config init` writes: every key with what it means and
/// its default; the mailbox-profile keys set to an example (5000 mailboxes at 0.12 IOPS
/// with 2 GB quotas on 6 databases with 2 copies), the rest commented out.
pub fn config_template() -> String {
    include_str!("config_template.toml").to_string()
}

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
    #[error("`{key}`{}: {message}", flag_hint(.key))]
    Invalid {
        /// The configuration key, e.g. `databases` or `thresholds.db_read_avg_ms`.
        key: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The free space of the database path could not be read (for `capacity_pct`).
    #[error("`capacity_pct` (--capacity-pct): cannot read the free space of {}: {source}; set database_size instead", .path.display())]
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
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::FreeSpace { .. } => Some("capacity_pct"),
            _ => None,
        }
    }
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// " (--flag)" for keys the command line can set too.
fn flag_hint(key: &str) -> String {
    let flag = match key {
        "db_paths" => "--db-path",
        "log_paths" => "--log-path",
        "io_mode" => "--buffered",
        "verify_after" => "--no-verify",
        "test"
        | "profile"
        | "mailboxes"
        | "iops_per_mailbox"
        | "mailbox_quota"
        | "databases"
        | "database_size"
        | "capacity_pct"
        | "copies"
        | "page_size"
        | "cache_min"
        | "cache_max"
        | "threads"
        | "auto_tune"
        | "duration"
        | "sample_interval"
        | "op_mix"
        | "lazy_commits"
        | "bdm"
        | "bdm_rate"
        | "results_dir"
        | "seed"
        | "backup_path"
        | "logs_to_replay"
        | "compressibility"
        | "backend"
        | "torn_write_protection" => {
            return format!(" (--{})", key.replace('_', "-"));
        }
        _ => return String::new(),
    };
    format!(" ({flag})")
}

/// Parses an operation mix written "insert/delete/replace/read", e.g. "40/20/5/35".
/// Whether it adds up to 100 is checked with the rest of the configuration.
pub fn parse_op_mix(s: &str) -> Result<OpMix, String> {
    let fix = "write four percentages insert/delete/replace/read, e.g. 40/20/5/35";
    let parts: Vec<&str> = s.split('/').map(str::trim).collect();
    let [insert, delete, replace, read] = parts.as_slice() else {
        return Err(format!("invalid operation mix '{s}': {fix}"));
    };
    let pct = |p: &str| {
        p.parse::<u32>().map_err(|_| {
            format!("invalid operation mix '{s}': '{p}' is not a whole percentage; {fix}")
        })
    };
    Ok(OpMix {
        insert: pct(insert)?,
        delete: pct(delete)?,
        replace: pct(replace)?,
        read: pct(read)?,
    })
}

/// Writes an operation mix as "40/20/5/35".
pub fn format_op_mix(mix: OpMix) -> String {
    format!("{}/{}/{}/{}", mix.insert, mix.delete, mix.replace, mix.read)
}

/// Parses a test name: "performance", "stress", "database-backup", "soft-recovery"
/// (also with underscores, or Jetstress's "DatabaseBackup").
pub fn parse_test_type(s: &str) -> Result<TestType, String> {
    let wanted = s.trim().to_ascii_lowercase().replace(['-', '_'], "");
    TestType::ALL
        .into_iter()
        .find(|t| t.label().to_ascii_lowercase() == wanted)
        .ok_or_else(|| {
            format!("unknown test '{s}': use performance, stress, database-backup or soft-recovery")
        })
}

/// Parses a profile name: "exchange2007", "exchange2010", "exchange2013" (also
/// "exchange2016", "exchange2019" or the bare year).
pub fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::from_name(s.trim()).ok_or_else(|| {
        format!("unknown profile '{s}': use exchange2007, exchange2010 or exchange2013 (also for 2016 and 2019)")
    })
}

/// Parses "on"/"off" (also true/false, yes/no, 1/0).
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("invalid switch '{s}': use on or off")),
    }
}

/// Parses a compressibility: "mail" (1.7), "incompressible" (1.0), or a ratio such as
/// "2.0" or "2:1".
pub fn parse_compressibility(s: &str) -> Result<f64, String> {
    s.parse::<edbstress_engine::Compressibility>()
        .map(|c| c.ratio())
}

/// The last value a layer sets.
fn last<T>(layers: &[ConfigFile], pick: impl Fn(&ConfigFile) -> Option<T>) -> Option<T> {
    layers.iter().rev().find_map(pick)
}

/// Index of the last layer that sets a value.
fn last_index(layers: &[ConfigFile], is_set: impl Fn(&ConfigFile) -> bool) -> Option<usize> {
    layers.iter().rposition(is_set)
}

/// The nearest ancestor of `path` that exists ("." for a relative path none of whose
/// parts exist yet): where the database files will be created.
fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

impl RunConfig {
    /// Merges `layers` (later ones override earlier ones: typically the `--quick`
    /// preset, the `--config` file, then the flags) over the defaults of the profile,
    /// derives the database size and validates the result. The test and the profile
    /// come from the last layer that sets them (default: performance, exchange2013);
    /// the other defaults follow them.
    ///
    /// The database size is, in order: `database_size`; else, for mailbox-profile runs,
    /// mailboxes × mailbox_quota / databases; else `capacity_pct` of the free space
    /// under the first database path, split over the databases; else 1 GiB. Derived
    /// sizes are rounded down to whole MiB. When `database_size` and `capacity_pct` are
    /// in different layers, the later layer's wins.
    pub fn resolve(layers: &[ConfigFile]) -> Result<RunConfig, ConfigError> {
        let test = last(layers, |l| l.test).unwrap_or(TestType::Performance);
        let profile = last(layers, |l| l.profile).unwrap_or_default();
        let defaults = profile.defaults();
        let databases = last(layers, |l| l.databases).unwrap_or(1);
        // Checked before the cache defaults, which scale with it.
        check_databases(databases)?;
        let per_db = |bytes: u64| bytes.saturating_mul(u64::from(databases));
        // A cache bound given alone moves the other default out of its way rather than
        // making the pair contradict itself.
        let (cache_min, cache_max) =
            match (last(layers, |l| l.cache_min), last(layers, |l| l.cache_max)) {
                (Some(min), Some(max)) => (min, max),
                (Some(min), None) => (min, per_db(defaults.cache_max_per_db).max(min)),
                (None, Some(max)) => (per_db(defaults.cache_min_per_db).min(max), max),
                (None, None) => (
                    per_db(defaults.cache_min_per_db),
                    per_db(defaults.cache_max_per_db),
                ),
            };
        let default_duration = if test == TestType::Stress {
            Duration::from_secs(24 * 3600)
        } else {
            Duration::from_secs(2 * 3600)
        };
        let thresholds = layers.iter().fold(profile.thresholds(test), |t, layer| {
            layer.thresholds.apply(t)
        });
        let mut config = RunConfig {
            test,
            profile,
            mailboxes: last(layers, |l| l.mailboxes),
            iops_per_mailbox: last(layers, |l| l.iops_per_mailbox)
                .unwrap_or(DEFAULT_IOPS_PER_MAILBOX),
            mailbox_quota: last(layers, |l| l.mailbox_quota).unwrap_or(DEFAULT_MAILBOX_QUOTA),
            databases,
            // Derived below from validated values; a valid placeholder until then.
            database_size: MIN_DATABASE_SIZE,
            copies: last(layers, |l| l.copies).unwrap_or(1),
            db_paths: last(layers, |l| l.db_paths.clone())
                .unwrap_or_else(|| vec![PathBuf::from(DEFAULT_DB_PATH)]),
            log_paths: last(layers, |l| l.log_paths.clone())
                .unwrap_or_else(|| vec![PathBuf::from(DEFAULT_LOG_PATH)]),
            page_size: last(layers, |l| l.page_size).unwrap_or(defaults.page_size),
            cache_min,
            cache_max,
            checkpoint_depth: last(layers, |l| l.checkpoint_depth)
                .unwrap_or(defaults.checkpoint_depth),
            // 0 until the page size is known: one page.
            write_coalesce: last(layers, |l| l.write_coalesce).unwrap_or(0),
            torn_write_protection: last(layers, |l| l.torn_write_protection).unwrap_or(false),
            threads: last(layers, |l| l.threads),
            auto_tune: last(layers, |l| l.auto_tune).unwrap_or(false),
            duration: last(layers, |l| l.duration).unwrap_or(default_duration),
            sample_interval: last(layers, |l| l.sample_interval).unwrap_or(Duration::from_secs(15)),
            warmup_timeout: last(layers, |l| l.warmup_timeout).unwrap_or(Duration::from_secs(600)),
            op_mix: last(layers, |l| l.op_mix).unwrap_or(defaults.op_mix),
            lazy_commit_pct: last(layers, |l| l.lazy_commits).unwrap_or(defaults.lazy_commit_pct),
            bdm: last(layers, |l| l.bdm).unwrap_or(defaults.bdm),
            bdm_mb_per_sec: last(layers, |l| l.bdm_rate).unwrap_or(defaults.bdm_mb_per_sec),
            target_margin: last(layers, |l| l.target_margin).unwrap_or(1.05),
            thresholds,
            results_dir: last(layers, |l| l.results_dir.clone())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_RESULTS_DIR)),
            seed: last(layers, |l| l.seed).unwrap_or(1),
            backup_path: last(layers, |l| l.backup_path.clone()),
            logs_to_replay: last(layers, |l| l.logs_to_replay).unwrap_or(500),
            compressibility: last(layers, |l| l.compressibility).unwrap_or(1.7),
            io_mode: last(layers, |l| l.io_mode).unwrap_or(IoMode::Direct),
            backend: last(layers, |l| l.backend).unwrap_or(BackendKind::Auto),
            verify_after: last(layers, |l| l.verify_after).unwrap_or(true),
        };
        if config.write_coalesce == 0 {
            config.write_coalesce = config.page_size.bytes() as u64;
        }
        config.validate()?;
        config.database_size = resolve_database_size(layers, &config)?;
        Ok(config)
    }

    /// Checks every value and the rules between them; the error names the key at fault
    /// and says how to fix it. [`RunConfig::resolve`] calls it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mix = self.op_mix;
        for (name, share) in [
            ("insert", mix.insert),
            ("delete", mix.delete),
            ("replace", mix.replace),
            ("read", mix.read),
        ] {
            if share > 100 {
                return Err(invalid(
                    "op_mix",
                    format!(
                        "the {name} share is {share}%; each share is a percentage from 0 to 100"
                    ),
                ));
            }
        }
        let sum = mix.insert + mix.delete + mix.replace + mix.read;
        if sum != 100 {
            return Err(invalid(
                "op_mix",
                format!(
                    "{} adds up to {sum}%; the insert/delete/replace/read shares must add up to 100, e.g. 40/20/5/35",
                    format_op_mix(mix)
                ),
            ));
        }
        if self.lazy_commit_pct > 100 {
            return Err(invalid(
                "lazy_commits",
                format!(
                    "{}% is more than 100; give the share of commits that are lazy, 0 to 100",
                    self.lazy_commit_pct
                ),
            ));
        }
        check_databases(self.databases)?;
        if !(1..=16).contains(&self.copies) {
            return Err(invalid(
                "copies",
                format!(
                    "{} is out of range; use 1 (no extra copy) to 16",
                    self.copies
                ),
            ));
        }
        if let Some(mailboxes) = self.mailboxes {
            if mailboxes == 0 {
                return Err(invalid(
                    "mailboxes",
                    "0 mailboxes; give at least 1, or leave mailboxes out for a throughput run",
                ));
            }
            if mailboxes > i64::MAX as u64 {
                return Err(invalid(
                    "mailboxes",
                    format!("{mailboxes} is too large; use at most {}", i64::MAX),
                ));
            }
        }
        if !(self.iops_per_mailbox.is_finite() && self.iops_per_mailbox > 0.0) {
            return Err(invalid(
                "iops_per_mailbox",
                format!(
                    "{} is not above 0; give the transactional IOPS of one mailbox, e.g. 0.12",
                    self.iops_per_mailbox
                ),
            ));
        }
        if self.iops_per_mailbox > MAX_IOPS_PER_MAILBOX {
            return Err(invalid(
                "iops_per_mailbox",
                format!(
                    "{:e} is out of range; give the transactional IOPS of one mailbox, above 0 and at most {MAX_IOPS_PER_MAILBOX}, e.g. 0.12",
                    self.iops_per_mailbox
                ),
            ));
        }
        if let Some(target) = self.target_iops() {
            if !(target.is_finite() && target <= MAX_TARGET_IOPS) {
                return Err(invalid(
                    "mailboxes",
                    format!(
                        "mailboxes × iops_per_mailbox is a target of {target:e} IOPS, more than the {MAX_TARGET_IOPS:e} a run accepts; lower mailboxes or iops_per_mailbox"
                    ),
                ));
            }
        }
        if self.mailbox_quota == 0 {
            return Err(invalid(
                "mailbox_quota",
                "the quota is 0 bytes; give the size of a mailbox, e.g. \"2GB\"",
            ));
        }
        if self.database_size < MIN_DATABASE_SIZE {
            return Err(invalid(
                "database_size",
                format!(
                    "{} is below the 4MiB minimum; give a larger size, e.g. \"256MiB\"",
                    format_size(self.database_size)
                ),
            ));
        }
        if self.cache_min > self.cache_max {
            return Err(invalid(
                "cache_min",
                format!(
                    "{} is more than cache_max ({}); lower cache_min or raise cache_max",
                    format_size(self.cache_min),
                    format_size(self.cache_max)
                ),
            ));
        }
        check_cache_fits(self.cache_max, self.databases, self.page_size)?;
        for (key, total, per_instance) in [
            // The maximum first: a small cache_max given alone lowers the default minimum.
            ("cache_max", self.cache_max, self.cache_max_per_instance()),
            ("cache_min", self.cache_min, self.cache_min_per_instance()),
        ] {
            if per_instance < MIB {
                return Err(invalid(
                    key,
                    format!(
                        "{} over {} database(s) leaves {} per instance, below the 1MiB minimum; raise {key} (it is the total for the run)",
                        format_size(total),
                        self.databases,
                        format_size(per_instance)
                    ),
                ));
            }
        }
        let page = self.page_size.bytes() as u64;
        if self.write_coalesce < page
            || self.write_coalesce > 16 << 20
            || self.write_coalesce % page != 0
        {
            return Err(invalid(
                "write_coalesce",
                format!(
                    "{} is not a whole number of {} pages up to 16MiB; give e.g. \"{}\" (one page) or \"256KiB\"",
                    format_size(self.write_coalesce),
                    format_size(page),
                    format_size(page)
                ),
            ));
        }
        if self.checkpoint_depth == 0 {
            return Err(invalid(
                "checkpoint_depth",
                "0 bytes; give the log distance the checkpoint may lag, e.g. \"100MiB\"",
            ));
        }
        if self.sample_interval < Duration::from_secs(1) {
            return Err(invalid(
                "sample_interval",
                format!(
                    "{} is shorter than 1s; sample at most once a second",
                    format_duration(self.sample_interval)
                ),
            ));
        }
        for (key, value) in [
            ("duration", self.duration),
            ("sample_interval", self.sample_interval),
            ("warmup_timeout", self.warmup_timeout),
        ] {
            if value > MAX_DURATION {
                return Err(invalid(
                    key,
                    format!(
                        "{} is too long; give at most 365 days (\"365d\"), e.g. \"2h\"",
                        format_duration(value)
                    ),
                ));
            }
        }
        if self.duration < Duration::from_secs(1) {
            return Err(invalid(
                "duration",
                format!(
                    "{} is shorter than 1s; give e.g. \"2h\"",
                    format_duration(self.duration)
                ),
            ));
        }
        if self.duration < self.sample_interval {
            return Err(invalid(
                "duration",
                format!(
                    "{} is shorter than sample_interval ({}); lengthen duration or shorten sample_interval",
                    format_duration(self.duration),
                    format_duration(self.sample_interval)
                ),
            ));
        }
        if let Some(threads) = self.threads {
            if !(1..=1024).contains(&threads) {
                return Err(invalid(
                    "threads",
                    format!("{threads} is out of range; use 1 to 1024"),
                ));
            }
            if self.auto_tune {
                return Err(invalid(
                    "auto_tune",
                    "auto-tuning chooses the thread count itself; remove threads (--threads) or auto_tune (--auto-tune)",
                ));
            }
        }
        if !(self.bdm_mb_per_sec.is_finite()
            && self.bdm_mb_per_sec >= 0.0
            && self.bdm_mb_per_sec <= MAX_BDM_MB_PER_SEC)
        {
            return Err(invalid(
                "bdm_rate",
                format!(
                    "{} is not a rate from 0 to {MAX_BDM_MB_PER_SEC}; give MB/s per database, e.g. 1.5",
                    self.bdm_mb_per_sec
                ),
            ));
        }
        if self.bdm && self.bdm_mb_per_sec == 0.0 {
            return Err(invalid(
                "bdm_rate",
                format!(
                    "BDM is on but its rate is 0 MB/s ({} has no BDM); set bdm_rate, e.g. 1.5, or turn bdm off",
                    self.profile.name()
                ),
            ));
        }
        if !(1.0..=2.0).contains(&self.target_margin) {
            return Err(invalid(
                "target_margin",
                format!(
                    "{} is out of range; use 1.0 (start transactions at exactly the target rate) to 2.0",
                    self.target_margin
                ),
            ));
        }
        let t = self.thresholds;
        for (key, value) in [
            ("thresholds.db_read_avg_ms", Some(t.db_read_avg_ms)),
            ("thresholds.db_read_max_ms", Some(t.db_read_max_ms)),
            ("thresholds.log_write_avg_ms", Some(t.log_write_avg_ms)),
            ("thresholds.log_write_max_ms", Some(t.log_write_max_ms)),
            (
                "thresholds.page_fault_stalls_per_sec",
                Some(t.page_fault_stalls_per_sec),
            ),
            ("thresholds.db_read_p99_ms", t.db_read_p99_ms),
            ("thresholds.log_write_p99_ms", t.log_write_p99_ms),
        ] {
            if let Some(v) = value {
                if !(v.is_finite() && v > 0.0) {
                    return Err(invalid(
                        key,
                        format!(
                            "{v} is not above 0; give a limit in ms (stalls per second for page_fault_stalls_per_sec)"
                        ),
                    ));
                }
            }
        }
        for (key, paths, what) in [
            ("db_paths", &self.db_paths, "database files"),
            ("log_paths", &self.log_paths, "log directories"),
        ] {
            if paths.is_empty() {
                return Err(invalid(
                    key,
                    format!("the list is empty; give at least one directory for {what}"),
                ));
            }
            check_utf8(key, paths)?;
        }
        check_utf8("results_dir", std::slice::from_ref(&self.results_dir))?;
        if let Some(backup) = &self.backup_path {
            check_utf8("backup_path", std::slice::from_ref(backup))?;
        }
        if self.logs_to_replay == 0 {
            return Err(invalid(
                "logs_to_replay",
                "0 log files; give at least 1 (the default is 500)",
            ));
        }
        edbstress_engine::Compressibility::from_ratio(self.compressibility)
            .map_err(|e| invalid("compressibility", e))?;
        if self.seed > i64::MAX as u64 {
            return Err(invalid(
                "seed",
                format!(
                    "{} is larger than TOML integers allow; use at most {}",
                    self.seed,
                    i64::MAX
                ),
            ));
        }
        Ok(())
    }

    /// The effective configuration as TOML with human units, to store in the run
    /// directory: every key explicit, so it repeats the run even when defaults change.
    /// It parses back as a [`ConfigFile`] that resolves to this configuration.
    pub fn to_toml(&self) -> String {
        let header = "# effective configuration of this run; `edbstress run --config config.toml` repeats it\n";
        match toml::to_string(&ConfigFile::from(self)) {
            Ok(body) => format!("{header}\n{body}"),
            // Only a configuration that skipped validation gets here (validation refuses
            // paths TOML cannot hold); say so in the file rather than fail the run.
            Err(e) => format!("{header}# cannot be written as TOML: {e}\n"),
        }
    }
}

/// The database cache is held in memory: `cache_max` (the total for the run) must fit
/// in this host's memory, and each instance's share in the engine's frame count.
fn check_cache_fits(
    cache_max: u64,
    databases: u32,
    page_size: PageSize,
) -> Result<(), ConfigError> {
    let frames = u64::from(u32::MAX)
        .saturating_mul(page_size.bytes() as u64)
        .saturating_mul(u64::from(databases.max(1)));
    let (limit, why) = match crate::host::memory_total_bytes() {
        Some(memory) if memory < frames => (
            memory / MIB * MIB,
            format!(
                "this host has {} of memory",
                edbstress_io::human_bytes(memory)
            ),
        ),
        _ => (
            frames,
            format!(
                "an instance's cache holds at most {} pages of {}",
                u32::MAX,
                format_size(page_size.bytes() as u64)
            ),
        ),
    };
    if cache_max > limit {
        return Err(invalid(
            "cache_max",
            format!(
                "{} is too large: the cache is held in memory and {why}; give at most {} (the total for the run), e.g. \"256MiB\"",
                format_size(cache_max),
                format_size(limit)
            ),
        ));
    }
    Ok(())
}

/// databases: 1..=256.
fn check_databases(databases: u32) -> Result<(), ConfigError> {
    if (1..=256).contains(&databases) {
        Ok(())
    } else {
        Err(invalid(
            "databases",
            format!("{databases} is out of range; use 1 to 256"),
        ))
    }
}

/// TOML strings are UTF-8: a path that is not cannot be recorded in `config.toml`.
fn check_utf8(key: &'static str, paths: &[PathBuf]) -> Result<(), ConfigError> {
    match paths.iter().find(|p| p.to_str().is_none()) {
        None => Ok(()),
        Some(p) => Err(invalid(
            key,
            format!(
                "{} is not valid UTF-8, which config.toml cannot record; use a directory (or a symlink to it) with a UTF-8 name",
                p.display()
            ),
        )),
    }
}

/// The database size (see [`RunConfig::resolve`]) of a validated configuration.
fn resolve_database_size(layers: &[ConfigFile], config: &RunConfig) -> Result<u64, ConfigError> {
    let size_at = last_index(layers, |l| l.database_size.is_some());
    let pct_at = last_index(layers, |l| l.capacity_pct.is_some());
    let from_capacity = match (size_at, pct_at) {
        (Some(size), Some(pct)) if size == pct => {
            return Err(invalid(
                "capacity_pct",
                "database_size and capacity_pct are both set; give only one (capacity_pct derives the database size from free space)",
            ));
        }
        (Some(size), Some(pct)) => pct > size,
        (None, pct) => pct.is_some(),
        (Some(_), None) => false,
    };
    if from_capacity {
        let pct = last(layers, |l| l.capacity_pct).unwrap_or(100.0);
        return size_from_capacity(pct, config);
    }
    if let Some(size) = last(layers, |l| l.database_size) {
        if size < MIN_DATABASE_SIZE {
            return Err(invalid(
                "database_size",
                format!(
                    "{} is below the 4MiB minimum; give a larger size, e.g. \"256MiB\"",
                    format_size(size)
                ),
            ));
        }
        return Ok(size);
    }
    let Some(mailboxes) = config.mailboxes else {
        return Ok(DEFAULT_THROUGHPUT_DATABASE_SIZE);
    };
    let per_db = u128::from(mailboxes) * u128::from(config.mailbox_quota)
        / u128::from(config.databases)
        / u128::from(MIB)
        * u128::from(MIB);
    let size = u64::try_from(per_db).map_err(|_| {
        invalid(
            "mailboxes",
            "mailboxes × mailbox_quota is too large to store; lower mailboxes or mailbox_quota",
        )
    })?;
    if size < MIN_DATABASE_SIZE {
        return Err(invalid(
            "database_size",
            format!(
                "mailboxes × mailbox_quota / databases gives {} per database, below the 4MiB minimum; raise mailboxes or mailbox_quota, or set database_size",
                format_size(size)
            ),
        ));
    }
    Ok(size)
}

/// `pct` percent of the free space under the first database path, split over the
/// databases and rounded down to whole MiB.
fn size_from_capacity(pct: f64, config: &RunConfig) -> Result<u64, ConfigError> {
    if !(pct > 0.0 && pct <= 100.0) {
        return Err(invalid(
            "capacity_pct",
            format!(
                "{pct} is out of range; give a percentage of the free space above 0 and at most 100"
            ),
        ));
    }
    let first = config
        .db_paths
        .first()
        .map_or(Path::new("."), PathBuf::as_path);
    let dir = nearest_existing_ancestor(first);
    let free = edbstress_io::available_space(&dir).map_err(|source| ConfigError::FreeSpace {
        path: dir.clone(),
        source,
    })?;
    let per_db = free as f64 * pct / 100.0 / f64::from(config.databases);
    let size = per_db as u64 / MIB * MIB;
    if size < MIN_DATABASE_SIZE {
        return Err(invalid(
            "capacity_pct",
            format!(
                "{pct}% of the {} free under {} over {} database(s) is {} each, below the 4MiB minimum; raise capacity_pct, free some space, or set database_size",
                format_size(free),
                dir.display(),
                config.databases,
                format_size(size)
            ),
        ));
    }
    Ok(size)
}

/// `Duration` as a human string ("2h", "90s", "1m 30s") in TOML.
pub mod humantime_serde_compat {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes "1h 30m".
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    /// Reads "90s", "2h", "1m 30s".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?}: {e} (write e.g. \"90s\", \"15m\", \"2h\")"
            ))
        })
    }
}

/// `PageSize` as its number of bytes.
pub mod page_size_bytes {
    use edbstress_format::PageSize;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes 32768.
    pub fn serialize<S: Serializer>(p: &PageSize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(p.bytes() as u64)
    }

    /// Reads 4096, 8192, 16384 or 32768.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PageSize, D::Error> {
        let bytes = u64::deserialize(d)?;
        PageSize::from_bytes(bytes as usize).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "page size {bytes} is not supported (use 4096, 8192, 16384 or 32768)"
            ))
        })
    }
}

/// How [`ConfigFile`] values are written in TOML: sizes, durations and page sizes in
/// human units, names for the test and profile, an operation mix as "40/20/5/35".
mod forms {
    use serde::de::{self, Deserializer, Visitor};
    use std::fmt;

    /// A TOML value that is a string or a number.
    pub(super) enum Scalar {
        Text(String),
        Integer(i64),
        Float(f64),
    }

    struct ScalarVisitor(&'static str);

    impl Visitor<'_> for ScalarVisitor {
        type Value = Scalar;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
            Ok(Scalar::Text(v.to_string()))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
            Ok(Scalar::Integer(v))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
            i64::try_from(v)
                .map(Scalar::Integer)
                .map_err(|_| E::custom(format!("{v} is too large")))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
            Ok(Scalar::Float(v))
        }
    }

    /// Reads a string or a number; anything else is an error saying `expecting`.
    pub(super) fn scalar<'de, D: Deserializer<'de>>(
        d: D,
        expecting: &'static str,
    ) -> Result<Scalar, D::Error> {
        d.deserialize_any(ScalarVisitor(expecting))
    }

    pub(super) mod size {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_size, parse_size};

        pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(bytes) => s.serialize_str(&format_size(*bytes)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
            match scalar(
                d,
                "a size such as \"256MiB\" or \"2GB\", or a number of bytes",
            )? {
                Scalar::Text(t) => parse_size(&t).map(Some).map_err(D::Error::custom),
                Scalar::Integer(n) => u64::try_from(n).map(Some).map_err(|_| {
                    D::Error::custom(format!("invalid size {n}: a size cannot be negative"))
                }),
                Scalar::Float(x) => Err(D::Error::custom(format!(
                    "invalid size {x}: give a whole number of bytes or a string such as \"1.5GiB\""
                ))),
            }
        }
    }

    pub(super) mod duration {
        use std::time::Duration;

        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_duration, parse_duration};

        pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(d) => s.serialize_str(&format_duration(*d)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            let fix = "write e.g. \"90s\", \"15m\", \"2h\" or a number of seconds";
            match scalar(
                d,
                "a duration such as \"15s\" or \"2h\", or a number of seconds",
            )? {
                Scalar::Text(t) => parse_duration(&t).map(Some).map_err(D::Error::custom),
                Scalar::Integer(n) => u64::try_from(n)
                    .map(|s| Some(Duration::from_secs(s)))
                    .map_err(|_| D::Error::custom(format!("invalid duration {n}: {fix}"))),
                Scalar::Float(x) => Duration::try_from_secs_f64(x)
                    .map(Some)
                    .map_err(|_| D::Error::custom(format!("invalid duration {x}: {fix}"))),
            }
        }
    }

    pub(super) mod page_size {
        use edbstress_format::PageSize;
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::units::{format_page_size, parse_page_size};

        pub fn serialize<S: Serializer>(v: &Option<PageSize>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(p) => s.serialize_str(&format_page_size(*p)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PageSize>, D::Error> {
            match scalar(d, "a page size: \"4KiB\", \"8KiB\", \"16KiB\" or \"32KiB\"")? {
                Scalar::Text(t) => parse_page_size(&t).map(Some).map_err(D::Error::custom),
                Scalar::Integer(n) => usize::try_from(n)
                    .ok()
                    .and_then(PageSize::from_bytes)
                    .map(Some)
                    .ok_or_else(|| {
                        D::Error::custom(format!(
                            "unsupported page size {n}: use 4096, 8192, 16384 or 32768 (or \"32KiB\")"
                        ))
                    }),
                Scalar::Float(x) => Err(D::Error::custom(format!(
                    "unsupported page size {x}: use \"4KiB\", \"8KiB\", \"16KiB\" or \"32KiB\""
                ))),
            }
        }
    }

    pub(super) mod compressibility {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_compressibility;

        pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(ratio) => s.serialize_f64(*ratio),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
            // The range is checked with the rest of the configuration.
            match scalar(d, "a ratio such as 1.7, or \"mail\" or \"incompressible\"")? {
                Scalar::Text(t) => parse_compressibility(&t)
                    .map(Some)
                    .map_err(D::Error::custom),
                Scalar::Integer(n) => Ok(Some(n as f64)),
                Scalar::Float(x) => Ok(Some(x)),
            }
        }
    }

    pub(super) mod test_type {
        use edbstress_report::TestType;
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_test_type;

        pub fn serialize<S: Serializer>(v: &Option<TestType>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(t) => s.serialize_str(t.cli_name()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TestType>, D::Error> {
            let expecting =
                "a test: \"performance\", \"stress\", \"database-backup\" or \"soft-recovery\"";
            match scalar(d, expecting)? {
                Scalar::Text(t) => parse_test_type(&t).map(Some).map_err(D::Error::custom),
                _ => Err(D::Error::custom(format!("invalid test: use {expecting}"))),
            }
        }
    }

    pub(super) mod profile {
        use serde::de::Error as _;
        use serde::{Deserializer, Serializer};

        use super::{Scalar, scalar};
        use crate::config::parse_profile;
        use crate::profile::Profile;

        pub fn serialize<S: Serializer>(v: &Option<Profile>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(p) => s.serialize_str(p.name()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Profile>, D::Error> {
            let expecting = "a profile: \"exchange2007\", \"exchange2010\" or \"exchange2013\"";
            match scalar(d, expecting)? {
                Scalar::Text(t) => parse_profile(&t).map(Some).map_err(D::Error::custom),
                _ => Err(D::Error::custom(format!(
                    "invalid profile: use {expecting}"
                ))),
            }
        }
    }

    pub(super) mod op_mix {
        use std::fmt;

        use edbstress_report::OpMix;
        use serde::de::{self, Deserializer, MapAccess, Visitor};
        use serde::{Deserialize, Serializer};

        use crate::config::{format_op_mix, parse_op_mix};

        /// The table form; every share must be given.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct OpMixTable {
            insert: u32,
            delete: u32,
            replace: u32,
            read: u32,
        }

        struct OpMixVisitor;

        impl<'de> Visitor<'de> for OpMixVisitor {
            type Value = OpMix;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an operation mix: \"40/20/5/35\" or { insert = 40, delete = 20, replace = 5, read = 35 }",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<OpMix, E> {
                parse_op_mix(v).map_err(E::custom)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<OpMix, A::Error> {
                let t = OpMixTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(OpMix {
                    insert: t.insert,
                    delete: t.delete,
                    replace: t.replace,
                    read: t.read,
                })
            }
        }

        pub fn serialize<S: Serializer>(v: &Option<OpMix>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(mix) => s.serialize_str(&format_op_mix(*mix)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OpMix>, D::Error> {
            d.deserialize_any(OpMixVisitor).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(text: &str) -> ConfigFile {
        ConfigFile::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn resolve_text(text: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::resolve(&[layer(text)])
    }

    #[test]
    fn defaults() {
        let c = RunConfig::resolve(&[]).unwrap();
        assert_eq!(c.test, TestType::Performance);
        assert_eq!(c.profile, Profile::Exchange2013);
        assert_eq!(c.mailboxes, None);
        assert_eq!(c.databases, 1);
        assert_eq!(c.copies, 1);
        assert_eq!(c.database_size, GIB);
        assert_eq!(c.db_paths, [PathBuf::from(DEFAULT_DB_PATH)]);
        assert_eq!(c.log_paths, [PathBuf::from(DEFAULT_LOG_PATH)]);
        assert_eq!(c.results_dir, PathBuf::from(DEFAULT_RESULTS_DIR));
        assert_eq!(c.duration, Duration::from_secs(7200));
        assert_eq!(c.sample_interval, Duration::from_secs(15));
        assert_eq!(c.warmup_timeout, Duration::from_secs(600));
        assert_eq!(c.iops_per_mailbox, 0.12);
        assert_eq!(c.mailbox_quota, 2 << 30);
        assert_eq!((c.cache_min, c.cache_max), (32 * MIB, 256 * MIB));
        assert_eq!(c.checkpoint_depth, 100 * MIB);
        assert_eq!(c.page_size, PageSize::K32);
        assert_eq!(c.lazy_commit_pct, 70);
        assert!(c.bdm);
        assert_eq!(c.bdm_mb_per_sec, 1.5);
        assert_eq!(c.target_margin, 1.05);
        assert_eq!(
            c.thresholds,
            Profile::Exchange2013.thresholds(TestType::Performance)
        );
        assert_eq!(c.seed, 1);
        assert_eq!(c.logs_to_replay, 500);
        assert_eq!(c.compressibility, 1.7);
        assert_eq!(c.io_mode, IoMode::Direct);
        assert_eq!(c.backend, BackendKind::Auto);
        assert!(c.verify_after);
        assert!(!c.auto_tune);
        assert_eq!(c.threads, None);

        let stress = resolve_text("test = \"stress\"").unwrap();
        assert_eq!(stress.duration, Duration::from_secs(24 * 3600));
        assert_eq!(stress.thresholds.db_read_max_ms, 200.0);
    }

    #[test]
    fn layers_override_in_order() {
        let file = layer(
            "profile = \"exchange2007\"\ndatabases = 3\nduration = \"10m\"\nseed = 7\n\
             [thresholds]\ndb_read_avg_ms = 15.0\n",
        );
        let flags = ConfigFile {
            duration: Some(Duration::from_secs(60)),
            thresholds: ThresholdsFile {
                db_read_max_ms: Some(80.0),
                ..ThresholdsFile::default()
            },
            ..ConfigFile::default()
        };
        let c = RunConfig::resolve(&[quick_preset(), file, flags]).unwrap();
        // The file's profile sets the profile defaults the quick preset leaves alone.
        assert_eq!(c.profile, Profile::Exchange2007);
        assert_eq!(c.page_size, PageSize::K8);
        assert_eq!(c.op_mix, Profile::Exchange2007.defaults().op_mix);
        assert!(!c.bdm);
        // Quick preset values the later layers do not touch stay.
        assert_eq!(c.mailboxes, Some(1000));
        assert_eq!(c.cache_max, 16 * MIB);
        assert_eq!(c.sample_interval, Duration::from_secs(5));
        // File over quick, flags over file.
        assert_eq!(c.databases, 3);
        assert_eq!(c.seed, 7);
        assert_eq!(c.duration, Duration::from_secs(60));
        // Thresholds merge per field over the profile's.
        assert_eq!(c.thresholds.db_read_avg_ms, 15.0);
        assert_eq!(c.thresholds.db_read_max_ms, 80.0);
        assert_eq!(c.thresholds.log_write_max_ms, 50.0);
        // The test's default duration follows the last layer's test.
        let c = RunConfig::resolve(&[layer("test = \"performance\""), layer("test = \"stress\"")])
            .unwrap();
        assert_eq!(c.test, TestType::Stress);
        assert_eq!(c.duration, Duration::from_secs(86400));
    }

    #[test]
    fn quick_preset_resolves() {
        let c = RunConfig::resolve(&[quick_preset()]).unwrap();
        assert_eq!(c.databases, 2);
        assert_eq!(c.copies, 2);
        assert_eq!(c.database_size, 256 * MIB);
        assert_eq!((c.cache_min, c.cache_max), (8 * MIB, 16 * MIB));
        assert_eq!(c.cache_max_per_instance(), 8 * MIB);
        assert_eq!(c.duration, Duration::from_secs(45));
        assert_eq!(c.warmup_timeout, Duration::from_secs(30));
        assert!(c.bdm);
        assert_eq!(c.target_iops(), Some(120.0));
    }

    #[test]
    fn cache_bound_given_alone_moves_the_default() {
        let c = resolve_text("databases = 2\ncache_max = \"16MiB\"").unwrap();
        assert_eq!((c.cache_min, c.cache_max), (16 * MIB, 16 * MIB));
        let c = resolve_text("cache_min = \"1GiB\"").unwrap();
        assert_eq!((c.cache_min, c.cache_max), (GIB, GIB));
        let c = resolve_text("databases = 4").unwrap();
        assert_eq!((c.cache_min, c.cache_max), (128 * MIB, GIB));
    }

    #[test]
    fn database_size_is_derived() {
        // Mailbox profile: mailboxes × quota / databases, rounded down to MiB.
        let c = resolve_text("mailboxes = 5000\nmailbox_quota = \"2GB\"\ndatabases = 6").unwrap();
        assert_eq!(c.database_size, 5000 * 2_000_000_000 / 6 / MIB * MIB);
        // Explicit wins.
        let c = resolve_text("mailboxes = 5000\ndatabase_size = \"64MiB\"").unwrap();
        assert_eq!(c.database_size, 64 * MIB);
        // Too small a derived size names what to change.
        let err = resolve_text("mailboxes = 1\nmailbox_quota = \"1MiB\"").unwrap_err();
        assert_eq!(err.key(), Some("database_size"));
        assert!(err.to_string().contains("mailbox_quota"), "{err}");
    }

    #[test]
    fn capacity_pct_splits_free_space() {
        let dir = tempfile::tempdir().unwrap();
        // The database directory does not exist yet: its nearest ancestor is asked.
        let db = dir.path().join("not/yet/db");
        let file = ConfigFile {
            databases: Some(2),
            capacity_pct: Some(1.0),
            db_paths: Some(vec![db.clone()]),
            ..ConfigFile::default()
        };
        let free = edbstress_io::available_space(dir.path()).unwrap();
        if free / 200 < 2 * MIN_DATABASE_SIZE {
            eprintln!("skipped: too little free space for a 1% test");
            return;
        }
        let c = RunConfig::resolve(std::slice::from_ref(&file)).unwrap();
        assert_eq!(c.database_size % MIB, 0);
        // Free space moves on a busy machine: allow a generous margin.
        let expected = free / 200;
        assert!(
            c.database_size > expected / 2 && c.database_size < expected * 2,
            "{} vs {expected}",
            c.database_size
        );
        // A later layer's database_size wins over an earlier capacity_pct, and the
        // other way round; both in one layer is an error.
        let later_size = layer("database_size = \"8MiB\"");
        let c = RunConfig::resolve(&[file.clone(), later_size.clone()]).unwrap();
        assert_eq!(c.database_size, 8 * MIB);
        let c = RunConfig::resolve(&[later_size, file.clone()]).unwrap();
        assert_ne!(c.database_size, 8 * MIB);
        let both = ConfigFile {
            database_size: Some(8 * MIB),
            ..file
        };
        let err = RunConfig::resolve(&[both]).unwrap_err();
        assert_eq!(err.key(), Some("capacity_pct"));
    }

    #[test]
    fn every_validation_error_names_its_key() {
        let cases = [
            ("op_mix = \"40/20/5/30\"", "op_mix"),
            ("op_mix = \"140/0/0/0\"", "op_mix"),
            ("lazy_commits = 101", "lazy_commits"),
            ("databases = 0", "databases"),
            ("databases = 257", "databases"),
            ("copies = 0", "copies"),
            ("copies = 17", "copies"),
            ("iops_per_mailbox = 0.0", "iops_per_mailbox"),
            ("iops_per_mailbox = nan", "iops_per_mailbox"),
            ("mailboxes = 0", "mailboxes"),
            ("mailbox_quota = 0", "mailbox_quota"),
            ("cache_min = \"64MiB\"\ncache_max = \"32MiB\"", "cache_min"),
            ("databases = 4\ncache_max = \"2MiB\"", "cache_max"),
            ("cache_min = 1000\ncache_max = \"8MiB\"", "cache_min"),
            ("duration = \"500ms\"", "duration"),
            ("duration = \"10s\"\nsample_interval = \"15s\"", "duration"),
            ("sample_interval = \"100ms\"", "sample_interval"),
            ("threads = 0", "threads"),
            ("threads = 1025", "threads"),
            ("threads = 8\nauto_tune = true", "auto_tune"),
            ("capacity_pct = 0.0", "capacity_pct"),
            ("capacity_pct = 101", "capacity_pct"),
            ("database_size = \"3MiB\"", "database_size"),
            ("db_paths = []", "db_paths"),
            ("log_paths = []", "log_paths"),
            ("compressibility = 0.5", "compressibility"),
            ("compressibility = 11", "compressibility"),
            ("target_margin = 0.9", "target_margin"),
            ("target_margin = 2.5", "target_margin"),
            ("checkpoint_depth = 0", "checkpoint_depth"),
            ("bdm_rate = -1.0", "bdm_rate"),
            ("profile = \"exchange2007\"\nbdm = true", "bdm_rate"),
            ("logs_to_replay = 0", "logs_to_replay"),
            ("seed = 9223372036854775807\n", ""),
            (
                "[thresholds]\ndb_read_avg_ms = 0.0",
                "thresholds.db_read_avg_ms",
            ),
            (
                "[thresholds]\nlog_write_p99_ms = -5.0",
                "thresholds.log_write_p99_ms",
            ),
        ];
        for (text, key) in cases {
            let result = resolve_text(text);
            if key.is_empty() {
                assert!(result.is_ok(), "{text}: {result:?}");
                continue;
            }
            let err = result.expect_err(text);
            assert_eq!(err.key(), Some(key), "{text}: {err}");
            assert!(
                err.to_string().contains(&format!("`{key}`")),
                "{text}: {err}"
            );
        }
        // Keys the command line can set show the flag too.
        let err = resolve_text("databases = 300").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`databases` (--databases): 300 is out of range; use 1 to 256"
        );
    }

    #[test]
    fn parse_errors_name_the_key() {
        for (text, needle) in [
            ("databses = 2", "databses"),
            ("[thresholds]\ndb_read_avg = 2.0", "db_read_avg"),
            (
                "op_mix = { insert = 40, delete = 20, replace = 5, reed = 35 }",
                "reed",
            ),
            ("op_mix = { insert = 40 }", "delete"),
            ("page_size = \"64KiB\"", "page_size"),
            ("page_size = 1000", "page_size"),
            ("database_size = \"12 parsecs\"", "database_size"),
            ("database_size = -1", "database_size"),
            ("duration = \"soon\"", "duration"),
            ("test = \"speed\"", "test"),
            ("profile = \"exchange2003\"", "profile"),
            ("io_mode = \"fast\"", "io_mode"),
            ("backend = \"aio\"", "backend"),
            ("databases = \"six\"", "databases"),
            ("compressibility = \"zip\"", "compressibility"),
        ] {
            let err = ConfigFile::parse(text).expect_err(text);
            assert!(matches!(err, ConfigError::Parse { .. }));
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn value_forms() {
        let f = layer(
            "op_mix = \"25/10/50/15\"\npage_size = 8192\ndatabase_size = 67108864\n\
             duration = 90\nmailbox_quota = \"1.5GiB\"\ncompressibility = \"incompressible\"\n\
             test = \"database-backup\"\nprofile = \"2016\"",
        );
        assert_eq!(f.op_mix, Some(Profile::Exchange2007.defaults().op_mix));
        assert_eq!(f.page_size, Some(PageSize::K8));
        assert_eq!(f.database_size, Some(64 * MIB));
        assert_eq!(f.duration, Some(Duration::from_secs(90)));
        assert_eq!(f.mailbox_quota, Some(3 << 29));
        assert_eq!(f.compressibility, Some(1.0));
        assert_eq!(f.test, Some(TestType::DatabaseBackup));
        assert_eq!(f.profile, Some(Profile::Exchange2013));
        let table = layer("op_mix = { insert = 25, delete = 10, replace = 50, read = 15 }");
        assert_eq!(table.op_mix, f.op_mix);
        assert_eq!(
            layer("test = \"soft_recovery\"").test,
            Some(TestType::SoftRecovery)
        );

        assert_eq!(
            parse_op_mix(" 40 / 20 / 5 / 35 "),
            Ok(OpMix {
                insert: 40,
                delete: 20,
                replace: 5,
                read: 35
            })
        );
        assert!(parse_op_mix("40/20/40").unwrap_err().contains("40/20/5/35"));
        assert!(parse_op_mix("40/20/x/35").unwrap_err().contains("'x'"));
        assert_eq!(parse_on_off("OFF"), Ok(false));
        assert!(parse_on_off("maybe").is_err());
    }

    #[test]
    fn to_toml_round_trips() {
        let stress = layer(
            "test = \"stress\"\nprofile = \"exchange2010\"\ndatabases = 3\nthreads = 12\n\
             db_paths = [\"/mnt/a\", \"/mnt/b\"]\nlog_paths = [\"/mnt/log\"]\n\
             backup_path = \"/mnt/backup\"\nio_mode = \"buffered\"\nbackend = \"threads\"\n\
             verify_after = false\ncompressibility = 2.25\ndatabase_size = 123456789\n\
             sample_interval = \"1m 30s\"\ncache_max = \"1GB\"\n\
             [thresholds]\ndb_read_p99_ms = 50.0\n",
        );
        let template = ConfigFile::parse(&config_template()).unwrap();
        for layers in [
            vec![],
            vec![quick_preset()],
            vec![stress],
            vec![template],
            vec![layer(
                "test = \"soft-recovery\"\nauto_tune = true\nlogs_to_replay = 20",
            )],
        ] {
            let config = RunConfig::resolve(&layers).unwrap();
            let text = config.to_toml();
            assert!(text.starts_with("# effective configuration of this run"));
            let again = RunConfig::resolve(&[layer(&text)]).unwrap();
            assert_eq!(again, config, "{text}");
        }
        // Human units.
        let text = RunConfig::resolve(&[quick_preset()]).unwrap().to_toml();
        for line in [
            "database_size = \"256MiB\"",
            "duration = \"45s\"",
            "page_size = \"32KiB\"",
            "mailbox_quota = \"2GiB\"",
            "op_mix = \"40/20/5/35\"",
            "test = \"performance\"",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn template_resolves_and_shows_the_defaults() {
        let template = config_template();
        let c = RunConfig::resolve(&[ConfigFile::parse(&template).unwrap()]).unwrap();
        assert_eq!(c.mailboxes, Some(5000));
        assert_eq!(c.databases, 6);
        assert_eq!(c.copies, 2);
        assert_eq!(c.target_iops(), Some(600.0));
        // Uncommenting every `# key = default` line (not the examples) changes nothing:
        // the defaults the template shows are the real ones.
        let mut uncommented = String::new();
        let mut shown = 0;
        for line in template.lines() {
            let body = line.strip_prefix("# ").unwrap_or("");
            let is_setting = body.starts_with("[thresholds]")
                || body
                    .split_once(" = ")
                    .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            if is_setting && !body.contains("# example") {
                uncommented.push_str(body);
                shown += 1;
            } else {
                uncommented.push_str(line);
            }
            uncommented.push('\n');
        }
        assert!(shown >= 25, "only {shown} defaults shown");
        let explicit = RunConfig::resolve(&[ConfigFile::parse(&uncommented).unwrap()]).unwrap();
        assert_eq!(explicit, c);
    }
}
