//! `examples/loopback-fleet.sh`, the README's way to try a fleet on one machine, run as
//! written: its throwaway sshd on 127.0.0.1 and 127.0.0.2, a two-host fleet of the
//! built binary, the aggregate of both hosts, then the sshd stopped by its PID and its
//! key deleted. Skips loudly without OpenSSH.

use crate::suite::common;

use common::*;

use std::fs;
use std::path::Path;
use std::process::Command;

fn installed(name: &str) -> bool {
    Command::new("sh")
        .args([
            "-c",
            &format!("command -v {name} || test -x /usr/sbin/{name}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_loopback_fleet_example_runs_two_hosts_and_stops_its_sshd() {
    let missing: Vec<&str> = ["sshd", "ssh", "ssh-keygen"]
        .into_iter()
        .filter(|n| !installed(n))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "\n!!!!!!!!!!\n!!! SKIPPED: {} not installed; apt-get install openssh-server \
             openssh-client to run the loopback fleet example\n!!!!!!!!!!\n",
            missing.join(", ")
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("try");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/loopback-fleet.sh");
    let out = Command::new("sh")
        .arg(&script)
        .arg(&out_dir)
        .env("EDBSTRESS", binary())
        .output()
        .expect("run the example");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // 0 or 1: the fleet ran and judged (a busy machine may miss the latency limits).
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}:\n{said}",
        out.status.code()
    );
    let aggregate = results(&out_dir.join("fleet"));
    let hosts: Vec<&str> = aggregate["hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("no hosts in the aggregate: {aggregate}"))
        .iter()
        .filter_map(|h| h["host"].as_str())
        .collect();
    assert_eq!(hosts, ["mbx1", "mbx2"], "{said}");
    for host in ["mbx1", "mbx2"] {
        assert!(
            !run_dirs(&out_dir.join(host)).is_empty(),
            "{host} ran nothing:\n{said}"
        );
    }
    // The server it started is gone, by the PID it printed.
    let pid = said
        .split("stopped sshd (PID ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("the script did not say it stopped sshd:\n{said}"));
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists()
            || fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !c.contains("sshd")),
        "sshd {pid} still runs"
    );
}
