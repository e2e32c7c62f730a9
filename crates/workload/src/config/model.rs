//! The resolved configuration of a run: every value explicit, validated.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{OpMix, Pacing, TestType};
use serde::{Deserialize, Serialize};

use super::file::{humantime_serde_compat, page_size_bytes};
use crate::profile::{Profile, Thresholds};

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
    /// Run although the databases are not several times the cache (or, buffered, the
    /// host's memory): the user says a cached test is intended.
    #[serde(default)]
    pub allow_cached_databases: bool,
    /// Sessions running transactions over all instances (None: chosen by the tool).
    pub threads: Option<u32>,
    /// Threads the sessions run on as tasks (None: one per CPU; 0: a thread of its own
    /// for every session, the model before tasks).
    #[serde(default)]
    pub session_threads: Option<u32>,
    /// Find the largest session count that meets the thresholds.
    pub auto_tune: bool,
    /// How transactions start (always Jetstress's closed loop for throughput runs).
    pub pacing: Pacing,
    /// Most each database may grow while auto-tuning, bytes (None: half the free space
    /// the run does not need, found when tuning starts).
    #[serde(default)]
    pub auto_tune_growth: Option<u64>,
    /// Fraction of each latency and stall limit an auto-tuning step must stay within.
    #[serde(default = "default_auto_tune_margin")]
    pub auto_tune_margin: f64,
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
    /// When the measured period starts (several hosts measuring together): the run
    /// prepares and warms up, then keeps the load running until this moment. Set per
    /// run (`--start-at`), never from a file.
    #[serde(skip)]
    pub start_at: Option<std::time::SystemTime>,
    /// The host name the results record (`--host-name`; default: the system's).
    #[serde(skip)]
    pub host_name: Option<String>,
    /// The fleet this run was started for (`--fleet-id`, set by `fleet run`): recorded
    /// in the results so that the fleet collects only its own runs. Never from a file.
    #[serde(skip)]
    pub fleet_id: Option<String>,
    /// The ESRP campaign this run was started for (`--campaign-id`, set by `esrp run`):
    /// recorded in the results so that the solution document counts only the
    /// campaign's runs. Never from a file.
    #[serde(skip)]
    pub campaign_id: Option<String>,
    /// Write a progress line (phase, elapsed time, rates and latencies so far) to the
    /// test log at this interval; the CLI sets it when standard error is not a
    /// terminal. Set per run, never from a file.
    #[serde(skip)]
    pub progress_interval: Option<Duration>,
}

/// The tuning margin of results and files written before it existed.
fn default_auto_tune_margin() -> f64 {
    crate::autotune::DEFAULT_MARGIN
}

impl RunConfig {
    /// Mailboxes × IOPS per mailbox; None for throughput runs.
    pub fn target_iops(&self) -> Option<f64> {
        self.mailboxes.map(|m| m as f64 * self.iops_per_mailbox)
    }

    /// Whether transactions start on an open-loop schedule (mailbox-profile runs paced
    /// open loop).
    pub fn open_loop(&self) -> bool {
        self.pacing == Pacing::OpenLoop && self.target_iops().is_some()
    }

    /// The pacing that runs: as set, except that a run without a target (a throughput
    /// run) is always closed loop, Jetstress's way.
    pub fn effective_pacing(&self) -> Pacing {
        if self.target_iops().is_some() {
            self.pacing
        } else {
            Pacing::Jetstress
        }
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

    /// Threads that run `sessions` sessions as tasks: the asked count (by default one
    /// per CPU, [`edbstress_io::tasks::default_threads`]), at most one per session; 0
    /// when each session has a thread of its own.
    pub fn session_threads_for(&self, sessions: u32) -> u32 {
        self.session_threads
            .unwrap_or_else(edbstress_io::tasks::default_threads)
            .min(sessions)
    }

    /// The session count used when not auto-tuning.
    pub fn sessions(&self) -> u32 {
        self.threads.unwrap_or_else(|| self.default_threads())
    }

    /// How much each database is expected to grow over the run, bytes: inserts
    /// outnumber deletes in every profile's mix, so the files grow with the
    /// transactional I/O. Mailbox-profile Performance/Stress runs: the target (with the
    /// open-loop margin) × the measured duration × [`GROWTH_PER_TRANSACTIONAL_IO`];
    /// SoftRecovery: the log it generates × [`GROWTH_PER_LOG_BYTE`]; plus the warm-up's
    /// ([`RunConfig::warmup_growth_per_database`]) and `auto_tune_growth` when given for
    /// an auto-tuning run; at least one growth step of the file. None for throughput runs
    /// (no rate is known beforehand) and DatabaseBackup (no writes).
    pub fn expected_growth_per_database(&self) -> Option<u64> {
        let databases = f64::from(self.databases.max(1));
        // A database grows a step at a time (1 % of its size, at least 1 MiB): a run
        // that grows it at all grows it by a whole step.
        let step = (self.database_size / 100).max(1 << 20) as f64;
        let bytes = match self.test {
            TestType::Performance | TestType::Stress => {
                self.target_iops()?
                    * self.target_margin
                    * self.duration.as_secs_f64()
                    * GROWTH_PER_TRANSACTIONAL_IO as f64
                    / databases
                    + self.warmup_growth_per_database() as f64
                    + self
                        .auto_tune_growth
                        .filter(|_| self.auto_tune)
                        .unwrap_or(0) as f64
            }
            TestType::SoftRecovery => {
                f64::from(self.logs_to_replay) * LOG_FILE_BYTES as f64 * GROWTH_PER_LOG_BYTE
            }
            TestType::DatabaseBackup => return None,
        };
        Some(bytes.max(step).ceil().min(u64::MAX as f64) as u64)
    }

    /// How much the warm-up may grow each database, bytes: it runs the mix closed loop
    /// until the cache is 90 % full, and the pages its inserts add stay in the cache
    /// until then, so about the cache per instance and one growth step of the file. The
    /// engine holds the warm-up to it (a warm-up that reaches it ends there).
    pub fn warmup_growth_limit_per_database(&self) -> u64 {
        let step = (self.database_size / 100).max(1 << 20);
        self.cache_max_per_instance().saturating_add(step)
    }

    /// The warm-up's growth the free-space check budgets per database: its limit
    /// ([`RunConfig::warmup_growth_limit_per_database`]), or nothing when the database
    /// fits in 90 % of its cache (the warm-up is then skipped: such a cache never fills).
    pub fn warmup_growth_per_database(&self) -> u64 {
        if self.database_size.saturating_mul(10) < self.cache_max_per_instance().saturating_mul(9) {
            0
        } else {
            self.warmup_growth_limit_per_database()
        }
    }
}

/// Database growth per transactional I/O budgeted before a run, bytes: the engine's
/// measured growth with the Exchange 2010/2013 mix since the view index and the
/// realistic prepare fill, ~2 KB per transaction: 525–570 B per I/O in 60 s runs and
/// 946–1,072 B at the reference runs' steady state, where a warm cache makes fewer I/Os
/// per transaction (bench/fidelity; docs/fidelity.md), with a margin of ~1.45× over the
/// latter. Jetstress grows its databases by ~330–520 B per transactional I/O; the
/// check budgets what this engine does.
pub const GROWTH_PER_TRANSACTIONAL_IO: u64 = 1536;

/// Database growth per byte of log generated (the same measurements: growth per I/O ÷
/// log bytes per I/O, 0.49–0.79, with a margin of ~1.5×), for SoftRecovery's log
/// generation.
pub const GROWTH_PER_LOG_BYTE: f64 = 1.2;

/// Bytes of one log file (generation).
const LOG_FILE_BYTES: u64 = 1 << 20;
