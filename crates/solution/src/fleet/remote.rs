//! What the fleet does on a host besides copying back: make the fleet's directory there
//! (new, exclusively), ship the configuration file into it, the shell line that runs
//! edbstress, and stopping that run.
//!
//! The host's results directory may be writable by others: the fleet's directory in it is
//! named by the fleet's random id and made with `mkdir` of the leaf (failing if anything
//! has that name), and the files in it are created with the shell's noclobber (`set -C`:
//! `>` fails on anything already there, a link included), so nothing is written through
//! a link someone left there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use edbstress_workload::config::ConfigFile;

use super::{FleetHost, FleetOptions, PID_FILE};
use crate::ssh::{Ssh, command_line, failure_to, shell_quote};

/// Name of the shipped configuration file in the fleet's directory on a host.
const CONFIG_FILE: &str = "config.toml";

/// The line the remote shell writes to standard error once it recorded the PID, just
/// before edbstress replaces it: the host's run has started (its session no longer
/// counts against the bound on sessions opening).
pub(super) const START_MARK: &str = "@edbstress-fleet: the run starts@";

/// Why something on a host could not be done.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// ssh failed or did not end in time.
    #[error("{name}: {source}")]
    Ssh {
        /// The host.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// The fleet's directory could not be made there.
    #[error(
        "{name}: cannot make the fleet's directory {dir} there{} ({why})",
        and_config(.with_config)
    )]
    FleetDir {
        /// The host.
        name: String,
        /// The directory.
        dir: String,
        /// Whether the configuration file was to be copied too.
        with_config: bool,
        /// ssh's failure.
        why: String,
    },
    /// The host's settings cannot be written as run options.
    #[error("{0}")]
    Settings(String),
}

fn and_config(with_config: &bool) -> &'static str {
    if *with_config {
        " and copy the configuration file into it"
    } else {
        ""
    }
}

/// Makes `remote_dir` on the host, new (its parents as needed), and writes `config`
/// into it when given; returns the configuration's remote path.
pub(super) fn make_fleet_dir(
    ssh: &Ssh,
    h: &FleetHost,
    remote_dir: &str,
    config: Option<&[u8]>,
    limit: Duration,
) -> Result<Option<String>, RemoteError> {
    let parent = Path::new(remote_dir)
        .parent()
        .map(|p| p.display().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".into());
    let mut line = format!(
        "mkdir -p -- {} && mkdir -- {}",
        shell_quote(&parent),
        shell_quote(remote_dir)
    );
    let config_path = config.map(|_| format!("{remote_dir}/{CONFIG_FILE}"));
    if let Some(path) = &config_path {
        line.push_str(&format!(" && set -C && cat > {}", shell_quote(path)));
    }
    let (out, _) = ssh
        .run_within(&h.dest, &line, config.map(<[u8]>::to_vec), limit)
        .map_err(|source| RemoteError::Ssh {
            name: h.name.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(RemoteError::FleetDir {
            name: h.name.clone(),
            dir: remote_dir.into(),
            with_config: config.is_some(),
            why: failure_to(&h.dest, &out),
        });
    }
    Ok(config_path)
}

/// The remote shell line of one host: record the shell's PID in the fleet's directory
/// (made just before; noclobber), say [`START_MARK`], then run (edbstress replaces the
/// shell, keeping its PID).
pub(super) fn run_line(
    options: &FleetOptions,
    h: &FleetHost,
    mailboxes: Option<u64>,
    remote_dir: &str,
    start_at: &str,
    fleet_id: &str,
    config: Option<String>,
) -> Result<String, RemoteError> {
    let mut args: Vec<String> = vec![options.remote_edbstress.clone(), "run".into()];
    if let Some(config) = config {
        args.extend(["--config".into(), config]);
    }
    args.extend(super::host_args(options, h));
    // The settings the fleet gives each host, written by the settings table.
    let per_host = ConfigFile {
        mailboxes,
        results_dir: Some(PathBuf::from(remote_dir)),
        ..ConfigFile::default()
    };
    args.extend(
        per_host
            .to_args()
            .map_err(|e| RemoteError::Settings(e.to_string()))?,
    );
    args.extend([
        "--start-at".into(),
        start_at.to_string(),
        "--host-name".into(),
        h.name.clone(),
        "--fleet-id".into(),
        fleet_id.to_string(),
    ]);
    if let Some(campaign) = &options.campaign_id {
        args.extend(["--campaign-id".into(), campaign.clone()]);
    }
    let pid = command_line(&[format!("{remote_dir}/{PID_FILE}")]);
    Ok(format!(
        "set -C && echo $$ > {pid} && echo {} >&2 && exec {}",
        shell_quote(START_MARK),
        command_line(&args)
    ))
}

/// Asks the run in `remote_dir` to stop (SIGINT: it ends cleanly, writing its results);
/// waits at most `limit` for ssh.
pub(super) fn stop(ssh: &Ssh, h: &FleetHost, remote_dir: &str, limit: Duration) {
    let pid = format!("{remote_dir}/{PID_FILE}");
    let line = format!("kill -INT \"$(cat {})\"", shell_quote(&pid));
    match ssh.run_within(&h.dest, &line, None, limit) {
        Ok((out, _)) if out.status.success() => {}
        Ok((out, _)) => tracing::warn!("cannot stop {}: {}", h.name, failure_to(&h.dest, &out)),
        Err(e) => tracing::warn!("cannot stop {}: {e}", h.name),
    }
}
