//! The database header, stored twice: in page slot 0 (offset 0) and, as a shadow
//! copy, in slot 1 (offset `page_size`). Both copies are written one after the other,
//! so a torn header write always leaves one valid copy; [`select_header`] picks the
//! valid copy with the higher update sequence.
//!
//! The header fills the first [`HEADER_REGION_LEN`] bytes of its slot; the rest of the
//! slot is zero. Its checksum is `block_checksum(&slot[..4096], 0, true)` stored at
//! offset 0 (0 is never a data page number).

use thiserror::Error;

use crate::bytes::{get_u32, get_u64, is_all_zero, put_u32, put_u64};
use crate::checksum::block_checksum;
use crate::log::LogPosition;
use crate::{Generation, InstanceId, PageSize};

/// Magic at offset 8 of both header copies.
pub const DB_MAGIC: [u8; 8] = *b"EDBSTRES";
/// The header format version this crate reads and writes. Version 2 added the view
/// index tree (offset 164, root page 3; the first non-root page moved from 3 to 4);
/// offsets 0..164 mean the same in both versions.
pub const FORMAT_VERSION: u32 = 2;
/// Length of the checksummed header region at the start of each header slot.
pub const HEADER_REGION_LEN: usize = 4096;
/// Length of the creator string field.
pub const CREATOR_LEN: usize = 32;

const MAGIC: usize = 8;
const VERSION: usize = 16;
const PAGE_SIZE: usize = 20;
const SIGNATURE: usize = 24;
const CREATED_UNIX: usize = 32;
const STATE: usize = 40;
const INSTANCE: usize = 44;
const UPDATE_SEQ: usize = 48;
const CHECKPOINT: usize = 56;
const LAST_DBTIME: usize = 64;
const PAGE_COUNT: usize = 72;
const NEXT_UNUSED_PAGE: usize = 76;
const MAILBOX_TREE: usize = 80;
const LONG_VALUE_TREE: usize = 88;
const MAILBOX_COUNT: usize = 96;
const CONTENT_RATIO: usize = 100;
const RECORD_COUNT: usize = 104;
const NEXT_MESSAGE_ID: usize = 112;
const LOG_SIGNATURE: usize = 120;
const CREATOR: usize = 128;
const LOG_REQUIRED: usize = 160;
const VIEW_INDEX_TREE: usize = 164;
/// First byte after the defined fields; everything from here to 4096 is zero.
const FIELDS_END: usize = VIEW_INDEX_TREE + 8;

/// Whether the database was shut down cleanly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DbState {
    /// Cleanly shut down: no recovery needed (stored as 1).
    Clean,
    /// In use or crashed: soft recovery must replay the log (stored as 2).
    DirtyNeedsRecovery,
    /// Creation has not finished (stored as 3).
    Creating,
}

impl DbState {
    /// The stored value.
    pub const fn to_u32(self) -> u32 {
        match self {
            DbState::Clean => 1,
            DbState::DirtyNeedsRecovery => 2,
            DbState::Creating => 3,
        }
    }

    /// The state stored as `value`, if valid.
    pub const fn from_u32(value: u32) -> Option<DbState> {
        match value {
            1 => Some(DbState::Clean),
            2 => Some(DbState::DirtyNeedsRecovery),
            3 => Some(DbState::Creating),
            _ => None,
        }
    }
}

/// Where a B+tree lives: its object id and root page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TreeRoot {
    /// Object id stamped on every page of the tree.
    pub object_id: u32,
    /// Page number of the root page.
    pub root: u32,
}

/// The database header (one copy); see `docs/format.md` for the byte layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseHeader {
    /// Format version (offset 16); [`FORMAT_VERSION`] for every header this crate
    /// writes or accepts.
    pub format_version: u32,
    /// Page size of the database file (offset 20).
    pub page_size: PageSize,
    /// Random database signature; log files and the checkpoint carry it too (offset 24).
    pub signature: u64,
    /// Creation time, seconds since the Unix epoch (offset 32).
    pub created_unix: u64,
    /// Shutdown state (offset 40).
    pub state: DbState,
    /// Instance the database belongs to (offset 44, a `u32`).
    pub instance: InstanceId,
    /// Incremented on every header write; the copy with the higher value wins (offset 48).
    pub update_seq: u64,
    /// Checkpoint log position at the last clean shutdown (offset 56).
    pub checkpoint: LogPosition,
    /// Highest dbtime handed out (offset 64).
    pub last_dbtime: u64,
    /// Number of data pages in the file: pages 1..=page_count (offset 72).
    pub page_count: u32,
    /// First page never allocated (offset 76).
    pub next_unused_page: u32,
    /// The mailbox table B+tree (offset 80).
    pub mailbox_tree: TreeRoot,
    /// The long-value B+tree (offset 88).
    pub long_value_tree: TreeRoot,
    /// Number of mailboxes (offset 96).
    pub mailbox_count: u32,
    /// Target compressibility ×1000; 1000 = incompressible (offset 100).
    pub content_ratio_permille: u32,
    /// Number of mailbox rows (offset 104).
    pub record_count: u64,
    /// Next message id to hand out (offset 112).
    pub next_message_id: u64,
    /// Signature of the log stream that belongs to this database (offset 120).
    pub log_signature: u64,
    /// Creating program, UTF-8, zero padded (offset 128).
    pub creator: [u8; CREATOR_LEN],
    /// Highest log generation known to hold a durable write this database depends on
    /// (offset 160; 0 = none recorded). The engine records a generation here after its
    /// first write is durable and before any commit in it is acknowledged, so recovery
    /// can tell a log that ends early (the storage lost the newest files, or their
    /// whole body) from one that simply ended at a crash.
    pub log_required: Generation,
    /// The view index B+tree (offset 164; version 2).
    pub view_index_tree: TreeRoot,
}

impl DatabaseHeader {
    /// A header for a database being created: state [`DbState::Creating`], update
    /// sequence 0, every counter and tree root zero, `creator` set from `creator`
    /// (truncated to 32 bytes at a character boundary).
    pub fn new(
        page_size: PageSize,
        signature: u64,
        created_unix: u64,
        creator: &str,
    ) -> DatabaseHeader {
        DatabaseHeader {
            format_version: FORMAT_VERSION,
            page_size,
            signature,
            created_unix,
            state: DbState::Creating,
            instance: InstanceId::default(),
            update_seq: 0,
            checkpoint: LogPosition::default(),
            last_dbtime: 0,
            page_count: 0,
            next_unused_page: 1,
            mailbox_tree: TreeRoot::default(),
            long_value_tree: TreeRoot::default(),
            mailbox_count: 0,
            content_ratio_permille: 1000,
            record_count: 0,
            next_message_id: 0,
            log_signature: 0,
            creator: creator_field(creator),
            log_required: Generation::NONE,
            view_index_tree: TreeRoot::default(),
        }
    }

    /// The creator string up to its zero padding (the valid UTF-8 prefix).
    pub fn creator_str(&self) -> &str {
        let end = self
            .creator
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(CREATOR_LEN);
        match std::str::from_utf8(&self.creator[..end]) {
            Ok(s) => s,
            Err(err) => std::str::from_utf8(&self.creator[..err.valid_up_to()]).unwrap_or_default(),
        }
    }

    /// Encodes the header into a whole header slot: fields, zeros up to the end of the
    /// slot, and the checksum at offset 0.
    ///
    /// # Panics
    ///
    /// If `slot` is shorter than [`HEADER_REGION_LEN`].
    pub fn encode(&self, slot: &mut [u8]) {
        slot.fill(0);
        let region = &mut slot[..HEADER_REGION_LEN];
        region[MAGIC..MAGIC + 8].copy_from_slice(&DB_MAGIC);
        put_u32(region, VERSION, self.format_version);
        put_u32(region, PAGE_SIZE, self.page_size.bytes() as u32);
        put_u64(region, SIGNATURE, self.signature);
        put_u64(region, CREATED_UNIX, self.created_unix);
        put_u32(region, STATE, self.state.to_u32());
        put_u32(region, INSTANCE, u32::from(self.instance));
        put_u64(region, UPDATE_SEQ, self.update_seq);
        put_u64(region, CHECKPOINT, self.checkpoint.pack());
        put_u64(region, LAST_DBTIME, self.last_dbtime);
        put_u32(region, PAGE_COUNT, self.page_count);
        put_u32(region, NEXT_UNUSED_PAGE, self.next_unused_page);
        put_u32(region, MAILBOX_TREE, self.mailbox_tree.object_id);
        put_u32(region, MAILBOX_TREE + 4, self.mailbox_tree.root);
        put_u32(region, LONG_VALUE_TREE, self.long_value_tree.object_id);
        put_u32(region, LONG_VALUE_TREE + 4, self.long_value_tree.root);
        put_u32(region, MAILBOX_COUNT, self.mailbox_count);
        put_u32(region, CONTENT_RATIO, self.content_ratio_permille);
        put_u64(region, RECORD_COUNT, self.record_count);
        put_u64(region, NEXT_MESSAGE_ID, self.next_message_id);
        put_u64(region, LOG_SIGNATURE, self.log_signature);
        region[CREATOR..CREATOR + CREATOR_LEN].copy_from_slice(&self.creator);
        put_u32(region, LOG_REQUIRED, self.log_required.get());
        put_u32(region, VIEW_INDEX_TREE, self.view_index_tree.object_id);
        put_u32(region, VIEW_INDEX_TREE + 4, self.view_index_tree.root);
        let sum = block_checksum(region, 0, true);
        put_u64(region, 0, sum);
    }

    /// Decodes one header copy. `slot` is either the 4096-byte header region or the
    /// whole slot (then its length must be the recorded page size and the bytes after
    /// the region must be zero).
    pub fn decode(slot: &[u8]) -> Result<DatabaseHeader, HeaderError> {
        let Some(region) = slot.get(..HEADER_REGION_LEN) else {
            return Err(HeaderError::Invalid(format!(
                "a header slot is at least {HEADER_REGION_LEN} bytes, got {}",
                slot.len()
            )));
        };
        if is_all_zero(slot) {
            return Err(HeaderError::Uninitialized);
        }
        let magic_ok = region[MAGIC..MAGIC + 8] == DB_MAGIC;
        if get_u64(region, 0) != block_checksum(region, 0, true) {
            // A foreign file rarely has our magic; a damaged copy of ours usually does.
            return Err(if magic_ok {
                HeaderError::BadChecksum
            } else {
                HeaderError::NotOurs
            });
        }
        if !magic_ok {
            return Err(HeaderError::NotOurs);
        }
        let version = get_u32(region, VERSION);
        if version != FORMAT_VERSION {
            // Signatures sit at the same offsets in every version: they identify the
            // database (and its logs) so that prepare and clean can rebuild or remove it.
            return Err(HeaderError::UnsupportedVersion {
                found: version,
                signature: get_u64(region, SIGNATURE),
                log_signature: get_u64(region, LOG_SIGNATURE),
            });
        }
        let raw_page_size = get_u32(region, PAGE_SIZE);
        let page_size = PageSize::from_bytes(raw_page_size as usize).ok_or_else(|| {
            HeaderError::Invalid(format!(
                "page size {raw_page_size} is not 4, 8, 16 or 32 KiB"
            ))
        })?;
        if slot.len() > HEADER_REGION_LEN {
            if slot.len() != page_size.bytes() {
                return Err(HeaderError::Invalid(format!(
                    "header slot of {} bytes does not match the page size {page_size}",
                    slot.len()
                )));
            }
            if !is_all_zero(&slot[HEADER_REGION_LEN..]) {
                return Err(HeaderError::Invalid(
                    "bytes after the 4096-byte header region are not zero".into(),
                ));
            }
        }
        if !is_all_zero(&region[FIELDS_END..]) {
            return Err(HeaderError::Invalid(
                "reserved header bytes 172..4096 are not zero".into(),
            ));
        }
        let raw_state = get_u32(region, STATE);
        let state = DbState::from_u32(raw_state)
            .ok_or_else(|| HeaderError::Invalid(format!("unknown database state {raw_state}")))?;
        let raw_instance = get_u32(region, INSTANCE);
        let instance = InstanceId::try_from(raw_instance).map_err(|_| {
            HeaderError::Invalid(format!(
                "instance number {raw_instance} is out of range (at most {})",
                u16::MAX
            ))
        })?;
        let mut creator = [0u8; CREATOR_LEN];
        creator.copy_from_slice(&region[CREATOR..CREATOR + CREATOR_LEN]);
        Ok(DatabaseHeader {
            format_version: version,
            page_size,
            signature: get_u64(region, SIGNATURE),
            created_unix: get_u64(region, CREATED_UNIX),
            state,
            instance,
            update_seq: get_u64(region, UPDATE_SEQ),
            checkpoint: LogPosition::unpack(get_u64(region, CHECKPOINT)),
            last_dbtime: get_u64(region, LAST_DBTIME),
            page_count: get_u32(region, PAGE_COUNT),
            next_unused_page: get_u32(region, NEXT_UNUSED_PAGE),
            mailbox_tree: TreeRoot {
                object_id: get_u32(region, MAILBOX_TREE),
                root: get_u32(region, MAILBOX_TREE + 4),
            },
            long_value_tree: TreeRoot {
                object_id: get_u32(region, LONG_VALUE_TREE),
                root: get_u32(region, LONG_VALUE_TREE + 4),
            },
            mailbox_count: get_u32(region, MAILBOX_COUNT),
            content_ratio_permille: get_u32(region, CONTENT_RATIO),
            record_count: get_u64(region, RECORD_COUNT),
            next_message_id: get_u64(region, NEXT_MESSAGE_ID),
            log_signature: get_u64(region, LOG_SIGNATURE),
            creator,
            log_required: Generation::new(get_u32(region, LOG_REQUIRED)),
            view_index_tree: TreeRoot {
                object_id: get_u32(region, VIEW_INDEX_TREE),
                root: get_u32(region, VIEW_INDEX_TREE + 4),
            },
        })
    }
}

/// `s` as a zero-padded 32-byte field, cut at a character boundary.
pub fn creator_field(s: &str) -> [u8; CREATOR_LEN] {
    let mut end = s.len().min(CREATOR_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut field = [0u8; CREATOR_LEN];
    field[..end].copy_from_slice(&s.as_bytes()[..end]);
    field
}

/// Why a header copy cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Neither a valid checksum nor our magic: some other file.
    #[error(
        "not an edbstress database (no EDBSTRES header); check the path, or create the \
         database with `edbstress prepare`"
    )]
    NotOurs,
    /// The header slot is all zero.
    #[error(
        "the database header is all zero: the file was never initialised or creation was \
         interrupted; create the database again"
    )]
    Uninitialized,
    /// Our magic, but the checksum does not match.
    #[error(
        "the database header checksum does not match: the header is damaged; if the other \
         copy is also damaged, restore the database from a good copy"
    )]
    BadChecksum,
    /// A valid header of another format version.
    #[error(
        "database format version {found} is not supported (this build reads version {}: \
         version 2 added the view index); recreate the database: `edbstress prepare \
         --recreate` with the same paths rebuilds it, or remove it with `edbstress clean` \
         and prepare again (or use the edbstress release that created it)",
        FORMAT_VERSION
    )]
    UnsupportedVersion {
        /// Version found in the header.
        found: u32,
        /// The database signature (offset 24 in every version).
        signature: u64,
        /// The log stream signature (offset 120 in every version).
        log_signature: u64,
    },
    /// Checksum correct but a field is impossible.
    #[error("the database header is invalid: {0}; recreate the database")]
    Invalid(String),
}

impl HeaderError {
    /// Which error says most about a file when both header copies fail.
    fn rank(&self) -> u8 {
        match self {
            HeaderError::Uninitialized => 0,
            HeaderError::NotOurs => 1,
            HeaderError::BadChecksum => 2,
            HeaderError::Invalid(_) => 3,
            HeaderError::UnsupportedVersion { .. } => 4,
        }
    }
}

/// Which header copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderCopy {
    /// Slot 0, at file offset 0.
    Primary,
    /// Slot 1, at file offset `page_size`.
    Shadow,
}

/// Result of [`select_header`]: the header to use and what was wrong with each copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderSelection {
    /// The valid copy with the higher update sequence (the primary on a tie).
    pub header: DatabaseHeader,
    /// Where `header` came from.
    pub chosen: HeaderCopy,
    /// Whether the primary copy (slot 0) is valid.
    pub primary_valid: bool,
    /// Whether the shadow copy (slot 1) is valid.
    pub shadow_valid: bool,
    /// Why the primary copy was rejected, `None` if it is valid.
    pub primary_error: Option<HeaderError>,
    /// Why the shadow copy was rejected, `None` if it is valid.
    pub shadow_error: Option<HeaderError>,
}

/// Decodes both header copies and returns the valid one with the higher update
/// sequence, plus what was wrong with the other. When neither is valid, returns the
/// most telling of the two errors (a version or field problem over a bad checksum
/// over a foreign file over an empty slot).
pub fn select_header(primary: &[u8], shadow: &[u8]) -> Result<HeaderSelection, HeaderError> {
    let (header, chosen, primary_error, shadow_error) = match (
        DatabaseHeader::decode(primary),
        DatabaseHeader::decode(shadow),
    ) {
        (Ok(p), Ok(s)) if s.update_seq > p.update_seq => (s, HeaderCopy::Shadow, None, None),
        (Ok(p), Ok(_)) => (p, HeaderCopy::Primary, None, None),
        (Ok(p), Err(e)) => (p, HeaderCopy::Primary, None, Some(e)),
        (Err(e), Ok(s)) => (s, HeaderCopy::Shadow, Some(e), None),
        (Err(a), Err(b)) => return Err(if b.rank() > a.rank() { b } else { a }),
    };
    Ok(HeaderSelection {
        header,
        chosen,
        primary_valid: primary_error.is_none(),
        shadow_valid: shadow_error.is_none(),
        primary_error,
        shadow_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creator_is_cut_at_a_character_boundary() {
        let long = "é".repeat(20); // 40 bytes
        let field = creator_field(&long);
        assert_eq!(&field[..32], "é".repeat(16).as_bytes());
        let header = DatabaseHeader::new(PageSize::K8, 1, 2, &long);
        assert_eq!(header.creator_str(), "é".repeat(16));
        let header = DatabaseHeader::new(PageSize::K8, 1, 2, "edbstress 0.1.0");
        assert_eq!(header.creator_str(), "edbstress 0.1.0");
    }
}
