//! The Tested Deployment tables in the ESRP documents' order and words (Simulated
//! Exchange Configuration, Primary Storage Hardware, Primary Storage Software,
//! Primary Storage Disk Configuration) and the DAG layout: the vendor's words from
//! solution.toml beside what the runs recorded, and figures computed from both
//! (capacity used, headroom).

use super::claims::{database_total, largest_database, measured_runs};
use super::sections::Grid;
use super::{SolutionDocument, tested_profile};
use crate::model::TestType;
use crate::text::{fixed3, mb};

type Rows = Vec<(String, String)>;

fn row(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

fn or_given(v: &str) -> String {
    if v.trim().is_empty() {
        "—".into()
    } else {
        v.to_string()
    }
}

/// Achieved against target transactional IOPS, summed over the servers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Headroom {
    /// Achieved transactional IOPS.
    pub achieved: f64,
    /// Target transactional IOPS.
    pub target: f64,
}

impl Headroom {
    /// How far the achieved rate is above the target, percent (negative: below).
    pub fn percent(&self) -> f64 {
        (self.achieved / self.target - 1.0) * 100.0
    }

    /// "1,056.7 IOPS achieved against a target of 600: 76.1 % headroom".
    pub fn sentence(&self) -> String {
        let p = self.percent();
        format!(
            "{} transactional IOPS achieved against a target of {}: {}",
            fixed3(self.achieved),
            fixed3(self.target),
            if p >= 0.0 {
                format!("IOPS includes {p:.1} % headroom")
            } else {
                format!("{:.1} % short of the target", -p)
            }
        )
    }
}

/// The headroom of `test`'s runs: None without runs or without a target.
pub fn headroom(doc: &SolutionDocument, test: TestType) -> Option<Headroom> {
    let runs = doc.runs(test);
    let mut h = Headroom {
        achieved: 0.0,
        target: 0.0,
    };
    for r in &runs {
        h.achieved += r.results.achieved_transactional_iops;
        h.target += r.results.target_transactional_iops?;
    }
    (!runs.is_empty() && h.target > 0.0).then_some(h)
}

/// "34.4 % (11.5 TiB / 33.4 TiB)".
fn share(part: u64, whole: u64) -> String {
    format!(
        "{:.2} % ({} / {})",
        part as f64 / whole as f64 * 100.0,
        mb(part),
        mb(whole)
    )
}

/// Table 3 of the ESRP documents: the Simulated Exchange Configuration, from the runs
/// (what each server ran) and the vendor's DAG and LUN figures.
pub fn simulated_configuration(doc: &SolutionDocument) -> Rows {
    let d = &doc.info.deployment;
    let runs = measured_runs(doc);
    let (Some(r), Some(t)) = (runs.first(), tested_profile(doc)) else {
        return vec![row("Runs", "none found")];
    };
    let params = &r.results.parameters;
    let per_server = params.mailboxes.unwrap_or(0);
    let per_db = per_server / u64::from(params.databases.max(1));
    let total_db: u64 = runs.iter().map(|r| database_total(r)).sum();
    let logs_per_db = r
        .results
        .instances
        .first()
        .and_then(|i| i.engine.as_ref())
        .map(|e| e.log_files_written);
    let iops = params.iops_per_mailbox.map_or("—".into(), |v| {
        match headroom(doc, TestType::Performance) {
            Some(h) => format!("{v} ({})", h.sentence()),
            None => v.to_string(),
        }
    });
    let opt = |v: Option<u32>| v.map_or("—".into(), |v| v.to_string());
    let mut rows = vec![
        row(
            "Number of Exchange mailboxes simulated",
            t.mailboxes.to_string(),
        ),
        row("Number of Database Availability Groups (DAGs)", opt(d.dags)),
        row("Number of servers/DAG", opt(d.servers_per_dag)),
        row("Number of servers tested", t.servers.to_string()),
        row("Number of active mailboxes/server", per_server.to_string()),
        row("Number of databases/host", params.databases.to_string()),
        row("Number of copies/database", params.copies.to_string()),
        row("Number of mailboxes/database", per_db.to_string()),
        row("Simulated profile: I/Os per second per mailbox", iops),
        row(
            "Mailbox quota",
            params
                .mailbox_quota_mb
                .map_or_else(|| doc.info.profile.quota_text(), crate::text::quota_mb),
        ),
        row("Database LUN size", or_given(&d.database_lun_size)),
        row("Log LUN size", or_given(&d.log_lun_size)),
        row(
            "Database size (largest, as tested)",
            mb(largest_database(r)),
        ),
        row("Total database size for performance testing", mb(total_db)),
    ];
    rows.push(row(
        "% storage capacity used by Exchange database",
        d.bytes
            .formatted
            .filter(|f| *f > 0)
            .map_or("— (no formatted capacity in solution.toml)".into(), |f| {
                share(total_db, f)
            }),
    ));
    rows.push(row(
        "Log files written per database (Performance run)",
        logs_per_db.map_or("—".into(), |l| l.to_string()),
    ));
    rows.push(row(
        "Database page size",
        format!("{} KB", params.page_size / 1024),
    ));
    rows.push(row("Version profile", params.profile.clone()));
    rows
}

/// Table 4: Primary Storage Hardware, the vendor's words, then what the hosts report.
pub fn storage_hardware(doc: &SolutionDocument) -> Rows {
    let d = &doc.info.deployment;
    let model = [d.storage_model.as_str(), d.storage_firmware.as_str()]
        .iter()
        .filter(|s| !s.trim().is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join(", firmware ");
    let mut rows = vec![
        row("Storage connectivity", or_given(&d.connectivity)),
        row("Storage model and OS/firmware revision", or_given(&model)),
        row("Storage cache", or_given(&d.storage_cache)),
        row(
            "Number of storage controllers",
            or_given(&d.storage_controllers),
        ),
        row("Number of storage ports", or_given(&d.storage_ports)),
        row(
            "Maximum bandwidth of storage connectivity to host",
            or_given(&d.max_bandwidth),
        ),
        row("Switch type/model/firmware revision", or_given(&d.switch)),
        row("HBA model and firmware", or_given(&d.hba)),
        row("Number of HBAs/host", or_given(&d.hbas_per_host)),
        row("Host server type", or_given(&d.host)),
    ];
    for r in doc.runs(TestType::Performance) {
        let h = &r.results.host;
        rows.push((
            format!("Host {} (as tested)", r.host),
            format!("{} logical CPUs, {} MB memory", h.cpus, h.memory_mb),
        ));
    }
    rows.push(row(
        "Total number of drives tested",
        or_given(if d.drives_tested.trim().is_empty() {
            &d.disks
        } else {
            &d.drives_tested
        }),
    ));
    rows.push(row("Maximum number of drives", or_given(&d.max_drives)));
    rows
}

/// Table 5: Primary Storage Software.
pub fn storage_software(doc: &SolutionDocument) -> Rows {
    let d = &doc.info.deployment;
    let mut rows = vec![
        row("HBA driver", or_given(&d.hba_driver)),
        row("HBA QueueTarget setting", or_given(&d.hba_queue_target)),
        row("HBA QueueDepth setting", or_given(&d.hba_queue_depth)),
        row("Multipath I/O", or_given(&d.multipath)),
        row("Storage software", or_given(&d.storage_software)),
    ];
    if let Some(r) = measured_runs(doc).first() {
        let h = &r.results.host;
        rows.push(row(
            "Host OS",
            if h.kernel.is_empty() {
                h.os.clone()
            } else {
                format!("{} (Linux {})", h.os, h.kernel)
            },
        ));
        rows.push(row(
            "Database engine version",
            format!(
                "edbstress engine (built in) {}, {} I/O, {} backend",
                r.results.tool.version, r.results.parameters.io_mode, r.results.parameters.backend
            ),
        ));
        rows.push(row(
            "Test tool",
            format!("{} {}", r.results.tool.name, r.results.tool.version),
        ));
    }
    rows.push(row(
        "Replication solution name/version",
        or_given(&d.replication),
    ));
    rows
}

/// Table 6: Primary Storage Disk Configuration (mailbox and log store drives).
pub fn disk_configuration(doc: &SolutionDocument) -> Rows {
    let d = &doc.info.deployment;
    let b = d.bytes;
    let total_db: u64 = measured_runs(doc).iter().map(|r| database_total(r)).sum();
    let ratio = |part: Option<u64>, whole: Option<u64>, missing: &str| match (part, whole) {
        (Some(p), Some(w)) if w > 0 => share(p, w),
        _ => format!("— ({missing})"),
    };
    vec![
        row(
            "Drive type, speed and firmware revision",
            or_given(&d.drive_model),
        ),
        row("Raw capacity per drive", or_given(&d.drive_raw_capacity)),
        row(
            "Number of physical drives in test",
            or_given(if d.drives_tested.trim().is_empty() {
                &d.disks
            } else {
                &d.drives_tested
            }),
        ),
        row("Total raw storage capacity", or_given(&d.raw_capacity)),
        row("Drive slice size", or_given(&d.drive_slice_size)),
        row("Number of drives per LUN", or_given(&d.drives_per_lun)),
        row("RAID level", or_given(&d.raid)),
        row("Total formatted capacity", or_given(&d.formatted_capacity)),
        row(
            "Storage capacity utilization (formatted / raw)",
            ratio(
                b.formatted,
                b.raw,
                "raw and formatted capacity not both given",
            ),
        ),
        row(
            "Database capacity utilization (databases as tested / raw)",
            ratio(Some(total_db), b.raw, "no raw capacity in solution.toml"),
        ),
        row("Database volumes", or_given(&d.database_volumes)),
        row("Log volumes", or_given(&d.log_volumes)),
    ]
}

/// The solution data layout (server, storage, volume, database, active/passive).
pub fn layout_table(doc: &SolutionDocument) -> Grid {
    Grid {
        head: [
            "Server",
            "Storage",
            "Volume",
            "Database and log",
            "Active/Passive",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        rows: doc
            .info
            .deployment
            .layout
            .iter()
            .map(|l| {
                vec![
                    l.server.clone(),
                    l.storage.clone(),
                    l.volume.clone(),
                    l.database.clone(),
                    l.role.clone(),
                ]
            })
            .collect(),
    }
}

/// "mbx1: 3 active and 3 passive copies; mbx2: …", from the layout; None without one.
pub fn layout_summary(doc: &SolutionDocument) -> Option<String> {
    let layout = &doc.info.deployment.layout;
    if layout.is_empty() {
        return None;
    }
    let mut servers: Vec<&str> = layout.iter().map(|l| l.server.as_str()).collect();
    servers.dedup();
    let parts: Vec<String> = servers
        .iter()
        .map(|s| {
            let of = |role: &str| {
                layout
                    .iter()
                    .filter(|l| l.server == *s && l.role.trim().to_lowercase().starts_with(role))
                    .count()
            };
            format!("{s}: {} active and {} passive", of("active"), of("passive"))
        })
        .collect();
    Some(format!(
        "Database copies by server (from the layout): {}.",
        parts.join("; ")
    ))
}
