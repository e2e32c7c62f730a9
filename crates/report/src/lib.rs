//! Results of edbstress runs and the files made from them. It owns the results model
//! (`results.json`, schema version [`model::SCHEMA_VERSION`], documented in
//! `docs/results-schema.md`), the summaries of I/O counters (rates, averages,
//! percentiles), the interval time series, and the exporters that write them
//! (`results.json`, `samples.csv`, `report.html`, `summary.md`, `junit.xml`), every file
//! written whole under a temporary name and renamed, the SVG charts of the report, the
//! comparison of several runs (`edbstress compare`) and its regression gate, the
//! workload shape of a run (`shape`: how Exchange-like its I/O was, beside published
//! Jetstress figures), whether a run's databases are as large as its mailbox profile's
//! (`sizing`), the ESRP-style solution document of a campaign (`solution`: its
//! checks, summary figures, HTML and Markdown), and a parameter sweep's results
//! (`sweep.json`, `sweep.csv`, `sweep.html` with the parameter on the x axis, the best
//! point).
//!
//! It must not run tests, touch databases or decide pass/fail: the workload crate
//! measures and judges, this crate records and presents what it was given.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aggregate;
pub mod charts;
pub mod compare;
pub mod export;
pub mod model;
pub mod regression;
pub mod shape;
pub mod sizing;
pub mod solution;
pub mod summary;
pub mod sweep;
pub mod text;
pub mod timeseries;

pub use export::{
    ExportError, Exporter, HtmlReport, JunitXml, MarkdownSummary, ResultsJson, SamplesCsv,
    is_edbstress_output, read_results, read_test_log, standard_exporters, write_atomically,
};
pub use model::*;
