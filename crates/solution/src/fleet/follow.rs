//! Following the hosts' runs: each host's session streams its test log (into the fleet
//! log), and the fleet waits until every run ended, was stopped or was given up on — a
//! host still running past the deadline (or past the stop wait after Ctrl-C) is lost,
//! its ssh session ended.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use super::progress::{FleetLog, Phase, PhaseCounter};
use super::remote::{self, START_MARK};
use super::sessions::map_bounded;
use super::{FleetEvent, FleetHost, FleetOptions, MAX_STOP_WAIT, STOP_LIMIT};
use crate::process_group::GroupChild;

/// A host's session is opening: its run has not said it started yet.
pub(super) const OPENING: u8 = 0;
/// The remote shell said the run starts.
pub(super) const STARTED: u8 = 1;
/// The session ended before the run started.
pub(super) const ENDED_EARLY: u8 = 2;

/// One host's run while the fleet follows it.
pub(super) struct Running {
    pub(super) host: FleetHost,
    pub(super) remote_dir: String,
    pub(super) child: GroupChild,
    pub(super) reader: Option<std::thread::JoinHandle<()>>,
    /// How far its session got ([`OPENING`], [`STARTED`], [`ENDED_EARLY`]).
    pub(super) state: Arc<AtomicU8>,
    /// How its run ended, once it did.
    pub(super) ended: Option<String>,
    /// It stopped answering: given up on, not copied back.
    pub(super) lost: bool,
}

impl Running {
    /// Whether the fleet lost sight of its run (its run may go on there).
    pub(super) fn was_lost(&self) -> bool {
        self.lost
            || self
                .ended
                .as_deref()
                .is_some_and(|e| e.starts_with("was lost"))
    }
}

/// Reads a host's test log lines (its ssh's stderr) and hands them to the main thread,
/// which logs them; the start mark sets `state` instead.
pub(super) fn follow(
    stderr: std::process::ChildStderr,
    host: String,
    tx: Sender<(String, String)>,
    state: Arc<AtomicU8>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line == START_MARK {
                state.store(STARTED, Ordering::SeqCst);
                continue;
            }
            if tx.send((host.clone(), line)).is_err() {
                break;
            }
        }
        let _ = state.compare_exchange(OPENING, ENDED_EARLY, Ordering::SeqCst, Ordering::SeqCst);
    })
}

/// How a host's ssh session ended, in words.
fn how_it_ended(code: Option<i32>) -> String {
    match code {
        Some(0) => "passed".to_string(),
        Some(1) => "failed".to_string(),
        Some(130) => "stopped".to_string(),
        Some(255) => "was lost (ssh failed with exit 255: the connection was lost, the host \
                      went down or its run was killed)"
            .to_string(),
        Some(c) => format!("ended with exit code {c}"),
        None => "ssh was killed".to_string(),
    }
}

/// Follows the hosts until every run ended, was stopped or was given up on: a host still
/// running past `deadline` (or past the stop wait after Ctrl-C) is lost, its ssh ended.
pub(super) fn follow_until_done(
    options: &FleetOptions,
    running: &mut [Running],
    lines: &Receiver<(String, String)>,
    deadline: Instant,
    stop: &AtomicBool,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
    log: &FleetLog,
) {
    let counter = PhaseCounter::new(Phase::Measure, running.len(), events, log);
    let mut stop_deadline: Option<Instant> = None;
    let ended = |r: &mut Running, how: String| {
        log.say(Some(&r.host.name), &format!("run {how}"));
        events(FleetEvent::Ended(&r.host.name, &how));
        r.ended = Some(how);
    };
    loop {
        for r in running.iter_mut().filter(|r| r.ended.is_none()) {
            if let Ok(Some(status)) = r.child.try_wait() {
                ended(r, how_it_ended(status.code()));
            }
        }
        for (host, line) in lines.try_iter() {
            log.say(Some(&host), &line);
            events(FleetEvent::Line(&host, &line));
        }
        let lost = running.iter().filter(|r| r.was_lost()).count();
        let over = running.iter().filter(|r| r.ended.is_some()).count();
        counter.set(over - lost, lost);
        if over == running.len() {
            break;
        }
        let now = Instant::now();
        let limit = match stop_deadline {
            Some(d) => Some((
                d,
                "did not stop within the grace time after the stop request",
            )),
            None if now >= deadline => Some((
                deadline,
                "did not end within the lead time + duration + grace (it stopped answering)",
            )),
            None => None,
        };
        if let Some((at, why)) = limit
            && now >= at
        {
            for r in running.iter_mut().filter(|r| r.ended.is_none()) {
                r.child.kill();
                r.lost = true;
                ended(r, format!("was lost: it {why}"));
            }
            let lost = running.iter().filter(|r| r.was_lost()).count();
            counter.set(running.len() - lost, lost);
            break;
        }
        if stop.load(Ordering::Relaxed) && stop_deadline.is_none() {
            events(FleetEvent::Stopping);
            log.say(None, "stopping every host (Ctrl-C)");
            stop_deadline = Some(now + options.grace.min(MAX_STOP_WAIT));
            stop_all(options, running);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    counter.finish();
}

/// Asks every host still running to stop, at most the bound of sessions at once, each
/// ssh call bounded.
pub(super) fn stop_all(options: &FleetOptions, running: &[Running]) {
    let left: Vec<&Running> = running.iter().filter(|r| r.ended.is_none()).collect();
    map_bounded(&left, options.max_ssh_sessions, |r| {
        remote::stop(&options.ssh, &r.host, &r.remote_dir, STOP_LIMIT)
    });
}
