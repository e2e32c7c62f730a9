//! The tuning search's space budget: closed-loop steps grow the databases far faster
//! than the target would, so each step's growth is foreseen from the last step's and a
//! step that would not fit is shortened, or not run.

use std::time::Duration;

use crate::config::RunConfig;
use crate::rundir::TestLog;
use crate::transactional::Workbench;

/// Shortest step worth running: a shorter one measures too little to judge.
const MIN_STEP: Duration = Duration::from_secs(1);

/// Growth of the last step, bytes per session-second: what the next step's is foreseen
/// from (growth rises no faster than the session count, so this overestimates).
#[derive(Clone, Copy)]
pub(super) struct GrowthRate(pub f64);

/// The settle and measured lengths of a step of `threads` sessions (`settle` then
/// `step` at full length) that fit the growth left (`room` bytes), with a note when
/// shortened; or why none fits. `what`: how the log names the step ("step",
/// "confirmation").
pub(super) fn fit_step(
    (settle, step): (Duration, Duration),
    what: &str,
    threads: u32,
    rate: Option<GrowthRate>,
    room: Option<u64>,
) -> Result<(Duration, Duration, Option<String>), String> {
    let (Some(GrowthRate(rate)), Some(room)) = (rate, room) else {
        return Ok((settle, step, None));
    };
    let length = settle + step;
    let foreseen = rate * f64::from(threads) * length.as_secs_f64();
    if foreseen <= room as f64 {
        return Ok((settle, step, None));
    }
    let share = room as f64 / foreseen;
    let (short_settle, short_step) = (settle.mul_f64(share), step.mul_f64(share));
    let about = edbstress_io::ByteSize(foreseen as u64).approx();
    let left = edbstress_io::ByteSize(room).approx();
    if short_step < MIN_STEP {
        return Err(format!(
            "the {threads}-session {what} was not run: it would grow the databases by about {about}, and {left} of the tuning budget is left"
        ));
    }
    Ok((
        short_settle,
        short_step,
        Some(format!(
            "the {threads}-session {what} was shortened to {:.1} s measured (from {:.1} s): at full length it would grow the databases by about {about}, and {left} of the tuning budget was left",
            short_step.as_secs_f64(),
            step.as_secs_f64()
        )),
    ))
}

/// How much the databases may grow together while auto-tuning, logged: the run's
/// `auto_tune_growth` (part of the free-space check), else half the free space under
/// the first database path beyond what the measured run is budgeted; None for runs
/// without a target, whose growth nothing budgets.
pub fn tuning_budget(config: &RunConfig, bench: &Workbench<'_>, log: &TestLog<'_>) -> Option<u64> {
    let databases = u64::from(config.databases.max(1));
    let (per_db, how) = match config.auto_tune_growth {
        Some(bytes) => (bytes, "auto_tune_growth".to_string()),
        None => {
            config.target_iops()?;
            let dir = bench.layouts().first()?.db_file.parent()?.to_path_buf();
            let free = edbstress_io::available_space(&dir).ok()?;
            let measured = config
                .expected_growth_per_database()
                .unwrap_or(0)
                .saturating_mul(databases);
            let spare = free.saturating_sub(measured) / 2;
            (
                spare / databases,
                format!(
                    "half the free space under {} beyond the measured run's growth",
                    dir.display()
                ),
            )
        }
    };
    log.line(format!(
        "Auto-tune may grow each database by up to {} ({how}); a step that would pass it is shortened or not run.",
        edbstress_io::ByteSize(per_db).approx()
    ));
    Some(per_db.saturating_mul(databases))
}
