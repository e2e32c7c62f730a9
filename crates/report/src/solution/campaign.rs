//! The state file of a campaign (`campaign.json` in its directory): which steps are
//! finished, which one was running, where each step's runs are. `edbstress esrp run`
//! writes it after every change (whole, under a temporary name, renamed), so an
//! interrupted campaign resumes where it stopped; `esrp document` reads it.

use serde::{Deserialize, Serialize};

use crate::model::{TestType, Verdict};

/// Name of the state file in a campaign directory.
pub const STATE_FILE: &str = "campaign.json";

/// Version of the state file's layout.
pub const STATE_VERSION: u32 = 1;

/// A campaign's state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CampaignState {
    /// [`STATE_VERSION`].
    pub version: u32,
    /// The campaign's own id (`campaign-<uuid>`), given to every run it starts
    /// (`edbstress run --campaign-id`): the document counts only runs that carry it.
    /// Absent in state files of versions before campaign ids.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub id: Option<String>,
    /// The solution's name (from solution.toml).
    pub solution: String,
    /// Whether every step was shortened (`--rehearsal`).
    pub rehearsal: bool,
    /// When the campaign began (RFC 3339).
    pub created_at: String,
    /// The hosts (one for a single-host campaign).
    pub hosts: Vec<String>,
    /// The steps, in order.
    pub steps: Vec<StepState>,
}

/// One step of a campaign.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepState {
    /// The test.
    pub test: TestType,
    /// Pending, running or done.
    pub status: StepStatus,
    /// Its directory, relative to the campaign directory ("01-Stress").
    pub dir: String,
    /// The measured duration asked for, seconds (Stress and Performance).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_seconds: Option<f64>,
    /// Logs per instance (SoftRecovery).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub logs_to_replay: Option<u32>,
    /// How many times it was started.
    pub attempts: u32,
    /// Start of the last attempt (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub started_at: Option<String>,
    /// End of the finished attempt (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ended_at: Option<String>,
    /// The verdict of the finished step (Fail when any host failed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub verdict: Option<Verdict>,
    /// The PID of the process running it (to refuse a second campaign process while
    /// the first is still running it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<u32>,
}

/// Where a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Started and not finished: running now, or interrupted (redone on resume).
    Running,
    /// Finished: its runs wrote their results (passed or failed).
    Done,
}

impl StepStatus {
    /// "pending", "running", "done".
    pub fn label(self) -> &'static str {
        match self {
            StepStatus::Pending => "not started",
            StepStatus::Running => "unfinished (interrupted or still running)",
            StepStatus::Done => "done",
        }
    }
}

/// The prefix of a campaign id; the rest is a random UUID.
pub const CAMPAIGN_ID_PREFIX: &str = "campaign-";
