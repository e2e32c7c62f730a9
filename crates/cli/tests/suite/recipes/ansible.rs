//! The user guide's Ansible recipe, run for real: `examples/ansible/edbstress-fleet.yml`
//! against three "hosts" (loopback addresses of a real sshd), each running `edbstress run
//! --start-at` with one start time, then `edbstress aggregate` of the fetched run
//! directories; skips loudly without ansible-playbook (pip install ansible-core) or OpenSSH.

use crate::suite::common;
use common::hosts::LoopbackHost;
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn ansible_playbook() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("ansible-playbook"))
        .find(|p| p.is_file())
}

#[test]
fn the_ansible_recipe_runs_three_hosts_together_and_aggregates_them() {
    let Some(playbook_bin) = ansible_playbook() else {
        eprintln!(
            "\n!!!!!!!!!!\n!!! SKIPPED: ansible-playbook is not installed (pip install ansible-core) \
             — the Ansible recipe was not run\n!!!!!!!!!!\n"
        );
        return;
    };
    let site = Site::new();
    let root = &site.root;
    let addresses = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];
    let Some(sshd) = site.sshd(&addresses) else {
        return;
    };
    let mut inventory = String::from("[mailbox_servers]\n");
    for (i, a) in addresses.iter().enumerate() {
        let h = LoopbackHost::new(root, a, &format!("mbx{}", i + 1));
        inventory.push_str(&format!(
            "{} ansible_host={a} db_path={} log_path={} results_dir={}\n",
            h.name,
            h.db().display(),
            h.logs().display(),
            h.results().display()
        ));
    }
    inventory.push_str(&format!(
        "[mailbox_servers:vars]\nansible_ssh_common_args=-F {}\nansible_python_interpreter=/usr/bin/python3\n\
         [local]\nlocalhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n",
        sshd.client_config.display()
    ));
    fs::write(root.join("inventory.ini"), inventory).unwrap();
    let mut options: Vec<String> = vec![
        "--config".into(),
        root.join("margin.toml").display().to_string(),
        "--mailboxes".into(),
        "100".into(),
    ];
    options.extend(SHORT_RUN.map(String::from));
    let run_options = serde_json::json!({ "run_options": options });
    let playbook =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ansible/edbstress-fleet.yml");
    let collect = root.join("collected");
    let home = root.join("ansible-home");
    let out = Command::new(&playbook_bin)
        .arg("-i")
        .arg(root.join("inventory.ini"))
        .arg(&playbook)
        .arg("-e")
        .arg(format!("collect_dir={}", collect.display()))
        .arg("-e")
        .arg(format!("edbstress={}", binary().display()))
        .arg("-e")
        .arg(format!("archive_dir={}", root.display()))
        .args(["-e", "lead='35 seconds'"])
        .arg("-e")
        .arg(run_options.to_string())
        // Ansible's own files stay in the test's directory.
        .env("ANSIBLE_HOME", &home)
        .env("ANSIBLE_LOCAL_TEMP", home.join("tmp"))
        .env("ANSIBLE_REMOTE_TEMP", home.join("remote-tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_FORCE_COLOR", "0")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ansible-playbook failed:\n{}",
        text(&out)
    );
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(collect.join("aggregate/results.json")).unwrap()).unwrap();
    assert_eq!(agg["kind"], "aggregate");
    assert_eq!(agg["complete"], true, "{}", text(&out));
    let hosts: Vec<&str> = agg["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts.len(), 3);
    for h in ["mbx1", "mbx2", "mbx3"] {
        assert!(hosts.contains(&h), "{hosts:?}");
    }
    // Started together: the common window is nearly the whole 6 s measured.
    assert!(agg["common_window"]["seconds"].as_f64().unwrap() > 5.0);
    drop(sshd);
    site.sentinel.assert_untouched();
}
