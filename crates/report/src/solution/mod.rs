//! The ESRP-style solution document: what a storage vendor publishes around a campaign
//! of runs (Stress with its checksum verification, Performance, DatabaseBackup,
//! SoftRecovery on every server of the solution). Pure functions: the solution's texts
//! ([`SolutionInfo`]) and the campaigns' run results ([`CampaignRuns`]) in, findings
//! ([`check`]), the summary figures ([`figures`]), HTML ([`html::render`]) and Markdown
//! ([`markdown::render`]) out. Every number in the document comes from a run's
//! `results.json`; solution.toml's claims about the deployment are held against the
//! runs ([`claims`]); the contents carry the pages found in a first print ([`pages`]);
//! device vendors are named from the PCI and USB ID databases ([`vendors`]), which the
//! caller reads, as it reads the runs' test logs.

pub mod campaign;
pub mod claims;
pub mod deployment;
pub mod html;
mod html_blocks;
mod html_parts;
pub mod info;
pub mod markdown;
pub mod pages;
pub mod sections;
pub mod topology;
pub mod vendors;

use std::collections::BTreeMap;

pub use campaign::{CampaignState, StepState, StepStatus};
pub use info::{
    CustomerProfile, DeploymentBytes, LayoutRow, Revision, SolutionInfo, TestedDeployment,
};
pub use vendors::VendorNames;

use crate::aggregate::{EsrpColumn, HostRun};
use crate::model::{RunResults, TestType, Verdict};

/// Least measured seconds of a Stress run under the ESRP test rules (24 h).
pub const ESRP_STRESS_SECONDS: f64 = 24.0 * 3600.0;
/// Least measured seconds of a Performance run under the ESRP test rules (2 h).
pub const ESRP_PERFORMANCE_SECONDS: f64 = 2.0 * 3600.0;

/// The steps of a campaign, in the order they run and the appendices show them.
pub const STEPS: [TestType; 4] = [
    TestType::Stress,
    TestType::Performance,
    TestType::DatabaseBackup,
    TestType::SoftRecovery,
];

/// The runs of one campaign directory, as found there.
#[derive(Clone, Debug)]
pub struct CampaignRuns {
    /// The campaign directory as given.
    pub dir: String,
    /// Its state file (`campaign.json`).
    pub state: CampaignState,
    /// Each step's runs, one per host (a single-host campaign has one): only runs
    /// that carry the campaign's id and the step's test type, each run once.
    pub steps: BTreeMap<StepKey, Vec<HostRun>>,
    /// Run directories found in the campaign that were not counted, and why.
    pub rejected: Vec<RejectedRun>,
}

/// A run directory in a campaign that the document does not count.
#[derive(Clone, Debug, PartialEq)]
pub struct RejectedRun {
    /// The run directory.
    pub source: String,
    /// Why it is not counted.
    pub reason: String,
}

/// A step, ordered as in [`STEPS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StepKey(pub usize);

impl StepKey {
    /// The key of `test`.
    pub fn of(test: TestType) -> StepKey {
        StepKey(STEPS.iter().position(|t| *t == test).unwrap_or(STEPS.len()))
    }
}

/// Everything the document is made of.
#[derive(Clone, Debug)]
pub struct SolutionDocument {
    /// The vendor's texts.
    pub info: SolutionInfo,
    /// The campaigns.
    pub campaigns: Vec<CampaignRuns>,
    /// edbstress version that wrote the document.
    pub tool_version: String,
    /// When the document was written (RFC 3339).
    pub written_at: String,
    /// Each run's test log lines, by run directory (`HostRun::source`); a run without
    /// an entry has no test.log, and its appendix says so.
    pub test_logs: BTreeMap<String, Vec<String>>,
    /// Device vendors by id, from the system's PCI and USB ID databases.
    pub vendor_names: VendorNames,
    /// The page each section starts on in the printed document, by section id (empty
    /// before the first printing: the contents then show no page numbers).
    pub pages: BTreeMap<String, u32>,
}

impl SolutionDocument {
    /// Whether any campaign was a rehearsal (the document is then marked on every page).
    pub fn rehearsal(&self) -> bool {
        self.campaigns.iter().any(|c| c.state.rehearsal)
    }

    /// Every run of `test` over all campaigns, ordered by host.
    pub fn runs(&self, test: TestType) -> Vec<&HostRun> {
        let mut out: Vec<&HostRun> = self
            .campaigns
            .iter()
            .filter_map(|c| c.steps.get(&StepKey::of(test)))
            .flatten()
            .collect();
        out.sort_by(|a, b| a.host.cmp(&b.host));
        out
    }

    /// The servers the campaigns' state files list, sorted.
    pub fn campaign_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .campaigns
            .iter()
            .flat_map(|c| c.state.hosts.iter().cloned())
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The servers: every host with a run, sorted.
    pub fn servers(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .campaigns
            .iter()
            .flat_map(|c| c.steps.values().flatten().map(|r| r.host.clone()))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts
    }
}

/// Something that keeps the campaign from meeting the ESRP test rules.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding(pub String);

/// Checks the campaign before the document states anything. Nothing is assumed: the
/// document meets the rules only when every check below found evidence for it.
/// Findings: no campaign, a rehearsal, a state file without a campaign id, a step
/// missing from the state file or not finished, a server of the campaign without a
/// run of a step, runs that were not counted (another campaign's, the wrong test, a
/// repeated run id), a server count or a customer profile that differs from what the
/// runs ran, failed or aborted runs, runs shorter than the rules ask, hosts tested
/// with different configurations, databases smaller than the profile's (Jetstress
/// sizes them from mailboxes × quota), an unwatched kernel log.
pub fn check(doc: &SolutionDocument) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut say = |s: String| out.push(Finding(s));
    if doc.campaigns.is_empty() {
        say("no campaign directory was given".into());
    }
    if doc.rehearsal() {
        say(
            "this is a rehearsal campaign: every step was shortened, so its results cannot \
             stand for an ESRP submission"
                .into(),
        );
    }
    for c in &doc.campaigns {
        for f in campaign_evidence(c) {
            say(f);
        }
    }
    let mut run_ids: BTreeMap<&str, &HostRun> = BTreeMap::new();
    for test in STEPS {
        for r in doc.runs(test) {
            if let Some(id) = r.results.run_id.as_deref()
                && let Some(first) = run_ids.insert(id, r)
            {
                say(format!(
                    "run {id} is counted twice ({} and {}): one run is evidence once",
                    first.source, r.source
                ));
            }
        }
    }
    let claimed = doc.info.profile.servers as usize;
    let listed = doc.campaign_hosts();
    if listed.len() != claimed {
        say(format!(
            "solution.toml's profile says {claimed} server(s); the campaigns list {} ({})",
            listed.len(),
            listed.join(", ")
        ));
    }
    for f in profile_differences(doc) {
        say(f);
    }
    for f in claims::deployment_claims(doc) {
        say(f);
    }
    for test in STEPS {
        let runs = doc.runs(test);
        for r in &runs {
            let res = &r.results;
            if res.aborted {
                say(format!(
                    "{}: the {} run was aborted ({})",
                    r.host,
                    test.label(),
                    res.abort_reason.as_deref().unwrap_or("no reason recorded")
                ));
            } else if res.overall_result == Verdict::Fail {
                let failed: Vec<String> =
                    res.failed_criteria.iter().map(|c| c.describe()).collect();
                say(format!(
                    "{}: the {} run failed: {}",
                    r.host,
                    test.label(),
                    failed.join("; ")
                ));
            }
            let least = match test {
                TestType::Stress => Some(ESRP_STRESS_SECONDS),
                TestType::Performance => Some(ESRP_PERFORMANCE_SECONDS),
                _ => None,
            };
            let campaign_rehearsal = doc
                .campaigns
                .iter()
                .find(|c| c.steps.values().flatten().any(|x| x.source == r.source))
                .is_some_and(|c| c.state.rehearsal);
            if let Some(least) = least
                && !campaign_rehearsal
                && res.measured_seconds + 1.0 < least
            {
                say(format!(
                    "{}: the {} run measured {:.1} h; the ESRP test rules ask for {:.0} h",
                    r.host,
                    test.label(),
                    res.measured_seconds / 3600.0,
                    least / 3600.0
                ));
            }
            if matches!(test, TestType::Stress | TestType::Performance)
                && let Some(w) =
                    crate::sizing::ProfileSizing::of(&res.parameters).and_then(|s| s.warning())
            {
                say(format!("{}: the {} run: {w}", r.host, test.label()));
            }
            if let Some(k) = &res.kernel_log
                && k.source.is_none()
            {
                say(format!(
                    "{}: the kernel log was not watched during the {} run ({})",
                    r.host,
                    test.label(),
                    k.unwatched_reason.as_deref().unwrap_or("unknown reason")
                ));
            }
        }
        if test == TestType::Stress
            && let Some(r) = runs.iter().find(|r| r.results.verification.is_none())
        {
            say(format!(
                "{}: the Stress run has no checksum verification (run without --no-verify)",
                r.host
            ));
        }
    }
    for (what, differing) in configuration_differences(doc) {
        say(format!(
            "the hosts were tested with different configurations: {what} differs ({differing})"
        ));
    }
    out
}

/// One campaign's state file against the runs found in its directory: its id, every
/// step listed and done, a run of every step on every host it lists, each run this
/// campaign's and of its step's test, the runs that were not counted.
fn campaign_evidence(c: &CampaignRuns) -> Vec<String> {
    let mut out = Vec::new();
    let dir = &c.dir;
    if c.state.id.is_none() {
        out.push(format!(
            "{dir}: campaign.json has no campaign id (it was written by an edbstress older \
             than campaign ids), so its runs cannot be shown to be this campaign's; run the \
             campaign again with this version"
        ));
    }
    for test in STEPS {
        if !c.state.steps.iter().any(|s| s.test == test) {
            out.push(format!(
                "{dir}: campaign.json lists no {} step; a campaign runs Stress, Performance, \
                 DatabaseBackup and SoftRecovery",
                test.label()
            ));
        }
    }
    for step in &c.state.steps {
        if step.status != StepStatus::Done {
            out.push(format!(
                "{dir}: the {} step is {} (run `edbstress esrp run` again to finish it)",
                step.test.label(),
                step.status.label()
            ));
        }
    }
    if c.state.hosts.is_empty() {
        out.push(format!("{dir}: campaign.json lists no host"));
    }
    for test in STEPS {
        let runs = c
            .steps
            .get(&StepKey::of(test))
            .map_or(&[][..], Vec::as_slice);
        for host in &c.state.hosts {
            if !runs.iter().any(|r| &r.host == host) {
                out.push(format!(
                    "{host}: no {} run was found in {dir}",
                    test.label()
                ));
            }
        }
        for r in runs {
            if !c.state.hosts.contains(&r.host) {
                out.push(format!(
                    "{}: a {} run of a host campaign.json does not list ({})",
                    r.host,
                    test.label(),
                    r.source
                ));
            }
            if r.results.test_type != test {
                out.push(format!(
                    "{}: the run in the {} step is a {} test ({})",
                    r.host,
                    test.label(),
                    r.results.test_type.label(),
                    r.source
                ));
            }
            if c.state.id.is_some() && r.results.campaign_id != c.state.id {
                out.push(format!(
                    "{}: the {} run carries campaign id {}, not this campaign's ({})",
                    r.host,
                    test.label(),
                    r.results.campaign_id.as_deref().unwrap_or("none"),
                    r.source
                ));
            }
        }
    }
    for r in &c.rejected {
        out.push(format!("{} was not counted: {}", r.source, r.reason));
    }
    out
}

/// What the runs ran, against solution.toml's profile: mailboxes of the whole
/// solution (the per-server shares may round it down by less than one per server),
/// IOPS per mailbox, quota, databases per server, copies, version profile.
fn profile_differences(doc: &SolutionDocument) -> Vec<String> {
    let Some(t) = tested_profile(doc) else {
        return vec!["no Performance or Stress run was found, so no profile was tested".into()];
    };
    let p = &doc.info.profile;
    let mut out = Vec::new();
    let mut differs = |what: &str, claimed: String, tested: String| {
        out.push(format!(
            "solution.toml's profile claims {claimed} {what}; the runs ran {tested}"
        ));
    };
    let servers = t.servers.max(1) as u64;
    if t.mailboxes.abs_diff(p.mailboxes) >= servers {
        differs(
            "mailboxes",
            p.mailboxes.to_string(),
            t.mailboxes.to_string(),
        );
    }
    match t.iops_per_mailbox {
        Some(v) if (v - p.iops_per_mailbox).abs() <= 1e-9 * v.abs().max(1.0) => {}
        v => differs(
            "IOPS per mailbox",
            p.iops_per_mailbox.to_string(),
            v.map_or("none recorded".into(), |v| v.to_string()),
        ),
    }
    if p.mailbox_quota_mb.is_some() && t.mailbox_quota_mb != p.mailbox_quota_mb {
        differs(
            "of mailbox quota",
            p.quota_text(),
            t.mailbox_quota_mb
                .map_or("none recorded".into(), crate::text::quota_mb),
        );
    }
    if t.databases_per_server != p.databases_per_server {
        differs(
            "databases per server",
            p.databases_per_server.to_string(),
            t.databases_per_server.to_string(),
        );
    }
    if t.copies != p.copies {
        differs(
            "database copies",
            p.copies.to_string(),
            t.copies.to_string(),
        );
    }
    if t.version != p.version {
        differs("as version profile", p.version.clone(), t.version.clone());
    }
    out
}

/// The customer profile the runs ran (from their results.json), as the document prints
/// it.
#[derive(Clone, Debug, PartialEq)]
pub struct TestedProfile {
    /// Mailboxes of the whole solution: the servers' mailboxes summed.
    pub mailboxes: u64,
    /// Transactional IOPS per mailbox.
    pub iops_per_mailbox: Option<f64>,
    /// Mailbox quota, MiB.
    pub mailbox_quota_mb: Option<u64>,
    /// Servers with a run.
    pub servers: usize,
    /// Databases per server.
    pub databases_per_server: u32,
    /// Database copies.
    pub copies: u32,
    /// Version profile.
    pub version: String,
}

/// The profile of the Performance runs (else the Stress runs), one run per server;
/// None without such runs.
pub fn tested_profile(doc: &SolutionDocument) -> Option<TestedProfile> {
    let mut runs = doc.runs(TestType::Performance);
    if runs.is_empty() {
        runs = doc.runs(TestType::Stress);
    }
    runs.dedup_by(|a, b| a.host == b.host);
    let first = &runs.first()?.results.parameters;
    Some(TestedProfile {
        mailboxes: runs
            .iter()
            .map(|r| r.results.parameters.mailboxes.unwrap_or(0))
            .fold(0u64, u64::saturating_add),
        iops_per_mailbox: first.iops_per_mailbox,
        mailbox_quota_mb: first.mailbox_quota_mb,
        servers: runs.len(),
        databases_per_server: first.databases,
        copies: first.copies,
        version: first.profile.clone(),
    })
}

/// Parameters that differ between hosts' Stress and Performance runs: (parameter,
/// "host=value, …").
fn configuration_differences(doc: &SolutionDocument) -> Vec<(String, String)> {
    type Field = (&'static str, fn(&RunResults) -> String);
    let fields: [Field; 8] = [
        ("version profile", |r| r.parameters.profile.clone()),
        ("mailboxes", |r| format!("{:?}", r.parameters.mailboxes)),
        ("IOPS per mailbox", |r| {
            format!("{:?}", r.parameters.iops_per_mailbox)
        }),
        ("mailbox quota", |r| {
            format!("{:?}", r.parameters.mailbox_quota_mb)
        }),
        ("databases", |r| r.parameters.databases.to_string()),
        ("copies", |r| r.parameters.copies.to_string()),
        ("page size", |r| r.parameters.page_size.to_string()),
        ("database size", |r| r.parameters.database_bytes.to_string()),
    ];
    let mut out = Vec::new();
    for test in [TestType::Stress, TestType::Performance] {
        let runs = doc.runs(test);
        for (name, get) in fields {
            let values: Vec<String> = runs.iter().map(|r| get(&r.results)).collect();
            if values.windows(2).any(|w| w[0] != w[1]) {
                let list: Vec<String> = runs
                    .iter()
                    .zip(&values)
                    .map(|(r, v)| format!("{}={v}", r.host))
                    .collect();
                out.push((format!("{name} ({})", test.label()), list.join(", ")));
            }
        }
    }
    out
}

/// The figures of the Test Result Summary of one server, straight from its runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerFigures {
    /// The server.
    pub host: String,
    /// Performance: the ESRP Database and Transaction Log I/O rows (zero without a
    /// Performance run).
    pub performance: EsrpColumn,
    /// DatabaseBackup: MB read/s per database (average over the databases).
    pub backup_mb_per_sec_per_db: Option<f64>,
    /// DatabaseBackup: MB read/s of the server (all databases).
    pub backup_mb_per_sec: Option<f64>,
    /// SoftRecovery: average seconds to play one log file.
    pub seconds_per_log: Option<f64>,
}

/// The summary figures of every server (from its Performance, DatabaseBackup and
/// SoftRecovery runs).
pub fn figures(doc: &SolutionDocument) -> Vec<ServerFigures> {
    doc.servers()
        .into_iter()
        .map(|host| {
            let find = |t: TestType| doc.runs(t).into_iter().find(|r| r.host == host);
            let mut f = ServerFigures {
                performance: find(TestType::Performance)
                    .map(|p| EsrpColumn::of_run(&p.results))
                    .unwrap_or_default(),
                host: host.clone(),
                ..Default::default()
            };
            if let Some(b) = find(TestType::DatabaseBackup) {
                f.backup_mb_per_sec_per_db = mean(
                    &b.results
                        .instances
                        .iter()
                        .filter_map(|i| i.mb_per_sec)
                        .collect::<Vec<_>>(),
                );
                f.backup_mb_per_sec = b.results.totals.mb_per_sec;
            }
            if let Some(s) = find(TestType::SoftRecovery) {
                f.seconds_per_log = s.results.totals.seconds_per_log;
            }
            f
        })
        .collect()
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The Aggregate Performance across all servers: rates summed, latencies averaged
/// over the servers (as the ESRP documents show them).
pub fn aggregate_figures(servers: &[ServerFigures]) -> ServerFigures {
    let some = |f: fn(&ServerFigures) -> Option<f64>| -> Vec<f64> {
        servers.iter().filter_map(f).collect()
    };
    let backup = some(|f| f.backup_mb_per_sec);
    ServerFigures {
        host: "All servers".into(),
        performance: EsrpColumn::esrp_aggregate(
            &servers.iter().map(|s| s.performance).collect::<Vec<_>>(),
        ),
        backup_mb_per_sec_per_db: mean(&some(|f| f.backup_mb_per_sec_per_db)),
        backup_mb_per_sec: (!backup.is_empty()).then(|| backup.iter().sum()),
        seconds_per_log: mean(&some(|f| f.seconds_per_log)),
    }
}

/// The Reliability paragraph, written from the runs: the kernel log of every run, the
/// checksum verification after Stress, I/O errors.
pub fn reliability(doc: &SolutionDocument) -> Vec<String> {
    let mut out = Vec::new();
    let all: Vec<(&TestType, &HostRun)> = STEPS
        .iter()
        .flat_map(|t| doc.runs(*t).into_iter().map(move |r| (t, r)))
        .collect();
    if all.is_empty() {
        out.push("No run was found, so nothing can be said about reliability.".into());
        return out;
    }
    let watched: Vec<&(&TestType, &HostRun)> = all
        .iter()
        .filter(|(_, r)| {
            r.results
                .kernel_log
                .as_ref()
                .is_some_and(|k| k.source.is_some())
        })
        .collect();
    let events: Vec<String> = all
        .iter()
        .flat_map(|(t, r)| {
            r.results.kernel_log.iter().flat_map(move |k| {
                k.events.iter().map(move |e| {
                    format!("{} ({}, {}): {}", r.host, t.label(), e.device, e.message)
                })
            })
        })
        .collect();
    let mut devices: Vec<String> = all
        .iter()
        .filter_map(|(_, r)| r.results.kernel_log.as_ref())
        .flat_map(|k| k.devices.iter().cloned())
        .collect();
    devices.sort();
    devices.dedup();
    let devices = if devices.is_empty() {
        "none resolved".to_string()
    } else {
        devices.join(", ")
    };
    if events.is_empty() {
        out.push(format!(
            "The kernel log was watched during {} of the {} runs of this campaign; it reported no error, reset or timeout on the devices under test ({devices}).",
            watched.len(),
            all.len()
        ));
    } else {
        out.push(format!(
            "The kernel log reported {} line(s) of errors, resets or timeouts on the devices under test ({devices}) during the runs: {}.",
            events.len(),
            events.join("; ")
        ));
    }
    if watched.len() < all.len() {
        let unwatched: Vec<String> = all
            .iter()
            .filter(|(_, r)| {
                r.results
                    .kernel_log
                    .as_ref()
                    .is_none_or(|k| k.source.is_none())
            })
            .map(|(t, r)| format!("{} {}", r.host, t.label()))
            .collect();
        out.push(format!(
            "The kernel log was not watched during: {}.",
            unwatched.join(", ")
        ));
    }
    for r in doc.runs(TestType::Stress) {
        match &r.results.verification {
            Some(v) => {
                let pages: u64 = v.databases.iter().map(|d| d.pages_seen).sum();
                let bad: u64 = v
                    .databases
                    .iter()
                    .map(|d| d.bad_pages + d.correctable_pages + d.wrong_page_number)
                    .sum();
                let segments: u64 = v.logs.iter().map(|l| l.segments_seen).sum();
                let bad_segments: u64 = v
                    .logs
                    .iter()
                    .map(|l| l.bad_segments + l.sequence_problems.len() as u64)
                    .sum();
                out.push(format!(
                    "{}: the checksum verification after the Stress test read {pages} database pages and {segments} log segments and found {bad} bad pages and {bad_segments} bad segments.",
                    r.host
                ));
            }
            None => out.push(format!(
                "{}: the Stress run has no checksum verification.",
                r.host
            )),
        }
    }
    let io_errors: u64 = all
        .iter()
        .map(|(_, r)| r.results.totals.io.values().map(|c| c.errors).sum::<u64>())
        .sum();
    out.push(format!(
        "The runs recorded {io_errors} failed I/O operations in total."
    ));
    out
}
