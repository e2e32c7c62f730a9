//! The regression gate of `edbstress compare`: each run after the first is held against
//! the first (the baseline) with limits on how far its rates may drop and its
//! latencies rise, per I/O class, so that a CI pipeline re-validating storage after a
//! firmware or kernel change fails when the storage got worse. A run that fails its own
//! criteria, or stopped early, where the baseline passed, is a regression whatever the
//! limits.

use std::collections::BTreeMap;
use std::fmt::Write;

use edbstress_io::IoClass;

use crate::compare::{RunComparison, run_label};
use crate::model::{RunResults, Verdict};
use crate::text::{fixed3, pct_change, pct_text};

/// A percentage limit for every judged I/O class, and per class where given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassLimit {
    /// For every class without one of its own (and, for rates, the achieved
    /// transactional IOPS).
    pub all: Option<f64>,
    /// For one class.
    pub per_class: BTreeMap<IoClass, f64>,
}

impl ClassLimit {
    /// The limit of `class`, if any.
    pub fn of(&self, class: IoClass) -> Option<f64> {
        self.per_class.get(&class).copied().or(self.all)
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.all.is_none() && self.per_class.is_empty()
    }
}

/// How far a run may be from the baseline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RegressionLimits {
    /// Largest drop of achieved transactional IOPS and of each class's I/Os per
    /// second, percent.
    pub max_iops_drop_pct: ClassLimit,
    /// Largest rise of each class's 99th-percentile latency, percent.
    pub max_p99_rise_pct: ClassLimit,
    /// Largest rise of each class's average latency, percent.
    pub max_avg_latency_rise_pct: ClassLimit,
    /// A latency at or under this many milliseconds never counts as a regression (fast
    /// storage doubles 0.05 ms without anyone noticing).
    pub latency_floor_ms: f64,
    /// The classes judged; empty: every class the baseline measured, the engine's
    /// bookkeeping left out.
    pub classes: Vec<IoClass>,
}

impl RegressionLimits {
    /// Whether any limit is set (without one, compare only shows the table).
    pub fn any(&self) -> bool {
        !(self.max_iops_drop_pct.is_empty()
            && self.max_p99_rise_pct.is_empty()
            && self.max_avg_latency_rise_pct.is_empty())
    }
}

/// One figure of one run held against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct GateCheck {
    /// The run (index into the comparison; the baseline is 0).
    pub run: usize,
    /// What is checked: "Database Reads p99 latency (ms)".
    pub metric: String,
    /// The baseline's value as shown.
    pub baseline: String,
    /// This run's value as shown ("not measured" when it has none).
    pub value: String,
    /// The change and the limit as shown: "+46.3 % (limit +20.0 %)".
    pub change: String,
    /// Whether this figure is over its limit.
    pub regressed: bool,
}

/// Every check of every run against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct GateOutcome {
    /// The checks, run by run.
    pub checks: Vec<GateCheck>,
}

impl GateOutcome {
    /// The checks over their limit.
    pub fn regressions(&self) -> impl Iterator<Item = &GateCheck> {
        self.checks.iter().filter(|c| c.regressed)
    }

    /// Whether any check is over its limit.
    pub fn regressed(&self) -> bool {
        self.regressions().next().is_some()
    }

    /// The checks as text for the terminal, ending with the gate's verdict.
    pub fn to_text(&self, comparison: &RunComparison) -> String {
        let mut o = String::new();
        let width = self
            .checks
            .iter()
            .map(|c| c.metric.chars().count())
            .max()
            .unwrap_or(0);
        for run in 1..comparison.runs.len() {
            let _ = writeln!(
                o,
                "Regression gate: {} against {} (the baseline)",
                run_label(run),
                run_label(0)
            );
            for c in self.checks.iter().filter(|c| c.run == run) {
                let line = format!(
                    "  {:<10} {:<width$}  {} -> {}  {}",
                    if c.regressed { "REGRESSION" } else { "ok" },
                    c.metric,
                    c.baseline,
                    c.value,
                    c.change
                );
                let _ = writeln!(o, "{}", line.trim_end());
            }
        }
        let over = self.regressions().count();
        if over == 0 {
            let _ = writeln!(
                o,
                "Within the limits: {} checks, none over its limit.",
                self.checks.len()
            );
        } else {
            let _ = writeln!(
                o,
                "Regression: {over} of {} checks over the limit.",
                self.checks.len()
            );
        }
        o
    }
}

/// Which way a figure gets worse.
#[derive(Clone, Copy)]
enum Worse {
    /// A rate: worse when it drops.
    Drop,
    /// A latency: worse when it rises.
    Rise,
}

/// Holds every run after the first against the first.
pub fn judge(comparison: &RunComparison, limits: &RegressionLimits) -> GateOutcome {
    let mut checks = Vec::new();
    let Some(base) = comparison.runs.first().map(|r| &r.results) else {
        return GateOutcome { checks };
    };
    let classes = judged_classes(base, limits);
    for (run, compared) in comparison.runs.iter().enumerate().skip(1) {
        let r = &compared.results;
        checks.push(verdict_check(run, base, r));
        if let Some(limit) = limits.max_iops_drop_pct.all {
            checks.push(figure_check(
                run,
                "Achieved transactional IOPS".into(),
                base.achieved_transactional_iops,
                Some(r.achieved_transactional_iops),
                limit,
                Worse::Drop,
                0.0,
            ));
        }
        for &class in &classes {
            let b = base.totals.io.get(&class);
            let v = r.totals.io.get(&class).filter(|s| s.count > 0);
            let l = class.label();
            let Some(b) = b else { continue };
            if let Some(limit) = limits.max_iops_drop_pct.of(class) {
                checks.push(figure_check(
                    run,
                    format!("{l}/sec"),
                    b.per_sec,
                    Some(v.map_or(0.0, |s| s.per_sec)),
                    limit,
                    Worse::Drop,
                    0.0,
                ));
            }
            if let Some(limit) = limits.max_p99_rise_pct.of(class) {
                checks.push(figure_check(
                    run,
                    format!("{l} p99 latency (ms)"),
                    b.p99_ms,
                    v.map(|s| s.p99_ms),
                    limit,
                    Worse::Rise,
                    limits.latency_floor_ms,
                ));
            }
            if let Some(limit) = limits.max_avg_latency_rise_pct.of(class) {
                checks.push(figure_check(
                    run,
                    format!("{l} average latency (ms)"),
                    b.avg_latency_ms,
                    v.map(|s| s.avg_latency_ms),
                    limit,
                    Worse::Rise,
                    limits.latency_floor_ms,
                ));
            }
        }
    }
    GateOutcome { checks }
}

/// The classes judged: those asked for, or every class the baseline measured but the
/// engine's bookkeeping.
fn judged_classes(base: &RunResults, limits: &RegressionLimits) -> Vec<IoClass> {
    IoClass::ALL
        .into_iter()
        .filter(|c| {
            let measured = base.totals.io.get(c).is_some_and(|s| s.count > 0);
            if limits.classes.is_empty() {
                measured && !c.is_bookkeeping()
            } else {
                measured && limits.classes.contains(c)
            }
        })
        .collect()
}

/// A run that failed or stopped early where the baseline passed is a regression.
fn verdict_check(run: usize, base: &RunResults, r: &RunResults) -> GateCheck {
    let shown = |r: &RunResults| {
        let mut v = r.overall_result.label().to_string();
        if r.aborted {
            v.push_str(" (stopped early)");
        }
        v
    };
    let base_passed = base.overall_result == Verdict::Pass && !base.aborted;
    let passed = r.overall_result == Verdict::Pass && !r.aborted;
    let regressed = base_passed && !passed;
    GateCheck {
        run,
        metric: "Overall Test Result".into(),
        baseline: shown(base),
        value: shown(r),
        change: if regressed {
            "the baseline passed".into()
        } else {
            String::new()
        },
        regressed,
    }
}

/// One figure against its limit; `floor`: a value at or under it is never a regression.
fn figure_check(
    run: usize,
    metric: String,
    base: f64,
    value: Option<f64>,
    limit_pct: f64,
    worse: Worse,
    floor: f64,
) -> GateCheck {
    let Some(v) = value else {
        return GateCheck {
            run,
            metric,
            baseline: fixed3(base),
            value: "not measured".into(),
            change: "the baseline measured it".into(),
            regressed: true,
        };
    };
    let change = pct_change(base, v);
    let (over_limit, limit_text) = match worse {
        Worse::Drop => (
            change.is_some_and(|c| c < -limit_pct),
            format!("limit -{limit_pct:.1} %"),
        ),
        // From zero any rise is infinite.
        Worse::Rise => (
            change.map_or(v > base, |c| c > limit_pct),
            format!("limit +{limit_pct:.1} %"),
        ),
    };
    let floored = matches!(worse, Worse::Rise) && over_limit && v <= floor;
    let floor_note = if floored {
        format!(", at or under the {floor} ms floor")
    } else {
        String::new()
    };
    GateCheck {
        run,
        metric,
        baseline: fixed3(base),
        value: fixed3(v),
        change: format!("{} ({limit_text}{floor_note})", pct_text(change)),
        regressed: over_limit && !floored,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_drop_is_judged_against_its_limit() {
        let within = figure_check(1, "x".into(), 100.0, Some(96.0), 5.0, Worse::Drop, 0.0);
        assert!(!within.regressed, "{within:?}");
        let over = figure_check(1, "x".into(), 100.0, Some(94.0), 5.0, Worse::Drop, 0.0);
        assert!(over.regressed, "{over:?}");
        assert_eq!(over.change, "-6.0 % (limit -5.0 %)");
        let rise = figure_check(1, "x".into(), 100.0, Some(150.0), 5.0, Worse::Drop, 0.0);
        assert!(!rise.regressed, "a higher rate is no regression");
    }

    #[test]
    fn a_latency_rise_under_the_floor_is_no_regression() {
        let over = figure_check(1, "x".into(), 0.1, Some(0.3), 20.0, Worse::Rise, 0.0);
        assert!(over.regressed);
        let floored = figure_check(1, "x".into(), 0.1, Some(0.3), 20.0, Worse::Rise, 0.5);
        assert!(!floored.regressed, "{floored:?}");
        assert!(
            floored.change.contains("0.5 ms floor"),
            "{}",
            floored.change
        );
        let from_zero = figure_check(1, "x".into(), 0.0, Some(2.0), 20.0, Worse::Rise, 1.0);
        assert!(from_zero.regressed, "{from_zero:?}");
        let missing = figure_check(1, "x".into(), 1.0, None, 20.0, Worse::Rise, 0.0);
        assert!(missing.regressed && missing.value == "not measured");
    }

    #[test]
    fn per_class_limits_override_the_common_one() {
        let mut l = ClassLimit {
            all: Some(10.0),
            ..ClassLimit::default()
        };
        l.per_class.insert(IoClass::LogWrite, 2.0);
        assert_eq!(l.of(IoClass::DbRead), Some(10.0));
        assert_eq!(l.of(IoClass::LogWrite), Some(2.0));
        assert!(!l.is_empty());
    }
}
