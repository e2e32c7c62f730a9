//! Progress as lines of the test log, at a fixed interval: what a run without a
//! terminal shows instead of the live status line (a job under nohup, systemd, CI or a
//! remote `fleet`/`esrp` step whose standard error goes to a file). Each line says the
//! phase, how long it has run, the transactions and I/Os per second and their average
//! latencies over the phase so far, and the cache fill; database creation, backup,
//! recovery and verification say how far they are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use edbstress_engine::PrepareProgress;
use edbstress_io::ByteSize;
use edbstress_io::IoClass;
use parking_lot::Mutex;

use crate::live::{LiveStatus, PhaseKind};
use crate::rundir::TestLog;
use crate::units::format_duration;

/// Every line starts with this word, so that a reader (or `grep`) tells progress from
/// the test's own events.
pub const PROGRESS_PREFIX: &str = "Progress:";

/// Writes a progress line to the test log at most once per interval, from the events a
/// run reports (live status once a second, database creation, offline progress).
pub struct ProgressLines {
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// When the last line was written (or the run started).
    last_line: Option<Instant>,
    /// The phase the averages are over, and its figures so far.
    phase: Option<PhaseKind>,
    ticks: u32,
    txn_per_sec_sum: f64,
    /// Per class: (sum of I/Os per second over the ticks, sum of per-second × average
    /// latency), so the latency is weighted by the I/Os of each tick.
    classes: BTreeMap<IoClass, (f64, f64)>,
    /// When the current offline step ("verifying checksums") started.
    step: Option<(String, Instant)>,
}

impl ProgressLines {
    /// Lines at most every `interval` (the first one an interval after the start).
    pub fn new(interval: Duration) -> ProgressLines {
        ProgressLines {
            interval,
            state: Mutex::new(State {
                last_line: Some(Instant::now()),
                ..State::default()
            }),
        }
    }

    /// The live status of a transactional phase (once a second).
    pub fn live(&self, status: &LiveStatus, log: &TestLog<'_>) {
        let mut s = self.state.lock();
        if s.phase != Some(status.phase) {
            s.phase = Some(status.phase);
            s.ticks = 0;
            s.txn_per_sec_sum = 0.0;
            s.classes.clear();
        }
        s.ticks += 1;
        s.txn_per_sec_sum += status.txn_per_sec;
        for &(class, per_sec, ms) in &status.classes {
            let c = s.classes.entry(class).or_default();
            c.0 += per_sec;
            c.1 += per_sec * ms;
        }
        if self.due(&mut s) {
            let line = live_line(status, &s);
            drop(s);
            log.line(line);
        }
    }

    /// Database creation progress.
    pub fn prepare(&self, p: &PrepareProgress, log: &TestLog<'_>) {
        let mut s = self.state.lock();
        if self.due(&mut s) {
            drop(s);
            log.line(format!(
                "{PROGRESS_PREFIX} preparing database {:03}, {} of {} written.",
                p.instance,
                ByteSize(p.bytes_done).approx(),
                ByteSize(p.bytes_total).approx()
            ));
        }
    }

    /// Progress of an offline step (backup, recovery, verification): `done` of `total`.
    pub fn step(&self, what: &str, done: u64, total: u64, log: &TestLog<'_>) {
        let mut s = self.state.lock();
        let now = Instant::now();
        if s.step.as_ref().is_none_or(|(w, _)| w != what) {
            s.step = Some((what.to_string(), now));
        }
        if self.due(&mut s) {
            let elapsed = s
                .step
                .as_ref()
                .map_or(Duration::ZERO, |(_, t)| now.duration_since(*t));
            drop(s);
            let pct = if total > 0 {
                100.0 * done as f64 / total as f64
            } else {
                0.0
            };
            log.line(format!(
                "{PROGRESS_PREFIX} {what}, {pct:.0} % done after {}.",
                whole_seconds(elapsed)
            ));
        }
    }

    /// Whether a line is due now; if so, the interval starts again.
    fn due(&self, s: &mut State) -> bool {
        let now = Instant::now();
        match s.last_line {
            Some(last) if now.duration_since(last) < self.interval => false,
            _ => {
                s.last_line = Some(now);
                true
            }
        }
    }
}

/// "Progress: measuring, 4m elapsed, 1m left, 8 sessions; 412.3 transactions/s;
/// Database Reads 300.1/s at 4.20 ms, ... (averages over the phase so far); cache 100 %."
fn live_line(status: &LiveStatus, s: &State) -> String {
    let ticks = f64::from(s.ticks.max(1));
    let mut out = format!(
        "{PROGRESS_PREFIX} {}, {} elapsed",
        status.phase.name(),
        whole_seconds(status.elapsed)
    );
    if let Some(left) = status.remaining {
        out.push_str(&format!(", {} left", whole_seconds(left)));
    }
    out.push_str(&format!(
        ", {} sessions; {:.1} transactions/s",
        status.sessions,
        s.txn_per_sec_sum / ticks
    ));
    if let Some(rate) = status.offered_rate {
        out.push_str(&format!(" (offered {rate:.1}/s)"));
    }
    for (class, (per_sec_sum, weighted_ms)) in &s.classes {
        if *per_sec_sum <= 0.0 {
            continue;
        }
        out.push_str(&format!(
            "; {} {:.1}/s at {:.2} ms",
            class.label(),
            per_sec_sum / ticks,
            weighted_ms / per_sec_sum
        ));
    }
    out.push_str(" (averages over the phase so far)");
    out.push_str(&format!("; cache {:.0} %", status.cache_fill_pct));
    if let Some((rate, eta)) = status.warmup {
        match eta {
            Some(eta) => out.push_str(&format!(
                " (+{rate:.2} %/s, about {} to 90 %)",
                whole_seconds(eta)
            )),
            None => out.push_str(" (not growing)"),
        }
    }
    out.push('.');
    out
}

/// A duration to the second ("4m 5s"), as the log shows elapsed time.
fn whole_seconds(d: Duration) -> String {
    format_duration(Duration::from_secs(d.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: PhaseKind, elapsed: u64, reads: f64, read_ms: f64) -> LiveStatus {
        LiveStatus {
            phase,
            sessions: 8,
            elapsed: Duration::from_secs(elapsed),
            remaining: Some(Duration::from_secs(60)),
            txn_per_sec: 100.0,
            classes: vec![
                (IoClass::DbRead, reads, read_ms),
                (IoClass::LogWrite, 0.0, 0.0),
            ],
            cache_fill_pct: 99.6,
            offered_rate: None,
            warmup: None,
        }
    }

    #[test]
    fn a_line_averages_the_phase_so_far_weighting_latency_by_ios() {
        let log = TestLog::in_memory();
        // Interval zero: every tick is due, so the second line covers both ticks.
        let p = ProgressLines::new(Duration::ZERO);
        p.live(&status(PhaseKind::Measure, 1, 100.0, 2.0), &log);
        p.live(&status(PhaseKind::Measure, 2, 300.0, 6.0), &log);
        let lines = log.lines();
        assert_eq!(lines.len(), 2);
        // (100 × 2 + 300 × 6) / 400 = 5 ms; (100 + 300) / 2 = 200/s.
        assert!(
            lines[1].contains("Progress: measuring, 2s elapsed, 1m left, 8 sessions; 100.0 transactions/s; Database Reads 200.0/s at 5.00 ms (averages over the phase so far); cache 100 %."),
            "{}",
            lines[1]
        );
        assert!(
            !lines[1].contains("Log Writes"),
            "idle classes are left out"
        );
    }

    #[test]
    fn a_new_phase_starts_new_averages() {
        let log = TestLog::in_memory();
        let p = ProgressLines::new(Duration::ZERO);
        p.live(
            &status(PhaseKind::AttainPrerequisites, 1, 1000.0, 9.0),
            &log,
        );
        p.live(&status(PhaseKind::Measure, 1, 10.0, 1.0), &log);
        let last = log.lines().pop().unwrap();
        assert!(last.contains("Database Reads 10.0/s at 1.00 ms"), "{last}");
    }

    #[test]
    fn lines_wait_for_the_interval() {
        let log = TestLog::in_memory();
        let p = ProgressLines::new(Duration::from_secs(3600));
        for t in 0..100 {
            p.live(&status(PhaseKind::Measure, t, 10.0, 1.0), &log);
            p.step("verifying checksums", t, 100, &log);
        }
        assert!(log.lines().is_empty(), "{:?}", log.lines());
    }
}
