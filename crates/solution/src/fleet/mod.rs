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
//!
//! Every phase (checks, directories, starts, stop requests, copies) keeps at most
//! [`FleetOptions::max_ssh_sessions`] ssh sessions opening or working at once
//! (`sessions`), says its progress as counts of hosts, and writes each host's detail
//! to the fleet log ([`FLEET_LOG`]).

mod check_session;
mod collect;
mod copy;
mod error;
mod file;
mod follow;
mod host;
mod lead;
mod preflight;
mod progress;
mod remote;
mod sessions;
mod start;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use edbstress_report::ToolInfo;
use edbstress_report::aggregate::page::write_aggregate;
use edbstress_report::aggregate::{AggregateResults, aggregate};

pub use copy::CopyError;
pub use error::FleetError;
pub use file::{FleetFile, FleetFileError, HostEntry};
pub use host::{FleetHost, HostSpecError, split_mailboxes, validate_names};
pub use lead::default_lead_time;
pub use preflight::{HostCheck, HostCheckError, check_host};
pub use progress::{FLEET_LOG, Phase, Progress};
pub use remote::RemoteError;
pub use sessions::DEFAULT_MAX_SSH_SESSIONS;

use edbstress_workload::config::{ConfigFile, flag_for_key};
use edbstress_workload::units::parse_duration;

use crate::control_master::ControlMasters;
use crate::ssh::{Ssh, command_line};
use progress::FleetLog;
use start::HostPlan;

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
    /// The most ssh sessions opening or working at once, in every phase
    /// ([`DEFAULT_MAX_SSH_SESSIONS`]; see the `sessions` module for what counts).
    pub max_ssh_sessions: usize,
}

/// What happens, for progress output. Per-host detail also goes to the fleet log.
#[derive(Debug)]
pub enum FleetEvent<'a> {
    /// The fleet's id (`fleet-UUID`), recorded by every host's run.
    Fleet(&'a str),
    /// A phase's counts changed (or the phase finished).
    Progress(&'a Progress),
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

/// What a fleet run produced.
#[derive(Debug)]
pub struct FleetOutcome {
    /// The aggregate (also written into the fleet directory).
    pub aggregate: AggregateResults,
    /// The fleet directory.
    pub dir: PathBuf,
    /// The fleet's id: every counted run recorded it.
    pub fleet_id: String,
    /// The time each phase took.
    pub overhead: Overhead,
}

/// The fleet's own time per phase, seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Overhead {
    /// Checking the hosts before starting them.
    pub preflight: f64,
    /// Making the hosts' fleet directories and starting their runs.
    pub start: f64,
    /// From starting the hosts to the start of measurement (the lead time).
    pub lead: f64,
    /// From the end of the runs' measured duration to the last run's end (the runs'
    /// own shutdown and results, and following them; negative when stopped early).
    pub wait_past_end: f64,
    /// Copying the run directories back.
    pub collect: f64,
    /// Aggregating the runs and writing the aggregate.
    pub aggregate: f64,
}

/// Runs the fleet: check, start, follow (stop), collect, aggregate.
pub fn run(
    options: &FleetOptions,
    stop: &AtomicBool,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
) -> Result<FleetOutcome, FleetError> {
    let Validated { shares, config } = validate(options)?;
    prepare_fleet_dir(&options.output)?;
    // One shared connection per host for every session after its check's handshake;
    // the masters end when `masters` is dropped, whatever way this returns.
    let masters = ControlMasters::new();
    let shared = FleetOptions {
        ssh: Ssh {
            sockets: masters.as_ref().map(ControlMasters::sockets),
            ..options.ssh.clone()
        },
        ..options.clone()
    };
    let options = &shared;
    let log = FleetLog::create(&options.output).map_err(|source| FleetError::CreateOutput {
        path: options.output.join(FLEET_LOG),
        source,
    })?;
    let fleet_id = format!("fleet-{}", uuid::Uuid::new_v4());
    events(FleetEvent::Fleet(&fleet_id));
    log.say(
        None,
        &format!(
            "fleet {fleet_id}: {} hosts, at most {} ssh sessions opening or working at once; {}",
            options.hosts.len(),
            options.max_ssh_sessions,
            match &masters {
                Some(_) => "one shared ssh connection per host",
                None => "no shared connections (no private temporary directory for their sockets)",
            }
        ),
    );
    let mut overhead = Overhead {
        lead: options.lead_time.as_secs_f64(),
        ..Overhead::default()
    };

    let checking = Instant::now();
    preflight::check_all(options, masters.as_ref(), events, &log)?;
    overhead.preflight = checking.elapsed().as_secs_f64();

    // Every host's fleet directory, new, before any host starts; then every host
    // started with one start time.
    let starting = Instant::now();
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
    let configs = start::make_fleet_dirs(options, &remote_dirs, config.as_deref(), &log)?;
    let start_at = SystemTime::now() + options.lead_time;
    let stamp = chrono::DateTime::<chrono::Local>::from(start_at);
    let start_text = stamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let duration = run_duration(options);
    let deadline = Instant::now() + options.lead_time + duration + options.grace;
    let plans: Vec<HostPlan<'_>> = options
        .hosts
        .iter()
        .zip(shares)
        .zip(remote_dirs)
        .zip(configs)
        .map(|(((host, mailboxes), remote_dir), config)| HostPlan {
            host,
            mailboxes,
            remote_dir,
            config,
        })
        .collect();
    let (mut running, lines) =
        start::start_runs(options, plans, &start_text, &fleet_id, events, &log)?;
    overhead.start = starting.elapsed().as_secs_f64();
    events(FleetEvent::Started(start_at));
    log.say(
        None,
        &format!("every host started; measurement starts at {start_text}"),
    );

    follow::follow_until_done(options, &mut running, &lines, deadline, stop, events, &log);
    overhead.wait_past_end = seconds_since(start_at + duration);
    // A lost host's test log may stay open (a shared connection holds it while its
    // run goes on there): its reader is left to end when the connection does.
    for r in running.iter_mut().filter(|r| !r.was_lost()) {
        if let Some(reader) = r.reader.take() {
            let _ = reader.join();
        }
    }
    for (host, line) in lines.try_iter() {
        log.say(Some(&host), &line);
        events(FleetEvent::Line(&host, &line));
    }

    let copying = Instant::now();
    let (runs, missing) = collect::collect(options, &running, &fleet_id, events, &log);
    overhead.collect = copying.elapsed().as_secs_f64();
    collect::stop_lost(options, &running, &log);
    if let Some(masters) = &masters {
        masters.close();
    }

    let aggregating = Instant::now();
    let tool = ToolInfo {
        name: "edbstress".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let aggregate =
        aggregate(runs, missing.clone(), tool).map_err(|source| FleetError::Aggregate {
            source,
            missing: missing
                .iter()
                .map(|m| format!("{}: {}", m.host, m.reason))
                .collect(),
            hosts_dir: options.output.join("hosts"),
        })?;
    write_aggregate(&options.output, &aggregate)?;
    overhead.aggregate = aggregating.elapsed().as_secs_f64();
    log.say(
        None,
        &format!("aggregated: {}", aggregate.overall_result.label()),
    );
    Ok(FleetOutcome {
        aggregate,
        dir: options.output.clone(),
        fleet_id,
        overhead,
    })
}

/// Seconds from `t` to now (negative when `t` is still ahead).
fn seconds_since(t: SystemTime) -> f64 {
    match SystemTime::now().duration_since(t) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// What the options give once checked.
struct Validated {
    /// Each host's mailboxes.
    shares: Vec<Option<u64>>,
    /// The configuration file's bytes, to ship.
    config: Option<Vec<u8>>,
}

/// Checks the options before anything is made: the hosts, the options the fleet
/// manages, the configuration file (read).
fn validate(options: &FleetOptions) -> Result<Validated, FleetError> {
    if options.hosts.is_empty() {
        return Err(FleetError::NoHost);
    }
    validate_names(&options.hosts)?;
    for managed in managed_flags() {
        if options
            .run_args
            .iter()
            .any(|a| *a == managed || a.starts_with(&format!("{managed}=")))
        {
            return Err(FleetError::ManagedFlag(managed));
        }
    }
    if options.config_file.is_some()
        && options
            .run_args
            .iter()
            .any(|a| a == "--config" || a.starts_with("--config="))
    {
        return Err(FleetError::ConfigTwice);
    }
    let shares = split_mailboxes(&options.hosts, options.mailboxes)?;
    let config = match &options.config_file {
        Some(path) => Some(
            std::fs::read(path).map_err(|source| FleetError::ReadConfig {
                path: path.clone(),
                source,
            })?,
        ),
        None => None,
    };
    Ok(Validated { shares, config })
}

/// A fleet directory is new: an existing one must be empty (an earlier fleet's files in it
/// would be taken for this fleet's).
fn prepare_fleet_dir(out: &Path) -> Result<(), FleetError> {
    let create = |path: PathBuf| move |source| FleetError::CreateOutput { path, source };
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(FleetError::OutputInUse(out.to_path_buf()));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(out).map_err(create(out.to_path_buf()))?
        }
        Err(source) => {
            return Err(FleetError::UseOutput {
                path: out.to_path_buf(),
                source,
            });
        }
    }
    std::fs::create_dir(out.join("hosts")).map_err(create(out.join("hosts")))
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

/// The paths a host's run uses, for its check: its own, else those of the run options,
/// else the defaults.
pub(super) fn host_paths(h: &FleetHost, run_args: &[String]) -> Vec<PathBuf> {
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

/// Runs `edbstress SUBCOMMAND ARGS` on every host, at most the bound of ssh sessions at
/// once (prepare, checksum, clean…), each host's own paths replacing the
/// `--db-path`/`--log-path` among `args`.
pub fn exec(options: &FleetOptions, subcommand: &str) -> Result<Vec<HostAnswer>, FleetError> {
    if options.hosts.is_empty() {
        return Err(FleetError::NoHost);
    }
    let shares = split_mailboxes(&options.hosts, options.mailboxes)?;
    let work: Vec<(&FleetHost, Option<u64>)> = options.hosts.iter().zip(shares).collect();
    let answers = sessions::map_bounded(&work, options.max_ssh_sessions, |(h, share)| {
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
    });
    Ok(answers.into_iter().flatten().collect())
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
