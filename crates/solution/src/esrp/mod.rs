//! `edbstress esrp run`: the ESRP campaign — Stress (with its checksum verification),
//! Performance, DatabaseBackup and SoftRecovery, one after the other, each an
//! ordinary run directory under `DIR/NN-Test/` (one host: a local `edbstress run`
//! child process; several: `edbstress fleet run`, every server running the step at
//! once). `campaign.json` records each step's state after every change, so running
//! the campaign again after an interruption or a reboot keeps the finished steps and
//! redoes the interrupted one (its partial directory is kept under `interrupted/`).

mod file;
mod load;
mod template;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::Local;
use edbstress_report::solution::campaign::{CAMPAIGN_ID_PREFIX, STATE_FILE, STATE_VERSION};
use edbstress_report::solution::{CampaignState, STEPS, StepState, StepStatus};
use edbstress_report::{TestType, Verdict, read_results, run_files, write_atomically};
use edbstress_workload::config::{ConfigFile, settings};

pub use file::{CampaignSettings, RehearsalSettings, SolutionFile, SolutionFileError, StepPlan};
pub use load::{LoadError, load_campaign};
pub use template::SOLUTION_TEMPLATE;

use crate::fleet::{self, FleetHost, FleetOptions};
use crate::process_group::{GroupChild, OnStop};
use crate::ssh::Ssh;

/// The campaign's log, next to its state file.
pub const CAMPAIGN_LOG: &str = "campaign.log";

/// Why a campaign could not go on.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CampaignError(pub String);

/// How a campaign run ended.
#[derive(Debug, PartialEq)]
pub enum CampaignEnd {
    /// Every step finished (each passed or failed: see the state).
    Finished(CampaignState),
    /// Stopped (Ctrl-C) during a step; run again to resume.
    Interrupted,
}

/// How to run a campaign.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// The solution file.
    pub solution: SolutionFile,
    /// The campaign directory.
    pub dir: PathBuf,
    /// Shortened steps.
    pub rehearsal: bool,
    /// The local edbstress binary (single host).
    pub edbstress: PathBuf,
}

/// Runs (or resumes) the campaign. `log` receives each campaign log line.
pub fn run(
    options: &CampaignOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> Result<CampaignEnd, CampaignError> {
    let err = |s: String| CampaignError(s);
    let dir = &options.dir;
    let mut state = open_state(options)?;
    // A state file from before campaign ids has none: its runs go without one, and the
    // document says so.
    let campaign_id_owned = state.id.clone();
    let campaign_id = campaign_id_owned.as_deref();
    let say = |line: &str| {
        log(line);
        let stamp = Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false);
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(CAMPAIGN_LOG))
        {
            let _ = writeln!(f, "{stamp} {line}");
        }
    };
    say(&format!(
        "Campaign {} ({}) in {}",
        state.solution,
        if state.rehearsal { "rehearsal" } else { "full" },
        dir.display()
    ));
    for i in 0..state.steps.len() {
        let step = state.steps[i].clone();
        match step.status {
            StepStatus::Done => {
                say(&format!(
                    "Step {} is done ({}); keeping it",
                    step.test.label(),
                    step.verdict.map_or("no verdict", |v| v.label())
                ));
                continue;
            }
            StepStatus::Running => {
                if let Some(pid) = step.pid.filter(|p| process_alive(*p)) {
                    return Err(err(format!(
                        "step {} is still being run by process {pid}; wait for it, or stop it \
                         (kill -INT {pid}), then run the campaign again",
                        step.test.label()
                    )));
                }
                let kept = keep_interrupted(dir, &step)?;
                say(&format!(
                    "Step {} was interrupted; its partial results were moved to {}; redoing it",
                    step.test.label(),
                    kept.display()
                ));
                if options.solution.fleet.is_none() {
                    say(&recover_local(options, &kept, stop)?);
                }
            }
            StepStatus::Pending => {}
        }
        let step_dir = dir.join(&step.dir);
        std::fs::create_dir_all(&step_dir)
            .map_err(|e| err(format!("cannot create {}: {e}", step_dir.display())))?;
        let mut plan = options.solution.plan(step.test, state.rehearsal);
        if step.test == TestType::Performance {
            plan.threads = stress_threads(&state, dir);
            if let Some(n) = plan.threads {
                say(&format!(
                    "Performance runs at the {n} threads the Stress step's auto-tuning chose"
                ));
            }
        }
        mark_running(&mut state.steps[i], &plan);
        save(dir, &state)?;
        say(&format!(
            "Step {} starts{}",
            step.test.label(),
            match (plan.duration, plan.logs_to_replay) {
                (Some(d), _) => format!(" ({} measured)", humantime_secs(d)),
                (_, Some(n)) => format!(" ({n} logs per instance)"),
                _ => String::new(),
            }
        ));
        let outcome = if options.solution.fleet.is_some() {
            run_fleet_step(options, campaign_id, step.test, plan, &step_dir, stop, &say)?
        } else {
            let on_start = |pid: u32| {
                state.steps[i].pid = Some(pid);
                let _ = save(dir, &state);
            };
            let ran = run_local_step(
                options,
                campaign_id,
                step.test,
                plan,
                &step_dir,
                stop,
                on_start,
            );
            match ran {
                Ok(outcome) => outcome,
                Err(e) if crate::run_dir::newest(&step_dir, |_| true).is_none() => {
                    // A run that left no run directory did not start (refused, or could
                    // not be started): the step is still to do, not interrupted.
                    let s = &mut state.steps[i];
                    s.status = StepStatus::Pending;
                    s.started_at = None;
                    s.pid = None;
                    save(dir, &state)?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        };
        match outcome {
            StepOutcome::Finished(verdict) => {
                let s = &mut state.steps[i];
                s.status = StepStatus::Done;
                s.ended_at = Some(now());
                s.verdict = Some(verdict);
                s.pid = None;
                save(dir, &state)?;
                say(&format!(
                    "Step {} finished: {}",
                    step.test.label(),
                    verdict.label()
                ));
                if let Some(note) = tuned_count_note(&step_dir, step.test, plan.threads) {
                    say(&note);
                }
            }
            StepOutcome::Interrupted(why) => {
                state.steps[i].pid = None;
                save(dir, &state)?;
                say(&format!(
                    "Step {} did not finish ({why}); run the campaign again to redo it",
                    step.test.label()
                ));
                return Ok(CampaignEnd::Interrupted);
            }
        }
        if stop.load(Ordering::Relaxed) {
            say("Stopped after a finished step; run the campaign again to go on");
            return Ok(CampaignEnd::Interrupted);
        }
    }
    say("Campaign finished; write its document with `edbstress esrp document`");
    Ok(CampaignEnd::Finished(state))
}

/// The threads the finished Stress step's auto-tuning chose, at which Performance
/// runs (as Jetstress runs its Performance test at the tuned thread count).
fn stress_threads(state: &CampaignState, dir: &Path) -> Option<u32> {
    state
        .steps
        .iter()
        .find(|s| s.test == TestType::Stress && s.status == StepStatus::Done)
        .and_then(|s| tuned_threads(&dir.join(&s.dir)))
}

/// A step's state as it starts an attempt.
fn mark_running(s: &mut StepState, plan: &StepPlan) {
    s.status = StepStatus::Running;
    s.attempts += 1;
    s.started_at = Some(now());
    s.ended_at = None;
    s.verdict = None;
    s.duration_seconds = plan.duration.map(|d| d.as_secs_f64());
    s.logs_to_replay = plan.logs_to_replay;
    s.pid = Some(std::process::id());
}

enum StepOutcome {
    Finished(Verdict),
    Interrupted(String),
}

fn now() -> String {
    Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

fn humantime_secs(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// The campaign's state: read back, or made new in a directory that is empty or absent.
fn open_state(options: &CampaignOptions) -> Result<CampaignState, CampaignError> {
    let dir = &options.dir;
    let path = dir.join(STATE_FILE);
    if path.exists() {
        let bytes = std::fs::read(&path)
            .map_err(|e| CampaignError(format!("cannot read {}: {e}", path.display())))?;
        let state: CampaignState = serde_json::from_slice(&bytes).map_err(|e| {
            CampaignError(format!(
                "{} is not a campaign state file edbstress can read: {e}",
                path.display()
            ))
        })?;
        if state.rehearsal != options.rehearsal {
            return Err(CampaignError(format!(
                "{} holds a {} campaign; {} Give another --campaign directory, or {} --rehearsal.",
                dir.display(),
                if state.rehearsal { "rehearsal" } else { "full" },
                "a campaign is either a rehearsal or not.",
                if state.rehearsal { "add" } else { "leave out" }
            )));
        }
        return Ok(state);
    }
    if let Ok(mut entries) = std::fs::read_dir(dir)
        && entries.next().is_some()
    {
        return Err(CampaignError(format!(
            "{} exists and is not a campaign directory (no {STATE_FILE}); give an empty or new \
             --campaign directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| CampaignError(format!("cannot create {}: {e}", dir.display())))?;
    let hosts = match &options.solution.fleet {
        Some(f) => f.fleet_hosts().into_iter().map(|h| h.name).collect(),
        None => vec![edbstress_workload::host_info().hostname],
    };
    let state = CampaignState {
        version: STATE_VERSION,
        id: Some(format!("{CAMPAIGN_ID_PREFIX}{}", uuid::Uuid::new_v4())),
        solution: options.solution.info.name.clone(),
        rehearsal: options.rehearsal,
        created_at: now(),
        hosts,
        steps: STEPS
            .iter()
            .enumerate()
            .map(|(i, t)| StepState {
                test: *t,
                status: StepStatus::Pending,
                dir: format!("{:02}-{}", i + 1, t.label()),
                duration_seconds: None,
                logs_to_replay: None,
                attempts: 0,
                started_at: None,
                ended_at: None,
                verdict: None,
                pid: None,
            })
            .collect(),
    };
    save(dir, &state)?;
    Ok(state)
}

fn save(dir: &Path, state: &CampaignState) -> Result<(), CampaignError> {
    let json = serde_json::to_vec_pretty(state).map_err(|e| CampaignError(e.to_string()))?;
    write_atomically(&dir.join(STATE_FILE), &json)
        .map_err(|e| CampaignError(format!("cannot write the campaign state: {e}")))
}

/// Moves an interrupted step's directory to `interrupted/NN-Test-attemptN` (kept for
/// the record, never deleted).
fn keep_interrupted(dir: &Path, step: &StepState) -> Result<PathBuf, CampaignError> {
    let from = dir.join(&step.dir);
    let kept = dir
        .join("interrupted")
        .join(format!("{}-attempt{}", step.dir, step.attempts));
    if !from.exists() {
        return Ok(kept);
    }
    std::fs::create_dir_all(dir.join("interrupted")).map_err(|e| {
        CampaignError(format!(
            "cannot create {}: {e}",
            dir.join("interrupted").display()
        ))
    })?;
    std::fs::rename(&from, &kept).map_err(|e| {
        CampaignError(format!(
            "cannot move the interrupted step {} to {}: {e}",
            from.display(),
            kept.display()
        ))
    })?;
    Ok(kept)
}

/// Soft recovery of the databases an interrupted step left, as Jetstress recovers its
/// databases before a test: a killed run leaves them not shut down cleanly, and the
/// next run would refuse them. `edbstress recover` on the campaign's paths (databases
/// shut down cleanly are left as they are), its output in `kept/recover.log`.
fn recover_local(
    options: &CampaignOptions,
    kept: &Path,
    stop: &AtomicBool,
) -> Result<String, CampaignError> {
    let c = &options.solution.campaign;
    let err = |e: String| CampaignError(e);
    std::fs::create_dir_all(kept)
        .map_err(|e| err(format!("cannot create {}: {e}", kept.display())))?;
    let log_path = kept.join("recover.log");
    let log = std::fs::File::create(&log_path)
        .and_then(|f| Ok((f.try_clone()?, f)))
        .map_err(|e| err(format!("cannot write {}: {e}", log_path.display())))?;
    // The campaign's paths, and the same kind of I/O as its runs: `recover` takes these
    // settings' flags as `run` does.
    let target = ConfigFile {
        io_mode: c
            .run_options
            .iter()
            .any(|o| o == "--buffered")
            .then_some(edbstress_io::IoMode::Buffered),
        db_paths: (!c.db_paths.is_empty()).then(|| c.db_paths.clone()),
        log_paths: (!c.log_paths.is_empty()).then(|| c.log_paths.clone()),
        ..ConfigFile::default()
    };
    let target_args = target.to_args().map_err(|e| err(e.to_string()))?;
    let mut cmd = Command::new(&options.edbstress);
    cmd.arg("recover").args(target_args);
    cmd.stdin(Stdio::null()).stdout(log.0).stderr(log.1);
    let mut child = GroupChild::spawn(&mut cmd)
        .map_err(|e| err(format!("cannot start {}: {e}", options.edbstress.display())))?;
    let (status, _) = child
        .wait(stop, OnStop::Interrupt, None)
        .map_err(|e| err(e.to_string()))?;
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status.code() {
        Some(0) => Ok(format!(
            "recovery of the databases the interrupted step left: done ({})",
            log_path.display()
        )),
        // No database there yet (the step stopped before making them): nothing to do;
        // anything else the run finds it names itself.
        Some(2) => Ok(format!(
            "no databases recovered: {}",
            output
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ")
        )),
        _ => Err(err(format!(
            "recovering the databases the interrupted step left failed ({status}); its \
             output ({}):\n{output}\nrepair or remove the databases (`edbstress clean`), then \
             run the campaign again",
            log_path.display()
        ))),
    }
}

/// Whether `pid` is a live edbstress process.
fn process_alive(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("edbstress"))
        && pid != std::process::id()
}

/// The run settings of a step, as a layer of configuration: the solution's profile,
/// the step's test and plan, and the campaign's paths.
fn step_layer(
    options: &CampaignOptions,
    test: TestType,
    plan: StepPlan,
    fleet: bool,
) -> Result<ConfigFile, CampaignError> {
    let s = &options.solution;
    let p = &s.info.profile;
    let bad = |what: &str, e: edbstress_workload::units::ValueError| {
        CampaignError(format!(
            "solution.toml's {what} cannot be given to the runs: {e}"
        ))
    };
    let mut layer = ConfigFile {
        test: Some(test),
        profile: Some(settings::parse::profile(&p.version).map_err(|e| bad("version", e))?),
        iops_per_mailbox: Some(p.iops_per_mailbox),
        mailbox_quota: Some(
            settings::parse::quota(&p.mailbox_quota).map_err(|e| bad("mailbox_quota", e))?,
        ),
        databases: Some(p.databases_per_server),
        copies: Some(p.copies),
        // A fleet splits the mailboxes over its hosts itself.
        mailboxes: (!fleet).then(|| p.mailboxes / u64::from(p.servers.max(1))),
        duration: plan.duration,
        logs_to_replay: plan.logs_to_replay,
        ..ConfigFile::default()
    };
    // ESRP verifies checksums after the Stress test; the Performance test follows on
    // the same databases, so its own verification would only repeat it.
    if test == TestType::Performance {
        layer.verify_after = Some(false);
    }
    // Jetstress's way unless the campaign's run options or configuration file choose
    // `--pacing open-loop`: closed loop at the tuned thread count, judged on achieved
    // against target; Stress tunes, Performance reuses its count, unless they give a
    // thread count or auto-tuning themselves.
    if test.is_transactional() && jetstress_chosen(options) && !sets_threads(options) {
        if run_option(options, "--pacing").is_none() {
            layer.pacing = Some(edbstress_report::Pacing::Jetstress);
        }
        match plan.threads {
            Some(n) => layer.threads = Some(n),
            None => layer.auto_tune = Some(true),
        }
    }
    let paths = |v: &[PathBuf]| (!v.is_empty()).then(|| v.to_vec());
    layer.db_paths = paths(&s.campaign.db_paths);
    layer.log_paths = paths(&s.campaign.log_paths);
    Ok(layer)
}

/// The campaign's configuration file, when it has one that parses.
fn campaign_config(options: &CampaignOptions) -> Option<ConfigFile> {
    let c = &options.solution.campaign;
    let text = std::fs::read_to_string(c.run_config.as_ref()?).ok()?;
    ConfigFile::parse(&text).ok()
}

/// The value of run option `flag` (`--flag value` or `--flag=value`), the last given.
fn run_option<'a>(options: &'a CampaignOptions, flag: &str) -> Option<&'a str> {
    let o = &options.solution.campaign.run_options;
    let prefix = format!("{flag}=");
    let mut found = None;
    for (i, arg) in o.iter().enumerate() {
        if arg == flag {
            found = o.get(i + 1).map(String::as_str);
        } else if let Some(v) = arg.strip_prefix(&prefix) {
            found = Some(v);
        }
    }
    found
}

/// Whether the campaign runs with Jetstress pacing: unless its run options or
/// configuration file choose open loop.
fn jetstress_chosen(options: &CampaignOptions) -> bool {
    match run_option(options, "--pacing") {
        Some(v) => v.trim() == "jetstress",
        None => campaign_config(options)
            .and_then(|f| f.pacing)
            .is_none_or(|p| p == edbstress_report::Pacing::Jetstress),
    }
}

/// Whether the campaign's run options or configuration file give the thread count or
/// auto-tuning themselves.
fn sets_threads(options: &CampaignOptions) -> bool {
    let c = &options.solution.campaign;
    let flags = ["--threads", "--auto-tune"];
    c.run_options.iter().any(|o| {
        flags
            .iter()
            .any(|f| o == f || o.starts_with(&format!("{f}=")))
    }) || campaign_config(options).is_some_and(|f| f.threads.is_some() || f.auto_tune.is_some())
}

/// When a step at an auto-tuned count failed a criterion that rises with the load:
/// that the count came from tuning windows shorter than the step, and what to re-run
/// with. `from_stress`: the count Performance took from Stress's tuning.
fn tuned_count_note(dir: &Path, test: TestType, from_stress: Option<u32>) -> Option<String> {
    let mut found = Vec::new();
    collect_results(dir, 4, &mut found);
    found
        .iter()
        .filter_map(|p| read_results(&std::fs::read(p).ok()?).ok())
        .find_map(|r| match from_stress {
            _ if r.autotune.is_some() => edbstress_report::text::tuning_window_note(&r),
            Some(n) if test == TestType::Performance => {
                edbstress_report::text::inherited_count_note(&r, n)
            }
            _ => None,
        })
}

/// The fewest threads the auto-tuned Stress runs under `dir` chose (one per server).
fn tuned_threads(dir: &Path) -> Option<u32> {
    let mut found = Vec::new();
    collect_results(dir, 4, &mut found);
    found
        .iter()
        .filter_map(|p| read_results(&std::fs::read(p).ok()?).ok())
        .filter(|r| r.test_type == TestType::Stress && !r.aborted)
        .filter_map(|r| r.autotune.map(|t| t.chosen_threads))
        .min()
}

fn collect_results(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && depth > 0 {
            collect_results(&path, depth - 1, out);
        } else if e.file_name() == edbstress_report::run_files::RESULTS_JSON {
            out.push(path);
        }
    }
}

/// The options of a step's `edbstress run`: the campaign's configuration file, the
/// step's settings as flags (from [`step_layer`]), the campaign's own run options last
/// (they win).
fn step_args(
    options: &CampaignOptions,
    test: TestType,
    plan: StepPlan,
    fleet: bool,
    campaign_id: Option<&str>,
) -> Result<Vec<String>, CampaignError> {
    let s = &options.solution;
    let mut a: Vec<String> = Vec::new();
    // The run records the campaign it was started for; a fleet passes it to each host.
    if let Some(id) = campaign_id
        && !fleet
    {
        a.extend(["--campaign-id".into(), id.to_string()]);
    }
    if let Some(c) = &s.campaign.run_config
        && !fleet
    {
        a.extend(["--config".into(), c.display().to_string()]);
    }
    a.extend(
        step_layer(options, test, plan, fleet)?
            .to_args()
            .map_err(|e| CampaignError(e.to_string()))?,
    );
    a.extend(s.campaign.run_options.iter().cloned());
    Ok(a)
}

/// One step on this host: `edbstress run` as a child process.
fn run_local_step(
    options: &CampaignOptions,
    campaign_id: Option<&str>,
    test: TestType,
    plan: StepPlan,
    step_dir: &Path,
    stop: &AtomicBool,
    mut on_start: impl FnMut(u32),
) -> Result<StepOutcome, CampaignError> {
    let results = ConfigFile {
        results_dir: Some(step_dir.to_path_buf()),
        ..ConfigFile::default()
    };
    let mut cmd = Command::new(&options.edbstress);
    cmd.arg("run")
        .args(step_args(options, test, plan, false, campaign_id)?)
        .args(
            results
                .to_args()
                .map_err(|e| CampaignError(e.to_string()))?,
        );
    // In its own process group: a Ctrl-C reaches the campaign alone, which passes one
    // SIGINT on so the run shuts its databases down cleanly and writes its results.
    let mut child = GroupChild::spawn(&mut cmd)
        .map_err(|e| CampaignError(format!("cannot start {}: {e}", options.edbstress.display())))?;
    on_start(child.id());
    let (status, _) = child
        .wait(stop, OnStop::Interrupt, None)
        .map_err(|e| CampaignError(e.to_string()))?;
    let run = crate::run_dir::newest(step_dir, |_| true);
    let results = run
        .as_ref()
        .and_then(|d| std::fs::read(d.join(run_files::RESULTS_JSON)).ok())
        .and_then(|b| read_results(&b).ok());
    match results {
        Some(r) if !r.aborted && !stop.load(Ordering::Relaxed) => {
            Ok(StepOutcome::Finished(r.overall_result))
        }
        Some(r) => Ok(StepOutcome::Interrupted(
            r.abort_reason.unwrap_or_else(|| "stopped".into()),
        )),
        None => {
            if stop.load(Ordering::Relaxed) {
                Ok(StepOutcome::Interrupted("stopped".into()))
            } else {
                Err(CampaignError(match run {
                    Some(d) => format!(
                        "the {} run ended ({status}) without results; see its test.log in {}; \
                         fix the cause and run the campaign again",
                        test.label(),
                        d.display()
                    ),
                    None => format!(
                        "the {} run was refused before it started ({status}; its message is \
                         above). Fix the cause and run the campaign again: options the message \
                         names go in [campaign] run_options of the solution file, e.g. \
                         run_options = [\"--database-size\", \"10GiB\"]; the step has not run \
                         and will start afresh",
                        test.label()
                    ),
                }))
            }
        }
    }
}

/// One step on every host at once, through `edbstress fleet run`.
fn run_fleet_step(
    options: &CampaignOptions,
    campaign_id: Option<&str>,
    test: TestType,
    plan: StepPlan,
    step_dir: &Path,
    stop: &AtomicBool,
    say: &(dyn Fn(&str) + Sync),
) -> Result<StepOutcome, CampaignError> {
    let s = &options.solution;
    let Some(file) = &s.fleet else {
        return Err(CampaignError("no [fleet] table".into()));
    };
    let hosts: Vec<FleetHost> = file.fleet_hosts();
    let run_args = step_args(options, test, plan, true, campaign_id)?;
    let parse = |v: &Option<String>, default: u64| {
        v.as_deref()
            .and_then(|d| edbstress_workload::units::parse_duration(d).ok())
            .unwrap_or(Duration::from_secs(default))
    };
    let lead_time = match &file.lead_time {
        Some(_) => parse(&file.lead_time, 120),
        None => fleet::default_lead_time(&run_args, s.campaign.run_config.as_deref()),
    };
    let fleet_options = FleetOptions {
        hosts,
        ssh: Ssh {
            config: file.ssh_config.clone(),
            options: file.ssh_options.clone(),
            program: None,
            sockets: None,
        },
        remote_edbstress: file
            .remote_edbstress
            .clone()
            .unwrap_or_else(|| "edbstress".into()),
        run_args,
        mailboxes: Some(file.mailboxes.unwrap_or(s.info.profile.mailboxes)),
        lead_time,
        max_clock_offset: parse(&file.max_clock_offset, 1),
        grace: fleet::DEFAULT_GRACE,
        output: step_dir.to_path_buf(),
        config_file: s.campaign.run_config.clone(),
        campaign_id: campaign_id.map(str::to_string),
        max_ssh_sessions: file
            .max_ssh_sessions
            .unwrap_or(fleet::DEFAULT_MAX_SSH_SESSIONS),
    };
    let events = |e: fleet::FleetEvent<'_>| match e {
        fleet::FleetEvent::Ended(host, how) => say(&format!("  {host}: {how}")),
        fleet::FleetEvent::Stopping => say("  stopping every host"),
        _ => {}
    };
    let outcome = fleet::run(&fleet_options, stop, &events)
        .map_err(|e| CampaignError(format!("the {} step: {e}", test.label())))?;
    let a = &outcome.aggregate;
    if stop.load(Ordering::Relaxed) {
        return Ok(StepOutcome::Interrupted("stopped".into()));
    }
    let incomplete: Vec<String> = a
        .hosts
        .iter()
        .filter_map(|h| {
            h.incomplete
                .as_ref()
                .map(|why| format!("{}: {why}", h.host))
        })
        .collect();
    if !incomplete.is_empty() {
        return Ok(StepOutcome::Interrupted(format!(
            "not every host finished: {}",
            incomplete.join("; ")
        )));
    }
    let verdict = a.overall_result;
    Ok(StepOutcome::Finished(verdict))
}
