//! The live counters the sampler publishes at each sampling interval of the measured
//! phase ([`CounterSnapshot`]): cumulative figures since the phase began, the last
//! interval's rates, and the criteria judged on what was measured so far.

use super::*;
use crate::criteria::{Measurements, evaluate};
use crate::live::{ClassCounters, CounterSnapshot, InstanceCounters};

/// Criteria that only the end of a run can judge (BDM's findings and the shutdown are
/// known when the run closes); they are left out of the verdict so far.
const JUDGED_AT_THE_END: [&str; 2] = ["bdm_checksum_errors", "shutdown_errors"];

/// What one sample adds to the live counters.
pub(super) struct SampleView<'s> {
    /// From the start of the measured phase to now.
    pub whole: &'s Interval,
    /// The last sampling interval.
    pub last: &'s Interval,
    /// The sampling interval's number.
    pub interval: u32,
    /// Highest per-interval average latency so far, ms, per (instance, class).
    pub max_interval: &'s BTreeMap<(Option<u16>, IoClass), f64>,
    /// The longest sampling interval so far and the longest allowed, seconds.
    pub sampling: (f64, f64),
}

/// The counters of the measured phase so far.
pub(super) fn counter_snapshot(bench: &Workbench<'_>, v: &SampleView<'_>) -> CounterSnapshot {
    let page = bench.config.page_size.bytes() as u64;
    let seconds = v.whole.seconds;
    let mut instances = Vec::new();
    let mut results = Vec::new();
    let mut transaction_errors = 0;
    for (i, slot) in bench.slots.iter().enumerate() {
        let n = u16::try_from(slot.number).unwrap_or(u16::MAX);
        let mut io = BTreeMap::new();
        for class in IoClass::ALL.into_iter().filter(|c| c.is_reported()) {
            let Some(total) = v.whole.io.get(n, class) else {
                continue;
            };
            if total.ops == 0 && total.errors == 0 {
                continue;
            }
            let counters = ClassCounters::new(total, v.last.io.get(n, class), v.last.seconds);
            io.insert(class, counters);
        }
        let txn = &v.whole.txn[i];
        transaction_errors += txn.errors;
        let cache = &v.whole.cache[i];
        let now = &v.whole.cache_now[i];
        let stalls = rate(v.last.cache[i].stalls, v.last.seconds);
        instances.push(InstanceCounters {
            name: instance_name(slot.number),
            io,
            transactions: txn.count(),
            transaction_errors: txn.errors,
            interval_transactions_per_sec: rate(v.last.txn[i].count(), v.last.seconds),
            cache_bytes: now.frames as u64 * page,
            cache_max_bytes: now.max_frames as u64 * page,
            cache_hit_ratio: hit_pct(cache) / 100.0,
            interval_page_fault_stalls_per_sec: stalls,
            log_generation: v.whole.generation[i],
            checkpoint_depth_bytes: v.whole.checkpoint_depth[i],
        });
        let max = |c: IoClass| v.max_interval.get(&(Some(n), c)).copied().unwrap_or(0.0);
        results.push(InstanceResult {
            name: instance_name(slot.number),
            instance: slot.number,
            io: edbstress_report::summary::io_summary(&v.whole.io, Some(n), seconds, &max),
            engine: Some(EngineSummary {
                page_fault_stalls_per_sec: rate(cache.stalls, seconds),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let max_total = |c: IoClass| v.max_interval.get(&(None, c)).copied().unwrap_or(0.0);
    let totals = edbstress_report::summary::io_summary(&v.whole.io, None, seconds, &max_total);
    let measurements = Measurements {
        // Volumes' latencies (exchange2007) come from the block devices' counters over
        // the whole run; the verdict so far judges per instance.
        volumes: None,
        instances: &results,
        totals: &totals,
        achieved_iops: edbstress_report::summary::transactional_iops(&totals),
        target_iops: bench.config.target_iops(),
        verification: None,
        transaction_errors,
        bdm_bad_pages: 0,
        shutdown_errors: 0,
        sampling: Some(v.sampling),
        measured: true,
        abort_reason: None,
        instance_count: results.len() as u32,
    };
    let criteria = evaluate(&measurements, &bench.config.thresholds)
        .into_iter()
        .filter(|c| !JUDGED_AT_THE_END.contains(&c.key.as_str()))
        .collect();
    CounterSnapshot {
        interval: v.interval,
        measured_seconds: seconds,
        instances,
        criteria,
    }
}
