//! Collecting: every host's fleet directory copied back (those not lost, at most the
//! bound of sessions at once), and the runs that are this fleet's kept, each once; the
//! rest are missing hosts, with why. Hosts the fleet lost sight of are asked to stop.

use std::path::Path;
use std::time::Instant;

use edbstress_report::aggregate::{HostRun, MissingHost};
use edbstress_report::read_results;

use super::follow::Running;
use super::progress::{FleetLog, Phase, PhaseCounter};
use super::sessions::map_bounded;
use super::{FleetEvent, FleetOptions, MIN_COPY_LIMIT, STOP_LIMIT, copy, remote};

/// Copies every host's directory back and reads its run: the runs to aggregate and the
/// missing hosts.
pub(super) fn collect(
    options: &FleetOptions,
    running: &[Running],
    fleet_id: &str,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
    log: &FleetLog,
) -> (Vec<HostRun>, Vec<MissingHost>) {
    let copy_limit = options.grace.max(MIN_COPY_LIMIT);
    let reachable: Vec<&Running> = running.iter().filter(|r| !r.lost).collect();
    let counter = PhaseCounter::new(Phase::Collect, reachable.len(), events, log);
    let copied = map_bounded(&reachable, options.max_ssh_sessions, |r| {
        let started = Instant::now();
        let local = options.output.join("hosts").join(&r.host.name);
        let copied = copy::copy_back(
            &options.ssh,
            &r.host.dest,
            &r.remote_dir,
            &local,
            copy_limit,
        );
        let said = match &copied {
            Ok(()) => format!("copied back in {:.1} s", started.elapsed().as_secs_f64()),
            Err(e) => format!("not copied back: {e}"),
        };
        log.say(Some(&r.host.name), &said);
        counter.count(copied.is_ok());
        copied
    });
    counter.finish();
    let mut copies = copied.into_iter();
    let mut runs: Vec<HostRun> = Vec::new();
    let mut missing = Vec::new();
    for r in running {
        let copied = if r.lost {
            None
        } else {
            copies.next().flatten()
        };
        match read_run(options, r, copied, fleet_id, &runs) {
            Ok(run) => runs.push(run),
            Err(m) => {
                log.say(Some(&m.host), &format!("not counted: {}", m.reason));
                missing.push(m);
            }
        }
    }
    (runs, missing)
}

/// The run `r` left (copied back: `copied`), when it is this fleet's and not counted
/// yet among `runs`; else the missing host with why.
fn read_run(
    options: &FleetOptions,
    r: &Running,
    copied: Option<Result<(), copy::CopyError>>,
    fleet_id: &str,
    runs: &[HostRun],
) -> Result<HostRun, MissingHost> {
    let local = options.output.join("hosts").join(&r.host.name);
    let ended = r.ended.clone().unwrap_or_default();
    let miss = |dir: &Path, reason: String| MissingHost {
        host: r.host.name.clone(),
        source: dir.display().to_string(),
        reason,
    };
    let Some(copied) = copied else {
        return Err(miss(
            &local,
            format!("its run {ended}; its directory was not copied back"),
        ));
    };
    if let Err(e) = copied {
        return Err(miss(
            &local,
            format!("its run {ended}, and its run directory could not be copied back: {e}"),
        ));
    }
    let Some(dir) = crate::run_dir::newest(&local, |_| true) else {
        return Err(miss(
            &local,
            format!("its run {ended} and left no run directory"),
        ));
    };
    let results = match std::fs::read(dir.join(edbstress_report::run_files::RESULTS_JSON)) {
        Ok(bytes) => read_results(&bytes),
        Err(_) => {
            let why = format!("its run {ended} without results: {}", last_log_line(&dir));
            return Err(miss(&dir, why));
        }
    };
    let results =
        results.map_err(|e| miss(&dir, format!("its results.json is unreadable ({e})")))?;
    if results.fleet_id.as_deref() != Some(fleet_id) {
        let theirs = results.fleet_id.as_deref().unwrap_or("no fleet");
        return Err(miss(
            &dir,
            format!(
                "its results.json is a run of {theirs}, not of this fleet ({fleet_id}); it is \
                 not counted"
            ),
        ));
    }
    let Some(run_id) = results.run_id.clone() else {
        return Err(miss(
            &dir,
            "its results.json has no run id; it is not counted".into(),
        ));
    };
    if let Some(other) = runs
        .iter()
        .find(|o| o.results.run_id.as_deref() == Some(&run_id))
    {
        let why = format!(
            "its results.json is the run {run_id} that {} returned too; a run counts once",
            other.host
        );
        return Err(miss(&dir, why));
    }
    Ok(HostRun {
        host: r.host.name.clone(),
        source: dir.display().to_string(),
        results,
    })
}

/// Asks the runs the fleet lost sight of to stop (they may go on there), at most the
/// bound of sessions at once, each call bounded.
pub(super) fn stop_lost(options: &FleetOptions, running: &[Running], log: &FleetLog) {
    let lost: Vec<&Running> = running.iter().filter(|r| r.was_lost()).collect();
    map_bounded(&lost, options.max_ssh_sessions, |r| {
        log.say(Some(&r.host.name), "asking its run to stop");
        remote::stop(&options.ssh, &r.host, &r.remote_dir, STOP_LIMIT)
    });
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
