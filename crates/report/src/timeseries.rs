//! Series out of the `samples` rows, for charts: one value per sampling interval.
//!
//! A row is missing when its counter family saw nothing in an interval (an I/O class
//! without I/O), so rates count a missing row as 0 while latencies leave a gap.

use std::collections::BTreeMap;

use edbstress_io::IoClass;

use crate::model::Sample;

/// Reads one field of a row.
pub type Field = fn(&Sample) -> Option<f64>;

/// Operations per second.
pub fn per_sec(s: &Sample) -> Option<f64> {
    s.per_sec
}

/// MB per second.
pub fn mb_per_sec(s: &Sample) -> Option<f64> {
    s.mb_per_sec
}

/// Average latency, ms.
pub fn avg_latency(s: &Sample) -> Option<f64> {
    s.avg_latency_ms
}

/// 99th percentile latency, ms.
pub fn p99(s: &Sample) -> Option<f64> {
    s.p99_ms
}

/// Every interval of the run as (interval number, elapsed seconds at its end), in order.
pub fn intervals(samples: &[Sample]) -> Vec<(u32, f64)> {
    let mut m: BTreeMap<u32, f64> = BTreeMap::new();
    for s in samples {
        m.entry(s.interval).or_insert(s.elapsed_s);
    }
    m.into_iter().collect()
}

/// `field` of the rows of `scope` and `family` at every interval (None where the row or
/// the field is missing), by elapsed seconds.
pub fn aligned(
    samples: &[Sample],
    scope: &str,
    family: &str,
    field: Field,
) -> Vec<(f64, Option<f64>)> {
    let mut by_interval: BTreeMap<u32, f64> = BTreeMap::new();
    for s in samples {
        if s.scope == scope && s.family == family {
            if let Some(v) = field(s) {
                by_interval.insert(s.interval, v);
            }
        }
    }
    intervals(samples)
        .into_iter()
        .map(|(i, t)| (t, by_interval.get(&i).copied()))
        .collect()
}

/// Like [`aligned`] with missing values as 0 (rates: no row means nothing happened).
pub fn rate(samples: &[Sample], scope: &str, family: &str, field: Field) -> Vec<(f64, f64)> {
    aligned(samples, scope, family, field)
        .into_iter()
        .map(|(t, v)| (t, v.unwrap_or(0.0)))
        .collect()
}

/// Transactional IOPS per interval: database reads/s + writes/s of the total.
pub fn transactional_iops(samples: &[Sample]) -> Vec<(f64, f64)> {
    let reads = rate(samples, "Total", IoClass::DbRead.name(), per_sec);
    let writes = rate(samples, "Total", IoClass::DbWrite.name(), per_sec);
    reads
        .into_iter()
        .zip(writes)
        .map(|((t, r), (_, w))| (t, r + w))
        .collect()
}

/// The I/O classes with at least one row of `scope`, in class order.
pub fn classes_seen(samples: &[Sample], scope: &str) -> Vec<IoClass> {
    IoClass::ALL
        .into_iter()
        .filter(|c| {
            samples
                .iter()
                .any(|s| s.scope == scope && s.family == c.name())
        })
        .collect()
}

/// Sum over instances of an engine counter per interval (e.g. page fault stalls/s).
pub fn engine_total(samples: &[Sample], field: Field) -> Vec<f64> {
    let mut by_interval: BTreeMap<u32, f64> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.family == "engine") {
        if let Some(v) = field(s) {
            *by_interval.entry(s.interval).or_insert(0.0) += v;
        }
    }
    by_interval.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(interval: u32, scope: &str, family: &str, per_sec: f64, lat: f64) -> Sample {
        Sample {
            interval,
            elapsed_s: f64::from(interval) * 15.0,
            scope: scope.into(),
            family: family.into(),
            per_sec: Some(per_sec),
            avg_latency_ms: Some(lat),
            ..Default::default()
        }
    }

    #[test]
    fn missing_rows_are_zero_rates_and_latency_gaps() {
        let samples = vec![
            row(1, "Total", "db_read", 100.0, 5.0),
            row(1, "Total", "db_write", 50.0, 1.0),
            row(2, "Total", "db_write", 40.0, 1.0),
            row(3, "Total", "db_read", 80.0, 7.0),
            row(3, "Instance0001", "db_read", 80.0, 7.0),
        ];
        assert_eq!(
            transactional_iops(&samples),
            vec![(15.0, 150.0), (30.0, 40.0), (45.0, 80.0)]
        );
        assert_eq!(
            aligned(&samples, "Total", "db_read", avg_latency),
            vec![(15.0, Some(5.0)), (30.0, None), (45.0, Some(7.0))]
        );
        assert_eq!(
            classes_seen(&samples, "Total"),
            vec![IoClass::DbRead, IoClass::DbWrite]
        );
    }
}
