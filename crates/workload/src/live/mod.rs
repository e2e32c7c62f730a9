//! Live counters of a transactional run, for watching it while it goes (what Jetstress
//! users get from Performance Monitor): a read-only [`CounterSnapshot`] the sampler
//! publishes at every sampling interval of the measured phase, the latest progress
//! ([`LiveStatus`], once a second in every phase), and [`LiveCounters`], the shared
//! store of both that encodes them in the OpenMetrics text format for a scraper.
//!
//! Counters are cumulative over the measured phase, so at the end they equal the
//! run's results.json (up to the last sampling interval); rates and averages are over
//! the last sampling interval.

use edbstress_format::Generation;
use std::collections::BTreeMap;
use std::sync::Arc;

use edbstress_io::{ClassStats, IoClass};
use edbstress_report::Criterion;
use parking_lot::Mutex;

mod openmetrics;
mod status;

pub use status::{LiveStatus, PhaseKind};

/// The latency histogram buckets' upper bounds: 1 µs × 2^k for k = 0..=24 (1 µs to
/// about 16.8 s), then +Inf. Fixed, so every scrape has the same series.
pub const LATENCY_BUCKETS: u32 = 25;

/// One I/O class of one instance, over the measured phase so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassCounters {
    /// I/Os completed.
    pub ops: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// I/Os that failed.
    pub errors: u64,
    /// Sum of the latencies, seconds.
    pub latency_sum_s: f64,
    /// I/Os at or under each of [`LATENCY_BUCKETS`] bounds, not cumulative (the
    /// count of each bucket alone), then those above the last bound.
    pub latency_buckets: Vec<u64>,
    /// I/Os per second over the last sampling interval.
    pub interval_per_sec: f64,
    /// Average latency over the last sampling interval, ms.
    pub interval_avg_latency_ms: f64,
}

impl ClassCounters {
    /// The counters of `total` (measured phase so far) and `interval` (the last
    /// sampling interval, lasting `seconds`).
    pub fn new(total: &ClassStats, interval: Option<&ClassStats>, seconds: f64) -> ClassCounters {
        let mut buckets = vec![0u64; LATENCY_BUCKETS as usize + 1];
        for (upper_ns, count) in total.latency.buckets() {
            buckets[bucket_index(upper_ns)] += count;
        }
        ClassCounters {
            ops: total.ops,
            bytes: total.bytes,
            errors: total.errors,
            latency_sum_s: total.latency.sum_ns() as f64 / 1e9,
            latency_buckets: buckets,
            interval_per_sec: interval.map_or(0.0, |s| s.ops as f64 / seconds.max(1e-9)),
            interval_avg_latency_ms: interval.map_or(0.0, |s| s.latency.mean_ns() / 1e6),
        }
    }
}

/// The upper bound of bucket `k`, seconds.
pub fn bucket_bound_s(k: u32) -> f64 {
    (1000u64 << k) as f64 / 1e9
}

/// Which fixed bucket a histogram bucket with inclusive upper bound `upper_ns` (1 µs ×
/// 2^k − 1 ns) falls in; the last index for those beyond the last bound.
fn bucket_index(upper_ns: u64) -> usize {
    (0..LATENCY_BUCKETS)
        .find(|&k| upper_ns < 1000u64 << k)
        .unwrap_or(LATENCY_BUCKETS) as usize
}

/// One instance over the measured phase so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceCounters {
    /// "Instance0001".
    pub name: String,
    /// Per I/O class that has done I/O.
    pub io: BTreeMap<IoClass, ClassCounters>,
    /// Transactions committed.
    pub transactions: u64,
    /// Transactions that failed.
    pub transaction_errors: u64,
    /// Transactions per second over the last sampling interval.
    pub interval_transactions_per_sec: f64,
    /// Database cache in use, bytes.
    pub cache_bytes: u64,
    /// Database cache maximum, bytes.
    pub cache_max_bytes: u64,
    /// Cache hit ratio over the measured phase, 0 to 1.
    pub cache_hit_ratio: f64,
    /// Database page fault stalls per second over the last sampling interval.
    pub interval_page_fault_stalls_per_sec: f64,
    /// Current log generation.
    pub log_generation: Generation,
    /// Checkpoint depth, bytes.
    pub checkpoint_depth_bytes: u64,
}

/// The counters of the measured phase so far, published at each sampling interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CounterSnapshot {
    /// Sampling intervals so far.
    pub interval: u32,
    /// Seconds measured so far.
    pub measured_seconds: f64,
    /// Per instance.
    pub instances: Vec<InstanceCounters>,
    /// The pass/fail criteria on what was measured so far (those the run can judge
    /// before it ends: latency, stalls, rate, errors).
    pub criteria: Vec<Criterion>,
}

/// The latest live figures of a run, shared between the run (which updates them) and
/// whoever serves them.
#[derive(Debug, Default)]
pub struct LiveCounters {
    latest: Mutex<Latest>,
}

#[derive(Debug, Default)]
struct Latest {
    status: Option<LiveStatus>,
    counters: Option<Arc<CounterSnapshot>>,
}

impl LiveCounters {
    /// An empty store (nothing measured yet).
    pub fn new() -> Arc<LiveCounters> {
        Arc::new(LiveCounters::default())
    }

    /// Records the latest progress (phase, sessions, cache fill).
    pub fn update_status(&self, status: &LiveStatus) {
        self.latest.lock().status = Some(status.clone());
    }

    /// Records the counters of the latest sampling interval.
    pub fn update_counters(&self, counters: &CounterSnapshot) {
        self.latest.lock().counters = Some(Arc::new(counters.clone()));
    }

    /// The latest counters, if the measured phase has sampled yet.
    pub fn counters(&self) -> Option<Arc<CounterSnapshot>> {
        self.latest.lock().counters.clone()
    }

    /// Everything in the OpenMetrics text format (ending with `# EOF`).
    pub fn encode_openmetrics(&self) -> String {
        let (status, counters) = {
            let l = self.latest.lock();
            (l.status.clone(), l.counters.clone())
        };
        openmetrics::encode(status.as_ref(), counters.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use edbstress_io::LatencyHistogram;

    use super::*;

    #[test]
    fn histogram_buckets_land_under_their_bound() {
        let mut latency = LatencyHistogram::new();
        // 0.5 µs, 1.5 µs, 3 ms, 100 s (beyond the last bound).
        for ns in [500, 1_500, 3_000_000, 100_000_000_000] {
            latency.record(ns);
        }
        let stats = ClassStats {
            ops: 4,
            bytes: 4096,
            errors: 0,
            latency,
        };
        let c = ClassCounters::new(&stats, Some(&stats), 2.0);
        assert_eq!(c.latency_buckets.iter().sum::<u64>(), 4);
        assert_eq!(c.latency_buckets[0], 1, "0.5 µs is under 1 µs");
        assert_eq!(c.latency_buckets[1], 1, "1.5 µs is under 2 µs");
        // 3 ms is under 1 µs × 2^12 = 4.096 ms and above 2.048 ms.
        assert_eq!(c.latency_buckets[12], 1);
        assert_eq!(c.latency_buckets[LATENCY_BUCKETS as usize], 1);
        assert_eq!(c.interval_per_sec, 2.0);
        assert!((bucket_bound_s(12) - 0.004096).abs() < 1e-12);
    }
}
