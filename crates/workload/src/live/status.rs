//! What the run shows live, once a second: the phase of dispatch it is in and the
//! figures of the last tick. The run fills it in; the live endpoint and the progress
//! line read it.

use std::time::Duration;

use edbstress_io::IoClass;

/// What a phase of dispatch is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseKind {
    /// Warm the caches until each holds ≥ 90 % of its maximum (Jetstress's "attaining
    /// prerequisites"), or until the warm-up timeout.
    AttainPrerequisites,
    /// Run without measuring (latency settles after a change of session count).
    Settle,
    /// Keep the load running until the run's start time (`RunConfig::start_at`), so
    /// that several hosts start measuring at the same moment.
    WaitForStart,
    /// The measured period.
    Measure,
}

impl PhaseKind {
    /// Name shown in progress.
    pub fn name(self) -> &'static str {
        match self {
            PhaseKind::AttainPrerequisites => "attaining prerequisites",
            PhaseKind::Settle => "settling",
            PhaseKind::WaitForStart => "waiting for the start time",
            PhaseKind::Measure => "measuring",
        }
    }
}

/// Live figures, once a second.
#[derive(Clone, Debug)]
pub struct LiveStatus {
    /// Current phase.
    pub phase: PhaseKind,
    /// Sessions running.
    pub sessions: u32,
    /// Time in the phase.
    pub elapsed: Duration,
    /// Time left in the phase, when it has a fixed length.
    pub remaining: Option<Duration>,
    /// Transactions per second over the last tick.
    pub txn_per_sec: f64,
    /// Per class over the last tick: (class, I/Os per second, average latency ms).
    pub classes: Vec<(IoClass, f64, f64)>,
    /// Smallest cache fill over the instances, percent of maximum.
    pub cache_fill_pct: f64,
    /// Open-loop transaction rate being offered, per second.
    pub offered_rate: Option<f64>,
    /// Warm-up only: how fast the smallest cache fills (percentage points per second)
    /// and the time it should take to reach 90 % at that rate (None: not growing).
    pub warmup: Option<(f64, Option<Duration>)>,
}
