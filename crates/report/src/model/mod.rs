//! The results of one run, as written to `results.json` (see `docs/results-schema.md`).
//!
//! Field names are the schema: renaming one is a schema change and needs a new
//! [`SCHEMA_VERSION`]. Adding an optional field is not.

use std::collections::BTreeMap;

use edbstress_io::{IoClass, LatencyHistogram};
use serde::{Deserialize, Serialize};

mod host;
pub mod run_files;

pub use host::{
    DiskSummary, HostCounters, KernelLog, KernelLogEvent, StorageDevice, Volume, VolumeRole,
};

/// Version of the `results.json` layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Which test ran (names as in Jetstress).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestType {
    /// Transactional load for the test duration, Jetstress's default thresholds.
    Performance,
    /// A long transactional run with lenient maximum-latency thresholds.
    Stress,
    /// Sequential 256 KB reads of every database.
    DatabaseBackup,
    /// Replay of generated logs after a crash.
    SoftRecovery,
}

/// How a transactional run started its transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// Jetstress's way: closed loop at a thread count (auto-tuned or given), every
    /// session starting its next transaction when the last ends; a mailbox-profile run
    /// passes when it achieves at least the target, and the excess is its headroom.
    Jetstress,
    /// Transactions arrive on a schedule at the target rate (plus a margin), whatever
    /// the storage does; latency counts from each transaction's intended start, so a
    /// stalling device shows as latency (the honest-latency mode).
    OpenLoop,
}

impl Pacing {
    /// The configuration spelling: "jetstress", "open-loop".
    pub fn name(self) -> &'static str {
        match self {
            Pacing::Jetstress => "jetstress",
            Pacing::OpenLoop => "open-loop",
        }
    }

    /// How a report names it, with the session count.
    pub fn describe(self, threads: u32, tuned: bool) -> String {
        match self {
            Pacing::Jetstress => format!(
                "Jetstress pacing: closed loop at {threads} threads ({}), each starting its next transaction when the last ends",
                if tuned {
                    "auto-tuned: the most that met the latency thresholds"
                } else {
                    "as given"
                }
            ),
            Pacing::OpenLoop => "open loop at the target rate (plus a margin); latency measured from each transaction's intended start".to_string(),
        }
    }
}

impl TestType {
    /// Every test type.
    pub const ALL: [TestType; 4] = [
        TestType::Performance,
        TestType::Stress,
        TestType::DatabaseBackup,
        TestType::SoftRecovery,
    ];

    /// Jetstress's name, also the run directory prefix: "Performance", "DatabaseBackup".
    pub fn label(self) -> &'static str {
        match self {
            TestType::Performance => "Performance",
            TestType::Stress => "Stress",
            TestType::DatabaseBackup => "DatabaseBackup",
            TestType::SoftRecovery => "SoftRecovery",
        }
    }

    /// The command-line spelling: "performance", "database-backup".
    pub fn cli_name(self) -> &'static str {
        match self {
            TestType::Performance => "performance",
            TestType::Stress => "stress",
            TestType::DatabaseBackup => "database-backup",
            TestType::SoftRecovery => "soft-recovery",
        }
    }

    /// Whether the test runs transactions (and is judged by the latency rules).
    pub fn is_transactional(self) -> bool {
        matches!(self, TestType::Performance | TestType::Stress)
    }
}

/// The overall verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Every criterion met.
    Pass,
    /// At least one criterion missed (or the run was aborted).
    Fail,
}

impl Verdict {
    /// "Pass" or "Fail".
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "Pass",
            Verdict::Fail => "Fail",
        }
    }
}

/// How a measured value is compared with its threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Comparison {
    /// Passes when measured ≤ threshold.
    AtMost,
    /// Passes when measured ≥ threshold.
    AtLeast,
}

impl Comparison {
    /// "≤" or "≥".
    pub fn symbol(self) -> &'static str {
        match self {
            Comparison::AtMost => "<=",
            Comparison::AtLeast => ">=",
        }
    }

    /// Whether `measured` meets `threshold`.
    pub fn holds(self, measured: f64, threshold: f64) -> bool {
        match self {
            Comparison::AtMost => measured <= threshold,
            Comparison::AtLeast => measured >= threshold,
        }
    }
}

/// One pass/fail criterion as evaluated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    /// Machine name: "db_read_avg_latency", "transactional_iops", ...
    pub key: String,
    /// Human name in Jetstress's wording.
    pub name: String,
    /// "Instance0001" (per instance) or "Total".
    pub scope: String,
    /// What was measured.
    pub measured: f64,
    /// The limit.
    pub threshold: f64,
    /// How the two compare.
    pub comparison: Comparison,
    /// Unit of both numbers: "ms", "IOPS", "per sec", "count".
    pub unit: String,
    /// Whether the criterion is met.
    pub passed: bool,
    /// The inputs of the criterion were not measured (no I/O of its class, the run
    /// stopped before measuring): `measured` means nothing and the criterion is not met.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_measured: bool,
    /// What the figures alone do not say, e.g. why a run was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Criterion {
    /// Whether the figures meet the threshold: never for a criterion not measured.
    pub fn holds(&self) -> bool {
        !self.not_measured && self.comparison.holds(self.measured, self.threshold)
    }

    /// The measured value as people read it: the number and unit, or "not measured".
    pub fn measured_text(&self) -> String {
        if self.not_measured {
            "not measured".to_string()
        } else {
            crate::text::quantity(self.measured, &self.unit)
        }
    }

    /// The result as a word: PASS, FAIL, or NOT MEASURED (which is not met either).
    pub fn result_word(&self) -> &'static str {
        match (self.passed, self.not_measured) {
            (_, true) => "NOT MEASURED",
            (true, false) => "PASS",
            (false, false) => "FAIL",
        }
    }

    /// One line: "Instance0001: Database Reads Average Latency 23.400 ms > 20 ms",
    /// "… not measured (limit ≤ 20 ms)", then the note.
    pub fn describe(&self) -> String {
        let note = self
            .note
            .as_ref()
            .map_or(String::new(), |n| format!(" -- {n}"));
        if self.not_measured {
            return format!(
                "{}: {} not measured (limit {} {} {}){note}",
                self.scope,
                self.name,
                self.comparison.symbol(),
                format_number(self.threshold),
                self.unit
            );
        }
        let op = match (self.passed, self.comparison) {
            (true, c) => c.symbol(),
            (false, Comparison::AtMost) => ">",
            (false, Comparison::AtLeast) => "<",
        };
        format!(
            "{}: {} {} {} {} {} {}{note}",
            self.scope,
            self.name,
            format_number(self.measured),
            self.unit,
            op,
            format_number(self.threshold),
            self.unit
        )
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The tool that made the results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// "edbstress".
    pub name: String,
    /// Its version.
    pub version: String,
}

/// The machine the run was on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Operating system ("Debian GNU/Linux 13 (trixie)").
    pub os: String,
    /// Kernel release.
    pub kernel: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Installed memory in MB.
    pub memory_mb: u64,
}

/// Share of each operation in the transaction mix, in percent (they add up to 100).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpMix {
    /// Insert a message.
    pub insert: u32,
    /// Delete a message.
    pub delete: u32,
    /// Replace a message's properties (and sometimes its body).
    pub replace: u32,
    /// Read a message.
    pub read: u32,
}

/// The parameters the run used (Jetstress's "System Parameters"), for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SystemParameters {
    /// Version profile: "exchange2013", ...
    pub profile: String,
    /// Mailbox-profile runs: mailboxes.
    pub mailboxes: Option<u64>,
    /// Mailbox-profile runs: transactional IOPS per mailbox.
    pub iops_per_mailbox: Option<f64>,
    /// Mailbox-profile runs: mailbox quota in MB.
    pub mailbox_quota_mb: Option<u64>,
    /// Number of databases (instances).
    pub databases: u32,
    /// Database copies (1 = no replication).
    pub copies: u32,
    /// Page size in bytes.
    pub page_size: u32,
    /// Size of each database file in bytes, as asked.
    pub database_bytes: u64,
    /// Sessions running transactions (the chosen count after auto-tuning).
    pub threads: u32,
    /// Threads the sessions ran on as tasks; 0: a thread per session (also in results
    /// written before sessions ran as tasks).
    #[serde(default)]
    pub session_threads: u32,
    /// Whether transactions started on an open-loop schedule.
    pub open_loop: bool,
    /// Transactional runs: the pacing that ran (absent in results written before the
    /// setting existed: open loop when `open_loop`, else closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<Pacing>,
    /// Minimum database cache per instance, bytes.
    pub cache_min_bytes: u64,
    /// Maximum database cache per instance, bytes.
    pub cache_max_bytes: u64,
    /// Checkpoint depth per instance, bytes.
    pub checkpoint_depth_bytes: u64,
    /// Page images logged for torn-write protection (absent in results written
    /// before the option existed: off).
    #[serde(default)]
    pub torn_write_protection: bool,
    /// Operation mix.
    pub op_mix: OpMix,
    /// Share of commits that are lazy, percent.
    pub lazy_commit_pct: u32,
    /// Background database maintenance on.
    pub bdm: bool,
    /// BDM read rate per database, MB/s.
    pub bdm_mb_per_sec: f64,
    /// Test duration asked for, seconds.
    pub duration_seconds: f64,
    /// Sampling interval, seconds.
    pub sample_interval_seconds: f64,
    /// Seed of the transaction generator.
    pub seed: u64,
    /// "direct" or "buffered".
    pub io_mode: String,
    /// I/O backend of background writes: "io_uring" or "threads".
    pub backend: String,
}

/// Database sizes before and after the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseSizing {
    /// Number of databases.
    pub database_count: u32,
    /// Sum of database file sizes at the start, bytes.
    pub initial_bytes: u64,
    /// Sum at the end, bytes.
    pub final_bytes: u64,
}

/// Figures of one I/O class (of one instance, or totalled over all).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    /// Successful I/Os.
    pub count: u64,
    /// Failed I/Os.
    pub errors: u64,
    /// I/Os per second over the measured period.
    pub per_sec: f64,
    /// Average bytes per I/O.
    pub avg_bytes: f64,
    /// Average latency, ms.
    pub avg_latency_ms: f64,
    /// Highest average latency of one sampling interval, ms (Jetstress's "maximum").
    pub max_interval_latency_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Highest single latency, ms.
    pub max_ms: f64,
    /// The full latency histogram (mergeable across instances and runs).
    pub histogram: LatencyHistogram,
}

/// Figures per I/O class, keyed by class name ("db_read", ...).
pub type IoSummary = BTreeMap<IoClass, ClassSummary>;

/// Transactions of a run (of one instance, or totalled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TransactionSummary {
    /// Transactions completed in the measured period.
    pub count: u64,
    /// Per second.
    pub per_sec: f64,
    /// Inserts.
    pub inserts: u64,
    /// Deletes.
    pub deletes: u64,
    /// Replaces.
    pub replaces: u64,
    /// Reads.
    pub reads: u64,
    /// Commits that did not wait for the log.
    pub lazy_commits: u64,
    /// Transactions that failed with an error.
    pub errors: u64,
    /// Latency from the intended start (open loop) or the actual start (closed loop) to
    /// completion.
    pub latency: LatencySummary,
}

/// Average and percentiles of a latency histogram, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Average.
    pub avg_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Highest.
    pub max_ms: f64,
    /// The histogram.
    pub histogram: LatencyHistogram,
}

/// Engine counters of one instance over the measured period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineSummary {
    /// Database cache size at the end, MB.
    pub cache_size_mb: f64,
    /// Maximum cache size, MB.
    pub cache_max_mb: f64,
    /// Cache hit ratio, percent of page requests found in the cache.
    pub cache_hit_pct: f64,
    /// Average database page fault stalls per second (no free page for a read).
    pub page_fault_stalls_per_sec: f64,
    /// Average checkpoint depth, MB of log.
    pub checkpoint_depth_mb: f64,
    /// Log generation at the end.
    pub log_generation: u32,
    /// Log files written during the measured period.
    pub log_files_written: u32,
    /// Log bytes written per second.
    pub log_bytes_per_sec: f64,
    /// Bytes of pages newly allocated from the end of the database file during the
    /// measured period (pages reused from the free list excluded): the database's
    /// growth without the file's extension granularity (absent in older files: 0).
    #[serde(default)]
    pub allocated_bytes: u64,
    /// Transactions per second that waited for the checkpoint because they took the
    /// checkpoint depth past its hard limit (the page writer fell that far behind;
    /// absent in older files: 0).
    #[serde(default)]
    pub checkpoint_waits_per_sec: f64,
}

/// Results of one instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InstanceResult {
    /// "Instance0001".
    pub name: String,
    /// Instance number as in file names (from 1).
    pub instance: u32,
    /// Database file.
    pub database_path: String,
    /// Log directory.
    pub log_path: String,
    /// Database file size at the start and at the end, bytes.
    pub initial_bytes: u64,
    /// Database file size at the end, bytes.
    pub final_bytes: u64,
    /// I/O per class.
    pub io: IoSummary,
    /// Transactional runs: transactions.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<TransactionSummary>,
    /// Transactional runs: engine counters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub engine: Option<EngineSummary>,
    /// DatabaseBackup: read throughput of this database, MB/s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mb_per_sec: Option<f64>,
    /// DatabaseBackup: bytes read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_read: Option<u64>,
    /// DatabaseBackup: where the copy of this database was written, if one was.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub backup_path: Option<String>,
    /// SoftRecovery: log files generated before the crash.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logs_generated: Option<u32>,
    /// SoftRecovery: log files replayed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logs_replayed: Option<u32>,
    /// DatabaseBackup and SoftRecovery: seconds the instance took.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub elapsed_seconds: Option<f64>,
}

/// Totals over all instances.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// I/O per class.
    pub io: IoSummary,
    /// Transactional runs: transactions.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<TransactionSummary>,
    /// DatabaseBackup: total read throughput, MB/s.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mb_per_sec: Option<f64>,
    /// SoftRecovery: average seconds to replay one log file.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seconds_per_log: Option<f64>,
}

/// Minimum, average and maximum of a sampled value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// Lowest sample.
    pub min: f64,
    /// Average of the samples.
    pub avg: f64,
    /// Highest sample.
    pub max: f64,
}

impl Range {
    /// Range of `values`; zeros when empty.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Range {
        let (mut min, mut max, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0u64);
        for v in values {
            min = min.min(v);
            max = max.max(v);
            sum += v;
            n += 1;
        }
        if n == 0 {
            return Range::default();
        }
        Range {
            min,
            avg: sum / n as f64,
            max,
        }
    }
}

/// One session count tried by auto-tuning.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoTuneStep {
    /// Sessions.
    pub threads: u32,
    /// Transactional IOPS achieved.
    pub achieved_iops: f64,
    /// Average database read latency, ms.
    pub db_read_avg_ms: f64,
    /// Average log write latency, ms.
    pub log_write_avg_ms: f64,
    /// The highest instance's Database Page Fault Stalls/sec (absent in results
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_fault_stalls_per_sec: Option<f64>,
    /// Whether the step met the thresholds (and the target, if any), each within the
    /// tuning margin of its limit.
    pub passed: bool,
    /// Seconds measured.
    pub seconds: f64,
    /// The criteria a failed step did not meet, each as one line (empty when passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_criteria: Vec<String>,
    /// The criteria the step met but not within the tuning margin of their limit,
    /// each as one line: they too keep the count from being chosen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub over_margin: Vec<String>,
    /// A confirmation step: the count the search chose, run for a longer window
    /// before the measured phase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmation: bool,
}

/// What auto-tuning chose and the curve it explored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoTune {
    /// The largest session count that passed its search step and its confirmation
    /// (the run then used it).
    pub chosen_threads: u32,
    /// Every step, in the order tried (confirmation steps included).
    pub steps: Vec<AutoTuneStep>,
    /// The fraction of each latency and stall limit a step had to stay within to pass
    /// (absent in results written before the margin existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// Why the chosen count was chosen, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_chosen: Option<String>,
    /// How much the databases together could grow while tuning, bytes (absent when
    /// nothing was budgeted: a run without a target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_budget_bytes: Option<u64>,
    /// How much they grew while tuning, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth_bytes: Option<u64>,
    /// Why the search ended before it converged to stay within the budget, or which
    /// steps were shortened for it; absent when the budget never constrained it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub space_notes: Vec<String>,
}

/// Offline check of one database after the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseVerification {
    /// Database file.
    pub path: String,
    /// Pages read.
    pub pages_seen: u64,
    /// Pages with an uncorrectable checksum mismatch.
    pub bad_pages: u64,
    /// Pages with a single-bit error.
    pub correctable_pages: u64,
    /// Pages holding another page's content.
    pub wrong_page_number: u64,
    /// Seconds.
    pub seconds: f64,
    /// Read throughput, MB/s.
    pub mb_per_sec: f64,
}

/// Offline check of one log directory after the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogVerification {
    /// Log directory.
    pub path: String,
    /// Log files checked.
    pub files: u64,
    /// Segments checked.
    pub segments_seen: u64,
    /// Segments with a checksum mismatch.
    pub bad_segments: u64,
    /// What breaks the log as recovery reads it (a missing or truncated generation, a
    /// file of another database, a log shorter than its database requires).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequence_problems: Vec<String>,
}

/// A sampling interval that lasted far longer than asked: the process was stopped or
/// starved, or something it waited on (the storage) stopped responding, so the
/// interval's averages cover a period nobody measured properly.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SamplingStall {
    /// The interval's number (as in `samples`).
    pub interval: u32,
    /// Seconds since measurement started, at the interval's end.
    pub elapsed_s: f64,
    /// How long the interval lasted.
    pub seconds: f64,
    /// The sample interval asked for.
    pub expected_seconds: f64,
}

impl SamplingStall {
    /// "sampling stalled: interval 3 lasted 21.0 s, expected 1 s; …".
    pub fn describe(&self) -> String {
        format!(
            "sampling stalled: interval {} lasted {:.1} s, expected {} s; the process or the storage stopped responding",
            self.interval,
            self.seconds,
            format_number(self.expected_seconds)
        )
    }
}

/// Checksum verification after the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// Whether every page and segment was intact.
    pub passed: bool,
    /// Per database.
    pub databases: Vec<DatabaseVerification>,
    /// Per log directory.
    pub logs: Vec<LogVerification>,
}

/// What a sample row describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleFamily {
    /// One I/O class of one instance (or the total).
    Io(IoClass),
    /// Transactions of one instance (or the total).
    Transactions,
    /// Engine counters of one instance.
    Engine,
    /// Host counters.
    Host,
    /// One block device.
    Disk,
}

impl SampleFamily {
    /// The `family` column: the I/O class name, "transactions", "engine", "host", "disk".
    pub fn name(self) -> &'static str {
        match self {
            SampleFamily::Io(class) => class.name(),
            SampleFamily::Transactions => "transactions",
            SampleFamily::Engine => "engine",
            SampleFamily::Host => "host",
            SampleFamily::Disk => "disk",
        }
    }
}

/// One row of the time series: one interval, one scope, one counter family. Only the
/// fields of the row's family are set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Interval number, from 1.
    pub interval: u32,
    /// Seconds since measurement started, at the end of the interval.
    pub elapsed_s: f64,
    /// Wall-clock time at the end of the interval (RFC 3339).
    pub timestamp: String,
    /// "Instance0001", "Total" or "Host".
    pub scope: String,
    /// Counter family: an I/O class name, "transactions", "engine", "host" or "disk".
    pub family: String,
    /// Disk rows: the device.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub device: Option<String>,
    /// I/O and transaction rows: operations per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub per_sec: Option<f64>,
    /// I/O rows: MB per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mb_per_sec: Option<f64>,
    /// I/O rows: average bytes.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub avg_bytes: Option<f64>,
    /// I/O and transaction rows: average latency, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub avg_latency_ms: Option<f64>,
    /// I/O and transaction rows: 99th percentile, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub p99_ms: Option<f64>,
    /// I/O and transaction rows: highest latency, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_ms: Option<f64>,
    /// I/O and transaction rows: errors.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub errors: Option<u64>,
    /// I/O rows of the "Total" scope: the interval's latency histogram in HdrHistogram's
    /// V2 compressed encoding, base64 (results-schema.md), so the interval's percentiles
    /// of several hosts merge exactly (`edbstress aggregate`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub latency_histogram: Option<String>,
    /// Engine rows: cache size, MB.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_mb: Option<f64>,
    /// Engine rows: cache hit ratio, percent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cache_hit_pct: Option<f64>,
    /// Engine rows: page fault stalls per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub page_fault_stalls_per_sec: Option<f64>,
    /// Engine rows: checkpoint depth, MB.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub checkpoint_depth_mb: Option<f64>,
    /// Engine rows: log generation.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub log_generation: Option<u32>,
    /// Host rows: CPU busy, percent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cpu_pct: Option<f64>,
    /// Host rows: available memory, MB.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub available_memory_mb: Option<f64>,
    /// Host rows: page faults per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub page_faults_per_sec: Option<f64>,
    /// Disk rows: reads per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reads_per_sec: Option<f64>,
    /// Disk rows: writes per second.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub writes_per_sec: Option<f64>,
    /// Disk rows: bytes per read.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_per_read: Option<f64>,
    /// Disk rows: bytes per write.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bytes_per_write: Option<f64>,
    /// Disk rows: average read latency, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub avg_read_latency_ms: Option<f64>,
    /// Disk rows: average write latency, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub avg_write_latency_ms: Option<f64>,
}

/// `achieved_iops_basis` of exchange2007 runs: Disk Transfers/sec of the database
/// volumes.
pub const IOPS_BASIS_DATABASE_VOLUMES: &str = "database_volume_transfers";

/// Everything one run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The tool.
    pub tool: ToolInfo,
    /// This run's own identity: a random UUID made when the run starts, so that a
    /// run counted twice (the same directory under two paths, a copy) is recognised
    /// (absent in results of older versions).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run_id: Option<String>,
    /// The fleet the run was started for (`fleet run` gives every host's run the
    /// fleet's id); absent for a run started on its own.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fleet_id: Option<String>,
    /// The ESRP campaign the run was started for (`esrp run` gives every step's run the
    /// campaign's id); absent for a run started on its own.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub campaign_id: Option<String>,
    /// Which test.
    pub test_type: TestType,
    /// The user's description of the test (Jetstress's "Test Description"); the report
    /// makes one from the parameters when absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    /// "Pass" or "Fail".
    pub overall_result: Verdict,
    /// The run was stopped early (Ctrl-C or an error); such a run always fails.
    pub aborted: bool,
    /// Why it was aborted.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub abort_reason: Option<String>,
    /// The criteria that failed (a subset of `criteria`).
    pub failed_criteria: Vec<Criterion>,
    /// Every criterion evaluated.
    pub criteria: Vec<Criterion>,
    /// Start of the test (RFC 3339).
    pub started_at: String,
    /// End of the test (RFC 3339).
    pub ended_at: String,
    /// Seconds of the measured period.
    pub measured_seconds: f64,
    /// The machine.
    pub host: HostInfo,
    /// Parameters of the run.
    pub parameters: SystemParameters,
    /// Transactional database reads/s + writes/s, over all instances.
    pub achieved_transactional_iops: f64,
    /// Mailboxes × IOPS per mailbox; null for throughput runs and non-transactional tests.
    pub target_transactional_iops: Option<f64>,
    /// How far the achieved IOPS exceed the target, percent of the target (negative
    /// when short of it), as the ESRP documents read achieved against target; absent
    /// without a target or a measurement. Derived by [`RunResults::judge`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_pct: Option<f64>,
    /// Database sizes.
    pub sizing: DatabaseSizing,
    /// Per instance.
    pub instances: Vec<InstanceResult>,
    /// Over all instances.
    pub totals: Totals,
    /// Host counters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub host_counters: Option<HostCounters>,
    /// Performance and Stress: the volumes under the database and log paths.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub volumes: Vec<Volume>,
    /// How `achieved_transactional_iops` was counted: absent for transactional database
    /// reads and writes; `"database_volume_transfers"` for exchange2007 runs, which count
    /// Disk Transfers/sec of the database volumes as Jetstress 2007 did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub achieved_iops_basis: Option<String>,
    /// Auto-tuning runs: the chosen session count and the curve.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub autotune: Option<AutoTune>,
    /// Checksum verification after a transactional run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verification: Option<Verification>,
    /// Sampling intervals that stretched far beyond the sample interval (each fails
    /// the run through the `sampling_stalls` criterion).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sampling_stalls: Vec<SamplingStall>,
    /// The block devices under the database and log paths, as Linux describes them.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub storage_devices: Vec<StorageDevice>,
    /// The kernel log watched during the run (absent in results of older versions).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_log: Option<KernelLog>,
    /// Where a results file read back disagreed with itself (a stored verdict or
    /// criterion result its own figures contradict); the derived values won.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub inconsistencies: Vec<String>,
    /// The time series (also in `samples.csv`).
    pub samples: Vec<Sample>,
}

impl RunResults {
    /// Derives every criterion's result from its measured value and threshold, the
    /// failed criteria and the verdict from those, as [`RunResults::judge`] does, and
    /// records in `inconsistencies` where the stored values disagreed: a results file
    /// edited by hand (or damaged) never shows a verdict its own criteria contradict.
    pub fn rejudge(&mut self) {
        let mut found = Vec::new();
        for c in &mut self.criteria {
            let derived = c.holds();
            if derived != c.passed {
                found.push(format!(
                    "criterion {} ({}) is stored as {} but its figures say {}",
                    c.key,
                    c.scope,
                    if c.passed { "met" } else { "not met" },
                    if derived { "met" } else { "not met" }
                ));
                c.passed = derived;
            }
        }
        let stored_failed = self.failed_criteria.len();
        let stored_verdict = self.overall_result;
        self.judge();
        if stored_failed != self.failed_criteria.len() {
            found.push(format!(
                "failed_criteria lists {stored_failed}, but {} criteria are not met",
                self.failed_criteria.len()
            ));
        }
        if stored_verdict != self.overall_result {
            found.push(format!(
                "overall_result is stored as {}, but the criteria{} make it {}",
                stored_verdict.label(),
                if self.aborted { " and the abort" } else { "" },
                self.overall_result.label()
            ));
        }
        self.inconsistencies.extend(found);
    }

    /// The verdict from the criteria and the abort flag: Pass only when nothing failed;
    /// the headroom from the achieved and target IOPS.
    pub fn judge(&mut self) {
        self.headroom_pct = self
            .target_transactional_iops
            .filter(|t| *t > 0.0 && self.measured_seconds > 0.0)
            .map(|t| (self.achieved_transactional_iops / t - 1.0) * 100.0)
            .filter(|h| h.is_finite());
        self.failed_criteria = self
            .criteria
            .iter()
            .filter(|c| !c.passed)
            .cloned()
            .collect();
        self.overall_result = if self.aborted || !self.failed_criteria.is_empty() {
            Verdict::Fail
        } else {
            Verdict::Pass
        };
    }
}

/// The name of instance `n` in results, numbered as its files: instance 1
/// (`edbstress001.edb`) is "Instance0001".
pub fn instance_name(n: u32) -> String {
    format!("Instance{n:04}")
}
