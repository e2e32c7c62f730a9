//! Reading a campaign directory back for its document: the state file and every run
//! directory of every step (`NN-Test/RUN/` on one host, `NN-Test/hosts/NAME/RUN/`
//! through a fleet). Interrupted attempts under `interrupted/` are left out. A run
//! counts only when it carries the campaign's id and its step's test type, once by its
//! run id (a copy under another name is not a second run); every other run directory
//! found is named with the reason it was not counted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edbstress_report::aggregate::HostRun;
use edbstress_report::solution::campaign::STATE_FILE;
use edbstress_report::solution::{CampaignRuns, CampaignState, RejectedRun, StepKey};
use edbstress_report::{read_results, run_files};

/// Why a campaign cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No campaign state in the directory.
    #[error(
        "{} is not a campaign directory: cannot read {STATE_FILE} ({source}); give the \
         --campaign directory of `edbstress esrp run`",
        dir.display()
    )]
    NotACampaign {
        /// The directory given.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A state file that does not parse.
    #[error("{} is not a readable campaign state: {source}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
    /// A run's results cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadResults {
        /// The results file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A run's results that are not a results file.
    #[error("{} is unreadable: {why}", path.display())]
    BadResults {
        /// The results file.
        path: PathBuf,
        /// What the reader said.
        why: String,
    },
}

/// Reads the campaign in `dir`.
pub fn load_campaign(dir: &Path) -> Result<CampaignRuns, LoadError> {
    let path = dir.join(STATE_FILE);
    let bytes = std::fs::read(&path).map_err(|source| LoadError::NotACampaign {
        dir: dir.to_path_buf(),
        source,
    })?;
    let state: CampaignState =
        serde_json::from_slice(&bytes).map_err(|source| LoadError::State { path, source })?;
    let mut steps = BTreeMap::new();
    let mut rejected = Vec::new();
    let mut counted: BTreeMap<String, String> = BTreeMap::new();
    for step in &state.steps {
        let step_dir = dir.join(&step.dir);
        // (host, run directory) of every run found in the step, newest last per host.
        let mut found: Vec<(Option<String>, PathBuf)> = Vec::new();
        let hosts_dir = step_dir.join("hosts");
        if hosts_dir.is_dir() {
            for host in sorted_dirs(&hosts_dir) {
                let name = host
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                for run in runs_in(&host) {
                    found.push((Some(name.clone()), run));
                }
            }
        } else {
            for run in runs_in(&step_dir) {
                found.push((None, run));
            }
        }
        let mut accepted: Vec<HostRun> = Vec::new();
        // Newest first: a host's newest run of the step is the one counted.
        for (host, run) in found.into_iter().rev() {
            let r = read_run(&run, host)?;
            let reject = |reason: String| RejectedRun {
                source: r.source.clone(),
                reason,
            };
            let why = if r.results.test_type != step.test {
                Some(format!(
                    "it is a {} run in the {} step",
                    r.results.test_type.label(),
                    step.test.label()
                ))
            } else if state.id.is_some() && r.results.campaign_id != state.id {
                Some(match &r.results.campaign_id {
                    Some(other) => format!(
                        "it was started for campaign {other}, not this campaign ({})",
                        state.id.as_deref().unwrap_or_default()
                    ),
                    None => format!(
                        "it carries no campaign id; this campaign's runs carry {}",
                        state.id.as_deref().unwrap_or_default()
                    ),
                })
            } else if let Some(first) = r
                .results
                .run_id
                .as_ref()
                .and_then(|id| counted.get(id).map(|f| (id, f)))
            {
                Some(format!(
                    "it is run {} again, already counted from {}",
                    first.0, first.1
                ))
            } else if accepted.iter().any(|a| a.host == r.host) {
                Some(format!(
                    "a newer {} run of {} in the same step is counted",
                    step.test.label(),
                    r.host
                ))
            } else {
                None
            };
            match why {
                Some(reason) => rejected.push(reject(reason)),
                None => {
                    if let Some(id) = &r.results.run_id {
                        counted.insert(id.clone(), r.source.clone());
                    }
                    accepted.push(r);
                }
            }
        }
        accepted.sort_by(|a, b| a.host.cmp(&b.host));
        steps.insert(StepKey::of(step.test), accepted);
    }
    Ok(CampaignRuns {
        dir: dir.display().to_string(),
        state,
        steps,
        rejected,
    })
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// The run directories in `dir` that have a results.json, oldest first (run
/// directory names end in their start time).
fn runs_in(dir: &Path) -> Vec<PathBuf> {
    sorted_dirs(dir)
        .into_iter()
        .filter(|d| d.join(run_files::RESULTS_JSON).is_file())
        .collect()
}

fn read_run(dir: &Path, host: Option<String>) -> Result<HostRun, LoadError> {
    let path = dir.join(run_files::RESULTS_JSON);
    let bytes = std::fs::read(&path).map_err(|source| LoadError::ReadResults {
        path: path.clone(),
        source,
    })?;
    let mut results = read_results(&bytes).map_err(|why| LoadError::BadResults { path, why })?;
    results.rejudge();
    Ok(HostRun {
        host: host.unwrap_or_else(|| results.host.hostname.clone()),
        source: dir.display().to_string(),
        results,
    })
}
