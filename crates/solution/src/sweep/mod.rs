//! `edbstress sweep`: an ordinary `edbstress run` at every point of a grid of run
//! settings and storage parameters, the storage re-configured between points by the
//! user's commands.
//!
//! The sweep directory holds `sweep.json` (the plan and every finished run's figures,
//! rewritten after each run), `sweep.csv`, `sweep.html`, and `points/pNN-rR/` per run:
//! the point's `run.toml`, the commands' logs, the run's output and its run directory.
//! Running the same sweep file into the same directory resumes: finished runs are
//! kept, an unfinished one's directory is set aside (`.attempt-N`) and run again.
//! Running a changed file there keeps the runs of points whose settings are unchanged
//! and runs the rest (see `revise`), or refuses when a sweep-wide setting changed.
//! Ctrl-C passes one SIGINT to the run, which writes its results marked aborted; the
//! teardown runs and the sweep files are written, so a partial sweep is a valid one.

mod child;
pub mod file;
mod revise;
pub mod template;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use edbstress_report::sweep::{
    PointFigures, PointRun, SWEEP_JSON, SWEEP_KIND, SWEEP_SCHEMA_VERSION, SweepAxis, SweepPoint,
    SweepResults, read_sweep, write_sweep,
};
use edbstress_report::{ToolInfo, read_results, run_files};
use rand::SeedableRng;
use rand::seq::SliceRandom;

use crate::process_group::{Ending, OnStop};

pub use file::{PlanError, SweepPlan, TEMPLATE};

/// Exit code of an `edbstress run` stopped by Ctrl-C.
const RUN_INTERRUPTED: i32 = 130;

/// How to run a sweep.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// The sweep file.
    pub file: PathBuf,
    /// The sweep directory (created, or resumed).
    pub output: PathBuf,
    /// The edbstress binary each point runs.
    pub edbstress: PathBuf,
}

/// Why a sweep could not start, or stopped.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SweepError(pub String);

/// What a sweep produced.
#[derive(Debug)]
pub struct SweepOutcome {
    /// The results (also in the sweep directory).
    pub results: SweepResults,
    /// The sweep directory.
    pub dir: PathBuf,
    /// Stopped by Ctrl-C before the end.
    pub interrupted: bool,
    /// Runs already finished when this invocation started (a resumed sweep).
    pub resumed: usize,
}

fn now() -> String {
    chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A new sweep's results: the plan, every run pending.
fn plan_results(plan: &SweepPlan, seed: u64) -> SweepResults {
    let file = &plan.file;
    let points: Vec<SweepPoint> = plan
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| SweepPoint {
            id: format!("p{:02}", i + 1),
            values: p
                .iter()
                .zip(&plan.values)
                .map(|(&v, values)| values[v].clone())
                .collect(),
        })
        .collect();
    let mut order: Vec<(usize, u32)> = (0..points.len())
        .flat_map(|p| (1..=plan.repeats).map(move |r| (p, r)))
        .collect();
    if plan.shuffled {
        order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    }
    let runs = order
        .into_iter()
        .map(|(point, repeat)| PointRun {
            point,
            repeat,
            status: "pending".into(),
            dir: format!("points/{}-r{repeat}", points[point].id),
            run_dir: None,
            figures: None,
            measured: None,
            error: None,
        })
        .collect();
    SweepResults {
        schema_version: SWEEP_SCHEMA_VERSION,
        kind: SWEEP_KIND.into(),
        tool: ToolInfo {
            name: "edbstress".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        name: file.sweep.name.clone().unwrap_or_else(|| "sweep".into()),
        config_text: plan.text.clone(),
        axes: file
            .axes
            .iter()
            .zip(&plan.values)
            .map(|(a, v)| SweepAxis {
                name: a.name.clone(),
                kind: if a.storage { "storage" } else { "run" }.into(),
                values: v.clone(),
            })
            .collect(),
        x_axis: plan.x_axis.clone(),
        repeats: plan.repeats,
        order: if plan.shuffled {
            "shuffled"
        } else {
            "as-written"
        }
        .into(),
        seed,
        databases: if plan.fresh { "fresh" } else { "keep" }.into(),
        measure_name: file.commands.measure.as_ref().map(|_| {
            file.commands
                .measure_name
                .clone()
                .unwrap_or_else(|| "measured".into())
        }),
        started_at: now(),
        updated_at: now(),
        state: "running".into(),
        stop_reason: None,
        points,
        runs,
    }
}

/// Whether `sweep --config file --output out` would go on from what `out` holds: it
/// holds a sweep made from the same file, one in which no run finished (a file fixed
/// after its first point was refused starts the sweep again there), or one of a file
/// changed only in its points (the unchanged points' runs are kept).
pub fn resumable(file: &Path, out: &Path) -> bool {
    let Ok(plan) = SweepPlan::load(file) else {
        return false;
    };
    std::fs::read(out.join(SWEEP_JSON))
        .ok()
        .and_then(|b| read_sweep(&b).ok())
        .is_some_and(|s| {
            s.config_text == plan.text
                || finished(&s) == 0
                || revise::revise(&s, &plan, 1, out).is_ok()
        })
}

fn finished(s: &SweepResults) -> usize {
    s.runs.iter().filter(|r| r.status == "done").count()
}

/// The sweep in `out`: resumed when it holds one made from the same file, started
/// again when it holds one of another file in which no run finished (nothing is lost:
/// the earlier attempts' point directories are set aside as they are redone), new when
/// `out` is missing or empty; anything else is refused.
fn open_sweep(
    plan: &SweepPlan,
    out: &Path,
    events: &(dyn Fn(&str) + Sync),
) -> Result<Opened, SweepError> {
    let err = |s: String| SweepError(s);
    match std::fs::read(out.join(SWEEP_JSON)) {
        Ok(bytes) => {
            let mut s = read_sweep(&bytes).map_err(|e| {
                err(format!(
                    "{}/sweep.json cannot be resumed: {e}; choose another --output",
                    out.display()
                ))
            })?;
            if s.config_text != plan.text && finished(&s) == 0 {
                events(&format!(
                    "the sweep file changed and no run of the sweep in {} had finished: \
                     starting it again there with this file",
                    out.display()
                ));
                return Ok(Opened {
                    results: plan_results(plan, new_seed(plan)),
                    finished: 0,
                    restarted: true,
                });
            }
            if s.config_text != plan.text {
                let revised = revise::revise(&s, plan, new_seed(plan), out)?;
                let aside = revise::set_aside_superseded(out, &s, &revised.superseded)?;
                events(&format!(
                    "the sweep file changed after {} run(s) of the sweep in {} finished: {} \
                     kept (their settings are unchanged), {} to run; the earlier file's sweep \
                     and its {} other run(s) are kept in {aside}",
                    finished(&s),
                    out.display(),
                    revised.kept,
                    revised.results.runs.len() - revised.kept,
                    revised.superseded.len()
                ));
                for line in &revised.lines {
                    events(line);
                }
                return Ok(Opened {
                    results: revised.results,
                    finished: revised.kept,
                    restarted: true,
                });
            }
            let done = s.runs.iter().filter(|r| r.status == "done").count();
            for r in s.runs.iter_mut().filter(|r| r.status != "done") {
                r.status = "pending".into();
                r.error = None;
            }
            s.state = "running".into();
            s.stop_reason = None;
            Ok(Opened {
                results: s,
                finished: done,
                restarted: false,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let empty = match std::fs::read_dir(out) {
                Ok(mut d) => d.next().is_none(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(e) => return Err(err(format!("cannot use {}: {e}", out.display()))),
            };
            if !empty {
                return Err(err(format!(
                    "{} exists and holds no sweep; choose a new or empty directory for --output",
                    out.display()
                )));
            }
            std::fs::create_dir_all(out.join("points"))
                .map_err(|e| err(format!("cannot create {}: {e}", out.display())))?;
            Ok(Opened {
                results: plan_results(plan, new_seed(plan)),
                finished: 0,
                restarted: false,
            })
        }
        Err(e) => Err(err(format!(
            "cannot read {}/sweep.json: {e}",
            out.display()
        ))),
    }
}

/// A sweep directory opened to run.
#[derive(Debug)]
struct Opened {
    /// The sweep's results so far (a new plan's: every run pending).
    results: SweepResults,
    /// Runs already finished.
    finished: usize,
    /// Started again there with a changed file (no run of the old one had finished).
    restarted: bool,
}

/// The seed of a new sweep's shuffle: the file's, else from the clock.
fn new_seed(plan: &SweepPlan) -> u64 {
    plan.file.sweep.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 % 1_000_000)
    })
}

/// How one run ended.
enum RunEnd {
    Done,
    Interrupted,
}

/// A sweep being run.
struct Sweep<'a> {
    plan: &'a SweepPlan,
    options: &'a SweepOptions,
    dir: PathBuf,
    cwd: PathBuf,
    results: SweepResults,
    stop: &'a AtomicBool,
    events: &'a (dyn Fn(&str) + Sync),
}

/// Runs the sweep (or the rest of it).
pub fn run(
    options: &SweepOptions,
    stop: &AtomicBool,
    events: &(dyn Fn(&str) + Sync),
) -> Result<SweepOutcome, SweepError> {
    let plan = SweepPlan::load(&options.file).map_err(|e| SweepError(e.to_string()))?;
    let resuming = options.output.join(SWEEP_JSON).is_file();
    let Opened {
        results,
        finished: resumed,
        restarted,
    } = open_sweep(&plan, &options.output, events)?;
    let dir = options
        .output
        .canonicalize()
        .map_err(|e| SweepError(format!("cannot use {}: {e}", options.output.display())))?;
    let cwd = std::env::current_dir()
        .map_err(|e| SweepError(format!("cannot read the current directory: {e}")))?;
    let mut sweep = Sweep {
        plan: &plan,
        options,
        dir,
        cwd,
        results,
        stop,
        events,
    };
    // A sweep started again with a fixed file said so in open_sweep.
    if resuming && !restarted {
        events(&format!(
            "resuming: {resumed} of {} runs already finished",
            sweep.results.runs.len()
        ));
    }
    sweep.save()?;
    let mut interrupted = false;
    for i in 0..sweep.results.runs.len() {
        if sweep.results.runs[i].status == "done" {
            continue;
        }
        if stop.load(Ordering::SeqCst) {
            interrupted = true;
            break;
        }
        match sweep.one(i) {
            Ok(RunEnd::Done) => {}
            Ok(RunEnd::Interrupted) => {
                interrupted = true;
                sweep.save()?;
                break;
            }
            Err(e) => {
                sweep.results.state = "stopped".into();
                sweep.results.stop_reason = Some(e.0.lines().next().unwrap_or("").into());
                sweep.save()?;
                return Err(e);
            }
        }
        sweep.save()?;
    }
    sweep.results.state = if interrupted {
        "interrupted"
    } else {
        "complete"
    }
    .into();
    sweep.save()?;
    Ok(SweepOutcome {
        results: sweep.results,
        dir: sweep.dir,
        interrupted,
        resumed,
    })
}

impl Sweep<'_> {
    fn save(&mut self) -> Result<(), SweepError> {
        self.results.updated_at = now();
        write_sweep(&self.dir, &self.results)
            .map_err(|e| SweepError(format!("cannot write the sweep files: {e}")))
    }

    /// Runs `sh -c` of a command template; Err with its output when it fails.
    fn command(
        &self,
        what: &str,
        template: &str,
        names: &std::collections::BTreeMap<String, String>,
        point_dir: &Path,
        capture: bool,
    ) -> Result<String, StepError> {
        let script = template::Template::parse(template)
            .and_then(|t| t.render(names))
            .map_err(|source| StepError::Template {
                what: what.to_string(),
                source,
            })?;
        let log = point_dir.join(format!("{what}.log"));
        let rules = child::ShellRules {
            capture,
            // A teardown runs after a Ctrl-C too (a half-set-up filesystem helps no one).
            on_stop: if what == "teardown" {
                OnStop::Wait
            } else {
                OnStop::End
            },
            timeout: self.plan.command_timeout,
        };
        let out = child::shell(&script, &self.cwd, &log, rules, self.stop)?;
        if out.ending == Ending::TimedOut {
            Err(StepError::TimedOut {
                what: what.to_string(),
                timeout: edbstress_workload::units::format_duration(self.plan.command_timeout),
                script,
                tail: child::tail(&log),
                log,
            })
        } else if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(StepError::Failed {
                what: what.to_string(),
                status: child::describe(out.status),
                script,
                tail: child::tail(&log),
                log,
            })
        }
    }

    /// One run of one point: setup, (clean,) run, measure, teardown.
    fn one(&mut self, i: usize) -> Result<RunEnd, SweepError> {
        let err = SweepError;
        let (point, repeat, rel) = {
            let r = &self.results.runs[i];
            (r.point, r.repeat, r.dir.clone())
        };
        let point_dir = self.dir.join(&rel);
        set_aside(&point_dir).map_err(|e| err(e.to_string()))?;
        std::fs::create_dir_all(&point_dir)
            .map_err(|e| err(format!("cannot create {}: {e}", point_dir.display())))?;
        let finished = self
            .results
            .runs
            .iter()
            .filter(|r| r.status == "done")
            .count();
        let label = format!(
            "[{}/{}] {} #{repeat} ({})",
            finished + 1,
            self.results.runs.len(),
            self.results.points[point].id,
            self.plan.describe(point)
        );
        let mut names = self.plan.names(point, &point_dir, repeat);
        let table = self
            .plan
            .run_table(point, &point_dir, repeat)
            .map_err(|e| err(e.to_string()))?;
        let config = point_dir.join("run.toml");
        let text = toml::to_string(&table)
            .map_err(|e| err(format!("cannot write the point's settings: {e}")))?;
        std::fs::write(&config, text)
            .map_err(|e| err(format!("cannot write {}: {e}", config.display())))?;
        let commands = self.plan.file.commands.clone();
        if let Some(setup) = &commands.setup {
            (self.events)(&format!("{label}: setup"));
            if let Err(e) = self.command("setup", setup, &names, &point_dir, false) {
                if self.stop.load(Ordering::SeqCst) {
                    self.results.runs[i].status = "interrupted".into();
                    self.teardown(&commands, &names, &point_dir);
                    return Ok(RunEnd::Interrupted);
                }
                self.fail(i, &e.to_string());
                self.teardown(&commands, &names, &point_dir);
                return Err(err(format!("{label}: {e}\nthe sweep stops here.")));
            }
        }
        let ended = self.run_point(i, &label, &table, &point_dir, &mut names);
        let end = match ended {
            Ok(end) => end,
            Err(e) => {
                self.fail(i, &e.to_string());
                self.teardown(&commands, &names, &point_dir);
                return Err(err(format!("{label}: {e}\nthe sweep stops here.")));
            }
        };
        if let Some(td) = &commands.teardown {
            (self.events)(&format!("{label}: teardown"));
            self.command("teardown", td, &names, &point_dir, false)
                .map_err(|e| err(format!("{label}: {e}\nthe sweep stops here.")))?;
        }
        Ok(end)
    }

    /// Best effort after a failure: the failure is what is reported.
    fn teardown(
        &self,
        commands: &file::Commands,
        names: &std::collections::BTreeMap<String, String>,
        point_dir: &Path,
    ) {
        if let Some(td) = &commands.teardown {
            if let Err(e) = self.command("teardown", td, names, point_dir, false) {
                (self.events)(&format!("after the failure, {e}"));
            }
        }
    }

    fn fail(&mut self, i: usize, e: &str) {
        let r = &mut self.results.runs[i];
        r.status = "failed".into();
        r.error = Some(e.lines().next().unwrap_or("").to_string());
    }

    /// Clean (fresh databases), run, measure.
    fn run_point(
        &mut self,
        i: usize,
        label: &str,
        table: &toml::Table,
        point_dir: &Path,
        names: &mut std::collections::BTreeMap<String, String>,
    ) -> Result<RunEnd, StepError> {
        let bin = &self.options.edbstress;
        if self.stop.load(Ordering::SeqCst) {
            self.results.runs[i].status = "interrupted".into();
            return Ok(RunEnd::Interrupted);
        }
        if self.plan.fresh && self.has_database_paths(table) {
            // The point's paths that exist (a directory not there yet holds nothing to
            // remove), as the same flags `run` takes.
            let existing = |key: &str| -> Option<Vec<std::path::PathBuf>> {
                let dirs: Vec<std::path::PathBuf> = table
                    .get(key)
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .filter(|p| self.cwd.join(p).is_dir())
                    .map(std::path::PathBuf::from)
                    .collect();
                (!dirs.is_empty()).then_some(dirs)
            };
            let paths = edbstress_workload::config::ConfigFile {
                db_paths: existing("db_paths"),
                log_paths: existing("log_paths"),
                ..Default::default()
            };
            let mut args: Vec<String> = vec!["clean".into(), "--yes".into()];
            args.extend(paths.to_args()?);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let log = point_dir.join("clean.log");
            let out = child::edbstress(bin, &args, &self.cwd, &log, &log, self.stop)?;
            if !out.status.success() {
                return Err(StepError::CleanFailed {
                    status: child::describe(out.status),
                    tail: child::tail(&log),
                    log,
                });
            }
        }
        (self.events)(&format!("{label}: running"));
        let config = point_dir.join("run.toml").display().to_string();
        let log = point_dir.join("run.log");
        let out = child::edbstress(
            bin,
            &["run", "--config", &config],
            &self.cwd,
            &point_dir.join("run.out"),
            &log,
            self.stop,
        )?;
        let code = out.status.code();
        let run_dir =
            crate::run_dir::newest(point_dir, |d| d.join(run_files::RESULTS_JSON).is_file());
        if code == Some(RUN_INTERRUPTED) {
            let rel = run_dir.map(|d| self.rel(&d));
            let r = &mut self.results.runs[i];
            r.status = "interrupted".into();
            r.run_dir = rel;
            return Ok(RunEnd::Interrupted);
        }
        let Some(run_dir) = run_dir.filter(|_| matches!(code, Some(0 | 1))) else {
            return Err(StepError::NoResults {
                status: child::describe(out.status),
                tail: child::tail(&log),
                log,
            });
        };
        let bytes = std::fs::read(run_dir.join(run_files::RESULTS_JSON)).map_err(|source| {
            StepError::ReadResults {
                dir: run_dir.clone(),
                source,
            }
        })?;
        let results = read_results(&bytes).map_err(|why| StepError::BadResults {
            dir: run_dir.clone(),
            why,
        })?;
        let figures = PointFigures::from_results(&results);
        (self.events)(&format!(
            "{label}: {} — {:.1} transactional IOPS, db read {:.2} ms avg, log write {:.2} ms avg",
            figures.verdict.label(),
            figures.transactional_iops,
            figures.db_read.avg_ms,
            figures.log_write.avg_ms
        ));
        if !figures.failed.is_empty() {
            (self.events)(&format!("{label}: failed: {}", figures.failed.join("; ")));
        }
        names.insert("run_dir".into(), run_dir.display().to_string());
        let rel = self.rel(&run_dir);
        let r = &mut self.results.runs[i];
        r.run_dir = Some(rel);
        r.figures = Some(figures);
        r.status = "done".into();
        if let Some(m) = self.plan.file.commands.measure.clone() {
            match self.command("measure", &m, names, point_dir, true) {
                Ok(out) => {
                    let line = out.lines().rev().find(|l| !l.trim().is_empty());
                    self.results.runs[i].measured = line.map(|l| l.trim().to_string());
                }
                // A measure that fails leaves its column empty; the run stands.
                Err(e) => {
                    (self.events)(&format!("{label}: {e}"));
                    self.results.runs[i].error = e.to_string().lines().next().map(str::to_string);
                }
            }
        }
        Ok(RunEnd::Done)
    }

    /// Whether any database or log directory of the point exists (else there is
    /// nothing to remove before it).
    fn has_database_paths(&self, table: &toml::Table) -> bool {
        ["db_paths", "log_paths"].iter().any(|key| {
            table
                .get(*key)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str())
                .any(|p| self.cwd.join(p).is_dir())
        })
    }

    fn rel(&self, p: &Path) -> String {
        p.strip_prefix(&self.dir).unwrap_or(p).display().to_string()
    }
}

/// Moves a directory left by an unfinished attempt aside (kept, never deleted).
fn set_aside(point_dir: &Path) -> Result<(), StepError> {
    if !point_dir.exists() {
        return Ok(());
    }
    for n in 1..1000 {
        let aside = PathBuf::from(format!("{}.attempt-{n}", point_dir.display()));
        if !aside.exists() {
            return std::fs::rename(point_dir, &aside).map_err(|source| StepError::SetAside {
                dir: point_dir.to_path_buf(),
                source,
            });
        }
    }
    Err(StepError::TooManyAttempts(point_dir.to_path_buf()))
}

/// Why a step of one point (a command, the clean, the run) failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// A command's template cannot be filled in.
    #[error("[commands] {what}: {source}")]
    Template {
        /// "setup", "teardown" or "measure".
        what: String,
        /// What is wrong with it.
        source: template::TemplateError,
    },
    /// A child could not be run.
    #[error(transparent)]
    Child(#[from] child::ChildError),
    /// The point's settings cannot be given as flags.
    #[error(transparent)]
    Args(#[from] edbstress_workload::config::ToArgsError),
    /// A command overran `[commands] timeout`.
    #[error(
        "the {what} command did not finish within [commands] timeout = \"{timeout}\" and \
         was ended: {script}\nits output ({}):\n{tail}",
        log.display()
    )]
    TimedOut {
        /// "setup", "teardown" or "measure".
        what: String,
        /// The timeout as written.
        timeout: String,
        /// The command.
        script: String,
        /// Its log.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// A command failed.
    #[error(
        "the {what} command failed ({status}): {script}\nits output ({}):\n{tail}",
        log.display()
    )]
    Failed {
        /// "setup", "teardown" or "measure".
        what: String,
        /// How it ended.
        status: String,
        /// The command.
        script: String,
        /// Its log.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// `edbstress clean` before a fresh point failed.
    #[error(
        "removing the databases before the point (databases = \"fresh\") failed \
         ({status}); its output ({}):\n{tail}",
        log.display()
    )]
    CleanFailed {
        /// How it ended.
        status: String,
        /// Its log.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// `edbstress run` ended without results.
    #[error(
        "edbstress run ended with {status} and no results; its log ({}):\n{tail}",
        log.display()
    )]
    NoResults {
        /// How it ended.
        status: String,
        /// Its log.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// The run's results cannot be read.
    #[error("cannot read {}/results.json: {source}", dir.display())]
    ReadResults {
        /// The run directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The run's results are not a results file.
    #[error("{}/results.json: {why}", dir.display())]
    BadResults {
        /// The run directory.
        dir: PathBuf,
        /// What the reader said.
        why: String,
    },
    /// An unfinished attempt cannot be moved aside.
    #[error("cannot set aside the unfinished attempt {}: {source}", dir.display())]
    SetAside {
        /// The point's directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Too many unfinished attempts.
    #[error("too many attempts of {} already set aside", .0.display())]
    TooManyAttempts(PathBuf),
}

#[cfg(test)]
mod tests;
