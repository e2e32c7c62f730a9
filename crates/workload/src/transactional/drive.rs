//! The main thread's part of dispatch, phase by phase: a tick a second (progress, the
//! open-loop rate, a growth the engine refused), samples of the measured phase, and the warm-up's
//! own end (the caches full enough) and timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use edbstress_io::IoClass;
use edbstress_report::summary::rate;

use super::measure::MeasureRecorder;
use super::{
    Interval, LIVE_CLASSES, Measurement, Snapshot, StopReason, TICK, TxnStats, Workbench,
    sleep_until, until_start, warmup,
};
use crate::live::{LiveStatus, PhaseKind};
use crate::stop::later;

/// Runs `phases` in order; returns the measurement of the `Measure` phase (if any) and
/// why dispatch stopped early (if it did).
pub(super) fn self_drive(
    bench: &Workbench<'_>,
    sessions: u32,
    phases: &[(PhaseKind, Duration)],
    open_loop: bool,
    stop: &AtomicBool,
) -> (Option<Measurement>, Option<StopReason>) {
    let mut measurement = None;
    for &(kind, length) in phases {
        let length = match kind {
            PhaseKind::WaitForStart => match until_start(bench.config) {
                Ok(wait) => {
                    bench.log.line(format!(
                        "Waiting {:.1} s for the start time, load running.",
                        wait.as_secs_f64()
                    ));
                    wait
                }
                Err(late) => return (measurement, Some(StopReason::Failed(late.to_string()))),
            },
            _ => length,
        };
        let phase = Phase {
            kind,
            start: Instant::now(),
            length,
            sessions,
            open_loop,
        };
        let (m, stopped) = phase.run(bench, stop);
        measurement = m.or(measurement);
        if stopped.is_some() {
            return (measurement, stopped);
        }
    }
    (measurement, None)
}

/// One phase of dispatch.
struct Phase {
    kind: PhaseKind,
    start: Instant,
    length: Duration,
    sessions: u32,
    open_loop: bool,
}

impl Phase {
    fn run(
        &self,
        bench: &Workbench<'_>,
        stop: &AtomicBool,
    ) -> (Option<Measurement>, Option<StopReason>) {
        for s in &bench.slots {
            s.schedule.restart_at(self.start);
        }
        let mut last_tick = bench.snapshot();
        // The tick's snapshot and interval, reused every second (see `snapshot_into`).
        let mut snap = last_tick.clone();
        let mut tick = bench.interval(&last_tick, &snap);
        let mut recorder =
            (self.kind == PhaseKind::Measure).then(|| MeasureRecorder::new(bench, &last_tick));
        let mut next_sample = later(self.start, bench.config.sample_interval);
        let deadline = later(self.start, self.length);
        let mut warm = None;
        if self.kind == PhaseKind::AttainPrerequisites {
            match warmup_start(bench, &last_tick, self) {
                Some(w) => warm = Some(w),
                None => return (None, None),
            }
        }
        let mut stopped = None;
        loop {
            if stop.load(Ordering::Relaxed) {
                stopped = Some(StopReason::Interrupted);
                break;
            }
            if let Some(f) = bench.failure() {
                stopped = Some(StopReason::Failed(f));
                break;
            }
            if let Some(why) = bench.growth_refused() {
                stopped = Some(StopReason::SpaceBudget(why));
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            sleep_until(later(now, TICK).min(deadline), stop);
            bench.snapshot_into(&mut snap);
            bench.interval_into(&last_tick, &snap, &mut tick);
            // A cold cache makes more I/Os per transaction than the measured load will.
            let offered = (self.kind != PhaseKind::AttainPrerequisites)
                .then(|| steer(bench, &tick, self.open_loop))
                .flatten();
            (bench.progress)(&self.live_status(&snap, &tick, deadline, offered, warm.as_ref()));
            if let Some(w) = warm.as_mut() {
                if let Some(line) = w.line_if_due(snap.at, &fills(&snap)) {
                    bench.log.line(line);
                }
                if Workbench::cache_fill_pct(&snap) >= warmup::TARGET_FILL_PCT {
                    warmup_reached(bench, &snap, self.start);
                    break;
                }
            }
            if let Some(r) = recorder.as_mut()
                && (snap.at >= next_sample || snap.at >= deadline)
            {
                r.sample(bench, &snap);
                next_sample = next_sample_after(next_sample, snap.at, bench.config.sample_interval);
            }
            std::mem::swap(&mut last_tick, &mut snap);
        }
        if let Some(w) = &warm
            && stopped.is_none()
            && Instant::now() >= deadline
        {
            warmup_timed_out(bench, w, self.length);
        }
        // An interrupted measurement still reports what it measured.
        let measurement = recorder.map(|r| r.finish(bench, &bench.snapshot(), self.sessions));
        (measurement, stopped)
    }

    fn live_status(
        &self,
        snap: &Snapshot,
        tick: &Interval,
        deadline: Instant,
        offered: Option<f64>,
        warm: Option<&warmup::WarmupProgress>,
    ) -> LiveStatus {
        LiveStatus {
            phase: self.kind,
            sessions: self.sessions,
            elapsed: snap.at - self.start,
            remaining: (self.kind != PhaseKind::AttainPrerequisites)
                .then(|| deadline.saturating_duration_since(snap.at)),
            txn_per_sec: rate(tick.txn.iter().map(TxnStats::count).sum(), tick.seconds),
            classes: LIVE_CLASSES
                .iter()
                .map(|c| {
                    let (ops, ns) = tick.io.total_ops_and_latency_ns(*c);
                    let mean_ms = if ops == 0 {
                        0.0
                    } else {
                        ns as f64 / ops as f64 / 1e6
                    };
                    (*c, rate(ops, tick.seconds), mean_ms)
                })
                .collect(),
            cache_fill_pct: Workbench::cache_fill_pct(snap),
            offered_rate: offered,
            warmup: warm.map(|w| {
                let f = fills(snap);
                (w.rate_pct_per_sec(snap.at, &f), w.estimate(snap.at, &f))
            }),
        }
    }
}

/// The next sample time after `now`: after a stall the slots it swallowed are gone, so
/// the next sample is one interval on, not a burst of catching-up slivers.
fn next_sample_after(mut next: Instant, now: Instant, interval: Duration) -> Instant {
    while next <= now {
        let after = later(next, interval);
        if after == next {
            break;
        }
        next = after;
    }
    next
}

/// Updates the estimate of database I/Os per transaction from the tick (closed-loop
/// phases too, so that an open-loop phase starts from what tuning saw) and, when
/// the phase is open loop, sets the instances' rates from it; the rate offered.
fn steer(bench: &Workbench<'_>, tick: &Interval, open_loop: bool) -> Option<f64> {
    let mut controller = bench.controller.lock();
    let c = controller.as_mut()?;
    let ios: u64 = [IoClass::DbRead, IoClass::DbWrite]
        .iter()
        .map(|class| tick.io.total_ops_and_latency_ns(*class).0)
        .sum();
    let txns: u64 = tick.txn.iter().map(TxnStats::count).sum();
    let r = c.observe(ios, txns);
    if !open_loop {
        return None;
    }
    for s in &bench.slots {
        s.schedule.set_rate(r / bench.slots.len() as f64);
    }
    Some(r)
}

/// Each instance's cache fill: (frames in use, maximum frames).
fn fills(snap: &Snapshot) -> Vec<warmup::Fill> {
    snap.cache
        .iter()
        .map(|c| (c.frames as u64, c.max_frames as u64))
        .collect()
}

/// The start of the warm-up: its progress tracker, or None (and the reason logged) when
/// a cache can never fill.
fn warmup_start(
    bench: &Workbench<'_>,
    first: &Snapshot,
    phase: &Phase,
) -> Option<warmup::WarmupProgress> {
    let page_bytes = bench.config.page_size.bytes() as u64;
    let database_pages: Vec<u64> = bench
        .slots
        .iter()
        .map(|s| s.initial_bytes / page_bytes)
        .collect();
    if let Some(why) = warmup::cannot_fill(&fills(first), &database_pages, page_bytes) {
        bench
            .log
            .line(format!("Attaining prerequisites skipped: {why}."));
        return None;
    }
    bench.log.line(format!(
        "Attaining prerequisites: filling each database cache to {:.0} % (at most {}), {} sessions closed loop, as fast as the storage allows.",
        warmup::TARGET_FILL_PCT,
        humantime::format_duration(phase.length),
        phase.sessions
    ));
    Some(warmup::WarmupProgress::new(
        phase.start,
        &fills(first),
        bench.config.sample_interval,
        page_bytes,
    ))
}

/// The warm-up's line when the caches are full enough, as Jetstress prints it.
fn warmup_reached(bench: &Workbench<'_>, snap: &Snapshot, start: Instant) {
    let last: u64 = snap.cache.iter().map(|c| c.frames as u64).sum();
    let max: u64 = snap.cache.iter().map(|c| c.max_frames as u64).sum();
    let page = bench.config.page_size.bytes() as f64;
    let mib = (1u64 << 20) as f64;
    bench.log.line(format!(
        "Database Cache Size, Last: {:.1} MiB (lower bound: {:.1} MiB, upper bound: none), reached in {}",
        last as f64 * page / mib,
        0.9 * max as f64 * page / mib,
        humantime::format_duration(Duration::from_secs((snap.at - start).as_secs()))
    ));
}

/// The warm-up's line when it timed out: how full the caches got and why.
fn warmup_timed_out(bench: &Workbench<'_>, warm: &warmup::WarmupProgress, length: Duration) {
    let snap = bench.snapshot();
    bench.log.line(format!(
        "Caches did not reach 90 % of their maximum within {} (smallest fill {:.0} %): {}; measuring anyway.",
        humantime::format_duration(length),
        Workbench::cache_fill_pct(&snap),
        warm.timeout_reason(snap.at, &fills(&snap), length)
    ));
}
