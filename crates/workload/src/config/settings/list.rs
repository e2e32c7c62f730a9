//! The run settings, one entry each (see [`run_settings!`](super)): the order is the
//! template's.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{OpMix, Pacing, TestType};
use serde::{Deserialize, Serialize};

use super::{FlagForm, Setting, SettingKey, parse};
use crate::config::ThresholdsFile;
use crate::profile::Profile;

run_settings! {
    /// Test: performance, stress, database-backup or soft-recovery [default: performance].
    test: TestType [with = "crate::config::file::forms::test_type"] {
        flag: (choice "--test" "TEST" parse::test_type,
            ["performance", "stress", "database-backup", "soft-recovery"]),
        template: r#"# The test: performance, stress (long, lenient maximum latencies), database-backup
# (sequential read of every database) or soft-recovery (crash, then log replay).
# test = "performance""#,
    }
    /// Version profile: exchange2007, exchange2010, exchange2013, exchange2016 or exchange2019
    /// [default: exchange2013].
    profile: Profile [with = "crate::config::file::forms::profile"] {
        flag: (choice "--profile" "PROFILE" parse::profile,
            ["exchange2007", "exchange2010", "exchange2013", "exchange2016", "exchange2019"]),
        template: r#"# Version profile whose I/O pattern the run imitates: exchange2007, exchange2010,
# exchange2013, exchange2016 or exchange2019. It sets the defaults of page_size, op_mix,
# lazy_commits, cache_min, cache_max, bdm, bdm_rate, checkpoint_depth and thresholds;
# the defaults shown for those are exchange2013's.
# profile = "exchange2013""#,
    }
    /// Mailboxes: makes a mailbox-profile run with a target of mailboxes × IOPS per mailbox.
    mailboxes: u64 {
        flag: (number "--mailboxes" "N" parse::count_u64),
        template: "# Number of mailboxes.
mailboxes = 5000",
        section: "# ---- Mailbox profile ------------------------------------------------------------
# A mailbox-profile run has a target of mailboxes × iops_per_mailbox transactional IOPS
# and passes only if it reaches it. Remove `mailboxes` for a disk-subsystem throughput
# run (no target; the sessions run as fast as the storage allows).",
    }
    /// Transactional IOPS per mailbox [default: 0.12].
    iops_per_mailbox: f64 {
        flag: (value "--iops-per-mailbox" "IOPS" parse::number),
        template: "# Transactional IOPS (database reads + writes) per mailbox. Default 0.12.
iops_per_mailbox = 0.12",
    }
    /// Mailbox quota in MB of 1,048,576 bytes, as Exchange counts them (2GB = 2048 MB)
    /// [default: 2048 MB].
    mailbox_quota: u64 [with = "crate::config::file::forms::quota"] {
        flag: (number "--mailbox-quota" "SIZE" parse::quota),
        template: r#"# Mailbox quota: the databases together hold mailboxes × mailbox_quota. As Exchange and
# the ESRP documents count a quota, 1 MB is 1,048,576 bytes and "2GB" is 2048 MB.
# Default "2048 MB".
mailbox_quota = "2048 MB""#,
    }
    /// Number of databases (instances), 1 to 256 [default: 1].
    databases: u32 {
        flag: (number "--databases" "N" parse::count_u32),
        template: "# Number of databases (instances: one database file and one log directory each),
# 1 to 256. Default 1.
databases = 6",
    }
    /// Database copies, 1 to 16; each extra copy adds a log replication reader [default: 1].
    copies: u32 {
        flag: (number "--copies" "N" parse::count_u32),
        template: "# Database copies, 1 to 16: each copy beyond the first adds a reader of the closed log
# files, as log replication would. Default 1.
copies = 2",
    }
    /// Size of each database file, e.g. 256MiB [default: derived from mailboxes, else 1GiB].
    database_size: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--database-size" "SIZE" parse::size),
        template: r#"# Size of each database file. Default: mailboxes × mailbox_quota / databases for a
# mailbox-profile run, else capacity_pct, else 1GiB.
# database_size = "256MiB"  # example"#,
        section: "# ---- Sizing ---------------------------------------------------------------------",
    }
    /// Throughput runs: fill this percentage of the free space, split over the databases.
    capacity_pct: f64 {
        flag: (value "--capacity-pct" "PCT" parse::number),
        template: "# Throughput runs: fill this percentage of the free space under the first database
# path, split over the databases (instead of database_size). No default.
# capacity_pct = 50  # example",
    }
    /// Database page size: 4KiB, 8KiB, 16KiB or 32KiB [default: the profile's].
    page_size: PageSize [with = "crate::config::file::forms::page_size"] {
        flag: (number "--page-size" "SIZE" parse::page_size),
        template: r#"# Database page size: 4KiB, 8KiB, 16KiB or 32KiB (exchange2007: 8KiB).
# page_size = "32KiB""#,
    }
    /// Minimum database cache for the whole run [default: 32MiB per database].
    cache_min: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--cache-min" "SIZE" parse::size),
        template: r#"# Database cache for the whole run, split over the databases. Default: 32MiB minimum
# and 256MiB maximum per database (so here, with 6 databases, 192MiB and 1536MiB).
# cache_min = "192MiB"  # example"#,
    }
    /// Maximum database cache for the whole run [default: 256MiB per database].
    cache_max: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--cache-max" "SIZE" parse::size),
        template: r#"# cache_max = "1536MiB"  # example"#,
    }
    /// Run even though the databases are not several times the cache (or, with
    /// --buffered, the host's memory): a cached run measures memory, not storage.
    allow_cached_databases: bool {
        flag: (switch "--allow-cached-databases" true),
        template: r#"# A run is refused when each database is not at least 4 times its cache (cache_max over
# the databases) or, with io_mode = "buffered", when the databases fit in this host's
# memory: the cache would serve the reads and the run would measure memory, not
# storage. Set to true when a cached run is what you mean to measure.
# allow_cached_databases = false"#,
    }
    /// Log the checkpoint may lag behind, per instance [default: the profile's: 100MiB;
    /// exchange2007 20MiB; exchange2010 20MiB, 100MiB with 2 or more copies].
    checkpoint_depth: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--checkpoint-depth" "SIZE" parse::size),
        template: r#"# Log the checkpoint may lag behind, per instance (exchange2007: 20MiB; exchange2010:
# 20MiB, or 100MiB with 2 or more copies).
# checkpoint_depth = "100MiB""#,
    }
    /// Largest coalesced database write [default: 384KiB for exchange2010/2013, one page for exchange2007].
    write_coalesce: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--write-coalesce" "SIZE" parse::size),
        template: r#"# Largest database write the page writer makes of contiguous dirty pages that are due
# and durable. Default: the profile's (384KiB for exchange2010/2013, one page for
# exchange2007), which gives Exchange's ~36 KB average writes.
# write_coalesce = "384KiB""#,
    }
    /// Log page images so recovery can rebuild pages torn by a power cut (costs about
    /// one page of log per database page written).
    torn_write_protection: bool {
        flag: (switch "--torn-write-protection" true),
        template: "# Torn-write protection: log each page's on-disk image before the change that makes it
# dirty, so recovery can rebuild a page whose write a power cut tore (a device atomic
# only per sector). Costs about one page of log per database page written, which
# raises log write sizes well above Exchange's. Off, like Exchange's ESE, which
# detects torn pages by checksum (-1018) instead.
# torn_write_protection = false",
    }
    /// Directory for database files (repeatable; instances are spread over them).
    db_paths: Vec<PathBuf> {
        flag: (repeated "--db-path" "DIR"),
        template: r#"# Directories for database files; the databases are spread over them.
# db_paths = ["edbstress-data/db"]"#,
        section: "# ---- Where --------------------------------------------------------------------------",
    }
    /// Directory for instance log directories (repeatable; instances are spread over them).
    log_paths: Vec<PathBuf> {
        flag: (repeated "--log-path" "DIR"),
        template: r#"# Directories for the instances' log directories; spread the same way.
# log_paths = ["edbstress-data/logs"]"#,
    }
    /// Where run directories are created [default: edbstress-results].
    results_dir: PathBuf {
        flag: (value "--results-dir" "DIR" parse::path),
        template: r#"# Where run directories (report, results, samples, test log) are created.
# results_dir = "edbstress-results""#,
    }
    /// Sessions running transactions, 1 to 1024 [default: 4 per database, at least 8].
    threads: u32 {
        flag: (number "--threads" "N" parse::count_u32),
        template: "# Sessions running transactions over all databases, 1 to 1024. Default: 4 per
# database, at least 8.
# threads = 24  # example",
        section: "# ---- Load ---------------------------------------------------------------------------",
    }
    /// Threads the sessions run on as tasks; 0 gives each session a thread of its own
    /// [default: one per CPU].
    session_threads: u32 {
        flag: (number "--session-threads" "N" parse::count_u32),
        template: "# Threads the sessions run on, as tasks: a session waiting for its page read or its
# commit gives its thread to another session instead of sleeping in the kernel, which
# costs a fraction of the CPU. 0 gives every session a thread of its own (the model
# of earlier versions). At most 128. Default: one per CPU.
# session_threads = 2  # example",
    }
    /// Find the largest session count that meets the thresholds.
    auto_tune: bool {
        flag: (switch "--auto-tune" true),
        template: "# Find the largest session count that still meets the latency thresholds, as
# Jetstress tunes its thread count (not with threads).
# auto_tune = false",
    }
    /// Most each database may grow while auto-tuning [default: half the free space the run
    /// does not need, split over the databases].
    auto_tune_growth: u64 [with = "crate::config::file::forms::size"] {
        flag: (number "--auto-tune-growth" "SIZE" parse::size),
        template: r#"# Most each database may grow while auto-tuning: its steps run closed loop and grow
# the databases far faster than the target would. A step that would pass this is
# shortened or not run, and the test log says so. Given, it is part of the free-space
# check; by default it is half the free space the run does not need.
# auto_tune_growth = "1GiB"  # example"#,
    }
    /// Fraction of each latency and page-fault-stall limit an auto-tuning step must stay
    /// within for its count to be chosen, above 0 and at most 1 [default: 0.8].
    auto_tune_margin: f64 {
        flag: (value "--auto-tune-margin" "FRACTION" parse::number),
        template: r#"# Auto-tuning chooses a count only if its step kept every latency and page-fault-stall
# criterion within this fraction of its limit (then confirms it over a window twice a
# step's length): a step of tens of seconds cannot see what minutes of a noisy
# criterion will average. 1 judges steps at the limits themselves. Default 0.8.
# auto_tune_margin = 0.8"#,
    }
    /// How transactions start: jetstress (closed loop at the thread count, judged on
    /// achieved >= target, reporting headroom) or open-loop (at the target rate, latency
    /// from each intended start) [default: open-loop for mailbox-profile runs; throughput
    /// runs are always jetstress].
    pacing: Pacing {
        flag: (choice "--pacing" "PACING" parse::pacing, ["jetstress", "open-loop"]),
        template: r#"# How transactions start. "jetstress": Jetstress's way, closed loop at the thread
# count (threads, or auto_tune for the most threads that meet the latency thresholds);
# a mailbox-profile run passes when it achieves at least the target, and the report
# shows the headroom above it. "open-loop": transactions arrive at the target rate
# (plus target_margin) whatever the storage does, and latency counts from each one's
# intended start, so a stalling device shows as latency (the honest-latency mode).
# Throughput runs (no mailboxes) are always "jetstress". Default: "open-loop" for
# mailbox-profile runs ("jetstress" for the ESRP campaign's Stress and Performance).
# pacing = "open-loop""#,
    }
    /// Operation mix insert/delete/replace/read in percent, e.g. 40/20/5/35.
    op_mix: OpMix [with = "crate::config::file::forms::op_mix"] {
        flag: (value "--op-mix" "I/D/R/R" parse::op_mix),
        template: r#"# Share of each operation, insert/delete/replace/read, in percent; they add up to 100.
# Also written as a table: op_mix = { insert = 40, delete = 20, replace = 5, read = 35 }
# (exchange2007: 25/10/50/15).
# op_mix = "40/20/5/35""#,
    }
    /// Share of lazy commits, percent [default: the profile's].
    lazy_commits: u32 {
        flag: (number "--lazy-commits" "PCT" parse::percentage),
        template: "# Share of commits that are lazy (not waiting for the log flush), percent
# (exchange2007: 80).
# lazy_commits = 70",
    }
    /// Background database maintenance: on or off [default: the profile's].
    bdm: bool {
        flag: (choice "--bdm" "on|off" parse::on_off, ["on", "off"]),
        template: "# Background database maintenance: sequential reads scanning each database
# (exchange2007: off).
# bdm = true",
    }
    /// BDM read rate per database, MiB/s [default: the profile's].
    bdm_rate: f64 {
        flag: (value "--bdm-rate" "MiB/s" parse::number),
        template: "# BDM read rate per database, MB/s (exchange2010: 6.8).
# bdm_rate = 2.15",
    }
    /// Open-loop runs start transactions at this many times the target rate, 1 to 2
    /// [default: 1.05].
    target_margin: f64 {
        flag: (value "--target-margin" "RATIO" parse::number),
        template: "# Open-loop runs start transactions at this many times the target rate, 1 to 2,
# so that a healthy storage exceeds the target.
# target_margin = 1.05",
    }
    /// Measured duration, e.g. 2h, 30m [default: 2h; stress 24h].
    duration: Duration [with = "crate::config::file::forms::duration"] {
        flag: (number "--duration" "DURATION" parse::duration),
        template: r#"# Measured duration of the test (stress: "24h").
# duration = "2h""#,
        section: "# ---- Time ---------------------------------------------------------------------------",
    }
    /// Counter sampling interval [default: 15s].
    sample_interval: Duration [with = "crate::config::file::forms::duration"] {
        flag: (number "--sample-interval" "DURATION" parse::duration),
        template: r#"# Interval between counter samples.
# sample_interval = "15s""#,
    }
    /// Longest wait for the database caches to warm up before measuring anyway [default: 10m].
    warmup_timeout: Duration [with = "crate::config::file::forms::duration"] {
        flag: (number "--warmup-timeout" "DURATION" parse::duration),
        template: r#"# Longest wait for the database caches to warm up before measuring anyway.
# warmup_timeout = "10m""#,
    }
    /// Seed of the transactions and of new databases' content [default: 1].
    seed: u64 {
        flag: (number "--seed" "N" parse::seed),
        template: "# Seed of the transactions and of new databases' content: the same seed repeats a run.
# seed = 1",
        section: "# ---- Tests ----------------------------------------------------------------------",
    }
    /// database-backup: also write the copy of each database here.
    backup_path: PathBuf {
        flag: (value "--backup-path" "DIR" parse::path),
        template: r#"# database-backup: also write the copy of each database here. No default (read only).
# backup_path = "/mnt/backup"  # example"#,
    }
    /// soft-recovery: log files to generate per instance before the crash [default: 500].
    logs_to_replay: u32 {
        flag: (number "--logs-to-replay" "N" parse::count_u32),
        template: "# soft-recovery: log files generated per instance before the crash.
# logs_to_replay = 500",
    }
    /// Skip the checksum verification after performance and stress tests.
    verify_after: bool {
        flag: (switch "--no-verify" false),
        template: "# Verify database and log checksums after performance and stress tests.
# verify_after = true",
    }
    /// Content compressibility of new databases: 'mail' (1.7), 'incompressible', or a ratio.
    compressibility: f64 [with = "crate::config::file::forms::compressibility"] {
        flag: (value "--compressibility" "RATIO" parse::compressibility),
        template: r#"# lz4 compression ratio of new database pages, 1.0 (incompressible) to 5.0; also
# "mail" (1.7) or "incompressible".
# compressibility = 1.7"#,
        section: "# ---- Data and I/O -------------------------------------------------------------------",
    }
    /// Use buffered I/O (through the page cache) instead of direct I/O.
    io_mode: IoMode {
        flag: (switch "--buffered" IoMode::Buffered),
        template: r#"# "direct" (O_DIRECT, measures the storage) or "buffered" (through the page cache, for
# filesystems that refuse O_DIRECT).
# io_mode = "direct""#,
    }
    /// I/O backend: auto (io_uring, else threads), io_uring or threads [default: auto].
    backend: BackendKind {
        flag: (choice "--backend" "BACKEND" parse::backend, ["auto", "io_uring", "threads"]),
        template: r#"# I/O backend: "auto" (io_uring when the kernel allows it, else threads), "io_uring"
# or "threads".
# backend = "auto""#,
    }
}

/// The template's opening comment.
pub(super) const TEMPLATE_HEADER: &str = r#"# edbstress run configuration.
#
# Run it with `edbstress run --config edbstress.toml`; flags given on the command line
# override it, and `edbstress config show --config edbstress.toml` prints the
# configuration a run would use. A commented `key = value` line shows the default.
#
# Sizes: "256MiB", "1.5GiB" (binary units KiB MiB GiB TiB), "500MB", "2GB" (decimal
# units KB MB GB TB) or a number of bytes. Durations: "90s", "15m", "2h", "1h 30m" or a
# number of seconds.
"#;

/// The heading of the `[thresholds]` table in the template.
const THRESHOLDS_SECTION: &str =
    "# ---- Pass/fail thresholds -------------------------------------------------------
# Defaults: the profile's for the test (stress: maxima of 200 ms; exchange2007: 50 ms,
# stress 100 ms). Give only the ones to change. This table must come last.
# [thresholds]";

/// The `[thresholds]` keys in the template.
const THRESHOLDS_TEMPLATE: &str = "# Average database read latency, ms.
# db_read_avg_ms = 20.0
# Highest per-interval average database read latency, ms.
# db_read_max_ms = 100.0
# Average log write latency, ms.
# log_write_avg_ms = 10.0
# Highest per-interval average log write latency, ms.
# log_write_max_ms = 100.0
# Average database page fault stalls per second.
# page_fault_stalls_per_sec = 1.0
# Optional extra criteria (Jetstress has none): 99th percentile latencies, ms.
# db_read_p99_ms = 50.0  # example
# log_write_p99_ms = 20.0  # example";
