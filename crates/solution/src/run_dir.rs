//! Finding the run directory an `edbstress run` made inside a directory this crate
//! gave it as `--results-dir` (a fleet host's copy, a campaign step, a sweep point).

use std::path::{Path, PathBuf};

/// The newest subdirectory of `dir` that `accept` takes. Run directories are named
/// from their start time, so the last name in sort order is the newest.
pub(crate) fn newest(dir: &Path, accept: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| accept(p))
        .collect();
    dirs.sort();
    dirs.pop()
}
