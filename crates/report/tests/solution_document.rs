//! The solution document checks a campaign before it states anything: short runs
//! outside a rehearsal, failed runs, missing steps and hosts with different
//! configurations are findings; a clean full campaign has none, and its summary
//! figures are the runs' own numbers.

mod common;

use std::collections::BTreeMap;

use edbstress_report::aggregate::HostRun;
use edbstress_report::solution::{
    CampaignRuns, CampaignState, STEPS, SolutionDocument, StepKey, StepState, StepStatus, check,
    figures, html, markdown,
};
use edbstress_report::{KernelLog, RunResults, TestType, Verdict, Verification};

fn run(host: &str, test: TestType, seconds: f64) -> HostRun {
    let mut r: RunResults = common::crafted();
    r.test_type = test;
    r.measured_seconds = seconds;
    r.aborted = false;
    r.abort_reason = None;
    r.criteria.iter_mut().for_each(|c| {
        c.measured = c.threshold;
        c.passed = true;
    });
    r.judge();
    r.verification = (test == TestType::Stress).then(|| Verification {
        passed: true,
        ..Default::default()
    });
    r.kernel_log = Some(KernelLog {
        source: Some("/dev/kmsg".into()),
        devices: vec!["sdb".into()],
        ..Default::default()
    });
    HostRun {
        host: host.into(),
        source: format!("/runs/{host}/{}", test.label()),
        results: r,
    }
}

fn campaign(rehearsal: bool, hosts: &[&str], seconds: [f64; 2]) -> CampaignRuns {
    let mut steps = BTreeMap::new();
    for test in STEPS {
        let secs = match test {
            TestType::Stress => seconds[0],
            TestType::Performance => seconds[1],
            _ => 60.0,
        };
        steps.insert(
            StepKey::of(test),
            hosts.iter().map(|h| run(h, test, secs)).collect(),
        );
    }
    CampaignRuns {
        dir: "campaign".into(),
        state: CampaignState {
            version: 1,
            solution: "S".into(),
            rehearsal,
            created_at: String::new(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            steps: STEPS
                .iter()
                .map(|t| StepState {
                    test: *t,
                    status: StepStatus::Done,
                    dir: t.label().into(),
                    duration_seconds: None,
                    logs_to_replay: None,
                    attempts: 1,
                    started_at: None,
                    ended_at: None,
                    verdict: Some(Verdict::Pass),
                    pid: None,
                })
                .collect(),
        },
        steps,
    }
}

fn document(c: CampaignRuns) -> SolutionDocument {
    SolutionDocument {
        info: Default::default(),
        campaigns: vec![c],
        tool_version: "0.1.0".into(),
        written_at: "2026-11-25T07:00:00Z".into(),
    }
}

#[test]
fn a_full_passing_campaign_has_no_finding_and_quotes_its_runs() {
    let doc = document(campaign(false, &["mbx1", "mbx2"], [86400.0, 7200.0]));
    assert_eq!(check(&doc), vec![]);
    let f = figures(&doc);
    assert_eq!(f.len(), 2);
    let perf = &doc.runs(TestType::Performance)[0].results;
    assert_eq!(
        f[0].performance.db_transfers_per_sec,
        perf.achieved_transactional_iops
    );
    let page = html::render(&doc);
    assert!(!page.contains("REHEARSAL"));
    assert!(page.contains("Aggregate Performance across all servers"));
    assert!(!markdown::render(&doc).contains("does not meet"));
}

#[test]
fn short_runs_failures_and_differing_hosts_are_findings() {
    let mut c = campaign(false, &["mbx1", "mbx2"], [3600.0, 600.0]);
    let stress = c.steps.get_mut(&StepKey::of(TestType::Stress)).unwrap();
    stress[1].results.parameters.databases += 1;
    let backup = c
        .steps
        .get_mut(&StepKey::of(TestType::DatabaseBackup))
        .unwrap();
    backup[0].results.criteria[0].measured = backup[0].results.criteria[0].threshold + 1.0;
    backup[0].results.criteria[0].passed = false;
    backup[0].results.judge();
    c.steps
        .get_mut(&StepKey::of(TestType::SoftRecovery))
        .unwrap()
        .pop();
    c.state.steps[3].status = StepStatus::Running;
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    let has = |s: &str| found.iter().any(|f| f.contains(s));
    assert!(
        has("the Stress run measured 1.0 h; the ESRP test rules ask for 24 h"),
        "{found:#?}"
    );
    assert!(has("the Performance run measured 0.2 h"), "{found:#?}");
    assert!(has("mbx1: the DatabaseBackup run failed"), "{found:#?}");
    assert!(has("mbx2: no SoftRecovery run"), "{found:#?}");
    assert!(has("the SoftRecovery step is unfinished"), "{found:#?}");
    assert!(has("databases (Stress) differs (mbx1="), "{found:#?}");
}

#[test]
fn a_rehearsal_is_a_finding_and_marked_but_short_runs_are_expected() {
    let doc = document(campaign(true, &["mbx1"], [10.0, 10.0]));
    let found: Vec<String> = check(&doc).into_iter().map(|f| f.0).collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("rehearsal"));
    assert!(html::render(&doc).contains(html::REHEARSAL_MARK));
}
