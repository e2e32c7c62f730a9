//! `samples.csv`: the time series, one row per interval, scope and counter family.
//!
//! Columns are fixed (see `docs/results-schema.md`); a row fills the columns of its
//! family and leaves the others empty, so a spreadsheet filter on `family` shows one
//! table.

use super::{ExportError, Exporter};
use crate::model::{RunResults, Sample};

/// Writes `samples.csv`.
pub struct SamplesCsv;

type Column = (&'static str, fn(&Sample) -> Option<String>);

fn f(v: Option<f64>) -> Option<String> {
    v.map(|v| format!("{v:.3}"))
}

/// The columns, in order.
pub const COLUMNS: &[Column] = &[
    ("interval", |s| Some(s.interval.to_string())),
    ("elapsed_s", |s| Some(format!("{:.1}", s.elapsed_s))),
    ("timestamp", |s| Some(s.timestamp.clone())),
    ("scope", |s| Some(s.scope.clone())),
    ("family", |s| Some(s.family.clone())),
    ("device", |s| s.device.clone()),
    ("per_sec", |s| f(s.per_sec)),
    ("mb_per_sec", |s| f(s.mb_per_sec)),
    ("avg_bytes", |s| f(s.avg_bytes)),
    ("avg_latency_ms", |s| f(s.avg_latency_ms)),
    ("p99_ms", |s| f(s.p99_ms)),
    ("max_ms", |s| f(s.max_ms)),
    ("errors", |s| s.errors.map(|v| v.to_string())),
    ("cache_mb", |s| f(s.cache_mb)),
    ("cache_hit_pct", |s| f(s.cache_hit_pct)),
    ("page_fault_stalls_per_sec", |s| {
        f(s.page_fault_stalls_per_sec)
    }),
    ("checkpoint_depth_mb", |s| f(s.checkpoint_depth_mb)),
    ("log_generation", |s| {
        s.log_generation.map(|v| v.to_string())
    }),
    ("cpu_pct", |s| f(s.cpu_pct)),
    ("available_memory_mb", |s| f(s.available_memory_mb)),
    ("page_faults_per_sec", |s| f(s.page_faults_per_sec)),
    ("reads_per_sec", |s| f(s.reads_per_sec)),
    ("writes_per_sec", |s| f(s.writes_per_sec)),
    ("bytes_per_read", |s| f(s.bytes_per_read)),
    ("bytes_per_write", |s| f(s.bytes_per_write)),
    ("avg_read_latency_ms", |s| f(s.avg_read_latency_ms)),
    ("avg_write_latency_ms", |s| f(s.avg_write_latency_ms)),
];

/// The CSV text of `samples`.
pub fn render_samples(samples: &[Sample]) -> Result<Vec<u8>, ExportError> {
    let encode = |e: csv::Error| ExportError::Encode {
        what: crate::model::run_files::SAMPLES_CSV,
        message: e.to_string(),
    };
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS.iter().map(|(name, _)| *name))
        .map_err(encode)?;
    for s in samples {
        w.write_record(COLUMNS.iter().map(|(_, get)| get(s).unwrap_or_default()))
            .map_err(encode)?;
    }
    w.into_inner().map_err(|e| ExportError::Encode {
        what: crate::model::run_files::SAMPLES_CSV,
        message: e.to_string(),
    })
}

impl Exporter for SamplesCsv {
    fn file_name(&self) -> &'static str {
        crate::model::run_files::SAMPLES_CSV
    }

    fn render(&self, results: &RunResults) -> Result<Vec<u8>, ExportError> {
        render_samples(&results.samples)
    }
}
