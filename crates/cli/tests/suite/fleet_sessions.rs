//! `fleet run --max-ssh-sessions 2` on four loopback hosts through a real sshd, with an
//! `ssh` on the PATH that records every session it runs (then runs the real client):
//! when it starts, when its remote run says it started (the line the fleet's remote
//! shell writes before edbstress replaces it) and when it ends. Each host gets one
//! connection (its master) and four sessions over it (check, directory, run, copy); at
//! no moment are more than two sessions opening or working — masters until they are
//! up, checks, directories, starts until the run started, copies — and two are
//! reached; no master outlives the fleet; the progress is counts per phase, the
//! per-host detail is in the fleet log. Skips loudly without OpenSSH (CI installs it).

use crate::suite::common;
use common::sshd::Sshd;
use common::*;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const ADDRESSES: [&str; 4] = ["127.0.1.11", "127.0.1.12", "127.0.1.13", "127.0.1.14"];

/// What the fleet's remote shell writes to standard error when the run starts.
const START_MARK: &str = "@edbstress-fleet: the run starts@";

/// A tiny run: the smallest database, 2 s measured.
const TINY_RUN: [&str; 16] = [
    "--iops-per-mailbox",
    "0.2",
    "--databases",
    "1",
    "--database-size",
    "4MiB",
    "--cache-max",
    "2MiB",
    "--cache-min",
    "1MiB",
    "--duration",
    "2s",
    "--sample-interval",
    "1s",
    "--buffered",
    "--allow-cached-databases",
];

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// An `ssh` in `dir` that records each session into `log`, then runs `real`.
fn recording_ssh(dir: &Path, real: &Path, log: &Path) {
    fs::create_dir_all(dir).unwrap();
    let script = format!(
        r#"#!/bin/bash
log={log}
kind=short
dest=${{@: -1}}
prev=
for a in "$@"; do [[ "$a" == -- ]] && dest=$prev; prev=$a; done
[[ "$*" == *" run "*"--fleet-id"* ]] && kind=run
[[ " $* " == *" -M "* ]] && kind=master
[[ " $* " == *" -G "* ]] && kind=config
via=own
[[ "$*" == *"ControlPath="* && $kind != master ]] && via=shared
echo "start $$ $(date +%s%N) $kind $dest $via" >> "$log"
if [[ $kind == run ]]; then
  {real} "$@" 2> >(while IFS= read -r line; do
      [[ "$line" == '{START_MARK}' ]] && echo "started $$ $(date +%s%N)" >> "$log"
      printf '%s\n' "$line" >&2
    done)
  status=$?
else
  {real} "$@"
  status=$?
fi
echo "end $$ $(date +%s%N)" >> "$log"
exit $status
"#,
        log = log.display(),
        real = real.display()
    );
    let path = dir.join("ssh");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// What the recording ssh saw.
#[derive(Debug, Default)]
struct Sessions {
    /// The most sessions opening or working at once.
    most: usize,
    /// Short calls (checks, directories, copies, stop requests).
    short: usize,
    /// Runs' sessions.
    runs: usize,
    /// Master connections (`ssh -M`).
    masters: usize,
    /// Short calls and runs over a shared connection.
    shared: usize,
}

/// [`Sessions`] from the log: a short call counts from its start to its end, a run's
/// session from its start until its run started (or it ended), a master connection
/// from its start until the first session to its host starts (which waits for it to
/// be up). `ssh -G` (reading the configuration, no connection) does not count.
fn most_at_once(log: &str) -> Sessions {
    let mut events: Vec<(u128, i32)> = Vec::new();
    let mut released = std::collections::HashSet::new();
    let mut masters: Vec<(String, String)> = Vec::new();
    let mut seen = Sessions::default();
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (what, id, at) = (w[0], w[1], w[2].parse::<u128>().unwrap());
        match what {
            "start" => {
                let (kind, dest, via) = (w[3], w[4], w[5]);
                match kind {
                    "config" => {
                        released.insert(id.to_string());
                        continue;
                    }
                    "master" => {
                        seen.masters += 1;
                        masters.push((id.to_string(), dest.to_string()));
                    }
                    "run" => seen.runs += 1,
                    _ => seen.short += 1,
                }
                if via == "shared" {
                    seen.shared += 1;
                }
                if kind != "master" {
                    // Its host's master is up: it no longer counts.
                    if let Some(i) = masters.iter().position(|(_, d)| d == dest) {
                        let (master, _) = masters.remove(i);
                        if released.insert(master) {
                            events.push((at, -1));
                        }
                    }
                }
                events.push((at, 1));
            }
            "started" | "end" => {
                if released.insert(id.to_string()) {
                    events.push((at, -1));
                }
            }
            other => panic!("unknown record {other}"),
        }
    }
    // Ends before starts at one instant: a slot freed is what lets the next start.
    events.sort();
    let mut now = 0;
    let mut most = 0;
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    seen.most = most as usize;
    seen
}

/// What the recording ssh saw of a fleet of four hosts with `--max-ssh-sessions 2`
/// (`log`), whose temporary directory was `fleet_tmp`.
fn assert_sessions(log: &str, fleet_tmp: &Path) {
    // Real sessions went through the recording ssh: per host one connection (its
    // master), and over it one check (version, clock samples and paths), a directory,
    // its run and a copy.
    let seen = most_at_once(log);
    eprintln!("{seen:?}");
    let Sessions {
        most,
        short,
        runs,
        masters,
        shared,
    } = seen;
    assert_eq!(masters, 4, "one connection per host:\n{log}");
    assert_eq!(runs, 4, "{log}");
    assert_eq!(short, 4 * 3, "{short} short sessions:\n{log}");
    assert_eq!(
        shared,
        short + runs,
        "a session had its own connection:\n{log}"
    );
    // No master outlived the fleet: none names the private directory it made for the
    // sockets, and that directory is gone.
    let leftover: Vec<String> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(fleet_tmp.to_str().unwrap()))
        .collect();
    assert!(leftover.is_empty(), "left running: {leftover:?}");
    assert_eq!(
        fs::read_dir(fleet_tmp).unwrap().count(),
        0,
        "the sockets' directory was left behind"
    );
    assert_eq!(
        log.matches("started ").count(),
        4,
        "every run said it started"
    );
    assert!(
        most <= 2,
        "{most} sessions at once with --max-ssh-sessions 2:\n{log}"
    );
    assert_eq!(
        most, 2,
        "the bound was never reached: the fleet ran one at a time"
    );
}

#[test]
fn a_fleet_keeps_its_ssh_sessions_within_the_bound_and_counts_its_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let sentinel = Sentinel::new(tmp.path());
    let root = tmp.path().join("work");
    fs::create_dir(&root).unwrap();
    let Some(sshd) = Sshd::start(&tmp.path().join("sshd"), &ADDRESSES) else {
        return;
    };
    let real = which("ssh").expect("ssh is on the PATH when sshd started");
    let bash = which("bash");
    if bash.is_none() {
        eprintln!(
            "\n!!!!!!!!!!\n!!! SKIPPED: bash is not installed (the recording ssh is a bash script)\n!!!!!!!!!!\n"
        );
        return;
    }
    let sessions = tmp.path().join("sessions.log");
    let bin = tmp.path().join("bin");
    recording_ssh(&bin, &real, &sessions);
    write_loose_limits(&root);

    let mut args: Vec<String> = ["fleet", "run", "--max-ssh-sessions", "2"]
        .map(String::from)
        .to_vec();
    for (i, a) in ADDRESSES.iter().enumerate() {
        let h = root.join(format!("host{}", i + 1));
        args.extend([
            "--host".into(),
            format!(
                "{a},name=host{},db-path={},log-path={},results-dir={}",
                i + 1,
                h.join("db").display(),
                h.join("logs").display(),
                h.join("results").display()
            ),
        ]);
    }
    args.extend(
        [
            "--remote-edbstress",
            binary().to_str().unwrap(),
            "--max-clock-offset",
            "30s",
            "--ssh-config",
            sshd.client_config.to_str().unwrap(),
            "--mailboxes",
            "40",
            // The four preparations share this machine's cores.
            "--lead-time",
            "30s",
            "--output",
            "out",
            "--",
            "--config",
            root.join("margin.toml").to_str().unwrap(),
        ]
        .map(String::from),
    );
    args.extend(TINY_RUN.map(String::from));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The fleet's temporary files (the shared connections' sockets) here.
    let fleet_tmp = tmp.path().join("fleet-tmp");
    fs::create_dir(&fleet_tmp).unwrap();
    let out = command(&root)
        .args(&args)
        .env("PATH", path)
        .env("TMPDIR", &fleet_tmp)
        .output()
        .unwrap();
    let said = text(&out);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{said}");

    assert_sessions(&fs::read_to_string(&sessions).unwrap(), &fleet_tmp);

    // Progress as counts per phase; no host's test log on the terminal.
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("the fleet said:\n{stderr}");
    for line in [
        "preflight 4/4 ok",
        "started 4/4",
        "measuring: 0 running, 4 ended",
        "collected 4/4",
    ] {
        assert!(stderr.contains(line), "no '{line}' in:\n{stderr}");
    }
    assert!(!stderr.contains("[host1]"), "{stderr}");
    assert!(
        stdout(&out).contains("at most 2 ssh sessions at once"),
        "{said}"
    );
    let fleet_log = fs::read_to_string(root.join("out/fleet.log")).unwrap();
    for h in ["host1", "host2", "host3", "host4"] {
        for what in [
            "clock",
            "its run started",
            "Preparing for testing",
            "run ",
            "copied back",
        ] {
            assert!(
                fleet_log
                    .lines()
                    .any(|l| l.contains(&format!("[{h}] ")) && l.contains(what)),
                "{h}: no '{what}' in the fleet log:\n{fleet_log}"
            );
        }
    }
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(root.join("out/results.json")).unwrap()).unwrap();
    assert_eq!(agg["hosts"].as_array().unwrap().len(), 4, "{said}");
    drop(sshd);
    sentinel.assert_untouched();
}
