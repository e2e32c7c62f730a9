//! The one change that lets a run whose databases do not fit its filesystem run there:
//! databases sized to the free space (and a cache small enough for them to stay at least
//! [`MIN_DATABASE_TO_CACHE`] times larger), given as the flags to add. A template's
//! profile (5,000 mailboxes of 2048 MB) asks for terabytes; on a smaller machine the
//! refusal says exactly what to add to try it there.

use std::path::Path;

use edbstress_io::ByteSize;

use crate::config::guard::MIN_DATABASE_TO_CACHE;
use crate::config::{MIB, MIN_DATABASE_SIZE, RunConfig};

const GIB: u64 = 1 << 30;

/// Share of the free space the advised databases may take: the rest stays free for
/// the logs, growth beyond the estimate and everything else on the filesystem.
const USABLE_PCT: u64 = 90;

/// Databases that fit: the size of each and, when the cache must shrink with them, the
/// run's total cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    /// Size of each database.
    pub database_size: u64,
    /// The run's `cache_max` (total), when the default or given one is too large.
    pub cache_max: Option<u64>,
}

impl Fit {
    /// The flags to add, as one command-line fragment.
    pub fn flags(&self) -> String {
        let mut s = format!("--database-size {}", ByteSize(self.database_size));
        if let Some(c) = self.cache_max {
            s.push_str(&format!(" --cache-max {}", ByteSize(c)));
        }
        s
    }

    /// The same as configuration-file lines.
    pub fn keys(&self) -> String {
        let mut s = format!("database_size = \"{}\"", ByteSize(self.database_size));
        if let Some(c) = self.cache_max {
            s.push_str(&format!(", cache_max = \"{}\"", ByteSize(c)));
        }
        s
    }
}

/// Databases that fit in `available` bytes of a filesystem where the run needs
/// `needed` (its databases, their growth and logs); None when not even small
/// databases fit (then only another path helps).
pub fn fit(config: &RunConfig, needed: u64, available: u64) -> Option<Fit> {
    let databases = u64::from(config.databases.max(1));
    // What the run needs beside the databases themselves (logs, growth), taken as if
    // every database were on this filesystem: the advice errs towards smaller.
    let beside = needed.saturating_sub(config.database_size.saturating_mul(databases));
    let usable = (available / 100 * USABLE_PCT).checked_sub(beside)?;
    let per_db = usable / databases;
    let unit = if per_db >= 64 * GIB { GIB } else { MIB };
    let database_size = per_db / unit * unit;
    let cache_per_instance = config.cache_max_per_instance();
    let cache_max = (!config.allow_cached_databases
        && database_size < cache_per_instance.saturating_mul(MIN_DATABASE_TO_CACHE))
    .then(|| database_size / MIN_DATABASE_TO_CACHE / MIB * MIB * databases);
    // Too small to be a test of storage: a cache of at least 1 MiB per instance, a
    // database at least the engine's minimum.
    if database_size < MIN_DATABASE_SIZE.max(MIN_DATABASE_TO_CACHE * MIB)
        || database_size >= config.database_size
    {
        return None;
    }
    Some(Fit {
        database_size,
        cache_max,
    })
}

/// Whether smaller databases would let a run that needs `needed` bytes fit in
/// `available`.
pub fn databases_can_fit(config: &RunConfig, needed: u64, available: u64) -> bool {
    fit(config, needed, available).is_some()
}

/// The refusal of a run that does not fit: what it needs and has, then the flags that
/// make it fit (or that only another path helps).
pub fn no_space_message(config: &RunConfig, path: &Path, needed: u64, available: u64) -> String {
    let profile =
        edbstress_report::sizing::ProfileSizing::of(&crate::runner::system_parameters(config, 0))
            .filter(|s| !s.short() && s.database_bytes <= s.profile_bytes);
    let sized = match config.mailboxes {
        Some(m) if profile.is_some() => format!(
            ", sized from the profile: {m} mailboxes × {} over {} database(s)",
            crate::units::format_quota(config.mailbox_quota),
            config.databases
        ),
        _ => String::new(),
    };
    let head = format!(
        "not enough free space on the filesystem holding {}: the run needs {} ({} database(s) of {} each{sized}, their logs and growth) and {} is free",
        path.display(),
        ByteSize(needed).approx(),
        config.databases,
        ByteSize(config.database_size).approx(),
        ByteSize(available).approx(),
    );
    match fit(config, needed, available) {
        Some(f) => format!(
            "{head}.\nTo run it on this filesystem, give databases that fit: add `{}` to the command line ({} in a configuration file). The databases then hold less than the profile's data, and the run and its report say so. To test the size as given, use a path with {} free.",
            f.flags(),
            f.keys(),
            ByteSize(needed).approx()
        ),
        None => format!(
            "{head}; even small databases do not fit there: free space, or give database and log paths on a filesystem with {} free",
            ByteSize(needed).approx()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mailboxes: u64, databases: u32) -> RunConfig {
        let text = format!("mailboxes = {mailboxes}\ndatabases = {databases}");
        let layer: crate::config::ConfigFile = toml::from_str(&text).unwrap();
        RunConfig::resolve(&[layer]).unwrap()
    }

    #[test]
    fn the_advised_databases_fit_and_stay_four_times_their_cache() {
        let c = config(5000, 6);
        let needed = c.database_size * 6 + (3 << 30);
        let available = 70 * GIB;
        let f = fit(&c, needed, available).unwrap();
        assert!(f.database_size * 6 + (3 << 30) <= available, "{f:?}");
        assert_eq!(f.database_size % MIB, 0);
        // 10.2 GiB each is over 4 × the default 256 MiB cache: no cache flag.
        assert_eq!(f.cache_max, None, "{f:?}");
        assert!(f.flags().starts_with("--database-size "), "{}", f.flags());

        let tight = fit(&c, needed, 8 * GIB).unwrap();
        let cache = tight
            .cache_max
            .expect("the cache must shrink with the databases");
        assert!(tight.database_size >= cache / 6 * MIN_DATABASE_TO_CACHE);
        assert!(tight.flags().contains("--cache-max"), "{}", tight.flags());
    }

    #[test]
    fn without_room_for_small_databases_no_size_is_advised() {
        let c = config(5000, 6);
        assert_eq!(fit(&c, c.database_size * 6, 20 * MIB), None);
        let m = no_space_message(&c, Path::new("/data"), c.database_size * 6, 20 * MIB);
        assert!(m.contains("even small databases do not fit"), "{m}");
        assert!(
            m.contains("5000 mailboxes × 2048 MB over 6 database(s)"),
            "{m}"
        );
    }
}
