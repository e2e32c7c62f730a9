//! What a fleet says while it works: per phase, counts of hosts (`preflight 48/64 ok,
//! 2 failed`, `measuring: 62 running, 2 lost`), and per host, every detail — its
//! check, its test log lines, how its run ended, its copy — in the fleet log
//! (`fleet.log` in the fleet directory), so a hundred hosts make a few lines on the
//! terminal and one file to read when something went wrong.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use super::FleetEvent;

/// The fleet log's file name in the fleet directory.
pub const FLEET_LOG: &str = "fleet.log";

/// A phase of a fleet run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Checking every host before anything starts.
    Preflight,
    /// Making each host's fleet directory and starting its run.
    Start,
    /// The runs going on.
    Measure,
    /// Copying the run directories back.
    Collect,
}

/// The hosts' counts in a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The phase.
    pub phase: Phase,
    /// The hosts in it.
    pub total: usize,
    /// Those done well (checked, started, ended, copied back).
    pub done: usize,
    /// Those that failed (a failed check or start, a lost host, a failed copy).
    pub failed: usize,
    /// Whether the phase is over.
    pub finished: bool,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (done, total, failed) = (self.done, self.total, self.failed);
        let failed_as = |f: &mut fmt::Formatter<'_>, word: &str| {
            if failed > 0 {
                write!(f, ", {failed} {word}")
            } else {
                Ok(())
            }
        };
        match self.phase {
            Phase::Preflight => {
                write!(f, "preflight {done}/{total} ok")?;
                failed_as(f, "failed")
            }
            Phase::Start => {
                let word = if self.finished { "started" } else { "starting" };
                write!(f, "{word} {done}/{total}")?;
                failed_as(f, "failed")
            }
            Phase::Measure => {
                let running = total.saturating_sub(done + failed);
                write!(f, "measuring: {running} running")?;
                if done > 0 {
                    write!(f, ", {done} ended")?;
                }
                failed_as(f, "lost")
            }
            Phase::Collect => {
                let word = if self.finished {
                    "collected"
                } else {
                    "collecting"
                };
                write!(f, "{word} {done}/{total}")?;
                failed_as(f, "failed")
            }
        }
    }
}

/// The per-host detail of a fleet, one timestamped line each.
pub struct FleetLog {
    file: Mutex<File>,
}

impl FleetLog {
    /// A new log in `dir` (which the fleet just made, empty).
    pub(super) fn create(dir: &Path) -> std::io::Result<FleetLog> {
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(dir.join(FLEET_LOG))?;
        Ok(FleetLog {
            file: Mutex::new(file),
        })
    }

    /// Writes `text` about `host` (or the fleet: `None`).
    pub(super) fn say(&self, host: Option<&str>, text: &str) {
        let at = chrono::Local::now().format("%H:%M:%S%.3f");
        let line = match host {
            Some(h) => format!("{at} [{h}] {text}\n"),
            None => format!("{at} {text}\n"),
        };
        // The log is a convenience: a full disk must not stop the fleet.
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let _ = file.write_all(line.as_bytes());
    }
}

/// One phase's counts, told to the events (on every change, in order) and the log.
pub(super) struct PhaseCounter<'a> {
    state: Mutex<Progress>,
    events: &'a (dyn Fn(FleetEvent<'_>) + Sync),
    log: &'a FleetLog,
}

impl<'a> PhaseCounter<'a> {
    /// Starts counting `total` hosts in `phase`.
    pub(super) fn new(
        phase: Phase,
        total: usize,
        events: &'a (dyn Fn(FleetEvent<'_>) + Sync),
        log: &'a FleetLog,
    ) -> PhaseCounter<'a> {
        let p = Progress {
            phase,
            total,
            done: 0,
            failed: 0,
            finished: false,
        };
        events(FleetEvent::Progress(&p));
        PhaseCounter {
            state: Mutex::new(p),
            events,
            log,
        }
    }

    /// One more host done (`ok`) or failed.
    pub(super) fn count(&self, ok: bool) {
        self.update(|p| if ok { p.done += 1 } else { p.failed += 1 });
    }

    /// Sets the counts (said only when they changed).
    pub(super) fn set(&self, done: usize, failed: usize) {
        self.update(|p| {
            p.done = done;
            p.failed = failed;
        });
    }

    fn update(&self, change: impl FnOnce(&mut Progress)) {
        let mut p = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let before = *p;
        change(&mut p);
        if *p != before {
            (self.events)(FleetEvent::Progress(&p));
        }
    }

    /// The phase is over: said once more, and logged.
    pub(super) fn finish(self) -> Progress {
        let mut p = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        p.finished = true;
        (self.events)(FleetEvent::Progress(&p));
        self.log.say(None, &p.to_string());
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_a_person_says_them() {
        let p = |phase, done, failed, finished| Progress {
            phase,
            total: 64,
            done,
            failed,
            finished,
        };
        assert_eq!(
            p(Phase::Preflight, 48, 2, false).to_string(),
            "preflight 48/64 ok, 2 failed"
        );
        assert_eq!(p(Phase::Start, 30, 0, false).to_string(), "starting 30/64");
        assert_eq!(
            p(Phase::Measure, 0, 2, false).to_string(),
            "measuring: 62 running, 2 lost"
        );
        assert_eq!(
            p(Phase::Measure, 60, 4, true).to_string(),
            "measuring: 0 running, 60 ended, 4 lost"
        );
        assert_eq!(
            p(Phase::Collect, 30, 0, false).to_string(),
            "collecting 30/64"
        );
    }
}
