//! One test run on several hosts at once, aggregated (`edbstress aggregate`): every
//! host's totals and verdict, and the solution's totals — rates and counts summed,
//! latency percentiles from the merged histograms (exact over all hosts), and, labelled
//! as such, the ESRP documents' figure: the average of the per-server averages.
//!
//! Pure over results models: the caller loads the run directories and writes the
//! files ([`page`] renders them).

use std::collections::BTreeMap;
use std::fmt::Write;

use chrono::{DateTime, FixedOffset};
use edbstress_io::{IoClass, LatencyHistogram};
use serde::{Deserialize, Serialize};

use crate::model::{
    ClassSummary, Criterion, IoSummary, RunResults, SCHEMA_VERSION, TestType, ToolInfo,
    TransactionSummary, Verdict,
};
use crate::summary::{combined, latency_summary};
use crate::timeseries;

pub mod page;

/// The `kind` of an aggregate `results.json` (a single run's has none).
pub const AGGREGATE_KIND: &str = "aggregate";

/// The measured windows of the hosts must overlap by at least this share of the
/// shortest one: otherwise they did not load the storage together.
pub const MIN_OVERLAP: f64 = 0.9;

/// Database reads as the ESRP tables count them: transactional reads only. Background
/// maintenance reads are not in "Database Disks Reads/sec" (Cisco C210: 370.981 =
/// 8 databases × 46.373 transactional reads/s, its 27.3 BDM reads/s per database left
/// out; Dell PS6210E: 741.49 = 6 × 123.58).
pub const DB_READ_CLASSES: &[IoClass] = &[IoClass::DbRead];
/// Database writes as the ESRP tables count them.
pub const DB_WRITE_CLASSES: &[IoClass] = &[IoClass::DbWrite];
/// Log writes as the ESRP tables count them.
pub const LOG_WRITE_CLASSES: &[IoClass] = &[IoClass::LogWrite];

/// One host's run directory, loaded.
#[derive(Clone, Debug)]
pub struct HostRun {
    /// The host's name in the aggregate (the fleet's host name, else the run's).
    pub host: String,
    /// The run directory as given.
    pub source: String,
    /// Its results.
    pub results: RunResults,
}

/// A host whose run left no results (killed, host lost, copy failed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MissingHost {
    /// The host.
    pub host: String,
    /// Where its run directory was expected.
    pub source: String,
    /// Why there are no results.
    pub reason: String,
}

/// A host's measured window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasuredWindow {
    /// Start (RFC 3339).
    pub start: String,
    /// End (RFC 3339).
    pub end: String,
    /// Seconds.
    pub seconds: f64,
}

/// One host in the aggregate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostOutcome {
    /// The host.
    pub host: String,
    /// Its run directory as given.
    pub source: String,
    /// Its verdict as re-derived from its criteria and abort flag.
    pub overall_result: Verdict,
    /// Why the host counts as incomplete (its run was stopped early, or it left no
    /// results); `None` for a complete run.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub incomplete: Option<String>,
    /// Its failed criteria.
    pub failed_criteria: Vec<Criterion>,
    /// Its measured window (absent when it left no results).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub window: Option<MeasuredWindow>,
    /// Databases it ran.
    pub databases: u32,
    /// Its transactional IOPS.
    pub achieved_transactional_iops: f64,
    /// Its target, if it had one.
    pub target_transactional_iops: Option<f64>,
    /// Its I/O per class.
    pub io: IoSummary,
    /// Its transactions.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<TransactionSummary>,
    /// Its time series, on the clock of the common window (seconds since it started).
    #[serde(default)]
    pub series: HostSeries,
}

/// A host's time series for the aggregate's charts: one point per sampling interval,
/// x in seconds since the start of the common window (negative before it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSeries {
    /// Transactional IOPS (database reads/s + writes/s).
    pub transactional_iops: Vec<(f64, f64)>,
    /// Average latency per I/O class, ms (None where the class saw no I/O).
    pub avg_latency_ms: BTreeMap<IoClass, Vec<(f64, Option<f64>)>>,
}

/// One I/O class over all complete hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregateClass {
    /// I/Os, summed.
    pub count: u64,
    /// Failed I/Os, summed.
    pub errors: u64,
    /// I/Os per second, summed.
    pub per_sec: f64,
    /// Average bytes per I/O over all hosts.
    pub avg_bytes: f64,
    /// Average latency of every I/O of every host (from the merged histogram), ms.
    pub avg_latency_ms: f64,
    /// The ESRP documents' figure: the average of the hosts' average latencies, ms.
    pub esrp_avg_latency_ms: f64,
    /// Percentiles of the merged histogram, ms: exact over all hosts.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// Highest latency on any host, ms.
    pub max_ms: f64,
    /// The merged histogram.
    pub histogram: LatencyHistogram,
}

/// The solution's totals over the complete hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AggregateTotals {
    /// Transactional IOPS, summed.
    pub achieved_transactional_iops: f64,
    /// Targets, summed (absent unless every host had one).
    pub target_transactional_iops: Option<f64>,
    /// Per I/O class.
    pub io: BTreeMap<IoClass, AggregateClass>,
}

/// Everything `edbstress aggregate` found (the aggregate directory's `results.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AggregateResults {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// [`AGGREGATE_KIND`].
    pub kind: String,
    /// The tool that aggregated.
    pub tool: ToolInfo,
    /// The test every host ran.
    pub test_type: TestType,
    /// The version profile every host ran.
    pub profile: String,
    /// Pass only when every host passed and none is incomplete.
    pub overall_result: Verdict,
    /// Whether every host finished its run.
    pub complete: bool,
    /// The hosts, in the order given.
    pub hosts: Vec<HostOutcome>,
    /// The window all complete hosts measured together (for a backup or a soft
    /// recovery, judged per server, the span from the first start to the last end when
    /// the hosts did not overlap).
    pub common_window: MeasuredWindow,
    /// Totals over the complete hosts.
    pub totals: AggregateTotals,
    /// What the reader must know that does not change the verdict (runs by different
    /// edbstress versions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Why runs cannot be aggregated (a usage error: the message says what differs).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AggregateError(pub String);

/// The measured window of a run: from its first sample's interval start to the end
/// of its measured period (from the end of the test when it has no samples).
pub fn measured_window(r: &RunResults) -> Option<(DateTime<FixedOffset>, DateTime<FixedOffset>)> {
    let seconds = chrono::Duration::milliseconds((r.measured_seconds * 1000.0).round() as i64);
    let start = match r.samples.first() {
        Some(s) => {
            let end_of_first = DateTime::parse_from_rfc3339(&s.timestamp).ok()?;
            end_of_first - chrono::Duration::milliseconds((s.elapsed_s * 1000.0).round() as i64)
        }
        None => DateTime::parse_from_rfc3339(&r.ended_at).ok()? - seconds,
    };
    Some((start, start + seconds))
}

fn window_of(r: &RunResults) -> Option<MeasuredWindow> {
    measured_window(r).map(|(start, end)| MeasuredWindow {
        start: start.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        end: end.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        seconds: (end - start).num_milliseconds() as f64 / 1000.0,
    })
}

/// A host's verdict from its criteria and abort flag (never the stored word).
fn derived_verdict(r: &RunResults) -> Verdict {
    if r.aborted || r.criteria.iter().any(|c| !c.passed) {
        Verdict::Fail
    } else {
        Verdict::Pass
    }
}

/// Aggregates `runs` (and names `missing` hosts). Refused: no run, runs of different
/// test types or profiles, a host twice, one run (by its run id) twice, totals that
/// overflow (a sum of rates that is not a finite number, a count past `u64`), and for
/// Performance and Stress, measured windows of the complete hosts that overlap by less
/// than [`MIN_OVERLAP`] of the shortest.
pub fn aggregate(
    runs: Vec<HostRun>,
    missing: Vec<MissingHost>,
    tool: ToolInfo,
) -> Result<AggregateResults, AggregateError> {
    let Some(first) = runs.first() else {
        return Err(AggregateError(
            "no host left results to aggregate: give the run directories (each with a \
             results.json) of one test run on several hosts"
                .into(),
        ));
    };
    let test_type = first.results.test_type;
    let profile = first.results.parameters.profile.clone();
    let differs = |what: &str, f: &dyn Fn(&HostRun) -> String| -> Option<AggregateError> {
        let values: Vec<String> = runs
            .iter()
            .map(|r| format!("{} ({})", f(r), r.host))
            .collect();
        let distinct = {
            let mut v: Vec<String> = runs.iter().map(f).collect();
            v.sort();
            v.dedup();
            v.len()
        };
        (distinct > 1).then(|| {
            AggregateError(format!(
                "the runs differ in {what}: {}; aggregate the runs of one test on every host",
                values.join(", ")
            ))
        })
    };
    if let Some(e) = differs("test type", &|r| r.results.test_type.label().to_string()) {
        return Err(e);
    }
    if let Some(e) = differs("version profile", &|r| r.results.parameters.profile.clone()) {
        return Err(e);
    }
    let mut names: Vec<&str> = runs.iter().map(|r| r.host.as_str()).collect();
    names.extend(missing.iter().map(|m| m.host.as_str()));
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(AggregateError(format!(
            "host {} is given twice: each host's run may be aggregated once (two runs on one \
             host are two tests, not a solution)",
            w[0]
        )));
    }
    refuse_repeated_runs(&runs)?;
    let complete: Vec<&HostRun> = runs.iter().filter(|r| !r.results.aborted).collect();
    // Simultaneous load is what a transactional test of a solution is about. A backup or
    // a soft recovery is judged per server (the ESRP documents list each server's MB/s
    // and seconds per log), and its measured window is as long as the work takes on
    // that host: seconds apart on different hosts is not a failure to start together.
    let together = matches!(test_type, TestType::Performance | TestType::Stress);
    let common_window = check_overlap(&complete, together)?;
    let origin = DateTime::parse_from_rfc3339(&common_window.start).ok();

    let mut hosts: Vec<HostOutcome> = runs.iter().map(|r| outcome(r, origin)).collect();
    hosts.extend(missing.iter().map(|m| HostOutcome {
        host: m.host.clone(),
        source: m.source.clone(),
        overall_result: Verdict::Fail,
        incomplete: Some(m.reason.clone()),
        failed_criteria: Vec::new(),
        window: None,
        databases: 0,
        achieved_transactional_iops: 0.0,
        target_transactional_iops: None,
        io: IoSummary::new(),
        transactions: None,
        series: HostSeries::default(),
    }));
    let totals = totals(&complete)?;
    // The ESRP table adds rates across classes and hosts: each of its rows must be a
    // number too.
    let columns: Vec<(&str, [f64; 7])> = complete
        .iter()
        .map(|r| {
            (
                r.host.as_str(),
                EsrpColumn::of_host(&r.results.totals.io).values(),
            )
        })
        .collect();
    for (i, row) in ESRP_ROWS.iter().enumerate() {
        let values: Vec<(&str, f64)> = columns.iter().map(|(h, v)| (*h, v[i])).collect();
        finite_sum(row, &values)?;
    }
    let all_complete = hosts.iter().all(|h| h.incomplete.is_none());
    let overall_result = if all_complete && hosts.iter().all(|h| h.overall_result == Verdict::Pass)
    {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    Ok(AggregateResults {
        schema_version: SCHEMA_VERSION,
        kind: AGGREGATE_KIND.into(),
        tool,
        test_type,
        profile,
        overall_result,
        complete: all_complete,
        totals,
        warnings: version_warnings(&runs),
        hosts,
        common_window,
    })
}

/// One run (one run id) given under two names or paths would count its load twice.
fn refuse_repeated_runs(runs: &[HostRun]) -> Result<(), AggregateError> {
    let mut seen: BTreeMap<&str, &HostRun> = BTreeMap::new();
    for r in runs {
        let Some(id) = r.results.run_id.as_deref() else {
            continue;
        };
        if let Some(first) = seen.insert(id, r) {
            return Err(AggregateError(format!(
                "run {id} is given twice: as {} ({}) and as {} ({}); each run counts once \
                 (one host's run under two names, or a copy of a run directory, is not a \
                 second server)",
                first.host, first.source, r.host, r.source
            )));
        }
    }
    Ok(())
}

/// A warning naming each edbstress version when the hosts' runs were made by different
/// ones (their measurements may not be comparable).
fn version_warnings(runs: &[HostRun]) -> Vec<String> {
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in runs {
        versions
            .entry(r.results.tool.version.as_str())
            .or_default()
            .push(r.host.as_str());
    }
    if versions.len() < 2 {
        return Vec::new();
    }
    let listed: Vec<String> = versions
        .iter()
        .map(|(v, hosts)| format!("{v} on {}", hosts.join(", ")))
        .collect();
    vec![format!(
        "the runs were made by different edbstress versions ({}); run one version on \
         every host for figures that compare",
        listed.join("; ")
    )]
}

fn outcome(r: &HostRun, origin: Option<DateTime<FixedOffset>>) -> HostOutcome {
    let res = &r.results;
    // Seconds from the common window's start to this host's measurement start.
    let shift = match (origin, measured_window(res)) {
        (Some(o), Some((start, _))) => (start - o).num_milliseconds() as f64 / 1000.0,
        _ => 0.0,
    };
    let series = HostSeries {
        transactional_iops: timeseries::transactional_iops(&res.samples)
            .into_iter()
            .map(|(t, v)| (t + shift, v))
            .collect(),
        avg_latency_ms: timeseries::classes_seen(&res.samples, "Total")
            .into_iter()
            .map(|class| {
                let points = timeseries::aligned(
                    &res.samples,
                    "Total",
                    class.name(),
                    timeseries::avg_latency,
                )
                .into_iter()
                .map(|(t, v)| (t + shift, v))
                .collect();
                (class, points)
            })
            .collect(),
    };
    HostOutcome {
        host: r.host.clone(),
        source: r.source.clone(),
        overall_result: derived_verdict(res),
        incomplete: res.aborted.then(|| {
            format!(
                "its run was stopped before its end ({})",
                res.abort_reason.as_deref().unwrap_or("no reason recorded")
            )
        }),
        failed_criteria: res.criteria.iter().filter(|c| !c.passed).cloned().collect(),
        window: window_of(res),
        databases: res.parameters.databases,
        achieved_transactional_iops: res.achieved_transactional_iops,
        target_transactional_iops: res.target_transactional_iops,
        io: res.totals.io.clone(),
        transactions: res.totals.transactions.clone(),
        series,
    }
}

/// The window every complete host measured; refused when it is shorter than
/// [`MIN_OVERLAP`] of the shortest host's window. Unless the hosts must load the
/// storage `together`, a short overlap is not refused and the window is the span from
/// the first start to the last end.
fn check_overlap(complete: &[&HostRun], together: bool) -> Result<MeasuredWindow, AggregateError> {
    let mut windows = Vec::new();
    for r in complete {
        let w = measured_window(&r.results).ok_or_else(|| {
            AggregateError(format!(
                "the run of {} ({}) has no readable measured window (timestamps); is its \
                 results.json complete?",
                r.host, r.source
            ))
        })?;
        windows.push((r.host.as_str(), w));
    }
    let Some(start) = windows.iter().map(|(_, (s, _))| *s).max() else {
        return Ok(MeasuredWindow::default());
    };
    let end = windows.iter().map(|(_, (_, e))| *e).min().unwrap_or(start);
    let shortest = windows
        .iter()
        .map(|(_, (s, e))| (*e - *s).num_milliseconds())
        .min()
        .unwrap_or(0);
    let overlap = (end - start).num_milliseconds();
    if !together && (overlap as f64) < MIN_OVERLAP * shortest as f64 {
        let first = windows.iter().map(|(_, (s, _))| *s).min().unwrap_or(start);
        let last = windows.iter().map(|(_, (_, e))| *e).max().unwrap_or(end);
        return Ok(MeasuredWindow {
            start: first.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
            end: last.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
            seconds: (last - first).num_milliseconds() as f64 / 1000.0,
        });
    }
    if (overlap as f64) < MIN_OVERLAP * shortest as f64 {
        let mut listed = String::new();
        for (host, (s, e)) in &windows {
            let _ = write!(
                listed,
                "\n  {host}: {} to {} ({:.1} s)",
                s.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
                e.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
                (*e - *s).num_milliseconds() as f64 / 1000.0
            );
        }
        return Err(AggregateError(format!(
            "the hosts' measured windows overlap by {:.1} s, less than {:.0} % of the shortest \
             ({:.1} s): they did not load the storage at the same time. Start them together \
             (`edbstress run --start-at TIME` on every host, or `edbstress fleet run`).{listed}",
            overlap.max(0) as f64 / 1000.0,
            MIN_OVERLAP * 100.0,
            shortest as f64 / 1000.0
        )));
    }
    Ok(MeasuredWindow {
        start: start.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        end: end.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
        seconds: overlap as f64 / 1000.0,
    })
}

fn totals(complete: &[&HostRun]) -> Result<AggregateTotals, AggregateError> {
    let mut io: BTreeMap<IoClass, AggregateClass> = BTreeMap::new();
    for class in IoClass::ALL {
        let per_host: Vec<(&str, &ClassSummary)> = complete
            .iter()
            .filter_map(|r| {
                r.results
                    .totals
                    .io
                    .get(&class)
                    .map(|s| (r.host.as_str(), s))
            })
            .filter(|(_, s)| s.count > 0)
            .collect();
        if per_host.is_empty() {
            continue;
        }
        io.insert(class, checked_class(class, &per_host)?);
    }
    let targets: Option<Vec<(&str, f64)>> = complete
        .iter()
        .map(|r| {
            r.results
                .target_transactional_iops
                .map(|t| (r.host.as_str(), t))
        })
        .collect();
    let achieved: Vec<(&str, f64)> = complete
        .iter()
        .map(|r| (r.host.as_str(), r.results.achieved_transactional_iops))
        .collect();
    let target_transactional_iops = match targets.filter(|t| !t.is_empty()) {
        Some(t) => Some(finite_sum("target_transactional_iops", &t)?),
        None => None,
    };
    Ok(AggregateTotals {
        achieved_transactional_iops: finite_sum("achieved_transactional_iops", &achieved)?,
        target_transactional_iops,
        io,
    })
}

/// The sum of one field over the hosts, refused when a value or the sum is not a finite
/// number (a results.json is JSON and holds no infinity, but values near `f64::MAX`
/// add up to one).
fn finite_sum(field: &str, values: &[(&str, f64)]) -> Result<f64, AggregateError> {
    let listed = || {
        values
            .iter()
            .map(|(h, v)| format!("{h}: {v:e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some((host, v)) = values.iter().find(|(_, v)| !v.is_finite()) {
        return Err(AggregateError(format!(
            "the run of {host} gives {field} as {v}, which is not a number; its results.json \
             is damaged: aggregate runs written by edbstress"
        )));
    }
    let sum: f64 = values.iter().map(|(_, v)| v).sum();
    if !sum.is_finite() {
        return Err(AggregateError(format!(
            "{field} summed over the hosts is not a finite number ({}); these results.json \
             files hold values no run measures: aggregate runs written by edbstress",
            listed()
        )));
    }
    Ok(sum)
}

/// The sum of one counter over the hosts, refused when it passes `u64::MAX`.
fn checked_count(field: &str, values: &[(&str, u64)]) -> Result<u64, AggregateError> {
    values
        .iter()
        .try_fold(0u64, |acc, (_, v)| acc.checked_add(*v))
        .ok_or_else(|| {
            AggregateError(format!(
                "{field} summed over the hosts passes the largest count ({}); these \
                 results.json files hold counts no run measures: aggregate runs written by \
                 edbstress",
                values
                    .iter()
                    .map(|(h, v)| format!("{h}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// One class over the hosts that saw I/O of it, every sum checked.
fn checked_class(
    class: IoClass,
    per_host: &[(&str, &ClassSummary)],
) -> Result<AggregateClass, AggregateError> {
    let name = class.name();
    let field = |f: fn(&ClassSummary) -> f64| -> Vec<(&str, f64)> {
        per_host.iter().map(|(h, s)| (*h, f(s))).collect()
    };
    let counter = |f: fn(&ClassSummary) -> u64| -> Vec<(&str, u64)> {
        per_host.iter().map(|(h, s)| (*h, f(s))).collect()
    };
    checked_count(&format!("{name} count"), &counter(|s| s.count))?;
    checked_count(&format!("{name} errors"), &counter(|s| s.errors))?;
    checked_count(
        &format!("{name} histogram count"),
        &counter(|s| s.histogram.count()),
    )?;
    checked_count(
        &format!("{name} histogram sum_ns"),
        &counter(|s| s.histogram.sum_ns()),
    )?;
    finite_sum(&format!("{name} per_sec"), &field(|s| s.per_sec))?;
    finite_sum(
        &format!("{name} avg_latency_ms"),
        &field(|s| s.avg_latency_ms),
    )?;
    finite_sum(
        &format!("{name} avg_bytes × count"),
        &field(|s| s.avg_bytes * s.count as f64),
    )?;
    let summaries: Vec<&ClassSummary> = per_host.iter().map(|(_, s)| *s).collect();
    Ok(aggregate_class(&summaries))
}

/// One class over the hosts that saw I/O of it (unchecked: [`aggregate`] checks every
/// sum before).
pub fn aggregate_class(per_host: &[&ClassSummary]) -> AggregateClass {
    let mut histogram = LatencyHistogram::new();
    for s in per_host {
        histogram.merge(&s.histogram);
    }
    let count: u64 = per_host
        .iter()
        .fold(0u64, |acc, s| acc.saturating_add(s.count));
    let bytes: f64 = per_host.iter().map(|s| s.avg_bytes * s.count as f64).sum();
    let l = latency_summary(&histogram);
    AggregateClass {
        count,
        errors: per_host
            .iter()
            .fold(0u64, |acc, s| acc.saturating_add(s.errors)),
        per_sec: per_host.iter().map(|s| s.per_sec).sum(),
        avg_bytes: if count > 0 { bytes / count as f64 } else { 0.0 },
        avg_latency_ms: l.avg_ms,
        esrp_avg_latency_ms: per_host.iter().map(|s| s.avg_latency_ms).sum::<f64>()
            / per_host.len() as f64,
        p50_ms: l.p50_ms,
        p90_ms: l.p90_ms,
        p99_ms: l.p99_ms,
        p999_ms: l.p999_ms,
        max_ms: l.max_ms,
        histogram,
    }
}

/// One column of the ESRP tables: the row values of one server (or the aggregate).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EsrpColumn {
    /// Database Disks Transfers/sec.
    pub db_transfers_per_sec: f64,
    /// Database Disks Reads/sec.
    pub db_reads_per_sec: f64,
    /// Database Disks Writes/sec.
    pub db_writes_per_sec: f64,
    /// Average Database Disk Read Latency (ms).
    pub db_read_latency_ms: f64,
    /// Average Database Disk Write Latency (ms).
    pub db_write_latency_ms: f64,
    /// Log Disks Writes/sec.
    pub log_writes_per_sec: f64,
    /// Average Log Disk Write Latency (ms).
    pub log_write_latency_ms: f64,
}

/// The rows of the ESRP "Individual Server Performance" and "Aggregate Server
/// Performance" tables, in the documents' order and words.
pub const ESRP_ROWS: [&str; 7] = [
    "Database Disks Transfers/sec",
    "Database Disks Reads/sec",
    "Database Disks Writes/sec",
    "Average Database Disk Read Latency (ms)",
    "Average Database Disk Write Latency (ms)",
    "Log Disks Writes/sec",
    "Average Log Disk Write Latency (ms)",
];

impl EsrpColumn {
    /// One server's column from its I/O.
    pub fn of_host(io: &IoSummary) -> EsrpColumn {
        let reads = combined(io, DB_READ_CLASSES);
        let writes = combined(io, DB_WRITE_CLASSES);
        let log = combined(io, LOG_WRITE_CLASSES);
        EsrpColumn {
            db_transfers_per_sec: reads.per_sec + writes.per_sec,
            db_reads_per_sec: reads.per_sec,
            db_writes_per_sec: writes.per_sec,
            db_read_latency_ms: reads.avg_latency_ms,
            db_write_latency_ms: writes.avg_latency_ms,
            log_writes_per_sec: log.per_sec,
            log_write_latency_ms: log.avg_latency_ms,
        }
    }

    /// The aggregate column as the ESRP documents compute it: rates summed, latencies
    /// averaged over the servers.
    pub fn esrp_aggregate(columns: &[EsrpColumn]) -> EsrpColumn {
        let n = columns.len().max(1) as f64;
        let sum = |f: fn(&EsrpColumn) -> f64| columns.iter().map(f).sum::<f64>();
        EsrpColumn {
            db_transfers_per_sec: sum(|c| c.db_transfers_per_sec),
            db_reads_per_sec: sum(|c| c.db_reads_per_sec),
            db_writes_per_sec: sum(|c| c.db_writes_per_sec),
            db_read_latency_ms: sum(|c| c.db_read_latency_ms) / n,
            db_write_latency_ms: sum(|c| c.db_write_latency_ms) / n,
            log_writes_per_sec: sum(|c| c.log_writes_per_sec),
            log_write_latency_ms: sum(|c| c.log_write_latency_ms) / n,
        }
    }

    /// One server's column from its run: as [`EsrpColumn::of_host`], with Jetstress's
    /// headline "Achieved Transactional I/O per Second" as the transfers (for
    /// exchange2007 runs that is the database volumes' transfers).
    pub fn of_run(results: &RunResults) -> EsrpColumn {
        EsrpColumn {
            db_transfers_per_sec: results.achieved_transactional_iops,
            ..EsrpColumn::of_host(&results.totals.io)
        }
    }

    /// The values in [`ESRP_ROWS`] order.
    pub fn values(&self) -> [f64; 7] {
        [
            self.db_transfers_per_sec,
            self.db_reads_per_sec,
            self.db_writes_per_sec,
            self.db_read_latency_ms,
            self.db_write_latency_ms,
            self.log_writes_per_sec,
            self.log_write_latency_ms,
        ]
    }
}

impl AggregateResults {
    /// The ESRP columns of the complete hosts, with their names.
    pub fn esrp_columns(&self) -> Vec<(&str, EsrpColumn)> {
        self.hosts
            .iter()
            .filter(|h| h.incomplete.is_none())
            .map(|h| (h.host.as_str(), EsrpColumn::of_host(&h.io)))
            .collect()
    }
}
