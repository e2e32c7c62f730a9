//! From raw counters (`ClassStats`, histograms) to the figures of the results.

use edbstress_io::{ClassStats, IoClass, IoStats, LatencyHistogram};

use crate::model::{ClassSummary, IoSummary, LatencySummary};

const NS_PER_MS: f64 = 1e6;

/// Figures of one class over `seconds`; `max_interval_latency_ms` is the highest
/// per-interval average the caller tracked.
pub fn class_summary(
    stats: &ClassStats,
    seconds: f64,
    max_interval_latency_ms: f64,
) -> ClassSummary {
    let h = &stats.latency;
    ClassSummary {
        count: stats.ops,
        errors: stats.errors,
        per_sec: rate(stats.ops, seconds),
        avg_bytes: stats.mean_bytes(),
        avg_latency_ms: h.mean_ns() / NS_PER_MS,
        max_interval_latency_ms,
        p50_ms: h.percentile_ns(50.0) as f64 / NS_PER_MS,
        p90_ms: h.percentile_ns(90.0) as f64 / NS_PER_MS,
        p99_ms: h.percentile_ns(99.0) as f64 / NS_PER_MS,
        p999_ms: h.percentile_ns(99.9) as f64 / NS_PER_MS,
        max_ms: h.max_ns() as f64 / NS_PER_MS,
        histogram: h.clone(),
    }
}

/// Average and percentiles of a histogram, ms.
pub fn latency_summary(h: &LatencyHistogram) -> LatencySummary {
    LatencySummary {
        avg_ms: h.mean_ns() / NS_PER_MS,
        p50_ms: h.percentile_ns(50.0) as f64 / NS_PER_MS,
        p90_ms: h.percentile_ns(90.0) as f64 / NS_PER_MS,
        p99_ms: h.percentile_ns(99.0) as f64 / NS_PER_MS,
        p999_ms: h.percentile_ns(99.9) as f64 / NS_PER_MS,
        max_ms: h.max_ns() as f64 / NS_PER_MS,
        histogram: h.clone(),
    }
}

/// `count / seconds`, 0 for an empty period.
pub fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Average latency of `stats` in ms, 0 without I/O.
pub fn avg_latency_ms(stats: &ClassStats) -> f64 {
    stats.latency.mean_ns() / NS_PER_MS
}

/// The classes a results `io` object always lists, whether or not they saw I/O.
pub const ALWAYS_LISTED: [IoClass; 6] = [
    IoClass::DbRead,
    IoClass::DbWrite,
    IoClass::LogWrite,
    IoClass::LogRead,
    IoClass::BdmRead,
    IoClass::ReplicationRead,
];

/// Figures of every class of `instance` in `stats` (every class when `instance` is
/// None): the [`ALWAYS_LISTED`] ones always, the others when they saw I/O, none that
/// [`IoClass::is_reported`] leaves out.
/// `max_interval` gives each class's highest per-interval average latency.
pub fn io_summary(
    stats: &IoStats,
    instance: Option<u16>,
    seconds: f64,
    max_interval: &dyn Fn(IoClass) -> f64,
) -> IoSummary {
    let mut out = IoSummary::new();
    for class in IoClass::ALL {
        let s = match instance {
            Some(i) => stats.get(i, class).cloned().unwrap_or_default(),
            None => stats.total(class),
        };
        if !class.is_reported() || s.ops == 0 && s.errors == 0 && !ALWAYS_LISTED.contains(&class) {
            continue;
        }
        out.insert(class, class_summary(&s, seconds, max_interval(class)));
    }
    out
}

/// Transactional IOPS of a summary: database reads/s + writes/s.
pub fn transactional_iops(io: &IoSummary) -> f64 {
    [IoClass::DbRead, IoClass::DbWrite]
        .iter()
        .filter_map(|c| io.get(c))
        .map(|s| s.per_sec)
        .sum()
}

/// Several classes of `io` as one (Jetstress's Total I/O Performance counts BDM reads
/// as database reads): counts and rates add up, average bytes and latency are weighted
/// by count. Percentiles and histograms are left empty.
pub fn combined(io: &IoSummary, classes: &[IoClass]) -> ClassSummary {
    let mut out = ClassSummary::default();
    let (mut bytes, mut latency) = (0.0, 0.0);
    for s in classes.iter().filter_map(|c| io.get(c)) {
        if classes.len() == 1 {
            return s.clone();
        }
        out.count += s.count;
        out.errors += s.errors;
        out.per_sec += s.per_sec;
        bytes += s.avg_bytes * s.count as f64;
        latency += s.avg_latency_ms * s.count as f64;
        out.max_interval_latency_ms = out.max_interval_latency_ms.max(s.max_interval_latency_ms);
        out.max_ms = out.max_ms.max(s.max_ms);
    }
    if out.count > 0 {
        out.avg_bytes = bytes / out.count as f64;
        out.avg_latency_ms = latency / out.count as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_latencies() {
        let mut stats = ClassStats::new();
        for ms in 1..=100u64 {
            stats.ops += 1;
            stats.bytes += 32768;
            stats.latency.record(ms * 1_000_000);
        }
        let s = class_summary(&stats, 10.0, 77.0);
        assert_eq!(s.count, 100);
        assert_eq!(s.per_sec, 10.0);
        assert_eq!(s.avg_bytes, 32768.0);
        assert!((s.avg_latency_ms - 50.5).abs() < 1e-9);
        assert!((s.p50_ms - 50.0).abs() < 0.1, "{}", s.p50_ms);
        assert!((s.p99_ms - 99.0).abs() < 0.1, "{}", s.p99_ms);
        assert_eq!(s.max_ms, 100.0);
        assert_eq!(s.max_interval_latency_ms, 77.0);
    }

    #[test]
    fn io_summary_lists_the_six_main_classes_and_used_others() {
        let mut stats = IoStats::new();
        stats.record(0, IoClass::DbRead, 32768, 2_000_000, true);
        stats.record(1, IoClass::BackupRead, 262144, 2_000_000, true);
        let all = io_summary(&stats, None, 1.0, &|_| 0.0);
        assert_eq!(all.len(), 7);
        assert!(all.contains_key(&IoClass::BackupRead));
        let one = io_summary(&stats, Some(0), 1.0, &|_| 0.0);
        assert_eq!(one.len(), 6);
        assert_eq!(one[&IoClass::DbRead].count, 1);
        assert_eq!(transactional_iops(&one), 1.0);
    }

    #[test]
    fn bookkeeping_classes_are_listed_when_used_and_old_results_still_read() {
        let mut stats = IoStats::new();
        stats.record(0, IoClass::DbRead, 32768, 2_000_000, true);
        stats.record(0, IoClass::DbGrowth, 1 << 20, 3_000_000, true);
        stats.record(0, IoClass::DbFlush, 0, 1_000_000, true);
        let io = io_summary(&stats, None, 1.0, &|_| 0.0);
        assert_eq!(io.len(), 8, "the six main classes and the two used");
        assert_eq!(io[&IoClass::DbGrowth].avg_bytes, (1 << 20) as f64);
        assert_eq!(io[&IoClass::DbFlush].count, 1);
        assert_eq!(
            transactional_iops(&io),
            1.0,
            "bookkeeping is not transactional I/O"
        );
        assert!(!io.contains_key(&IoClass::LogCreate), "unused: left out");
        let json = serde_json::to_value(&io).unwrap();
        assert!(json.get("db_growth").is_some() && json.get("db_flush").is_some());
        // An `io` object written before the bookkeeping classes existed reads as before.
        let mut old = json.clone();
        let map = old.as_object_mut().unwrap();
        map.remove("db_growth");
        map.remove("db_flush");
        let back: IoSummary = serde_json::from_value(old).unwrap();
        assert_eq!(back.len(), 6);
        assert_eq!(back[&IoClass::DbRead], io[&IoClass::DbRead]);
    }

    #[test]
    fn header_offline_and_backup_copy_classes_stay_out_of_results() {
        let mut stats = IoStats::new();
        stats.record(1, IoClass::DbRead, 32768, 2_000_000, true);
        for class in IoClass::ALL.into_iter().filter(|c| !c.is_reported()) {
            stats.record(1, class, 4096, 1_000_000, true);
        }
        for instance in [Some(1), None] {
            let io = io_summary(&stats, instance, 1.0, &|_| 0.0);
            assert_eq!(io.len(), 6, "the six main classes only: {io:?}");
            let json = serde_json::to_value(&io).unwrap();
            for name in [
                "header_read",
                "offline_read",
                "offline_write",
                "backup_write",
            ] {
                assert!(json.get(name).is_none(), "{name} listed");
            }
        }
    }

    #[test]
    fn combined_classes_weight_averages_by_count() {
        let mut stats = IoStats::new();
        for _ in 0..3 {
            stats.record(0, IoClass::DbRead, 32768, 2_000_000, true);
        }
        stats.record(0, IoClass::BdmRead, 262144, 10_000_000, true);
        let io = io_summary(&stats, None, 2.0, &|_| 0.0);
        let both = combined(&io, &[IoClass::DbRead, IoClass::BdmRead]);
        assert_eq!(both.count, 4);
        assert_eq!(both.per_sec, 2.0);
        assert_eq!(both.avg_bytes, (3.0 * 32768.0 + 262144.0) / 4.0);
        assert!((both.avg_latency_ms - 4.0).abs() < 1e-9);
        assert_eq!(combined(&io, &[IoClass::DbRead]), io[&IoClass::DbRead]);
        assert_eq!(combined(&io, &[IoClass::BackupRead]).count, 0);
    }
}
