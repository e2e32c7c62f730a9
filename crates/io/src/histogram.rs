//! Mergeable fixed-bucket latency histograms.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Lowest latency told apart from zero, in nanoseconds (1 µs). hdrhistogram rounds the
/// unit down to a power of two, so below ~1 ms values are resolved to 512 ns.
const LOWEST_DISCERNIBLE_NS: u64 = 1_000;
/// Highest latency recorded, in nanoseconds (1 hour); larger values are clamped to it.
pub const MAX_LATENCY_NS: u64 = 3_600 * 1_000_000_000;
/// Significant decimal digits kept: every recorded value is within 0.1 % of the truth.
const SIGNIFICANT_DIGITS: u8 = 3;
/// Upper bound of the first bucket reported by [`LatencyHistogram::buckets`] (1 µs);
/// every next bucket's bound doubles.
const FIRST_EXPORT_BUCKET_NS: u64 = 1_000;

/// A histogram of latencies in nanoseconds, from 1 µs to 1 hour at 3 significant digits
/// (values outside are clamped, never rejected). Buckets are fixed by that range and
/// precision, so histograms recorded on different threads, instances or hosts merge
/// exactly.
///
/// Alongside the buckets it keeps the exact sum, minimum and maximum, so `mean_ns`,
/// `min_ns` and `max_ns` are exact (pass/fail criteria use the average) while percentiles
/// are within 0.1 %.
///
/// Memory: about 200 KB of counters per histogram, all written (zeroed) by hdrhistogram
/// when the histogram is created, so every live histogram is resident in full; see
/// [`crate::bound_allocator_footprint`] for what keeps dropped ones from staying so.
///
/// Serialised as `{sum_ns, min_ns, max_ns, counts: [[value_ns, count], ...]}` listing
/// non-empty buckets only, which re-merges exactly.
///
/// `clone_from` copies into the existing counters (no allocation): the engine
/// publishes its bookkeeping backends' counters after every request that way.
#[derive(PartialEq)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        let hist =
            Histogram::new_with_bounds(LOWEST_DISCERNIBLE_NS, MAX_LATENCY_NS, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid");
        LatencyHistogram {
            hist,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Records one latency; values above 1 hour are clamped to 1 hour.
    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        self.record_n(latency_ns, 1);
    }

    /// Records `count` occurrences of one latency.
    #[inline]
    pub fn record_n(&mut self, latency_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let value = latency_ns.min(MAX_LATENCY_NS);
        self.hist.saturating_record_n(value, count);
        self.sum_ns = self.sum_ns.saturating_add(value.saturating_mul(count));
        self.min_ns = self.min_ns.min(value);
        self.max_ns = self.max_ns.max(value);
    }

    /// Adds every value of `other` to this histogram.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.count() == 0 {
            return;
        }
        if self.hist.add(&other.hist).is_err() {
            // Unreachable with equal bounds; kept so a malformed input can never panic.
            for v in other.hist.iter_recorded() {
                self.hist
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The values recorded since `earlier`, a copy of this histogram taken before
    /// (interval sampling of cumulative counters). Bucket counts and the sum are exact;
    /// minimum and maximum are those of the lowest and highest non-empty bucket, capped
    /// by this histogram's exact ones.
    pub fn since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        let mut delta = self.clone();
        delta.subtract_earlier(self, earlier);
        delta
    }

    /// [`LatencyHistogram::since`] into `out`, reusing its counter array (no allocation
    /// once `out` has one): for interval sampling every second.
    pub fn since_into(&self, earlier: &LatencyHistogram, out: &mut LatencyHistogram) {
        out.clone_from(self);
        out.subtract_earlier(self, earlier);
    }

    /// With `self` a copy of `whole`: takes away what `earlier` holds.
    fn subtract_earlier(&mut self, whole: &LatencyHistogram, earlier: &LatencyHistogram) {
        if earlier.is_empty() {
            return;
        }
        if self.hist.subtract(&earlier.hist).is_err() {
            // `earlier` is not a prefix of this histogram: report everything.
            self.clone_from(whole);
            return;
        }
        self.sum_ns = whole.sum_ns.saturating_sub(earlier.sum_ns);
        if self.hist.is_empty() {
            self.hist.reset();
            self.sum_ns = 0;
            self.min_ns = u64::MAX;
            self.max_ns = 0;
        } else {
            self.min_ns = self
                .hist
                .lowest_equivalent(self.hist.min())
                .max(whole.min_ns);
            self.max_ns = self
                .hist
                .highest_equivalent(self.hist.max())
                .min(whole.max_ns)
                .max(self.min_ns);
        }
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Exact sum of the recorded values (saturating).
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// Exact mean; 0 when empty.
    pub fn mean_ns(&self) -> f64 {
        match self.count() {
            0 => 0.0,
            n => self.sum_ns as f64 / n as f64,
        }
    }

    /// Exact maximum; 0 when empty.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Exact minimum; 0 when empty.
    pub fn min_ns(&self) -> u64 {
        if self.is_empty() { 0 } else { self.min_ns }
    }

    /// The value at percentile `q` (0..=100; out-of-range and NaN are clamped): the
    /// highest value of the bucket holding that rank, capped at the exact maximum.
    /// 0 when empty.
    pub fn percentile_ns(&self, q: f64) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 100.0) };
        if q == 0.0 {
            return self.min_ns;
        }
        // Without the nudge, 99.9 / 100 rounds to 0.99900000000000011, whose rank over
        // 1000 values is 1000 instead of 999; 1e-12 cannot move a rank for fewer than
        // 10^12 values.
        let quantile = (q / 100.0 - 1e-12).max(0.0);
        self.hist
            .value_at_quantile(quantile)
            .clamp(self.min_ns, self.max_ns)
    }

    /// Non-empty log-spaced buckets as `(upper_bound_ns, count)`, ascending. Upper bounds
    /// are inclusive and double from one bucket to the next: 999, 1 999, 3 999, 7 999 ns
    /// ... (1 µs × 2^k − 1). Counts add up to `count()`.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hist
            .iter_log(FIRST_EXPORT_BUCKET_NS, 2.0)
            .filter(|v| v.count_since_last_iteration() > 0)
            .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
    }

    /// The bucket counts in HdrHistogram's V2 compressed encoding, base64: the form of
    /// one histogram of an HdrHistogram interval log, readable by HdrHistogram's tools in
    /// other languages (a few hundred bytes for a sampling interval). The exact sum,
    /// minimum and maximum are not in it. `None` only if the encoder fails, which it
    /// cannot for these bounds.
    pub fn to_v2_base64(&self) -> Option<String> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.hist, &mut bytes)
            .ok()?;
        Some(BASE64.encode(bytes))
    }

    /// Reads [`LatencyHistogram::to_v2_base64`]'s form (any HdrHistogram V2 encoding,
    /// compressed or not; values above 1 hour are clamped). Without the exact
    /// aggregates, the minimum and maximum are their buckets' bounds and the sum adds
    /// each bucket's middle value.
    pub fn from_v2_base64(text: &str) -> Result<LatencyHistogram, HistogramDecodeError> {
        let bytes = BASE64.decode(text.trim())?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| HistogramDecodeError::Hdr(format!("{e:?}")))?;
        let mut h = LatencyHistogram::new();
        for v in decoded.iter_recorded() {
            let value = v.value_iterated_to().min(MAX_LATENCY_NS);
            let count = v.count_at_value();
            h.hist.saturating_record_n(value, count);
            let middle = h.hist.median_equivalent(value);
            h.sum_ns = h.sum_ns.saturating_add(middle.saturating_mul(count));
        }
        if !h.is_empty() {
            h.min_ns = h.hist.lowest_equivalent(h.hist.min());
            h.max_ns = h.hist.highest_equivalent(h.hist.max()).min(MAX_LATENCY_NS);
        }
        Ok(h)
    }

    /// Empties the histogram, keeping its memory.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.sum_ns = 0;
        self.min_ns = u64::MAX;
        self.max_ns = 0;
    }
}

impl Clone for LatencyHistogram {
    fn clone(&self) -> LatencyHistogram {
        LatencyHistogram {
            hist: self.hist.clone(),
            sum_ns: self.sum_ns,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
        }
    }

    /// Overwrites these counters with `source`'s in place: the ~200 KB counter array is
    /// reset and copied, not freed and allocated again (a fresh one is mmapped, and
    /// every page of it faulted in and zeroed).
    fn clone_from(&mut self, source: &LatencyHistogram) {
        // An empty source is copied whole: hdrhistogram's `reset` leaves a maximum that
        // compares unequal to a new histogram's. A failed `set_to` is unreachable with
        // equal bounds; a copy is always right.
        if source.is_empty() || self.hist.set_to(&source.hist).is_err() {
            self.hist = source.hist.clone();
        }
        self.sum_ns = source.sum_ns;
        self.min_ns = source.min_ns;
        self.max_ns = source.max_ns;
    }
}

impl Default for LatencyHistogram {
    fn default() -> LatencyHistogram {
        LatencyHistogram::new()
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count())
            .field("mean_ns", &self.mean_ns())
            .field("min_ns", &self.min_ns())
            .field("p50_ns", &self.percentile_ns(50.0))
            .field("p99_ns", &self.percentile_ns(99.0))
            .field("max_ns", &self.max_ns())
            .finish()
    }
}

/// Why an encoded histogram could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistogramDecodeError {
    /// The text is not base64.
    #[error("not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 encoding.
    #[error("not an HdrHistogram V2 encoding: {0}")]
    Hdr(String),
}

/// The stored form: exact aggregates plus the non-empty hdrhistogram buckets, each as
/// `[value_ns, count]` with `value_ns` the highest value of its bucket.
#[derive(Serialize, Deserialize)]
struct StoredHistogram {
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
    counts: Vec<(u64, u64)>,
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredHistogram {
            sum_ns: self.sum_ns,
            min_ns: self.min_ns(),
            max_ns: self.max_ns,
            counts: self
                .hist
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = StoredHistogram::deserialize(deserializer)?;
        let mut h = LatencyHistogram::new();
        for (value, count) in stored.counts {
            h.hist.saturating_record_n(value.min(MAX_LATENCY_NS), count);
        }
        if !h.is_empty() {
            // Trust the exact aggregates only as far as they agree with the buckets.
            let lowest = h.hist.lowest_equivalent(h.hist.min());
            let highest = h.hist.highest_equivalent(h.hist.max()).min(MAX_LATENCY_NS);
            h.min_ns = stored.min_ns.clamp(lowest, highest);
            h.max_ns = stored.max_ns.clamp(lowest, highest).max(h.min_ns);
            h.sum_ns = stored.sum_ns;
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_gives_the_interval_between_two_snapshots() {
        let mut h = LatencyHistogram::new();
        for v in [1_000_000u64, 2_000_000, 3_000_000] {
            h.record(v);
        }
        let earlier = h.clone();
        h.record(50_000_000);
        h.record(70_000_000);
        let d = h.since(&earlier);
        assert_eq!(d.count(), 2);
        assert_eq!(d.sum_ns(), 120_000_000);
        assert_eq!(d.mean_ns(), 60_000_000.0);
        assert!(
            d.min_ns() >= 49_900_000 && d.min_ns() <= 50_100_000,
            "{}",
            d.min_ns()
        );
        assert_eq!(d.max_ns(), 70_000_000);
        assert!(h.since(&h).is_empty());
        assert_eq!(h.since(&LatencyHistogram::new()).count(), 5);
    }

    #[test]
    fn since_into_equals_since_whatever_the_target_held() {
        let mut earlier = LatencyHistogram::new();
        for v in [2_000u64, 40_000] {
            earlier.record(v);
        }
        let mut now = earlier.clone();
        for v in [3_000u64, 5_000_000, 5_000_000] {
            now.record(v);
        }
        let mut out = LatencyHistogram::new();
        for v in [1_000u64, 9_000_000_000] {
            out.record(v);
        }
        for earlier in [&earlier, &LatencyHistogram::new(), &now] {
            now.since_into(earlier, &mut out);
            assert!(out == now.since(earlier));
        }
        assert_eq!(out.count(), 0, "nothing since itself");
        now.since_into(&earlier, &mut out);
        assert_eq!(out.count(), 3);
        assert_eq!(out.sum_ns(), 10_003_000);
    }

    #[test]
    fn clone_from_overwrites_in_place() {
        let mut source = LatencyHistogram::new();
        for v in [2_000u64, 40_000, 5_000_000, 5_000_000] {
            source.record(v);
        }
        // A target holding other values (more, fewer, larger) ends equal to the source.
        let mut target = LatencyHistogram::new();
        for v in [1_000u64, 9_000_000_000, 77_000] {
            target.record(v);
        }
        target.clone_from(&source);
        assert!(target == source);
        assert_eq!(target.count(), 4);
        assert_eq!(target.sum_ns(), 10_042_000);
        assert_eq!(target.min_ns(), 2_000);
        assert_eq!(target.max_ns(), 5_000_000);
        // And from an empty one: empty, with the empty histogram's minimum and maximum.
        target.clone_from(&LatencyHistogram::new());
        assert!(target == LatencyHistogram::new());
        assert_eq!(target.min_ns(), 0);
    }

    #[test]
    fn empty_histogram_reports_zeroes() {
        let h = LatencyHistogram::new();
        assert_eq!(h.count(), 0);
        assert_eq!(h.mean_ns(), 0.0);
        assert_eq!(h.min_ns(), 0);
        assert_eq!(h.max_ns(), 0);
        assert_eq!(h.percentile_ns(99.0), 0);
        assert_eq!(h.buckets().count(), 0);
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(u64::MAX);
        assert_eq!(h.count(), 2);
        assert_eq!(h.min_ns(), 0);
        assert_eq!(h.max_ns(), MAX_LATENCY_NS);
        assert_eq!(h.percentile_ns(100.0), MAX_LATENCY_NS);
        assert_eq!(h.percentile_ns(f64::NAN), 0);
        assert_eq!(h.percentile_ns(-5.0), 0);
    }
}
