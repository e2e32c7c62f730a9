//! Parsing `/proc/stat`, `/proc/meminfo`, `/proc/vmstat`, os-release(5) and
//! `/proc/cpuinfo`: CPU time, memory, page faults and host information.

use std::collections::BTreeMap;
use std::fs;

use tracing::debug;

/// Reads and parses a `/proc` file; None (logged) when either fails.
pub(super) fn read_proc<T>(path: &str, parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    match fs::read_to_string(path) {
        Ok(text) => {
            let parsed = parse(&text);
            if parsed.is_none() {
                debug!("cannot parse {path}; its counters are zero this interval");
            }
            parsed
        }
        Err(e) => {
            debug!("cannot read {path} ({e}); its counters are zero this interval");
            None
        }
    }
}

/// CPU time of all CPUs, in clock ticks, from the `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub(super) total: u64,
    /// idle + iowait: waiting for I/O is not work.
    pub(super) idle: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
pub(super) fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if fields.len() < 4 {
        return None;
    }
    // Fields 9 and 10 (guest, guest_nice) are already inside user and nice.
    let total = fields.iter().take(8).sum();
    let idle = fields[3] + fields.get(4).copied().unwrap_or(0);
    Some(CpuTimes { total, idle })
}

/// Percent of CPU time busy between two readings, in 0..=100.
pub(super) fn cpu_busy_pct(earlier: &CpuTimes, later: &CpuTimes) -> f64 {
    let total = later.total.saturating_sub(earlier.total);
    let idle = later.idle.saturating_sub(earlier.idle);
    if total == 0 {
        return 0.0;
    }
    (100.0 * total.saturating_sub(idle) as f64 / total as f64).clamp(0.0, 100.0)
}

/// The fields of `/proc/meminfo` we use, in kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct MemInfo {
    pub(super) total_kb: u64,
    pub(super) available_kb: u64,
}

/// Parses `/proc/meminfo`. Needs MemTotal; MemAvailable falls back to
/// MemFree + Buffers + Cached (kernels before 3.14).
pub(super) fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let fields: BTreeMap<&str, u64> = text
        .lines()
        .filter_map(|line| {
            let (key, rest) = line.split_once(':')?;
            let value = rest.split_whitespace().next()?.parse().ok()?;
            Some((key.trim(), value))
        })
        .collect();
    let total_kb = *fields.get("MemTotal")?;
    let available_kb = fields.get("MemAvailable").copied().unwrap_or_else(|| {
        ["MemFree", "Buffers", "Cached"]
            .iter()
            .filter_map(|k| fields.get(k))
            .sum()
    });
    Some(MemInfo {
        total_kb,
        available_kb,
    })
}

/// Page fault counts since boot, from `/proc/vmstat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FaultCounts {
    /// `pgfault`: every fault, minor and major.
    pub(super) minor_and_major: u64,
    /// `pgmajfault`: faults that needed I/O.
    pub(super) major: u64,
}

/// Parses `pgfault` and `pgmajfault` from `/proc/vmstat`.
pub(super) fn parse_vmstat_faults(text: &str) -> Option<FaultCounts> {
    let (mut all, mut major) = (None, None);
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        match key {
            "pgfault" => all = value.parse().ok(),
            "pgmajfault" => major = value.parse().ok(),
            _ => {}
        }
    }
    Some(FaultCounts {
        minor_and_major: all?,
        major: major?,
    })
}

/// Parses `PRETTY_NAME` from os-release(5) text, undoing its shell quoting.
pub(super) fn parse_os_release_pretty_name(text: &str) -> Option<String> {
    let raw = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("PRETTY_NAME="))?
        .trim();
    let value = if raw.len() >= 2
        && ((raw.starts_with('"') && raw.ends_with('"'))
            || (raw.starts_with('\'') && raw.ends_with('\'')))
    {
        let inner = &raw[1..raw.len() - 1];
        if raw.starts_with('"') {
            // Inside double quotes, \ escapes ", \, $ and `.
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars().peekable();
            while let Some(c) = chars.next() {
                match (c, chars.peek()) {
                    ('\\', Some(&next)) if matches!(next, '"' | '\\' | '$' | '`') => {
                        out.push(next);
                        chars.next();
                    }
                    _ => out.push(c),
                }
            }
            out
        } else {
            inner.to_string()
        }
    } else {
        raw.to_string()
    };
    Some(value).filter(|v| !v.is_empty())
}

/// Number of `processor` entries in `/proc/cpuinfo`.
pub(super) fn count_cpuinfo_processors(text: &str) -> u32 {
    text.lines()
        .filter(|l| l.split(':').next().map(str::trim) == Some("processor"))
        .count() as u32
}
