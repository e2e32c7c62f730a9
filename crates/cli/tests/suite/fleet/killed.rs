//! A fleet killed outright (SIGKILL: no cleanup runs) leaves no ssh connection behind
//! for good: each host's shared connection (its master) reads a pipe from the fleet, so
//! it ends by itself once its host's run — which goes on, as a run on its own would —
//! ended and took its session with it.

use super::*;
use deadlines::{fleet_dirs, remote_pid};

/// The processes whose command line names `dir` (the fleet's temporary directory: its
/// masters and the sessions over them).
fn naming(dir: &Path) -> Vec<String> {
    let dir = dir.to_str().unwrap();
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(dir))
        .collect()
}

#[test]
fn a_fleet_killed_outright_leaves_no_connection_behind_once_its_runs_end() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let fleet_tmp = site.path().join("fleet-tmp");
    fs::create_dir(&fleet_tmp).unwrap();
    let specs = [host_spec(root, 0), host_spec(root, 1)];
    let before = fleet_dirs(root, 0);
    let mut fleet = command(root)
        .args(fleet_cmd(root, &sshd, "out", "10s", &specs, &[]))
        .env("TMPDIR", &fleet_tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    remote_pid(root, 0, &before, &mut fleet);
    let masters = naming(&fleet_tmp)
        .iter()
        .filter(|c| c.contains(" -M "))
        .count();
    assert_eq!(masters, 2, "one master per host: {:?}", naming(&fleet_tmp));
    fleet.kill().unwrap();
    fleet.wait().unwrap();
    let killed = Instant::now();

    // The runs end after the lead time and their 6 s; their sessions, then the masters,
    // follow.
    let limit = Duration::from_secs(90);
    while !naming(&fleet_tmp).is_empty() {
        assert!(
            killed.elapsed() < limit,
            "still running {} s after the fleet was killed: {:?}",
            limit.as_secs(),
            naming(&fleet_tmp)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "every connection ended {:.1} s after the fleet was killed",
        killed.elapsed().as_secs_f64()
    );
    drop(sshd);
    site.sentinel.assert_untouched();
}
