//! Host names name directories under the fleet's `hosts/`: two names of one directory
//! (`mbx1` and `mbx1/`, `dup` and `dup/.`) or a name leaving `--output` (`/abs/path`,
//! `..`) are refused before anything starts, naming the host and the fix.

use super::*;

/// Host `i` named `name`, its directories those of host `i` (names here are not
/// directory names).
fn spec(root: &Path, i: usize, name: &str) -> String {
    LoopbackHost::in_dir(host(root, i).dir, ADDRESSES[i], name).spec()
}

#[test]
fn host_names_sharing_a_directory_or_leaving_the_output_are_refused() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let outside = site.path().join("outside");
    let outside_name = outside.display().to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["mbx1", "mbx1/"], "contains '/'"),
        (&["dup", "dup/."], "contains '/'"),
        (&["host1", &outside_name], "contains '/'"),
        (&["host1", ".."], "is '.' or '..'"),
    ];
    for (i, (names, problem)) in cases.iter().enumerate() {
        let specs: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(k, n)| spec(root, k, n))
            .collect();
        let output = format!("out{i}");
        let (out, _) = edbstress_within(
            &fleet_cmd(root, &sshd, &output, "12s", &specs, &[]),
            root,
            Duration::from_secs(240),
        );
        let said = text(&out);
        assert_exit(&out, 2, &format!("hosts named {names:?}"));
        assert!(said.contains(problem) && said.contains("name=…"), "{said}");
        // Refused before anything started: no fleet directory on any host, no output.
        assert!(!root.join(&output).join("results.json").exists(), "{said}");
        for k in 1..=2 {
            let results = root.join(format!("host{k}/results"));
            assert!(
                fs::read_dir(&results).map_or(true, |mut d| d.next().is_none()),
                "{names:?}: host{k} was started: {said}"
            );
        }
    }
    assert!(!outside.exists(), "a host's copy landed outside --output");
    drop(sshd);
    site.sentinel.assert_untouched();
}
