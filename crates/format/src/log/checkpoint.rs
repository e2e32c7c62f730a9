//! The checkpoint file `E00.chk`: two 4096-byte copies of a [`CheckpointRecord`],
//! written one after the other, so a torn write leaves one valid copy.

use super::{CHECKPOINT_FORMAT_VERSION, LogFormatError, LogPosition};
use crate::bytes::{get_u32, get_u64, is_all_zero, put_u32, put_u64};
use crate::checksum::block_checksum;

/// Length of one checkpoint copy.
pub const CHECKPOINT_COPY_LEN: usize = 4096;
/// Length of the checkpoint file (two copies).
pub const CHECKPOINT_FILE_LEN: usize = 2 * CHECKPOINT_COPY_LEN;
/// Magic at offset 8 of each copy.
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"EDBSCHK\0";

const WHAT: &str = "checkpoint";
const MAGIC: usize = 8;
const VERSION: usize = 16;
const RESERVED: usize = 20;
const UPDATE_SEQ: usize = 24;
const CHECKPOINT: usize = 32;
const LOG_SIGNATURE: usize = 40;
const DB_SIGNATURE: usize = 48;
const LAST_DBTIME: usize = 56;
const NEXT_UNUSED_PAGE: usize = 64;
const RESERVED_68: usize = 68;
const NEXT_MESSAGE_ID: usize = 72;
const END: usize = 80;

/// One checkpoint copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CheckpointRecord {
    /// Incremented on every checkpoint write; the copy with the higher value wins.
    pub update_seq: u64,
    /// Oldest log position still needed for recovery.
    pub checkpoint: LogPosition,
    /// Signature of the log stream.
    pub log_signature: u64,
    /// Signature of the database.
    pub db_signature: u64,
    /// Engine state at (or after) the checkpoint, which recovery cannot rebuild from
    /// the log it replays: records before the checkpoint are not read.
    pub state: CheckpointState,
}

/// Counters of the database that only ever grow, as of a log position at or after the
/// checkpoint: recovery starts from these, then takes the maximum with what it replays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointState {
    /// Highest dbtime given out.
    pub last_dbtime: u64,
    /// First page never allocated.
    pub next_unused_page: u32,
    /// Next message id to hand out.
    pub next_message_id: u64,
}

impl CheckpointRecord {
    /// Encodes one copy into the first [`CHECKPOINT_COPY_LEN`] bytes of `copy`
    /// (zeroing them first) with its checksum (id 0) at offset 0.
    ///
    /// # Panics
    ///
    /// If `copy` is shorter than [`CHECKPOINT_COPY_LEN`].
    pub fn encode(&self, copy: &mut [u8]) {
        let copy = &mut copy[..CHECKPOINT_COPY_LEN];
        copy.fill(0);
        copy[MAGIC..MAGIC + 8].copy_from_slice(&CHECKPOINT_MAGIC);
        put_u32(copy, VERSION, CHECKPOINT_FORMAT_VERSION);
        put_u64(copy, UPDATE_SEQ, self.update_seq);
        put_u64(copy, CHECKPOINT, self.checkpoint.pack());
        put_u64(copy, LOG_SIGNATURE, self.log_signature);
        put_u64(copy, DB_SIGNATURE, self.db_signature);
        put_u64(copy, LAST_DBTIME, self.state.last_dbtime);
        put_u32(copy, NEXT_UNUSED_PAGE, self.state.next_unused_page);
        put_u64(copy, NEXT_MESSAGE_ID, self.state.next_message_id);
        let sum = block_checksum(copy, 0, true);
        put_u64(copy, 0, sum);
    }

    /// Encodes both copies of the whole checkpoint file.
    ///
    /// # Panics
    ///
    /// If `file` is shorter than [`CHECKPOINT_FILE_LEN`].
    pub fn encode_file(&self, file: &mut [u8]) {
        let (first, second) = file[..CHECKPOINT_FILE_LEN].split_at_mut(CHECKPOINT_COPY_LEN);
        self.encode(first);
        self.encode(second);
    }

    /// Decodes one copy (exactly [`CHECKPOINT_COPY_LEN`] bytes).
    pub fn decode(copy: &[u8]) -> Result<CheckpointRecord, LogFormatError> {
        if copy.len() != CHECKPOINT_COPY_LEN {
            return Err(LogFormatError::Invalid {
                what: WHAT,
                detail: format!(
                    "a checkpoint copy is {CHECKPOINT_COPY_LEN} bytes, got {}",
                    copy.len()
                ),
            });
        }
        if is_all_zero(copy) {
            return Err(LogFormatError::Uninitialized { what: WHAT });
        }
        let magic_ok = copy[MAGIC..MAGIC + 8] == CHECKPOINT_MAGIC;
        if get_u64(copy, 0) != block_checksum(copy, 0, true) {
            return Err(if magic_ok {
                LogFormatError::BadChecksum { what: WHAT }
            } else {
                LogFormatError::BadMagic { what: WHAT }
            });
        }
        if !magic_ok {
            return Err(LogFormatError::BadMagic { what: WHAT });
        }
        let version = get_u32(copy, VERSION);
        if version != CHECKPOINT_FORMAT_VERSION {
            return Err(LogFormatError::UnsupportedCheckpointVersion { found: version });
        }
        if get_u32(copy, RESERVED) != 0
            || get_u32(copy, RESERVED_68) != 0
            || !is_all_zero(&copy[END..])
        {
            return Err(LogFormatError::Invalid {
                what: WHAT,
                detail: "reserved bytes are not zero".into(),
            });
        }
        Ok(CheckpointRecord {
            update_seq: get_u64(copy, UPDATE_SEQ),
            checkpoint: LogPosition::unpack(get_u64(copy, CHECKPOINT)),
            log_signature: get_u64(copy, LOG_SIGNATURE),
            db_signature: get_u64(copy, DB_SIGNATURE),
            state: CheckpointState {
                last_dbtime: get_u64(copy, LAST_DBTIME),
                next_unused_page: get_u32(copy, NEXT_UNUSED_PAGE),
                next_message_id: get_u64(copy, NEXT_MESSAGE_ID),
            },
        })
    }
}

/// Result of [`select_checkpoint`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointSelection {
    /// The valid copy with the higher update sequence (copy 0 on a tie).
    pub record: CheckpointRecord,
    /// Which copy it is: 0 (file offset 0) or 1 (file offset 4096).
    pub chosen: usize,
    /// Whether copy 0 is valid.
    pub copy0_valid: bool,
    /// Whether copy 1 is valid.
    pub copy1_valid: bool,
    /// Why each copy was rejected, `None` where valid.
    pub errors: [Option<LogFormatError>; 2],
}

/// Decodes both checkpoint copies and returns the valid one with the higher update
/// sequence. When neither is valid, returns copy 0's error unless copy 0 is merely
/// all zero.
pub fn select_checkpoint(
    copy0: &[u8],
    copy1: &[u8],
) -> Result<CheckpointSelection, LogFormatError> {
    let results = [
        CheckpointRecord::decode(copy0),
        CheckpointRecord::decode(copy1),
    ];
    let chosen = match (&results[0], &results[1]) {
        (Ok(a), Ok(b)) => usize::from(b.update_seq > a.update_seq),
        (Ok(_), Err(_)) => 0,
        (Err(_), Ok(_)) => 1,
        (Err(a), Err(b)) => {
            return Err(if matches!(a, LogFormatError::Uninitialized { .. }) {
                b.clone()
            } else {
                a.clone()
            });
        }
    };
    let record = match &results[chosen] {
        Ok(record) => *record,
        Err(err) => return Err(err.clone()),
    };
    let [first, second] = results;
    Ok(CheckpointSelection {
        record,
        chosen,
        copy0_valid: first.is_ok(),
        copy1_valid: second.is_ok(),
        errors: [first.err(), second.err()],
    })
}
