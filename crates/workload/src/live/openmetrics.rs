//! The live counters in the OpenMetrics text format, through `prometheus-client`: a
//! collector encodes the latest snapshot on each scrape (the figures are the sampler's,
//! not counted again here).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{
    CounterSnapshot, InstanceCounters, LATENCY_BUCKETS, LiveStatus, PhaseKind, bucket_bound_s,
};

/// Label set of a series: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;

/// Encodes `status` and `counters` (either may be missing early in a run).
pub(super) fn encode(status: Option<&LiveStatus>, counters: Option<&CounterSnapshot>) -> String {
    let mut registry = Registry::with_prefix("edbstress");
    registry.register_collector(Box::new(Snapshot {
        status: status.cloned(),
        counters: counters.cloned(),
    }));
    let mut out = String::new();
    // Writing to a String cannot fail; the encoder's own errors are formatting ones.
    if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
        out = "# EOF\n".to_string();
    }
    out
}

#[derive(Debug)]
struct Snapshot {
    status: Option<LiveStatus>,
    counters: Option<CounterSnapshot>,
}

/// A metric family: its series as (labels, value).
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric_type: MetricType,
    series: impl IntoIterator<Item = (Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (labels, value) in series {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn gauges(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, f64)>,
) -> Result<(), std::fmt::Error> {
    let series = series.into_iter().map(|(l, v)| (l, ConstGauge::new(v)));
    family(encoder, name, help, MetricType::Gauge, series)
}

fn counters(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, u64)>,
) -> Result<(), std::fmt::Error> {
    let series = series.into_iter().map(|(l, v)| (l, ConstCounter::new(v)));
    family(encoder, name, help, MetricType::Counter, series)
}

/// A histogram from fixed buckets (counts per bucket, not cumulative).
#[derive(Debug)]
struct BucketHistogram {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl EncodeMetric for BucketHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn instance_label(i: &InstanceCounters) -> Labels {
    vec![("instance", i.name.clone())]
}

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        if let Some(s) = &self.status {
            encode_status(e, s)?;
        }
        let Some(c) = &self.counters else {
            return Ok(());
        };
        encode_io(e, c)?;
        encode_instances(e, c)?;
        encode_criteria(e, c)
    }
}

/// The run's phase, sessions and rates (every phase).
fn encode_status(e: &mut DescriptorEncoder<'_>, s: &LiveStatus) -> Result<(), std::fmt::Error> {
    let phases = [
        PhaseKind::AttainPrerequisites,
        PhaseKind::Settle,
        PhaseKind::WaitForStart,
        PhaseKind::Measure,
    ];
    gauges(
        e,
        "phase",
        "1 for the phase the run is in, 0 for the others",
        phases.iter().map(|p| {
            let on = if *p == s.phase { 1.0 } else { 0.0 };
            (vec![("phase", p.name().to_string())], on)
        }),
    )?;
    gauges(
        e,
        "sessions",
        "Sessions running transactions",
        [(Labels::new(), f64::from(s.sessions))],
    )?;
    gauges(
        e,
        "phase_elapsed_seconds",
        "Time in the current phase",
        [(Labels::new(), s.elapsed.as_secs_f64())],
    )?;
    gauges(
        e,
        "cache_fill_ratio",
        "Smallest database cache fill over the instances, share of its maximum",
        [(Labels::new(), s.cache_fill_pct / 100.0)],
    )?;
    gauges(
        e,
        "transactions_live_rate_per_second",
        "Transactions per second over the last second (every phase)",
        [(Labels::new(), s.txn_per_sec)],
    )?;
    Ok(())
}

/// The measured phase's length and its I/O per instance and class.
fn encode_io(e: &mut DescriptorEncoder<'_>, c: &CounterSnapshot) -> Result<(), std::fmt::Error> {
    gauges(
        e,
        "measured_seconds",
        "Seconds of the measured phase so far (at the last sample)",
        [(Labels::new(), c.measured_seconds)],
    )?;
    counters(
        e,
        "samples",
        "Sampling intervals of the measured phase so far",
        [(Labels::new(), u64::from(c.interval))],
    )?;
    let io = |f: fn(&super::ClassCounters) -> u64| {
        c.instances
            .iter()
            .flat_map(move |i| {
                i.io.iter().map(move |(class, s)| {
                    let mut l = instance_label(i);
                    l.push(("class", class.name().to_string()));
                    (l, f(s))
                })
            })
            .collect::<Vec<_>>()
    };
    let io_gauge = |f: fn(&super::ClassCounters) -> f64| {
        c.instances
            .iter()
            .flat_map(move |i| {
                i.io.iter().map(move |(class, s)| {
                    let mut l = instance_label(i);
                    l.push(("class", class.name().to_string()));
                    (l, f(s))
                })
            })
            .collect::<Vec<_>>()
    };
    counters(
        e,
        "io_operations",
        "I/Os completed in the measured phase, per instance and I/O class",
        io(|s| s.ops),
    )?;
    counters(
        e,
        "io_bytes",
        "Bytes transferred in the measured phase, per instance and I/O class",
        io(|s| s.bytes),
    )?;
    counters(
        e,
        "io_errors",
        "I/Os that failed in the measured phase, per instance and I/O class",
        io(|s| s.errors),
    )?;
    gauges(
        e,
        "io_rate_per_second",
        "I/Os per second over the last sampling interval",
        io_gauge(|s| s.interval_per_sec),
    )?;
    gauges(
        e,
        "io_latency_average_seconds",
        "Average I/O latency over the last sampling interval",
        io_gauge(|s| s.interval_avg_latency_ms / 1000.0),
    )?;
    let histograms = c.instances.iter().flat_map(|i| {
        i.io.iter().map(move |(class, s)| {
            let mut l = instance_label(i);
            l.push(("class", class.name().to_string()));
            let buckets = s
                .latency_buckets
                .iter()
                .enumerate()
                .map(|(k, n)| {
                    let bound = if (k as u32) < LATENCY_BUCKETS {
                        bucket_bound_s(k as u32)
                    } else {
                        f64::INFINITY
                    };
                    (bound, *n)
                })
                .collect();
            let h = BucketHistogram {
                sum: s.latency_sum_s,
                count: s.latency_buckets.iter().sum(),
                buckets,
            };
            (l, h)
        })
    });
    family(
        e,
        "io_latency_seconds",
        "I/O latency in the measured phase (bucket bounds 1 us * 2^k)",
        MetricType::Histogram,
        histograms.collect::<Vec<_>>(),
    )?;
    Ok(())
}

/// Transactions, cache and log per instance.
fn encode_instances(
    e: &mut DescriptorEncoder<'_>,
    c: &CounterSnapshot,
) -> Result<(), std::fmt::Error> {
    let inst_u64 = |f: fn(&InstanceCounters) -> u64| {
        c.instances
            .iter()
            .map(|i| (instance_label(i), f(i)))
            .collect::<Vec<_>>()
    };
    let inst_f64 = |f: fn(&InstanceCounters) -> f64| {
        c.instances
            .iter()
            .map(|i| (instance_label(i), f(i)))
            .collect::<Vec<_>>()
    };
    counters(
        e,
        "transactions",
        "Transactions committed in the measured phase",
        inst_u64(|i| i.transactions),
    )?;
    counters(
        e,
        "transaction_errors",
        "Transactions that failed in the measured phase",
        inst_u64(|i| i.transaction_errors),
    )?;
    gauges(
        e,
        "transactions_rate_per_second",
        "Transactions per second over the last sampling interval",
        inst_f64(|i| i.interval_transactions_per_sec),
    )?;
    gauges(
        e,
        "cache_bytes",
        "Database cache in use",
        inst_f64(|i| i.cache_bytes as f64),
    )?;
    gauges(
        e,
        "cache_max_bytes",
        "Database cache maximum",
        inst_f64(|i| i.cache_max_bytes as f64),
    )?;
    gauges(
        e,
        "cache_hit_ratio",
        "Database cache hits over lookups in the measured phase",
        inst_f64(|i| i.cache_hit_ratio),
    )?;
    gauges(
        e,
        "page_fault_stalls_per_second",
        "Database page fault stalls per second over the last sampling interval",
        inst_f64(|i| i.interval_page_fault_stalls_per_sec),
    )?;
    gauges(
        e,
        "log_generation",
        "Current log file generation",
        inst_f64(|i| f64::from(i.log_generation.get())),
    )?;
    gauges(
        e,
        "checkpoint_depth_bytes",
        "Log between the checkpoint and the end of the log",
        inst_f64(|i| i.checkpoint_depth_bytes as f64),
    )?;
    Ok(())
}

/// The pass/fail criteria on what was measured so far, and the verdict they make.
fn encode_criteria(
    e: &mut DescriptorEncoder<'_>,
    c: &CounterSnapshot,
) -> Result<(), std::fmt::Error> {
    let criterion_labels = |k: &edbstress_report::Criterion| {
        vec![("criterion", k.key.clone()), ("scope", k.scope.clone())]
    };
    gauges(
        e,
        "criterion_passing",
        "1 when the pass/fail criterion holds on what was measured so far, else 0",
        c.criteria
            .iter()
            .map(|k| (criterion_labels(k), if k.passed { 1.0 } else { 0.0 })),
    )?;
    gauges(
        e,
        "criterion_measured",
        "The value the criterion judges, so far (its unit is the criterion's)",
        c.criteria.iter().map(|k| (criterion_labels(k), k.measured)),
    )?;
    gauges(
        e,
        "criterion_threshold",
        "The criterion's limit",
        c.criteria
            .iter()
            .map(|k| (criterion_labels(k), k.threshold)),
    )?;
    let passing = c.criteria.iter().all(|k| k.passed);
    gauges(
        e,
        "verdict_so_far",
        "1 when every criterion judged so far holds (the run would pass if it ended now and verified clean), else 0",
        [(Labels::new(), if passing { 1.0 } else { 0.0 })],
    )
}
