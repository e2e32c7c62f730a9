//! The log directory of an instance as prepare leaves it: generation 1 (header segment,
//! then unused zero segments) and a checkpoint file pointing at its first data segment.
//! The transaction log writer continues from there.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use edbstress_format::Generation;
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_NAME, CheckpointRecord, CheckpointState,
    DEFAULT_LOG_FILE_LEN, LogFileHeader, LogPosition, NEXT_LOG_FILE_NAME, SEGMENT_LEN,
    log_file_name, parse_log_file_name, select_checkpoint,
};
use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, AlignedBuf, DataFile, IoClass, IoError, IoMode};

/// Magic at offset 8 of a log file's header segment.
const LOG_MAGIC: &[u8; 8] = b"EDBSLOG\0";
/// Magic at offset 8 of each checkpoint copy.
const CHECKPOINT_MAGIC: &[u8; 8] = b"EDBSCHK\0";

/// Whether `path` carries an edbstress log or checkpoint signature (even if damaged
/// elsewhere). Files that cannot be read are not ours.
///
/// The pre-created next generation (`E00tmp.log`) is zero-filled until the writer rolls
/// into it: an all-zero file of that name is accepted too, of any length (it holds no
/// data to lose; a process killed while creating it leaves it empty or short).
pub fn is_our_log_file(path: &Path) -> bool {
    let Ok(mut head) = LogFileHead::open(path) else {
        return false;
    };
    match head.read(0) {
        Ok(first) if first.len() >= 16 => {
            if &first[8..16] == LOG_MAGIC || &first[8..16] == CHECKPOINT_MAGIC {
                return true;
            }
        }
        Ok(_) => {}
        Err(_) => return false,
    }
    if path.file_name().is_none_or(|n| n != NEXT_LOG_FILE_NAME) {
        return false;
    }
    // The pre-created next file, chunk by chunk: all zero or not ours.
    let mut offset = 0;
    loop {
        match head.read(offset) {
            Ok([]) => return true,
            Ok(chunk) if chunk.iter().all(|&b| b == 0) => offset += chunk.len() as u64,
            _ => return false,
        }
    }
}

/// A file of a log directory read through a backend, a chunk at a time, to tell
/// whose it is (class [`IoClass::HeaderRead`]).
struct LogFileHead {
    io: FileIo,
    buf: AlignedBuf,
}

impl LogFileHead {
    /// Bytes read at a time: the header segment and the checkpoint's two copies.
    const CHUNK: usize = 2 * SEGMENT_LEN;

    fn open(path: &Path) -> Result<LogFileHead, IoError> {
        let file = DataFile::open(path, IoMode::Buffered, Access::ReadOnly)?;
        Ok(LogFileHead {
            io: FileIo::offline(&file)?,
            buf: AlignedBuf::new(Self::CHUNK),
        })
    }

    /// Up to [`Self::CHUNK`] bytes at `offset`; empty at the end of the file.
    fn read(&mut self, offset: u64) -> Result<&[u8], IoError> {
        let n = self
            .io
            .read(IoClass::HeaderRead, &mut self.buf, Self::CHUNK, offset)?;
        Ok(&self.buf[..n])
    }

    /// Exactly [`Self::CHUNK`] bytes at the start of the file.
    fn read_start(&mut self) -> Result<&[u8], IoError> {
        self.io
            .read_exact(IoClass::HeaderRead, &mut self.buf, Self::CHUNK, 0)?;
        Ok(&self.buf[..])
    }
}

/// Whether a directory entry name is one of an instance's log files.
pub fn is_log_file_name(name: &str) -> bool {
    parse_log_file_name(name).is_some()
        || name == NEXT_LOG_FILE_NAME
        || name == CHECKPOINT_FILE_NAME
}

/// The identity of a database as its log files and checkpoint carry it: the database
/// signature and the log signature. The log signature is unique per database even when
/// a seed made two databases' content (and database signature) the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogIdentity {
    /// The database signature.
    pub db_signature: u64,
    /// The log signature.
    pub log_signature: u64,
}

impl std::fmt::Display for LogIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "database signature {:#018x}, log signature {:#018x}",
            self.db_signature, self.log_signature
        )
    }
}

/// Whose logs an instance log directory holds.
#[derive(Debug, Default)]
pub struct LogDirOwners {
    /// Files carrying our log or checkpoint signature.
    pub files: Vec<std::path::PathBuf>,
    /// The identities their headers name (sorted, each once); damaged headers name none.
    pub identities: Vec<LogIdentity>,
}

impl LogDirOwners {
    /// Identities other than `ours`.
    pub fn others(&self, ours: LogIdentity) -> Vec<LogIdentity> {
        self.identities
            .iter()
            .copied()
            .filter(|&id| id != ours)
            .collect()
    }
}

/// Reads who owns the log files in `dir` (nothing when it does not exist). Symbolic
/// links are not followed: a link is nobody's log file.
pub fn log_dir_owners(dir: &Path) -> LogDirOwners {
    let mut owners = LogDirOwners::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return owners;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_log_file_name(&name) || !is_file || !is_our_log_file(&path) {
            continue;
        }
        let mut file = LogFileHead::open(&path);
        let read = file
            .as_mut()
            .map_err(|_| ())
            .and_then(|f| f.read_start().map_err(|_| ()));
        let identity = read.ok().and_then(|head| {
            if name == CHECKPOINT_FILE_NAME {
                select_checkpoint(
                    &head[..CHECKPOINT_COPY_LEN],
                    &head[CHECKPOINT_COPY_LEN..2 * CHECKPOINT_COPY_LEN],
                )
                .ok()
                .map(|s| LogIdentity {
                    db_signature: s.record.db_signature,
                    log_signature: s.record.log_signature,
                })
            } else {
                LogFileHeader::decode(LogFileHeader::bytes_in(&head[..SEGMENT_LEN]))
                    .ok()
                    .map(|h| LogIdentity {
                        db_signature: h.db_signature,
                        log_signature: h.log_signature,
                    })
            }
        });
        owners.files.push(path);
        owners.identities.extend(identity);
    }
    owners.files.sort();
    owners.identities.sort();
    owners.identities.dedup();
    owners
}

fn io_err(path: &Path, op: &'static str, source: std::io::Error) -> IoError {
    IoError::Io {
        path: path.to_path_buf(),
        op,
        offset: 0,
        source,
    }
}

/// Removes the edbstress log files of `dir` (only regular files carrying our
/// signature). The caller has checked whose they are (see [`log_dir_owners`]).
pub fn remove_our_logs(dir: &Path) -> Result<(), IoError> {
    for path in log_dir_owners(dir).files {
        std::fs::remove_file(&path).map_err(|e| io_err(&path, "remove", e))?;
    }
    Ok(())
}

/// Removes the edbstress log files of `dir` (see [`remove_our_logs`]) and creates a
/// fresh generation 1 and checkpoint for the database `db_signature`.
pub fn replace_logs(
    dir: &Path,
    db_signature: u64,
    log_signature: u64,
    state: CheckpointState,
    mode: IoMode,
) -> Result<(), IoError> {
    remove_our_logs(dir)?;
    create_initial_logs(dir, db_signature, log_signature, state, mode)
}

/// Creates `dir` with log generation 1 and a checkpoint at its first data segment.
/// Fails rather than overwrite an existing file. On failure (a full log disk) the files
/// it created are removed again, so the directory is as before and a later prepare
/// creates the logs of the database it finds (it never mistakes a half-written log
/// file for another program's).
pub fn create_initial_logs(
    dir: &Path,
    db_signature: u64,
    log_signature: u64,
    state: CheckpointState,
    mode: IoMode,
) -> Result<(), IoError> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, "create directory", e))?;
    let mut created = Vec::new();
    let result = write_initial_logs(dir, db_signature, log_signature, state, mode, &mut created);
    if result.is_err() {
        for path in &created {
            let _ = std::fs::remove_file(path);
        }
    }
    result
}

fn write_initial_logs(
    dir: &Path,
    db_signature: u64,
    log_signature: u64,
    state: CheckpointState,
    mode: IoMode,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<(), IoError> {
    let created_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let start = LogPosition {
        generation: Generation::FIRST,
        segment: 1,
        offset: 0,
    };

    let log = DataFile::create_new(dir.join(log_file_name(Generation::FIRST)), mode)?;
    created.push(dir.join(log_file_name(Generation::FIRST)));
    let mut image = AlignedBuf::new(DEFAULT_LOG_FILE_LEN);
    LogFileHeader {
        generation: Generation::FIRST,
        segment_len: SEGMENT_LEN as u32,
        file_len: DEFAULT_LOG_FILE_LEN as u32,
        log_signature,
        db_signature,
        created_unix,
        checkpoint_at_creation: start,
        prev_generation_checksum: 0,
    }
    .encode(&mut image[..SEGMENT_LEN]);
    FileIo::offline(&log)?.write_all(
        IoClass::OfflineWrite,
        &mut image,
        DEFAULT_LOG_FILE_LEN,
        0,
        true,
    )?;

    let chk = DataFile::create_new(dir.join(CHECKPOINT_FILE_NAME), mode)?;
    created.push(dir.join(CHECKPOINT_FILE_NAME));
    let mut copies = AlignedBuf::new(2 * CHECKPOINT_COPY_LEN);
    let record = CheckpointRecord {
        update_seq: 1,
        checkpoint: start,
        log_signature,
        db_signature,
        state,
    };
    record.encode(&mut copies[..CHECKPOINT_COPY_LEN]);
    record.encode(&mut copies[CHECKPOINT_COPY_LEN..]);
    FileIo::offline(&chk)?.write_all(
        IoClass::OfflineWrite,
        &mut copies,
        2 * CHECKPOINT_COPY_LEN,
        0,
        true,
    )?;
    crate::dbfile::sync_dir(dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_creation_removes_only_the_files_it_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        // Someone else's file where the checkpoint goes: creating it fails after the
        // first log file was written.
        let foreign = dir.join(CHECKPOINT_FILE_NAME);
        std::fs::write(&foreign, b"not ours").unwrap();
        let state = CheckpointState::default();
        let result = create_initial_logs(&dir, 1, 2, state, IoMode::Buffered);
        assert!(result.is_err());
        assert!(
            !dir.join(log_file_name(Generation::FIRST)).exists(),
            "half-made log left behind"
        );
        assert_eq!(std::fs::read(&foreign).unwrap(), b"not ours");

        std::fs::remove_file(&foreign).unwrap();
        create_initial_logs(&dir, 1, 2, state, IoMode::Buffered).unwrap();
        assert!(is_our_log_file(&dir.join(log_file_name(Generation::FIRST))));
        assert!(is_our_log_file(&dir.join(CHECKPOINT_FILE_NAME)));
    }

    #[test]
    fn a_next_file_is_ours_only_while_it_holds_nothing_but_zeros() {
        let tmp = tempfile::tempdir().unwrap();
        let next = tmp.path().join(NEXT_LOG_FILE_NAME);
        // A process killed while creating it leaves it empty or short.
        for zeros in [0usize, 5, 16, 64 * 1024] {
            std::fs::write(&next, vec![0u8; zeros]).unwrap();
            assert!(is_our_log_file(&next), "{zeros} zero bytes");
        }
        let mut late = vec![0u8; 64 * 1024];
        late[40_000] = 1;
        for foreign in [&b"x"[..], &b"short text"[..], &late[..]] {
            std::fs::write(&next, foreign).unwrap();
            assert!(
                !is_our_log_file(&next),
                "{} bytes, not all zero",
                foreign.len()
            );
        }
        // Under another name even zeros are not ours.
        let other = tmp.path().join(log_file_name(Generation::new(7)));
        std::fs::write(&other, [0u8; 4]).unwrap();
        assert!(!is_our_log_file(&other));
    }
}
