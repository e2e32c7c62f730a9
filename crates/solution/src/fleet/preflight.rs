//! Before a fleet starts: is every host reachable, running edbstress in this version,
//! with its paths creatable and their free space known, and a clock close enough to
//! ours that one start time means one moment?

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::FleetHost;
use crate::ssh::{Ssh, command_line, failure_to};

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
) -> Result<HostCheck, String> {
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
        return Err(match out.status.code() {
            Some(255) => format!("{name}: {}", failure_to(dest, &out)),
            Some(126 | 127) => format!(
                "{name}: `{remote_edbstress}` is not installed there ({}); install edbstress \
                 there, or give its path with --remote-edbstress",
                failure_to(dest, &out)
            ),
            _ => format!(
                "{name}: `{remote_edbstress} --version` failed ({}); install edbstress there, \
                 or give its path with --remote-edbstress",
                failure_to(dest, &out)
            ),
        });
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if version != expected_version {
        return Err(format!(
            "{name} runs {version}, this is {expected_version}: install the same edbstress on every host (results of different versions are not comparable)"
        ));
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
            .map_err(|_| {
                format!(
                    "{name}: `date +%s.%N` gave no time ({})",
                    failure_to(dest, &out)
                )
            })?;
        let offset = remote - (before + after) / 2.0;
        let rtt = rtt.as_secs_f64();
        if best.is_none_or(|(_, r)| rtt < r) {
            best = Some((offset, rtt));
        }
    }
    let (clock_offset_s, round_trip_s) = best.unwrap_or_default();
    if clock_offset_s.abs() > max_offset.as_secs_f64() {
        return Err(format!(
            "{name}'s clock is {clock_offset_s:+.3} s off ours (limit {:.3} s): the hosts would not start together; synchronise the clocks (NTP, chrony) or raise --max-clock-offset",
            max_offset.as_secs_f64()
        ));
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
            return Err(format!(
                "{name}: its paths cannot be created or measured ({}); check --host …,db-path=/log-path= and the run's paths",
                failure_to(dest, &out)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for (path, line) in paths.iter().zip(text.lines().skip(1)) {
            let available_kb: u64 = line
                .split_whitespace()
                .nth(3)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if available_kb == 0 {
                return Err(format!(
                    "{name}: {} has no free space; free some, or give this host other paths",
                    path.display()
                ));
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
fn ssh_error(name: &str, e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::TimedOut {
        format!("{name}: {e}")
    } else {
        format!("cannot run ssh for {name}: {e}; is OpenSSH's client installed?")
    }
}

fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
