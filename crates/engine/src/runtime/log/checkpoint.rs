//! The checkpoint file `E00.chk`: reading it, and rewriting both copies in order
//! through a backend of its own, which times and counts the writes as
//! [`IoClass::LogCheckpoint`].

use std::path::Path;
use std::sync::Arc;

use edbstress_format::InstanceId;
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_LEN, CHECKPOINT_FILE_NAME, CheckpointRecord,
    CheckpointState, LogFormatError, LogPosition, select_checkpoint,
};
use edbstress_io::blocking::{self, FileIo, Target};
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoMode, IoStats,
    open_backend,
};

use parking_lot::Mutex;

use super::LogSignatures;
use crate::error::EngineError;

/// Reads `E00.chk` in `dir` and returns the valid copy with the higher update sequence.
/// Recovery starts reading the log at its `checkpoint`; its signatures name the log
/// stream and database the directory belongs to.
pub fn read_checkpoint(dir: &Path, io_mode: IoMode) -> Result<CheckpointRecord, EngineError> {
    let path = dir.join(CHECKPOINT_FILE_NAME);
    let file = DataFile::open(&path, io_mode, Access::ReadOnly)?;
    let mut copies = AlignedBuf::new(CHECKPOINT_FILE_LEN);
    FileIo::offline(&file)?.read_exact(IoClass::HeaderRead, &mut copies, CHECKPOINT_FILE_LEN, 0)?;
    let selection = select_checkpoint(
        &copies[..CHECKPOINT_COPY_LEN],
        &copies[CHECKPOINT_COPY_LEN..],
    )
    .map_err(|e| EngineError::CorruptLog {
        file: path.clone(),
        segment: 0,
        what: format!("no valid checkpoint copy: {e}"),
    })?;
    Ok(selection.record)
}

/// The checkpoint file of a log writer, open for rewriting.
pub(crate) struct CheckpointFile {
    file: DataFile,
    /// Carries, times and counts the writes (`file` registered as `file_id`).
    io: Box<dyn IoBackend>,
    file_id: FileId,
    instance: InstanceId,
    /// The backend's counters as of the last write, readable without waiting for a
    /// checkpoint in progress (its barrier may take a while).
    published: Arc<Mutex<IoStats>>,
    copy: AlignedBuf,
    update_seq: u64,
    signatures: LogSignatures,
}

impl CheckpointFile {
    /// Opens (or creates) `E00.chk` in `dir`. An existing file must belong to the log
    /// stream `signatures`; a file whose copies are both damaged is taken over (it is
    /// about to be rewritten), one that is not a checkpoint file at all is refused.
    /// Its writes go through a backend of `backend`'s kind, accounted to `instance`.
    pub(crate) fn open(
        dir: &Path,
        signatures: LogSignatures,
        io_mode: IoMode,
        backend: BackendKind,
        instance: InstanceId,
    ) -> Result<CheckpointFile, EngineError> {
        let path = dir.join(CHECKPOINT_FILE_NAME);
        let (file, existing) = match DataFile::open(&path, io_mode, Access::ReadWrite) {
            Ok(file) => (file, true),
            Err(edbstress_io::IoError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                (DataFile::create_new(&path, io_mode)?, false)
            }
            Err(e) => return Err(e.into()),
        };
        let mut io = open_backend(backend, 1)?;
        let file_id = io.register(&file)?;
        let update_seq = if existing {
            let from = Target {
                file: file_id,
                path: &path,
                class: IoClass::HeaderRead,
                instance: instance.get(),
            };
            Self::existing_update_seq(&mut *io, from, &file, signatures)?
        } else {
            0
        };
        Ok(CheckpointFile {
            file,
            io,
            file_id,
            instance,
            published: Arc::default(),
            copy: AlignedBuf::new(CHECKPOINT_COPY_LEN),
            update_seq,
            signatures,
        })
    }

    /// The update sequence of the existing file read through `io` as `from`.
    fn existing_update_seq(
        io: &mut dyn IoBackend,
        from: Target<'_>,
        file: &DataFile,
        signatures: LogSignatures,
    ) -> Result<u64, EngineError> {
        let path = from.path;
        if file.len()? < CHECKPOINT_FILE_LEN as u64 {
            // Created but never completely written: nothing to keep.
            return Ok(0);
        }
        let mut copies = AlignedBuf::new(CHECKPOINT_FILE_LEN);
        blocking::read_exact(io, from, &mut copies, CHECKPOINT_FILE_LEN, 0)?;
        match select_checkpoint(
            &copies[..CHECKPOINT_COPY_LEN],
            &copies[CHECKPOINT_COPY_LEN..],
        ) {
            Ok(selection) => {
                let record = selection.record;
                if record.log_signature != signatures.log_signature
                    || record.db_signature != signatures.db_signature
                {
                    return Err(EngineError::Mismatch {
                        what: format!(
                            "{} belongs to another log stream (log signature {:#018x}, \
                             database signature {:#018x}); point the instance at its own log \
                             directory",
                            path.display(),
                            record.log_signature,
                            record.db_signature
                        ),
                    });
                }
                Ok(record.update_seq)
            }
            Err(LogFormatError::BadMagic { .. }) => Err(EngineError::Mismatch {
                what: format!(
                    "{} is not an edbstress checkpoint file; move it out of the log directory",
                    path.display()
                ),
            }),
            Err(_) => Ok(0),
        }
    }

    /// Writes `checkpoint` to copy 0, makes it durable, then to copy 1 and makes that
    /// durable: a torn write of either copy leaves the other one valid.
    pub(crate) fn write(
        &mut self,
        checkpoint: LogPosition,
        state: CheckpointState,
    ) -> Result<(), EngineError> {
        self.update_seq += 1;
        CheckpointRecord {
            update_seq: self.update_seq,
            checkpoint,
            log_signature: self.signatures.log_signature,
            db_signature: self.signatures.db_signature,
            state,
        }
        .encode(&mut self.copy);
        let mut result = Ok(());
        for offset in [0, CHECKPOINT_COPY_LEN as u64] {
            let to = Target {
                file: self.file_id,
                path: self.file.path(),
                class: IoClass::LogCheckpoint,
                instance: self.instance.get(),
            };
            result = blocking::write_all(
                &mut *self.io,
                to,
                &mut self.copy,
                CHECKPOINT_COPY_LEN,
                offset,
                true,
            );
            if result.is_err() {
                break;
            }
        }
        self.published.lock().clone_from(self.io.stats());
        Ok(result?)
    }

    /// The checkpoint writes so far, as the backend counted them, updated after each
    /// write: read it without locking the checkpoint file.
    pub(crate) fn stats_handle(&self) -> Arc<Mutex<IoStats>> {
        Arc::clone(&self.published)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edbstress_format::Generation;

    #[test]
    fn log_checkpoint_file_round_trip_and_signature_check() {
        let dir = tempfile::tempdir().unwrap();
        let sigs = LogSignatures {
            log_signature: 7,
            db_signature: 9,
        };
        let pos = LogPosition {
            generation: Generation::new(3),
            segment: 4,
            offset: 100,
        };
        {
            let mut chk = CheckpointFile::open(
                dir.path(),
                sigs,
                IoMode::Direct,
                BackendKind::Auto,
                InstanceId::new(0),
            )
            .unwrap();
            chk.write(pos, CheckpointState::default()).unwrap();
            chk.write(pos, CheckpointState::default()).unwrap();
            assert!(dir.path().join(CHECKPOINT_FILE_NAME).exists());
        }
        let record = read_checkpoint(dir.path(), IoMode::Direct).unwrap();
        assert_eq!(record.checkpoint, pos);
        assert_eq!(record.update_seq, 2);
        // Reopening continues the sequence.
        let mut chk = CheckpointFile::open(
            dir.path(),
            sigs,
            IoMode::Buffered,
            BackendKind::Threads,
            InstanceId::new(0),
        )
        .unwrap();
        chk.write(pos, CheckpointState::default()).unwrap();
        let counted = chk
            .stats_handle()
            .lock()
            .get(0, IoClass::LogCheckpoint)
            .cloned()
            .unwrap();
        assert_eq!(
            (counted.ops, counted.bytes),
            (2, 2 * CHECKPOINT_COPY_LEN as u64),
            "both copies written, each counted"
        );
        assert_eq!(
            read_checkpoint(dir.path(), IoMode::Direct)
                .unwrap()
                .update_seq,
            3
        );
        let other = LogSignatures {
            log_signature: 8,
            db_signature: 9,
        };
        assert!(matches!(
            CheckpointFile::open(
                dir.path(),
                other,
                IoMode::Direct,
                BackendKind::Auto,
                InstanceId::new(0)
            ),
            Err(EngineError::Mismatch { .. })
        ));
    }
}
