//! Log records and their framing inside segment payloads.
//!
//! A segment payload is a sequence of fragments: `type u8, flags u8, len u16` and
//! `len` bytes of record body. A record that does not fit the rest of the segment is
//! split: its first fragment carries [`fragment_flags::FIRST`], its last
//! [`fragment_flags::LAST`] (a whole record carries both), and every fragment repeats
//! the record type. A fragment header never straddles segments: once fewer than 5
//! bytes are left (a header and one body byte) the segment is closed. Type 0 ends the
//! fragments of a segment early; so does the end of the used payload.

use super::{LogFormatError, LogPosition, SEGMENT_HEADER_LEN, SegmentLen};
use crate::Pgno;
use crate::bytes::{get_u16, get_u32, get_u64};

/// Length of a fragment header.
pub const FRAGMENT_HEADER_LEN: usize = 4;
/// Largest record body the packer writes and the assembler accepts.
pub const MAX_RECORD_BODY_LEN: usize = 1 << 20;

/// Fragment flag bits.
pub mod fragment_flags {
    /// The fragment starts a record.
    pub const FIRST: u8 = 1;
    /// The fragment ends a record.
    pub const LAST: u8 = 2;
}

/// Record type codes (the first byte of every fragment; 0 means "no more fragments in
/// this segment").
pub mod record_type {
    /// [`super::LogRecord::Begin`].
    pub const BEGIN: u8 = 1;
    /// [`super::LogRecord::Commit`].
    pub const COMMIT: u8 = 2;
    /// [`super::LogRecord::Rollback`].
    pub const ROLLBACK: u8 = 3;
    /// [`super::LogRecord::PageRedo`].
    pub const PAGE_REDO: u8 = 4;
    /// [`super::LogRecord::Shutdown`].
    pub const SHUTDOWN: u8 = 5;
    /// [`super::LogRecord::PageImage`].
    pub const PAGE_IMAGE: u8 = 6;
}

/// Fixed part of a page-redo body before the payload.
const PAGE_REDO_FIXED_LEN: usize = 4 + 8 + 8 + 8 + 1;

/// A log record.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LogRecord {
    /// A transaction starts. Body: `trx u64`.
    Begin {
        /// Transaction id.
        trx: u64,
    },
    /// A transaction commits. Body: `trx u64, lazy u8 (0 or 1)`.
    Commit {
        /// Transaction id.
        trx: u64,
        /// Lazy commit: the committer did not wait for the log flush.
        lazy: bool,
    },
    /// A transaction rolls back. Body: `trx u64`.
    Rollback {
        /// Transaction id.
        trx: u64,
    },
    /// A change to one page. Body: `pgno u32, dbtime_before u64, dbtime_after u64,
    /// trx u64, op u8, payload`.
    PageRedo {
        /// Page changed.
        pgno: Pgno,
        /// Page dbtime before the change.
        dbtime_before: u64,
        /// Page dbtime after the change.
        dbtime_after: u64,
        /// Transaction id.
        trx: u64,
        /// Operation code (defined by the engine).
        op: u8,
        /// Operation data (defined by the engine).
        payload: Vec<u8>,
    },
    /// Clean shutdown marker. Body: `last_dbtime u64`.
    Shutdown {
        /// Highest dbtime at shutdown.
        last_dbtime: u64,
    },
    /// The whole content of a page as it was on disk before a change made it dirty
    /// (torn-write protection): recovery restores a page whose write was torn from its
    /// first image in the replayed log and replays the changes after it. Body: `pgno u32, image` where
    /// `image` is a whole page, or empty for a page never written (all zero).
    PageImage {
        /// The page.
        pgno: Pgno,
        /// Its bytes (one page), or empty for a page that was never written.
        image: Vec<u8>,
    },
}

impl LogRecord {
    /// The record's type code ([`record_type`]).
    pub fn record_type(&self) -> u8 {
        match self {
            LogRecord::Begin { .. } => record_type::BEGIN,
            LogRecord::Commit { .. } => record_type::COMMIT,
            LogRecord::Rollback { .. } => record_type::ROLLBACK,
            LogRecord::PageRedo { .. } => record_type::PAGE_REDO,
            LogRecord::Shutdown { .. } => record_type::SHUTDOWN,
            LogRecord::PageImage { .. } => record_type::PAGE_IMAGE,
        }
    }

    /// Length of the encoded body.
    pub fn body_len(&self) -> usize {
        match self {
            LogRecord::Begin { .. } | LogRecord::Rollback { .. } | LogRecord::Shutdown { .. } => 8,
            LogRecord::Commit { .. } => 9,
            LogRecord::PageRedo { payload, .. } => PAGE_REDO_FIXED_LEN + payload.len(),
            LogRecord::PageImage { image, .. } => 4 + image.len(),
        }
    }

    /// Appends the record body (no type or length: the framing carries those).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.body_len());
        match self {
            LogRecord::Begin { trx } | LogRecord::Rollback { trx } => {
                out.extend_from_slice(&trx.to_le_bytes());
            }
            LogRecord::Commit { trx, lazy } => {
                out.extend_from_slice(&trx.to_le_bytes());
                out.push(u8::from(*lazy));
            }
            LogRecord::PageRedo {
                pgno,
                dbtime_before,
                dbtime_after,
                trx,
                op,
                payload,
            } => {
                out.extend_from_slice(&pgno.to_le_bytes());
                out.extend_from_slice(&dbtime_before.to_le_bytes());
                out.extend_from_slice(&dbtime_after.to_le_bytes());
                out.extend_from_slice(&trx.to_le_bytes());
                out.push(*op);
                out.extend_from_slice(payload);
            }
            LogRecord::Shutdown { last_dbtime } => {
                out.extend_from_slice(&last_dbtime.to_le_bytes());
            }
            LogRecord::PageImage { pgno, image } => {
                out.extend_from_slice(&pgno.to_le_bytes());
                out.extend_from_slice(image);
            }
        }
    }

    /// Decodes a record body of type `record_type`; every length is checked exactly.
    pub fn decode(record_type: u8, body: &[u8]) -> Result<LogRecord, LogFormatError> {
        let bad_len = || LogFormatError::BadRecordLength {
            record_type,
            len: body.len(),
        };
        let exact = |len: usize| {
            if body.len() == len {
                Ok(())
            } else {
                Err(bad_len())
            }
        };
        match record_type {
            record_type::BEGIN => {
                exact(8)?;
                Ok(LogRecord::Begin {
                    trx: get_u64(body, 0),
                })
            }
            record_type::COMMIT => {
                exact(9)?;
                let lazy = match body[8] {
                    0 => false,
                    1 => true,
                    _ => {
                        return Err(LogFormatError::BadRecordField {
                            record_type,
                            detail: "the lazy flag is neither 0 nor 1",
                        });
                    }
                };
                Ok(LogRecord::Commit {
                    trx: get_u64(body, 0),
                    lazy,
                })
            }
            record_type::ROLLBACK => {
                exact(8)?;
                Ok(LogRecord::Rollback {
                    trx: get_u64(body, 0),
                })
            }
            record_type::PAGE_REDO => {
                if body.len() < PAGE_REDO_FIXED_LEN {
                    return Err(bad_len());
                }
                Ok(LogRecord::PageRedo {
                    pgno: Pgno::new(get_u32(body, 0)),
                    dbtime_before: get_u64(body, 4),
                    dbtime_after: get_u64(body, 12),
                    trx: get_u64(body, 20),
                    op: body[28],
                    payload: body[PAGE_REDO_FIXED_LEN..].to_vec(),
                })
            }
            record_type::SHUTDOWN => {
                exact(8)?;
                Ok(LogRecord::Shutdown {
                    last_dbtime: get_u64(body, 0),
                })
            }
            record_type::PAGE_IMAGE => {
                if body.len() < 4 {
                    return Err(bad_len());
                }
                let image = &body[4..];
                // A page size is a power of two from 4 KiB to 32 KiB; the engine checks
                // that it is its own.
                if !image.is_empty() && crate::PageSize::from_bytes(image.len()).is_none() {
                    return Err(bad_len());
                }
                Ok(LogRecord::PageImage {
                    pgno: Pgno::new(get_u32(body, 0)),
                    image: image.to_vec(),
                })
            }
            other => Err(LogFormatError::UnknownRecordType(other)),
        }
    }
}

/// Packs records into segment payloads, fragmenting records across segments.
///
/// Records are appended to the pending payload of the current segment; each time a
/// segment's payload is full, `sink` receives it (at most the stream's
/// [`SegmentLen::payload_len`] bytes, to be written with [`super::encode_segment`]) and a new segment starts.
/// The partially filled tail is [`SegmentPacker::pending`]: the log writer writes it
/// (and its shadow) on a flush and keeps appending to it afterwards.
///
/// A record always starts in the pending segment, at payload offset
/// `pending().len()` (so at log position offset [`SegmentPacker::next_record_offset`]).
#[derive(Clone, Debug)]
pub struct SegmentPacker {
    payload: Vec<u8>,
    body: Vec<u8>,
    /// Payload bytes of a segment of the stream.
    room: usize,
}

impl Default for SegmentPacker {
    fn default() -> SegmentPacker {
        SegmentPacker::new()
    }
}

impl SegmentPacker {
    /// An empty packer at the start of a 4 KiB segment.
    pub fn new() -> SegmentPacker {
        SegmentPacker::with_segment_len(SegmentLen::Page4096)
    }

    /// An empty packer at the start of a segment of a stream of `len` segments.
    pub fn with_segment_len(len: SegmentLen) -> SegmentPacker {
        SegmentPacker {
            payload: Vec::with_capacity(len.payload_len()),
            body: Vec::new(),
            room: len.payload_len(),
        }
    }

    /// The payload of the current, not yet full, segment.
    pub fn pending(&self) -> &[u8] {
        &self.payload
    }

    /// Offset within the current segment (header included) where the next record
    /// will start.
    pub fn next_record_offset(&self) -> u16 {
        (SEGMENT_HEADER_LEN + self.payload.len()) as u16
    }

    /// Encodes `record` and appends it, handing every segment payload that fills up to
    /// `sink`. Fails (appending nothing) if the body exceeds [`MAX_RECORD_BODY_LEN`].
    pub fn push(
        &mut self,
        record: &LogRecord,
        sink: impl FnMut(&[u8]),
    ) -> Result<(), LogFormatError> {
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        record.encode(&mut body);
        let result = self.push_body(record.record_type(), &body, sink);
        self.body = body;
        result
    }

    fn push_body(
        &mut self,
        record_type: u8,
        body: &[u8],
        mut sink: impl FnMut(&[u8]),
    ) -> Result<(), LogFormatError> {
        if body.len() > MAX_RECORD_BODY_LEN {
            return Err(LogFormatError::RecordTooLarge {
                len: body.len(),
                limit: MAX_RECORD_BODY_LEN,
            });
        }
        let mut rest = body;
        let mut flags = fragment_flags::FIRST;
        loop {
            // The packer closes a segment before fewer than 5 bytes remain.
            let room = self.room - self.payload.len() - FRAGMENT_HEADER_LEN;
            let take = rest.len().min(room);
            if take == rest.len() {
                flags |= fragment_flags::LAST;
            }
            self.payload.push(record_type);
            self.payload.push(flags);
            self.payload.extend_from_slice(&(take as u16).to_le_bytes());
            self.payload.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.room - self.payload.len() <= FRAGMENT_HEADER_LEN {
                sink(&self.payload);
                self.payload.clear();
            }
            if flags & fragment_flags::LAST != 0 {
                return Ok(());
            }
            flags = 0;
        }
    }

    /// Ends the current segment early (e.g. before a log file switch): hands a
    /// non-empty pending payload to `sink` and starts a new segment.
    pub fn close_segment(&mut self, mut sink: impl FnMut(&[u8])) {
        if !self.payload.is_empty() {
            sink(&self.payload);
            self.payload.clear();
        }
    }

    /// Drops the pending payload.
    pub fn clear(&mut self) {
        self.payload.clear();
    }
}

/// A complete record produced by [`RecordAssembler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssembledRecord<'a> {
    /// The record type.
    pub record_type: u8,
    /// The record body (decode with [`LogRecord::decode`]).
    pub body: &'a [u8],
    /// Position of the record's first fragment header.
    pub start: LogPosition,
    /// Position just after the record's last fragment.
    pub end: LogPosition,
}

/// Reassembles records from segment payloads fed in log order.
#[derive(Clone, Debug, Default)]
pub struct RecordAssembler {
    body: Vec<u8>,
    record_type: u8,
    start: LogPosition,
    in_progress: bool,
}

impl RecordAssembler {
    /// An assembler expecting the start of a record.
    pub fn new() -> RecordAssembler {
        RecordAssembler::default()
    }

    /// Whether a record has been started but not finished (at the end of the log:
    /// a torn record, which recovery ignores).
    pub fn in_progress(&self) -> bool {
        self.in_progress
    }

    /// Forgets a partially assembled record.
    pub fn reset(&mut self) {
        self.in_progress = false;
        self.body.clear();
    }

    /// Parses the used payload of the segment at `segment` (its generation and
    /// logical index; the offset is ignored), calling `on_record` for every record
    /// completed in it, in order.
    ///
    /// On a broken fragment chain, the records completed before the break have been
    /// delivered, the error says where it broke, and the assembler is reset.
    pub fn push_segment(
        &mut self,
        segment: LogPosition,
        payload: &[u8],
        mut on_record: impl FnMut(AssembledRecord<'_>),
    ) -> Result<(), LogFormatError> {
        let result = self.parse(segment, payload, &mut on_record);
        if result.is_err() {
            self.reset();
        }
        result
    }

    fn parse(
        &mut self,
        segment: LogPosition,
        payload: &[u8],
        on_record: &mut impl FnMut(AssembledRecord<'_>),
    ) -> Result<(), LogFormatError> {
        let at = |offset: usize| LogPosition {
            offset: (SEGMENT_HEADER_LEN + offset).min(u16::MAX as usize) as u16,
            ..segment
        };
        let broken = |offset, detail| Err(LogFormatError::BrokenFragmentChain { offset, detail });
        let mut pos = 0;
        while payload.len() - pos >= FRAGMENT_HEADER_LEN {
            let fragment_type = payload[pos];
            if fragment_type == 0 {
                break;
            }
            let flags = payload[pos + 1];
            let len = usize::from(get_u16(payload, pos + 2));
            let start = pos;
            let data_start = pos + FRAGMENT_HEADER_LEN;
            let Some(data) = payload.get(data_start..data_start + len) else {
                return broken(start, "fragment extends past the used payload");
            };
            pos = data_start + len;
            if flags & !(fragment_flags::FIRST | fragment_flags::LAST) != 0 {
                return broken(start, "unknown fragment flags");
            }
            let first = flags & fragment_flags::FIRST != 0;
            let last = flags & fragment_flags::LAST != 0;
            if first == self.in_progress {
                return broken(
                    start,
                    if first {
                        "a record starts before the previous one ended"
                    } else {
                        "a continuation fragment without a record start"
                    },
                );
            }
            if !first && start != 0 {
                return broken(
                    start,
                    "a continuation fragment not at the start of a segment",
                );
            }
            if !first && fragment_type != self.record_type {
                return broken(start, "a continuation fragment of another record type");
            }
            if !last && payload.len() - pos > FRAGMENT_HEADER_LEN {
                return broken(
                    start,
                    "a record continues although the segment has room left",
                );
            }
            match (first, last) {
                (true, true) => on_record(AssembledRecord {
                    record_type: fragment_type,
                    body: data,
                    start: at(start),
                    end: at(pos),
                }),
                (true, false) => {
                    self.in_progress = true;
                    self.record_type = fragment_type;
                    self.start = at(start);
                    self.body.clear();
                    self.body.extend_from_slice(data);
                }
                (false, _) => {
                    if self.body.len() + data.len() > MAX_RECORD_BODY_LEN {
                        return Err(LogFormatError::RecordTooLarge {
                            len: self.body.len() + data.len(),
                            limit: MAX_RECORD_BODY_LEN,
                        });
                    }
                    self.body.extend_from_slice(data);
                    if last {
                        self.in_progress = false;
                        on_record(AssembledRecord {
                            record_type: self.record_type,
                            body: &self.body,
                            start: self.start,
                            end: at(pos),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
