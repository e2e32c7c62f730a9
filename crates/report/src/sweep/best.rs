//! Each point's figures over its repeats, and the best point under the stated rule:
//! the highest transactional IOPS among passing points, IOPS within
//! [`TIE_PCT`] percent counted as a tie broken by the lower 99th percentile database
//! read latency; with the runner-up and how far apart the two are compared with the
//! spread between repeats of one point.

use super::{ClassFigures, PointFigures, SweepResults};
use crate::model::Verdict;

/// IOPS this many percent apart count as a tie.
pub const TIE_PCT: f64 = 1.0;

/// The rule, as the page and the command print it.
pub const RULE: &str = "highest transactional IOPS among passing points (every repeat \
     passed); IOPS within 1 % are a tie, broken by the lower 99th percentile database \
     read latency";

/// A point's figures over its finished repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct PointStats {
    /// Index of the point.
    pub point: usize,
    /// Finished repeats.
    pub runs: usize,
    /// Every finished repeat passed (and there is at least one).
    pub passed: bool,
    /// Mean transactional IOPS.
    pub iops: f64,
    /// Lowest and highest transactional IOPS of the repeats.
    pub iops_range: (f64, f64),
    /// Means of the database reads.
    pub db_read: ClassFigures,
    /// Means of the database writes.
    pub db_write: ClassFigures,
    /// Means of the log writes.
    pub log_write: ClassFigures,
    /// Mean of the numeric measured values, when every one is a number.
    pub measured: Option<f64>,
}

impl PointStats {
    /// Highest minus lowest IOPS of the repeats.
    pub fn spread(&self) -> f64 {
        self.iops_range.1 - self.iops_range.0
    }
}

fn mean_class(f: &[&ClassFigures]) -> ClassFigures {
    let n = f.len().max(1) as f64;
    ClassFigures {
        per_sec: f.iter().map(|c| c.per_sec).sum::<f64>() / n,
        mb_per_sec: f.iter().map(|c| c.mb_per_sec).sum::<f64>() / n,
        avg_ms: f.iter().map(|c| c.avg_ms).sum::<f64>() / n,
        p99_ms: f.iter().map(|c| c.p99_ms).sum::<f64>() / n,
    }
}

/// The measured output as a number ("1.62", "1.62x", "ratio 1.62" → 1.62).
pub fn measured_number(text: &str) -> Option<f64> {
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return v.is_finite().then_some(v);
    }
    t.split(|c: char| c.is_whitespace() || c == '=' || c == ':')
        .filter_map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<f64>()
                .ok()
        })
        .find(|v| v.is_finite())
}

/// Each point with at least one finished run, in the order written.
pub fn point_stats(s: &SweepResults) -> Vec<PointStats> {
    let mut out = Vec::new();
    for point in 0..s.points.len() {
        let runs: Vec<(&super::PointRun, &PointFigures)> =
            s.done().filter(|(r, _)| r.point == point).collect();
        if runs.is_empty() {
            continue;
        }
        let n = runs.len() as f64;
        let iops: Vec<f64> = runs.iter().map(|(_, f)| f.transactional_iops).collect();
        let measured: Option<Vec<f64>> = runs
            .iter()
            .map(|(r, _)| r.measured.as_deref().and_then(measured_number))
            .collect();
        out.push(PointStats {
            point,
            runs: runs.len(),
            passed: runs.iter().all(|(_, f)| f.verdict == Verdict::Pass),
            iops: iops.iter().sum::<f64>() / n,
            iops_range: (
                iops.iter().copied().fold(f64::INFINITY, f64::min),
                iops.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ),
            db_read: mean_class(&runs.iter().map(|(_, f)| &f.db_read).collect::<Vec<_>>()),
            db_write: mean_class(&runs.iter().map(|(_, f)| &f.db_write).collect::<Vec<_>>()),
            log_write: mean_class(&runs.iter().map(|(_, f)| &f.log_write).collect::<Vec<_>>()),
            measured: measured.map(|m| m.iter().sum::<f64>() / n),
        });
    }
    out
}

/// What the sweep recommends.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The best point, if any point passed.
    pub best: Option<PointStats>,
    /// The next best passing point.
    pub runner_up: Option<PointStats>,
    /// Points with finished runs, and how many of them passed.
    pub points: (usize, usize),
    /// When no point passed: the one with the highest IOPS, for orientation.
    pub top_failing: Option<PointStats>,
}

/// Picks the best passing point of `stats` by [`RULE`].
fn pick(candidates: &[&PointStats]) -> Option<usize> {
    let top = candidates.iter().map(|p| p.iops).fold(f64::NAN, f64::max);
    if top.is_nan() {
        return None;
    }
    let floor = top * (1.0 - TIE_PCT / 100.0);
    candidates
        .iter()
        .enumerate()
        .filter(|(_, p)| p.iops >= floor)
        .min_by(|a, b| a.1.db_read.p99_ms.total_cmp(&b.1.db_read.p99_ms))
        .map(|(i, _)| i)
}

/// The best point and the runner-up of a sweep.
pub fn recommend(s: &SweepResults) -> Recommendation {
    let stats = point_stats(s);
    let mut passing: Vec<&PointStats> = stats.iter().filter(|p| p.passed).collect();
    let points = (stats.len(), passing.len());
    let best = pick(&passing).map(|i| passing.remove(i).clone());
    let runner_up = pick(&passing).map(|i| passing[i].clone());
    let top_failing = if best.is_none() {
        stats
            .iter()
            .max_by(|a, b| a.iops.total_cmp(&b.iops))
            .cloned()
    } else {
        None
    };
    Recommendation {
        best,
        runner_up,
        points,
        top_failing,
    }
}

impl Recommendation {
    /// The recommendation in sentences: the best point, the runner-up, and whether
    /// their difference is larger than the spread between repeats.
    pub fn describe(&self, s: &SweepResults) -> Vec<String> {
        let mut out = Vec::new();
        let Some(best) = &self.best else {
            out.push(format!(
                "No point passed ({} of {} points with finished runs passed): nothing to \
                 recommend.",
                self.points.1, self.points.0
            ));
            if let Some(top) = &self.top_failing {
                out.push(format!(
                    "The highest transactional IOPS was {:.1} at {} ({}), which failed; its \
                     runs' reports say which criteria.",
                    top.iops,
                    s.describe_point(top.point),
                    s.points[top.point].id
                ));
            }
            return out;
        };
        out.push(format!(
            "Best: {} ({}) — {:.1} transactional IOPS (mean of {} run{}), database read \
             p99 {:.2} ms, log write avg {:.2} ms.",
            s.describe_point(best.point),
            s.points[best.point].id,
            best.iops,
            best.runs,
            if best.runs == 1 { "" } else { "s" },
            best.db_read.p99_ms,
            best.log_write.avg_ms
        ));
        let Some(second) = &self.runner_up else {
            out.push("No runner-up: no other point passed.".into());
            return out;
        };
        let gap = best.iops - second.iops;
        let pct = if second.iops > 0.0 {
            gap / second.iops * 100.0
        } else {
            0.0
        };
        out.push(format!(
            "Runner-up: {} ({}) — {:.1} IOPS, database read p99 {:.2} ms; {:.1} IOPS \
             ({:.1} %) apart.",
            s.describe_point(second.point),
            s.points[second.point].id,
            second.iops,
            second.db_read.p99_ms,
            gap,
            pct
        ));
        let spread = best.spread().max(second.spread());
        if best.runs < 2 && second.runs < 2 {
            out.push(
                "With one run per point the spread between repeats is unknown: repeat \
                 the sweep (repeats = 2 or more) before trusting a small difference."
                    .into(),
            );
        } else if gap > spread {
            out.push(format!(
                "The difference is larger than the spread between repeats of one point \
                 ({spread:.1} IOPS): the best point is ahead on this evidence."
            ));
        } else {
            out.push(format!(
                "The difference is within the spread between repeats of one point \
                 ({spread:.1} IOPS): the two are not told apart by this sweep; choose on \
                 other grounds (latency, space) or repeat more."
            ));
        }
        out
    }
}
