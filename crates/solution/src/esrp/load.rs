//! Reading a campaign directory back for its document: the state file and every run
//! directory of every step (`NN-Test/RUN/` on one host, `NN-Test/hosts/NAME/RUN/`
//! through a fleet). Interrupted attempts under `interrupted/` are left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edbstress_report::aggregate::HostRun;
use edbstress_report::read_results;
use edbstress_report::solution::campaign::STATE_FILE;
use edbstress_report::solution::{CampaignRuns, CampaignState, StepKey};

/// Reads the campaign in `dir`.
pub fn load_campaign(dir: &Path) -> Result<CampaignRuns, String> {
    let path = dir.join(STATE_FILE);
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "{} is not a campaign directory: cannot read {STATE_FILE} ({e}); give the \
             --campaign directory of `edbstress esrp run`",
            dir.display()
        )
    })?;
    let state: CampaignState = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a readable campaign state: {e}", path.display()))?;
    let mut steps = BTreeMap::new();
    for step in &state.steps {
        let step_dir = dir.join(&step.dir);
        let mut runs = Vec::new();
        let hosts_dir = step_dir.join("hosts");
        if hosts_dir.is_dir() {
            for host in sorted_dirs(&hosts_dir) {
                let name = host
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if let Some(run) = newest_results(&host) {
                    runs.push(read_run(&run, Some(name))?);
                }
            }
        } else if let Some(run) = newest_results(&step_dir) {
            runs.push(read_run(&run, None)?);
        }
        steps.insert(StepKey::of(step.test), runs);
    }
    Ok(CampaignRuns {
        dir: dir.display().to_string(),
        state,
        steps,
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

/// The newest run directory in `dir` that has a results.json.
fn newest_results(dir: &Path) -> Option<PathBuf> {
    sorted_dirs(dir)
        .into_iter()
        .rev()
        .find(|d| d.join("results.json").is_file())
}

fn read_run(dir: &Path, host: Option<String>) -> Result<HostRun, String> {
    let path = dir.join("results.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut results =
        read_results(&bytes).map_err(|e| format!("{} is unreadable: {e}", path.display()))?;
    results.rejudge();
    Ok(HostRun {
        host: host.unwrap_or_else(|| results.host.hostname.clone()),
        source: dir.display().to_string(),
        results,
    })
}
