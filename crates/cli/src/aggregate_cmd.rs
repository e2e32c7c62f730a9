//! `edbstress aggregate`: the run directories of one test on several hosts, merged
//! into one aggregate directory (results.json, report.html, summary.md, junit.xml).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use edbstress_report::aggregate::page::{prepare_aggregate_dir, write_aggregate};
use edbstress_report::aggregate::{
    AggregateResults, ESRP_ROWS, EsrpColumn, HostRun, MissingHost, aggregate,
};
use edbstress_report::{ToolInfo, Verdict, read_results, run_files};

use crate::common::CommandError;

/// Arguments of `edbstress aggregate`.
#[derive(Args, Debug)]
pub struct AggregateArgs {
    /// Run directories of one test run on several hosts, however they were collected.
    /// `NAME=DIR` names the host (default: the host name its results record).
    #[arg(value_name = "RUN_DIR", required = true)]
    runs: Vec<String>,
    /// Where to write the aggregate (default: edbstress-results/Aggregate_TEST_TIME).
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

/// Runs `edbstress aggregate`.
pub fn run(args: AggregateArgs) -> Result<ExitCode, CommandError> {
    let mut runs = Vec::new();
    let mut missing = Vec::new();
    // Each run directory once, however it is reached (a second path, `./`, a
    // symbolic link): the run id catches copies, the real path catches the rest.
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for arg in &args.runs {
        let (name, dir) = host_and_dir(arg);
        if let Ok(real) = std::fs::canonicalize(&dir) {
            if let Some((_, first)) = seen.iter().find(|(p, _)| *p == real) {
                return Err(CommandError::Usage(format!(
                    "the run directory {} is given twice ({first} and {arg}); give each \
                     host's run once (one run counted twice is not two servers)",
                    real.display()
                )));
            }
            seen.push((real, arg.as_str()));
        }
        let path = dir.join(run_files::RESULTS_JSON);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let results = read_results(&bytes).map_err(|e| {
                    CommandError::Usage(format!(
                        "{}: {e}; give run directories written by edbstress run",
                        path.display()
                    ))
                })?;
                runs.push(HostRun {
                    host: name.unwrap_or_else(|| results.host.hostname.clone()),
                    source: dir.display().to_string(),
                    results,
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.is_dir() => {
                missing.push(MissingHost {
                    host: name.unwrap_or_else(|| dir_name(&dir)),
                    source: dir.display().to_string(),
                    reason: no_results_reason(&dir),
                });
            }
            Err(e) => {
                return Err(CommandError::Usage(format!(
                    "cannot read {}: {e}; give the run directories (each holding a \
                     results.json) of one test run on several hosts",
                    path.display()
                )));
            }
        }
    }
    let tool = ToolInfo {
        name: "edbstress".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let result = aggregate(runs, missing, tool).map_err(|e| CommandError::Usage(e.0))?;
    let out = match &args.output {
        Some(dir) => dir.clone(),
        None => PathBuf::from("edbstress-results").join(format!(
            "Aggregate_{}_{}",
            result.test_type.label().replace(' ', ""),
            chrono::Local::now().format("%Y_%m_%d_%H_%M_%S")
        )),
    };
    prepare_aggregate_dir(&out).map_err(CommandError::Usage)?;
    write_aggregate(&out, &result)?;
    print_summary(&result, &out);
    Ok(match result.overall_result {
        Verdict::Pass => ExitCode::SUCCESS,
        Verdict::Fail => ExitCode::from(1),
    })
}

/// `NAME=DIR` (when the whole argument is not itself a directory) or `DIR`.
fn host_and_dir(arg: &str) -> (Option<String>, PathBuf) {
    if !Path::new(arg).exists() {
        if let Some((name, dir)) = arg.split_once('=') {
            if !name.is_empty() {
                return (Some(name.to_string()), PathBuf::from(dir));
            }
        }
    }
    (None, PathBuf::from(arg))
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Why a run directory has no results: the last line of its test log, when it has one.
fn no_results_reason(dir: &Path) -> String {
    let last = std::fs::read_to_string(dir.join(run_files::TEST_LOG))
        .ok()
        .and_then(|log| {
            log.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        });
    match last {
        Some(line) => format!(
            "no results.json: its run did not finish (killed, or the host was lost); the last \
             line of its test.log: {line}"
        ),
        None => "no results.json and no test.log: its run did not start or its directory was \
                 not copied back"
            .into(),
    }
}

pub fn print_summary(a: &AggregateResults, out: &Path) {
    outln!(
        "{} test on {} servers: {}",
        a.test_type.label(),
        a.hosts.len(),
        a.overall_result.label()
    );
    for h in &a.hosts {
        let state = match (&h.incomplete, h.overall_result) {
            (Some(why), _) => format!("INCOMPLETE: {why}"),
            (None, Verdict::Pass) => "Pass".into(),
            (None, Verdict::Fail) => format!(
                "Fail: {}",
                h.failed_criteria
                    .iter()
                    .map(|c| c.describe())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        outln!("  {:<24} {state}", h.host);
    }
    let columns: Vec<EsrpColumn> = a.esrp_columns().into_iter().map(|(_, c)| c).collect();
    let all = EsrpColumn::esrp_aggregate(&columns);
    outln!("  Aggregate Server Performance (rates summed, latencies averaged over servers)");
    for (row, v) in ESRP_ROWS.iter().zip(all.values()) {
        outln!("    {row:<44} {v:>12.3}");
    }
    outln!(
        "  achieved transactional IOPS: {:.1}{}",
        a.totals.achieved_transactional_iops,
        a.totals
            .target_transactional_iops
            .map_or(String::new(), |t| format!(" (target {t:.1})"))
    );
    for w in &a.warnings {
        outln!("  warning: {w}");
    }
    outln!("  report: {}", out.join(run_files::REPORT_HTML).display());
}
