//! `edbstress report RUN_DIR`: renders a run directory's results again (after an
//! upgrade, or in another format), and `edbstress compare RUN_DIR RUN_DIR…` with its
//! regression gate (exit code 1 when a run is worse than the first by more than the
//! limits given).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use edbstress_io::IoClass;
use edbstress_report::aggregate::{AGGREGATE_KIND, AggregateResults, page};
use edbstress_report::compare::RunComparison;
use edbstress_report::regression::{self, ClassLimit, RegressionLimits};
use edbstress_report::run_files;
use edbstress_report::{
    Exporter, HtmlReport, JunitXml, MarkdownSummary, ResultsJson, RunResults, is_edbstress_output,
    read_results, read_test_log, write_atomically,
};

use crate::common::CommandError;

/// Output formats of `report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The HTML report (report.html).
    Html,
    /// The Markdown summary (summary.md).
    Md,
    /// The results (results.json), rewritten in this version's layout.
    Json,
    /// JUnit XML, one test case per criterion (junit.xml).
    Junit,
}

/// Arguments of `edbstress report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run directory (holding results.json, and test.log for the HTML report).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// What to write.
    #[arg(long, value_enum, default_value = "html")]
    pub format: ReportFormat,
    /// Write here instead of into the run directory ("-": standard output). An existing
    /// file is replaced only if edbstress wrote it.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Arguments of `edbstress compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Run directories; the first is the baseline the others are compared with. A
    /// sweep directory stands for every finished run of the sweep.
    #[arg(value_name = "RUN_DIR", num_args = 1.., required = true)]
    pub run_dirs: Vec<PathBuf>,
    /// Also write an HTML comparison with overlaid charts to this file (an existing
    /// file is replaced only if edbstress wrote it).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Regression gate: fail (exit code 1) when a run's achieved transactional IOPS or
    /// an I/O class's rate is this many percent under the first run's; CLASS=PCT sets
    /// one class's limit (e.g. log_write=2). Repeatable.
    #[arg(long, value_name = "[CLASS=]PCT", value_parser = parse_class_limit,
        allow_hyphen_values = true, help_heading = "Regression gate")]
    pub max_iops_drop: Vec<(Option<IoClass>, f64)>,
    /// Regression gate: fail when an I/O class's 99th-percentile latency is this many
    /// percent over the first run's; CLASS=PCT for one class. Repeatable.
    #[arg(long, value_name = "[CLASS=]PCT", value_parser = parse_class_limit,
        allow_hyphen_values = true, help_heading = "Regression gate")]
    pub max_p99_rise: Vec<(Option<IoClass>, f64)>,
    /// Regression gate: fail when an I/O class's average latency is this many percent
    /// over the first run's; CLASS=PCT for one class. Repeatable.
    #[arg(long, value_name = "[CLASS=]PCT", value_parser = parse_class_limit,
        allow_hyphen_values = true, help_heading = "Regression gate")]
    pub max_avg_latency_rise: Vec<(Option<IoClass>, f64)>,
    /// Regression gate: latencies at or under this many milliseconds never count as a
    /// regression [default: 0].
    #[arg(long, value_name = "MS", value_parser = parse_floor_ms,
        allow_hyphen_values = true, help_heading = "Regression gate")]
    pub latency_floor: Option<f64>,
    /// Regression gate: judge only these I/O classes (repeatable) [default: every class
    /// the first run measured, the engine's bookkeeping left out].
    #[arg(long = "class", value_name = "CLASS", value_parser = parse_io_class, help_heading = "Regression gate")]
    pub classes: Vec<IoClass>,
}

/// The I/O classes a limit can name, as results.json spells them.
fn class_names() -> String {
    IoClass::ALL
        .iter()
        .filter(|c| c.is_reported())
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// An I/O class by its results.json name (`db_read`).
fn parse_io_class(s: &str) -> Result<IoClass, String> {
    IoClass::ALL
        .into_iter()
        .filter(|c| c.is_reported())
        .find(|c| c.name() == s.trim())
        .ok_or_else(|| format!("'{s}' is not an I/O class; use one of {}", class_names()))
}

/// `PCT` (every class) or `CLASS=PCT` (one class): a percentage from 0 up.
fn parse_class_limit(s: &str) -> Result<(Option<IoClass>, f64), String> {
    let (class, pct) = match s.split_once('=') {
        Some((class, pct)) => (Some(parse_io_class(class)?), pct),
        None => (None, s),
    };
    let text = pct.trim().trim_end_matches('%').trim();
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok((class, v)),
        _ => Err(format!(
            "'{pct}' is not a percentage; give a number from 0 up, e.g. 10 (or db_read=10 for one class)"
        )),
    }
}

/// A latency floor in milliseconds, from 0 up.
fn parse_floor_ms(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a latency in milliseconds; give a number from 0 up, e.g. 0.5"
        )),
    }
}

impl CompareArgs {
    /// The gate's limits as given.
    fn limits(&self) -> RegressionLimits {
        let limit = |given: &[(Option<IoClass>, f64)]| {
            let mut l = ClassLimit::default();
            for (class, pct) in given {
                match class {
                    Some(c) => {
                        l.per_class.insert(*c, *pct);
                    }
                    None => l.all = Some(*pct),
                }
            }
            l
        };
        RegressionLimits {
            max_iops_drop_pct: limit(&self.max_iops_drop),
            max_p99_rise_pct: limit(&self.max_p99_rise),
            max_avg_latency_rise_pct: limit(&self.max_avg_latency_rise),
            latency_floor_ms: self.latency_floor.unwrap_or(0.0),
            classes: self.classes.clone(),
        }
    }
}

/// The aggregate in `dir` (written by `edbstress aggregate`), or None when its
/// results.json is not an aggregate's.
fn load_aggregate(dir: &Path) -> Result<Option<AggregateResults>, CommandError> {
    let path = dir.join(run_files::RESULTS_JSON);
    let Ok(bytes) = std::fs::read(&path) else {
        return Ok(None);
    };
    let kind = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string));
    if kind.as_deref() != Some(AGGREGATE_KIND) {
        return Ok(None);
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        CommandError::Usage(format!(
            "{} is an aggregate this version cannot read: {e}; aggregate its hosts' run \
             directories again with `edbstress aggregate`",
            path.display()
        ))
    })
}

/// Reads `dir/results.json`, checking it is an edbstress results file of a schema this
/// version reads.
pub fn load_run(dir: &Path) -> Result<RunResults, CommandError> {
    if let Some(a) = load_aggregate(dir)? {
        let sources: Vec<&str> = a.hosts.iter().map(|h| h.source.as_str()).collect();
        return Err(CommandError::Usage(format!(
            "{} is an aggregate of {} servers (written by `edbstress aggregate`), not one \
             run: compare its hosts' run directories ({}), or render it with `edbstress \
             report {}`",
            dir.display(),
            a.hosts.len(),
            sources.join(" "),
            dir.display()
        )));
    }
    let path = dir.join(run_files::RESULTS_JSON);
    let bytes = std::fs::read(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CommandError::Usage(format!(
                "{} has no results.json: not an edbstress run directory, or the run did not finish (results.json is written last)",
                dir.display()
            ))
        } else {
            CommandError::Usage(format!("cannot read {}: {e}", path.display()))
        }
    })?;
    read_results(&bytes).map_err(|e| {
        CommandError::Usage(format!(
            "{} is not edbstress results this version can read: {e}",
            path.display()
        ))
    })
}

/// Writes `bytes` to `path` atomically, refusing to replace a file edbstress did not
/// write.
fn write_ours(path: &Path, bytes: &[u8]) -> Result<(), CommandError> {
    if let Ok(existing) = std::fs::read(path) {
        if !is_edbstress_output(&existing) {
            return Err(CommandError::Usage(format!(
                "{} exists and was not written by edbstress; choose another file or remove it",
                path.display()
            )));
        }
    } else if path.exists() {
        return Err(CommandError::Usage(format!(
            "{} exists and cannot be read; choose another file",
            path.display()
        )));
    }
    write_atomically(path, bytes)?;
    Ok(())
}

/// An aggregate's file in `format`: its bytes and its name in the aggregate directory.
fn render_aggregate(
    a: &AggregateResults,
    format: ReportFormat,
) -> Result<(Vec<u8>, &'static str), CommandError> {
    Ok(match format {
        ReportFormat::Html => (page::render_html(a).into_bytes(), run_files::REPORT_HTML),
        ReportFormat::Md => (page::render_markdown(a).into_bytes(), run_files::SUMMARY_MD),
        ReportFormat::Json => (page::render_json(a)?, run_files::RESULTS_JSON),
        ReportFormat::Junit => (page::render_junit(a).into_bytes(), run_files::JUNIT_XML),
    })
}

/// Runs `edbstress report` (of a run directory or an aggregate directory).
pub fn run(args: ReportArgs) -> Result<ExitCode, CommandError> {
    let (bytes, file_name) = match load_aggregate(&args.run_dir)? {
        Some(a) => render_aggregate(&a, args.format)?,
        None => {
            let results = load_run(&args.run_dir)?;
            let exporter: Box<dyn Exporter> = match args.format {
                ReportFormat::Html => {
                    let log = read_test_log(&args.run_dir)?;
                    Box::new(HtmlReport::with_test_log(log))
                }
                ReportFormat::Md => Box::new(MarkdownSummary),
                ReportFormat::Json => Box::new(ResultsJson),
                ReportFormat::Junit => Box::new(JunitXml),
            };
            (exporter.render(&results)?, exporter.file_name())
        }
    };
    match &args.output {
        Some(p) if p.as_os_str() == "-" => {
            crate::stdout::write_all(&bytes);
        }
        Some(p) => {
            write_ours(p, &bytes)?;
            eprintln!("wrote {}", p.display());
        }
        None => {
            let p = args.run_dir.join(file_name);
            write_ours(&p, &bytes)?;
            eprintln!("wrote {}", p.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The finished runs of the sweep in `dir` (labelled by their point), None when `dir`
/// holds no sweep.json.
fn sweep_runs(dir: &Path) -> Result<Option<Vec<(String, PathBuf)>>, CommandError> {
    let path = dir.join(edbstress_report::sweep::SWEEP_JSON);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CommandError::Usage(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let sweep = edbstress_report::sweep::read_sweep(&bytes)
        .map_err(|e| CommandError::Usage(format!("{}: {e}", path.display())))?;
    Ok(Some(
        sweep
            .run_dirs()
            .into_iter()
            .map(|(label, rel)| (label, dir.join(rel)))
            .collect(),
    ))
}

/// Runs `edbstress compare`.
pub fn compare(args: CompareArgs) -> Result<ExitCode, CommandError> {
    let mut runs = Vec::new();
    for dir in &args.run_dirs {
        match sweep_runs(dir)? {
            Some(points) => {
                for (label, run_dir) in points {
                    runs.push((label, load_run(&run_dir)?));
                }
            }
            None => runs.push((dir.display().to_string(), load_run(dir)?)),
        }
    }
    if runs.len() < 2 {
        return Err(CommandError::Usage(format!(
            "compare needs at least two runs, and {} gave {}; give more run directories \
             or a sweep with more finished runs",
            if args.run_dirs.len() == 1 {
                "this"
            } else {
                "these"
            },
            runs.len()
        )));
    }
    let limits = args.limits();
    if !limits.any() && (args.latency_floor.is_some() || !args.classes.is_empty()) {
        return Err(CommandError::Usage(
            "--latency-floor and --class shape the regression gate, which needs a limit: \
             add --max-iops-drop, --max-p99-rise or --max-avg-latency-rise"
                .into(),
        ));
    }
    let comparison = RunComparison::new(runs);
    out!("{}", comparison.to_text());
    if let Some(path) = &args.html {
        write_ours(path, comparison.to_html().as_bytes())?;
        eprintln!("wrote {}", path.display());
    }
    if !limits.any() {
        return Ok(ExitCode::SUCCESS);
    }
    let gate = regression::judge(&comparison, &limits);
    println!();
    print!("{}", gate.to_text(&comparison));
    Ok(if gate.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
