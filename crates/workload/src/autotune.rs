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

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use edbstress_io::IoClass;
use edbstress_report::summary::transactional_iops;
use edbstress_report::{AutoTune, AutoTuneStep};

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

/// Runs the search on an open, warm workbench; returns the chosen count and the curve,
/// and why it stopped early (if it did).
pub fn auto_tune(
    bench: &mut Workbench<'_>,
    instances: u32,
    thresholds: &Thresholds,
    target: Option<f64>,
    options: AutoTuneOptions,
    log: &TestLog<'_>,
    stop: &AtomicBool,
) -> (AutoTune, Option<StopReason>) {
    let mut tune = AutoTune::default();
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
        let phases = [
            (PhaseKind::Settle, options.settle),
            (PhaseKind::Measure, options.step),
        ];
        let (m, stopped) = bench.dispatch(threads, &phases, false, stop);
        if let Some(reason) = stopped {
            tune.chosen_threads = pass_max.unwrap_or(first);
            return (tune, Some(reason));
        }
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
            log.line(format!(
                "Auto-tune: no session count met the thresholds; using {first}."
            ));
            first
        }
    };
    log.line(format!("Auto-tune chose {} sessions.", tune.chosen_threads));
    (tune, None)
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
