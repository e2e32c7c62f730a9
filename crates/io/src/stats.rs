//! Per-instance, per-class I/O counters.

use serde::{Deserialize, Serialize};

use crate::{IoClass, LatencyHistogram};

/// Counters of one I/O class (for one instance, or totalled).
///
/// `ops`, `bytes` and `latency` cover I/Os that succeeded; `errors` counts the ones that
/// failed (their latency is not recorded, so an error returned at once cannot make a
/// device look fast).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassStats {
    /// Successful I/Os.
    pub ops: u64,
    /// Bytes transferred by successful I/Os (as returned, so short reads count short).
    pub bytes: u64,
    /// Failed I/Os.
    pub errors: u64,
    /// Latency of successful I/Os, from submission to completion.
    pub latency: LatencyHistogram,
}

impl Clone for ClassStats {
    fn clone(&self) -> ClassStats {
        ClassStats {
            ops: self.ops,
            bytes: self.bytes,
            errors: self.errors,
            latency: self.latency.clone(),
        }
    }

    /// In place, without allocating (see [`LatencyHistogram`]'s `clone_from`).
    fn clone_from(&mut self, source: &ClassStats) {
        self.ops = source.ops;
        self.bytes = source.bytes;
        self.errors = source.errors;
        self.latency.clone_from(&source.latency);
    }
}

impl ClassStats {
    /// Empty counters.
    pub fn new() -> ClassStats {
        ClassStats::default()
    }

    /// Adds `other` into these counters.
    pub fn merge(&mut self, other: &ClassStats) {
        self.ops = self.ops.saturating_add(other.ops);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.errors = self.errors.saturating_add(other.errors);
        self.latency.merge(&other.latency);
    }

    /// The counters accumulated since `earlier`, a snapshot of the same counters.
    pub fn since(&self, earlier: &ClassStats) -> ClassStats {
        ClassStats {
            ops: self.ops.saturating_sub(earlier.ops),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            errors: self.errors.saturating_sub(earlier.errors),
            latency: self.latency.since(&earlier.latency),
        }
    }

    /// [`ClassStats::since`] into `out`, reusing its histogram's counter array.
    pub fn since_into(&self, earlier: &ClassStats, out: &mut ClassStats) {
        out.ops = self.ops.saturating_sub(earlier.ops);
        out.bytes = self.bytes.saturating_sub(earlier.bytes);
        out.errors = self.errors.saturating_sub(earlier.errors);
        self.latency.since_into(&earlier.latency, &mut out.latency);
    }

    /// Zeroes the counters, keeping the histogram's memory.
    pub fn reset(&mut self) {
        self.ops = 0;
        self.bytes = 0;
        self.errors = 0;
        self.latency.reset();
    }

    /// Average bytes per successful I/O; 0 when there were none.
    pub fn mean_bytes(&self) -> f64 {
        match self.ops {
            0 => 0.0,
            n => self.bytes as f64 / n as f64,
        }
    }
}

/// The classes of one instance; a class's slot is filled on its first record.
type InstanceStats = [Option<ClassStats>; IoClass::COUNT];

/// Counters per (instance, class).
///
/// Recording is an index into a vector by instance and into an array by class: it
/// allocates only on the first record of an (instance, class) pair (plus the growth of
/// the instance vector), takes no lock and makes no system call. Instances are expected
/// to be small dense numbers (0, 1, 2, ...): memory grows with the largest one.
///
/// Serialised as a list of `{instance, class, stats}` entries.
///
/// `clone_from` reuses the counters already allocated (see [`ClassStats`]): a copy
/// published after every request costs no allocation once every class exists.
#[derive(Debug, Default, PartialEq)]
pub struct IoStats {
    by_instance: Vec<Option<Box<InstanceStats>>>,
}

impl Clone for IoStats {
    fn clone(&self) -> IoStats {
        IoStats {
            by_instance: self.by_instance.clone(),
        }
    }

    /// Vec, Option, Box and arrays all forward `clone_from` to their elements, so
    /// every class present on both sides is overwritten in place.
    fn clone_from(&mut self, source: &IoStats) {
        self.by_instance.clone_from(&source.by_instance);
    }
}

impl IoStats {
    /// No counters.
    pub fn new() -> IoStats {
        IoStats::default()
    }

    /// Records one completed I/O: on success one op, `bytes` and its latency; on failure
    /// one error.
    #[inline]
    pub fn record(&mut self, instance: u16, class: IoClass, bytes: u64, latency_ns: u64, ok: bool) {
        let stats = self.entry(instance, class);
        if ok {
            stats.ops = stats.ops.saturating_add(1);
            stats.bytes = stats.bytes.saturating_add(bytes);
            stats.latency.record(latency_ns);
        } else {
            stats.errors = stats.errors.saturating_add(1);
        }
    }

    /// The counters of one pair, created empty if missing.
    pub fn entry(&mut self, instance: u16, class: IoClass) -> &mut ClassStats {
        let i = usize::from(instance);
        if i >= self.by_instance.len() {
            self.by_instance.resize_with(i + 1, || None);
        }
        let classes = self.by_instance[i].get_or_insert_with(Box::default);
        classes[class.index()].get_or_insert_with(ClassStats::new)
    }

    /// Adds every counter of `other` into these.
    pub fn merge(&mut self, other: &IoStats) {
        for (instance, class, stats) in other.iter() {
            self.entry(instance, class).merge(stats);
        }
    }

    /// The counters of one pair, if anything was recorded for it.
    pub fn get(&self, instance: u16, class: IoClass) -> Option<&ClassStats> {
        self.by_instance
            .get(usize::from(instance))?
            .as_ref()?
            .get(class.index())?
            .as_ref()
    }

    /// One class summed over all instances.
    pub fn total(&self, class: IoClass) -> ClassStats {
        let mut total = ClassStats::new();
        for (_, c, stats) in self.iter() {
            if c == class {
                total.merge(stats);
            }
        }
        total
    }

    /// Instances with at least one recorded class, ascending.
    pub fn instances(&self) -> impl Iterator<Item = u16> + '_ {
        self.by_instance
            .iter()
            .enumerate()
            .filter(|(_, classes)| {
                classes
                    .as_ref()
                    .is_some_and(|c| c.iter().any(Option::is_some))
            })
            .map(|(i, _)| i as u16)
    }

    /// Every recorded (instance, class, counters), by instance then class.
    pub fn iter(&self) -> impl Iterator<Item = (u16, IoClass, &ClassStats)> + '_ {
        self.by_instance
            .iter()
            .enumerate()
            .filter_map(|(i, classes)| classes.as_ref().map(|c| (i as u16, c)))
            .flat_map(|(instance, classes)| {
                IoClass::ALL
                    .iter()
                    .zip(classes.iter())
                    .filter_map(move |(class, stats)| stats.as_ref().map(|s| (instance, *class, s)))
            })
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The counters accumulated since `earlier`, a snapshot of these counters.
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        let mut delta = IoStats::new();
        for (instance, class, stats) in self.iter() {
            let d = match earlier.get(instance, class) {
                Some(e) => stats.since(e),
                None => stats.clone(),
            };
            *delta.entry(instance, class) = d;
        }
        delta
    }

    /// [`IoStats::since`] into `out`, reusing the counters `out` already has (no
    /// allocation once every pair exists there): for interval sampling every second.
    /// Pairs of `out` that `self` lacks are zeroed.
    pub fn since_into(&self, earlier: &IoStats, out: &mut IoStats) {
        out.reset();
        for (instance, class, stats) in self.iter() {
            let d = out.entry(instance, class);
            match earlier.get(instance, class) {
                Some(e) => stats.since_into(e, d),
                None => d.clone_from(stats),
            }
        }
    }

    /// Zeroes every counter, keeping the pairs and their memory (a reset pair reads as
    /// recorded with nothing: `iter` still lists it).
    pub fn reset(&mut self) {
        for classes in self.by_instance.iter_mut().flatten() {
            for stats in classes.iter_mut().flatten() {
                stats.reset();
            }
        }
    }

    /// Successful I/Os of one class over all instances and the sum of their latencies
    /// in nanoseconds: [`IoStats::total`]'s counts without building its histogram.
    pub fn total_ops_and_latency_ns(&self, class: IoClass) -> (u64, u64) {
        self.iter()
            .filter(|&(_, c, _)| c == class)
            .fold((0, 0), |(ops, ns), (_, _, s)| {
                (ops + s.ops, ns + s.latency.sum_ns())
            })
    }

    /// Returns the counters and leaves this empty (for interval sampling).
    pub fn take(&mut self) -> IoStats {
        std::mem::take(self)
    }
}

#[derive(Serialize)]
struct EntryRef<'a> {
    instance: u16,
    class: IoClass,
    stats: &'a ClassStats,
}

#[derive(Deserialize)]
struct Entry {
    instance: u16,
    class: IoClass,
    stats: ClassStats,
}

impl Serialize for IoStats {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(|(instance, class, stats)| EntryRef {
            instance,
            class,
            stats,
        }))
    }
}

impl<'de> Deserialize<'de> for IoStats {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entries = Vec::<Entry>::deserialize(deserializer)?;
        let mut stats = IoStats::new();
        for e in entries {
            // Repeated pairs are merged rather than rejected.
            stats.entry(e.instance, e.class).merge(&e.stats);
        }
        Ok(stats)
    }
}
