//! The lock that keeps two edbstress processes (or two instances in one process) off
//! the same database: `edbstressNNN.edb.lock` next to the database, holding the PID of
//! its holder and `flock(LOCK_EX|LOCK_NB)`-locked for as long as the database is in use.
//!
//! The flock, not the file, is the lock: a file left behind by a killed process is
//! stale (nobody holds its flock) and is simply taken over. The holder removes the
//! file when it lets go; because another process may have opened the old file just
//! before that, a new holder checks after locking that the path still names the file
//! it locked, and retries otherwise.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Suffix added to the database file name to name its lock file.
pub const LOCK_SUFFIX: &str = ".lock";

/// Attempts when the lock file is replaced under us (each one follows a holder letting go).
const MAX_ATTEMPTS: u32 = 100;

/// Why a database could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another edbstress process (or another open instance of this one) holds it.
    #[error(
        "{db} is in use by another edbstress process ({}; lock file {lock_file}); wait for it to finish or stop it, then try again",
        describe_holder(*.pid)
    )]
    Held {
        /// The database.
        db: PathBuf,
        /// Its lock file.
        lock_file: PathBuf,
        /// PID written by the holder, when it could be read.
        pid: Option<u32>,
    },
    /// A file with the lock file's name exists but is not an edbstress lock file.
    #[error(
        "refusing to use {lock_file} as the lock file of {db}: it exists and is not an edbstress lock file; move it away"
    )]
    NotOurs {
        /// The database.
        db: PathBuf,
        /// The foreign file.
        lock_file: PathBuf,
    },
    /// The lock file could not be created, locked or written.
    #[error(
        "cannot lock {lock_file} ({op}): {source}; check that the directory exists and is writable"
    )]
    Io {
        /// The lock file.
        lock_file: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

fn describe_holder(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("PID {pid}"),
        None => "PID unknown".to_string(),
    }
}

/// The lock file of a database file.
pub fn lock_file_path(db_file: &Path) -> PathBuf {
    let mut name = db_file.as_os_str().to_owned();
    name.push(LOCK_SUFFIX);
    PathBuf::from(name)
}

/// Whether `contents` look like what [`DatabaseLock`] writes (a PID and a newline, or
/// nothing when the writer was interrupted).
pub fn is_lock_file_content(contents: &[u8]) -> bool {
    let text = contents.strip_suffix(b"\n").unwrap_or(contents);
    text.len() <= 10 && text.iter().all(u8::is_ascii_digit)
}

/// A held database lock; released (and its file removed) on drop.
#[derive(Debug)]
pub struct DatabaseLock {
    file: Flock<File>,
    lock_file: PathBuf,
}

impl DatabaseLock {
    /// Locks the database at `db_file` (which need not exist yet; its directory must).
    pub fn acquire(db_file: &Path) -> Result<DatabaseLock, LockError> {
        let lock_file = lock_file_path(db_file);
        let io = |op: &'static str, source: std::io::Error| LockError::Io {
            lock_file: lock_file.clone(),
            op,
            source,
        };
        for _ in 0..MAX_ATTEMPTS {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_file)
                .map_err(|e| io("open", e))?;
            let mut contents = Vec::new();
            (&mut file)
                .take(64)
                .read_to_end(&mut contents)
                .map_err(|e| io("read", e))?;
            if !is_lock_file_content(&contents) {
                return Err(LockError::NotOurs {
                    db: db_file.to_path_buf(),
                    lock_file,
                });
            }
            let mut locked = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(locked) => locked,
                Err((_, Errno::EWOULDBLOCK)) => {
                    return Err(LockError::Held {
                        db: db_file.to_path_buf(),
                        pid: parse_pid(&contents),
                        lock_file,
                    });
                }
                Err((_, errno)) => return Err(io("flock", errno.into())),
            };
            // The previous holder may have removed the file between our open and flock.
            let ours = locked.metadata().map_err(|e| io("stat", e))?;
            match std::fs::metadata(&lock_file) {
                Ok(m) if m.dev() == ours.dev() && m.ino() == ours.ino() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io("stat", e)),
            }
            locked.set_len(0).map_err(|e| io("truncate", e))?;
            locked.seek(SeekFrom::Start(0)).map_err(|e| io("seek", e))?;
            locked
                .write_all(format!("{}\n", std::process::id()).as_bytes())
                .map_err(|e| io("write", e))?;
            return Ok(DatabaseLock {
                file: locked,
                lock_file,
            });
        }
        Err(io(
            "open",
            std::io::Error::other("the lock file kept being replaced by other processes"),
        ))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.lock_file
    }
}

impl Drop for DatabaseLock {
    fn drop(&mut self) {
        // Removed while still locked, so nobody can lock the file we remove; the flock
        // goes with the descriptor when `file` is dropped.
        if let (Ok(ours), Ok(now)) = (self.file.metadata(), std::fs::metadata(&self.lock_file)) {
            if ours.dev() == now.dev() && ours.ino() == now.ino() {
                let _ = std::fs::remove_file(&self.lock_file);
            }
        }
    }
}

/// The PID in a lock file's contents.
pub fn parse_pid(contents: &[u8]) -> Option<u32> {
    std::str::from_utf8(contents).ok()?.trim().parse().ok()
}

/// Checks that nobody holds the lock of `db_file`, creating and removing nothing (a
/// stale lock file stays where it is).
pub fn ensure_not_held(db_file: &Path) -> Result<(), LockError> {
    let lock_file = lock_file_path(db_file);
    let mut file = match File::open(&lock_file) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(LockError::Io {
                lock_file,
                op: "open",
                source,
            });
        }
    };
    let mut contents = Vec::new();
    let _ = (&mut file).take(64).read_to_end(&mut contents);
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(_) => Ok(()),
        Err((_, Errno::EWOULDBLOCK)) => Err(LockError::Held {
            db: db_file.to_path_buf(),
            pid: parse_pid(&contents),
            lock_file,
        }),
        Err((_, errno)) => Err(LockError::Io {
            lock_file,
            op: "flock",
            source: errno.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_with_the_pid_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress001.edb");
        let first = DatabaseLock::acquire(&db).unwrap();
        assert_eq!(first.path(), dir.path().join("edbstress001.edb.lock"));
        let text = std::fs::read_to_string(first.path()).unwrap();
        assert_eq!(text, format!("{}\n", std::process::id()));
        assert!(matches!(ensure_not_held(&db), Err(LockError::Held { .. })));
        match DatabaseLock::acquire(&db) {
            Err(LockError::Held { pid, lock_file, .. }) => {
                assert_eq!(pid, Some(std::process::id()));
                assert_eq!(lock_file, first.path());
            }
            other => panic!("expected Held, got {other:?}"),
        }
        let message = DatabaseLock::acquire(&db).unwrap_err().to_string();
        assert!(message.contains(&format!("PID {}", std::process::id())));
        assert!(message.contains("edbstress001.edb.lock"));
        drop(first);
        assert!(!dir.path().join("edbstress001.edb.lock").exists());
        let again = DatabaseLock::acquire(&db).unwrap();
        drop(again);
    }

    #[test]
    fn stale_lock_file_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress002.edb");
        // A killed holder leaves its PID behind but no flock.
        std::fs::write(lock_file_path(&db), "999999\n").unwrap();
        ensure_not_held(&db).unwrap();
        assert!(lock_file_path(&db).exists());
        let lock = DatabaseLock::acquire(&db).unwrap();
        let text = std::fs::read_to_string(lock.path()).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    #[test]
    fn foreign_file_with_the_lock_name_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress003.edb");
        std::fs::write(lock_file_path(&db), "precious data").unwrap();
        let err = DatabaseLock::acquire(&db).unwrap_err();
        assert!(matches!(err, LockError::NotOurs { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(lock_file_path(&db)).unwrap(),
            "precious data"
        );
    }

    #[test]
    fn missing_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nope").join("edbstress001.edb");
        let err = DatabaseLock::acquire(&db).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
        assert!(err.contains("writable"), "{err}");
    }
}
