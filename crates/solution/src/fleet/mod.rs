//! `edbstress fleet run`: one test on several hosts at once, over OpenSSH.
//!
//! Each host runs an ordinary `edbstress run` with the same options, its own paths and
//! mailbox share, and one `--start-at` for all, so every measured window is the same.
//! The remote shell records the run's PID (to stop it cleanly with SIGINT on request)
//! and `exec`s edbstress; its test log streams back over ssh for the progress lines.
//! Afterwards every host's run directory is copied back with `tar` over ssh and the
//! runs are aggregated; a host that dropped out (ssh died, edbstress killed, host
//! rebooted) is named with why, and the others' results are kept whole.
//!
//! Evidence is tied to the fleet: each fleet has a random id (`fleet-UUID`) that every
//! host's run records in its results.json and that names its new directory on every
//! host; collection counts only runs recording this id, each once (by its run id).
//! Everything waits with a deadline: a host still running past lead time + duration +
//! grace is lost (named, its ssh session ended), and so is one that stops answering ssh
//! keep-alives; a stop request waits a bounded time, then collects what finished.

mod copy;
mod file;
mod host;
mod preflight;
mod remote;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use edbstress_report::aggregate::page::write_aggregate;
use edbstress_report::aggregate::{AggregateResults, HostRun, MissingHost, aggregate};
use edbstress_report::{ToolInfo, read_results};

pub use copy::CopyError;
pub use file::{FleetFile, HostEntry};
pub use host::{FleetHost, split_mailboxes, validate_names};
pub use preflight::{HostCheck, check_host};

use edbstress_workload::config::{ConfigFile, flag_for_key};
use edbstress_workload::units::parse_duration;

use crate::ssh::{Ssh, command_line};

/// Options of `run` that `fleet run` manages itself; given among the run options they
/// are refused.
const MANAGED_RUN_FLAGS: [&str; 4] = ["--start-at", "--host-name", "--fleet-id", "--campaign-id"];

/// Run settings `fleet run` sets per host itself (their flags are refused among the run
/// options too).
const MANAGED_SETTINGS: [&str; 2] = ["results_dir", "mailboxes"];

/// The flag of a run setting, from the settings table (one spelling for every
/// command line the fleet writes).
fn flag(key: &str) -> String {
    flag_for_key(key).unwrap_or_else(|| format!("--{}", key.replace('_', "-")))
}

/// Every option the fleet manages: the run's own and the settings' flags.
fn managed_flags() -> Vec<String> {
    MANAGED_RUN_FLAGS
        .iter()
        .map(|f| f.to_string())
        .chain(MANAGED_SETTINGS.iter().map(|k| flag(k)))
        .collect()
}

/// Name of the file holding the remote run's PID, in its results directory.
const PID_FILE: &str = ".edbstress-fleet.pid";

/// The time a host's run gets past its lead time and measured duration, to write its
/// results, by default: past it the host is lost.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(15 * 60);

/// Longest wait for one short ssh call (a check, making the fleet's directory).
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// Longest wait for the ssh call asking one host's run to stop.
const STOP_LIMIT: Duration = Duration::from_secs(30);

/// Longest wait for the runs to end after a stop request (at most the grace time).
const MAX_STOP_WAIT: Duration = Duration::from_secs(120);

/// Shortest time allowed for copying one host's directory back (else the grace time).
const MIN_COPY_LIMIT: Duration = Duration::from_secs(120);

/// How to run a fleet.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// The hosts.
    pub hosts: Vec<FleetHost>,
    /// How to reach them.
    pub ssh: Ssh,
    /// The edbstress binary on the hosts.
    pub remote_edbstress: String,
    /// Options of `edbstress run` every host gets (its own paths replace the
    /// `--db-path`/`--log-path` among them).
    pub run_args: Vec<String>,
    /// The fleet's mailboxes, split over the hosts without their own.
    pub mailboxes: Option<u64>,
    /// Time from the start of the hosts' runs to the start of measurement: enough to
    /// prepare the databases and warm the caches on every host.
    pub lead_time: Duration,
    /// Largest clock difference accepted between a host and this machine.
    pub max_clock_offset: Duration,
    /// Time a host's run gets past the lead time and its measured duration to end: a
    /// host still running then is lost (named, its ssh ended), the others collected.
    /// Also the longest wait for the runs to end after a stop request (at most 2 min).
    pub grace: Duration,
    /// The local fleet directory: the aggregate's files, and `hosts/NAME/` with each
    /// host's run directory.
    pub output: PathBuf,
    /// A configuration file shipped to every host and given to its run (`--config`).
    pub config_file: Option<PathBuf>,
    /// The ESRP campaign this fleet runs a step of: every host's run records it
    /// (`--campaign-id`), so the solution document counts only the campaign's runs.
    pub campaign_id: Option<String>,
}

/// What happens, for progress output.
#[derive(Debug)]
pub enum FleetEvent<'a> {
    /// The fleet's id (`fleet-UUID`), recorded by every host's run.
    Fleet(&'a str),
    /// A host passed its checks.
    Checked(&'a HostCheck),
    /// Every host was started; measurement starts at this moment.
    Started(SystemTime),
    /// A line of a host's test log.
    Line(&'a str, &'a str),
    /// A host's run ended (host, how).
    Ended(&'a str, &'a str),
    /// Stopping every host (Ctrl-C).
    Stopping,
}

/// Why a fleet could not run (nothing was started, or nothing could be aggregated).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FleetError(pub String);

/// What a fleet run produced.
#[derive(Debug)]
pub struct FleetOutcome {
    /// The aggregate (also written into the fleet directory).
    pub aggregate: AggregateResults,
    /// The fleet directory.
    pub dir: PathBuf,
    /// The fleet's id: every counted run recorded it.
    pub fleet_id: String,
    /// Seconds spent checking the hosts before starting them.
    pub check_seconds: f64,
    /// Seconds from starting the hosts to the start of measurement (the lead time).
    pub lead_seconds: f64,
    /// Seconds copying the run directories back after the runs ended.
    pub copy_seconds: f64,
}

/// One host's run while the fleet follows it.
struct Running {
    host: FleetHost,
    remote_dir: String,
    child: Child,
    reader: Option<std::thread::JoinHandle<()>>,
    /// How its run ended, once it did.
    ended: Option<String>,
    /// It stopped answering: given up on, not copied back.
    lost: bool,
}

/// Runs the fleet: check, start, follow (stop), collect, aggregate.
pub fn run(
    options: &FleetOptions,
    stop: &AtomicBool,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
) -> Result<FleetOutcome, FleetError> {
    let err = |s: String| FleetError(s);
    if options.hosts.is_empty() {
        return Err(err("no host: give --host DEST for each host".into()));
    }
    validate_names(&options.hosts).map_err(err)?;
    for managed in managed_flags() {
        if options
            .run_args
            .iter()
            .any(|a| *a == managed || a.starts_with(&format!("{managed}=")))
        {
            return Err(err(format!(
                "{managed} is set by `fleet run` itself (one start time, each host's name, \
                 results directory, mailbox share and the fleet's id); leave it out of the run \
                 options"
            )));
        }
    }
    if options.config_file.is_some()
        && options
            .run_args
            .iter()
            .any(|a| a == "--config" || a.starts_with("--config="))
    {
        return Err(err(
            "the configuration file is given twice: to `fleet run --config` (shipped to every \
             host) and among the run options; give it once"
                .into(),
        ));
    }
    let shares = split_mailboxes(&options.hosts, options.mailboxes).map_err(err)?;
    let config = match &options.config_file {
        Some(path) => Some(
            std::fs::read(path).map_err(|e| err(format!("cannot read {}: {e}", path.display())))?,
        ),
        None => None,
    };
    prepare_fleet_dir(&options.output).map_err(err)?;
    let fleet_id = format!("fleet-{}", uuid::Uuid::new_v4());
    events(FleetEvent::Fleet(&fleet_id));

    let checking = Instant::now();
    check_all(options, events)?;
    let check_seconds = checking.elapsed().as_secs_f64();

    // Every host's fleet directory, new, before any host starts.
    let remote_dirs: Vec<String> = options
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{}/{fleet_id}",
                h.results_dir
                    .as_deref()
                    .unwrap_or(Path::new("edbstress-results/fleet"))
                    .display()
            )
        })
        .collect();
    let mut configs = Vec::new();
    for (h, remote_dir) in options.hosts.iter().zip(&remote_dirs) {
        configs.push(
            remote::make_fleet_dir(&options.ssh, h, remote_dir, config.as_deref(), CHECK_LIMIT)
                .map_err(|e| err(format!("{e}; nothing was started")))?,
        );
    }

    // Start every host with one start time.
    let start_at = SystemTime::now() + options.lead_time;
    let stamp = chrono::DateTime::<chrono::Local>::from(start_at);
    let start_text = stamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let deadline = Instant::now() + options.lead_time + run_duration(options) + options.grace;
    let mut running = Vec::new();
    let (lines_tx, lines) = std::sync::mpsc::channel::<(String, String)>();
    for (((h, share), remote_dir), config) in options
        .hosts
        .iter()
        .zip(&shares)
        .zip(remote_dirs)
        .zip(configs)
    {
        let line = remote::run_line(
            options,
            h,
            *share,
            &remote_dir,
            &start_text,
            &fleet_id,
            config,
        )
        .map_err(err)?;
        let spawned = options
            .ssh
            .command(&h.dest, &line)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                stop_all(options, &running);
                for r in &mut running {
                    crate::ssh::end_group(&mut r.child);
                }
                return Err(err(format!("cannot start ssh for {}: {e}", h.name)));
            }
        };
        let reader = child
            .stderr
            .take()
            .map(|s| follow(s, h.name.clone(), lines_tx.clone()));
        running.push(Running {
            host: h.clone(),
            remote_dir,
            child,
            reader,
            ended: None,
            lost: false,
        });
    }
    drop(lines_tx);
    events(FleetEvent::Started(start_at));
    follow_until_done(options, &mut running, &lines, deadline, stop, events);
    for r in &mut running {
        if let Some(reader) = r.reader.take() {
            let _ = reader.join();
        }
    }
    for (host, line) in lines.try_iter() {
        events(FleetEvent::Line(&host, &line));
    }

    let copying = Instant::now();
    let (runs, missing) = collect(options, &running, &fleet_id);
    let copy_seconds = copying.elapsed().as_secs_f64();
    // Runs the fleet lost sight of may go on there: ask them to stop (bounded).
    let left: Vec<&Running> = running
        .iter()
        .filter(|r| {
            r.lost
                || r.ended
                    .as_deref()
                    .is_some_and(|e| e.starts_with("was lost"))
        })
        .collect();
    std::thread::scope(|s| {
        for r in left {
            s.spawn(|| remote::stop(&options.ssh, &r.host, &r.remote_dir, STOP_LIMIT));
        }
    });
    let tool = ToolInfo {
        name: "edbstress".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let aggregate = aggregate(runs, missing.clone(), tool).map_err(|e| {
        let why: Vec<String> = missing
            .iter()
            .map(|m| format!("{}: {}", m.host, m.reason))
            .collect();
        err(format!(
            "the runs could not be aggregated: {e}\n  {}\n(each host's run directory is under {})",
            why.join("\n  "),
            options.output.join("hosts").display()
        ))
    })?;
    write_aggregate(&options.output, &aggregate).map_err(|e| err(e.to_string()))?;
    Ok(FleetOutcome {
        aggregate,
        dir: options.output.clone(),
        fleet_id,
        check_seconds,
        lead_seconds: options.lead_time.as_secs_f64(),
        copy_seconds,
    })
}

/// A fleet directory is new: an existing one must be empty (an earlier fleet's files in it
/// would be taken for this fleet's).
fn prepare_fleet_dir(out: &Path) -> Result<(), String> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(format!(
                    "{} already holds files (an earlier fleet's?); a fleet writes into a new \
                     directory: give another --output, or leave --output out for a new \
                     Fleet_TIME directory",
                    out.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?,
        Err(e) => return Err(format!("cannot use {}: {e}", out.display())),
    }
    std::fs::create_dir(out.join("hosts"))
        .map_err(|e| format!("cannot create {}: {e}", out.join("hosts").display()))
}

/// Checks every host at once; every problem named, or nothing starts.
fn check_all(
    options: &FleetOptions,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
) -> Result<(), FleetError> {
    let expected = format!("edbstress {}", env!("CARGO_PKG_VERSION"));
    let checks: Vec<Result<HostCheck, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = options
            .hosts
            .iter()
            .map(|h| {
                let paths = host_paths(h, &options.run_args);
                let expected = &expected;
                s.spawn(move || {
                    check_host(
                        &options.ssh,
                        h,
                        &options.remote_edbstress,
                        expected,
                        &paths,
                        options.max_clock_offset,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("the host check panicked".into()))
            })
            .collect()
    });
    let mut problems = Vec::new();
    for c in &checks {
        match c {
            Ok(c) => events(FleetEvent::Checked(c)),
            Err(e) => problems.push(e.clone()),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(FleetError(format!(
            "not every host is ready; nothing was started:\n  {}",
            problems.join("\n  ")
        )))
    }
}

/// The measured duration the runs were given (`--duration` among the run options, else
/// in the configuration file), else the longest default (a Stress test's day): the
/// hosts' deadline must not cut a run short.
fn run_duration(options: &FleetOptions) -> Duration {
    let duration = flag("duration");
    let mut it = options.run_args.iter();
    let mut config = options.config_file.clone();
    let mut given = None;
    while let Some(a) = it.next() {
        let value = match a.strip_prefix(&format!("{duration}=")) {
            Some(v) => Some(v.to_string()),
            None if *a == duration => it.next().cloned(),
            None => None,
        };
        if let Some(d) = value.and_then(|v| parse_duration(&v).ok()) {
            given = Some(d);
        }
        if a == "--config" {
            config = it.next().map(PathBuf::from);
        } else if let Some(v) = a.strip_prefix("--config=") {
            config = Some(PathBuf::from(v));
        }
    }
    given
        .or_else(|| {
            config
                .and_then(|c| edbstress_workload::config::ConfigFile::load(&c).ok())
                .and_then(|c| c.duration)
        })
        .unwrap_or(Duration::from_secs(24 * 3600))
}

/// Follows the hosts until every run ended, was stopped or was given up on: a host still
/// running past `deadline` (or past the stop wait after Ctrl-C) is lost, its ssh ended.
fn follow_until_done(
    options: &FleetOptions,
    running: &mut [Running],
    lines: &std::sync::mpsc::Receiver<(String, String)>,
    deadline: Instant,
    stop: &AtomicBool,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
) {
    let mut stop_deadline: Option<Instant> = None;
    loop {
        for r in running.iter_mut().filter(|r| r.ended.is_none()) {
            if let Ok(Some(status)) = r.child.try_wait() {
                let how = match status.code() {
                    Some(0) => "passed".to_string(),
                    Some(1) => "failed".to_string(),
                    Some(130) => "stopped".to_string(),
                    Some(255) => "was lost (ssh failed with exit 255: the connection was \
                                  lost, the host went down or its run was killed)"
                        .to_string(),
                    Some(c) => format!("ended with exit code {c}"),
                    None => "ssh was killed".to_string(),
                };
                events(FleetEvent::Ended(&r.host.name, &how));
                r.ended = Some(how);
            }
        }
        for (host, line) in lines.try_iter() {
            events(FleetEvent::Line(&host, &line));
        }
        if running.iter().all(|r| r.ended.is_some()) {
            return;
        }
        let now = Instant::now();
        let limit = match stop_deadline {
            Some(d) => Some((
                d,
                "did not stop within the grace time after the stop request",
            )),
            None if now >= deadline => Some((
                deadline,
                "did not end within the lead time + duration + grace (it stopped answering)",
            )),
            None => None,
        };
        if let Some((at, why)) = limit
            && now >= at
        {
            for r in running.iter_mut().filter(|r| r.ended.is_none()) {
                crate::ssh::end_group(&mut r.child);
                let how = format!("was lost: it {why}");
                events(FleetEvent::Ended(&r.host.name, &how));
                r.ended = Some(how);
                r.lost = true;
            }
            return;
        }
        if stop.load(Ordering::Relaxed) && stop_deadline.is_none() {
            events(FleetEvent::Stopping);
            stop_deadline = Some(now + options.grace.min(MAX_STOP_WAIT));
            stop_all(options, running);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asks every host still running to stop, all at once, each ssh call bounded.
fn stop_all(options: &FleetOptions, running: &[Running]) {
    std::thread::scope(|s| {
        for r in running.iter().filter(|r| r.ended.is_none()) {
            s.spawn(move || remote::stop(&options.ssh, &r.host, &r.remote_dir, STOP_LIMIT));
        }
    });
}

/// Copies every host's fleet directory back (those not lost, all at once) and keeps the
/// runs that are this fleet's, each once: the rest are missing hosts, with why.
fn collect(
    options: &FleetOptions,
    running: &[Running],
    fleet_id: &str,
) -> (Vec<HostRun>, Vec<MissingHost>) {
    let copy_limit = options.grace.max(MIN_COPY_LIMIT);
    let copies: Vec<Option<Result<(), copy::CopyError>>> = std::thread::scope(|s| {
        let handles: Vec<_> = running
            .iter()
            .map(|r| {
                let local = options.output.join("hosts").join(&r.host.name);
                s.spawn(move || {
                    (!r.lost).then(|| {
                        copy::copy_back(
                            &options.ssh,
                            &r.host.dest,
                            &r.remote_dir,
                            &local,
                            copy_limit,
                        )
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let mut runs: Vec<HostRun> = Vec::new();
    let mut missing = Vec::new();
    for (r, copied) in running.iter().zip(copies) {
        let local = options.output.join("hosts").join(&r.host.name);
        let ended = r.ended.clone().unwrap_or_default();
        let mut miss = |dir: &Path, reason: String| {
            missing.push(MissingHost {
                host: r.host.name.clone(),
                source: dir.display().to_string(),
                reason,
            })
        };
        let Some(copied) = copied else {
            miss(
                &local,
                format!("its run {ended}; its directory was not copied back"),
            );
            continue;
        };
        if let Err(e) = copied {
            miss(
                &local,
                format!("its run {ended}, and its run directory could not be copied back: {e}"),
            );
            continue;
        }
        let Some(dir) = crate::run_dir::newest(&local, |_| true) else {
            miss(&local, format!("its run {ended} and left no run directory"));
            continue;
        };
        let results = match std::fs::read(dir.join(edbstress_report::run_files::RESULTS_JSON)) {
            Ok(bytes) => read_results(&bytes),
            Err(_) => {
                let why = format!("its run {ended} without results: {}", last_log_line(&dir));
                miss(&dir, why);
                continue;
            }
        };
        let results = match results {
            Ok(results) => results,
            Err(e) => {
                miss(&dir, format!("its results.json is unreadable ({e})"));
                continue;
            }
        };
        if results.fleet_id.as_deref() != Some(fleet_id) {
            let theirs = results.fleet_id.as_deref().unwrap_or("no fleet");
            miss(
                &dir,
                format!(
                    "its results.json is a run of {theirs}, not of this fleet ({fleet_id}); \
                     it is not counted"
                ),
            );
            continue;
        }
        let Some(run_id) = results.run_id.clone() else {
            miss(
                &dir,
                "its results.json has no run id; it is not counted".into(),
            );
            continue;
        };
        if let Some(other) = runs
            .iter()
            .find(|o| o.results.run_id.as_deref() == Some(&run_id))
        {
            let why = format!(
                "its results.json is the run {run_id} that {} returned too; a run counts once",
                other.host
            );
            miss(&dir, why);
            continue;
        }
        runs.push(HostRun {
            host: r.host.name.clone(),
            source: dir.display().to_string(),
            results,
        });
    }
    (runs, missing)
}

/// The paths a host's run uses, for its check: its own, else those of the run options,
/// else the defaults.
fn host_paths(h: &FleetHost, run_args: &[String]) -> Vec<PathBuf> {
    let from_args = |flag: &str, default: &str| -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut it = run_args.iter();
        while let Some(a) = it.next() {
            if a == flag {
                if let Some(v) = it.next() {
                    out.push(PathBuf::from(v));
                }
            } else if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
                out.push(PathBuf::from(v));
            }
        }
        if out.is_empty() {
            out.push(PathBuf::from(default));
        }
        out
    };
    let mut paths = if h.db_paths.is_empty() {
        from_args(&flag("db_paths"), "edbstress-data")
    } else {
        h.db_paths.clone()
    };
    paths.extend(if h.log_paths.is_empty() {
        from_args(&flag("log_paths"), "edbstress-data")
    } else {
        h.log_paths.clone()
    });
    paths.sort();
    paths.dedup();
    paths
}

/// Reads a host's test log lines (its ssh's stderr) and hands them to the main
/// thread, which shows them.
fn follow(
    stderr: std::process::ChildStderr,
    host: String,
    tx: std::sync::mpsc::Sender<(String, String)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send((host.clone(), line)).is_err() {
                break;
            }
        }
    })
}

fn last_log_line(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(edbstress_report::run_files::TEST_LOG))
        .ok()
        .and_then(|l| {
            l.lines()
                .rev()
                .find(|x| !x.trim().is_empty())
                .map(str::to_string)
        })
        .map_or("no test.log".into(), |l| {
            format!("the last line of its test.log: {l}")
        })
}

/// What one host answered to [`exec`].
#[derive(Clone, Debug)]
pub struct HostAnswer {
    /// The host.
    pub host: String,
    /// Its exit code (None: ssh could not run it, or a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `edbstress SUBCOMMAND ARGS` on every host at once (prepare, checksum, clean…),
/// each host's own paths replacing the `--db-path`/`--log-path` among `args`.
pub fn exec(options: &FleetOptions, subcommand: &str) -> Result<Vec<HostAnswer>, FleetError> {
    if options.hosts.is_empty() {
        return Err(FleetError("no host: give --host DEST for each host".into()));
    }
    let shares = split_mailboxes(&options.hosts, options.mailboxes).map_err(FleetError)?;
    Ok(std::thread::scope(|s| {
        let handles: Vec<_> = options
            .hosts
            .iter()
            .zip(shares)
            .map(|(h, share)| {
                s.spawn(move || {
                    let mut args = vec![options.remote_edbstress.clone(), subcommand.to_string()];
                    args.extend(host_args(options, h));
                    if let (Some(m), "prepare") = (share, subcommand) {
                        args.extend([flag("mailboxes"), m.to_string()]);
                    }
                    match options.ssh.run(&h.dest, &command_line(&args)) {
                        Ok((out, _)) => HostAnswer {
                            host: h.name.clone(),
                            code: out.status.code(),
                            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                        },
                        Err(e) => HostAnswer {
                            host: h.name.clone(),
                            code: None,
                            stdout: String::new(),
                            stderr: format!("cannot run ssh: {e}"),
                        },
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    }))
}

/// The run options for host `h`: its own paths replace those among them.
fn host_args(options: &FleetOptions, h: &FleetHost) -> Vec<String> {
    let (db, log) = (flag("db_paths"), flag("log_paths"));
    let own =
        |f: &str| (f == db && !h.db_paths.is_empty()) || (f == log && !h.log_paths.is_empty());
    let mut args = Vec::new();
    let mut skip_value = false;
    for a in &options.run_args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let f = a.split('=').next().unwrap_or(a);
        if own(f) {
            skip_value = !a.contains('=');
            continue;
        }
        args.push(a.clone());
    }
    let paths = ConfigFile {
        db_paths: (!h.db_paths.is_empty()).then(|| h.db_paths.clone()),
        log_paths: (!h.log_paths.is_empty()).then(|| h.log_paths.clone()),
        ..ConfigFile::default()
    };
    // Paths as flags cannot fail: they are plain text.
    args.extend(paths.to_args().unwrap_or_default());
    args
}
