//! What ssh's failure was, told apart: a refused login names the user and keys, a host
//! where no sshd answers or whose sshd is frozen names the connection, a missing
//! edbstress names the install; nothing starts.

use super::*;

/// `fleet run` of host1 only, with `extra` fleet options, against `sshd`.
fn one_host(root: &Path, sshd: &Sshd, output: &str, spec: String, extra: &[&str]) -> String {
    let args = fleet_cmd(root, sshd, output, "10s", &[spec], extra);
    let (out, elapsed) = edbstress_within(&args, root, Duration::from_secs(120));
    let said = text(&out);
    assert_exit(&out, 2, output);
    assert!(said.contains("nothing was started"), "{said}");
    eprintln!("{output}: {:.1} s: {said}", elapsed.as_secs_f64());
    said
}

#[test]
fn ssh_failures_name_their_cause() {
    let site = Site::new();
    let root = &site.root;
    let Some(sshd) = site.sshd(&ADDRESSES) else {
        return;
    };
    let spec = host_spec(root, 0);

    let said = one_host(
        root,
        &sshd,
        "auth",
        spec.clone(),
        &["--ssh-option", "User=nosuchuser"],
    );
    assert!(
        said.contains("could not log in") && said.contains("keys"),
        "{said}"
    );
    assert!(!said.contains("install edbstress"), "{said}");

    let said = one_host(
        root,
        &sshd,
        "missing",
        spec.clone(),
        &["--remote-edbstress", "/nonexistent/edbstress"],
    );
    assert!(said.contains("is not installed there"), "{said}");

    // No sshd listens on 127.0.0.9.
    let unreachable = spec.replacen("127.0.0.2", "127.0.0.9", 1);
    let said = one_host(root, &sshd, "unreachable", unreachable, &[]);
    assert!(said.contains("no sshd answers"), "{said}");
    assert!(!said.contains("install edbstress"), "{said}");

    // A frozen sshd takes the connection and never answers.
    let frozen = Sshd::start(&site.path().join("frozen"), &["127.0.0.2"]).unwrap();
    let pid = i32::try_from(frozen.pid()).unwrap();
    deadlines::signal("STOP", pid);
    let said = one_host(
        root,
        &frozen,
        "frozen",
        spec,
        &["--ssh-option", "ConnectTimeout=3"],
    );
    deadlines::signal("CONT", pid);
    assert!(
        said.contains("did not answer within the connect timeout"),
        "{said}"
    );
    assert!(!said.contains("install edbstress"), "{said}");
    drop(frozen);
    drop(sshd);
    site.sentinel.assert_untouched();
}
