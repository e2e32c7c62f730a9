//! `edbstress fleet run` against a real sshd on loopback: three "hosts" (127.0.0.2–4,
//! each with its own directories) run a short Performance test started together; the
//! aggregate's totals are checked against each host's results.json, its p99 against
//! the merged histograms recomputed here. Then the same fleet again, with one host's
//! edbstress killed mid-run: the aggregate is incomplete, names that host and why, and
//! the two others are complete. Skips loudly without OpenSSH (CI installs it).
//!
//! The modules hold the fleet under attack: host names, fleet identity and fresh
//! directories, a compromised host's copy-back, deadlines, ssh failures, the
//! long-mode fault loop, the clock check, and a fleet killed outright.

use crate::suite::common;
mod clock;
mod copy_back;
mod deadlines;
mod fault_loop;
mod identity;
mod killed;
mod names;
mod ssh_errors;

use common::hosts::LoopbackHost;
use common::sshd::Sshd;
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use edbstress_io::{IoClass, LatencyHistogram};
use edbstress_report::{RunResults, read_results};

const ADDRESSES: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

/// Host `i` of the three: `hostN` at `ADDRESSES[i]`, its directories under `root/hostN`.
fn host(root: &Path, i: usize) -> LoopbackHost {
    LoopbackHost::new(root, ADDRESSES[i], &format!("host{}", i + 1))
}

fn host_spec(root: &Path, i: usize) -> String {
    host(root, i).spec()
}

/// `fleet run` with the hosts as flags, the loose limits in a file given to the runs.
fn fleet_args(root: &Path, sshd: &Sshd, output: &str, lead: &str) -> Vec<String> {
    let specs: Vec<String> = (0..3).map(|i| host_spec(root, i)).collect();
    fleet_cmd(root, sshd, output, lead, &specs, &[])
}

/// `fleet run` of the hosts `specs` with the fleet options `extra`, the loose limits in
/// a file given to the runs.
fn fleet_cmd(
    root: &Path,
    sshd: &Sshd,
    output: &str,
    lead: &str,
    specs: &[String],
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec!["fleet".into(), "run".into()];
    for spec in specs {
        args.extend(["--host".into(), spec.clone()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    if !extra.contains(&"--remote-edbstress") {
        args.extend(["--remote-edbstress".into(), binary().display().to_string()]);
    }
    args.extend(
        [
            // One clock on loopback: an offset measured there is the load's round-trip
            // asymmetry (seconds on a busy CI machine), not a clock difference.
            "--max-clock-offset",
            "30s",
            "--ssh-config",
            sshd.client_config.to_str().unwrap(),
            "--mailboxes",
            "300",
            "--lead-time",
            lead,
            "--output",
            output,
            "--",
            "--config",
            root.join("margin.toml").to_str().unwrap(),
        ]
        .map(String::from),
    );
    args.extend(SHORT_RUN.map(String::from));
    args
}

/// `fleet run --config FILE`: the hosts, ssh settings and mailboxes in its `[fleet]`
/// table, the file itself shipped to every host as its run's configuration.
fn fleet_file_args(root: &Path, sshd: &Sshd, output: &str, lead: &str) -> Vec<String> {
    let mut toml = fs::read_to_string(root.join("margin.toml")).unwrap();
    toml.push_str(&format!(
        "[fleet]\nmailboxes = 300\nlead_time = \"{lead}\"\nmax_clock_offset = \"30s\"\nssh_config = \"{}\"\nremote_edbstress = \"{}\"\n",
        sshd.client_config.display(),
        binary().display()
    ));
    for i in 0..ADDRESSES.len() {
        toml.push_str(&host(root, i).toml());
    }
    fs::write(root.join("fleet.toml"), toml).unwrap();
    let mut args: Vec<String> = ["fleet", "run", "--config"].map(String::from).to_vec();
    args.push(root.join("fleet.toml").display().to_string());
    args.extend(["--output".to_string(), output.to_string(), "--".to_string()]);
    args.extend(SHORT_RUN.map(String::from));
    args
}

fn host_results(fleet: &Path, host: &str) -> (PathBuf, RunResults) {
    let dirs: Vec<PathBuf> = fs::read_dir(fleet.join("hosts").join(host))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{host}: {dirs:?}");
    let r = read_results(&fs::read(dirs[0].join("results.json")).unwrap()).unwrap();
    (dirs[0].clone(), r)
}

/// Runs edbstress with `args` in `cwd`, waiting at most `limit`: past it the command is
/// killed (by its PID) and the test fails, naming the wait.
fn edbstress_within(
    args: &[String],
    cwd: &Path,
    limit: Duration,
) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let child = command(cwd)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_within(child, started, limit)
}

/// Waits for `child` (started at `started`) at most `limit` from then.
fn wait_within(
    mut child: std::process::Child,
    started: Instant,
    limit: Duration,
) -> (std::process::Output, Duration) {
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let read = |mut s: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = s.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = std::process::Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            return (output, started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let said = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
            panic!(
                "the fleet did not end within {} s; it was killed. Its stderr:\n{said}",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The fleet id a `fleet run` printed first (`fleet fleet-UUID`).
fn fleet_id_of(out: &std::process::Output) -> String {
    let said = text(out);
    said.lines()
        .find_map(|l| {
            l.strip_prefix("fleet ")
                .filter(|id| id.starts_with("fleet-"))
        })
        .unwrap_or_else(|| panic!("no fleet id in:\n{said}"))
        .trim()
        .to_string()
}

/// The aggregate's results.json in `fleet`.
fn aggregate_of(fleet: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(fleet.join("results.json")).unwrap()).unwrap()
}

/// The runs an aggregate counted: each counted host's run (its source, relative to the
/// fleet's working directory `cwd`) results.json.
fn counted_runs(cwd: &Path, agg: &serde_json::Value) -> Vec<RunResults> {
    agg["hosts"]
        .as_array()
        .unwrap()
        .iter()
        // A missing host has no databases; a counted run (even one stopped early) has.
        .filter(|h| h["databases"].as_u64().unwrap_or(0) > 0)
        .map(|h| {
            let source = cwd.join(h["source"].as_str().unwrap());
            read_results(&fs::read(source.join("results.json")).unwrap()).unwrap()
        })
        .collect()
}

/// Why the aggregate names `host` incomplete (empty when it counted it).
fn why_missing(agg: &serde_json::Value, host: &str) -> String {
    agg["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == host)
        .unwrap_or_else(|| panic!("{host} is not in the aggregate: {agg}"))["incomplete"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_fleet_of_three_runs_together_and_survives_losing_one() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let probe = sshd.ssh(ADDRESSES[0], "echo reached");
    assert_eq!(String::from_utf8_lossy(&probe.stdout).trim(), "reached");

    // Three hosts, one start time.
    let started = Instant::now();
    let out = edbstress(
        &fleet_args(root, &sshd, "fleet1", "30s")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        root,
    );
    let elapsed = started.elapsed();
    let said = text(&out);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{said}");
    assert!(said.contains("fleet overhead"), "{said}");
    eprintln!(
        "fleet of three: {:.1} s in all\n{}",
        elapsed.as_secs_f64(),
        stdout(&out)
    );
    let fleet = root.join("fleet1");
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(fleet.join("results.json")).unwrap()).unwrap();
    assert_eq!(agg["kind"], "aggregate");
    assert_eq!(agg["complete"], true, "{said}");
    let runs: Vec<RunResults> = ["host1", "host2", "host3"]
        .iter()
        .map(|h| host_results(&fleet, h).1)
        .collect();
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.host.hostname, format!("host{}", i + 1));
        // 300 mailboxes split equally.
        assert_eq!(r.parameters.mailboxes, Some(100));
    }
    let sum: f64 = runs.iter().map(|r| r.achieved_transactional_iops).sum();
    let got = agg["totals"]["achieved_transactional_iops"]
        .as_f64()
        .unwrap();
    assert!((got - sum).abs() < 1e-6, "{got} vs {sum}");
    let mut merged = LatencyHistogram::new();
    for r in &runs {
        merged.merge(&r.totals.io[&IoClass::DbRead].histogram);
    }
    assert_eq!(
        agg["totals"]["io"]["db_read"]["p99_ms"].as_f64().unwrap(),
        merged.percentile_ns(99.0) as f64 / 1e6
    );
    let html = fs::read_to_string(fleet.join("report.html")).unwrap();
    for text in [
        "host1",
        "host2",
        "host3",
        "Individual Server Performance",
        "Aggregate Server Performance",
    ] {
        assert!(html.contains(text), "report lacks {text}");
    }

    // Again, from a configuration file's [fleet] table, and host3's edbstress is
    // killed while it measures.
    let results3 = root.join("host3/results");
    let fleet_dirs = || -> Vec<PathBuf> {
        fs::read_dir(&results3)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let before = fleet_dirs();
    let mut child = command(root)
        .args(fleet_file_args(root, &sshd, "fleet2", "15s"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let pid = loop {
        let new = fleet_dirs().into_iter().find(|d| !before.contains(d));
        if let Some(pid) = new.and_then(|d| fs::read_to_string(d.join(".edbstress-fleet.pid")).ok())
        {
            if !pid.trim().is_empty() {
                break pid.trim().to_string();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "host3 never started"
        );
        assert!(child.try_wait().unwrap().is_none(), "the fleet ended early");
        std::thread::sleep(Duration::from_millis(100));
    };
    // Into its measured period, then SIGKILL.
    std::thread::sleep(Duration::from_secs(17));
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert_exit(&out, 1, "a fleet that lost a host");
    let fleet = root.join("fleet2");
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(fleet.join("results.json")).unwrap()).unwrap();
    assert_eq!(agg["complete"], false, "{said}");
    let hosts = agg["hosts"].as_array().unwrap();
    let h3 = hosts.iter().find(|h| h["host"] == "host3").unwrap();
    let why = h3["incomplete"].as_str().unwrap_or_default();
    assert!(!why.is_empty(), "host3 should be incomplete: {h3}");
    for h in ["host1", "host2"] {
        let entry = hosts.iter().find(|x| x["host"] == h).unwrap();
        assert!(entry["incomplete"].is_null(), "{h}: {entry}");
        let (_, r) = host_results(&fleet, h);
        assert!(!r.aborted && r.measured_seconds >= 5.0, "{h} incomplete");
        // The shipped file was the run's configuration: its loose limits were used.
        assert!(
            r.criteria.iter().any(|c| c.threshold == 1000.0),
            "{h}: {:?}",
            r.criteria
        );
    }
    let html = fs::read_to_string(fleet.join("report.html")).unwrap();
    assert!(html.contains("host3 is incomplete"), "{said}");
    drop(sshd);
    site.sentinel.assert_untouched();
}
