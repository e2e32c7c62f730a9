//! What the vendor writes in solution.toml: the texts of the document, the customer
//! profile it claims, and the tested deployment only the vendor knows (array, cache,
//! controllers, drives, capacities, DAG layout). The document prints these beside what
//! the runs measured, and [`super::check`] holds the claims against the runs.

use serde::{Deserialize, Serialize};

/// What the vendor writes: the texts of the document and the solution it describes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolutionInfo {
    /// The solution's name ("Contoso Array 5000 — 5,000 mailboxes").
    pub name: String,
    /// The vendor.
    pub vendor: String,
    /// Who wrote the document ("Jane Doe, Principal Engineer").
    pub author: String,
    /// When the solution was tested, as the title page shows it ("May 2014"); empty:
    /// the dates of the runs.
    pub tested_date: String,
    /// The document's revisions (the title page's revision table).
    pub revisions: Vec<Revision>,
    /// Who to contact (several lines).
    pub contact: String,
    /// Features (Markdown).
    pub features: String,
    /// Solution description (Markdown).
    pub description: String,
    /// Best practices (Markdown).
    pub best_practices: String,
    /// Backup strategy (Markdown).
    pub backup_strategy: String,
    /// Additional information: links, further documents (Markdown).
    pub additional_information: String,
    /// Conclusion (Markdown).
    pub conclusion: String,
    /// The targeted customer profile.
    pub profile: CustomerProfile,
    /// The tested deployment.
    pub deployment: TestedDeployment,
}

/// One row of the revision table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Revision {
    /// When ("July 2014", or a day in ISO form).
    pub date: String,
    /// What changed ("Initial release").
    pub description: String,
}

/// The targeted customer profile: the inputs of the sizing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CustomerProfile {
    /// Mailboxes of the whole solution.
    pub mailboxes: u64,
    /// Transactional IOPS per mailbox.
    pub iops_per_mailbox: f64,
    /// Mailbox quota as solution.toml gives it ("2048 MB"; "2GB" is the same quota).
    pub mailbox_quota: String,
    /// Mailbox servers tested.
    pub servers: u32,
    /// Databases per server.
    pub databases_per_server: u32,
    /// Database copies.
    pub copies: u32,
    /// Exchange version profile ("exchange2013").
    pub version: String,
    /// The quota in MiB as the runs record it (`mailbox_quota >> 20`), when the loader
    /// could read `mailbox_quota`: to compare the claim with the runs.
    #[serde(skip)]
    pub mailbox_quota_mb: Option<u64>,
}

impl CustomerProfile {
    /// The quota as the document shows one ("2048 MB"); solution.toml's text when it
    /// could not be read as a quota.
    pub fn quota_text(&self) -> String {
        self.mailbox_quota_mb
            .map_or_else(|| self.mailbox_quota.clone(), crate::text::quota_mb)
    }
}

impl Default for CustomerProfile {
    fn default() -> Self {
        CustomerProfile {
            mailboxes: 5000,
            iops_per_mailbox: 0.12,
            mailbox_quota: "2048 MB".into(),
            servers: 1,
            databases_per_server: 6,
            copies: 2,
            version: "exchange2013".into(),
            mailbox_quota_mb: Some(2048),
        }
    }
}

/// The tested deployment, as the vendor describes it (the devices Linux reports are
/// added from the runs). Sizes are text as the vendor writes them ("1958 GB", GB and
/// TB counted in 2^30 and 2^40 bytes as the ESRP documents count them); the loader
/// reads them into bytes so the findings can compare them with the runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestedDeployment {
    /// Storage model.
    pub storage_model: String,
    /// Storage firmware or software version.
    pub storage_firmware: String,
    /// Storage software (management, snapshots, …).
    pub storage_software: String,
    /// Storage cache ("Dual controllers with 16 GB each").
    pub storage_cache: String,
    /// Number of storage controllers ("2, active/passive").
    pub storage_controllers: String,
    /// Number and kind of storage ports.
    pub storage_ports: String,
    /// Maximum bandwidth of the storage connectivity to a host ("2 × 10 GbE").
    pub max_bandwidth: String,
    /// Switch type, model and firmware ("N/A" for direct attach).
    pub switch: String,
    /// Disks: count, type, size.
    pub disks: String,
    /// Drive type, speed and firmware revision ("Seagate ST4000NM0023 4 TB 7,200 rpm
    /// SAS, firmware GE09").
    pub drive_model: String,
    /// Raw capacity per drive ("3717.12 GB").
    pub drive_raw_capacity: String,
    /// Drives in the test ("22 active and 2 hot spares").
    pub drives_tested: String,
    /// Most drives the storage can hold.
    pub max_drives: String,
    /// Drive slice size ("N/A").
    pub drive_slice_size: String,
    /// Drives (or slices) per LUN.
    pub drives_per_lun: String,
    /// Total raw capacity ("81776.64 GB").
    pub raw_capacity: String,
    /// Total formatted capacity ("40407 GB").
    pub formatted_capacity: String,
    /// RAID level and layout.
    pub raid: String,
    /// Connectivity (SAS, iSCSI, FC, NVMe).
    pub connectivity: String,
    /// The server hardware.
    pub host: String,
    /// Host bus adapters or NICs: model and firmware.
    pub hba: String,
    /// Host bus adapters per host.
    pub hbas_per_host: String,
    /// HBA driver and version.
    pub hba_driver: String,
    /// HBA queue target setting.
    pub hba_queue_target: String,
    /// HBA queue depth setting.
    pub hba_queue_depth: String,
    /// Multipath software ("device-mapper multipath 0.9.4").
    pub multipath: String,
    /// Database replication ("Exchange DAG replication", "N/A").
    pub replication: String,
    /// Database LUNs / volumes ("6 × 1958 GB"): a leading count is checked against the
    /// databases the runs tested.
    pub database_volumes: String,
    /// Size of one database LUN ("1958 GB").
    pub database_lun_size: String,
    /// Log LUNs / volumes.
    pub log_volumes: String,
    /// Size of one log LUN.
    pub log_lun_size: String,
    /// Database Availability Groups.
    pub dags: Option<u32>,
    /// Servers per DAG.
    pub servers_per_dag: Option<u32>,
    /// The topology: how servers, DAGs, arrays and copies fit together (Markdown).
    pub topology: String,
    /// The solution data layout: which server holds which database copy on which
    /// volume, active or passive.
    pub layout: Vec<LayoutRow>,
    /// The sizes above in bytes, as the loader read them (None: not given or not a
    /// size).
    #[serde(skip)]
    pub bytes: DeploymentBytes,
}

/// The sizes of [`TestedDeployment`] read into bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeploymentBytes {
    /// `database_lun_size`.
    pub database_lun: Option<u64>,
    /// `log_lun_size`.
    pub log_lun: Option<u64>,
    /// `raw_capacity`.
    pub raw: Option<u64>,
    /// `formatted_capacity`.
    pub formatted: Option<u64>,
}

/// One row of the solution data layout.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayoutRow {
    /// The server ("mbx1").
    pub server: String,
    /// The storage group, pool or array ("Array 1, pool 1").
    pub storage: String,
    /// The volume or LUN ("Volume 1").
    pub volume: String,
    /// The database and log on it ("DB1 and its log").
    pub database: String,
    /// "active" or "passive" (with the copy number if wished: "passive (copy 2)").
    pub role: String,
}

impl TestedDeployment {
    /// The count a description such as "6 × 2 TB" or "6 x 2TB" starts with.
    pub fn database_volume_count(&self) -> Option<u32> {
        leading_count(&self.database_volumes)
    }
}

/// "6 × 2 TB" → 6; None without a count followed by × or x.
pub fn leading_count(text: &str) -> Option<u32> {
    let t = text.trim_start();
    let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
    let rest = t[digits.len()..].trim_start();
    if digits.is_empty() || !(rest.starts_with('×') || rest.starts_with(['x', 'X'])) {
        return None;
    }
    digits.parse().ok()
}
