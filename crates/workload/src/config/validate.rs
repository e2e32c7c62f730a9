//! The range of every configuration value and the rules between them.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_format::PageSize;

use super::{
    ConfigError, MAX_BDM_MB_PER_SEC, MAX_DURATION, MAX_IOPS_PER_MAILBOX, MAX_TARGET_IOPS, MIB,
    MIN_DATABASE_SIZE, RunConfig, format_op_mix, invalid, keys,
};
use edbstress_io::ByteSize;

use crate::units::format_duration;

impl RunConfig {
    /// Checks every value and the rules between them; the error names the key at fault
    /// and says how to fix it. [`RunConfig::resolve`] calls it.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_mix()?;
        self.check_scale()?;
        self.check_cache()?;
        self.check_durations()?;
        self.check_sessions()?;
        self.check_rates()?;
        self.check_thresholds()?;
        self.check_paths()?;
        self.check_content()?;
        Ok(())
    }

    /// The operation mix adds up to 100 and the lazy-commit share is a percentage.
    fn check_mix(&self) -> Result<(), ConfigError> {
        let mix = self.op_mix;
        for (name, share) in [
            ("insert", mix.insert),
            ("delete", mix.delete),
            ("replace", mix.replace),
            ("read", mix.read),
        ] {
            if share > 100 {
                return Err(invalid(
                    keys::op_mix,
                    format!(
                        "the {name} share is {share}%; each share is a percentage from 0 to 100"
                    ),
                ));
            }
        }
        let sum = mix.insert + mix.delete + mix.replace + mix.read;
        if sum != 100 {
            return Err(invalid(
                keys::op_mix,
                format!(
                    "{} adds up to {sum}%; the insert/delete/replace/read shares must add up to 100, e.g. 40/20/5/35",
                    format_op_mix(mix)
                ),
            ));
        }
        if self.lazy_commit_pct > 100 {
            return Err(invalid(
                keys::lazy_commits,
                format!(
                    "{}% is more than 100; give the share of commits that are lazy, 0 to 100",
                    self.lazy_commit_pct
                ),
            ));
        }
        Ok(())
    }

    /// Databases, copies, mailboxes, their IOPS and quota, and the database size.
    fn check_scale(&self) -> Result<(), ConfigError> {
        check_databases(self.databases)?;
        if !(1..=16).contains(&self.copies) {
            return Err(invalid(
                keys::copies,
                format!(
                    "{} is out of range; use 1 (no extra copy) to 16",
                    self.copies
                ),
            ));
        }
        if let Some(mailboxes) = self.mailboxes {
            if mailboxes == 0 {
                return Err(invalid(
                    keys::mailboxes,
                    "0 mailboxes; give at least 1, or leave mailboxes out for a throughput run",
                ));
            }
            if mailboxes > i64::MAX as u64 {
                return Err(invalid(
                    keys::mailboxes,
                    format!("{mailboxes} is too large; use at most {}", i64::MAX),
                ));
            }
        }
        if !(self.iops_per_mailbox.is_finite() && self.iops_per_mailbox > 0.0) {
            return Err(invalid(
                keys::iops_per_mailbox,
                format!(
                    "{} is not above 0; give the transactional IOPS of one mailbox, e.g. 0.12",
                    self.iops_per_mailbox
                ),
            ));
        }
        if self.iops_per_mailbox > MAX_IOPS_PER_MAILBOX {
            return Err(invalid(
                keys::iops_per_mailbox,
                format!(
                    "{:e} is out of range; give the transactional IOPS of one mailbox, above 0 and at most {MAX_IOPS_PER_MAILBOX}, e.g. 0.12",
                    self.iops_per_mailbox
                ),
            ));
        }
        if let Some(target) = self.target_iops() {
            if !(target.is_finite() && target <= MAX_TARGET_IOPS) {
                return Err(invalid(
                    keys::mailboxes,
                    format!(
                        "mailboxes × iops_per_mailbox is a target of {target:e} IOPS, more than the {MAX_TARGET_IOPS:e} a run accepts; lower mailboxes or iops_per_mailbox"
                    ),
                ));
            }
        }
        if self.mailbox_quota == 0 {
            return Err(invalid(
                keys::mailbox_quota,
                "the quota is 0 bytes; give the size of a mailbox, e.g. \"2GB\"",
            ));
        }
        if self.database_size < MIN_DATABASE_SIZE {
            return Err(invalid(
                keys::database_size,
                format!(
                    "{} is below the 4MiB minimum; give a larger size, e.g. \"256MiB\"",
                    ByteSize(self.database_size)
                ),
            ));
        }
        Ok(())
    }

    /// The cache bounds (ordered, held in memory, at least 1 MiB per instance), the
    /// coalesced write size and the checkpoint depth.
    fn check_cache(&self) -> Result<(), ConfigError> {
        if self.cache_min > self.cache_max {
            return Err(invalid(
                keys::cache_min,
                format!(
                    "{} is more than cache_max ({}); lower cache_min or raise cache_max",
                    ByteSize(self.cache_min),
                    ByteSize(self.cache_max)
                ),
            ));
        }
        check_cache_fits(self.cache_max, self.databases, self.page_size)?;
        for (key, total, per_instance) in [
            // The maximum first: a small cache_max given alone lowers the default minimum.
            (
                keys::cache_max,
                self.cache_max,
                self.cache_max_per_instance(),
            ),
            (
                keys::cache_min,
                self.cache_min,
                self.cache_min_per_instance(),
            ),
        ] {
            if per_instance < MIB {
                return Err(invalid(
                    key,
                    format!(
                        "{} over {} database(s) leaves {} per instance, below the 1MiB minimum; raise {key} (it is the total for the run)",
                        ByteSize(total),
                        self.databases,
                        ByteSize(per_instance)
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
                keys::write_coalesce,
                format!(
                    "{} is not a whole number of {} pages up to 16MiB; give e.g. \"{}\" (one page) or \"256KiB\"",
                    ByteSize(self.write_coalesce),
                    ByteSize(page),
                    ByteSize(page)
                ),
            ));
        }
        if self.checkpoint_depth == 0 {
            return Err(invalid(
                keys::checkpoint_depth,
                "0 bytes; give the log distance the checkpoint may lag, e.g. \"100MiB\"",
            ));
        }
        Ok(())
    }

    /// Duration, sampling interval and warm-up timeout: at least a second, at most a
    /// year, and the duration at least one sampling interval.
    fn check_durations(&self) -> Result<(), ConfigError> {
        if self.sample_interval < Duration::from_secs(1) {
            return Err(invalid(
                keys::sample_interval,
                format!(
                    "{} is shorter than 1s; sample at most once a second",
                    format_duration(self.sample_interval)
                ),
            ));
        }
        for (key, value) in [
            (keys::duration, self.duration),
            (keys::sample_interval, self.sample_interval),
            (keys::warmup_timeout, self.warmup_timeout),
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
                keys::duration,
                format!(
                    "{} is shorter than 1s; give e.g. \"2h\"",
                    format_duration(self.duration)
                ),
            ));
        }
        if self.duration < self.sample_interval {
            return Err(invalid(
                keys::duration,
                format!(
                    "{} is shorter than sample_interval ({}); lengthen duration or shorten sample_interval",
                    format_duration(self.duration),
                    format_duration(self.sample_interval)
                ),
            ));
        }
        Ok(())
    }

    /// The session count, which auto-tuning chooses itself, and their threads.
    fn check_sessions(&self) -> Result<(), ConfigError> {
        // Each thread of tasks reserves one of the database's read backends (128).
        if let Some(n) = self.session_threads
            && n > 128
        {
            return Err(invalid(
                keys::session_threads,
                format!(
                    "{n} is out of range; use 1 to 128 threads of sessions, 0 for a thread per session, or leave it out for one per CPU"
                ),
            ));
        }
        if let Some(threads) = self.threads {
            if !(1..=1024).contains(&threads) {
                return Err(invalid(
                    keys::threads,
                    format!("{threads} is out of range; use 1 to 1024"),
                ));
            }
            if self.auto_tune {
                return Err(invalid(
                    keys::auto_tune,
                    "auto-tuning chooses the thread count itself; remove `threads` or `auto_tune`",
                ));
            }
        }
        if self.pacing == edbstress_report::Pacing::OpenLoop && self.target_iops().is_none() {
            return Err(invalid(
                keys::pacing,
                "open-loop pacing starts transactions at the target rate, and a throughput run \
                 has no target; give mailboxes (a mailbox-profile run) or pacing = \"jetstress\"",
            ));
        }
        Ok(())
    }

    /// The BDM rate and the open-loop target margin.
    fn check_rates(&self) -> Result<(), ConfigError> {
        if !(self.bdm_mb_per_sec.is_finite()
            && self.bdm_mb_per_sec >= 0.0
            && self.bdm_mb_per_sec <= MAX_BDM_MB_PER_SEC)
        {
            return Err(invalid(
                keys::bdm_rate,
                format!(
                    "{} is not a rate from 0 to {MAX_BDM_MB_PER_SEC}; give MiB/s per database, e.g. 1.5",
                    self.bdm_mb_per_sec
                ),
            ));
        }
        if self.bdm && self.bdm_mb_per_sec == 0.0 {
            return Err(invalid(
                keys::bdm_rate,
                format!(
                    "BDM is on but its rate is 0 MiB/s ({} has no BDM); set bdm_rate, e.g. 2, or turn bdm off",
                    self.profile.name()
                ),
            ));
        }
        if !(self.auto_tune_margin > 0.0 && self.auto_tune_margin <= 1.0) {
            return Err(invalid(
                keys::auto_tune_margin,
                format!(
                    "{} is out of range; give a fraction of each limit above 0 and at most 1, e.g. 0.8 (1: judge steps at the limits themselves)",
                    self.auto_tune_margin
                ),
            ));
        }
        if !(1.0..=2.0).contains(&self.target_margin) {
            return Err(invalid(
                keys::target_margin,
                format!(
                    "{} is out of range; use 1.0 (start transactions at exactly the target rate) to 2.0",
                    self.target_margin
                ),
            ));
        }
        Ok(())
    }

    /// Every pass/fail threshold is a positive limit.
    fn check_thresholds(&self) -> Result<(), ConfigError> {
        let t = self.thresholds;
        for (key, value) in [
            (keys::thresholds_db_read_avg_ms, Some(t.db_read_avg_ms)),
            (keys::thresholds_db_read_max_ms, Some(t.db_read_max_ms)),
            (keys::thresholds_log_write_avg_ms, Some(t.log_write_avg_ms)),
            (keys::thresholds_log_write_max_ms, Some(t.log_write_max_ms)),
            (
                keys::thresholds_page_fault_stalls_per_sec,
                Some(t.page_fault_stalls_per_sec),
            ),
            (keys::thresholds_db_read_p99_ms, t.db_read_p99_ms),
            (keys::thresholds_log_write_p99_ms, t.log_write_p99_ms),
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
        Ok(())
    }

    /// Paths: database and log directories given, every path recordable in TOML.
    fn check_paths(&self) -> Result<(), ConfigError> {
        for (key, paths, what) in [
            (keys::db_paths, &self.db_paths, "database files"),
            (keys::log_paths, &self.log_paths, "log directories"),
        ] {
            if paths.is_empty() {
                return Err(invalid(
                    key,
                    format!("the list is empty; give at least one directory for {what}"),
                ));
            }
            check_utf8(key, paths)?;
        }
        check_utf8(keys::results_dir, std::slice::from_ref(&self.results_dir))?;
        if let Some(backup) = &self.backup_path {
            check_utf8(keys::backup_path, std::slice::from_ref(backup))?;
        }
        Ok(())
    }

    /// Log files to replay, page compressibility and the seed.
    fn check_content(&self) -> Result<(), ConfigError> {
        if self.logs_to_replay == 0 {
            return Err(invalid(
                keys::logs_to_replay,
                "0 log files; give at least 1 (the default is 500)",
            ));
        }
        edbstress_engine::Compressibility::from_ratio(self.compressibility)
            .map_err(|e| invalid(keys::compressibility, e))?;
        if self.seed > i64::MAX as u64 {
            return Err(invalid(
                keys::seed,
                format!(
                    "{} is larger than TOML integers allow; use at most {}",
                    self.seed,
                    i64::MAX
                ),
            ));
        }
        Ok(())
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
            format!("this host has {} of memory", ByteSize(memory).approx()),
        ),
        _ => (
            frames,
            format!(
                "an instance's cache holds at most {} pages of {}",
                u32::MAX,
                ByteSize(page_size.bytes() as u64)
            ),
        ),
    };
    if cache_max > limit {
        return Err(invalid(
            keys::cache_max,
            format!(
                "{} is too large: the cache is held in memory and {why}; give at most {} (the total for the run), e.g. \"256MiB\"",
                ByteSize(cache_max),
                ByteSize(limit)
            ),
        ));
    }
    Ok(())
}

/// databases: 1..=256.
pub(super) fn check_databases(databases: u32) -> Result<(), ConfigError> {
    if (1..=256).contains(&databases) {
        Ok(())
    } else {
        Err(invalid(
            keys::databases,
            format!("{databases} is out of range; use 1 to 256"),
        ))
    }
}

/// TOML strings are UTF-8: a path that is not cannot be recorded in `config.toml`.
fn check_utf8(key: super::SettingKey, paths: &[PathBuf]) -> Result<(), ConfigError> {
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
