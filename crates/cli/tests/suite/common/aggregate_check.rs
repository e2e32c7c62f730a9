//! Checks of an aggregate against the runs it counted, recomputed here from each run's
//! results.json: the totals (rates summed, each class's histogram merged) and the
//! fleet's latency over time (the hosts' interval histograms merged).

use edbstress_io::{IoClass, LatencyHistogram};
use edbstress_report::RunResults;

/// The aggregate's totals against the runs': the transactional IOPS is their sum, and
/// each database and log class's count and p99 are those of the runs' histograms
/// merged here. Returns one line saying what was compared.
pub fn totals_are_the_hosts_merged(agg: &serde_json::Value, runs: &[RunResults]) -> String {
    let sum: f64 = runs.iter().map(|r| r.achieved_transactional_iops).sum();
    let got = agg["totals"]["achieved_transactional_iops"]
        .as_f64()
        .unwrap();
    assert!((got - sum).abs() < 1e-6, "{got} vs {sum}");
    let mut said = format!(
        "transactional IOPS {got:.3} = the sum of {} results.json ({sum:.3})",
        runs.len()
    );
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        let mut merged = LatencyHistogram::new();
        for r in runs {
            merged.merge(&r.totals.io[&class].histogram);
        }
        let p99 = agg["totals"]["io"][class.name()]["p99_ms"]
            .as_f64()
            .unwrap();
        assert_eq!(p99, merged.percentile_ns(99.0) as f64 / 1e6, "{class:?}");
        let count = agg["totals"]["io"][class.name()]["count"].as_u64().unwrap();
        assert_eq!(count, merged.count(), "{class:?}");
        said.push_str(&format!(
            "; {} p99 {p99:.3} ms over {count} I/Os = the merged histograms'",
            class.name()
        ));
    }
    said
}

/// Each run has interval rows of every database and log class, and their decoded
/// interval histograms hold as many I/Os as the rows' rates over the intervals' lengths
/// say.
pub fn interval_rows_hold_their_rates(runs: &[RunResults]) {
    for r in runs {
        // Each interval's end, from every row: a class with no I/O in an interval has
        // no row there, so the previous row of the class may be intervals back.
        let ends: std::collections::BTreeMap<u64, f64> = r
            .samples
            .iter()
            .map(|s| (u64::from(s.interval), s.elapsed_s))
            .collect();
        for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
            let rows: Vec<_> = r
                .samples
                .iter()
                .filter(|s| s.scope == "Total" && s.family == class.name())
                .collect();
            assert!(!rows.is_empty(), "{} {class:?}", r.host.hostname);
            for s in rows {
                let h = LatencyHistogram::from_v2_base64(
                    s.latency_histogram
                        .as_deref()
                        .expect("an interval histogram"),
                )
                .unwrap();
                let previous = ends
                    .get(&(u64::from(s.interval) - 1))
                    .copied()
                    .unwrap_or(0.0);
                let expected = s.per_sec.unwrap() * (s.elapsed_s - previous);
                assert!(
                    (h.count() as f64 - expected).abs() < 0.5,
                    "{} {class:?} interval {}: {} I/Os decoded, the row says {expected}",
                    r.host.hostname,
                    s.interval,
                    h.count()
                );
            }
        }
    }
}

/// The aggregate's `cluster`: recomputed here from the runs' interval histograms.
/// The hosts' intervals ending within half an interval of one another are merged here, and
/// every merged interval's p50, p99, count and maximum (the hosts' exact maxima) equal
/// the aggregate's; the worst latency is the highest interval maximum of any host.
pub fn fleet_latency_over_time_is_the_hosts_interval_histograms_merged(
    agg: &serde_json::Value,
    runs: &[RunResults],
) {
    let ms = |h: &LatencyHistogram, q: f64| h.percentile_ns(q) as f64 / 1e6;
    let origin =
        chrono::DateTime::parse_from_rfc3339(agg["common_window"]["start"].as_str().unwrap())
            .unwrap();
    let mut worst = (0.0f64, String::new());
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        // slot → (merged histogram, highest maximum, its host)
        let mut slots: std::collections::BTreeMap<i64, (LatencyHistogram, f64, String)> =
            std::collections::BTreeMap::new();
        for r in runs {
            let step = r.parameters.sample_interval_seconds;
            let host = agg["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["host"] == r.host.hostname.as_str())
                .unwrap();
            let start =
                chrono::DateTime::parse_from_rfc3339(host["window"]["start"].as_str().unwrap())
                    .unwrap();
            let shift = (start - origin).num_milliseconds() as f64 / 1000.0;
            let rows: Vec<_> = r
                .samples
                .iter()
                .filter(|s| s.scope == "Total" && s.family == class.name())
                .collect();
            for s in rows {
                let h = LatencyHistogram::from_v2_base64(
                    s.latency_histogram
                        .as_deref()
                        .expect("an interval histogram"),
                )
                .unwrap();
                let max = s.max_ms.unwrap();
                let slot = ((s.elapsed_s + shift) / step).round() as i64;
                let e = slots
                    .entry(slot)
                    .or_insert_with(|| (LatencyHistogram::new(), 0.0, String::new()));
                e.0.merge(&h);
                // Equal maxima name the lowest host name.
                if max > e.1 || (max == e.1 && r.host.hostname < e.2) {
                    e.1 = max;
                    e.2 = r.host.hostname.clone();
                }
            }
        }
        let series = agg["cluster"]["classes"][class.name()].as_array().unwrap();
        assert_eq!(series.len(), slots.len(), "{class:?}");
        for (got, (_, (merged, max, host))) in series.iter().zip(&slots) {
            assert_eq!(got["count"].as_u64(), Some(merged.count()), "{class:?}");
            assert_eq!(
                got["p99_ms"].as_f64(),
                Some(ms(merged, 99.0)),
                "{class:?} {got}"
            );
            assert_eq!(
                got["p50_ms"].as_f64(),
                Some(ms(merged, 50.0)),
                "{class:?} {got}"
            );
            assert_eq!(got["max_ms"].as_f64(), Some(*max), "{class:?} {got}");
            assert_eq!(got["max_host"].as_str(), Some(host.as_str()));
            let (low, high) = (
                got["host_p99_low_ms"].as_f64().unwrap(),
                got["host_p99_high_ms"].as_f64().unwrap(),
            );
            assert!(low <= high, "{got}");
        }
    }
    // The worst of every class's intervals (background classes too).
    for r in runs {
        for s in &r.samples {
            if s.scope != "Total" || s.latency_histogram.is_none() {
                continue;
            }
            let max = s.max_ms.unwrap();
            // Equal maxima name the lowest host name.
            if max > worst.0 || (max == worst.0 && r.host.hostname < worst.1) {
                worst = (max, r.host.hostname.clone());
            }
        }
    }
    let w = &agg["cluster"]["worst"];
    assert_eq!(w["max_ms"].as_f64(), Some(worst.0), "{w}");
    assert_eq!(w["host"].as_str(), Some(worst.1.as_str()), "{w}");
}
