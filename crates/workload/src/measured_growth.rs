//! The growth limit of a Jetstress-paced measured phase.
//!
//! The free-space check before a run budgets growth at the target rate, but Jetstress
//! pacing runs closed loop at its session count and achieves more (its headroom), so
//! its databases grow with what it achieves. What that will be is only known once the
//! load has run: so the measured phase is held by the engine's growth limit to the
//! free space the databases' filesystems have when it starts (less a tenth, and the
//! logs' room), the log says what the tuned load foresees against it, and a phase that
//! reaches the limit stops for space instead of filling the filesystem.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_io::ByteSize;
use edbstress_report::{AutoTune, Pacing};

use crate::config::RunConfig;
use crate::config::model::GROWTH_PER_TRANSACTIONAL_IO;
use crate::rundir::TestLog;
use crate::transactional::Workbench;

/// Log room per instance beyond its checkpoint depth that the limit leaves free.
const LOG_ROOM: u64 = 8 << 20;

/// The growth limit of the measured phase of a Jetstress-paced run with a target, logged
/// with what the tuned load foresees; None for other runs (open loop grows at the
/// target the free-space check budgeted; a throughput run budgets nothing) or when the
/// free space cannot be read.
pub(crate) fn measured_phase_limit(
    config: &RunConfig,
    bench: &Workbench<'_>,
    threads: u32,
    tune: Option<&AutoTune>,
    log: &TestLog<'_>,
) -> Option<MeasuredLimit> {
    let target = config.target_iops()?;
    if config.effective_pacing() != Pacing::Jetstress {
        return None;
    }
    let (dir, free) = smallest_free_space(bench)?;
    let logs = config
        .checkpoint_depth
        .saturating_add(LOG_ROOM)
        .saturating_mul(u64::from(config.databases.max(1)));
    let limit = free.saturating_sub(logs) / 10 * 9;
    let phase = config.duration + config.sample_interval;
    let at_rate = |iops: f64| iops * phase.as_secs_f64() * GROWTH_PER_TRANSACTIONAL_IO as f64;
    let budgeted = ByteSize(at_rate(target * config.target_margin) as u64).approx();
    let foreseen = tune
        .and_then(|t| {
            t.steps
                .iter()
                .filter(|s| s.threads == threads)
                .map(|s| s.achieved_iops)
                .reduce(f64::max)
        })
        .map(|iops| (iops, at_rate(iops) as u64));
    let mut line = format!(
        "Jetstress pacing grows the databases with the IOPS achieved (about {} per transactional I/O), not at the target rate the free-space check budgeted ({budgeted} over the measured phase)",
        ByteSize(GROWTH_PER_TRANSACTIONAL_IO).approx()
    );
    if let Some((iops, bytes)) = foreseen {
        line.push_str(&format!(
            "; at the {iops:.1} IOPS tuning achieved with {threads} sessions they would grow by about {}",
            ByteSize(bytes).approx()
        ));
    }
    line.push_str(&format!(
        ". The engine holds the measured phase's growth to {} (nine tenths of the free space under {} beyond the logs' room); the run stops for space if the databases reach it.",
        ByteSize(limit).approx(),
        dir.display()
    ));
    log.line(line);
    if let Some((_, bytes)) = foreseen.filter(|&(_, b)| b > limit) {
        log.line(format!(
            "Warning: the tuned load would grow the databases by about {} in {}, past the {} there is room for: give a shorter --duration, fewer --threads or more free space.",
            ByteSize(bytes).approx(),
            humantime::format_duration(Duration::from_secs(phase.as_secs())),
            ByteSize(limit).approx()
        ));
    }
    Some(MeasuredLimit { bytes: limit, dir })
}

/// The growth limit of a measured phase and the directory whose free space set it.
#[derive(Debug, Clone)]
pub(crate) struct MeasuredLimit {
    /// Bytes the databases may grow by together.
    pub bytes: u64,
    /// The database directory with the least free space.
    pub dir: PathBuf,
}

impl MeasuredLimit {
    /// Why the run stopped when the engine refused a growth past this limit.
    pub fn stop_reason(&self, refused: &str) -> String {
        format!(
            "the databases reached the measured phase's growth limit of {} (the free space under {} beyond the logs' room; Jetstress pacing grows them with the IOPS achieved): {refused}; give a shorter --duration, fewer --threads or more free space",
            ByteSize(self.bytes).approx(),
            self.dir.display()
        )
    }
}

/// The database directory with the least free space, and that space.
fn smallest_free_space(bench: &Workbench<'_>) -> Option<(PathBuf, u64)> {
    bench
        .layouts()
        .iter()
        .filter_map(|l| l.db_file.parent().map(|d| d.to_path_buf()))
        .filter_map(|d| edbstress_io::available_space(&d).ok().map(|free| (d, free)))
        .min_by_key(|&(_, free)| free)
}
