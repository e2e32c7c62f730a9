//! Starting the hosts: every host's fleet directory made new, then every host's run
//! started with the one start time. At most the bound of ssh sessions are opening at
//! once: a run's session counts until its remote shell says the run starts.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use super::follow::{ENDED_EARLY, OPENING, Running, STARTED, follow, stop_all};
use super::progress::{FleetLog, Phase, PhaseCounter};
use super::remote;
use super::sessions::map_bounded;
use super::{CHECK_LIMIT, FleetError, FleetEvent, FleetHost, FleetOptions};
use crate::process_group::GroupChild;

/// The hosts' test log lines, (host, line), as their sessions bring them.
pub(super) type TestLog = Receiver<(String, String)>;

/// What one host runs: its mailbox share, its fleet directory on the host and the
/// path of the shipped configuration file there.
pub(super) struct HostPlan<'a> {
    pub(super) host: &'a FleetHost,
    pub(super) mailboxes: Option<u64>,
    pub(super) remote_dir: String,
    pub(super) config: Option<String>,
}

/// Makes every host's fleet directory (new), shipping `config` into it; returns the
/// configuration's path on each host. The first failure (in the hosts' order) stops
/// the fleet before any host starts.
pub(super) fn make_fleet_dirs(
    options: &FleetOptions,
    remote_dirs: &[String],
    config: Option<&[u8]>,
    log: &FleetLog,
) -> Result<Vec<Option<String>>, FleetError> {
    let pairs: Vec<(&FleetHost, &String)> = options.hosts.iter().zip(remote_dirs).collect();
    let made = map_bounded(&pairs, options.max_ssh_sessions, |(h, dir)| {
        let made = remote::make_fleet_dir(&options.ssh, h, dir, config, CHECK_LIMIT);
        match &made {
            Ok(_) => log.say(Some(&h.name), &format!("made {dir}")),
            Err(e) => log.say(Some(&h.name), &e.to_string()),
        }
        made
    });
    let mut paths = Vec::new();
    for (m, (h, dir)) in made.into_iter().zip(&pairs) {
        match m {
            Some(Ok(path)) => paths.push(path),
            Some(Err(e)) => return Err(FleetError::FleetDir(e)),
            None => {
                return Err(FleetError::FleetDir(remote::RemoteError::FleetDir {
                    name: h.name.clone(),
                    dir: dir.to_string(),
                    with_config: config.is_some(),
                    why: "the call panicked".into(),
                }));
            }
        }
    }
    Ok(paths)
}

/// Starts every host's run (`start_at`: the common start time), at most
/// `max_ssh_sessions` sessions opening at once, and waits until each run started or
/// its session ended (at most [`CHECK_LIMIT`] each). Returns the runs and their test
/// log lines.
pub(super) fn start_runs(
    options: &FleetOptions,
    plans: Vec<HostPlan<'_>>,
    start_at: &str,
    fleet_id: &str,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
    log: &FleetLog,
) -> Result<(Vec<Running>, TestLog), FleetError> {
    // Every line first: a host's options that cannot be written stop the fleet before
    // any host starts.
    let mut lines = Vec::new();
    for p in &plans {
        lines.push(
            remote::run_line(
                options,
                p.host,
                p.mailboxes,
                &p.remote_dir,
                start_at,
                fleet_id,
                p.config.clone(),
            )
            .map_err(FleetError::RunLine)?,
        );
    }
    let counter = PhaseCounter::new(Phase::Start, plans.len(), events, log);
    let (tx, test_log) = std::sync::mpsc::channel::<(String, String)>();
    let mut running: Vec<Running> = Vec::new();
    let mut opened: Vec<(Arc<AtomicU8>, Instant)> = Vec::new();
    for (p, line) in plans.into_iter().zip(lines) {
        wait_for_openings(&opened, options.max_ssh_sessions.max(1), &counter);
        let spawned = GroupChild::spawn(
            options
                .ssh
                .command(&p.host.dest, &line)
                .stdout(Stdio::null())
                .stderr(Stdio::piped()),
        );
        let mut child = match spawned {
            Ok(child) => child,
            Err(source) => {
                stop_all(options, &running);
                for r in &mut running {
                    r.child.kill();
                }
                return Err(FleetError::Spawn {
                    host: p.host.name.clone(),
                    source,
                });
            }
        };
        log.say(Some(&p.host.name), "starting its run");
        let state = Arc::new(AtomicU8::new(OPENING));
        let reader = child
            .child_mut()
            .stderr
            .take()
            .map(|s| follow(s, p.host.name.clone(), tx.clone(), state.clone()));
        opened.push((state.clone(), Instant::now()));
        running.push(Running {
            host: p.host.clone(),
            remote_dir: p.remote_dir,
            child,
            reader,
            state,
            ended: None,
            lost: false,
        });
    }
    wait_for_openings(&opened, 1, &counter);
    for r in &running {
        let said = match r.state.load(Ordering::SeqCst) {
            STARTED => "its run started",
            ENDED_EARLY => "its ssh session ended before its run started",
            _ => "its run did not say it started within the check time; followed anyway",
        };
        log.say(Some(&r.host.name), said);
    }
    counter.finish();
    Ok((running, test_log))
}

/// Waits until fewer than `limit` sessions are opening (a session opening longer than
/// [`CHECK_LIMIT`] no longer counts: its run is followed as any other), counting the
/// started and failed ones meanwhile.
fn wait_for_openings(opened: &[(Arc<AtomicU8>, Instant)], limit: usize, counter: &PhaseCounter) {
    loop {
        let state = |want: u8| {
            opened
                .iter()
                .filter(|(s, _)| s.load(Ordering::SeqCst) == want)
                .count()
        };
        counter.set(state(STARTED), state(ENDED_EARLY));
        let opening = opened
            .iter()
            .filter(|(s, since)| {
                s.load(Ordering::SeqCst) == OPENING && since.elapsed() < CHECK_LIMIT
            })
            .count();
        if opening < limit {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
