//! The default lead time of a fleet: what a host needs between starting its run and
//! measuring, derived from the run's settings rather than fixed.
//!
//! A host attaches its databases, warms their caches (closed loop, reading as fast as
//! its storage allows, so the time depends on the cache size, not the target rate) and,
//! when the run auto-tunes, searches its thread count. Preparing databases is not in
//! it: `fleet prepare` makes them beforehand.

use std::path::Path;
use std::time::Duration;

use edbstress_workload::AutoTuneOptions;
use edbstress_workload::config::{ConfigFile, FlagForm, SETTINGS};

/// Time to attach the databases and start, before warming.
const ATTACH: Duration = Duration::from_secs(60);
/// A cautious rate of filling a cache with random page reads, bytes per second: a few
/// hundred reads per second of 32 KiB, what one spinning disk gives.
const WARM_BYTES_PER_SEC: u64 = 8 << 20;
/// The shortest lead time.
const MIN_LEAD: Duration = Duration::from_secs(120);

/// The lead time for runs given `run_args` (flags of `edbstress run`) over the
/// configuration file `config`: attaching, warming every database cache at
/// [`WARM_BYTES_PER_SEC`] and the longest auto-tuning search with its confirmations, at
/// least two minutes.
pub fn default_lead_time(run_args: &[String], config: Option<&Path>) -> Duration {
    let file = config
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| ConfigFile::parse(&t).ok())
        .unwrap_or_default();
    let flags = layer_of_args(run_args);
    let pick = |f: fn(&ConfigFile) -> Option<u64>| f(&flags).or_else(|| f(&file));
    let profile = flags.profile.or(file.profile).unwrap_or_default();
    let databases = u64::from(flags.databases.or(file.databases).unwrap_or(1));
    let cache = pick(|l| l.cache_max).unwrap_or_else(|| {
        profile
            .defaults()
            .cache_max_per_db
            .saturating_mul(databases)
    });
    let warm = Duration::from_secs(cache / WARM_BYTES_PER_SEC);
    let tune = if flags.auto_tune.or(file.auto_tune).unwrap_or(false) {
        let interval = flags
            .sample_interval
            .or(file.sample_interval)
            .unwrap_or(Duration::from_secs(15));
        AutoTuneOptions::for_interval(interval).longest()
    } else {
        Duration::ZERO
    };
    (ATTACH + warm + tune).max(MIN_LEAD)
}

/// The run settings among `args`, as a layer; flags it does not know are skipped.
fn layer_of_args(args: &[String]) -> ConfigFile {
    let mut layer = ConfigFile::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let setting = SETTINGS.iter().find(|s| s.flag.long() == Some(name));
        let Some(setting) = setting else {
            i += 1;
            continue;
        };
        let takes_value = !matches!(setting.flag, FlagForm::Switch { .. });
        let value = match (takes_value, inline) {
            (true, Some(v)) => Some(v),
            (true, None) => {
                i += 1;
                args.get(i).cloned()
            }
            (false, _) => Some(String::new()),
        };
        if let Some(v) = value {
            let _ = layer.apply_flag(setting.key, &[v]);
        }
        i += 1;
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lead_time_grows_with_the_cache_and_the_tuning() {
        // One database's default cache (256 MiB) warms within the two-minute floor.
        assert_eq!(default_lead_time(&[], None), MIN_LEAD);
        // 8 GiB of cache: a minute to attach and 1,024 s to warm at 8 MiB/s.
        let big = default_lead_time(&args(&["--cache-max", "8GiB"]), None);
        assert_eq!(big, Duration::from_secs(60 + 1024));
        // Auto-tuning adds its longest search: 12 steps of 2 s + 1 s at a 1 s interval,
        // and 3 confirmations of 4 s + 1 s.
        let tuned = default_lead_time(
            &args(&["--cache-max=8GiB", "--auto-tune", "--sample-interval", "1s"]),
            None,
        );
        assert_eq!(tuned, big + Duration::from_secs(36 + 15));
    }
}
