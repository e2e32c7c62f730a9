//! solution.toml's claims about the deployment held against what the runs recorded:
//! the mailbox count in the document's title, the database volumes against the
//! databases tested and the devices they were on, the LUN and formatted capacities
//! against the databases' sizes. Each disagreement is a finding.

use super::{SolutionDocument, tested_profile};
use crate::aggregate::HostRun;
use crate::model::TestType;
use crate::text::mb;

/// The findings about the deployment's claims.
pub fn deployment_claims(doc: &SolutionDocument) -> Vec<String> {
    let mut out = Vec::new();
    let Some(tested) = tested_profile(doc) else {
        return out;
    };
    if let Some(claimed) = mailboxes_in_title(&doc.info.name)
        && claimed != tested.mailboxes
    {
        out.push(format!(
            "the title says {claimed} mailboxes (\"{}\"); the runs simulated {}",
            doc.info.name, tested.mailboxes
        ));
    }
    let d = &doc.info.deployment;
    let runs = measured_runs(doc);
    if let Some(volumes) = d.database_volume_count() {
        let databases = tested.databases_per_server;
        if volumes > databases {
            out.push(format!(
                "solution.toml's deployment claims {volumes} database volumes (\"{}\") per \
                 server; the runs tested {databases} database(s) per server, so {} volume(s) \
                 carried no database",
                d.database_volumes,
                volumes - databases
            ));
        }
        for r in &runs {
            let devices = database_devices(r);
            if !devices.is_empty() && devices.len() != volumes as usize {
                out.push(format!(
                    "{}: solution.toml claims {volumes} database volumes; the run's databases \
                     were on {} device(s) ({})",
                    r.host,
                    devices.len(),
                    devices.join(", ")
                ));
            }
        }
    }
    for r in &runs {
        out.extend(capacity_claims(doc, r));
    }
    out
}

/// The Performance runs, else the Stress runs: the runs whose databases the claims
/// describe.
pub fn measured_runs(doc: &SolutionDocument) -> Vec<&HostRun> {
    let perf = doc.runs(TestType::Performance);
    if perf.is_empty() {
        doc.runs(TestType::Stress)
    } else {
        perf
    }
}

/// The largest database of a run, bytes.
pub fn largest_database(r: &HostRun) -> u64 {
    r.results
        .instances
        .iter()
        .map(|i| i.final_bytes.max(i.initial_bytes))
        .max()
        .unwrap_or(r.results.parameters.database_bytes)
}

/// All databases of a run, bytes.
pub fn database_total(r: &HostRun) -> u64 {
    let s = &r.results.sizing;
    s.final_bytes.max(s.initial_bytes)
}

fn capacity_claims(doc: &SolutionDocument, r: &HostRun) -> Vec<String> {
    let d = &doc.info.deployment;
    let b = d.bytes;
    let mut out = Vec::new();
    let largest = largest_database(r);
    if let Some(lun) = b.database_lun
        && lun < largest
    {
        out.push(format!(
            "{}: solution.toml claims database LUNs of {} ({}); the run's largest database \
             is {}, which does not fit",
            r.host,
            d.database_lun_size,
            mb(lun),
            mb(largest)
        ));
    }
    let total = database_total(r);
    if let Some(formatted) = b.formatted
        && formatted < total
    {
        out.push(format!(
            "{}: solution.toml claims {} formatted capacity ({}); the run's databases take {}",
            r.host,
            d.formatted_capacity,
            mb(formatted),
            mb(total)
        ));
    }
    if let (Some(raw), Some(formatted)) = (b.raw, b.formatted)
        && raw < formatted
    {
        out.push(format!(
            "solution.toml claims less raw capacity ({}) than formatted capacity ({})",
            d.raw_capacity, d.formatted_capacity
        ));
    }
    out.dedup();
    out
}

/// The devices the run's databases were on (kernel names, sorted), from the devices
/// Linux reported under the run's paths; empty when the run recorded none.
pub fn database_devices(r: &HostRun) -> Vec<String> {
    let mut out: Vec<String> = r
        .results
        .storage_devices
        .iter()
        .filter(|d| {
            d.paths.iter().any(|p| {
                r.results
                    .instances
                    .iter()
                    .any(|i| std::path::Path::new(&i.database_path).starts_with(p))
            })
        })
        .map(|d| d.device.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The mailbox count a title states: a number followed by "mailbox" or "user"
/// ("5,000-User Mailbox …", "2500 Mailbox Resiliency …"); None without one.
pub fn mailboxes_in_title(title: &str) -> Option<u64> {
    let words: Vec<&str> = title
        .split(|c: char| c.is_whitespace() || c == '-' || c == '–')
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).find_map(|w| {
        let next = w[1].to_lowercase();
        if !(next.starts_with("mailbox") || next.starts_with("user")) {
            return None;
        }
        let digits: String = w[0].chars().filter(|c| *c != ',').collect();
        (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    })
}
