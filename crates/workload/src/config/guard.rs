//! Guards against meaningless runs: a database cache (or, for buffered runs, the
//! host's page cache) that holds most of the databases measures memory, not storage,
//! and passes on any device. Such a run is refused with the numbers and the fix unless
//! `allow_cached_databases` says it is intended.

use super::{ConfigError, MIB, RunConfig, invalid, keys};
use edbstress_io::ByteSize;

/// How many times its cache each database must be at least: Exchange databases are
/// tens to hundreds of times their cache; below a few times, most reads hit memory.
pub const MIN_DATABASE_TO_CACHE: u64 = 4;

/// Refuses a run whose databases are not [`MIN_DATABASE_TO_CACHE`] times the cache
/// per instance, or, for buffered runs, not larger than the host's memory
/// (`memory`: total bytes, when known). `allow_cached_databases` lets it run.
pub fn check_not_cached(config: &RunConfig, memory: Option<u64>) -> Result<(), ConfigError> {
    if config.allow_cached_databases {
        return Ok(());
    }
    let cache = config.cache_max_per_instance();
    let size = config.database_size;
    if size < cache.saturating_mul(MIN_DATABASE_TO_CACHE) {
        let max_cache = (size / MIN_DATABASE_TO_CACHE / MIB * MIB).max(MIB);
        return Err(invalid(
            keys::cache_max,
            format!(
                "each database ({}) is only {:.1} times its cache ({} per instance: {} over {} database(s)), so the cache would hold most of it and the run would measure memory, not storage. Lower `cache_max` to at most {} (the total for the run), raise `database_size` to at least {}, or set `allow_cached_databases` if a cached run is intended",
                ByteSize(size),
                size as f64 / cache.max(1) as f64,
                ByteSize(cache),
                ByteSize(config.cache_max),
                config.databases,
                ByteSize(max_cache * u64::from(config.databases)),
                ByteSize(cache.saturating_mul(MIN_DATABASE_TO_CACHE)),
            ),
        ));
    }
    if config.io_mode == edbstress_io::IoMode::Buffered {
        let total = size.saturating_mul(u64::from(config.databases));
        if let Some(memory) = memory.filter(|&m| total < m) {
            let per_db = memory.div_ceil(u64::from(config.databases)).div_ceil(MIB) * MIB;
            return Err(invalid(
                keys::io_mode,
                format!(
                    "buffered I/O goes through the page cache, and the databases ({} in all) fit in this host's {} of memory, so reads would come from memory, not storage. Use direct I/O (leave out --buffered, or set io_mode = \"direct\"), raise `database_size` to at least {}, or set `allow_cached_databases` if a cached run is intended",
                    ByteSize(total),
                    ByteSize(memory).approx(),
                    ByteSize(per_db),
                ),
            ));
        }
    }
    Ok(())
}
