//! `results.json`: the whole results model, pretty-printed.

use super::{ExportError, Exporter};
use crate::model::RunResults;

/// Writes `results.json`.
pub struct ResultsJson;

impl Exporter for ResultsJson {
    fn file_name(&self) -> &'static str {
        crate::model::run_files::RESULTS_JSON
    }

    fn render(&self, results: &RunResults) -> Result<Vec<u8>, ExportError> {
        let mut bytes = serde_json::to_vec_pretty(results).map_err(|e| ExportError::Encode {
            what: crate::model::run_files::RESULTS_JSON,
            message: e.to_string(),
        })?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// Reads a `results.json`, checking its schema version.
pub fn read_results(bytes: &[u8]) -> Result<RunResults, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not valid JSON: {e}"))?;
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if v == u64::from(crate::model::SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "schema_version {v} is not supported by this edbstress (it reads {})",
                crate::model::SCHEMA_VERSION
            ));
        }
        None => return Err("no schema_version: not an edbstress results.json".into()),
    }
    let mut results: RunResults =
        serde_json::from_value(value).map_err(|e| format!("does not match schema: {e}"))?;
    // What is shown is derived from the figures, never taken on the file's word.
    results.rejudge();
    Ok(results)
}
