//! The lock of an instance's log directory: `flock` on the directory itself.
//!
//! A log directory belongs to one database. Every process that writes one (a run's
//! instance, prepare, recover, clean, log fault injection) holds its lock exclusively,
//! readers (`checksum`) hold it shared, like the database lock. Locking the directory,
//! not a file named after a database, means it does not matter which `--db-path` the
//! other command was given, or by which name (symbolic link) it reached the directory:
//! the flock is keyed by the directory's device and inode. Nothing is created in the
//! directory, so nothing is left behind; the flock goes when its holder exits.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::runtime::lock::{LockError, LockMode, who_holds};

/// A held log-directory lock; released on drop.
#[derive(Debug)]
pub struct LogDirLock {
    _dir: Flock<File>,
    path: PathBuf,
}

impl LogDirLock {
    /// Locks the directory `dir` (which must exist) in `mode`.
    pub fn acquire(dir: &Path, mode: LockMode) -> Result<LogDirLock, LockError> {
        let file = open_dir(dir).map_err(|source| io(dir, "open", source))?;
        let arg = match mode {
            LockMode::Exclusive => FlockArg::LockExclusiveNonblock,
            LockMode::Shared => FlockArg::LockSharedNonblock,
        };
        match Flock::lock(file, arg) {
            Ok(locked) => Ok(LogDirLock {
                _dir: locked,
                path: dir.to_path_buf(),
            }),
            Err((file, Errno::EWOULDBLOCK)) => Err(held_error(dir, file, mode)),
            Err((_, errno)) => Err(io(dir, "flock", errno.into())),
        }
    }

    /// Locks `dir` if it exists; `None` when it does not (there is nothing to protect).
    pub fn acquire_if_exists(dir: &Path, mode: LockMode) -> Result<Option<LogDirLock>, LockError> {
        match LogDirLock::acquire(dir, mode) {
            Ok(lock) => Ok(Some(lock)),
            Err(LockError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The locked directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Checks that nobody holds the lock of `dir` (a missing directory is not held).
pub fn ensure_dir_not_held(dir: &Path) -> Result<(), LockError> {
    LogDirLock::acquire_if_exists(dir, LockMode::Exclusive).map(drop)
}

/// Locks the instance's log directory and checks that it holds this database's logs
/// (`ours` is the identity of its database, cleanly shut down), for an instance.
pub(crate) fn claim_log_dir(
    layout: &crate::layout::InstanceLayout,
    ours: crate::runtime::log::LogIdentity,
) -> Result<LogDirLock, crate::error::EngineError> {
    use crate::error::EngineError;
    let dir = &layout.log_dir;
    let lock = LogDirLock::acquire_if_exists(dir, LockMode::Exclusive)?;
    let owners = crate::runtime::log::log_dir_owners(dir);
    let (Some(lock), false) = (lock, owners.files.is_empty()) else {
        // A cleanly shut down database needs no log to be consistent: prepare starts a
        // new log stream for it (ESE does the same).
        return Err(EngineError::Invalid(format!(
            "the log directory {} holds no log files for {}, which was shut down cleanly; run `edbstress prepare` with the same --db-path and --log-path: it keeps the database and starts a new log stream for it",
            dir.display(),
            layout.db_file.display()
        )));
    };
    if let Some(other) = owners.others(ours).first() {
        return Err(EngineError::Mismatch {
            what: format!(
                "the log directory {} holds the logs of another database ({other}), not of {} ({ours}); give this instance another --log-path, or remove the other database's files with `edbstress clean --db-path ITS_DB_PATH --log-path {}`",
                dir.display(),
                layout.db_file.display(),
                dir.parent().unwrap_or(dir).display()
            ),
        });
    }
    Ok(lock)
}

fn open_dir(dir: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY)
        .open(dir)
}

fn io(dir: &Path, op: &'static str, source: std::io::Error) -> LockError {
    LockError::Io {
        lock_file: dir.to_path_buf(),
        op,
        source,
    }
}

/// Who holds the directory `file` that refused `wanted`, from `/proc/locks`.
fn held_error(dir: &Path, file: File, wanted: LockMode) -> LockError {
    let (holder, holders) = who_holds(file, wanted);
    let mut pids = holders.iter().map(|h| h.pid);
    LockError::DirHeld {
        dir: dir.to_path_buf(),
        pid: pids.next(),
        more_pids: pids.collect(),
        holder,
        wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::lock::LockHolder;

    #[test]
    fn a_directory_is_locked_by_its_inode_whatever_the_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        let link = tmp.path().join("other-name");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let held = LogDirLock::acquire(&dir, LockMode::Exclusive).unwrap();
        let err = LogDirLock::acquire(&link, LockMode::Exclusive).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(&format!("PID {}", std::process::id())),
            "{message}"
        );
        assert!(message.contains("another --log-path"), "{message}");
        assert!(ensure_dir_not_held(&link).is_err());
        assert!(LogDirLock::acquire(&dir, LockMode::Shared).is_err());
        drop(held);
        let a = LogDirLock::acquire(&link, LockMode::Shared).unwrap();
        let b = LogDirLock::acquire(&dir, LockMode::Shared).unwrap();
        assert!(matches!(
            LogDirLock::acquire(&dir, LockMode::Exclusive),
            Err(LockError::DirHeld {
                holder: LockHolder::Readers,
                ..
            })
        ));
        drop((a, b));
        ensure_dir_not_held(&dir).unwrap();
        ensure_dir_not_held(&tmp.path().join("missing")).unwrap();
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "nothing created"
        );
    }
}
