//! Before a fleet starts: is every host reachable, running edbstress in this version,
//! with its paths creatable and their free space known, and a clock close enough to
//! ours that one start time means one moment?

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::progress::{FleetLog, Phase, PhaseCounter};
use super::sessions::map_bounded;
use super::{FleetError, FleetEvent, FleetHost, FleetOptions};
use crate::ssh::{Ssh, command_line, failure_to};

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
    #[error("{name}: `date +%s.%N` gave no time ({why})")]
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

/// Longest wait for one check over ssh: a host that answers nothing is named, not
/// waited for.
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// What the check found on one host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCheck {
    /// The host.
    pub name: String,
    /// `edbstress --version` there.
    pub version: String,
    /// Its clock minus ours, seconds (measured over ssh: the remote time against the
    /// middle of the round trip).
    pub clock_offset_s: f64,
    /// The ssh round trip, seconds.
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
    events: &(dyn Fn(FleetEvent<'_>) + Sync),
    log: &FleetLog,
) -> Result<(), FleetError> {
    let expected = format!("edbstress {}", env!("CARGO_PKG_VERSION"));
    let counter = PhaseCounter::new(Phase::Preflight, options.hosts.len(), events, log);
    let checks = map_bounded(&options.hosts, options.max_ssh_sessions, |h| {
        let paths = super::host_paths(h, &options.run_args);
        let check = check_host(
            &options.ssh,
            h,
            &options.remote_edbstress,
            &expected,
            &paths,
            options.max_clock_offset,
        );
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

/// Checks `host`: its edbstress (`remote_edbstress`) must say `expected_version`, its
/// `paths` must be creatable, and its clock within `max_offset` of ours. The error
/// names the host, what is wrong and what to do.
pub fn check_host(
    ssh: &Ssh,
    host: &FleetHost,
    remote_edbstress: &str,
    expected_version: &str,
    paths: &[PathBuf],
    max_offset: Duration,
) -> Result<HostCheck, HostCheckError> {
    let name = &host.name;
    let dest = &host.dest;
    let (out, _) = ssh
        .run_within(
            dest,
            &command_line(&[remote_edbstress.to_string(), "--version".into()]),
            None,
            CHECK_LIMIT,
        )
        .map_err(|e| ssh_error(name, e))?;
    if !out.status.success() {
        let (name, remote, why) = (
            name.clone(),
            remote_edbstress.to_string(),
            failure_to(dest, &out),
        );
        return Err(match out.status.code() {
            Some(255) => HostCheckError::Unreachable { name, why },
            Some(126 | 127) => HostCheckError::NotInstalled { name, remote, why },
            _ => HostCheckError::VersionFailed { name, remote, why },
        });
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if version != expected_version {
        return Err(HostCheckError::OtherVersion {
            name: name.clone(),
            version,
            expected: expected_version.into(),
        });
    }
    // The clock: three samples, the one with the shortest round trip.
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..3 {
        let before = unix_seconds();
        let (out, rtt) = ssh
            .run_within(dest, "date +%s.%N", None, CHECK_LIMIT)
            .map_err(|e| ssh_error(name, e))?;
        let after = unix_seconds();
        let remote: f64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| HostCheckError::NoTime {
                name: name.clone(),
                why: failure_to(dest, &out),
            })?;
        let offset = remote - (before + after) / 2.0;
        let rtt = rtt.as_secs_f64();
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    let (clock_offset_s, round_trip_s) = best.unwrap_or_default();
    if clock_offset_s.abs() > max_offset.as_secs_f64() {
        return Err(HostCheckError::ClockOff {
            name: name.clone(),
            offset_s: clock_offset_s,
            limit_s: max_offset.as_secs_f64(),
        });
    }
    let mut free = Vec::new();
    if !paths.is_empty() {
        let mut words = vec!["mkdir".to_string(), "-p".to_string()];
        words.extend(paths.iter().map(|p| p.display().to_string()));
        let mut df = vec!["df".to_string(), "-Pk".to_string()];
        df.extend(paths.iter().map(|p| p.display().to_string()));
        let line = format!("{} && {}", command_line(&words), command_line(&df));
        let (out, _) = ssh
            .run_within(dest, &line, None, CHECK_LIMIT)
            .map_err(|e| ssh_error(name, e))?;
        if !out.status.success() {
            return Err(HostCheckError::Paths {
                name: name.clone(),
                why: failure_to(dest, &out),
            });
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for (path, line) in paths.iter().zip(text.lines().skip(1)) {
            let available_kb: u64 = line
                .split_whitespace()
                .nth(3)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if available_kb == 0 {
                return Err(HostCheckError::NoSpace {
                    name: name.clone(),
                    path: path.clone(),
                });
            }
            free.push((path.clone(), available_kb * 1024));
        }
    }
    Ok(HostCheck {
        name: name.clone(),
        version,
        clock_offset_s,
        round_trip_s,
        free,
    })
}

/// An ssh call that could not be made or did not end in time.
fn ssh_error(name: &str, source: std::io::Error) -> HostCheckError {
    let name = name.to_string();
    if source.kind() == std::io::ErrorKind::TimedOut {
        HostCheckError::TimedOut { name, source }
    } else {
        HostCheckError::NoSsh { name, source }
    }
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
