//! Merging configuration layers (the quick preset, a file, the command line) over a
//! profile's defaults into a [`RunConfig`], and the database size they imply.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{Pacing, TestType};

use super::capacity::size_from_capacity;
use super::validate::check_databases;
use super::{
    ConfigError, ConfigFile, DEFAULT_DB_PATH, DEFAULT_IOPS_PER_MAILBOX, DEFAULT_LOG_PATH,
    DEFAULT_MAILBOX_QUOTA, DEFAULT_RESULTS_DIR, DEFAULT_THROUGHPUT_DATABASE_SIZE, GIB, MIB,
    MIN_DATABASE_SIZE, RunConfig, invalid, keys,
};
use crate::profile::Profile;
use edbstress_io::ByteSize;

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

/// The last value a layer sets.
fn last<T>(layers: &[ConfigFile], pick: impl Fn(&ConfigFile) -> Option<T>) -> Option<T> {
    layers.iter().rev().find_map(pick)
}

/// Index of the last layer that sets a value.
fn last_index(layers: &[ConfigFile], is_set: impl Fn(&ConfigFile) -> bool) -> Option<usize> {
    layers.iter().rposition(is_set)
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
    /// under the first database path, split over the databases; else 1 GiB. Sizes
    /// derived from mailboxes are rounded down to whole GiB (whole MiB below 1 GiB). When `database_size` and `capacity_pct` are
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
            checkpoint_depth: last(layers, |l| l.checkpoint_depth).unwrap_or_else(|| {
                profile.checkpoint_depth(last(layers, |l| l.copies).unwrap_or(1))
            }),
            // 0 until the page size is known: the profile's, at least one page.
            write_coalesce: last(layers, |l| l.write_coalesce).unwrap_or(0),
            torn_write_protection: last(layers, |l| l.torn_write_protection).unwrap_or(false),
            allow_cached_databases: last(layers, |l| l.allow_cached_databases).unwrap_or(false),
            threads: last(layers, |l| l.threads),
            session_threads: last(layers, |l| l.session_threads),
            auto_tune: last(layers, |l| l.auto_tune).unwrap_or(false),
            auto_tune_growth: last(layers, |l| l.auto_tune_growth),
            auto_tune_margin: last(layers, |l| l.auto_tune_margin)
                .unwrap_or(crate::autotune::DEFAULT_MARGIN),
            // Open loop needs a target rate: throughput runs are always closed loop.
            pacing: last(layers, |l| l.pacing).unwrap_or(
                if last(layers, |l| l.mailboxes).is_some() {
                    Pacing::OpenLoop
                } else {
                    Pacing::Jetstress
                },
            ),
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
            start_at: None,
            host_name: None,
            fleet_id: None,
            campaign_id: None,
            progress_interval: None,
        };
        if config.write_coalesce == 0 {
            config.write_coalesce = defaults.write_coalesce.max(config.page_size.bytes() as u64);
        }
        config.validate()?;
        config.database_size = resolve_database_size(layers, &config)?;
        super::guard::check_not_cached(&config, crate::host::memory_total_bytes())?;
        Ok(config)
    }
}

/// The database size (see [`RunConfig::resolve`]) of a validated configuration,
/// checked against the largest database its page size addresses; the error names the
/// values the size came from.
fn resolve_database_size(layers: &[ConfigFile], config: &RunConfig) -> Result<u64, ConfigError> {
    let (size, from) = database_size_and_origin(layers, config)?;
    let max = max_database_size(config.page_size);
    if size > max {
        let larger_pages = if config.page_size.bytes() < 32 * 1024 {
            ", use a larger page_size (up to 32KiB)"
        } else {
            ""
        };
        let (key, source, fix) = match from {
            SizeOrigin::Given => (keys::database_size, "", "lower database_size"),
            SizeOrigin::Capacity => (
                keys::capacity_pct,
                "capacity_pct of the free space over databases gives ",
                "lower capacity_pct",
            ),
            SizeOrigin::Mailboxes => (
                keys::mailboxes,
                "mailboxes × mailbox_quota / databases gives ",
                "lower mailboxes or mailbox_quota",
            ),
        };
        return Err(invalid(
            key,
            format!(
                "{source}{} per database, more than the {} a database of {} pages can hold; {fix}{larger_pages}, or use more databases",
                ByteSize(size).approx(),
                ByteSize(max).approx(),
                ByteSize(config.page_size.bytes() as u64),
            ),
        ));
    }
    Ok(size)
}

/// Largest database file `page_size` pages address: a page number is 32 bits (the
/// two header slots come on top).
pub fn max_database_size(page_size: edbstress_format::PageSize) -> u64 {
    (u64::from(u32::MAX) + 2) * page_size.bytes() as u64
}

/// Where the database size came from, for error messages.
enum SizeOrigin {
    Given,
    Capacity,
    Mailboxes,
}

fn database_size_and_origin(
    layers: &[ConfigFile],
    config: &RunConfig,
) -> Result<(u64, SizeOrigin), ConfigError> {
    let size_at = last_index(layers, |l| l.database_size.is_some());
    let pct_at = last_index(layers, |l| l.capacity_pct.is_some());
    let from_capacity = match (size_at, pct_at) {
        (Some(size), Some(pct)) if size == pct => {
            return Err(invalid(
                keys::capacity_pct,
                "database_size and capacity_pct are both set; give only one (capacity_pct derives the database size from free space)",
            ));
        }
        (Some(size), Some(pct)) => pct > size,
        (None, pct) => pct.is_some(),
        (Some(_), None) => false,
    };
    if from_capacity {
        let pct = last(layers, |l| l.capacity_pct).unwrap_or(100.0);
        return size_from_capacity(pct, config).map(|s| (s, SizeOrigin::Capacity));
    }
    if let Some(size) = last(layers, |l| l.database_size) {
        if size < MIN_DATABASE_SIZE {
            return Err(invalid(
                keys::database_size,
                format!(
                    "{} is below the 4MiB minimum; give a larger size, e.g. \"256MiB\"",
                    ByteSize(size)
                ),
            ));
        }
        return Ok((size, SizeOrigin::Given));
    }
    let Some(mailboxes) = config.mailboxes else {
        return Ok((DEFAULT_THROUGHPUT_DATABASE_SIZE, SizeOrigin::Given));
    };
    let exact =
        u128::from(mailboxes) * u128::from(config.mailbox_quota) / u128::from(config.databases);
    // Whole GiB from 64 GiB up, so that `config show` and config.toml read "1666GiB"
    // rather than "1706666MiB"; whole MiB below, so that rounding never takes more than
    // 1 % off the profile's size (a report says when a database is smaller than that).
    let unit = if exact >= 64 * u128::from(GIB) {
        GIB
    } else {
        MIB
    };
    let per_db = exact / u128::from(unit) * u128::from(unit);
    let size = u64::try_from(per_db).map_err(|_| {
        invalid(
            keys::mailboxes,
            "mailboxes × mailbox_quota is too large to store; lower mailboxes or mailbox_quota",
        )
    })?;
    if size < MIN_DATABASE_SIZE {
        return Err(invalid(
            keys::database_size,
            format!(
                "mailboxes × mailbox_quota / databases gives {} per database, below the 4MiB minimum; raise mailboxes or mailbox_quota, or set database_size",
                ByteSize(size)
            ),
        ));
    }
    Ok((size, SizeOrigin::Mailboxes))
}
