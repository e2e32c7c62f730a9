//! Auto-tuning (`--auto-tune`): the largest session count whose load still meets the
//! latency thresholds (and the target, if any).
//!
//! As Jetstress does, each step changes the session count, lets latency settle, then
//! measures. Steps run closed loop (each session as fast as it can), since what is
//! searched is the load the storage carries within the thresholds: counts double from
//! one session per database until a step fails, then the gap between the last passing
//! and the first failing count is bisected until it is within an eighth of the passing
//! count, or the step budget is spent. The caches stay warm between steps (one
//! workbench), so every step measures the same steady state.
//!
//! Closed-loop steps grow the databases far faster than the target would, so the
//! search has a space budget: before a step, its growth is foreseen from the last
//! step's (per session and second); a step that would not fit is shortened, or not
//! run. The budget is also the engine's growth limit for the search, so a step that
//! grows faster than foreseen is refused its next file extension: it stops there and
//! is not judged. The test log and the results say so.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use edbstress_io::IoClass;
use edbstress_report::summary::transactional_iops;
use edbstress_report::{AutoTune, AutoTuneStep};

use crate::config::RunConfig;
use crate::criteria::{Measurements, evaluate};
use crate::live::PhaseKind;
use crate::profile::Thresholds;
use crate::rundir::TestLog;
use crate::transactional::{Measurement, StopReason, Workbench};

/// Bounds of the search.
#[derive(Clone, Copy, Debug)]
pub struct AutoTuneOptions {
    /// Measured length of each step.
    pub step: Duration,
    /// Unmeasured time after changing the session count.
    pub settle: Duration,
    /// Highest session count tried.
    pub max_threads: u32,
    /// Most steps run.
    pub max_steps: u32,
}

impl AutoTuneOptions {
    /// Steps of two sampling intervals (at least 2 s) with half as much settling, up to
    /// 256 sessions and 12 steps: with the default 15 s interval, at most 9 minutes.
    pub fn for_interval(sample_interval: Duration) -> AutoTuneOptions {
        let step = (sample_interval * 2).max(Duration::from_secs(2));
        AutoTuneOptions {
            step,
            settle: step / 2,
            max_threads: 256,
            max_steps: 12,
        }
    }
}

/// The criteria a step's measurement does not meet (the thresholds, and the target):
/// none when the step passes.
pub fn step_failures(m: &Measurement, thresholds: &Thresholds, target: Option<f64>) -> Vec<String> {
    let measurements = Measurements {
        volumes: None,
        instances: &m.instances,
        totals: &m.totals.io,
        achieved_iops: transactional_iops(&m.totals.io),
        target_iops: target,
        verification: None,
        transaction_errors: m.transaction_errors,
        bdm_bad_pages: 0,
        shutdown_errors: 0,
        sampling: Some((m.longest_interval_s, m.stall_limit_s)),
        measured: true,
        abort_reason: None,
        instance_count: m.instances.len() as u32,
    };
    evaluate(&measurements, thresholds)
        .into_iter()
        .filter(|c| !c.passed)
        .map(|c| c.describe())
        .collect()
}

/// Shortest step worth running: a shorter one measures too little to judge.
const MIN_STEP: Duration = Duration::from_secs(1);

/// Runs the search on an open, warm workbench; returns the chosen count and the curve,
/// and why it stopped early (if it did). `growth_budget`: how much the databases may
/// grow together during the search, bytes (None: no limit).
#[allow(clippy::too_many_arguments)]
pub fn auto_tune(
    bench: &mut Workbench<'_>,
    instances: u32,
    thresholds: &Thresholds,
    target: Option<f64>,
    options: AutoTuneOptions,
    growth_budget: Option<u64>,
    log: &TestLog<'_>,
    stop: &AtomicBool,
) -> (AutoTune, Option<StopReason>) {
    let base = bench.database_bytes();
    bench.limit_growth(growth_budget);
    let (mut tune, stopped) = search(bench, instances, thresholds, target, options, log, stop);
    bench.limit_growth(None);
    tune.growth_budget_bytes = growth_budget;
    tune.growth_bytes = Some(bench.database_bytes().saturating_sub(base));
    (tune, stopped)
}

/// Growth of the last step, bytes per session-second: what the next step's is foreseen
/// from (growth rises no faster than the session count, so this overestimates).
#[derive(Clone, Copy)]
struct GrowthRate(f64);

/// The settle and measured lengths of the step of `threads` sessions that fit the
/// growth left (`room` bytes), with a note when shortened; or why none fits.
fn fit_step(
    options: &AutoTuneOptions,
    threads: u32,
    rate: Option<GrowthRate>,
    room: Option<u64>,
) -> Result<(Duration, Duration, Option<String>), String> {
    let (Some(GrowthRate(rate)), Some(room)) = (rate, room) else {
        return Ok((options.settle, options.step, None));
    };
    let length = options.settle + options.step;
    let foreseen = rate * f64::from(threads) * length.as_secs_f64();
    if foreseen <= room as f64 {
        return Ok((options.settle, options.step, None));
    }
    let share = room as f64 / foreseen;
    let (settle, step) = (options.settle.mul_f64(share), options.step.mul_f64(share));
    let about = edbstress_io::ByteSize(foreseen as u64).approx();
    let left = edbstress_io::ByteSize(room).approx();
    if step < MIN_STEP {
        return Err(format!(
            "the {threads}-session step was not run: it would grow the databases by about {about}, and {left} of the tuning budget is left"
        ));
    }
    Ok((
        settle,
        step,
        Some(format!(
            "the {threads}-session step was shortened to {:.1} s measured (from {:.1} s): at full length it would grow the databases by about {about}, and {left} of the tuning budget was left",
            step.as_secs_f64(),
            options.step.as_secs_f64()
        )),
    ))
}

fn search(
    bench: &mut Workbench<'_>,
    instances: u32,
    thresholds: &Thresholds,
    target: Option<f64>,
    options: AutoTuneOptions,
    log: &TestLog<'_>,
    stop: &AtomicBool,
) -> (AutoTune, Option<StopReason>) {
    let mut tune = AutoTune::default();
    let mut rate: Option<GrowthRate> = None;
    let first = instances.clamp(1, options.max_threads);
    let mut pass_max: Option<u32> = None;
    let mut fail_min: Option<u32> = None;
    let mut next = Some(first);
    log.line(format!(
        "Auto-tuning: steps of {} settling + {} measured, closed loop, from {first} sessions.",
        humantime::format_duration(options.settle),
        humantime::format_duration(options.step)
    ));
    while let Some(threads) = next {
        if tune.steps.len() as u32 >= options.max_steps {
            break;
        }
        let room = bench.growth_left();
        let (settle, step_length) = match fit_step(&options, threads, rate, room) {
            Ok((settle, step, note)) => {
                if let Some(note) = note {
                    log.line(format!("Auto-tune: {note}."));
                    tune.space_notes.push(note);
                }
                (settle, step)
            }
            Err(why) => {
                log.line(format!("Auto-tune stopped for space: {why}."));
                tune.space_notes.push(why);
                break;
            }
        };
        let phases = [
            (PhaseKind::Settle, settle),
            (PhaseKind::Measure, step_length),
        ];
        let before = bench.database_bytes();
        let started = std::time::Instant::now();
        let (m, stopped) = bench.dispatch(threads, &phases, false, stop);
        if let Some(StopReason::SpaceBudget(why)) = &stopped {
            let why = format!(
                "the {threads}-session step reached the tuning budget after {:.1} s and was stopped, not judged: {why}",
                started.elapsed().as_secs_f64()
            );
            log.line(format!("Auto-tune stopped for space: {why}."));
            tune.space_notes.push(why);
            break;
        }
        if let Some(reason) = stopped {
            tune.chosen_threads = pass_max.unwrap_or(first);
            return (tune, Some(reason));
        }
        let seconds = started.elapsed().as_secs_f64().max(1e-3);
        let grown = bench.database_bytes().saturating_sub(before) as f64;
        rate = Some(GrowthRate(grown / seconds / f64::from(threads.max(1))));
        let Some(m) = m else { break };
        let failed = step_failures(&m, thresholds, target);
        let passed = failed.is_empty();
        let avg = |c: IoClass| m.totals.io.get(&c).map_or(0.0, |s| s.avg_latency_ms);
        let step = AutoTuneStep {
            threads,
            achieved_iops: transactional_iops(&m.totals.io),
            db_read_avg_ms: avg(IoClass::DbRead),
            log_write_avg_ms: avg(IoClass::LogWrite),
            passed,
            seconds: m.seconds,
            failed_criteria: failed,
        };
        log.line(format!(
            "Auto-tune step: {threads} sessions, {:.1} transactional IOPS, database reads {:.1} ms, log writes {:.1} ms: {}.",
            step.achieved_iops,
            step.db_read_avg_ms,
            step.log_write_avg_ms,
            if passed {
                "pass".to_string()
            } else {
                format!("fail ({})", step.failed_criteria.join("; "))
            }
        ));
        tune.steps.push(step);
        if passed {
            pass_max = Some(pass_max.map_or(threads, |p| p.max(threads)));
        } else {
            fail_min = Some(fail_min.map_or(threads, |f| f.min(threads)));
        }
        next = next_count(pass_max, fail_min, first, options.max_threads);
    }
    tune.chosen_threads = match pass_max {
        Some(p) => p,
        None => {
            log.line(if tune.steps.is_empty() {
                format!("Auto-tune: the space budget allowed no step; using {first}.")
            } else {
                format!("Auto-tune: no session count met the thresholds; using {first}.")
            });
            first
        }
    };
    log.line(format!("Auto-tune chose {} sessions.", tune.chosen_threads));
    (tune, None)
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

/// The next count to try, or None when the search is done.
fn next_count(pass_max: Option<u32>, fail_min: Option<u32>, first: u32, max: u32) -> Option<u32> {
    match (pass_max, fail_min) {
        (None, Some(_)) => None,
        (Some(p), None) => (p < max).then(|| (p * 2).min(max)),
        (Some(p), Some(f)) => {
            let precision = (p / 8).max(1);
            (f > p + precision).then(|| p + (f - p) / 2)
        }
        (None, None) => Some(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates the search against a storage that passes up to `limit` sessions.
    fn search(limit: u32, first: u32, max: u32) -> (Vec<u32>, Option<u32>) {
        let (mut pass, mut fail) = (None, None);
        let mut tried = Vec::new();
        let mut next = Some(first);
        while let Some(t) = next {
            tried.push(t);
            if t <= limit {
                pass = Some(pass.map_or(t, |p: u32| p.max(t)));
            } else {
                fail = Some(fail.map_or(t, |f: u32| f.min(t)));
            }
            next = next_count(pass, fail, first, max);
            assert!(tried.len() < 40);
        }
        (tried, pass)
    }

    #[test]
    fn doubles_then_bisects_to_within_an_eighth() {
        let (tried, chosen) = search(37, 2, 256);
        assert_eq!(&tried[..6], &[2, 4, 8, 16, 32, 64]);
        let chosen = chosen.unwrap();
        assert!((37 - 37 / 8..=37).contains(&chosen), "{chosen} {tried:?}");
    }

    #[test]
    fn stops_at_the_maximum_and_when_nothing_passes() {
        let (tried, chosen) = search(1000, 4, 16);
        assert_eq!(tried, [4, 8, 16]);
        assert_eq!(chosen, Some(16));
        let (tried, chosen) = search(0, 4, 16);
        assert_eq!(tried, [4]);
        assert_eq!(chosen, None);
    }
}
