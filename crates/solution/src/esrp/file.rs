//! `solution.toml`: the vendor's texts and the solution ([`SolutionInfo`]), how the
//! campaign runs (`[campaign]`), and optionally the hosts (`[fleet]`, as for `edbstress
//! fleet`). A long text may name a Markdown file next to it (`features = "features.md"`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use edbstress_report::solution::{
    CustomerProfile, DeploymentBytes, Revision, SolutionInfo, TestedDeployment,
};
use edbstress_workload::units::parse_duration;
use serde::Deserialize;

use crate::fleet::FleetFile;

/// The whole file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawFile {
    solution: RawTexts,
    profile: CustomerProfile,
    deployment: TestedDeployment,
    campaign: CampaignSettings,
    fleet: Option<toml::Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawTexts {
    name: String,
    vendor: String,
    author: String,
    tested_date: String,
    revisions: Vec<Revision>,
    additional_information: String,
    contact: String,
    features: String,
    description: String,
    best_practices: String,
    backup_strategy: String,
    conclusion: String,
}

/// How the campaign runs (`[campaign]`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CampaignSettings {
    /// Database directories (single host; fleet hosts may have their own).
    pub db_paths: Vec<PathBuf>,
    /// Log directories.
    pub log_paths: Vec<PathBuf>,
    /// An edbstress configuration file every run gets (`--config`), relative to
    /// solution.toml.
    pub run_config: Option<PathBuf>,
    /// Further `edbstress run` options for every run.
    pub run_options: Vec<String>,
    /// Stress duration ("24h").
    pub stress: String,
    /// Performance duration ("2h").
    pub performance: String,
    /// SoftRecovery: logs per instance.
    pub logs_to_replay: u32,
    /// The shortened steps of `--rehearsal`.
    pub rehearsal: RehearsalSettings,
}

impl Default for CampaignSettings {
    fn default() -> Self {
        CampaignSettings {
            db_paths: Vec::new(),
            log_paths: Vec::new(),
            run_config: None,
            run_options: Vec::new(),
            stress: "24h".into(),
            performance: "2h".into(),
            logs_to_replay: 500,
            rehearsal: RehearsalSettings::default(),
        }
    }
}

/// `[campaign.rehearsal]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RehearsalSettings {
    /// Stress duration of a rehearsal.
    pub stress: String,
    /// Performance duration of a rehearsal.
    pub performance: String,
    /// Logs per instance of a rehearsal's SoftRecovery.
    pub logs_to_replay: u32,
}

impl Default for RehearsalSettings {
    fn default() -> Self {
        RehearsalSettings {
            stress: "10m".into(),
            performance: "5m".into(),
            logs_to_replay: 50,
        }
    }
}

/// The deployment's sizes in bytes. GB and TB are counted as the ESRP documents
/// count them, in 2^30 and 2^40 bytes; "N/A" or an empty text is no size; anything
/// else that is not a size is refused with the field named.
fn deployment_bytes(
    path: &Path,
    d: &TestedDeployment,
) -> Result<DeploymentBytes, SolutionFileError> {
    let read = |field: &'static str, v: &str| -> Result<Option<u64>, SolutionFileError> {
        let t = v.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("n/a") {
            return Ok(None);
        }
        capacity_bytes(t)
            .map(Some)
            .ok_or_else(|| SolutionFileError::NotACapacity {
                path: path.to_path_buf(),
                field,
                value: v.to_string(),
            })
    };
    Ok(DeploymentBytes {
        database_lun: read("database_lun_size", &d.database_lun_size)?,
        log_lun: read("log_lun_size", &d.log_lun_size)?,
        raw: read("raw_capacity", &d.raw_capacity)?,
        formatted: read("formatted_capacity", &d.formatted_capacity)?,
    })
}

/// "1958 GB", "39.46 TB", "81,776.64 GB", "512 MiB" in bytes (KB to TB binary, as
/// KiB to TiB), rounded to a byte; None when it is not a number and a unit.
pub fn capacity_bytes(text: &str) -> Option<u64> {
    let t = text.trim().replace(',', "");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "kb" | "kib" | "k" => 10,
        "mb" | "mib" | "m" => 20,
        "gb" | "gib" | "g" => 30,
        "tb" | "tib" | "t" => 40,
        "pb" | "pib" | "p" => 50,
        _ => return None,
    };
    let bytes = value * (1u64 << shift) as f64;
    (bytes.is_finite() && bytes < u64::MAX as f64).then(|| bytes.round() as u64)
}

/// A loaded solution.toml.
#[derive(Clone, Debug)]
pub struct SolutionFile {
    /// Where it was read.
    pub path: PathBuf,
    /// Texts, profile, deployment (long texts read from their files).
    pub info: SolutionInfo,
    /// The campaign settings (`run_config` made absolute).
    pub campaign: CampaignSettings,
    /// The `[fleet]` table: the campaign runs on these hosts through `edbstress fleet`.
    pub fleet: Option<FleetFile>,
}

/// What one step is asked to do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepPlan {
    /// Measured duration (Stress, Performance).
    pub duration: Option<Duration>,
    /// Logs per instance (SoftRecovery).
    pub logs_to_replay: Option<u32>,
    /// Performance: the thread count the Stress step's auto-tuning chose (the fewest
    /// over the servers), which it runs at as Jetstress does; None to tune again.
    pub threads: Option<u32>,
}

/// Why a solution file cannot be used; each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SolutionFileError {
    /// A deployment capacity that is not a size.
    #[error(
        "{}: deployment.{field} = \"{value}\" is not a size; write it as \"1958 GB\" or \
         \"39.46 TB\" (GB and TB of 2^30 and 2^40 bytes, as the ESRP documents count \
         them), \"N/A\", or leave it out",
        path.display()
    )]
    NotACapacity {
        /// The solution file.
        path: PathBuf,
        /// The deployment field.
        field: &'static str,
        /// The text given.
        value: String,
    },
    /// The file cannot be read.
    #[error(
        "cannot read {}: {source} (write one with `edbstress esrp init {}`)",
        path.display(),
        path.display()
    )]
    Read {
        /// The solution file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Not TOML of a solution file.
    #[error("{} is not a valid solution file: {source}", path.display())]
    Toml {
        /// The solution file.
        path: PathBuf,
        /// What the parser said.
        source: Box<toml::de::Error>,
    },
    /// A text field naming a Markdown file that cannot be read.
    #[error(
        "{}: solution.{field} names {}, which cannot be read: {source}",
        path.display(),
        file.display()
    )]
    LongText {
        /// The solution file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// The file it names.
        file: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A campaign duration that is not a duration.
    #[error("{}: {what}: {source}", path.display())]
    Duration {
        /// The solution file.
        path: PathBuf,
        /// The key.
        what: &'static str,
        /// What is wrong with it.
        source: edbstress_workload::units::ValueError,
    },
    /// A customer profile with a zero count.
    #[error(
        "{}: [profile] needs mailboxes, servers, databases_per_server and copies of at least 1",
        path.display()
    )]
    EmptyProfile {
        /// The solution file.
        path: PathBuf,
    },
    /// A `[fleet]` table that is not a fleet.
    #[error("the [fleet] table of {}: {source}", path.display())]
    Fleet {
        /// The solution file.
        path: PathBuf,
        /// What the parser said.
        source: Box<toml::de::Error>,
    },
    /// No directories under test for a campaign on this host.
    #[error(
        "{}: [campaign] needs db_paths and log_paths (the directories under test)",
        path.display()
    )]
    NoPaths {
        /// The solution file.
        path: PathBuf,
    },
}

impl SolutionFile {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<SolutionFile, SolutionFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| SolutionFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let raw: RawFile = toml::from_str(&text).map_err(|source| SolutionFileError::Toml {
            path: path.to_path_buf(),
            source: Box::new(source),
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let long = |field: &'static str, v: &str| -> Result<String, SolutionFileError> {
            let t = v.trim();
            if t.ends_with(".md") && !t.contains('\n') {
                let file = base.join(t);
                std::fs::read_to_string(&file).map_err(|source| SolutionFileError::LongText {
                    path: path.to_path_buf(),
                    field,
                    file,
                    source,
                })
            } else {
                Ok(v.to_string())
            }
        };
        let t = &raw.solution;
        let info = SolutionInfo {
            name: t.name.clone(),
            vendor: t.vendor.clone(),
            author: t.author.clone(),
            tested_date: t.tested_date.clone(),
            revisions: t.revisions.clone(),
            additional_information: long("additional_information", &t.additional_information)?,
            contact: long("contact", &t.contact)?,
            features: long("features", &t.features)?,
            description: long("description", &t.description)?,
            best_practices: long("best_practices", &t.best_practices)?,
            backup_strategy: long("backup_strategy", &t.backup_strategy)?,
            conclusion: long("conclusion", &t.conclusion)?,
            profile: CustomerProfile {
                mailbox_quota_mb: edbstress_workload::units::parse_quota_value(
                    &raw.profile.mailbox_quota,
                )
                .ok()
                .map(|bytes| bytes >> 20),
                ..raw.profile.clone()
            },
            deployment: TestedDeployment {
                bytes: deployment_bytes(path, &raw.deployment)?,
                topology: long("topology", &raw.deployment.topology)?,
                ..raw.deployment.clone()
            },
        };
        let mut campaign = raw.campaign.clone();
        campaign.run_config = campaign.run_config.map(|c| base.join(c));
        for (what, d) in [
            ("campaign.stress", &campaign.stress),
            ("campaign.performance", &campaign.performance),
            ("campaign.rehearsal.stress", &campaign.rehearsal.stress),
            (
                "campaign.rehearsal.performance",
                &campaign.rehearsal.performance,
            ),
        ] {
            parse_duration(d).map_err(|source| SolutionFileError::Duration {
                path: path.to_path_buf(),
                what,
                source,
            })?;
        }
        let p = &info.profile;
        if p.mailboxes == 0 || p.servers == 0 || p.databases_per_server == 0 || p.copies == 0 {
            return Err(SolutionFileError::EmptyProfile {
                path: path.to_path_buf(),
            });
        }
        let fleet = match raw.fleet {
            Some(v) => Some(v.try_into().map_err(|source| SolutionFileError::Fleet {
                path: path.to_path_buf(),
                source: Box::new(source),
            })?),
            None => None,
        };
        if fleet.is_none() && (campaign.db_paths.is_empty() || campaign.log_paths.is_empty()) {
            return Err(SolutionFileError::NoPaths {
                path: path.to_path_buf(),
            });
        }
        Ok(SolutionFile {
            path: path.to_path_buf(),
            info,
            campaign,
            fleet,
        })
    }

    /// What `test` runs for, real or rehearsal.
    pub fn plan(&self, test: edbstress_report::TestType, rehearsal: bool) -> StepPlan {
        use edbstress_report::TestType::*;
        let c = &self.campaign;
        let dur =
            |real: &str, short: &str| parse_duration(if rehearsal { short } else { real }).ok();
        match test {
            Stress => StepPlan {
                duration: dur(&c.stress, &c.rehearsal.stress),
                logs_to_replay: None,
                threads: None,
            },
            Performance => StepPlan {
                duration: dur(&c.performance, &c.rehearsal.performance),
                logs_to_replay: None,
                threads: None,
            },
            DatabaseBackup => StepPlan {
                duration: None,
                logs_to_replay: None,
                threads: None,
            },
            SoftRecovery => StepPlan {
                duration: None,
                logs_to_replay: Some(if rehearsal {
                    c.rehearsal.logs_to_replay
                } else {
                    c.logs_to_replay
                }),
                threads: None,
            },
        }
    }
}
