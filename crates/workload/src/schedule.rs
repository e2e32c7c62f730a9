//! When transactions start.
//!
//! Mailbox-profile runs are *open loop*: transactions arrive on a Poisson schedule at the
//! rate that yields the target transactional IOPS (plus a margin), whatever the device
//! does. A session takes the next arrival, sleeps until it is due (or starts at once when
//! the schedule is behind) and measures the transaction's latency from the *intended*
//! start: when the device stalls, the backlog shows up as latency instead of being
//! hidden by sessions that simply issue less (coordinated omission).
//!
//! Throughput runs are *closed loop*: every session starts its next transaction as soon
//! as the previous one ends.
//!
//! Arrivals are generated one at a time from a clock, never queued, so a schedule that
//! falls far behind costs no memory.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The arrival clock of one instance's transactions.
pub struct ArrivalSchedule {
    state: Mutex<ScheduleState>,
}

struct ScheduleState {
    rng: SmallRng,
    /// Transactions per second.
    rate: f64,
    /// Intended start of the next transaction.
    next: Instant,
}

/// Longest a rate may leave the next arrival in the future (so a rate change takes
/// effect promptly even from a very low rate).
const MAX_GAP: Duration = Duration::from_secs(1);

impl ArrivalSchedule {
    /// A schedule of `rate` transactions per second starting at `start`.
    pub fn new(rate: f64, start: Instant, seed: u64) -> ArrivalSchedule {
        ArrivalSchedule {
            state: Mutex::new(ScheduleState {
                rng: SmallRng::seed_from_u64(seed),
                rate: sanitize(rate),
                next: start,
            }),
        }
    }

    /// Changes the rate from the next arrival on.
    pub fn set_rate(&self, rate: f64) {
        self.state.lock().rate = sanitize(rate);
    }

    /// Takes the next arrival: its intended start time. Exponential gaps with mean
    /// 1/rate make the arrivals a Poisson process.
    pub fn take(&self) -> Instant {
        let mut s = self.state.lock();
        let due = s.next;
        // 1 - u is in (0, 1], so ln is finite.
        let u: f64 = s.rng.random();
        let gap = Duration::from_secs_f64((-(1.0 - u).ln() / s.rate).min(MAX_GAP.as_secs_f64()));
        s.next = due + gap;
        due
    }

    /// Moves the schedule so that the next arrival is not before `at` (used when a
    /// phase starts, so warm-up backlog is not charged to the measurement).
    pub fn restart_at(&self, at: Instant) {
        let mut s = self.state.lock();
        if s.next < at {
            s.next = at;
        }
    }
}

fn sanitize(rate: f64) -> f64 {
    if rate.is_finite() && rate > 0.0 {
        rate.max(0.01)
    } else {
        0.01
    }
}

/// Steers an open-loop transaction rate so transactional IOPS reach the goal (target ×
/// margin). How many database I/Os one transaction causes depends on the cache and the
/// database, so it is measured as the run goes: each interval the controller divides
/// the goal by the observed I/Os per transaction, smoothing the estimate and bounding
/// each step, so a device that cannot keep up is offered more load (and shows latency)
/// rather than less.
#[derive(Clone, Debug)]
pub struct RateController {
    goal_iops: f64,
    ios_per_txn: f64,
    max_rate: f64,
}

impl RateController {
    /// A controller for `goal_iops` starting from a guess of I/Os per transaction.
    pub fn new(goal_iops: f64, initial_ios_per_txn: f64) -> RateController {
        let ios_per_txn = initial_ios_per_txn.max(0.05);
        RateController {
            goal_iops,
            ios_per_txn,
            max_rate: goal_iops / 0.05,
        }
    }

    /// The transaction rate for the current estimate.
    pub fn rate(&self) -> f64 {
        (self.goal_iops / self.ios_per_txn).min(self.max_rate)
    }

    /// Updates the estimate from an interval's transactional I/Os and completed
    /// transactions; returns the new rate.
    pub fn observe(&mut self, transactional_ios: u64, transactions: u64) -> f64 {
        if transactions >= 20 {
            let observed = (transactional_ios as f64 / transactions as f64).max(0.05);
            // Halfway towards the observation, at most a factor 2 per step.
            let next = (self.ios_per_txn * observed).sqrt();
            self.ios_per_txn = next.clamp(self.ios_per_txn / 2.0, self.ios_per_txn * 2.0);
        }
        self.rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_average_the_rate() {
        let start = Instant::now();
        let s = ArrivalSchedule::new(1000.0, start, 42);
        let mut last = start;
        for _ in 0..20_000 {
            let t = s.take();
            assert!(t >= last);
            last = t;
        }
        let secs = (last - start).as_secs_f64();
        // 20 000 exponential gaps of mean 1 ms: 20 s ± a few percent.
        assert!((secs - 20.0).abs() < 1.0, "{secs}");
    }

    #[test]
    fn rate_changes_apply_to_later_arrivals() {
        let start = Instant::now();
        let s = ArrivalSchedule::new(10.0, start, 1);
        s.set_rate(10_000.0);
        let first = s.take();
        let mut last = first;
        for _ in 0..1000 {
            last = s.take();
        }
        assert!((last - first).as_secs_f64() < 0.2);
        s.restart_at(start + Duration::from_secs(100));
        assert!(s.take() >= start + Duration::from_secs(100));
    }

    #[test]
    fn controller_converges_on_the_io_cost() {
        let mut c = RateController::new(1000.0, 1.0);
        assert_eq!(c.rate(), 1000.0);
        // Each transaction really costs 2.5 I/Os.
        for _ in 0..30 {
            let txns = (c.rate() * 10.0) as u64;
            c.observe((txns as f64 * 2.5) as u64, txns);
        }
        assert!((c.rate() - 400.0).abs() < 5.0, "{}", c.rate());
        // Too few transactions to judge: no change.
        let before = c.rate();
        assert_eq!(c.observe(1000, 3), before);
    }
}
