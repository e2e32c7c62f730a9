//! A fleet's evidence is its own: a fleet directory is new (an earlier fleet's in
//! `--output` is never taken for this one's), two fleets at once with one results
//! directory each keep their own runs (a random fleet id names each fleet's directory on
//! every host and is recorded by every run), and a results directory others can write,
//! filled with links where a fleet's files would go, is never written through.

use super::*;

/// The run directories of `fleet_id` on host `i` (under its results directory).
fn remote_runs(root: &Path, i: usize, fleet_id: &str) -> Vec<RunResults> {
    let dir = root.join(format!("host{}/results/{fleet_id}", i + 1));
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .filter_map(|e| fs::read(e.path().join("results.json")).ok())
        .map(|b| read_results(&b).unwrap())
        .collect()
}

#[test]
fn a_fleet_never_reuses_an_existing_output_directory() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let limit = Duration::from_secs(300);
    let (first, _) = edbstress_within(&fleet_args(root, &sshd, "out", "15s"), root, limit);
    assert!(
        matches!(first.status.code(), Some(0 | 1)),
        "{}",
        text(&first)
    );
    let before = fs::read(root.join("out/results.json")).unwrap();

    // Again into the same directory, with options every host refuses (exit 2 there).
    let mut bad = fleet_args(root, &sshd, "out", "15s");
    bad.push("--no-such-option".into());
    let (again, _) = edbstress_within(&bad, root, limit);
    let said = text(&again);
    assert_exit(&again, 2, "a fleet into an earlier fleet's directory");
    assert!(
        said.contains("already holds files") && said.contains("--output"),
        "{said}"
    );
    assert_eq!(fs::read(root.join("out/results.json")).unwrap(), before);

    // Into a new directory: every host refused its options, so nothing is counted.
    let at = bad.iter().position(|a| a == "out").unwrap();
    bad[at] = "out2".into();
    let (refused, _) = edbstress_within(&bad, root, limit);
    let said = text(&refused);
    assert!(refused.status.code() != Some(0), "{said}");
    assert!(!said.contains("servers: Pass"), "{said}");
    for h in ["host1", "host2", "host3"] {
        assert!(said.contains(h), "{h} is not named: {said}");
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}

#[test]
fn two_fleets_at_once_on_one_results_directory_keep_their_own_runs() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let good = fleet_args(root, &sshd, "a", "20s");
    let mut bad = fleet_args(root, &sshd, "b", "20s");
    bad.push("--no-such-option".into());
    let spawn = |args: &[String]| {
        command(root)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let started = Instant::now();
    let (a, b) = (spawn(&good), spawn(&bad));
    let (a, _) = wait_within(a, started, Duration::from_secs(300));
    let (b, _) = wait_within(b, started, Duration::from_secs(300));
    let (said_a, said_b) = (text(&a), text(&b));
    assert!(matches!(a.status.code(), Some(0 | 1)), "{said_a}");
    assert!(
        b.status.code() != Some(0),
        "fleet B passed on A's runs: {said_b}"
    );
    assert!(!said_b.contains("servers: Pass"), "{said_b}");
    let (id_a, id_b) = (fleet_id_of(&a), fleet_id_of(&b));
    assert_ne!(id_a, id_b);
    // Each fleet had its own directory on every host; A counted exactly its runs there.
    let counted = counted_runs(root, &aggregate_of(&root.join("a")));
    assert_eq!(counted.len(), 3, "{said_a}");
    for (i, r) in counted.iter().enumerate() {
        assert_eq!(r.fleet_id.as_deref(), Some(id_a.as_str()));
        let there = remote_runs(root, i, &id_a);
        assert_eq!(there.len(), 1);
        assert_eq!(there[0].run_id, r.run_id);
        assert!(
            remote_runs(root, i, &id_b).is_empty(),
            "B's hosts refused to run"
        );
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}

#[test]
fn links_left_in_a_shared_results_directory_are_never_written_through() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    // Another user's links in a results directory anyone can write, under every name a
    // fleet started in the next minutes could pick by its start time.
    let victim_pid = site.sentinel.path().join("edbstress001.edb.lock");
    let victim_config = site.sentinel.path().join("plain.txt");
    let now = chrono::Local::now();
    for i in 0..3 {
        let results = root.join(format!("host{}/results", i + 1));
        fs::create_dir_all(&results).unwrap();
        fs::set_permissions(&results, fs::Permissions::from_mode(0o777)).unwrap();
        for s in 0..240 {
            let at = now + chrono::Duration::seconds(s);
            let dir = results.join(format!("fleet-{}", at.format("%Y%m%d-%H%M%S")));
            fs::create_dir(&dir).unwrap();
            symlink(&victim_pid, dir.join(".edbstress-fleet.pid")).unwrap();
            symlink(&victim_config, dir.join("config.toml")).unwrap();
        }
    }
    let args = fleet_file_args(root, &sshd, "out", "15s");
    let (out, _) = edbstress_within(&args, root, Duration::from_secs(300));
    let said = text(&out);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{said}");
    site.sentinel.assert_untouched();
    // The fleet's own directory on each host is a new, real directory with real files.
    let id = fleet_id_of(&out);
    for i in 0..3 {
        let dir = root.join(format!("host{}/results/{id}", i + 1));
        let meta = fs::symlink_metadata(&dir).unwrap();
        assert!(meta.is_dir(), "{}", dir.display());
        for f in [".edbstress-fleet.pid", "config.toml"] {
            assert!(fs::symlink_metadata(dir.join(f)).unwrap().is_file(), "{f}");
        }
    }
    assert_eq!(
        counted_runs(root, &aggregate_of(&root.join("out"))).len(),
        3,
        "{said}"
    );
    drop(sshd);
}
