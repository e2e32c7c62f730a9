//! `edbstress fleet run`: one test on several hosts at once, over OpenSSH.
//!
//! Each host runs an ordinary `edbstress run` with the same options, its own paths and
//! mailbox share, and one `--start-at` for all, so every measured window is the same.
//! The remote shell records the run's PID (to stop it cleanly with SIGINT on request)
//! and `exec`s edbstress; its test log streams back over ssh for the progress lines.
//! Afterwards every host's run directory is copied back with `tar` over ssh and the
//! runs are aggregated; a host that dropped out (ssh died, edbstress killed, host
//! rebooted) is named with why, and the others' results are kept whole.

mod file;
mod host;
mod preflight;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use edbstress_report::aggregate::page::{prepare_aggregate_dir, write_aggregate};
use edbstress_report::aggregate::{AggregateResults, HostRun, MissingHost, aggregate};
use edbstress_report::{ToolInfo, read_results};

pub use file::{FleetFile, HostEntry};
pub use host::{FleetHost, split_mailboxes};
pub use preflight::{HostCheck, check_host};

use crate::ssh::{Ssh, command_line, failure};

/// Options `fleet run` manages itself; given among the run options they are refused.
const MANAGED: [&str; 6] = [
    "--start-at",
    "--host-name",
    "--results-dir",
    "--mailboxes",
    "--fleet-id",
    "--campaign-id",
];

/// Name of the file holding the remote run's PID, in its results directory.
const PID_FILE: &str = ".edbstress-fleet.pid";

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
    /// Seconds spent checking the hosts before starting them.
    pub check_seconds: f64,
    /// Seconds from starting the hosts to the start of measurement (the lead time).
    pub lead_seconds: f64,
    /// Seconds copying the run directories back after the runs ended.
    pub copy_seconds: f64,
}

struct Running {
    host: FleetHost,
    remote_dir: String,
    child: Child,
    reader: Option<std::thread::JoinHandle<()>>,
    ended: Option<String>,
}

/// Runs the fleet: check, start, follow, (stop,) collect, aggregate.
pub fn run(
    options: &FleetOptions,
    stop: &AtomicBool,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
) -> Result<FleetOutcome, FleetError> {
    let err = |s: String| FleetError(s);
    if options.hosts.is_empty() {
        return Err(err("no host: give --host DEST for each host".into()));
    }
    let mut names: Vec<&str> = options.hosts.iter().map(|h| h.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(err(format!(
            "host {} is given twice; each host runs once (name=… tells apart two hosts \
             reached through one address)",
            w[0]
        )));
    }
    for managed in MANAGED {
        if options
            .run_args
            .iter()
            .any(|a| a == managed || a.starts_with(&format!("{managed}=")))
        {
            return Err(err(format!(
                "{managed} is set by `fleet run` itself (one start time, each host's name, \
                 results directory and mailbox share); leave it out of the run options"
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
    prepare_aggregate_dir(&options.output).map_err(err)?;
    let expected = format!("edbstress {}", env!("CARGO_PKG_VERSION"));

    // Check every host at once.
    let checking = Instant::now();
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
    if !problems.is_empty() {
        return Err(err(format!(
            "not every host is ready; nothing was started:\n  {}",
            problems.join("\n  ")
        )));
    }
    let check_seconds = checking.elapsed().as_secs_f64();

    // Start every host with one start time.
    let start_at = SystemTime::now() + options.lead_time;
    let stamp = chrono::DateTime::<chrono::Local>::from(start_at);
    let start_text = stamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let id = format!("fleet-{}", stamp.format("%Y%m%d-%H%M%S"));
    let remote_dirs: Vec<String> = options
        .hosts
        .iter()
        .map(|h| {
            format!(
                "{}/{id}",
                h.results_dir
                    .as_deref()
                    .unwrap_or(Path::new("edbstress-results/fleet"))
                    .display()
            )
        })
        .collect();
    // The configuration file reaches every host before any host starts.
    let mut configs = Vec::new();
    for (h, remote_dir) in options.hosts.iter().zip(&remote_dirs) {
        configs.push(match &options.config_file {
            Some(path) => Some(ship_config(&options.ssh, h, path, remote_dir).map_err(err)?),
            None => None,
        });
    }
    let mut running = Vec::new();
    let (lines_tx, lines) = std::sync::mpsc::channel::<(String, String)>();
    for (((h, share), remote_dir), config) in options
        .hosts
        .iter()
        .zip(&shares)
        .zip(remote_dirs)
        .zip(configs)
    {
        let line = remote_run_line(options, h, *share, &remote_dir, &start_text, config);
        let mut child = options
            .ssh
            .command(&h.dest, &line)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| err(format!("cannot start ssh for {}: {e}", h.name)))?;
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
        });
    }
    drop(lines_tx);
    events(FleetEvent::Started(start_at));
    let lead_seconds = options.lead_time.as_secs_f64();
    let mut stop_sent = false;
    loop {
        for r in running.iter_mut().filter(|r| r.ended.is_none()) {
            if let Ok(Some(status)) = r.child.try_wait() {
                let how = match status.code() {
                    Some(0) => "passed".to_string(),
                    Some(1) => "failed".to_string(),
                    Some(130) => "stopped".to_string(),
                    Some(255) => {
                        "ssh failed (exit 255): the connection was lost or the host went down"
                            .to_string()
                    }
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
            break;
        }
        if stop.load(Ordering::Relaxed) && !stop_sent {
            stop_sent = true;
            events(FleetEvent::Stopping);
            for r in running.iter().filter(|r| r.ended.is_none()) {
                let pid = format!("{}/{PID_FILE}", r.remote_dir);
                let line = format!("kill -INT \"$(cat {})\"", crate::ssh::shell_quote(&pid));
                if let Err(e) = options.ssh.run(&r.host.dest, &line) {
                    tracing::warn!("cannot stop {}: {e}", r.host.name);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for r in &mut running {
        if let Some(reader) = r.reader.take() {
            let _ = reader.join();
        }
    }
    for (host, line) in lines.try_iter() {
        events(FleetEvent::Line(&host, &line));
    }

    // Copy every run directory back, then aggregate.
    let copying = Instant::now();
    let mut runs = Vec::new();
    let mut missing = Vec::new();
    for r in &running {
        let local = options.output.join("hosts").join(&r.host.name);
        let copied = copy_back(&options.ssh, &r.host.dest, &r.remote_dir, &local);
        let ended = r.ended.clone().unwrap_or_default();
        match (copied, crate::run_dir::newest(&local, |_| true)) {
            (Ok(()), Some(dir)) => match std::fs::read(dir.join("results.json")) {
                Ok(bytes) => match read_results(&bytes) {
                    Ok(results) => runs.push(HostRun {
                        host: r.host.name.clone(),
                        source: dir.display().to_string(),
                        results,
                    }),
                    Err(e) => missing.push(missed(
                        r,
                        &dir,
                        format!("its results.json is unreadable ({e})"),
                    )),
                },
                Err(_) => missing.push(missed(
                    r,
                    &dir,
                    format!("its run {ended} without results: {}", last_log_line(&dir)),
                )),
            },
            (Ok(()), None) => missing.push(missed(
                r,
                &local,
                format!("its run {ended} and left no run directory"),
            )),
            (Err(e), _) => missing.push(missed(
                r,
                &local,
                format!("its run {ended}, and its run directory could not be copied back: {e}"),
            )),
        }
    }
    let copy_seconds = copying.elapsed().as_secs_f64();
    let tool = ToolInfo {
        name: "edbstress".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let aggregate = aggregate(runs, missing, tool).map_err(|e| {
        err(format!(
            "the runs could not be aggregated: {e}\n(each host's run directory is under {})",
            options.output.join("hosts").display()
        ))
    })?;
    write_aggregate(&options.output, &aggregate).map_err(|e| err(e.to_string()))?;
    Ok(FleetOutcome {
        aggregate,
        dir: options.output.clone(),
        check_seconds,
        lead_seconds,
        copy_seconds,
    })
}

fn missed(r: &Running, dir: &Path, reason: String) -> MissingHost {
    MissingHost {
        host: r.host.name.clone(),
        source: dir.display().to_string(),
        reason,
    }
}

/// The remote shell line of one host: make its results directory, record the shell's
/// PID (edbstress replaces the shell, keeping it), run.
fn remote_run_line(
    options: &FleetOptions,
    h: &FleetHost,
    mailboxes: Option<u64>,
    remote_dir: &str,
    start_at: &str,
    config: Option<String>,
) -> String {
    let mut args: Vec<String> = vec![options.remote_edbstress.clone(), "run".into()];
    if let Some(config) = config {
        args.extend(["--config".into(), config]);
    }
    args.extend(host_args(options, h));
    if let Some(m) = mailboxes {
        args.extend(["--mailboxes".into(), m.to_string()]);
    }
    args.extend([
        "--results-dir".into(),
        remote_dir.to_string(),
        "--start-at".into(),
        start_at.to_string(),
        "--host-name".into(),
        h.name.clone(),
    ]);
    if let Some(campaign) = &options.campaign_id {
        args.extend(["--campaign-id".into(), campaign.clone()]);
    }
    let dir = command_line(&[remote_dir.to_string()]);
    let pid = command_line(&[format!("{remote_dir}/{PID_FILE}")]);
    format!(
        "mkdir -p {dir} && echo $$ > {pid} && exec {}",
        command_line(&args)
    )
}

/// Copies the configuration file at `path` into the host's results directory for this
/// fleet; returns its remote path.
fn ship_config(ssh: &Ssh, h: &FleetHost, path: &Path, remote_dir: &str) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let remote = format!("{remote_dir}/config.toml");
    let line = format!(
        "mkdir -p {} && cat > {}",
        command_line(&[remote_dir.to_string()]),
        command_line(std::slice::from_ref(&remote))
    );
    let mut child = ssh
        .command(&h.dest, &line)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start ssh for {}: {e}", h.name))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin
            .write_all(&bytes)
            .map_err(|e| format!("{}: sending {}: {e}", h.name, path.display()))?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{}: cannot copy {} there ({})",
            h.name,
            path.display(),
            failure(&out)
        ));
    }
    Ok(remote)
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
        from_args("--db-path", "edbstress-data")
    } else {
        h.db_paths.clone()
    };
    paths.extend(if h.log_paths.is_empty() {
        from_args("--log-path", "edbstress-data")
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

/// Copies the remote `dir` into `local` with tar over ssh.
fn copy_back(ssh: &Ssh, dest: &str, dir: &str, local: &Path) -> Result<(), String> {
    std::fs::create_dir_all(local)
        .map_err(|e| format!("cannot create {}: {e}", local.display()))?;
    let line = format!("tar -C {} -cf - .", command_line(&[dir.to_string()]));
    let mut remote = ssh
        .command(dest, &line)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start ssh: {e}"))?;
    let stdout = remote.stdout.take().ok_or("no ssh output")?;
    let untar = Command::new("tar")
        .arg("-C")
        .arg(local)
        .arg("-xf")
        .arg("-")
        .stdin(Stdio::from(stdout))
        .output()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    let remote = remote.wait_with_output().map_err(|e| e.to_string())?;
    if !remote.status.success() {
        return Err(failure(&remote));
    }
    if !untar.status.success() {
        return Err(format!(
            "tar: {}",
            String::from_utf8_lossy(&untar.stderr).trim()
        ));
    }
    Ok(())
}

fn last_log_line(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("test.log"))
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
                        args.extend(["--mailboxes".into(), m.to_string()]);
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
    let own = |flag: &str| match flag {
        "--db-path" => !h.db_paths.is_empty(),
        "--log-path" => !h.log_paths.is_empty(),
        _ => false,
    };
    let mut args = Vec::new();
    let mut skip_value = false;
    for a in &options.run_args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        if own(flag) {
            skip_value = !a.contains('=');
            continue;
        }
        args.push(a.clone());
    }
    for p in &h.db_paths {
        args.extend(["--db-path".into(), p.display().to_string()]);
    }
    for p in &h.log_paths {
        args.extend(["--log-path".into(), p.display().to_string()]);
    }
    args
}
