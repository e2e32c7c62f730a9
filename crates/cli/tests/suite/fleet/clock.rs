//! The clock check runs over each host's one check session: on loopback (one clock) the
//! offset it reports is within half the session's round trip and far under the limit,
//! while a host whose `date` runs 100 s ahead, and one whose `date` prints no time, are
//! each named with what is wrong and the fix; nothing starts.

use super::*;

/// A shell `ForceCommand` that runs the session's command with `date` replaced by
/// `fake` (a shell script's body).
fn with_fake_date(dir: &Path, name: &str, fake: &str) -> PathBuf {
    let bin = dir.join(format!("{name}-bin"));
    fs::create_dir_all(&bin).unwrap();
    let date = bin.join("date");
    fs::write(&date, format!("#!/bin/sh\n{fake}\n")).unwrap();
    let wrapper = dir.join(format!("{name}.sh"));
    fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nPATH={}:$PATH\nexport PATH\nexec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
            bin.display()
        ),
    )
    .unwrap();
    for f in [&date, &wrapper] {
        let status = std::process::Command::new("chmod")
            .arg("755")
            .arg(f)
            .status()
            .unwrap();
        assert!(status.success());
    }
    wrapper
}

/// The offset and round trip the fleet log gives `host` ("clock +0.001 s, round trip
/// 0.002 s").
fn clock_of(fleet_log: &str, host: &str) -> (f64, f64) {
    let line = fleet_log
        .lines()
        .find(|l| l.contains(&format!("[{host}] ")) && l.contains(", clock "))
        .unwrap_or_else(|| panic!("no clock for {host} in:\n{fleet_log}"));
    let number_after = |label: &str| -> f64 {
        let rest = &line[line.find(label).unwrap() + label.len()..];
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    (number_after(", clock "), number_after("round trip "))
}

#[test]
fn the_clock_check_over_one_session_is_close_on_loopback_and_names_a_host_that_is_off() {
    let site = Site::new();
    let root = &site.root;
    let scripts = site.path().join("fake-date");
    fs::create_dir_all(&scripts).unwrap();
    let ahead = with_fake_date(
        &scripts,
        "ahead",
        "echo \"$(( $(/bin/date +%s) + 100 )).$(/bin/date +%N)\"",
    );
    let no_time = with_fake_date(&scripts, "no-time", "echo tuesday");
    let extra = format!(
        "Match LocalAddress 127.0.0.3\n  ForceCommand {}\nMatch LocalAddress 127.0.0.4\n  ForceCommand {}\n",
        ahead.display(),
        no_time.display()
    );
    let Some(sshd) = site.sshd_with(&ADDRESSES, &extra) else {
        return;
    };
    let specs: Vec<String> = (0..3).map(|i| host_spec(root, i)).collect();
    let mut args = fleet_cmd(root, &sshd, "out", "10s", &specs, &[]);
    let limit = args.iter().position(|a| a == "--max-clock-offset").unwrap() + 1;
    args[limit] = "250ms".into();
    let (out, elapsed) = edbstress_within(&args, root, Duration::from_secs(120));
    let said = text(&out);
    eprintln!("{:.1} s: {said}", elapsed.as_secs_f64());
    assert_exit(&out, 2, "a fleet with a host 100 s ahead");
    assert!(said.contains("nothing was started"), "{said}");
    assert!(
        said.contains("host2's clock is +100.") && said.contains("synchronise the clocks"),
        "{said}"
    );
    assert!(
        said.contains("host3: `date +%s.%N` gave no time") && said.contains("\"tuesday\""),
        "{said}"
    );
    assert!(
        !said.contains("host1:") && !said.contains("host1's"),
        "{said}"
    );

    // host1 passed; one clock, so what is measured is the session's asymmetry, at
    // most half its round trip.
    let fleet_log = fs::read_to_string(root.join("out/fleet.log")).unwrap();
    let (offset, round_trip) = clock_of(&fleet_log, "host1");
    eprintln!("host1: offset {offset:+.3} s, round trip {round_trip:.3} s");
    assert!(
        offset.abs() <= round_trip / 2.0 + 0.002,
        "offset {offset} s beyond half the round trip {round_trip} s"
    );
    assert!(round_trip < 0.2, "round trip {round_trip} s:\n{fleet_log}");
    for k in 1..=3 {
        let results = root.join(format!("host{k}/results"));
        assert!(
            fs::read_dir(&results).map_or(true, |mut d| d.next().is_none()),
            "host{k} was started: {said}"
        );
    }
    drop(sshd);
    site.sentinel.assert_untouched();
}
