//! The lock that keeps edbstress processes (or instances in one process) from using a
//! database in ways that clash: `edbstressNNN.edb.lock` next to the database, locked
//! with `flock` for as long as the database is in use.
//!
//! Two modes. A writer (a run, prepare, recover, `checksum --repair`, backup, clean)
//! takes `flock(LOCK_EX|LOCK_NB)` and writes its PID into the file: it is alone. A reader
//! (`checksum`, `check`) takes `flock(LOCK_SH|LOCK_NB)` and writes nothing: any number of
//! readers may hold it together, never with a writer, so a scan never sees a database
//! that is being written (which would look damaged). A refused process is told who holds
//! the lock: the holders' PIDs come from `/proc/locks` (the file's PID, which only a
//! writer writes, is the fallback).
//!
//! The flock, not the file, is the lock: a file left behind by a killed process is
//! stale (nobody holds its flock) and is simply taken over. The last holder removes the
//! file when it lets go, while still holding `LOCK_EX` so nobody can lock the file being
//! removed: a writer always, a reader only if it can turn its shared lock into an
//! exclusive one (no other reader holds it; otherwise the file stays for the others,
//! and at worst a stale file is left, which is harmless). That instant of `LOCK_EX` would
//! refuse a reader arriving just then as if a writer held the database, so a refused
//! lock is retried for a moment before the holder is reported. Because another process may
//! have opened the old file just before it was removed, a new holder checks after
//! locking that the path still names the file it locked, and retries otherwise.
//!
//! A reader in a directory it cannot write (a read-only snapshot, another user's
//! files) locks the lock file if there is one; if there is none, no writer is using the
//! database (every writer holds a lock file), and the reader goes on without a lock.
//!
//! The lock belongs to the real file, not to the name it was reached by: the lock file
//! sits beside the database with symbolic links resolved, and the database file itself
//! is flocked too (flock is keyed by device and inode), so a symlink or a hard link in
//! another directory meets the same lock. Lock files are opened without following links
//! and are created only beside files that carry the edbstress database signature (or
//! for a database about to be created), never beside someone else's file.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Suffix added to the database file name to name its lock file.
pub const LOCK_SUFFIX: &str = ".lock";

/// Attempts when the lock file is replaced under us (each one follows a holder letting go).
const MAX_ATTEMPTS: u32 = 100;

/// How long a refused lock is retried before the holder is reported. The last reader
/// to let go holds the file exclusively for the instant it takes to remove it, so a
/// reader arriving then is refused by a holder that is leaving, not by a writer.
const LETTING_GO_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// How a database is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// For writing: alone (`LOCK_EX`), with the holder's PID in the file.
    Exclusive,
    /// For reading only: together with other readers, never with a writer (`LOCK_SH`).
    Shared,
}

/// Who holds a lock that was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockHolder {
    /// A process using the database for writing (a run, prepare, recover, ...).
    Writer,
    /// One or more processes only reading it (`checksum`, `check`).
    Readers,
}

/// Why a database could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another edbstress process (or another open instance of this one) holds it.
    #[error("{}", held_message(db, lock_file, *.pid, more_pids, *.holder, *.wanted))]
    Held {
        /// The database.
        db: PathBuf,
        /// Its lock file.
        lock_file: PathBuf,
        /// PID of the holder (of the first one, when several readers hold it), when known.
        pid: Option<u32>,
        /// PIDs of the other holders (several readers can hold it at once).
        more_pids: Vec<u32>,
        /// Whether the holder writes the database or only reads it.
        holder: LockHolder,
        /// The mode that was refused.
        wanted: LockMode,
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
    /// The file to lock exists and is not an edbstress database: no lock file is made
    /// beside someone else's file.
    #[error(
        "refusing to lock {db}: it is not an edbstress database ({why}), so no lock file is created beside it; check the path"
    )]
    NotADatabase {
        /// The file.
        db: PathBuf,
        /// What was found.
        why: String,
    },
    /// A directory's lock is held (see [`crate::LogDirLock`]).
    #[error("{}", dir_held_message(dir, *.pid, more_pids, *.holder, *.wanted))]
    DirHeld {
        /// The locked directory.
        dir: PathBuf,
        /// PID of the (first) holder, when known.
        pid: Option<u32>,
        /// PIDs of the other holders.
        more_pids: Vec<u32>,
        /// Whether the holder writes or only reads.
        holder: LockHolder,
        /// The mode that was refused.
        wanted: LockMode,
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

/// "PID 123", "PIDs 123, 456" or "PID unknown": who holds a refused lock, for messages.
fn holder_pids(pid: Option<u32>, more_pids: &[u32]) -> String {
    match (pid, more_pids) {
        (None, _) => "PID unknown".to_string(),
        (Some(pid), []) => format!("PID {pid}"),
        (Some(pid), more) => {
            let rest: Vec<String> = more.iter().map(u32::to_string).collect();
            format!("PIDs {pid}, {}", rest.join(", "))
        }
    }
}

/// The message of [`LockError::DirHeld`].
fn dir_held_message(
    dir: &Path,
    pid: Option<u32>,
    more_pids: &[u32],
    holder: LockHolder,
    wanted: LockMode,
) -> String {
    let pids = holder_pids(pid, more_pids);
    let dir = dir.display();
    match (holder, wanted) {
        (LockHolder::Writer, LockMode::Shared) => format!(
            "the log directory {dir} is being written by another edbstress process ({pids}), so reading it now could report damage that is not there; wait for that process to finish (or stop it and run `edbstress recover`), then try again"
        ),
        (LockHolder::Readers, _) => format!(
            "the log directory {dir} is being read by another edbstress process (checksum; {pids}); wait for it to finish or stop it, then try again"
        ),
        (LockHolder::Writer, LockMode::Exclusive) => format!(
            "the log directory {dir} is in use by another edbstress process ({pids}): it holds the logs of that process's database, which must not be shared, replaced or removed; wait for that process to finish or stop it, or give this instance another --log-path"
        ),
    }
}

fn held_message(
    db: &Path,
    lock_file: &Path,
    pid: Option<u32>,
    more_pids: &[u32],
    holder: LockHolder,
    wanted: LockMode,
) -> String {
    let pids = holder_pids(pid, more_pids);
    let (db, lock_file) = (db.display(), lock_file.display());
    match (holder, wanted) {
        (LockHolder::Writer, LockMode::Shared) => format!(
            "{db} is being written by another edbstress process ({pids}; lock file {lock_file}), so reading it now could report damage that is not there; wait for that process to finish (or stop it and run `edbstress recover`), then try again"
        ),
        (LockHolder::Readers, _) => format!(
            "{db} is being read by another edbstress process (checksum or check; {pids}; lock file {lock_file}); wait for it to finish or stop it, then try again"
        ),
        (LockHolder::Writer, LockMode::Exclusive) => format!(
            "{db} is in use by another edbstress process ({pids}; lock file {lock_file}); wait for it to finish or stop it, then try again"
        ),
    }
}

/// The lock file of a database file.
pub fn lock_file_path(db_file: &Path) -> PathBuf {
    let mut name = db_file.as_os_str().to_owned();
    name.push(LOCK_SUFFIX);
    PathBuf::from(name)
}

/// Whether `contents` look like what [`DatabaseLock`] writes (a PID and a newline, or
/// nothing when the writer was interrupted or only readers used the file).
pub fn is_lock_file_content(contents: &[u8]) -> bool {
    let text = contents.strip_suffix(b"\n").unwrap_or(contents);
    text.len() <= 10 && text.iter().all(u8::is_ascii_digit)
}

/// A held database lock; released (and its file removed by its last holder) on drop.
#[derive(Debug)]
pub struct DatabaseLock {
    /// `None` for a reader that found no lock file and could not create one (see the
    /// module documentation).
    file: Option<Flock<File>>,
    /// The database file itself, flocked in the same mode (when it exists).
    db: Option<Flock<File>>,
    lock_file: PathBuf,
    mode: LockMode,
}

impl DatabaseLock {
    /// Locks the database at `db_file` for writing (which need not exist yet; its
    /// directory must).
    pub fn acquire(db_file: &Path) -> Result<DatabaseLock, LockError> {
        DatabaseLock::acquire_mode(db_file, LockMode::Exclusive)
    }

    /// Locks the database at `db_file` for reading only: other readers may hold it too,
    /// a writer may not.
    pub fn acquire_shared(db_file: &Path) -> Result<DatabaseLock, LockError> {
        DatabaseLock::acquire_mode(db_file, LockMode::Shared)
    }

    /// Locks the database at `db_file` in `mode`.
    pub fn acquire_mode(db_file: &Path, mode: LockMode) -> Result<DatabaseLock, LockError> {
        let real = real_database_path(db_file)?;
        let mut lock = DatabaseLock::lock_file_only(db_file, &real, mode)?;
        // The lock file is beside the real file; the flock on the file itself also
        // catches a hard link reached through another directory.
        if let Some(db) = open_existing(&real).map_err(|source| LockError::Io {
            lock_file: lock.lock_file.clone(),
            op: "open the database",
            source,
        })? {
            match Flock::lock(db, flock_arg(mode)) {
                Ok(locked) => lock.db = Some(locked),
                Err((db, Errno::EWOULDBLOCK)) => {
                    let lock_file = lock.lock_file.clone();
                    drop(lock);
                    return Err(held_error(db_file, lock_file, db, b"", mode));
                }
                Err((_, errno)) => {
                    return Err(LockError::Io {
                        lock_file: lock.lock_file.clone(),
                        op: "flock the database",
                        source: errno.into(),
                    });
                }
            }
        }
        Ok(lock)
    }

    /// Locks the lock file of the database whose real path is `real`.
    fn lock_file_only(
        db_file: &Path,
        real: &Path,
        mode: LockMode,
    ) -> Result<DatabaseLock, LockError> {
        let lock_file = lock_file_path(real);
        let io = |op: &'static str, source: std::io::Error| LockError::Io {
            lock_file: lock_file.clone(),
            op,
            source,
        };
        let started = std::time::Instant::now();
        let mut replaced = 0;
        while replaced < MAX_ATTEMPTS {
            let opened = match open_lock_file(&lock_file, mode) {
                Ok(opened) => opened,
                Err(e) if is_link_error(&e) => {
                    return Err(LockError::NotOurs {
                        db: db_file.to_path_buf(),
                        lock_file,
                    });
                }
                Err(e) => return Err(io("open", e)),
            };
            let Some(mut file) = opened else {
                return Ok(DatabaseLock {
                    file: None,
                    db: None,
                    lock_file,
                    mode,
                });
            };
            if !file.metadata().map_err(|e| io("stat", e))?.is_file() {
                return Err(LockError::NotOurs {
                    db: db_file.to_path_buf(),
                    lock_file,
                });
            }
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
            let mut locked = match Flock::lock(file, flock_arg(mode)) {
                Ok(locked) => locked,
                Err((file, Errno::EWOULDBLOCK)) if started.elapsed() >= LETTING_GO_GRACE => {
                    return Err(held_error(db_file, lock_file, file, &contents, mode));
                }
                Err((_, Errno::EWOULDBLOCK)) => {
                    // Perhaps a holder letting go (see LETTING_GO_GRACE): look again.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    continue;
                }
                Err((_, errno)) => return Err(io("flock", errno.into())),
            };
            // The previous holder may have removed the file between our open and flock.
            if !names_file(&lock_file, &locked).map_err(|e| io("stat", e))? {
                replaced += 1;
                continue;
            }
            if mode == LockMode::Exclusive {
                locked.set_len(0).map_err(|e| io("truncate", e))?;
                locked.seek(SeekFrom::Start(0)).map_err(|e| io("seek", e))?;
                locked
                    .write_all(format!("{}\n", std::process::id()).as_bytes())
                    .map_err(|e| io("write", e))?;
            }
            return Ok(DatabaseLock {
                file: Some(locked),
                db: None,
                lock_file,
                mode,
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

    /// The mode the lock is held in.
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

impl Drop for DatabaseLock {
    fn drop(&mut self) {
        // The database's own flock first: the lock file stays held until it is removed.
        self.db = None;
        let Some(file) = &self.file else {
            return;
        };
        // Only the last holder removes the file, and only while holding it exclusively,
        // so nobody can lock the file we remove. A reader that cannot upgrade leaves the
        // file to the other readers (a failed upgrade drops its shared lock, which is
        // being let go anyway). The flock goes with the descriptor when `file` is dropped.
        if self.mode == LockMode::Shared && file.relock(FlockArg::LockExclusiveNonblock).is_err() {
            return;
        }
        if names_file(&self.lock_file, file).unwrap_or(false) {
            let _ = std::fs::remove_file(&self.lock_file);
        }
    }
}

/// Opens (creating it if need be) the lock file. A reader that may not create it opens
/// an existing one read-only (flock needs no write access), and gets `None` when there
/// is none.
fn open_lock_file(lock_file: &Path, mode: LockMode) -> std::io::Result<Option<File>> {
    let created = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(lock_file);
    match created {
        Ok(file) => Ok(Some(file)),
        Err(e)
            if mode == LockMode::Shared
                && matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                ) =>
        {
            match open_no_follow(lock_file) {
                Ok(file) => Ok(Some(file)),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// Opens `path` read-only without following a symbolic link in its last component.
fn open_no_follow(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

/// Whether `e` is what `O_NOFOLLOW` returns for a symbolic link.
fn is_link_error(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ELOOP)
}

fn flock_arg(mode: LockMode) -> FlockArg {
    match mode {
        LockMode::Exclusive => FlockArg::LockExclusiveNonblock,
        LockMode::Shared => FlockArg::LockSharedNonblock,
    }
}

/// The database's real path (symbolic links resolved), where its lock file goes. A
/// database that does not exist yet (prepare is about to create it) resolves through
/// its directory. An existing file must carry the edbstress signature.
pub fn real_database_path(db_file: &Path) -> Result<PathBuf, LockError> {
    let not_db = |why: String| LockError::NotADatabase {
        db: db_file.to_path_buf(),
        why,
    };
    match std::fs::symlink_metadata(db_file) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let (Some(dir), Some(name)) = (db_file.parent(), db_file.file_name()) else {
                return Ok(db_file.to_path_buf());
            };
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            return Ok(
                std::fs::canonicalize(dir).map_or_else(|_| db_file.to_path_buf(), |d| d.join(name))
            );
        }
        Err(e) => return Err(not_db(format!("it cannot be examined: {e}"))),
    }
    let real = std::fs::canonicalize(db_file).map_err(|e| {
        not_db(format!(
            "it cannot be resolved ({e}); a symbolic link to nothing?"
        ))
    })?;
    let meta = std::fs::metadata(&real).map_err(|e| not_db(format!("{e}")))?;
    if !meta.is_file() {
        return Err(not_db("it is not a regular file".into()));
    }
    crate::dbheader::check_database_signature(&real).map_err(not_db)?;
    Ok(real)
}

/// Opens an existing database file read-only for its flock; `None` when there is none.
fn open_existing(real: &Path) -> std::io::Result<Option<File>> {
    match open_no_follow(real) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `path` still names the file open as `file`.
fn names_file(path: &Path, file: &File) -> std::io::Result<bool> {
    let ours = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.dev() == ours.dev() && m.ino() == ours.ino()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The error for a lock refused because `file` (the lock file, read into `contents`) is
/// held by someone else: who holds it, from `/proc/locks`, else from the file's PID
/// (written by writers only) and a probe for readers.
fn held_error(
    db_file: &Path,
    lock_file: PathBuf,
    file: File,
    contents: &[u8],
    wanted: LockMode,
) -> LockError {
    let (holder, holders) = who_holds(file, wanted);
    let pids: Vec<u32> = match (holders.is_empty(), holder) {
        (false, _) => holders.iter().map(|h| h.pid).collect(),
        (true, LockHolder::Writer) => parse_pid(contents).into_iter().collect(),
        (true, LockHolder::Readers) => Vec::new(),
    };
    let pid = pids.first().copied();
    LockError::Held {
        db: db_file.to_path_buf(),
        lock_file,
        pid,
        more_pids: pids.into_iter().skip(1).collect(),
        holder,
        wanted,
    }
}

/// Who holds `file`, whose flock refused `wanted`: writer or readers, with the
/// holders `/proc/locks` lists (empty when it lists none: then a writer if a shared
/// lock was refused, else a probe tells whether a shared lock would be granted).
pub(crate) fn who_holds(file: File, wanted: LockMode) -> (LockHolder, Vec<ProcLockEntry>) {
    let holders = file
        .metadata()
        .map(|m| lock_holders(&m))
        .unwrap_or_default();
    let holder = if holders.iter().any(|h| h.exclusive) {
        LockHolder::Writer
    } else if !holders.is_empty() {
        LockHolder::Readers
    } else if wanted == LockMode::Shared {
        // Only a writer refuses a shared lock.
        LockHolder::Writer
    } else {
        // A shared lock would be granted only if readers hold it.
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(_probe) => LockHolder::Readers,
            Err(_) => LockHolder::Writer,
        }
    };
    (holder, holders)
}

/// A flock on a file, as `/proc/locks` lists it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ProcLockEntry {
    pub(crate) pid: u32,
    pub(crate) exclusive: bool,
}

/// The processes holding a flock on the file with metadata `file`, from `/proc/locks`
/// (sorted by PID); empty when it cannot be read or lists none (PIDs of another PID
/// namespace show as 0 and are left out).
pub(crate) fn lock_holders(file: &std::fs::Metadata) -> Vec<ProcLockEntry> {
    // /proc/locks is read a page at a time by position, so an entry can be skipped
    // when locks listed before it go away between two pages (a busy host); look again
    // before saying nobody is listed.
    for _ in 0..PROC_LOCKS_READS {
        let holders = std::fs::read_to_string("/proc/locks")
            .map(|text| parse_proc_locks(&text, file.dev(), file.ino()))
            .unwrap_or_default();
        if !holders.is_empty() {
            return holders;
        }
    }
    Vec::new()
}

/// Reads of `/proc/locks` before a lock is taken to be listed nowhere.
const PROC_LOCKS_READS: usize = 4;

/// The FLOCK entries of `/proc/locks` text for the file `dev`/`ino`. A line reads
/// `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5423108 0 EOF`: the device is printed as
/// hexadecimal major:minor; lines with `->` are waiters, which hold nothing.
fn parse_proc_locks(text: &str, dev: u64, ino: u64) -> Vec<ProcLockEntry> {
    // glibc's gnu_dev_major / gnu_dev_minor.
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    let mut holders: Vec<ProcLockEntry> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            if fields.next()? != "FLOCK" {
                return None;
            }
            let _advisory = fields.next()?;
            let exclusive = match fields.next()? {
                "WRITE" => true,
                "READ" => false,
                _ => return None,
            };
            let pid: u32 = fields.next()?.parse().ok()?;
            let mut id = fields.next()?.split(':');
            let entry_major = u64::from_str_radix(id.next()?, 16).ok()?;
            let entry_minor = u64::from_str_radix(id.next()?, 16).ok()?;
            let entry_ino: u64 = id.next()?.parse().ok()?;
            (entry_major == major && entry_minor == minor && entry_ino == ino && pid != 0)
                .then_some(ProcLockEntry { pid, exclusive })
        })
        .collect();
    holders.sort_by_key(|h| (h.pid, !h.exclusive));
    holders.dedup_by_key(|h| h.pid);
    holders
}

/// The PID in a lock file's contents.
pub fn parse_pid(contents: &[u8]) -> Option<u32> {
    std::str::from_utf8(contents).ok()?.trim().parse().ok()
}

/// Checks that nobody holds the lock of `db_file`, creating and removing nothing (a
/// stale lock file stays where it is).
pub fn ensure_not_held(db_file: &Path) -> Result<(), LockError> {
    let real = real_database_path(db_file)?;
    let lock_file = lock_file_path(&real);
    let io = |op: &'static str, source: std::io::Error| LockError::Io {
        lock_file: lock_file.clone(),
        op,
        source,
    };
    let probe =
        |file: File, contents: &[u8]| match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(_) => Ok(()),
            Err((file, Errno::EWOULDBLOCK)) => Err(held_error(
                db_file,
                lock_file.clone(),
                file,
                contents,
                LockMode::Exclusive,
            )),
            Err((_, errno)) => Err(io("flock", errno.into())),
        };
    match open_no_follow(&lock_file) {
        Ok(mut file) => {
            let mut contents = Vec::new();
            let _ = (&mut file).take(64).read_to_end(&mut contents);
            probe(file, &contents)?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) if is_link_error(&e) => {
            return Err(LockError::NotOurs {
                db: db_file.to_path_buf(),
                lock_file,
            });
        }
        Err(e) => return Err(io("open", e)),
    }
    match open_existing(&real).map_err(|e| io("open the database", e))? {
        Some(db) => probe(db, b""),
        None => Ok(()),
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
    fn readers_share_the_lock_and_keep_writers_out() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress004.edb");
        let pid = std::process::id();
        let first = DatabaseLock::acquire_shared(&db).unwrap();
        let second = DatabaseLock::acquire_shared(&db).unwrap();
        assert_eq!(second.mode(), LockMode::Shared);
        assert_eq!(
            std::fs::read(first.path()).unwrap(),
            b"",
            "readers write no PID"
        );

        // A writer is refused, told that readers hold it and by whom.
        let err = DatabaseLock::acquire(&db).unwrap_err();
        match &err {
            LockError::Held {
                pid: Some(p),
                holder: LockHolder::Readers,
                wanted: LockMode::Exclusive,
                ..
            } => assert_eq!(*p, pid),
            other => panic!("expected Held by readers, got {other:?}"),
        }
        let message = err.to_string();
        assert!(message.contains("being read"), "{message}");
        assert!(message.contains(&format!("PID {pid}")), "{message}");
        assert!(matches!(
            ensure_not_held(&db),
            Err(LockError::Held {
                holder: LockHolder::Readers,
                ..
            })
        ));

        // The first reader to go leaves the file to the other.
        drop(first);
        assert!(lock_file_path(&db).exists());
        assert!(matches!(
            DatabaseLock::acquire(&db),
            Err(LockError::Held { .. })
        ));
        // The last one removes it, and a writer gets in.
        drop(second);
        assert!(!lock_file_path(&db).exists());
        let writer = DatabaseLock::acquire(&db).unwrap();
        drop(writer);
    }

    #[test]
    fn readers_coming_and_going_never_refuse_each_other() {
        // The last reader to let go holds the file exclusively for an instant while it
        // removes it; a reader arriving then must wait it out, not report a writer.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress008.edb");
        let refusals: Vec<String> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut refused = Vec::new();
                        for _ in 0..500 {
                            match DatabaseLock::acquire_shared(&db) {
                                Ok(lock) => drop(lock),
                                Err(e) => refused.push(e.to_string()),
                            }
                        }
                        refused
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        assert!(
            refusals.is_empty(),
            "{} refusals, first: {}",
            refusals.len(),
            refusals[0]
        );
        assert!(!lock_file_path(&db).exists());
    }

    #[test]
    fn a_reader_is_refused_while_a_writer_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress005.edb");
        let pid = std::process::id();
        let writer = DatabaseLock::acquire(&db).unwrap();
        let err = DatabaseLock::acquire_shared(&db).unwrap_err();
        assert!(
            matches!(
                &err,
                LockError::Held { pid: Some(p), more_pids, holder: LockHolder::Writer, wanted: LockMode::Shared, .. }
                    if *p == pid && more_pids.is_empty()
            ),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("being written"), "{message}");
        assert!(message.contains(&format!("PID {pid}")), "{message}");
        assert!(message.contains("edbstress005.edb.lock"), "{message}");
        // The refused reader did not disturb the writer's file.
        assert_eq!(
            std::fs::read_to_string(writer.path()).unwrap(),
            format!("{pid}\n")
        );
        drop(writer);
        drop(DatabaseLock::acquire_shared(&db).unwrap());
        assert!(!lock_file_path(&db).exists());
    }

    #[test]
    fn a_reader_takes_over_a_stale_file_and_refuses_a_foreign_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("edbstress006.edb");
        std::fs::write(lock_file_path(&db), "999999\n").unwrap();
        let reader = DatabaseLock::acquire_shared(&db).unwrap();
        // Held by a reader now: a writer is told so, not the stale PID.
        let message = DatabaseLock::acquire(&db).unwrap_err().to_string();
        assert!(!message.contains("999999"), "{message}");
        drop(reader);
        assert!(!lock_file_path(&db).exists());

        std::fs::write(lock_file_path(&db), "precious data").unwrap();
        let err = DatabaseLock::acquire_shared(&db).unwrap_err();
        assert!(matches!(err, LockError::NotOurs { .. }), "{err}");
        assert_eq!(
            std::fs::read_to_string(lock_file_path(&db)).unwrap(),
            "precious data"
        );
    }

    #[test]
    fn holders_are_read_from_proc_locks() {
        let text = "1: FLOCK  ADVISORY  WRITE 4321 fe:01:77 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 99 fe:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  READ  12 08:11:77 0 EOF\n\
                    3: FLOCK  ADVISORY  READ  13 fe:01:78 0 EOF\n\
                    4: POSIX  ADVISORY  WRITE 14 fe:01:77 0 EOF\n\
                    5: FLOCK  ADVISORY  READ  0 fe:01:77 0 EOF\n";
        // st_dev of major 0xfe, minor 1 as glibc encodes it.
        let dev = (0xfe << 8) | 1;
        assert_eq!(
            parse_proc_locks(text, dev, 77),
            vec![ProcLockEntry {
                pid: 4321,
                exclusive: true
            }]
        );
        assert_eq!(
            parse_proc_locks(text, (0x08 << 8) | 0x11, 77),
            vec![ProcLockEntry {
                pid: 12,
                exclusive: false
            }]
        );
        // And on this machine: our own lock is found.
        let dir = tempfile::tempdir().unwrap();
        let lock = DatabaseLock::acquire(&dir.path().join("edbstress007.edb")).unwrap();
        let meta = std::fs::metadata(lock.path()).unwrap();
        assert_eq!(
            lock_holders(&meta),
            vec![ProcLockEntry {
                pid: std::process::id(),
                exclusive: true
            }]
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
