//! Latency histograms, per-class counters and their serialised form.

use edbstress_io::{ClassStats, IoClass, IoMode, IoStats, LatencyHistogram, MAX_LATENCY_NS};
use proptest::prelude::*;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Within hdrhistogram's 3-significant-digit precision.
fn close(actual: u64, expected: u64) -> bool {
    let tolerance = (expected / 1000).max(512);
    actual.abs_diff(expected) <= tolerance
}

#[test]
fn percentiles_of_known_values() {
    let mut h = LatencyHistogram::new();
    // 1 µs .. 1000 µs, one of each.
    for v in 1..=1000u64 {
        h.record(v * US);
    }
    assert_eq!(h.count(), 1000);
    assert_eq!(h.mean_ns(), 500.5 * US as f64);
    assert_eq!(h.min_ns(), US);
    assert_eq!(h.max_ns(), 1000 * US);
    for (q, expected) in [
        (50.0, 500 * US),
        (90.0, 900 * US),
        (99.0, 990 * US),
        (99.9, 999 * US),
    ] {
        let p = h.percentile_ns(q);
        assert!(close(p, expected), "p{q} = {p}, expected about {expected}");
    }
    assert_eq!(h.percentile_ns(100.0), 1000 * US);
    assert_eq!(h.percentile_ns(0.0), US);

    // A skewed distribution: 990 fast, 10 slow I/Os.
    let mut h = LatencyHistogram::new();
    for _ in 0..990 {
        h.record(200 * US);
    }
    for _ in 0..10 {
        h.record(80 * MS);
    }
    assert!(close(h.percentile_ns(50.0), 200 * US));
    assert!(close(h.percentile_ns(99.0), 200 * US));
    assert!(close(h.percentile_ns(99.5), 80 * MS));
    assert_eq!(
        h.mean_ns(),
        (990.0 * 200_000.0 + 10.0 * 80_000_000.0) / 1000.0
    );
}

#[test]
fn buckets_are_log_spaced_and_add_up() {
    let mut h = LatencyHistogram::new();
    for v in [
        500,
        1_500,
        3_000,
        3_100,
        50 * US,
        10 * MS,
        10 * MS,
        2_000 * MS,
    ] {
        h.record(v);
    }
    let buckets: Vec<_> = h.buckets().collect();
    assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), h.count());
    // Inclusive upper bounds 1 µs × 2^k - 1 ns; 3000 and 3100 share (2 µs, 4 µs], the
    // two 10 ms values share (8.192 ms, 16.384 ms].
    assert_eq!(
        buckets,
        [
            (999, 1),
            (1_999, 1),
            (3_999, 2),
            (63_999, 1),
            (16_383_999, 2),
            (2_097_151_999, 1)
        ]
    );
}

#[test]
fn merge_equals_recording_everything_in_one() {
    let values: Vec<u64> = (0..5000u64).map(|i| (i * 7919) % (50 * MS) + 300).collect();
    let mut whole = LatencyHistogram::new();
    let mut a = LatencyHistogram::new();
    let mut b = LatencyHistogram::new();
    for (i, &v) in values.iter().enumerate() {
        whole.record(v);
        if i % 3 == 0 { a.record(v) } else { b.record(v) }
    }
    a.merge(&b);
    assert_eq!(a, whole);
    assert_eq!(a.count(), 5000);
    for q in [50.0, 90.0, 99.0, 99.9] {
        assert_eq!(a.percentile_ns(q), whole.percentile_ns(q));
    }
    // Merging an empty histogram changes nothing; reset empties.
    a.merge(&LatencyHistogram::new());
    assert_eq!(a, whole);
    a.reset();
    assert_eq!((a.count(), a.max_ns(), a.min_ns()), (0, 0, 0));
    a.record(5 * US);
    assert_eq!((a.min_ns(), a.max_ns()), (5 * US, 5 * US));
}

#[test]
fn histogram_serialisation_round_trip_and_remerge() {
    let mut h = LatencyHistogram::new();
    for v in [0, 1, 999, 1_000, 123_456, 7 * MS, MAX_LATENCY_NS, u64::MAX] {
        h.record(v);
    }
    let json = serde_json::to_string(&h).unwrap();
    let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.max_ns(), MAX_LATENCY_NS);
    let mut twice = back.clone();
    twice.merge(&h);
    assert_eq!(twice.count(), 2 * h.count());
    assert_eq!(twice.percentile_ns(50.0), h.percentile_ns(50.0));
    // Compact: non-empty buckets only.
    assert!(json.len() < 400, "{json}");
    // Garbage is an error, not a panic; inconsistent aggregates are tamed.
    assert!(serde_json::from_str::<LatencyHistogram>("{\"counts\": 5}").is_err());
    let odd: LatencyHistogram =
        serde_json::from_str(r#"{"sum_ns":10,"min_ns":0,"max_ns":99999999999999,"counts":[[5000,2],[99999999999999,1]]}"#)
            .unwrap();
    assert_eq!(odd.count(), 3);
    assert_eq!(odd.max_ns(), MAX_LATENCY_NS);
    assert!(odd.min_ns() <= odd.percentile_ns(1.0));
}

#[test]
fn hdr_v2_encoding_keeps_every_bucket_and_refuses_garbage() {
    let mut h = LatencyHistogram::new();
    for (i, v) in [1_000, 37_000, 123_456, 7 * MS, 2_500 * MS, MAX_LATENCY_NS]
        .into_iter()
        .enumerate()
    {
        h.record_n(v, 1 + i as u64 * 100);
    }
    let text = h.to_v2_base64().unwrap();
    // HdrHistogram's V2 compressed cookie (0x1c8493..), as in its interval logs.
    assert!(text.starts_with("HIST"), "{text}");
    assert!(text.len() < 200, "{} bytes: {text}", text.len());
    let back = LatencyHistogram::from_v2_base64(&text).unwrap();
    assert_eq!(back.count(), h.count());
    assert_eq!(
        back.buckets().collect::<Vec<_>>(),
        h.buckets().collect::<Vec<_>>()
    );
    for q in [1.0, 50.0, 90.0, 99.0, 99.9] {
        assert_eq!(back.percentile_ns(q), h.percentile_ns(q), "p{q}");
    }
    let mut merged = back.clone();
    merged.merge(&h);
    assert_eq!(merged.count(), 2 * h.count());
    assert!(
        LatencyHistogram::from_v2_base64(&LatencyHistogram::new().to_v2_base64().unwrap())
            .unwrap()
            .is_empty()
    );
    // Garbage is an error naming what is wrong, not a panic.
    let e = LatencyHistogram::from_v2_base64("not base64!").unwrap_err();
    assert!(e.to_string().contains("base64"), "{e}");
    assert!(LatencyHistogram::from_v2_base64("AAAAAAAA").is_err());
}

#[test]
fn io_stats_record_get_total_merge_take() {
    let mut s = IoStats::new();
    assert!(s.is_empty());
    s.record(0, IoClass::DbRead, 32768, 2 * MS, true);
    s.record(0, IoClass::DbRead, 32768, 4 * MS, true);
    s.record(3, IoClass::DbRead, 8192, 10 * MS, true);
    s.record(3, IoClass::LogWrite, 4096, MS, true);
    s.record(3, IoClass::LogWrite, 0, 5 * MS, false);

    let r = s.get(0, IoClass::DbRead).unwrap();
    assert_eq!((r.ops, r.bytes, r.errors), (2, 65536, 0));
    assert_eq!(r.latency.mean_ns(), 3.0 * MS as f64);
    assert_eq!(r.mean_bytes(), 32768.0);
    let w = s.get(3, IoClass::LogWrite).unwrap();
    assert_eq!(
        (w.ops, w.bytes, w.errors, w.latency.count()),
        (1, 4096, 1, 1)
    );
    assert!(s.get(1, IoClass::DbRead).is_none());
    assert!(s.get(0, IoClass::LogWrite).is_none());
    assert!(s.get(999, IoClass::LogWrite).is_none());
    assert_eq!(s.instances().collect::<Vec<_>>(), [0, 3]);

    let total = s.total(IoClass::DbRead);
    assert_eq!((total.ops, total.bytes), (3, 73728));
    assert_eq!(total.latency.max_ns(), 10 * MS);
    assert_eq!(s.total(IoClass::BackupRead), ClassStats::new());

    let mut other = IoStats::new();
    other.record(3, IoClass::DbRead, 8192, 20 * MS, true);
    other.record(7, IoClass::ChecksumRead, 262144, MS, true);
    let mut merged = s.clone();
    merged.merge(&other);
    assert_eq!(merged.get(3, IoClass::DbRead).unwrap().ops, 2);
    assert_eq!(
        merged.get(3, IoClass::DbRead).unwrap().latency.max_ns(),
        20 * MS
    );
    assert_eq!(merged.instances().collect::<Vec<_>>(), [0, 3, 7]);
    assert_eq!(merged.iter().count(), 4);

    let taken = merged.take();
    assert!(merged.is_empty());
    assert_eq!(merged.instances().count(), 0);
    assert_eq!(taken.get(7, IoClass::ChecksumRead).unwrap().bytes, 262144);
}

#[test]
fn io_stats_clone_from_equals_the_source_whatever_the_target_held() {
    let mut source = IoStats::new();
    source.record(1, IoClass::DbHeader, 32_768, 3 * MS, true);
    source.record(1, IoClass::DbFlush, 0, 900 * US, true);
    source.record(3, IoClass::DbGrowth, 1 << 20, 5 * MS, false);
    // A target with a class the source lacks, one it shares with other values, and
    // fewer instances; then one with more instances than the source.
    let mut target = IoStats::new();
    target.record(1, IoClass::DbHeader, 4_096, 70 * MS, true);
    target.record(1, IoClass::DbRead, 4_096, 70 * MS, true);
    target.clone_from(&source);
    assert_eq!(target, source);
    let mut wider = IoStats::new();
    wider.record(7, IoClass::LogWrite, 512, US, true);
    wider.clone_from(&source);
    assert_eq!(wider, source);
    // Publishing after each request: the source moves on, the copy follows.
    source.record(1, IoClass::DbHeader, 32_768, 4 * MS, true);
    target.clone_from(&source);
    assert_eq!(target, source);
    assert_eq!(target.get(1, IoClass::DbHeader).map(|c| c.ops), Some(2));
    assert_eq!(target.get(3, IoClass::DbGrowth).map(|c| c.errors), Some(1));
}

#[test]
fn io_stats_since_into_reuses_the_target_and_equals_since() {
    let mut earlier = IoStats::new();
    earlier.record(0, IoClass::DbRead, 32_768, 400 * US, true);
    earlier.record(0, IoClass::DbWrite, 32_768, 900 * US, true);
    let mut now = earlier.clone();
    now.record(0, IoClass::DbRead, 32_768, 600 * US, true);
    now.record(0, IoClass::DbRead, 32_768, 2 * MS, true);
    now.record(1, IoClass::LogWrite, 4_096, MS, false);
    // A target from an earlier interval: the same pairs, other values.
    let mut out = now.since(&IoStats::new());
    now.since_into(&earlier, &mut out);
    assert_eq!(out, now.since(&earlier));
    let read = out.get(0, IoClass::DbRead).expect("reads");
    assert_eq!((read.ops, read.bytes), (2, 65_536));
    assert_eq!(out.get(0, IoClass::DbWrite).map(|c| c.ops), Some(0));
    assert_eq!(out.get(1, IoClass::LogWrite).map(|c| c.errors), Some(1));
    // The totals the live status reads, without building a histogram.
    assert_eq!(
        out.total_ops_and_latency_ns(IoClass::DbRead),
        (2, 2_600 * US)
    );
    assert_eq!(out.total_ops_and_latency_ns(IoClass::DbFlush), (0, 0));
    // Reset keeps the pairs, zeroed.
    out.reset();
    assert_eq!(out.get(0, IoClass::DbRead).map(|c| c.ops), Some(0));
    assert_eq!(out.total(IoClass::DbRead).latency.count(), 0);
}

#[test]
fn io_stats_serialisation_round_trip() {
    let mut s = IoStats::new();
    for i in 0..100u64 {
        s.record(
            (i % 3) as u16,
            IoClass::ALL[(i % 10) as usize],
            i * 512,
            i * 37 * US,
            i % 17 != 0,
        );
    }
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains("\"class\":\"db_read\""), "{json}");
    let back: IoStats = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
    // Stored results re-merge: merging the copy doubles every counter.
    let mut doubled = back;
    doubled.merge(&s);
    for (instance, class, stats) in s.iter() {
        let d = doubled.get(instance, class).unwrap();
        assert_eq!(
            (d.ops, d.bytes, d.errors),
            (2 * stats.ops, 2 * stats.bytes, 2 * stats.errors)
        );
    }
}

#[test]
fn classes_serialise_by_name() {
    for class in IoClass::ALL {
        let json = serde_json::to_string(&class).unwrap();
        assert_eq!(json, format!("\"{}\"", class.name()));
        assert_eq!(serde_json::from_str::<IoClass>(&json).unwrap(), class);
    }
    assert_eq!(
        serde_json::to_string(&IoMode::Buffered).unwrap(),
        "\"buffered\""
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn merge_and_round_trip_preserve_everything(
        values in proptest::collection::vec(0u64..=u64::MAX / 2, 0..300),
        split in 0usize..300,
    ) {
        let split = split.min(values.len());
        let mut whole = LatencyHistogram::new();
        let (mut left, mut right) = (LatencyHistogram::new(), LatencyHistogram::new());
        for (i, &v) in values.iter().enumerate() {
            whole.record(v);
            if i < split { left.record(v) } else { right.record(v) }
        }
        left.merge(&right);
        prop_assert_eq!(&left, &whole);
        let back: LatencyHistogram = serde_json::from_str(&serde_json::to_string(&whole).unwrap()).unwrap();
        prop_assert_eq!(&back, &whole);
        if let (Some(&lo), Some(&hi)) = (values.iter().min(), values.iter().max()) {
            prop_assert_eq!(whole.min_ns(), lo.min(MAX_LATENCY_NS));
            prop_assert_eq!(whole.max_ns(), hi.min(MAX_LATENCY_NS));
            let p50 = whole.percentile_ns(50.0);
            prop_assert!(whole.min_ns() <= p50 && p50 <= whole.max_ns());
        }
    }
}
