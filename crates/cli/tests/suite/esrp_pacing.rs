//! An ESRP campaign whose run options choose `--pacing jetstress` runs Stress and
//! Performance as Jetstress does: Stress auto-tunes its thread count, Performance runs closed loop at the count Stress chose, and both
//! report achieved IOPS against the target with their headroom.

use crate::suite::common;
use common::*;

use std::fs;
use std::path::{Path, PathBuf};

use edbstress_report::{Pacing, RunResults, TestType, read_results};

/// A tiny rehearsal: one 32 MiB database, 100 mailboxes at 0.1 IOPS (a target of 10),
/// 3-second Stress and Performance, loose latency limits, and a tuning budget small
/// enough to end the search after a step or two.
fn write_solution(root: &Path) -> PathBuf {
    fs::create_dir_all(root.join("db")).unwrap();
    fs::create_dir_all(root.join("logs")).unwrap();
    write_loose_limits(root);
    let text = format!(
        r#"[solution]
name = "Test Array 100"
vendor = "Example Storage"
[profile]
mailboxes = 100
iops_per_mailbox = 0.1
mailbox_quota = "100MB"
servers = 1
databases_per_server = 1
copies = 1
version = "exchange2013"
[campaign]
db_paths = ["{db}"]
log_paths = ["{logs}"]
run_config = "margin.toml"
run_options = ["--database-size", "32MiB", "--cache-max", "8MiB", "--cache-min", "4MiB", "--sample-interval", "1s", "--buffered", "--auto-tune-growth", "3MiB", "--pacing", "jetstress"]
[campaign.rehearsal]
stress = "3s"
performance = "3s"
logs_to_replay = 2
"#,
        db = root.join("db").display(),
        logs = root.join("logs").display()
    );
    let path = root.join("solution.toml");
    fs::write(&path, text).unwrap();
    path
}

fn step_results(campaign: &Path, step: &str) -> RunResults {
    let dir = fs::read_dir(campaign.join(step))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("{step} holds no run directory"));
    read_results(&fs::read(dir.join("results.json")).unwrap()).unwrap()
}

#[test]
fn the_campaign_runs_stress_tuned_and_performance_at_its_threads_with_jetstress_pacing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let solution = write_solution(root);
    let campaign = root.join("campaign");
    let out = command(root)
        .args(["esrp", "run", "--config"])
        .arg(&solution)
        .args(["--rehearsal", "--campaign"])
        .arg(&campaign)
        .output()
        .unwrap();
    let log = fs::read_to_string(campaign.join("campaign.log")).unwrap_or_default();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}\n{}\n{log}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stress = step_results(&campaign, "01-Stress");
    let perf = step_results(&campaign, "02-Performance");
    assert_eq!(stress.test_type, TestType::Stress);
    assert_eq!(stress.parameters.pacing, Some(Pacing::Jetstress));
    let tune = stress.autotune.as_ref().expect("Stress auto-tunes");
    assert_eq!(stress.parameters.threads, tune.chosen_threads);
    // Performance runs at the count Stress chose, without tuning again.
    assert_eq!(perf.parameters.pacing, Some(Pacing::Jetstress));
    assert!(perf.autotune.is_none());
    assert_eq!(perf.parameters.threads, tune.chosen_threads);
    assert!(
        log.contains(&format!(
            "Performance runs at the {} threads the Stress step's auto-tuning chose",
            tune.chosen_threads
        )),
        "{log}"
    );
    // Closed loop on the page cache exceeds a target of 10 IOPS: both show headroom.
    for r in [&stress, &perf] {
        assert_eq!(r.target_transactional_iops, Some(10.0));
        assert!(
            r.achieved_transactional_iops > 10.0,
            "{}",
            r.achieved_transactional_iops
        );
        assert!(r.headroom_pct.unwrap() > 0.0);
    }
}
