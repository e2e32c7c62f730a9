//! Copying a host's fleet directory back: `tar -cf -` there, read here with the `tar`
//! crate. The host is not trusted with this machine: only plain files and directories
//! are taken, under relative names without `..`, each created new by us (our owner, our
//! modes, no setuid/setgid/sticky bits, never through a link); a symbolic link, hard link,
//! device or FIFO, or a name leaving the directory refuses the whole copy. The copy is
//! bounded in time, so a host that stops answering mid-copy is named, not waited for.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::process_group::GroupChild;
use crate::ssh::{Ssh, command_line, failure_to, wait_until};

/// Why a copy-back was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The local directory could not be made or written.
    #[error("cannot write {path}: {source}")]
    Local {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The archive holds something other than plain files and directories.
    #[error("the host's archive was refused: {0}")]
    Refused(String),
    /// The archive could not be read.
    #[error("the host's archive is unreadable: {0}")]
    Unreadable(String),
    /// ssh or the remote tar failed.
    #[error("{0}")]
    Remote(String),
    /// The host did not finish in time.
    #[error("the copy did not finish within {0} s: the host stopped answering")]
    TimedOut(u64),
}

/// Copies the remote `dir` on `dest` into `local`, which must not exist yet; at most
/// `limit`.
pub fn copy_back(
    ssh: &Ssh,
    dest: &str,
    dir: &str,
    local: &Path,
    limit: Duration,
) -> Result<(), CopyError> {
    let local_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CopyError::Local { path, source }
    };
    DirBuilder::new()
        .mode(0o755)
        .create(local)
        .map_err(local_err(local))?;
    let started = Instant::now();
    let line = format!("tar -C {} -cf - .", command_line(&[dir.to_string()]));
    let mut remote = GroupChild::spawn(
        ssh.command(dest, &line)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(|e| CopyError::Remote(format!("cannot start ssh: {e}")))?;
    let stdout = remote.child_mut().stdout.take();
    let stderr = remote.child_mut().stderr.take();
    let root = local.to_path_buf();
    let extracting = std::thread::spawn(move || match stdout {
        Some(s) => extract(s, &root),
        None => Err(CopyError::Remote("no ssh output".into())),
    });
    let errors = std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut s) = stderr {
            let _ = s.read_to_end(&mut text);
        }
        text
    });
    let Some(status) = wait_until(&mut remote, Some(started + limit)) else {
        remote.kill();
        let _ = extracting.join();
        return Err(CopyError::TimedOut(limit.as_secs()));
    };
    // The extraction ends with the stream; a refused archive ends it early.
    let extracted = extracting
        .join()
        .unwrap_or_else(|_| Err(CopyError::Unreadable("the reader panicked".into())));
    let stderr = errors.join().unwrap_or_default();
    extracted?;
    if !status.success() {
        let out = std::process::Output {
            status,
            stdout: Vec::new(),
            stderr,
        };
        return Err(CopyError::Remote(failure_to(dest, &out)));
    }
    Ok(())
}

/// Extracts the plain files and directories of the archive on `stream` into `root`.
pub fn extract(stream: impl Read, root: &Path) -> Result<(), CopyError> {
    let unreadable = |e: std::io::Error| CopyError::Unreadable(e.to_string());
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        let name = entry.path().map_err(unreadable)?.into_owned();
        let Some(relative) = relative(&name) else {
            return Err(CopyError::Refused(format!(
                "{} leaves the run directory (an absolute path or '..')",
                name.display()
            )));
        };
        let kind = entry.header().entry_type();
        let path = root.join(&relative);
        let local_err = |source| CopyError::Local {
            path: path.clone(),
            source,
        };
        if kind.is_dir() {
            if relative.as_os_str().is_empty() {
                continue;
            }
            make_dirs(root, &relative)?;
        } else if kind.is_file() || kind.is_contiguous() {
            if let Some(parent) = relative.parent() {
                make_dirs(root, parent)?;
            }
            // create_new: O_EXCL, so never through a link and never over a file.
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        CopyError::Refused(format!("{} is in the archive twice", name.display()))
                    } else {
                        local_err(e)
                    }
                })?;
            std::io::copy(&mut entry, &mut file)
                .map_err(|e| CopyError::Unreadable(format!("{}: {e}", name.display())))?;
        } else {
            return Err(CopyError::Refused(format!(
                "{} is a {}, not a plain file or directory",
                name.display(),
                kind_name(kind)
            )));
        }
    }
    Ok(())
}

/// `name` as a path of plain components (`.` dropped); `None` when it is absolute or
/// has `..`.
fn relative(name: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in name.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Makes `root/relative` and its parents, each a directory of ours: one found in the way
/// must be a real directory (we made it: we make nothing else).
fn make_dirs(root: &Path, relative: &Path) -> Result<(), CopyError> {
    let mut path = root.to_path_buf();
    for part in relative.components() {
        path.push(part);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(CopyError::Refused(format!(
                    "{} is both a file and a directory in the archive",
                    relative.display()
                )));
            }
            Err(_) => DirBuilder::new()
                .mode(0o755)
                .create(&path)
                .map_err(|source| CopyError::Local {
                    path: path.clone(),
                    source,
                })?,
        }
    }
    Ok(())
}

fn kind_name(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Symlink => "symbolic link",
        tar::EntryType::Link => "hard link",
        tar::EntryType::Char => "character device",
        tar::EntryType::Block => "block device",
        tar::EntryType::Fifo => "FIFO",
        _ => "special entry",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn archive(entries: &[(&str, tar::EntryType, u32)]) -> Vec<u8> {
        let mut out = tar::Builder::new(Vec::new());
        for (name, kind, mode) in entries {
            let mut h = tar::Header::new_gnu();
            h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            h.set_entry_type(*kind);
            h.set_mode(*mode);
            h.set_uid(4242);
            h.set_size(if kind.is_file() { 5 } else { 0 });
            if *kind == tar::EntryType::Symlink {
                h.set_link_name("/etc/passwd").unwrap();
            }
            h.set_cksum();
            let body: &[u8] = if kind.is_file() { b"hello" } else { b"" };
            out.append(&h, body).unwrap();
        }
        out.into_inner().unwrap()
    }

    #[test]
    fn only_plain_files_and_directories_land_without_special_bits() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("copy");
        std::fs::create_dir(&root).unwrap();
        let ok = archive(&[
            ("./", tar::EntryType::Directory, 0o755),
            ("./run/", tar::EntryType::Directory, 0o7777),
            ("./run/setuid", tar::EntryType::Regular, 0o4755),
        ]);
        extract(&ok[..], &root).unwrap();
        let mode = std::fs::metadata(root.join("run/setuid"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7000, 0, "{mode:o}");
        assert_eq!(std::fs::read(root.join("run/setuid")).unwrap(), b"hello");
        for bad in [
            ("./link", tar::EntryType::Symlink, 0o777),
            ("./hard", tar::EntryType::Link, 0o644),
            ("./dev", tar::EntryType::Char, 0o644),
            ("../escape", tar::EntryType::Regular, 0o644),
            ("/abs", tar::EntryType::Regular, 0o644),
            ("./run/setuid", tar::EntryType::Regular, 0o644),
        ] {
            let e = extract(&archive(&[bad])[..], &root).unwrap_err();
            assert!(matches!(e, CopyError::Refused(_)), "{bad:?}: {e}");
        }
        assert!(!tmp.path().join("escape").exists());
    }
}
