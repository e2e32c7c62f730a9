//! Everything waits with a deadline: a host whose edbstress freezes (SIGSTOP) is named
//! lost once lead time + duration + grace have passed and the others are collected; a
//! Ctrl-C with a frozen host stops the others, waits a bounded time, and collects them.

use super::*;

/// The fleet directories on host `i` (under its results directory).
pub(crate) fn fleet_dirs(root: &Path, i: usize) -> Vec<PathBuf> {
    let results = root.join(format!("host{}/results", i + 1));
    fs::read_dir(results)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The PID a new fleet (one not among `before`) recorded for host `i`'s run, once
/// written; fails when the fleet ends first or after a minute.
pub(crate) fn remote_pid(
    root: &Path,
    i: usize,
    before: &[PathBuf],
    fleet: &mut std::process::Child,
) -> i32 {
    let started = Instant::now();
    loop {
        let pid = fleet_dirs(root, i)
            .into_iter()
            .filter(|d| !before.contains(d))
            .filter_map(|d| fs::read_to_string(d.join(".edbstress-fleet.pid")).ok())
            .find_map(|p| p.trim().parse().ok());
        if let Some(pid) = pid {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "host{} never started",
            i + 1
        );
        assert!(fleet.try_wait().unwrap().is_none(), "the fleet ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `signal` to `pid` (a process this test's fleet started).
pub(crate) fn signal(signal: &str, pid: i32) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// Ends a process this test froze (SIGKILL by its PID) when dropped, also when the test
/// fails first.
pub(crate) struct Frozen(pub i32);

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .status();
    }
}

fn spawn_fleet(root: &Path, args: &[String]) -> std::process::Child {
    command(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_frozen_host_is_named_lost_and_the_others_are_collected() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let specs: Vec<String> = (0..3).map(|i| host_spec(root, i)).collect();
    let args = fleet_cmd(root, &sshd, "out", "15s", &specs, &["--grace", "20s"]);
    let started = Instant::now();
    let mut fleet = spawn_fleet(root, &args);
    let pid = remote_pid(root, 1, &[], &mut fleet);
    std::thread::sleep(Duration::from_secs(8));
    signal("STOP", pid);
    let _frozen = Frozen(pid);
    // Lead 15 s + duration 6 s + grace 20 s, and the checks and copies: well within 150 s.
    let (out, elapsed) = wait_within(fleet, started, Duration::from_secs(150));
    let said = text(&out);
    eprintln!(
        "frozen host: the fleet ended after {:.1} s",
        elapsed.as_secs_f64()
    );
    assert_exit(&out, 1, "a fleet with a frozen host");
    let agg = aggregate_of(&root.join("out"));
    let why = why_missing(&agg, "host2");
    assert!(
        why.contains("lost") && why.contains("grace"),
        "{why}\n{said}"
    );
    let id = fleet_id_of(&out);
    let counted = counted_runs(root, &agg);
    assert_eq!(counted.len(), 2, "{said}");
    for r in &counted {
        assert_eq!(r.fleet_id.as_deref(), Some(id.as_str()));
        assert!(!r.aborted, "{said}");
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}

#[test]
fn ctrl_c_with_a_frozen_host_stops_the_others_and_collects_them() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let specs: Vec<String> = (0..3).map(|i| host_spec(root, i)).collect();
    // The lead time covers three database preparations at once on a busy machine (at
    // load average 30, 10 s did not: a host's run found its start time past and ended).
    let mut args = fleet_cmd(root, &sshd, "out", "20s", &specs, &["--grace", "20s"]);
    // A long run, stopped well before its end.
    let at = args.iter().position(|a| a == "6s").unwrap();
    args[at] = "10m".into();
    let started = Instant::now();
    let mut fleet = spawn_fleet(root, &args);
    let pid = remote_pid(root, 1, &[], &mut fleet);
    // Into the measured period.
    std::thread::sleep(Duration::from_secs(25));
    signal("STOP", pid);
    let _frozen = Frozen(pid);
    let fleet_pid = i32::try_from(fleet.id()).unwrap();
    signal("INT", fleet_pid);
    let interrupted = Instant::now();
    let (out, _) = wait_within(fleet, started, Duration::from_secs(180));
    let said = text(&out);
    eprintln!(
        "Ctrl-C with a frozen host: the fleet ended {:.1} s after it",
        interrupted.elapsed().as_secs_f64()
    );
    assert_exit(&out, 130, "a stopped fleet");
    let agg = aggregate_of(&root.join("out"));
    let why = why_missing(&agg, "host2");
    assert!(
        why.contains("lost") && why.contains("stop"),
        "{why}\n{said}"
    );
    let id = fleet_id_of(&out);
    let counted = counted_runs(root, &agg);
    assert_eq!(counted.len(), 2, "{said}");
    for r in &counted {
        assert_eq!(r.fleet_id.as_deref(), Some(id.as_str()));
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}
