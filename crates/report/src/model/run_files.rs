//! The names of the files a run writes into its run directory: every crate that
//! writes, reads or cleans a run directory names them through these constants.

/// The results model ([`crate::RunResults`]), as JSON.
pub const RESULTS_JSON: &str = "results.json";
/// The test log, line by line as the run went.
pub const TEST_LOG: &str = "test.log";
/// The run's effective configuration.
pub const CONFIG_TOML: &str = "config.toml";
/// The time series of samples, as CSV.
pub const SAMPLES_CSV: &str = "samples.csv";
/// The HTML report.
pub const REPORT_HTML: &str = "report.html";
/// The Markdown summary.
pub const SUMMARY_MD: &str = "summary.md";
/// The JUnit XML verdict.
pub const JUNIT_XML: &str = "junit.xml";

/// Every file above, in the order a listing shows them.
pub const ALL: &[&str] = &[
    RESULTS_JSON,
    TEST_LOG,
    CONFIG_TOML,
    SAMPLES_CSV,
    REPORT_HTML,
    SUMMARY_MD,
    JUNIT_XML,
];
