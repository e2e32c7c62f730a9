//! Accumulating a measured phase: a sample of every counter family at each interval,
//! the highest interval average per class, and the totals at the end.

use super::live_counters::{SampleView, counter_snapshot};
use super::*;

/// Accumulates a measured phase: samples at each interval, the highest interval
/// averages, and the totals from the first to the last snapshot.
pub(super) struct MeasureRecorder {
    start: Snapshot,
    last_sample: Snapshot,
    interval_no: u32,
    samples: Vec<Sample>,
    host_intervals: Vec<HostInterval>,
    /// Highest per-interval average latency, ms, per (instance or None for total, class).
    max_interval: BTreeMap<(Option<u16>, IoClass), f64>,
    stalls: Vec<Vec<f64>>,
    depth_mb: Vec<Vec<f64>>,
    longest_interval_s: f64,
    sampling_stalls: Vec<SamplingStall>,
}

impl MeasureRecorder {
    pub(super) fn new(bench: &Workbench<'_>, start: &Snapshot) -> MeasureRecorder {
        bench.log.line(format!(
            "Performance logging started (interval: {} ms).",
            bench.config.sample_interval.as_millis()
        ));
        MeasureRecorder {
            start: start.clone(),
            last_sample: start.clone(),
            interval_no: 0,
            samples: Vec::new(),
            host_intervals: Vec::new(),
            max_interval: BTreeMap::new(),
            stalls: vec![Vec::new(); bench.slots.len()],
            depth_mb: vec![Vec::new(); bench.slots.len()],
            longest_interval_s: 0.0,
            sampling_stalls: Vec::new(),
        }
    }

    pub(super) fn sample(&mut self, bench: &Workbench<'_>, now: &Snapshot) {
        let iv = bench.interval(&self.last_sample, now);
        if iv.seconds <= 0.0 {
            return;
        }
        self.interval_no += 1;
        let elapsed = (now.at - self.start.at).as_secs_f64();
        self.longest_interval_s = self.longest_interval_s.max(iv.seconds);
        let expected = bench.config.sample_interval;
        if iv.seconds > stall_limit(expected).as_secs_f64() {
            let stall = SamplingStall {
                interval: self.interval_no,
                elapsed_s: elapsed,
                seconds: iv.seconds,
                expected_seconds: expected.as_secs_f64(),
            };
            bench.log.line(format!("Problem: {}.", stall.describe()));
            self.sampling_stalls.push(stall);
        }
        // The wall clock of the snapshot itself, to the millisecond: readers (the
        // fleet's aggregation, the report's collection times) subtract `elapsed_s`
        // from it to find when measuring started, and whole seconds put hosts started
        // together up to a second apart.
        let at =
            chrono::Local::now() - chrono::Duration::from_std(now.at.elapsed()).unwrap_or_default();
        let stamp = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, false);
        let base = |scope: String, family: &str| Sample {
            interval: self.interval_no,
            elapsed_s: elapsed,
            timestamp: stamp.clone(),
            scope,
            family: family.to_string(),
            ..Default::default()
        };
        let mut rows = Vec::new();
        let io_row = |scope: String, class: IoClass, s: &ClassStats, rows: &mut Vec<Sample>| {
            let mut r = base(scope, SampleFamily::Io(class).name());
            r.per_sec = Some(rate(s.ops, iv.seconds));
            r.mb_per_sec = Some(s.bytes as f64 / MB / iv.seconds);
            r.avg_bytes = Some(s.mean_bytes());
            r.avg_latency_ms = Some(s.latency.mean_ns() / 1e6);
            r.p99_ms = Some(s.latency.percentile_ns(99.0) as f64 / 1e6);
            r.max_ms = Some(s.latency.max_ns() as f64 / 1e6);
            r.errors = Some(s.errors);
            rows.push(r);
        };
        for (i, slot) in bench.slots.iter().enumerate() {
            let n = u16::try_from(slot.number).unwrap_or(u16::MAX);
            let scope = instance_name(slot.number);
            for class in IoClass::ALL.into_iter().filter(|c| c.is_reported()) {
                let Some(s) = iv.io.get(n, class) else {
                    continue;
                };
                if s.ops == 0 && s.errors == 0 {
                    continue;
                }
                io_row(scope.clone(), class, s, &mut rows);
                if s.ops > 0 {
                    let m = self.max_interval.entry((Some(n), class)).or_insert(0.0);
                    *m = m.max(s.latency.mean_ns() / 1e6);
                }
            }
            let t = &iv.txn[i];
            let mut r = base(scope.clone(), "transactions");
            r.per_sec = Some(rate(t.count(), iv.seconds));
            r.avg_latency_ms = Some(t.latency.mean_ns() / 1e6);
            r.p99_ms = Some(t.latency.percentile_ns(99.0) as f64 / 1e6);
            r.max_ms = Some(t.latency.max_ns() as f64 / 1e6);
            r.errors = Some(t.errors);
            rows.push(r);
            let c = &iv.cache[i];
            let stalls = rate(c.stalls, iv.seconds);
            let depth = iv.checkpoint_depth[i] as f64 / MB;
            self.stalls[i].push(stalls);
            self.depth_mb[i].push(depth);
            let mut r = base(scope, "engine");
            let page = bench.config.page_size.bytes() as f64;
            r.cache_mb = Some(iv.cache_now[i].frames as f64 * page / MB);
            r.cache_hit_pct = Some(hit_pct(c));
            r.page_fault_stalls_per_sec = Some(stalls);
            r.checkpoint_depth_mb = Some(depth);
            r.log_generation = Some(iv.generation[i].get());
            r.per_sec = Some(rate(t.count(), iv.seconds));
            rows.push(r);
        }
        for class in IoClass::ALL.into_iter().filter(|c| c.is_reported()) {
            let s = iv.io.total(class);
            if s.ops == 0 && s.errors == 0 {
                continue;
            }
            io_row("Total".into(), class, &s, &mut rows);
            if let Some(row) = rows.last_mut().filter(|_| !s.latency.is_empty()) {
                row.latency_histogram = s.latency.to_v2_base64();
            }
            if s.ops > 0 {
                let m = self.max_interval.entry((None, class)).or_insert(0.0);
                *m = m.max(s.latency.mean_ns() / 1e6);
            }
        }
        if let Some(publish) = bench.counters {
            let whole = bench.interval(&self.start, now);
            publish(&counter_snapshot(
                bench,
                &SampleView {
                    whole: &whole,
                    last: &iv,
                    interval: self.interval_no,
                    max_interval: &self.max_interval,
                    sampling: (
                        self.longest_interval_s,
                        stall_limit(bench.config.sample_interval).as_secs_f64(),
                    ),
                },
            ));
        }
        rows.extend(iv.host.samples(self.interval_no, elapsed, &stamp));
        self.samples.extend(rows);
        self.host_intervals.push(iv.host);
        self.last_sample = now.clone();
    }

    pub(super) fn finish(
        mut self,
        bench: &Workbench<'_>,
        end: &Snapshot,
        sessions: u32,
    ) -> Measurement {
        if (end.at - self.last_sample.at).as_secs_f64() >= 0.5 {
            self.sample(bench, end);
        }
        let whole = bench.interval(&self.start, end);
        let seconds = whole.seconds;
        bench.log.line("Performance logging has ended.");
        let max = |key: (Option<u16>, IoClass)| self.max_interval.get(&key).copied().unwrap_or(0.0);
        let mut instances = Vec::new();
        let mut all_txn = TxnStats::default();
        for (i, slot) in bench.slots.iter().enumerate() {
            let n = u16::try_from(slot.number).unwrap_or(u16::MAX);
            let io = edbstress_report::summary::io_summary(&whole.io, Some(n), seconds, &|c| {
                max((Some(n), c))
            });
            let c = &whole.cache[i];
            let avg = |v: &[f64]| {
                if v.is_empty() {
                    0.0
                } else {
                    v.iter().sum::<f64>() / v.len() as f64
                }
            };
            let page = bench.config.page_size.bytes() as f64;
            let engine = EngineSummary {
                cache_size_mb: end.cache[i].frames as f64 * page / MB,
                cache_max_mb: end.cache[i].max_frames as f64 * page / MB,
                cache_hit_pct: hit_pct(c),
                page_fault_stalls_per_sec: rate(c.stalls, seconds),
                checkpoint_depth_mb: avg(&self.depth_mb[i]),
                log_generation: end.generation[i].get(),
                log_files_written: whole.generations_written[i],
                log_bytes_per_sec: whole.log[i].bytes_written as f64 / seconds.max(1e-9),
                allocated_bytes: whole.pages_allocated[i] * bench.config.page_size.bytes() as u64,
                checkpoint_waits_per_sec: rate(c.checkpoint_waits, seconds),
            };
            all_txn.merge(&whole.txn[i]);
            instances.push(InstanceResult {
                name: instance_name(slot.number),
                instance: slot.number,
                database_path: slot.layout.db_file.display().to_string(),
                log_path: slot.layout.log_dir.display().to_string(),
                initial_bytes: slot.initial_bytes,
                final_bytes: file_len(&slot.layout.db_file),
                io,
                transactions: Some(whole.txn[i].summary(seconds)),
                engine: Some(engine),
                ..Default::default()
            });
        }
        let totals_io: IoSummary =
            edbstress_report::summary::io_summary(&whole.io, None, seconds, &|c| max((None, c)));
        let mut host = host_counters(&self.host_intervals, &whole.host);
        host.no_device = bench.host.unresolved_reasons().to_vec();
        let layouts: Vec<InstanceLayout> = bench.slots.iter().map(|s| s.layout.clone()).collect();
        let volumes = crate::volumes::volumes(
            bench.host.devices(),
            &layouts,
            &whole.host,
            &self.host_intervals,
            &whole.io,
        );
        Measurement {
            seconds,
            sessions,
            transaction_errors: all_txn.errors,
            totals: Totals {
                io: totals_io,
                transactions: Some(all_txn.summary(seconds)),
                ..Default::default()
            },
            instances,
            samples: self.samples,
            host,
            volumes,
            longest_interval_s: self.longest_interval_s,
            stall_limit_s: stall_limit(bench.config.sample_interval).as_secs_f64(),
            stalls: self.sampling_stalls,
        }
    }
}
