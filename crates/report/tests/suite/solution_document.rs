//! The solution document checks a campaign before it states anything: short runs
//! outside a rehearsal, failed runs, missing steps and hosts with different
//! configurations are findings; a clean full campaign has none, and its summary
//! figures are the runs' own numbers. The claim is checked against the evidence: the
//! steps and servers campaign.json lists against the runs found, the profile printed is
//! the runs' own, a run of another test or campaign is a finding. Vendor Markdown stays
//! inert: no script links, no images, nothing loaded.

use super::common;

use std::collections::BTreeMap;

use edbstress_report::aggregate::HostRun;
use edbstress_report::solution::{
    CampaignRuns, CampaignState, STEPS, SolutionDocument, StepKey, StepState, StepStatus, check,
    figures, html, markdown,
};
use edbstress_report::{KernelLog, RunResults, TestType, Verdict, Verification};

const CAMPAIGN_ID: &str = "campaign-7d3e8f00-0000-4000-8000-000000000001";

pub(super) fn run(host: &str, test: TestType, seconds: f64) -> HostRun {
    let mut r: RunResults = common::crafted();
    r.run_id = Some(format!("run-{host}-{}", test.label()));
    r.campaign_id = Some(CAMPAIGN_ID.into());
    r.test_type = test;
    // Sized from the profile, as a run is by default: 500 × 2048 MB over 2 databases.
    r.parameters.database_bytes = 500 * (2048 << 20) / 2;
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

pub(super) fn campaign(rehearsal: bool, hosts: &[&str], seconds: [f64; 2]) -> CampaignRuns {
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
        rejected: Vec::new(),
        state: CampaignState {
            version: 1,
            id: Some(CAMPAIGN_ID.into()),
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

/// The document of `c`, solution.toml's profile being what the runs ran (each crafted
/// run simulates 500 mailboxes on 2 databases with 2 copies).
pub(super) fn document(c: CampaignRuns) -> SolutionDocument {
    let mut info = edbstress_report::solution::SolutionInfo::default();
    info.profile.servers = c.state.hosts.len() as u32;
    info.profile.mailboxes = 500 * c.state.hosts.len() as u64;
    info.profile.databases_per_server = 2;
    SolutionDocument {
        info,
        campaigns: vec![c],
        tool_version: "0.1.0".into(),
        written_at: "2026-11-25T07:00:00Z".into(),
        test_logs: Default::default(),
        vendor_names: Default::default(),
        pages: Default::default(),
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

#[test]
fn a_campaign_without_steps_or_runs_does_not_meet_the_rules() {
    // Every step directory deleted: campaign.json still says done, no run is found.
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    c.steps.clear();
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    for test in STEPS {
        let missing = format!("mbx1: no {} run was found", test.label());
        assert!(found.iter().any(|f| f.contains(&missing)), "{found:#?}");
    }
    // `"steps": []`: no step listed is no step done.
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    c.steps.clear();
    c.state.steps.clear();
    let doc = document(c);
    let found: Vec<String> = check(&doc).into_iter().map(|f| f.0).collect();
    assert!(
        found
            .iter()
            .any(|f| f.contains("campaign.json lists no Stress step")),
        "{found:#?}"
    );
    assert!(!html::render(&doc).contains("status ok"));
    // A state file of an older version (no id) is said, not passed over.
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    c.state.id = None;
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("has no campaign id"), "{found:#?}");
}

#[test]
fn a_server_of_the_campaign_without_runs_is_a_finding() {
    let mut c = campaign(false, &["mbx1", "mbx2"], [86400.0, 7200.0]);
    for runs in c.steps.values_mut() {
        runs.retain(|r| r.host == "mbx1");
    }
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    for test in STEPS {
        let missing = format!("mbx2: no {} run was found", test.label());
        assert!(found.iter().any(|f| f.contains(&missing)), "{found:#?}");
    }
    assert!(
        found
            .iter()
            .any(|f| f.contains("claims 1000 mailboxes; the runs ran 500")),
        "{found:#?}"
    );
}

#[test]
fn the_profile_printed_is_the_one_the_runs_ran() {
    let mut doc = document(campaign(false, &["mbx1"], [86400.0, 7200.0]));
    assert_eq!(check(&doc), vec![]);
    // solution.toml edited after the campaign.
    let p = &mut doc.info.profile;
    p.mailboxes = 100_000;
    p.iops_per_mailbox = 2.0;
    p.copies = 3;
    let found: Vec<String> = check(&doc).into_iter().map(|f| f.0).collect();
    for claim in [
        "claims 100000 mailboxes; the runs ran 500",
        "claims 2 IOPS per mailbox; the runs ran 0.12",
        "claims 3 database copies; the runs ran 2",
    ] {
        assert!(
            found.iter().any(|f| f.contains(claim)),
            "{claim}: {found:#?}"
        );
    }
    let page = html::render(&doc);
    let title = &page[page.find("title-page").unwrap()..page.find("</section>").unwrap()];
    assert!(
        title.contains("500 mailboxes with a 2048 MB quota and 0.12 IOPS per mailbox, kept in 2 database copies"),
        "{title}"
    );
    assert!(!title.contains("100000"), "{title}");
    let md = markdown::render(&doc);
    assert!(md.contains("| Number of mailboxes | 500 |"), "{md}");
    assert!(!md.contains("| Number of mailboxes | 100000 |"), "{md}");
}

#[test]
fn databases_smaller_than_the_profile_are_a_finding() {
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    c.steps
        .get_mut(&StepKey::of(TestType::Performance))
        .unwrap()[0]
        .results
        .parameters
        .database_bytes = 2 << 30;
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    for part in [
        "mbx1: the Performance run",
        "2048.0 MiB each",
        "500 mailboxes with a 2048 MB quota over 2 database(s) hold 500.0 GiB each",
        "0.4 %",
    ] {
        assert!(f.contains(part), "{part}: {f}");
    }
}

#[test]
fn a_run_of_another_test_or_campaign_in_a_step_is_a_finding() {
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    let perf = c
        .steps
        .get_mut(&StepKey::of(TestType::Performance))
        .unwrap();
    perf[0].results.test_type = TestType::Stress;
    let backup = c
        .steps
        .get_mut(&StepKey::of(TestType::DatabaseBackup))
        .unwrap();
    backup[0].results.campaign_id = Some("campaign-someone-else".into());
    let found: Vec<String> = check(&document(c)).into_iter().map(|f| f.0).collect();
    assert!(
        found
            .iter()
            .any(|f| f.contains("the run in the Performance step is a Stress test")),
        "{found:#?}"
    );
    assert!(
        found
            .iter()
            .any(|f| f.contains("carries campaign id campaign-someone-else")),
        "{found:#?}"
    );
}

#[test]
fn vendor_markdown_links_and_images_stay_inert() {
    let mut doc = document(campaign(false, &["mbx1"], [86400.0, 7200.0]));
    doc.info.features = "[js](javascript:alert(1)) [tab](java\tscript:alert(2)) \
        [data](data:text/html;base64,PHNjcmlwdD4=) [vb](vbscript:msgbox) \
        [file](file:///etc/passwd) <javascript:alert(3)> \
        ![pixel](http://127.0.0.1:9/track.png) ![local](file:///etc/hostname) \
        [site](https://example.com/x) [mail](mailto:esrp@example.com) [up](#features)"
        .into();
    let page = html::render(&doc);
    let prose_start = page.find("id=\"features\"").unwrap();
    let prose = &page[prose_start..page[prose_start..].find("</div>").unwrap() + prose_start];
    for bad in ["javascript:", "data:", "vbscript:", "file:"] {
        assert!(
            !prose.contains(&format!("href=\"{bad}")),
            "{bad} is live in {prose}"
        );
    }
    assert!(!prose.contains("href=\"java"), "{prose}");
    assert!(!page.contains("<img"), "no image in the document");
    assert!(prose.contains("[image not shown: pixel]"), "{prose}");
    for good in [
        "href=\"https://example.com/x\"",
        "href=\"mailto:esrp@example.com\"",
        "href=\"#features\"",
    ] {
        assert!(prose.contains(good), "{good} not in {prose}");
    }
    assert!(page.contains(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        html::CONTENT_SECURITY_POLICY
    )));
}
