//! The whole fleet's latency over time: at each sampling interval, the hosts' interval
//! histograms of an I/O class merged, so the fleet's p50, p99 and maximum are exact
//! over every I/O of every host in that interval, with the spread of the hosts' own
//! p99 beside them and the interval and host of the worst latency named.

use std::collections::BTreeMap;

use edbstress_io::{IoClass, LatencyHistogram};
use serde::{Deserialize, Serialize};

use super::{AggregateError, HostRun};

/// One sampling interval of one I/O class over the whole fleet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterInterval {
    /// End of the interval, seconds since the common window started (the hosts'
    /// intervals ending within half an interval of it are merged).
    pub t: f64,
    /// Hosts with I/O of the class in the interval.
    pub hosts: u32,
    /// I/Os of the class in the interval, all hosts.
    pub count: u64,
    /// Median of the merged histogram, ms.
    pub p50_ms: f64,
    /// 99th percentile of the merged histogram, ms.
    pub p99_ms: f64,
    /// Highest latency of any host in the interval, ms (exact).
    pub max_ms: f64,
    /// The host that saw `max_ms`.
    pub max_host: String,
    /// Lowest of the hosts' own p99 in the interval, ms.
    pub host_p99_low_ms: f64,
    /// Highest of the hosts' own p99 in the interval, ms.
    pub host_p99_high_ms: f64,
}

/// Where the fleet's worst latency happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorstLatency {
    /// The I/O class.
    pub class: IoClass,
    /// The host.
    pub host: String,
    /// The host's interval number (from 1).
    pub interval: u32,
    /// End of the interval, seconds since the common window started.
    pub t: f64,
    /// End of the interval on the host's clock (RFC 3339).
    pub timestamp: String,
    /// The latency, ms.
    pub max_ms: f64,
}

/// The fleet's latency per interval: per I/O class, one entry per interval in time
/// order; empty when the runs kept no interval histograms (older runs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterSeries {
    /// Per I/O class.
    pub classes: BTreeMap<IoClass, Vec<ClusterInterval>>,
    /// The worst latency of any class, host and interval.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub worst: Option<WorstLatency>,
}

/// One host's interval of one class, decoded.
struct HostInterval<'a> {
    host: &'a str,
    histogram: LatencyHistogram,
    max_ms: f64,
}

/// Merges the complete hosts' interval histograms; `shifts[i]` is the seconds from the
/// common window's start to host `i`'s measurement start. An interval histogram that
/// cannot be read is refused, naming the host, interval and class.
pub fn cluster_series(runs: &[&HostRun], shifts: &[f64]) -> Result<ClusterSeries, AggregateError> {
    // (class, slot) → the hosts' intervals; a slot is the interval's end in units of
    // the sampling interval, on the common clock.
    let mut slots: BTreeMap<(IoClass, i64), Vec<HostInterval<'_>>> = BTreeMap::new();
    let mut worst: Option<WorstLatency> = None;
    for (r, shift) in runs.iter().zip(shifts) {
        let step = r.results.parameters.sample_interval_seconds;
        if step <= 0.0 {
            continue;
        }
        for s in r.results.samples.iter().filter(|s| s.scope == "Total") {
            let Some(encoded) = &s.latency_histogram else {
                continue;
            };
            let Some(class) = IoClass::ALL.into_iter().find(|c| c.name() == s.family) else {
                continue;
            };
            let histogram = LatencyHistogram::from_v2_base64(encoded).map_err(|e| {
                AggregateError(format!(
                    "the run of {} ({}) has an unreadable latency histogram in interval {} \
                     ({}): {e}; is its results.json intact?",
                    r.host,
                    r.source,
                    s.interval,
                    class.name()
                ))
            })?;
            if histogram.is_empty() {
                continue;
            }
            let t = s.elapsed_s + shift;
            let max_ms = s.max_ms.unwrap_or(histogram.max_ns() as f64 / 1e6);
            // Ties go to the lowest host name, then the earliest interval, so the
            // answer does not depend on the order the runs were given in.
            if worst.as_ref().is_none_or(|w| {
                max_ms > w.max_ms
                    || (max_ms == w.max_ms && (r.host.as_str(), t) < (w.host.as_str(), w.t))
            }) {
                worst = Some(WorstLatency {
                    class,
                    host: r.host.clone(),
                    interval: s.interval,
                    t,
                    timestamp: s.timestamp.clone(),
                    max_ms,
                });
            }
            let slot = (t / step).round() as i64;
            slots.entry((class, slot)).or_default().push(HostInterval {
                host: &r.host,
                histogram,
                max_ms,
            });
        }
    }
    let step = runs
        .first()
        .map_or(1.0, |r| r.results.parameters.sample_interval_seconds);
    let mut classes: BTreeMap<IoClass, Vec<ClusterInterval>> = BTreeMap::new();
    for ((class, slot), hosts) in slots {
        classes
            .entry(class)
            .or_default()
            .push(merge_interval(slot as f64 * step, &hosts));
    }
    Ok(ClusterSeries { classes, worst })
}

fn merge_interval(t: f64, hosts: &[HostInterval<'_>]) -> ClusterInterval {
    let mut merged = LatencyHistogram::new();
    for h in hosts {
        merged.merge(&h.histogram);
    }
    let p99s: Vec<f64> = hosts
        .iter()
        .map(|h| h.histogram.percentile_ns(99.0) as f64 / 1e6)
        .collect();
    // Equal maxima go to the lowest host name (the order of the runs must not matter).
    let top = hosts
        .iter()
        .max_by(|a, b| a.max_ms.total_cmp(&b.max_ms).then(b.host.cmp(a.host)))
        .map_or(("", 0.0), |h| (h.host, h.max_ms));
    ClusterInterval {
        t,
        hosts: hosts.len() as u32,
        count: merged.count(),
        p50_ms: merged.percentile_ns(50.0) as f64 / 1e6,
        p99_ms: merged.percentile_ns(99.0) as f64 / 1e6,
        max_ms: top.1,
        max_host: top.0.to_string(),
        host_p99_low_ms: p99s.iter().copied().fold(f64::INFINITY, f64::min),
        host_p99_high_ms: p99s.iter().copied().fold(0.0, f64::max),
    }
}
