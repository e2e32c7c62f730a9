//! Stopping background activities and bounding their waits: the stop signal each
//! background thread (BDM, log replication) checks, and deadlines that cannot
//! overflow. Shared by the run's phases and its background activities, so that
//! neither depends on the other for them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The stop condition of a background thread: the run's stop flag, or its own
/// handle's (so that stopping one activity leaves the run's flag alone).
#[derive(Clone)]
pub(crate) struct StopSignal {
    run: Arc<AtomicBool>,
    own: Arc<AtomicBool>,
}

impl StopSignal {
    /// Longest sleep between checks of the flags.
    pub(crate) const STEP: Duration = Duration::from_millis(50);

    /// A signal raised by `run` or by [`StopSignal::stop`].
    pub(crate) fn new(run: Arc<AtomicBool>) -> StopSignal {
        StopSignal {
            run,
            own: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stops this activity only.
    pub(crate) fn stop(&self) {
        self.own.store(true, Ordering::Relaxed);
    }

    /// Whether either flag is set.
    pub(crate) fn is_stopped(&self) -> bool {
        self.run.load(Ordering::Relaxed) || self.own.load(Ordering::Relaxed)
    }

    /// Sleeps for `duration` in steps of at most 50 ms; false if stopped meanwhile.
    pub(crate) fn sleep(&self, duration: Duration) -> bool {
        let until = later(Instant::now(), duration);
        loop {
            if self.is_stopped() {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Self::STEP));
        }
    }
}

/// `start + length`, or the farthest instant the clock can hold when that overflows:
/// lengths come from the user, and validation bounds them, but an overflowing deadline
/// must never panic inside the dispatch threads (the databases would stay in use).
pub(crate) fn later(start: Instant, length: Duration) -> Instant {
    start
        .checked_add(length)
        .or_else(|| start.checked_add(crate::config::MAX_DURATION))
        .unwrap_or(start)
}
