//! The database size from the free space under the first database path
//! (`capacity_pct`): the one part of the configuration that reads the filesystem.

use std::path::{Path, PathBuf};

use super::{ConfigError, MIB, MIN_DATABASE_SIZE, RunConfig, invalid, keys};
use edbstress_io::ByteSize;

/// The nearest ancestor of `path` that exists ("." for a relative path none of whose
/// parts exist yet): where the database files will be created.
fn nearest_existing_ancestor(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// `pct` percent of the free space under the first database path, split over the
/// databases and rounded down to whole MiB.
pub(super) fn size_from_capacity(pct: f64, config: &RunConfig) -> Result<u64, ConfigError> {
    if !(pct > 0.0 && pct <= 100.0) {
        return Err(invalid(
            keys::capacity_pct,
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
            keys::capacity_pct,
            format!(
                "{pct}% of the {} free under {} over {} database(s) is {} each, below the 4MiB minimum; raise capacity_pct, free some space, or set database_size",
                ByteSize(free),
                dir.display(),
                config.databases,
                ByteSize(size)
            ),
        ));
    }
    Ok(size)
}
