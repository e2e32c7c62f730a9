//! Log file header (segment 0) and data segments (1..), with their checksums.

use super::{
    LOG_FORMAT_VERSION, LogFormatError, LogPosition, OLDEST_LOG_FORMAT_VERSION, SEGMENT_HEADER_LEN,
    SEGMENT_LEN, SegmentLen, segment_check_id,
};
use crate::Generation;
use crate::bytes::{get_u16, get_u32, get_u64, is_all_zero, put_u16, put_u32, put_u64};
use crate::checksum::{BlockDiff, block_checksum, classify, flip_bit};

/// Magic at offset 8 of a log file header.
pub const LOG_FILE_MAGIC: [u8; 8] = *b"EDBSLOG\0";
/// Magic at offset 8 of a data segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"LSEG";
/// Largest log file of a 4 KiB stream (the largest of all): segment indices are `u16`,
/// so 65536 segments ([`SegmentLen::max_file_len`]).
pub const MAX_LOG_FILE_LEN: usize = SegmentLen::Page4096.max_file_len();

/// Data segment flag bits (segment header offset 18).
pub mod segment_flags {
    /// This is the shadow copy of the partially filled tail segment `logical_index`,
    /// stored at physical slot `logical_index + 1`.
    pub const SHADOW: u16 = 1;
}

const WHAT_FILE_HEADER: &str = "log file header";

const H_MAGIC: usize = 8;
const H_VERSION: usize = 16;
const H_SEGMENT_LEN: usize = 20;
const H_FILE_LEN: usize = 24;
const H_GENERATION: usize = 28;
const H_LOG_SIGNATURE: usize = 32;
const H_DB_SIGNATURE: usize = 40;
const H_CREATED_UNIX: usize = 48;
const H_CHECKPOINT: usize = 56;
const H_PREV_CHECKSUM: usize = 64;
const H_END: usize = 72;

const S_MAGIC: usize = 8;
const S_GENERATION: usize = 12;
const S_INDEX: usize = 16;
const S_FLAGS: usize = 18;
const S_USED: usize = 20;
const S_RESERVED: usize = 22;
const S_WRITE_SEQ: usize = 24;

/// Segment 0 of every log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFileHeader {
    /// This file's generation (offset 28).
    pub generation: Generation,
    /// Segment length of the stream (offset 20): 4096 or 512 ([`SegmentLen`]); the
    /// header itself is one segment of this length.
    pub segment_len: u32,
    /// Length of the file in bytes, a multiple of the segment length (offset 24).
    pub file_len: u32,
    /// Signature of the log stream (offset 32).
    pub log_signature: u64,
    /// Signature of the database the log belongs to (offset 40).
    pub db_signature: u64,
    /// Creation time, seconds since the Unix epoch (offset 48).
    pub created_unix: u64,
    /// The checkpoint when this file was created (offset 56).
    pub checkpoint_at_creation: LogPosition,
    /// Running checksum of the previous generation, chaining the files (offset 64);
    /// its computation is up to the log writer, this crate only stores it.
    pub prev_generation_checksum: u64,
}

impl LogFileHeader {
    /// Number of segments in the file, header included.
    pub fn segment_count(&self) -> usize {
        self.file_len as usize / self.segment_length().bytes()
    }

    /// The stream's segment length. A decoded header's is always a supported one;
    /// an unsupported value (only in a header built by hand) reads as 4096.
    pub fn segment_length(&self) -> SegmentLen {
        SegmentLen::from_bytes(u64::from(self.segment_len)).unwrap_or_default()
    }

    /// The bytes of the header within `head`, the first bytes of a log file: as many
    /// as the segment length it records, when that is a supported length and `head`
    /// holds them; otherwise all of `head` (for [`LogFileHeader::decode`] to reject).
    /// Readers that do not know a file's segment length read its first 4096 bytes
    /// and decode this.
    pub fn bytes_in(head: &[u8]) -> &[u8] {
        let stored = head
            .get(H_SEGMENT_LEN..H_SEGMENT_LEN + 4)
            .map(|_| get_u32(head, H_SEGMENT_LEN));
        match stored.and_then(|len| SegmentLen::from_bytes(u64::from(len))) {
            Some(len) if len.bytes() <= head.len() => &head[..len.bytes()],
            _ => head,
        }
    }

    /// Encodes the header into a whole segment (zeroing it) and stores its checksum
    /// (id `segment_check_id(generation, 0)`).
    ///
    /// # Panics
    ///
    /// If `seg.len()` is not the header's segment length, or that is not supported.
    pub fn encode(&self, seg: &mut [u8]) {
        assert!(
            SegmentLen::from_bytes(u64::from(self.segment_len)).is_some(),
            "log segment length {} is not supported",
            self.segment_len
        );
        assert_eq!(
            seg.len(),
            self.segment_len as usize,
            "a log file header is one segment"
        );
        seg.fill(0);
        seg[H_MAGIC..H_MAGIC + 8].copy_from_slice(&LOG_FILE_MAGIC);
        put_u32(seg, H_VERSION, LOG_FORMAT_VERSION);
        put_u32(seg, H_SEGMENT_LEN, self.segment_len);
        put_u32(seg, H_FILE_LEN, self.file_len);
        put_u32(seg, H_GENERATION, self.generation.get());
        put_u64(seg, H_LOG_SIGNATURE, self.log_signature);
        put_u64(seg, H_DB_SIGNATURE, self.db_signature);
        put_u64(seg, H_CREATED_UNIX, self.created_unix);
        put_u64(seg, H_CHECKPOINT, self.checkpoint_at_creation.pack());
        put_u64(seg, H_PREV_CHECKSUM, self.prev_generation_checksum);
        let sum = block_checksum(seg, segment_check_id(self.generation, 0), true);
        put_u64(seg, 0, sum);
    }

    /// Decodes a log file header, checking its checksum against the generation it
    /// records. [`verify_log_file_header`] also checks that generation.
    pub fn decode(seg: &[u8]) -> Result<LogFileHeader, LogFormatError> {
        let invalid = |detail: String| LogFormatError::Invalid {
            what: WHAT_FILE_HEADER,
            detail,
        };
        if SegmentLen::from_bytes(seg.len() as u64).is_none() {
            return Err(invalid(format!(
                "a log file header is one segment, {} or {SEGMENT_LEN} bytes, got {}",
                SegmentLen::Sector512.bytes(),
                seg.len()
            )));
        }
        if is_all_zero(seg) {
            return Err(LogFormatError::Uninitialized {
                what: WHAT_FILE_HEADER,
            });
        }
        let magic_ok = seg[H_MAGIC..H_MAGIC + 8] == LOG_FILE_MAGIC;
        let generation = Generation::new(get_u32(seg, H_GENERATION));
        let id = segment_check_id(generation, 0);
        if get_u64(seg, 0) != block_checksum(seg, id, true) {
            return Err(if magic_ok {
                LogFormatError::BadChecksum {
                    what: WHAT_FILE_HEADER,
                }
            } else {
                LogFormatError::BadMagic {
                    what: WHAT_FILE_HEADER,
                }
            });
        }
        if !magic_ok {
            return Err(LogFormatError::BadMagic {
                what: WHAT_FILE_HEADER,
            });
        }
        let version = get_u32(seg, H_VERSION);
        if !(OLDEST_LOG_FORMAT_VERSION..=LOG_FORMAT_VERSION).contains(&version) {
            return Err(LogFormatError::UnsupportedVersion { found: version });
        }
        let segment_len = get_u32(seg, H_SEGMENT_LEN);
        let Some(seg_len) = SegmentLen::from_bytes(u64::from(segment_len)) else {
            return Err(invalid(format!(
                "segment length {segment_len}, only 512 and {SEGMENT_LEN} are supported"
            )));
        };
        if seg_len.bytes() != seg.len() {
            return Err(invalid(format!(
                "segment length {segment_len} recorded in a {}-byte header",
                seg.len()
            )));
        }
        let file_len = get_u32(seg, H_FILE_LEN);
        let len = file_len as usize;
        let (unit, max) = (seg_len.bytes(), seg_len.max_file_len());
        if len % unit != 0 || !(2 * unit..=max).contains(&len) {
            return Err(invalid(format!(
                "file length {file_len} is not a multiple of {unit} between 2 segments and {max} bytes"
            )));
        }
        if !is_all_zero(&seg[H_END..]) {
            return Err(invalid(format!("reserved bytes 72..{unit} are not zero")));
        }
        Ok(LogFileHeader {
            generation,
            segment_len,
            file_len,
            log_signature: get_u64(seg, H_LOG_SIGNATURE),
            db_signature: get_u64(seg, H_DB_SIGNATURE),
            created_unix: get_u64(seg, H_CREATED_UNIX),
            checkpoint_at_creation: LogPosition::unpack(get_u64(seg, H_CHECKPOINT)),
            prev_generation_checksum: get_u64(seg, H_PREV_CHECKSUM),
        })
    }
}

/// Decodes segment 0 of the log file of generation `generation`.
pub fn verify_log_file_header(
    seg: &[u8],
    generation: Generation,
) -> Result<LogFileHeader, LogFormatError> {
    let header = LogFileHeader::decode(seg)?;
    if header.generation != generation {
        return Err(LogFormatError::WrongGeneration {
            expected: generation,
            found: header.generation,
        });
    }
    Ok(header)
}

/// The 32-byte header of a data segment (checksum and magic are implied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SegmentHeader {
    /// Generation of the log file (offset 12).
    pub generation: Generation,
    /// Logical segment index within the file, 1.. (offset 16).
    pub logical_index: u16,
    /// [`segment_flags`] bits (offset 18).
    pub flags: u16,
    /// Payload bytes in use after the header (offset 20).
    pub used: u16,
    /// Increases with every segment write of the log stream; of a slot and its
    /// shadow, the higher one is newer (offset 24).
    pub write_seq: u64,
}

impl SegmentHeader {
    /// Whether this is a shadow copy of a partially filled tail segment.
    pub fn is_shadow(&self) -> bool {
        self.flags & segment_flags::SHADOW != 0
    }

    /// The slot this segment belongs in: `logical_index`, or `logical_index + 1` for a
    /// shadow copy (`None` if that overflows).
    pub fn physical_slot(&self) -> Option<u16> {
        if self.is_shadow() {
            self.logical_index.checked_add(1)
        } else {
            Some(self.logical_index)
        }
    }

    /// The used payload of `seg` (clamped to the segment).
    pub fn payload<'a>(&self, seg: &'a [u8]) -> &'a [u8] {
        let end = (SEGMENT_HEADER_LEN + usize::from(self.used)).min(seg.len());
        seg.get(SEGMENT_HEADER_LEN..end).unwrap_or_default()
    }

    /// Position of payload byte `payload_offset` of this segment.
    pub fn position(&self, payload_offset: usize) -> LogPosition {
        LogPosition {
            generation: self.generation,
            segment: self.logical_index,
            offset: (SEGMENT_HEADER_LEN + payload_offset).min(SEGMENT_LEN) as u16,
        }
    }

    fn read(seg: &[u8]) -> SegmentHeader {
        SegmentHeader {
            generation: Generation::new(get_u32(seg, S_GENERATION)),
            logical_index: get_u16(seg, S_INDEX),
            flags: get_u16(seg, S_FLAGS),
            used: get_u16(seg, S_USED),
            write_seq: get_u64(seg, S_WRITE_SEQ),
        }
    }

    fn write(&self, seg: &mut [u8]) {
        seg[S_MAGIC..S_MAGIC + 4].copy_from_slice(&SEGMENT_MAGIC);
        put_u32(seg, S_GENERATION, self.generation.get());
        put_u16(seg, S_INDEX, self.logical_index);
        put_u16(seg, S_FLAGS, self.flags);
        put_u16(seg, S_USED, self.used);
        put_u16(seg, S_RESERVED, 0);
        put_u64(seg, S_WRITE_SEQ, self.write_seq);
    }
}

fn supported_len(seg: &[u8]) -> SegmentLen {
    match SegmentLen::from_bytes(seg.len() as u64) {
        Some(len) => len,
        None => panic!(
            "a log segment is 512 or {SEGMENT_LEN} bytes, got {}",
            seg.len()
        ),
    }
}

/// Writes `hdr` (with magic) into the first 32 bytes of `seg` and stores the checksum
/// of the whole segment with id `segment_check_id(hdr.generation, physical_slot)`.
/// The payload must already be in place. The segment is as long as `seg`.
///
/// # Panics
///
/// If `seg.len()` is not a supported segment length ([`SegmentLen`]).
pub fn seal_segment(seg: &mut [u8], hdr: &SegmentHeader, physical_slot: u16) {
    supported_len(seg);
    hdr.write(seg);
    let sum = block_checksum(seg, segment_check_id(hdr.generation, physical_slot), true);
    put_u64(seg, 0, sum);
}

/// Builds a complete segment: copies `payload`, zeroes the rest, sets `used` to the
/// payload length and seals it (see [`seal_segment`]).
///
/// # Panics
///
/// If `seg.len()` is not a supported segment length or `payload` is longer than its
/// payload ([`SegmentLen::payload_len`]).
pub fn encode_segment(seg: &mut [u8], hdr: &SegmentHeader, payload: &[u8], physical_slot: u16) {
    let room = supported_len(seg).payload_len();
    assert!(
        payload.len() <= room,
        "segment payload of {} bytes exceeds {room}",
        payload.len()
    );
    let end = SEGMENT_HEADER_LEN + payload.len();
    seg[SEGMENT_HEADER_LEN..end].copy_from_slice(payload);
    seg[end..].fill(0);
    let hdr = SegmentHeader {
        used: payload.len() as u16,
        ..*hdr
    };
    seal_segment(seg, &hdr, physical_slot);
}

/// Outcome of [`verify_segment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentVerdict {
    /// Checksum, magic, position and `used` are all right.
    Valid(SegmentHeader),
    /// The segment is all zero: never written.
    Unused,
    /// Exactly one bit is flipped, at this bit index of the segment;
    /// [`repair_segment`] flips it back.
    Correctable {
        /// Index of the flipped bit (byte `bit / 8`, bit `bit % 8`).
        bit: u32,
    },
    /// Intact, but written for another position (a misdirected write, or a stale
    /// file).
    WrongPosition {
        /// Generation the segment was written for.
        found_generation: Generation,
        /// Physical slot the segment was written for.
        found_slot: u16,
    },
    /// Damaged beyond single-bit correction, or not a segment.
    Bad,
}

fn magic_ok(seg: &[u8]) -> bool {
    seg[S_MAGIC..S_MAGIC + 4] == SEGMENT_MAGIC
}

/// Checks a data segment read from physical slot `physical_slot` of the log file of
/// generation `generation`, as long as `seg` (a supported [`SegmentLen`], else
/// [`SegmentVerdict::Bad`]). Same rules as [`crate::checksum::verify_page`] for one
/// block: a single flipped bit (in the data or in the stored checksum) is
/// correctable; an intact segment whose checksum id and header name another
/// (generation, slot) is [`SegmentVerdict::WrongPosition`].
pub fn verify_segment(seg: &[u8], generation: Generation, physical_slot: u16) -> SegmentVerdict {
    let Some(seg_len) = SegmentLen::from_bytes(seg.len() as u64) else {
        return SegmentVerdict::Bad;
    };
    let stored = get_u64(seg, 0);
    if stored == 0 && is_all_zero(seg) {
        return SegmentVerdict::Unused;
    }
    let id = segment_check_id(generation, physical_slot);
    let expected = block_checksum(seg, id, true);
    let hdr = SegmentHeader::read(seg);
    let sane = magic_ok(seg)
        && usize::from(hdr.used) <= seg_len.payload_len()
        && hdr.flags & !segment_flags::SHADOW == 0
        && get_u16(seg, S_RESERVED) == 0;
    if expected == stored {
        return match hdr.physical_slot() {
            Some(slot) if sane && hdr.generation == generation && slot == physical_slot => {
                SegmentVerdict::Valid(hdr)
            }
            // Checksum ids repeat every 65536 generations; the header tells them apart.
            Some(slot) if sane && segment_check_id(hdr.generation, slot) == id => {
                SegmentVerdict::WrongPosition {
                    found_generation: hdr.generation,
                    found_slot: slot,
                }
            }
            // Sealed for one position while the header names another: no writer does that.
            _ => SegmentVerdict::Bad,
        };
    }
    let diff = expected ^ stored;
    if diff >> 32 == 0 && sane {
        let candidate = diff as u32 ^ id;
        if let Some(slot) = hdr.physical_slot() {
            if segment_check_id(hdr.generation, slot) == candidate {
                return SegmentVerdict::WrongPosition {
                    found_generation: hdr.generation,
                    found_slot: slot,
                };
            }
        }
    }
    match classify(expected, stored, (seg_len.bytes() * 8) as u32) {
        BlockDiff::StoredBit(bit) => SegmentVerdict::Correctable { bit },
        // Bits 0..64 are the stored checksum, not covered by it.
        BlockDiff::DataBit(bit) if bit >= 64 => SegmentVerdict::Correctable { bit },
        _ => SegmentVerdict::Bad,
    }
}

/// [`verify_segment`], flipping the bad bit back when the verdict is
/// [`SegmentVerdict::Correctable`]; returns the verdict found before the repair.
pub fn repair_segment(
    seg: &mut [u8],
    generation: Generation,
    physical_slot: u16,
) -> SegmentVerdict {
    let verdict = verify_segment(seg, generation, physical_slot);
    if let SegmentVerdict::Correctable { bit } = verdict {
        flip_bit(seg, bit);
    }
    verdict
}
