//! The fleet's own overhead against its host count — a benchmark, not part of the test
//! suite (`bench/fleet_scale/run.sh` runs it; ignored here: it makes 120 real runs).
//! One real sshd listens on 127.0.1.1–64, each address a "host" with its own
//! directories; for each host count (`FLEET_SCALE_HOSTS`, default 8 16 32 64) a tiny
//! Performance run (the smallest database, seconds measured) goes through `fleet run`,
//! which prints its time per phase. Every fleet's aggregate is checked against its
//! hosts' results.json: the IOPS their sum, each class's p99 that of the hosts'
//! histograms merged here, and the fleet's latency over time the hosts' interval
//! histograms merged. Without OpenSSH it skips loudly.

use crate::suite::common;
use common::aggregate_check::{
    fleet_latency_over_time_is_the_hosts_interval_histograms_merged,
    interval_rows_hold_their_rates, totals_are_the_hosts_merged,
};
use common::sshd::Sshd;
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use edbstress_report::{RunResults, read_results};

/// A tiny run per host: the smallest database, 20 transactional IOPS offered (× the
/// loose limits' margin), 5 s measured in 1 s samples, open loop.
const TINY_RUN: [&str; 16] = [
    "--iops-per-mailbox",
    "1",
    "--databases",
    "1",
    "--database-size",
    "4MiB",
    "--cache-max",
    "2MiB",
    "--cache-min",
    "1MiB",
    "--duration",
    "5s",
    "--sample-interval",
    "1s",
    "--buffered",
    "--allow-cached-databases",
];

/// The measured duration of [`TINY_RUN`], seconds.
const DURATION_S: f64 = 5.0;

/// Mailboxes per host.
const MAILBOXES_PER_HOST: u64 = 20;

/// The number after `key` in `text` ("preflight 3.1 s" → 3.1).
fn number_after(text: &str, key: &str) -> f64 {
    let at = text
        .find(key)
        .unwrap_or_else(|| panic!("no '{key}' in:\n{text}"));
    text[at + key.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches([',', 's']).parse().ok())
        .unwrap_or_else(|| panic!("no number after '{key}' in:\n{text}"))
}

/// One fleet's figures, seconds.
struct Row {
    hosts: usize,
    preflight: f64,
    start: f64,
    wait: f64,
    collect: f64,
    aggregate: f64,
    wall: f64,
    lead: f64,
}

impl Row {
    fn overhead(&self) -> f64 {
        self.preflight + self.start + self.wait + self.collect + self.aggregate
    }
}

/// Runs a fleet of `n` hosts under `root` (new) and checks its aggregate.
fn fleet_of(n: usize, root: &Path, sshd: &Sshd, extra: &[String], failed: &mut Vec<String>) -> Row {
    fs::create_dir_all(root).unwrap();
    write_loose_limits(root);
    // The lead time holds the start phase (the hosts' sessions opening, at most the
    // bound at once) and every host preparing its database, all on this machine's
    // cores; it is a wait the user chooses, not overhead.
    let lead = 20 + 3 * n as u64 / 2;
    let mut args: Vec<String> = vec!["fleet".into(), "run".into()];
    for i in 1..=n {
        let h = root.join(format!("host{i}"));
        args.extend([
            "--host".into(),
            format!(
                "127.0.1.{i},name=host{i},db-path={},log-path={},results-dir={}",
                h.join("db").display(),
                h.join("logs").display(),
                h.join("results").display()
            ),
        ]);
    }
    args.extend(extra.iter().cloned());
    args.extend(
        [
            "--remote-edbstress",
            binary().to_str().unwrap(),
            "--max-clock-offset",
            "30s",
            "--ssh-config",
            sshd.client_config.to_str().unwrap(),
            "--mailboxes",
            &(MAILBOXES_PER_HOST * n as u64).to_string(),
            "--lead-time",
            &format!("{lead}s"),
            "--output",
            "out",
            "--",
            "--config",
            root.join("margin.toml").to_str().unwrap(),
        ]
        .map(String::from),
    );
    args.extend(TINY_RUN.map(String::from));
    let started = Instant::now();
    let out = command(root).args(&args).output().unwrap();
    let wall = started.elapsed().as_secs_f64();
    let said = text(&out);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{said}");
    let summary = stdout(&out);
    let line = summary
        .lines()
        .find(|l| l.contains("fleet overhead:"))
        .unwrap_or_else(|| panic!("no overhead line:\n{said}"));
    let row = Row {
        hosts: n,
        preflight: number_after(line, "preflight"),
        start: number_after(line, "start"),
        wait: number_after(line, "wait past the duration"),
        collect: number_after(line, "collect"),
        aggregate: number_after(line, "aggregate"),
        wall,
        lead: lead as f64,
    };
    let checked = std::panic::catch_unwind(|| check_aggregate(n, &root.join("out"), root, &said));
    if let Err(e) = checked {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "a panic".into());
        println!("{n} hosts: CHECK FAILED: {why}");
        failed.push(format!("{n} hosts: {why}"));
    }
    row
}

/// Every host counted, and the aggregate is its hosts' results merged.
fn check_aggregate(n: usize, fleet: &Path, cwd: &Path, said: &str) {
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(fleet.join("results.json")).unwrap()).unwrap();
    assert_eq!(agg["complete"], true, "{said}");
    let hosts = agg["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), n, "{said}");
    let runs: Vec<RunResults> = hosts
        .iter()
        .map(|h| {
            assert!(h["incomplete"].is_null(), "{h}");
            let source = cwd.join(h["source"].as_str().unwrap());
            read_results(&fs::read(source.join("results.json")).unwrap()).unwrap()
        })
        .collect();
    let mut names: Vec<&str> = runs.iter().map(|r| r.host.hostname.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "every host's own run, once");
    let totals = totals_are_the_hosts_merged(&agg, &runs);
    fleet_latency_over_time_is_the_hosts_interval_histograms_merged(&agg, &runs);
    // A property of the runs' results, not of the aggregate: said, not fatal here.
    if let Err(e) = std::panic::catch_unwind(|| interval_rows_hold_their_rates(&runs)) {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "a panic".into());
        println!("{n} hosts: NOTE an interval row disagrees with its histogram: {why}");
    }
    let intervals = agg["cluster"]["classes"]["db_read"]
        .as_array()
        .map_or(0, Vec::len);
    println!(
        "{n} hosts, aggregate checked: {totals}; the fleet's p50/p99/max in each of \
         {intervals} intervals = the hosts' interval histograms merged"
    );
}

#[test]
#[ignore = "a benchmark (120 real runs): bench/fleet_scale/run.sh"]
fn fleet_overhead_per_phase_against_the_host_count() {
    let counts: Vec<usize> = std::env::var("FLEET_SCALE_HOSTS")
        .unwrap_or_else(|_| "8 16 32 64".into())
        .split_whitespace()
        .map(|c| c.parse().expect("FLEET_SCALE_HOSTS: host counts"))
        .collect();
    let most = counts.iter().copied().max().unwrap_or(0);
    assert!(most <= 254, "at most 254 loopback hosts (127.0.1.1–254)");
    let extra: Vec<String> = std::env::var("FLEET_SCALE_FLEET_OPTIONS")
        .map(|o| o.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    let keep = std::env::var_os("FLEET_SCALE_DIR").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let base = keep.unwrap_or_else(|| tmp.path().to_path_buf());
    let addresses: Vec<String> = (1..=most).map(|i| format!("127.0.1.{i}")).collect();
    let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let Some(sshd) = Sshd::start(&tmp.path().join("sshd"), &refs) else {
        return;
    };
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for &n in &counts {
        let row = fleet_of(
            n,
            &base.join(format!("hosts{n}")),
            &sshd,
            &extra,
            &mut failed,
        );
        rows.push(row);
    }
    println!(
        "\nfleet overhead per phase, seconds ({DURATION_S} s measured per host; lead time \
         20 s + 1.5 s per host, not overhead)"
    );
    println!(
        "{:>6} {:>10} {:>8} {:>12} {:>9} {:>10} {:>10} {:>8} {:>8}",
        "hosts",
        "preflight",
        "start",
        "wait-past",
        "collect",
        "aggregate",
        "overhead",
        "lead",
        "wall"
    );
    for r in &rows {
        println!(
            "{:>6} {:>10.2} {:>8.2} {:>12.2} {:>9.2} {:>10.2} {:>10.2} {:>8.0} {:>8.1}",
            r.hosts,
            r.preflight,
            r.start,
            r.wait,
            r.collect,
            r.aggregate,
            r.overhead(),
            r.lead,
            r.wall
        );
    }
    let of = |n: usize| rows.iter().find(|r| r.hosts == n);
    if let (Some(small), Some(large)) = (of(8), of(64)) {
        println!(
            "64-host overhead / 8-host overhead: {:.2} ({:.2} s / {:.2} s); hosts × 8",
            large.overhead() / small.overhead(),
            large.overhead(),
            small.overhead()
        );
        for (name, a, b) in [
            ("preflight", small.preflight, large.preflight),
            ("start", small.start, large.start),
            ("wait-past", small.wait, large.wait),
            ("collect", small.collect, large.collect),
            ("aggregate", small.aggregate, large.aggregate),
        ] {
            println!("  {name:<10} × {:.2}", b / a.max(1e-3));
        }
    }
    drop(sshd);
    assert!(failed.is_empty(), "checks failed:\n{}", failed.join("\n"));
}
