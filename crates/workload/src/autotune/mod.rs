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
//! A step is judged on the run's criteria, and its latency and stall criteria must
//! also stay within a margin of their limits (`auto_tune_margin`, 80 % by default; see
//! [`judge`]). Then the count found is confirmed over a longer window (twice a step)
//! before the measured phase, as Jetstress's own tuning measured longer windows once
//! settled; a count that does not hold steps down to the next count that passed. A step
//! of tens of seconds cannot see what minutes of a noisy criterion will average: the
//! margin and the confirmation make the chosen count one that passes when measured.
//!
//! Closed-loop steps grow the databases far faster than the target would, so the
//! search has a space budget: before a step, its growth is foreseen from the last
//! step's (per session and second); a step that would not fit is shortened, or not
//! run. The budget is also the engine's growth limit for the search, so a step that
//! grows faster than foreseen is refused its next file extension: it stops there and
//! is not judged. The test log and the results say so.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use edbstress_io::IoClass;
use edbstress_report::summary::transactional_iops;
use edbstress_report::{AutoTune, AutoTuneStep};

use crate::live::PhaseKind;
use crate::profile::Thresholds;
use crate::rundir::TestLog;
use crate::transactional::{StopReason, Workbench};

mod judge;
mod plan;
mod space;

use judge::{judge, percent};
use plan::{Choice, Next, Plan};
pub use space::tuning_budget;
use space::{GrowthRate, fit_step};

/// The default tuning margin: a step passes when each latency and stall criterion is
/// within 80 % of its limit.
pub const DEFAULT_MARGIN: f64 = 0.8;

/// Bounds of the search.
#[derive(Clone, Copy, Debug)]
pub struct AutoTuneOptions {
    /// Measured length of each step.
    pub step: Duration,
    /// Unmeasured time after changing the session count.
    pub settle: Duration,
    /// Measured length of a confirmation window.
    pub confirm: Duration,
    /// Highest session count tried.
    pub max_threads: u32,
    /// Most search steps run.
    pub max_steps: u32,
    /// Most confirmation windows run.
    pub max_confirmations: u32,
    /// The fraction of each latency and stall limit a step must stay within.
    pub margin: f64,
}

impl AutoTuneOptions {
    /// Steps of two sampling intervals (at least 2 s) with half as much settling, up to
    /// 256 sessions and 12 steps, then up to 3 confirmations of twice a step: with the
    /// default 15 s interval, at most 9 minutes of search and under 4 of confirmation.
    pub fn for_interval(sample_interval: Duration) -> AutoTuneOptions {
        let step = (sample_interval * 2).max(Duration::from_secs(2));
        AutoTuneOptions {
            step,
            settle: step / 2,
            confirm: step * 2,
            max_threads: 256,
            max_steps: 12,
            max_confirmations: 3,
            margin: DEFAULT_MARGIN,
        }
    }

    /// The longest the search and its confirmations can take.
    pub fn longest(&self) -> Duration {
        (self.settle + self.step).saturating_mul(self.max_steps)
            + (self.settle + self.confirm).saturating_mul(self.max_confirmations)
    }
}

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
    let mut search = Search {
        bench,
        thresholds,
        target,
        options,
        log,
        tune: AutoTune {
            margin: Some(options.margin),
            ..AutoTune::default()
        },
        rate: None,
    };
    let plan = Plan::new(instances, options.max_threads, options.max_confirmations);
    let (plan, stopped) = search.run(plan, stop);
    let mut tune = search.tune;
    bench.limit_growth(None);
    tune.growth_budget_bytes = growth_budget;
    tune.growth_bytes = Some(bench.database_bytes().saturating_sub(base));
    let choice = match &stopped {
        // Interrupted: the run ends; the count only names what the search had.
        Some(_) => Choice::Unconfirmed(plan.choice().threads()),
        None => plan.choice(),
    };
    tune.chosen_threads = choice.threads();
    if stopped.is_none() {
        let why = why_chosen(choice, &tune, &options);
        log.line(format!(
            "Auto-tune chose {} sessions: {why}.",
            tune.chosen_threads
        ));
        tune.why_chosen = Some(why);
    }
    (tune, stopped)
}

/// The sentence saying why `choice` was made.
fn why_chosen(choice: Choice, tune: &AutoTune, options: &AutoTuneOptions) -> String {
    let within = if options.margin < 1.0 {
        format!(
            "every criterion met within {} of its limit",
            percent(options.margin)
        )
    } else {
        "every criterion met".to_string()
    };
    let seconds = |confirmation: bool| {
        tune.steps
            .iter()
            .filter(|s| s.threads == choice.threads() && s.confirmation == confirmation)
            .map(|s| s.seconds)
            .fold(0.0_f64, f64::max)
    };
    let rejected: Vec<String> = tune
        .steps
        .iter()
        .filter(|s| s.confirmation && !s.passed)
        .map(|s| s.threads.to_string())
        .collect();
    let stepped = if rejected.is_empty() {
        String::new()
    } else {
        format!(
            " ({} did not hold over the confirmation window)",
            rejected.join(", ")
        )
    };
    match choice {
        Choice::Confirmed(_) => format!(
            "the most sessions with {within}, in a {:.0} s step and a {:.0} s confirmation{stepped}",
            seconds(false),
            seconds(true)
        ),
        Choice::Unconfirmed(_) => format!(
            "the most sessions with {within} in a {:.0} s step, not confirmed over a longer window{stepped}",
            seconds(false)
        ),
        Choice::NoneConfirmed(n) => format!(
            "counts passed their steps but none held over the confirmation window{stepped}; using {n} (one session per database)"
        ),
        Choice::NonePassed(n) if tune.steps.is_empty() => {
            format!("the space budget allowed no step; using {n} (one session per database)")
        }
        Choice::NonePassed(n) => {
            format!("no session count had {within}; using {n} (one session per database)")
        }
    }
}

/// The search as it runs: the workbench, what the steps are judged on, the curve so far.
struct Search<'a, 'b> {
    bench: &'a mut Workbench<'b>,
    thresholds: &'a Thresholds,
    target: Option<f64>,
    options: AutoTuneOptions,
    log: &'a TestLog<'a>,
    tune: AutoTune,
    /// The last step's growth rate.
    rate: Option<GrowthRate>,
}

/// What running one step gave.
enum Ran {
    /// Judged.
    Judged(bool),
    /// Not run or not judged for space (noted).
    Space,
    /// Nothing measured.
    Nothing,
}

impl Search<'_, '_> {
    fn run(&mut self, mut plan: Plan, stop: &AtomicBool) -> (Plan, Option<StopReason>) {
        self.log.line(format!(
            "Auto-tuning: steps of {} settling + {} measured, closed loop, from {} sessions; a step passes when its latency and stall criteria are within {} of their limits; the count found is then confirmed over {}.",
            humantime::format_duration(self.options.settle),
            humantime::format_duration(self.options.step),
            plan.first(),
            percent(self.options.margin),
            humantime::format_duration(self.options.confirm),
        ));
        let mut searched = 0;
        loop {
            let (threads, confirmation) = match plan.next() {
                Next::Search(_) if searched >= self.options.max_steps => {
                    plan.end_search();
                    continue;
                }
                Next::Search(n) => (n, false),
                Next::Confirm(n) => (n, true),
                Next::Done => break,
            };
            searched += u32::from(!confirmation);
            match self.step(threads, confirmation, stop) {
                Err(reason) => return (plan, Some(reason)),
                Ok(Ran::Judged(passed)) if confirmation => {
                    plan.confirmed(threads, passed);
                    if !passed && let Next::Confirm(lower) = plan.next() {
                        self.log.line(format!(
                            "Auto-tune: {threads} sessions did not hold over the confirmation window; stepping down to {lower}, the next count that passed its step."
                        ));
                    }
                }
                Ok(Ran::Judged(passed)) => plan.searched(threads, passed),
                Ok(Ran::Space) if confirmation => plan.stop_confirming(),
                Ok(Ran::Space) => plan.end_search(),
                Ok(Ran::Nothing) => plan.stop_confirming(),
            }
        }
        (plan, None)
    }

    /// Runs one step (a confirmation when `confirmation`) and records it.
    fn step(
        &mut self,
        threads: u32,
        confirmation: bool,
        stop: &AtomicBool,
    ) -> Result<Ran, StopReason> {
        let o = self.options;
        let (what, length) = if confirmation {
            ("confirmation", o.confirm)
        } else {
            ("step", o.step)
        };
        let room = self.bench.growth_left();
        let (settle, measured) = match fit_step((o.settle, length), what, threads, self.rate, room)
        {
            Ok((settle, measured, note)) => {
                if let Some(note) = note {
                    self.log.line(format!("Auto-tune: {note}."));
                    self.tune.space_notes.push(note);
                }
                (settle, measured)
            }
            Err(why) => {
                self.log
                    .line(format!("Auto-tune stopped for space: {why}."));
                self.tune.space_notes.push(why);
                return Ok(Ran::Space);
            }
        };
        let phases = [(PhaseKind::Settle, settle), (PhaseKind::Measure, measured)];
        let before = self.bench.database_bytes();
        let started = Instant::now();
        let (m, stopped) = self.bench.dispatch(threads, &phases, false, stop);
        if let Some(StopReason::SpaceBudget(why)) = &stopped {
            let why = format!(
                "the {threads}-session {what} reached the tuning budget after {:.1} s and was stopped, not judged: {why}",
                started.elapsed().as_secs_f64()
            );
            self.log
                .line(format!("Auto-tune stopped for space: {why}."));
            self.tune.space_notes.push(why);
            return Ok(Ran::Space);
        }
        if let Some(reason) = stopped {
            return Err(reason);
        }
        let seconds = started.elapsed().as_secs_f64().max(1e-3);
        let grown = self.bench.database_bytes().saturating_sub(before) as f64;
        self.rate = Some(GrowthRate(grown / seconds / f64::from(threads.max(1))));
        let Some(m) = m else { return Ok(Ran::Nothing) };
        let criteria = judge::step_criteria(&m, self.thresholds, self.target);
        let verdict = judge(&criteria, o.margin);
        let avg = |c: IoClass| m.totals.io.get(&c).map_or(0.0, |s| s.avg_latency_ms);
        let stalls = m
            .instances
            .iter()
            .filter_map(|i| i.engine.as_ref().map(|e| e.page_fault_stalls_per_sec))
            .reduce(f64::max);
        let step = AutoTuneStep {
            threads,
            achieved_iops: transactional_iops(&m.totals.io),
            db_read_avg_ms: avg(IoClass::DbRead),
            log_write_avg_ms: avg(IoClass::LogWrite),
            page_fault_stalls_per_sec: stalls,
            passed: verdict.passed(),
            seconds: m.seconds,
            failed_criteria: verdict.failed.clone(),
            over_margin: verdict.over_margin.clone(),
            confirmation,
        };
        let outcome = match (confirmation, verdict.passed()) {
            (true, true) => "confirmed".to_string(),
            (true, false) => format!("not confirmed: {}", verdict.describe(o.margin)),
            (false, _) => verdict.describe(o.margin),
        };
        self.log.line(format!(
            "Auto-tune {}: {threads} sessions, {:.1} s, {:.1} transactional IOPS, database reads {:.1} ms, log writes {:.1} ms, page-fault stalls {}: {outcome}.",
            if confirmation { "confirmation" } else { "step" },
            step.seconds,
            step.achieved_iops,
            step.db_read_avg_ms,
            step.log_write_avg_ms,
            stalls.map_or("not counted".to_string(), |s| format!("{s:.2}/s (highest instance)")),
        ));
        self.tune.steps.push(step);
        Ok(Ran::Judged(verdict.passed()))
    }
}
