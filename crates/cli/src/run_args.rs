//! The options of a test run: a configuration file, the `--quick` preset, and flags
//! that override both. `edbstress config show` takes them too, to print the
//! configuration a run would use.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{OpMix, TestType};
use edbstress_workload::config::{
    ConfigFile, RunConfig, parse_compressibility, parse_on_off, parse_op_mix, parse_profile,
    parse_test_type, quick_preset,
};
use edbstress_workload::profile::Profile;
use edbstress_workload::units::parse_duration;

use crate::common::{CommandError, PathArgs, parse_backend};
use crate::flags::config_error;
use crate::units::{count, parse_page_size, parse_size};

/// Options of a run. Precedence, lowest first: the profile's defaults, `--quick`, the
/// `--config` file, the other flags. Values are checked when resolved, with messages
/// naming the configuration key.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// TOML configuration file (write one with `edbstress config init`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A small run of under a minute: 1000 mailboxes on 2 × 256 MiB databases, 45 s.
    #[arg(long)]
    pub quick: bool,
    /// Test: performance, stress, database-backup or soft-recovery [default: performance].
    #[arg(long, value_name = "TEST", value_parser = parse_test_type)]
    pub test: Option<TestType>,
    /// Version profile: exchange2007, exchange2010, exchange2013, exchange2016 or exchange2019
    /// [default: exchange2013].
    #[arg(long, value_name = "PROFILE", value_parser = parse_profile)]
    pub profile: Option<Profile>,
    /// Mailboxes: makes a mailbox-profile run with a target of mailboxes × IOPS per mailbox.
    #[arg(long, value_name = "N", value_parser = count::<u64>("a count", 0, None), allow_hyphen_values = true)]
    pub mailboxes: Option<u64>,
    /// Transactional IOPS per mailbox [default: 0.12].
    #[arg(long, value_name = "IOPS")]
    pub iops_per_mailbox: Option<f64>,
    /// Mailbox quota, e.g. 2GB [default: 2GB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub mailbox_quota: Option<u64>,
    /// Number of databases (instances), 1 to 256 [default: 1].
    #[arg(long, value_name = "N", value_parser = count::<u32>("a count", 0, None), allow_hyphen_values = true)]
    pub databases: Option<u32>,
    /// Size of each database file, e.g. 256MiB [default: derived from mailboxes, else 1GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub database_size: Option<u64>,
    /// Throughput runs: fill this percentage of the free space, split over the databases.
    #[arg(long, value_name = "PCT")]
    pub capacity_pct: Option<f64>,
    /// Database copies, 1 to 16; each extra copy adds a log replication reader [default: 1].
    #[arg(long, value_name = "N", value_parser = count::<u32>("a count", 0, None), allow_hyphen_values = true)]
    pub copies: Option<u32>,
    #[command(flatten)]
    pub paths: PathArgs,
    /// Database page size: 4KiB, 8KiB, 16KiB or 32KiB [default: the profile's].
    #[arg(long, value_name = "SIZE", value_parser = parse_page_size, allow_hyphen_values = true)]
    pub page_size: Option<PageSize>,
    /// Maximum database cache for the whole run [default: 256MiB per database].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub cache_max: Option<u64>,
    /// Minimum database cache for the whole run [default: 32MiB per database].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub cache_min: Option<u64>,
    /// Largest coalesced database write [default: 384KiB for exchange2010/2013, one page for exchange2007].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, allow_hyphen_values = true)]
    pub write_coalesce: Option<u64>,
    /// Log page images so recovery can rebuild pages torn by a power cut (costs about
    /// one page of log per database page written).
    #[arg(long)]
    pub torn_write_protection: bool,
    /// Sessions running transactions, 1 to 1024 [default: 4 per database, at least 8].
    #[arg(long, value_name = "N", value_parser = count::<u32>("a count", 0, None), allow_hyphen_values = true)]
    pub threads: Option<u32>,
    /// Threads the sessions run on as tasks; 0 gives each session a thread of its own
    /// [default: one per CPU].
    #[arg(long, value_name = "N", value_parser = count::<u32>("a count", 0, None), allow_hyphen_values = true)]
    pub session_threads: Option<u32>,
    /// Find the largest session count that meets the thresholds.
    #[arg(long)]
    pub auto_tune: bool,
    /// Measured duration, e.g. 2h, 30m [default: 2h; stress 24h].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Counter sampling interval [default: 15s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, allow_hyphen_values = true)]
    pub sample_interval: Option<Duration>,
    /// Operation mix insert/delete/replace/read in percent, e.g. 40/20/5/35.
    #[arg(long, value_name = "I/D/R/R", value_parser = parse_op_mix)]
    pub op_mix: Option<OpMix>,
    /// Share of lazy commits, percent [default: the profile's].
    #[arg(long, value_name = "PCT", value_parser = count::<u32>("a percentage", 0, None), allow_hyphen_values = true)]
    pub lazy_commits: Option<u32>,
    /// Background database maintenance: on or off [default: the profile's].
    #[arg(long, value_name = "on|off", value_parser = parse_on_off)]
    pub bdm: Option<bool>,
    /// BDM read rate per database, MiB/s [default: the profile's].
    #[arg(long, value_name = "MiB/s")]
    pub bdm_rate: Option<f64>,
    /// Where run directories are created [default: edbstress-results].
    #[arg(long, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// Seed of the transactions and of new databases' content [default: 1].
    #[arg(long, value_name = "N", value_parser = count::<u64>("a seed", 0, None), allow_hyphen_values = true)]
    pub seed: Option<u64>,
    /// database-backup: also write the copy of each database here.
    #[arg(long, value_name = "DIR")]
    pub backup_path: Option<PathBuf>,
    /// soft-recovery: log files to generate per instance before the crash [default: 500].
    #[arg(long, value_name = "N", value_parser = count::<u32>("a count", 0, None), allow_hyphen_values = true)]
    pub logs_to_replay: Option<u32>,
    /// Content compressibility of new databases: 'mail' (1.7), 'incompressible', or a ratio.
    #[arg(long, value_name = "RATIO", value_parser = parse_compressibility)]
    pub compressibility: Option<f64>,
    /// Use buffered I/O (through the page cache) instead of direct I/O.
    #[arg(long)]
    pub buffered: bool,
    /// I/O backend: auto (io_uring, else threads), io_uring or threads [default: auto].
    #[arg(long, value_name = "BACKEND", value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
    /// Run even though the databases are not several times the cache (or, with
    /// --buffered, the host's memory): a cached run measures memory, not storage.
    #[arg(long)]
    pub allow_cached_databases: bool,
    /// Skip the checksum verification after performance and stress tests.
    #[arg(long)]
    pub no_verify: bool,
}

impl RunArgs {
    /// The layer the flags make: only what was given on the command line.
    pub fn flags_layer(&self) -> ConfigFile {
        let or_none = |paths: &Vec<PathBuf>| (!paths.is_empty()).then(|| paths.clone());
        ConfigFile {
            test: self.test,
            profile: self.profile,
            mailboxes: self.mailboxes,
            iops_per_mailbox: self.iops_per_mailbox,
            mailbox_quota: self.mailbox_quota,
            databases: self.databases,
            database_size: self.database_size,
            capacity_pct: self.capacity_pct,
            copies: self.copies,
            db_paths: or_none(&self.paths.db_paths),
            log_paths: or_none(&self.paths.log_paths),
            page_size: self.page_size,
            cache_min: self.cache_min,
            cache_max: self.cache_max,
            write_coalesce: self.write_coalesce,
            torn_write_protection: self.torn_write_protection.then_some(true),
            allow_cached_databases: self.allow_cached_databases.then_some(true),
            threads: self.threads,
            session_threads: self.session_threads,
            auto_tune: self.auto_tune.then_some(true),
            duration: self.duration,
            sample_interval: self.sample_interval,
            op_mix: self.op_mix,
            lazy_commits: self.lazy_commits,
            bdm: self.bdm,
            bdm_rate: self.bdm_rate,
            results_dir: self.results_dir.clone(),
            seed: self.seed,
            backup_path: self.backup_path.clone(),
            logs_to_replay: self.logs_to_replay,
            compressibility: self.compressibility,
            io_mode: self.buffered.then_some(IoMode::Buffered),
            backend: self.backend,
            verify_after: self.no_verify.then_some(false),
            ..ConfigFile::default()
        }
    }

    /// The layers in precedence order: `--quick`, the `--config` file, the flags.
    pub fn layers(&self) -> Result<Vec<ConfigFile>, CommandError> {
        let mut layers = Vec::with_capacity(3);
        if self.quick {
            layers.push(quick_preset());
        }
        if let Some(path) = &self.config {
            layers.push(ConfigFile::load(path).map_err(config_error)?);
        }
        layers.push(self.flags_layer());
        Ok(layers)
    }

    /// The resolved and validated configuration; an error names the key at fault and
    /// the flag that sets it.
    pub fn resolve(&self) -> Result<RunConfig, CommandError> {
        RunConfig::resolve(&self.layers()?).map_err(config_error)
    }
}
