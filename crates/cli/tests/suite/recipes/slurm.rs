//! The Slurm recipe of the user guide, run for real: `examples/slurm/edbstress-
//! fleet.sbatch` submitted with `sbatch` to a real Slurm cluster on this machine (munged,
//! slurmctld and three slurmds posing as nodes n1–n3, see `common::slurm`). The batch
//! script fixes one start time, `srun` starts one `edbstress run --start-at` per node
//! named after `$SLURMD_NODENAME`, the runs land on a shared directory and the script
//! aggregates them; the aggregate is checked against each node's results.json. Skips
//! loudly without root or slurm-wlm and munge (`.ci/run` installs them).

use crate::suite::common::slurm::Slurm;
use crate::suite::common::*;

use std::fs;
use std::path::{Path, PathBuf};

use edbstress_io::{IoClass, LatencyHistogram};
use edbstress_report::{RunResults, read_results};

fn only_run_dir(results_dir: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(results_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn the_slurm_recipe_runs_one_task_per_node_together_and_aggregates_them() {
    let site = Site::new();
    let Some(slurm) = Slurm::start(&site.path().join("slurm"), 3) else {
        return;
    };
    let root = &site.root;
    let shared = root.join("shared");
    fs::create_dir_all(&shared).unwrap();
    let limits = root.join("margin.toml");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/slurm/edbstress-fleet.sbatch");
    let job_output = root.join("job.out");
    let out = slurm
        .client("sbatch")
        .args(["--wait", "--parsable", "--nodes=3", "--time=5"])
        .arg(format!("--output={}", job_output.display()))
        .arg(format!("--chdir={}", root.display()))
        .arg(&script)
        .arg("--config")
        .arg(&limits)
        .args(["--mailboxes", "100"])
        .args(SHORT_RUN)
        .env("EDBSTRESS", binary())
        .env("RESULTS", &shared)
        .env("DATA_DIR", root.join("data"))
        // Far enough ahead for three preparations and warm-ups on a busy machine.
        .env("LEAD", "35 seconds")
        .output()
        .unwrap();
    let job_text = fs::read_to_string(&job_output).unwrap_or_default();
    eprintln!("sbatch: {}\nthe job's output:\n{job_text}", text(&out));
    let job_id = stdout(&out).trim().to_string();
    let job_dir = shared.join(&job_id);
    let task_outputs: String = slurm
        .nodes
        .iter()
        .map(|n| {
            let t = fs::read_to_string(job_dir.join(format!("{n}.out"))).unwrap_or_default();
            format!("--- {n}\n{t}")
        })
        .collect();
    // The job's exit code is the aggregate's: 0 pass, 1 fail.
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "the job failed: {}\n{job_text}\n{task_outputs}\n{}",
        text(&out),
        slurm.logs()
    );
    assert!(!job_id.is_empty() && job_id.chars().all(|c| c.is_ascii_digit()));

    // One run per node, named after it, each measured from the common start time.
    let mut runs: Vec<RunResults> = Vec::new();
    for node in &slurm.nodes {
        let dir = only_run_dir(&job_dir.join(node));
        let log = fs::read_to_string(dir.join("test.log")).unwrap();
        assert!(log.contains("for the start time"), "{node}: {log}");
        let run = read_results(&fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(&run.host.hostname, node);
        assert!(root.join("data").join(node).join("db").is_dir(), "{node}");
        runs.push(run);
    }
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(job_dir.join("aggregate/results.json")).unwrap()).unwrap();
    assert_eq!(agg["kind"], "aggregate");
    assert_eq!(agg["complete"], true, "{job_text}");
    let mut hosts: Vec<&str> = agg["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    hosts.sort_unstable();
    assert_eq!(hosts, ["n1", "n2", "n3"]);
    let sum: f64 = runs.iter().map(|r| r.achieved_transactional_iops).sum();
    let got = agg["totals"]["achieved_transactional_iops"]
        .as_f64()
        .unwrap();
    assert!(
        (got - sum).abs() < 1e-6,
        "aggregate IOPS {got}, runs' sum {sum}"
    );
    for class in [IoClass::DbRead, IoClass::DbWrite, IoClass::LogWrite] {
        let mut merged = LatencyHistogram::new();
        for r in &runs {
            merged.merge(&r.totals.io[&class].histogram);
        }
        let p99 = agg["totals"]["io"][class.name()]["p99_ms"]
            .as_f64()
            .unwrap();
        assert_eq!(p99, merged.percentile_ns(99.0) as f64 / 1e6, "{class:?}");
    }
    // Started together: the common window is nearly the whole 6 s measured.
    let common = agg["common_window"]["seconds"].as_f64().unwrap();
    assert!(common > 5.0, "common window {common} s");
    eprintln!(
        "Slurm job {job_id}: nodes {hosts:?}, transactional IOPS {sum:.1} (runs {:?}), common window {common:.1} s",
        runs.iter()
            .map(|r| (r.achieved_transactional_iops * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    drop(slurm);
    site.sentinel.assert_untouched();
}
