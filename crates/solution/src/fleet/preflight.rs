//! Before a fleet starts: is every host reachable, running edbstress in this version,
//! with its paths creatable and their free space known, and a clock close enough to
//! ours that one start time means one moment?

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::check_session::{self, CheckSession, Finished, Interrupted};
use super::progress::{FleetLog, Phase, PhaseCounter};
use super::sessions::map_bounded;
use super::{FleetError, FleetEvent, FleetHost, FleetOptions};
use crate::control_master::{ControlMasters, MasterError};
use crate::ssh::{Ssh, failure_of};

/// Why a host is not ready; each names the host, what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum HostCheckError {
    /// An ssh call did not end in time.
    #[error("{name}: {source}")]
    TimedOut {
        /// The host.
        name: String,
        /// The time-out.
        source: std::io::Error,
    },
    /// ssh could not be run here.
    #[error("cannot run ssh for {name}: {source}; is OpenSSH's client installed?")]
    NoSsh {
        /// The host.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// ssh could not reach the host or log in.
    #[error("{name}: {why}")]
    Unreachable {
        /// The host.
        name: String,
        /// ssh's failure.
        why: String,
    },
    /// edbstress is not there.
    #[error(
        "{name}: `{remote}` is not installed there ({why}); install edbstress there, or give \
         its path with --remote-edbstress"
    )]
    NotInstalled {
        /// The host.
        name: String,
        /// The remote binary.
        remote: String,
        /// ssh's failure.
        why: String,
    },
    /// `edbstress --version` failed there.
    #[error(
        "{name}: `{remote} --version` failed ({why}); install edbstress there, or give its \
         path with --remote-edbstress"
    )]
    VersionFailed {
        /// The host.
        name: String,
        /// The remote binary.
        remote: String,
        /// ssh's failure.
        why: String,
    },
    /// Another version there.
    #[error(
        "{name} runs {version}, this is {expected}: install the same edbstress on every host \
         (results of different versions are not comparable)"
    )]
    OtherVersion {
        /// The host.
        name: String,
        /// Its version.
        version: String,
        /// Ours.
        expected: String,
    },
    /// `date` gave no time.
    #[error(
        "{name}: `date +%s.%N` gave no time for the clock check ({why}); the host needs a \
         `date` that prints seconds with %N (GNU coreutils, BusyBox)"
    )]
    NoTime {
        /// The host.
        name: String,
        /// ssh's failure.
        why: String,
    },
    /// The clock is off.
    #[error(
        "{name}'s clock is {offset_s:+.3} s off ours (limit {limit_s:.3} s): the hosts would \
         not start together; synchronise the clocks (NTP, chrony) or raise --max-clock-offset"
    )]
    ClockOff {
        /// The host.
        name: String,
        /// Its offset, seconds.
        offset_s: f64,
        /// The limit, seconds.
        limit_s: f64,
    },
    /// The paths cannot be made or measured.
    #[error(
        "{name}: its paths cannot be created or measured ({why}); check --host …,db-path=/log-path= \
         and the run's paths"
    )]
    Paths {
        /// The host.
        name: String,
        /// ssh's failure.
        why: String,
    },
    /// The check's remote shell ended before answering.
    #[error(
        "{name}: the check's remote shell ended before answering ({why}); the login shell \
         there must run POSIX shell commands (sh, bash, dash, ksh, zsh)"
    )]
    CheckShell {
        /// The host.
        name: String,
        /// Its failure.
        why: String,
    },
    /// The check itself failed.
    #[error("{name}: the host check panicked")]
    Panicked {
        /// The host.
        name: String,
    },
    /// A path without free space.
    #[error("{name}: {} has no free space; free some, or give this host other paths", path.display())]
    NoSpace {
        /// The host.
        name: String,
        /// The path.
        path: PathBuf,
    },
}

/// Longest wait for one host's check (its whole session): a host that answers nothing
/// is named, not waited for.
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// What the check found on one host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCheck {
    /// The host.
    pub name: String,
    /// `edbstress --version` there.
    pub version: String,
    /// Its clock minus ours, seconds (measured over the check's open ssh session: the
    /// remote time against the middle of the round trip, of the sample with the
    /// shortest round trip).
    pub clock_offset_s: f64,
    /// That sample's round trip over the open session, seconds.
    pub round_trip_s: f64,
    /// Free bytes under each of its paths.
    pub free: Vec<(PathBuf, u64)>,
}

impl HostCheck {
    /// One line: the version, the clock, the round trip and the free space.
    pub fn summary(&self) -> String {
        let free: Vec<String> = self
            .free
            .iter()
            .map(|(p, b)| {
                format!(
                    "{} {} free",
                    p.display(),
                    edbstress_io::ByteSize(*b).approx()
                )
            })
            .collect();
        format!(
            "{}, clock {:+.3} s, round trip {:.3} s; {}",
            self.version,
            self.clock_offset_s,
            self.round_trip_s,
            free.join(", ")
        )
    }
}

/// Checks every host, at most the bound of ssh sessions at once; every problem named,
/// or nothing starts.
pub(super) fn check_all(
    options: &FleetOptions,
    masters: Option<&ControlMasters>,
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
    log: &FleetLog,
) -> Result<(), FleetError> {
    let expected = format!("edbstress {}", env!("CARGO_PKG_VERSION"));
    let counter = PhaseCounter::new(Phase::Preflight, options.hosts.len(), events, log);
    let checks = map_bounded(&options.hosts, options.max_ssh_sessions, |h| {
        let check = open_master(options, masters, h, log).and_then(|()| {
            let paths = super::host_paths(h, &options.run_args);
            check_host(
                &options.ssh,
                h,
                &options.remote_edbstress,
                &expected,
                &paths,
                options.max_clock_offset,
            )
        });
        match &check {
            Ok(c) => {
                log.say(Some(&h.name), &c.summary());
                events(FleetEvent::Checked(c));
            }
            Err(e) => log.say(Some(&h.name), &format!("not ready: {e}")),
        }
        counter.count(check.is_ok());
        check
    });
    counter.finish();
    let problems: Vec<HostCheckError> = checks
        .into_iter()
        .zip(&options.hosts)
        .filter_map(|(c, h)| match c {
            Some(Ok(_)) => None,
            Some(Err(e)) => Some(e),
            None => Some(HostCheckError::Panicked {
                name: h.name.clone(),
            }),
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(FleetError::NotReady(problems))
    }
}

/// Opens the host's shared connection when the fleet shares them: the one handshake
/// of this host's sessions (a failure is the host's, told as a check's would be).
fn open_master(
    options: &FleetOptions,
    masters: Option<&ControlMasters>,
    h: &FleetHost,
    log: &FleetLog,
) -> Result<(), HostCheckError> {
    let Some(masters) = masters else {
        return Ok(());
    };
    // Several hosts through one destination would put every one's run on one
    // connection, past sshd's MaxSessions (10 a connection): each connects on its own.
    if options.hosts.iter().filter(|o| o.dest == h.dest).count() > 1 {
        log.say(
            Some(&h.name),
            "its destination is shared with other hosts: its sessions connect one by one",
        );
        return Ok(());
    }
    let name = h.name.clone();
    match masters.open(&options.ssh, &h.dest, CHECK_LIMIT) {
        Ok(true) => Ok(()),
        Ok(false) => {
            log.say(
                Some(&h.name),
                "its ssh configuration or options set ControlMaster/ControlPath: its sessions \
                 connect as they say",
            );
            Ok(())
        }
        Err(MasterError::Spawn(source)) => Err(HostCheckError::NoSsh { name, source }),
        Err(MasterError::TimedOut(source)) => Err(HostCheckError::TimedOut { name, source }),
        Err(MasterError::Failed { code, stderr }) => Err(HostCheckError::Unreachable {
            name,
            why: failure_of(&h.dest, code, &stderr),
        }),
    }
}

/// Clock samples taken over the check's session; the one with the shortest round trip
/// is kept (its remote time is the least uncertain).
const CLOCK_SAMPLES: usize = 5;

/// Checks `host` over one ssh session: its edbstress (`remote_edbstress`) must say
/// `expected_version`, its clock be within `max_offset` of ours, and its `paths`
/// creatable with free space. The error names the host, what is wrong and what to do.
pub fn check_host(
    ssh: &Ssh,
    host: &FleetHost,
    remote_edbstress: &str,
    expected_version: &str,
    paths: &[PathBuf],
    max_offset: Duration,
) -> Result<HostCheck, HostCheckError> {
    let name = &host.name;
    let script = check_session::script(remote_edbstress, paths);
    let mut session =
        CheckSession::open(ssh, &host.dest, &script, CHECK_LIMIT).map_err(|source| {
            HostCheckError::NoSsh {
                name: name.clone(),
                source,
            }
        })?;
    let ended = |session: CheckSession, step: &str| -> HostCheckError {
        session_ended(host, session.finish(), step)
    };
    let version = match session.read_block("version") {
        Ok(block) => block,
        Err(e) => return Err(interrupted(host, session, e, "version")),
    };
    if version.status != 0 {
        let end = session.finish();
        let (name, remote) = (name.clone(), remote_edbstress.to_string());
        let why = failure_of(&host.dest, Some(version.status), &end.of_step("version"));
        return Err(match version.status {
            126 | 127 => HostCheckError::NotInstalled { name, remote, why },
            _ => HostCheckError::VersionFailed { name, remote, why },
        });
    }
    let version = version.lines.join(" ").trim().to_string();
    if version != expected_version {
        session.finish();
        return Err(HostCheckError::OtherVersion {
            name: name.clone(),
            version,
            expected: expected_version.into(),
        });
    }
    // NTP-style over the open session: the remote time against the middle of the
    // round trip, from the sample with the shortest round trip.
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..CLOCK_SAMPLES {
        let sample = match session.clock_sample() {
            Ok(s) => s,
            Err(Interrupted::Closed) => return Err(ended(session, "time")),
            Err(e) => return Err(interrupted(host, session, e, "time")),
        };
        let Ok(remote) = sample.answer.parse::<f64>() else {
            session.finish();
            return Err(HostCheckError::NoTime {
                name: name.clone(),
                why: format!("it answered {:?}", sample.answer),
            });
        };
        let middle = (unix_seconds(sample.sent) + unix_seconds(sample.received)) / 2.0;
        let rtt = sample.round_trip.as_secs_f64();
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((remote - middle, rtt));
        }
    }
    let (clock_offset_s, round_trip_s) = best.unwrap_or_default();
    if clock_offset_s.abs() > max_offset.as_secs_f64() {
        session.finish();
        return Err(HostCheckError::ClockOff {
            name: name.clone(),
            offset_s: clock_offset_s,
            limit_s: max_offset.as_secs_f64(),
        });
    }
    let free = if paths.is_empty() {
        session.finish();
        Vec::new()
    } else {
        let block = match session.paths() {
            Ok(b) => b,
            Err(e) => return Err(interrupted(host, session, e, "paths")),
        };
        let end = session.finish();
        if block.status != 0 {
            return Err(HostCheckError::Paths {
                name: name.clone(),
                why: failure_of(&host.dest, Some(block.status), &end.of_step("paths")),
            });
        }
        free_space(name, paths, &block.lines)?
    };
    Ok(HostCheck {
        name: name.clone(),
        version,
        clock_offset_s,
        round_trip_s,
        free,
    })
}

/// The free bytes under each path, from `df -Pk`'s lines (a header, then one per path).
fn free_space(
    name: &str,
    paths: &[PathBuf],
    df: &[String],
) -> Result<Vec<(PathBuf, u64)>, HostCheckError> {
    let mut free = Vec::new();
    for (path, line) in paths.iter().zip(df.iter().skip(1)) {
        let available_kb: u64 = line
            .split_whitespace()
            .nth(3)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if available_kb == 0 {
            return Err(HostCheckError::NoSpace {
                name: name.to_string(),
                path: path.clone(),
            });
        }
        free.push((path.clone(), available_kb * 1024));
    }
    Ok(free)
}

/// The error of a session that did not answer `step`: timed out, or ended.
fn interrupted(
    host: &FleetHost,
    session: CheckSession,
    why: Interrupted,
    step: &str,
) -> HostCheckError {
    match why {
        Interrupted::TimedOut(source) => {
            session.finish();
            HostCheckError::TimedOut {
                name: host.name.clone(),
                source,
            }
        }
        Interrupted::Closed => session_ended(host, session.finish(), step),
    }
}

/// The error of a session that ended before answering `step`: ssh's failure (it could
/// not connect, log in, or the connection was lost), or the remote shell's.
fn session_ended(host: &FleetHost, end: Finished, step: &str) -> HostCheckError {
    let name = host.name.clone();
    let why = failure_of(&host.dest, end.code, &end.without_marks());
    match (end.code, step) {
        (Some(255) | None, _) => HostCheckError::Unreachable { name, why },
        (_, "time") => HostCheckError::NoTime { name, why },
        _ => HostCheckError::CheckShell { name, why },
    }
}

fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
