//! A parameter sweep's results (`sweep.json`, documented in `docs/results-schema.md`):
//! the grid of points, every run of every point with its main figures, and what is
//! made from them — `sweep.csv` ([`table`]), `sweep.html` with the parameter on the x
//! axis ([`page`]) and the best point under a stated rule ([`best`]).
//!
//! Pure functions over what the sweep driver (the solution crate) recorded: nothing
//! here runs a command or a test.

pub mod best;
pub mod page;
pub mod table;

use std::path::Path;

use edbstress_io::IoClass;
use serde::{Deserialize, Serialize};

use crate::export::{ExportError, write_atomically};
use crate::model::{RunResults, ToolInfo, Verdict};

/// Schema version of `sweep.json`.
pub const SWEEP_SCHEMA_VERSION: u32 = 1;

/// The `kind` of `sweep.json`, telling it apart from a run's or an aggregate's results.
pub const SWEEP_KIND: &str = "sweep";

/// The sweep's state and results, written last (its presence means a sweep to resume).
pub const SWEEP_JSON: &str = "sweep.json";
/// One row per run of every point.
pub const SWEEP_CSV: &str = "sweep.csv";
/// The charts over the swept parameter.
pub const SWEEP_HTML: &str = "sweep.html";

/// Bytes of the MB in MB/s (as the run results count them).
const MB: f64 = 1_048_576.0;

/// Everything a sweep recorded: `sweep.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResults {
    /// [`SWEEP_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always [`SWEEP_KIND`].
    pub kind: String,
    /// The tool.
    pub tool: ToolInfo,
    /// The sweep's name (from its file, else the file's name).
    pub name: String,
    /// The sweep file as given, verbatim: a resumed sweep must be made from the same.
    pub config_text: String,
    /// The axes, in the order written.
    pub axes: Vec<SweepAxis>,
    /// The axis on the charts' x axis.
    pub x_axis: String,
    /// Runs of each point.
    pub repeats: u32,
    /// "as-written" or "shuffled".
    pub order: String,
    /// Seed of the shuffle (recorded also for "as-written", where it is unused).
    pub seed: u64,
    /// "fresh" (databases removed before each point) or "keep".
    pub databases: String,
    /// Name of the measured column, when the sweep has a `measure` command.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub measure_name: Option<String>,
    /// When the sweep started (RFC 3339).
    pub started_at: String,
    /// When this file was last written (RFC 3339).
    pub updated_at: String,
    /// "running", "complete", "interrupted" or "stopped".
    pub state: String,
    /// Why the sweep stopped before the end (a failing command, …).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stop_reason: Option<String>,
    /// The points of the grid, in the order written.
    pub points: Vec<SweepPoint>,
    /// Every run, in the order they are (or were) run.
    pub runs: Vec<PointRun>,
}

/// One axis: a run setting or a storage parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepAxis {
    /// Its name: a key of the run configuration, or any name for a storage axis.
    pub name: String,
    /// "run" (a run setting) or "storage" (only passed to the commands).
    pub kind: String,
    /// Its values as written.
    pub values: Vec<String>,
}

/// One point of the grid: one value of every axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// "p01", "p02" …, in the order written.
    pub id: String,
    /// The value of each axis, in the order of [`SweepResults::axes`].
    pub values: Vec<String>,
}

/// One run of one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointRun {
    /// Index of the point in [`SweepResults::points`].
    pub point: usize,
    /// Repeat number, from 1.
    pub repeat: u32,
    /// "pending", "done", "interrupted" or "failed".
    pub status: String,
    /// The point's directory, relative to the sweep directory ("points/p01-r1").
    pub dir: String,
    /// The run directory, relative to the sweep directory.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub run_dir: Option<String>,
    /// The run's main figures.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub figures: Option<PointFigures>,
    /// The measure command's output (its last line).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub measured: Option<String>,
    /// What went wrong (a failing command, a run that ended with an error).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// Figures of one I/O class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassFigures {
    /// I/Os per second.
    pub per_sec: f64,
    /// MB (2^20 bytes) per second.
    pub mb_per_sec: f64,
    /// Average latency, ms.
    pub avg_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// The main figures of one run, taken from its `results.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointFigures {
    /// The run's verdict.
    pub verdict: Verdict,
    /// The run was stopped early.
    pub aborted: bool,
    /// Transactional database reads/s + writes/s.
    pub transactional_iops: f64,
    /// Transactional database reads.
    pub db_read: ClassFigures,
    /// Transactional database writes.
    pub db_write: ClassFigures,
    /// Log writes.
    pub log_write: ClassFigures,
    /// The database read average latency limit, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub db_read_avg_limit_ms: Option<f64>,
    /// The log write average latency limit, ms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub log_write_avg_limit_ms: Option<f64>,
    /// The criteria that failed, described.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub failed: Vec<String>,
}

impl PointFigures {
    /// The figures of a run.
    pub fn from_results(r: &RunResults) -> PointFigures {
        let class = |c: IoClass| {
            r.totals
                .io
                .get(&c)
                .map(|s| ClassFigures {
                    per_sec: s.per_sec,
                    mb_per_sec: s.per_sec * s.avg_bytes / MB,
                    avg_ms: s.avg_latency_ms,
                    p99_ms: s.p99_ms,
                })
                .unwrap_or_default()
        };
        let limit = |key: &str| {
            r.criteria
                .iter()
                .find(|c| c.key == key)
                .map(|c| c.threshold)
        };
        PointFigures {
            verdict: r.overall_result,
            aborted: r.aborted,
            transactional_iops: r.achieved_transactional_iops,
            db_read: class(IoClass::DbRead),
            db_write: class(IoClass::DbWrite),
            log_write: class(IoClass::LogWrite),
            db_read_avg_limit_ms: limit("db_read_avg_latency"),
            log_write_avg_limit_ms: limit("log_write_avg_latency"),
            failed: r.failed_criteria.iter().map(|c| c.describe()).collect(),
        }
    }
}

impl SweepResults {
    /// The value of `axis` at `point`, if both exist.
    pub fn value(&self, point: usize, axis: &str) -> Option<&str> {
        let a = self.axes.iter().position(|a| a.name == axis)?;
        self.points.get(point)?.values.get(a).map(String::as_str)
    }

    /// "compression=lzo, threads=8": the point's values.
    pub fn describe_point(&self, point: usize) -> String {
        let Some(p) = self.points.get(point) else {
            return format!("point {point}");
        };
        self.axes
            .iter()
            .zip(&p.values)
            .map(|(a, v)| format!("{}={v}", a.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The finished runs (status "done", with figures).
    pub fn done(&self) -> impl Iterator<Item = (&PointRun, &PointFigures)> {
        self.runs
            .iter()
            .filter(|r| r.status == "done")
            .filter_map(|r| r.figures.as_ref().map(|f| (r, f)))
    }

    /// The run directories of the finished runs, each with a label naming its point
    /// and repeat (what `edbstress compare` takes from a sweep).
    pub fn run_dirs(&self) -> Vec<(String, String)> {
        self.done()
            .filter_map(|(r, _)| {
                r.run_dir.as_ref().map(|d| {
                    (
                        format!("{} #{}", self.describe_point(r.point), r.repeat),
                        d.clone(),
                    )
                })
            })
            .collect()
    }
}

/// Reads `sweep.json`, checking its kind and schema version.
pub fn read_sweep(bytes: &[u8]) -> Result<SweepResults, String> {
    let v: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("kind").and_then(|k| k.as_str()) != Some(SWEEP_KIND) {
        return Err("not an edbstress sweep.json (no \"kind\": \"sweep\")".into());
    }
    let version = v.get("schema_version").and_then(|k| k.as_u64());
    if version != Some(u64::from(SWEEP_SCHEMA_VERSION)) {
        return Err(format!(
            "schema version {version:?}; this edbstress reads version {SWEEP_SCHEMA_VERSION}"
        ));
    }
    serde_json::from_value(v).map_err(|e| format!("malformed: {e}"))
}

/// Writes `sweep.html`, `sweep.csv` and `sweep.json` into `dir`, each under a temporary
/// name then renamed; `sweep.json` last, so its state describes files already written.
pub fn write_sweep(dir: &Path, s: &SweepResults) -> Result<(), ExportError> {
    let mut json = serde_json::to_vec_pretty(s).map_err(|e| ExportError::Encode {
        what: SWEEP_JSON,
        message: e.to_string(),
    })?;
    json.push(b'\n');
    write_atomically(&dir.join(SWEEP_HTML), page::render(s).as_bytes())?;
    write_atomically(&dir.join(SWEEP_CSV), table::render_csv(s).as_bytes())?;
    write_atomically(&dir.join(SWEEP_JSON), &json)?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
