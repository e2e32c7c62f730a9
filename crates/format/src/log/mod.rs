//! Transaction log formats: log positions, file naming, the log file header
//! (segment 0), data segments with their checksums and shadow copies, record framing
//! across segments, and the checkpoint file.
//!
//! A log file is [`DEFAULT_LOG_FILE_LEN`] bytes (configurable) of equal segments, 4096
//! or 512 bytes long ([`SegmentLen`]: a property of the log stream, recorded in every
//! file header). Segment 0 is the [`LogFileHeader`]; segments 1.. carry a
//! [`SegmentHeader`] and a payload of record fragments (see [`SegmentPacker`]).

mod checkpoint;
mod record;
mod segment;

use std::fmt;

use thiserror::Error;

use crate::Generation;

pub use checkpoint::{
    CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_LEN, CHECKPOINT_MAGIC, CheckpointRecord,
    CheckpointSelection, CheckpointState, select_checkpoint,
};
pub use record::{
    AssembledRecord, FRAGMENT_HEADER_LEN, LogRecord, MAX_RECORD_BODY_LEN, RecordAssembler,
    SegmentPacker, fragment_flags, record_type,
};
pub use segment::{
    LOG_FILE_MAGIC, LogFileHeader, MAX_LOG_FILE_LEN, SEGMENT_MAGIC, SegmentHeader, SegmentVerdict,
    encode_segment, repair_segment, seal_segment, segment_flags, verify_log_file_header,
    verify_segment,
};

/// Length of a segment of a 4 KiB log stream ([`SegmentLen::Page4096`], the default and
/// the longest); segment 0 of each file is the file header.
pub const SEGMENT_LEN: usize = 4096;
/// Default length of a log file (1 MiB: 256 segments).
pub const DEFAULT_LOG_FILE_LEN: usize = 1 << 20;
/// Length of the header at the start of every data segment.
pub const SEGMENT_HEADER_LEN: usize = 32;
/// Payload bytes per data segment of a 4 KiB log stream.
pub const SEGMENT_PAYLOAD_LEN: usize = SEGMENT_LEN - SEGMENT_HEADER_LEN;

/// The segment length of a log stream: the unit every log write is made of, its own
/// checksum and header in each. 4 KiB (ESE 2013 and later write 4 KiB log sectors) or
/// 512 bytes (ESE 2007/2010's log sectors). Recorded at offset 20 of every file header;
/// all files of a stream have the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SegmentLen {
    /// 512-byte segments.
    Sector512,
    /// 4096-byte segments.
    #[default]
    Page4096,
}

impl SegmentLen {
    /// Every supported length, shortest first.
    pub const ALL: [SegmentLen; 2] = [SegmentLen::Sector512, SegmentLen::Page4096];

    /// The length in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            SegmentLen::Sector512 => 512,
            SegmentLen::Page4096 => SEGMENT_LEN,
        }
    }

    /// Payload bytes per data segment (the length less the segment header).
    pub const fn payload_len(self) -> usize {
        self.bytes() - SEGMENT_HEADER_LEN
    }

    /// Largest log file: segment indices are `u16`, so 65536 segments.
    pub const fn max_file_len(self) -> usize {
        (u16::MAX as usize + 1) * self.bytes()
    }

    /// The length of `bytes` bytes, if it is a supported one.
    pub fn from_bytes(bytes: u64) -> Option<SegmentLen> {
        SegmentLen::ALL
            .into_iter()
            .find(|len| len.bytes() as u64 == bytes)
    }
}

impl fmt::Display for SegmentLen {
    /// "512 B" or "4096 B".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} B", self.bytes())
    }
}
/// Version of the log file and segment formats written. Version 2 adds the redo op
/// `BuildFromSplit` (a split logged with the split page's before image); records and
/// framing are otherwise those of version 1, which is still read.
pub const LOG_FORMAT_VERSION: u32 = 2;
/// Oldest log format version read.
pub const OLDEST_LOG_FORMAT_VERSION: u32 = 1;
/// Version of the checkpoint file format.
pub const CHECKPOINT_FORMAT_VERSION: u32 = 1;
/// Name of the pre-created, zero-filled next log file before it is renamed.
pub const NEXT_LOG_FILE_NAME: &str = "E00tmp.log";
/// Name of the checkpoint file.
pub const CHECKPOINT_FILE_NAME: &str = "E00.chk";

/// A position in the log stream: generation (log file), segment within the file and
/// byte offset within the segment. Ordered as the log is written, and so is
/// [`LogPosition::pack`]'s `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LogPosition {
    /// Log file generation.
    pub generation: Generation,
    /// Segment index within the file.
    pub segment: u16,
    /// Byte offset within the segment (including the segment header).
    pub offset: u16,
}

impl LogPosition {
    /// `generation << 32 | segment << 16 | offset`.
    pub const fn pack(self) -> u64 {
        (self.generation.get() as u64) << 32 | (self.segment as u64) << 16 | self.offset as u64
    }

    /// Inverse of [`LogPosition::pack`].
    pub const fn unpack(packed: u64) -> LogPosition {
        LogPosition {
            generation: Generation::new((packed >> 32) as u32),
            segment: (packed >> 16) as u16,
            offset: packed as u16,
        }
    }
}

impl fmt::Display for LogPosition {
    /// `generation:segment:offset` in hex, e.g. `0000001A:0003:0120`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:08X}:{:04X}:{:04X}",
            self.generation, self.segment, self.offset
        )
    }
}

/// File name of log generation `generation`: `E00` + 8 upper-case hex digits + `.log`.
pub fn log_file_name(generation: Generation) -> String {
    format!("E00{generation:08X}.log")
}

/// The generation of a log file name made by [`log_file_name`], or `None` for any
/// other name (including [`NEXT_LOG_FILE_NAME`]).
pub fn parse_log_file_name(name: &str) -> Option<Generation> {
    let hex = name.strip_prefix("E00")?.strip_suffix(".log")?;
    if hex.len() != 8
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b))
    {
        return None;
    }
    u32::from_str_radix(hex, 16).ok().map(Generation::new)
}

/// Checksum id of segment slot `slot` of generation `generation`:
/// `(generation << 16) ^ slot`, wrapping.
pub const fn segment_check_id(generation: Generation, slot: u16) -> u32 {
    (generation.get() << 16) ^ slot as u32
}

/// A log structure cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LogFormatError {
    /// The structure is all zero: never written.
    #[error("the {what} is all zero: it was never written")]
    Uninitialized {
        /// Which structure.
        what: &'static str,
    },
    /// The magic does not match.
    #[error("the {what} has no valid magic: this is not an edbstress {what} (wrong file?)")]
    BadMagic {
        /// Which structure.
        what: &'static str,
    },
    /// The checksum does not match.
    #[error("the {what} checksum does not match: it is damaged or torn; recovery cannot trust it")]
    BadChecksum {
        /// Which structure.
        what: &'static str,
    },
    /// Another format version.
    #[error(
        "log format version {found} is not supported (this build reads versions {} to {}); \
         use a matching edbstress release",
        OLDEST_LOG_FORMAT_VERSION,
        LOG_FORMAT_VERSION
    )]
    UnsupportedVersion {
        /// Version found.
        found: u32,
    },
    /// Another checkpoint file format version.
    #[error(
        "checkpoint file format version {found} is not supported (this build reads version \
         {}); use a matching edbstress release",
        CHECKPOINT_FORMAT_VERSION
    )]
    UnsupportedCheckpointVersion {
        /// Version found.
        found: u32,
    },
    /// A log file header of another generation.
    #[error(
        "log file holds generation {found:#x} where generation {expected:#x} was expected: \
         the file was renamed or copied over; restore the log sequence"
    )]
    WrongGeneration {
        /// Generation asked for.
        expected: Generation,
        /// Generation in the file.
        found: Generation,
    },
    /// Checksum correct but a field is impossible.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// Which structure.
        what: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A record type this build does not know.
    #[error("unknown log record type {0}; the log was written by a newer edbstress or is corrupt")]
    UnknownRecordType(u8),
    /// A record body of the wrong length for its type.
    #[error(
        "log record of type {record_type} has a {len}-byte body, which is impossible for that type"
    )]
    BadRecordLength {
        /// Record type.
        record_type: u8,
        /// Body length found.
        len: usize,
    },
    /// A record's fields hold an impossible value.
    #[error("log record of type {record_type} is invalid: {detail}")]
    BadRecordField {
        /// Record type.
        record_type: u8,
        /// What is wrong.
        detail: &'static str,
    },
    /// The fragments of a record do not chain up.
    #[error(
        "broken log record fragment chain at payload offset {offset}: {detail}; the log \
         is damaged at this point"
    )]
    BrokenFragmentChain {
        /// Byte offset in the segment payload.
        offset: usize,
        /// What is wrong.
        detail: &'static str,
    },
    /// A record larger than [`MAX_RECORD_BODY_LEN`].
    #[error("log record body of {len} bytes exceeds the limit of {limit} bytes")]
    RecordTooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        limit: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_pack_in_log_order() {
        let a = LogPosition {
            generation: Generation::new(1),
            segment: 0xFFFF,
            offset: 0xFFFF,
        };
        let b = LogPosition {
            generation: Generation::new(2),
            segment: 0,
            offset: 0,
        };
        assert!(a < b && a.pack() < b.pack());
        assert_eq!(LogPosition::unpack(a.pack()), a);
        assert_eq!(b.pack(), 2 << 32);
        assert_eq!(a.to_string(), "00000001:FFFF:FFFF");
    }

    #[test]
    fn file_names() {
        // ESE style: "E00" and 8 hex digits.
        assert_eq!(log_file_name(Generation::new(0x1A)), "E000000001A.log");
        assert_eq!(
            parse_log_file_name("E000000001A.log"),
            Some(Generation::new(0x1A))
        );
        assert_eq!(
            parse_log_file_name(&log_file_name(Generation::MAX)),
            Some(Generation::MAX)
        );
        assert_eq!(parse_log_file_name(NEXT_LOG_FILE_NAME), None);
        assert_eq!(parse_log_file_name(CHECKPOINT_FILE_NAME), None);
        assert_eq!(parse_log_file_name("E000000001a.log"), None);
        assert_eq!(parse_log_file_name("E00+000001A.log"), None);
        assert_eq!(parse_log_file_name("E0000000001A.log"), None);
    }

    #[test]
    fn check_ids_mix_generation_and_slot() {
        assert_eq!(segment_check_id(Generation::new(1), 2), 0x0001_0002);
        assert_eq!(
            segment_check_id(Generation::new(0x1234_5678), 0xFFFF),
            0x5678_FFFF
        );
    }
}
