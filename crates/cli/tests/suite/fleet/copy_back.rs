//! A compromised host answers the copy-back: with a crafted archive (a setuid file owned
//! by someone else, then a symbolic link), with another host's run of this fleet, or
//! with a run of another fleet. Only plain files and directories land, ours and without
//! special bits; the crafted archive is refused; a run counts once and only for its own
//! fleet; the honest host is counted.

use super::*;
use std::os::unix::fs::MetadataExt;

/// A tar stream of a directory tree a compromised host might send.
fn crafted_archive(link_to: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let entry =
        |b: &mut tar::Builder<Vec<u8>>, name: &str, kind: tar::EntryType, mode, body: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_path(name).unwrap();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_uid(4242);
            h.set_gid(4242);
            h.set_size(body.len() as u64);
            if kind == tar::EntryType::Symlink {
                h.set_link_name(link_to).unwrap();
            }
            h.set_cksum();
            b.append(&h, body).unwrap();
        };
    entry(&mut b, "./", tar::EntryType::Directory, 0o755, b"");
    entry(
        &mut b,
        "./Performance_2026_01_01_00_00_00/",
        tar::EntryType::Directory,
        0o7777,
        b"",
    );
    entry(
        &mut b,
        "./Performance_2026_01_01_00_00_00/evil",
        tar::EntryType::Regular,
        0o4755,
        b"#!/bin/sh\nid\n",
    );
    entry(
        &mut b,
        "./Performance_2026_01_01_00_00_00/link",
        tar::EntryType::Symlink,
        0o777,
        b"",
    );
    b.into_inner().unwrap()
}

/// Every entry under `dir`: no links, no special bits, our owner.
fn assert_inert(dir: &Path, uid: u32) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(
            !meta.file_type().is_symlink(),
            "a link landed: {}",
            path.display()
        );
        assert_eq!(
            meta.mode() & 0o7000,
            0,
            "{} has mode {:o}",
            path.display(),
            meta.mode()
        );
        assert_eq!(
            meta.uid(),
            uid,
            "{} is owned by {}",
            path.display(),
            meta.uid()
        );
        if meta.is_dir() {
            assert_inert(&path, uid);
        }
    }
}

#[test]
fn a_compromised_host_lands_only_plain_files_and_only_its_own_run() {
    let site = Site::new();
    let root = &site.root;
    // host2 answers the copy with a crafted archive; host3 with host1's directory of the
    // same fleet, or (once `foreign` names one) with another fleet's directory.
    let crafted = site.path().join("crafted.tar");
    fs::write(
        &crafted,
        crafted_archive(&site.sentinel.path().join("plain.txt")),
    )
    .unwrap();
    let foreign = site.path().join("foreign");
    let script = |name: &str, tar_line: String| {
        let path = site.path().join(name);
        fs::write(
            &path,
            format!(
                "#!/bin/sh\ncase \"$SSH_ORIGINAL_COMMAND\" in\n  \"tar -C \"*) {tar_line} ;;\n  \
                 *) exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\" ;;\nesac\n"
            ),
        )
        .unwrap();
        std::process::Command::new("chmod")
            .arg("755")
            .arg(&path)
            .status()
            .unwrap();
        path
    };
    let host2 = script("host2.sh", format!("exec cat {}", crafted.display()));
    let host3 = script(
        "host3.sh",
        format!(
            "if [ -s {f} ]; then exec tar -C \"$(cat {f})\" -cf - .; fi; \
             exec /bin/sh -c \"$(printf '%s' \"$SSH_ORIGINAL_COMMAND\" | sed 's#/host3/results/#/host1/results/#')\"",
            f = foreign.display()
        ),
    );
    let extra = format!(
        "Match LocalAddress 127.0.0.3\n  ForceCommand {}\nMatch LocalAddress 127.0.0.4\n  ForceCommand {}\n",
        host2.display(),
        host3.display()
    );
    let Some(sshd) = site.sshd_with(&ADDRESSES, &extra) else {
        return;
    };
    let uid = fs::metadata(root).unwrap().uid();
    let limit = Duration::from_secs(300);

    let (a, _) = edbstress_within(&fleet_args(root, &sshd, "a", "15s"), root, limit);
    let said = text(&a);
    assert_inert(&root.join("a"), uid);
    let evil = root.join("a/hosts/host2/Performance_2026_01_01_00_00_00/evil");
    if evil.exists() {
        assert_eq!(fs::metadata(&evil).unwrap().mode() & 0o7777, 0o644);
    }
    assert_exit(&a, 1, "a fleet with compromised hosts");
    let agg = aggregate_of(&root.join("a"));
    let why2 = why_missing(&agg, "host2");
    assert!(
        why2.contains("refused") && why2.contains("symbolic link"),
        "{why2}"
    );
    let why3 = why_missing(&agg, "host3");
    assert!(why3.contains("counts once"), "{why3}");
    let id_a = fleet_id_of(&a);
    let counted = counted_runs(root, &agg);
    assert_eq!(counted.len(), 1, "{said}");
    assert_eq!(counted[0].fleet_id.as_deref(), Some(id_a.as_str()));

    // host3 now sends fleet A's host1 run to fleet B.
    fs::write(
        &foreign,
        root.join(format!("host1/results/{id_a}"))
            .display()
            .to_string(),
    )
    .unwrap();
    let (b, _) = edbstress_within(&fleet_args(root, &sshd, "b", "15s"), root, limit);
    assert_exit(&b, 1, "a fleet sent another fleet's run");
    assert_inert(&root.join("b"), uid);
    let agg = aggregate_of(&root.join("b"));
    let why3 = why_missing(&agg, "host3");
    assert!(
        why3.contains(&id_a) && why3.contains("not of this fleet"),
        "{why3}"
    );
    let id_b = fleet_id_of(&b);
    let counted = counted_runs(root, &agg);
    assert_eq!(counted.len(), 1, "{}", text(&b));
    assert_eq!(counted[0].fleet_id.as_deref(), Some(id_b.as_str()));
    drop(sshd);
    site.sentinel.assert_untouched();
}
