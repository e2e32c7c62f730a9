//! The transaction log of an instance: [`LogWriter`] appends records and makes them
//! durable (group commit, capacity writes, generation rolls, checkpoint file, circular
//! logging); [`LogReader`] / [`read_log`] read them back and find the end of the log
//! after a crash. Formats are those of `edbstress_format::log` (docs/format.md §6–7).
//!
//! # Positions
//!
//! A [`LogPosition`] is `(generation, segment, offset)` where `offset` counts from the
//! start of the 4096-byte segment, **header included**, exactly as the format crate's
//! `SegmentPacker::next_record_offset` and `RecordAssembler` report: the first record
//! of a segment starts at offset 32, a record's end is the offset just after its last
//! byte (at most 4096). Offsets below 32 are read as 32 (so `(1, 1, 0)`, the
//! position prepare writes into the checkpoint, is the first record of the log).
//!
//! - [`LogWriter::append`] returns the end of the last record appended;
//!   [`LogWriter::append_span`] also the start of the first one.
//! - [`LogWriter::current`] is where the next record will start (at or after the end of
//!   every appended record); [`LogWriter::durable`] the end of durable data: every
//!   record whose end is `<=` it is on stable storage.
//! - [`LogScanSummary::end_of_log`] is the end of the last complete record, or the
//!   start of the next generation when the file of that record was filled (where
//!   [`LogWriter::open`] continues).
//! - Records never span generations: one that does not fit the rest of a file starts
//!   in the next file (the rest is written as empty closed segments), so a record may
//!   be at most `(segments per file - 1) × 4060` bytes (1 035 300 for 1 MiB files).
//!
//! # Durability protocol
//!
//! *Durable* means written and `fdatasync`ed (with `O_DIRECT` by default); the writer
//! never reports a position durable before that, and after a failed write or sync it
//! stops acknowledging anything ([`crate::EngineError::ShutDown`]).
//!
//! Writes happen in rounds, one at a time. A committer in [`LogWriter::flush_to`]
//! whose position is not durable and that finds no round in progress **leads** the
//! next round itself, on its own thread (no hand-off to another thread); committers
//! arriving during a round wait for the round that will cover them, and when a round
//! ends it wakes its own waiters and one of the next round's, which leads it. The
//! flusher thread runs the rounds nobody waits for, when ESE writes its log buffer
//! without a commit waiting: when half of the buffer is ready (a capacity write) or an
//! append waits for space, when a generation's last segment is ready (a new
//! generation), and at shutdown — and, only if `LogConfig::lazy_flush_interval` is
//! set, when the oldest unwritten record is that old. A lazy commit alone writes
//! nothing: its records ride with the next of these, a durable commit, or the
//! write-ahead flush of a page write that needs them. Each round takes everything appended so far (group commit: every
//! waiter whose position it covers is released by one round), and whoever runs it
//! follows the same rules below; a failed round poisons the log for everyone, and an
//! abandoned writer starts no round and waits for the one in progress to end.
//!
//! The sectors of one write may reach the medium in any order and any subset
//! of them may be lost in a crash, so no write ever covers every durable copy of
//! acknowledged data. Per generation file, a round writes:
//!
//! 1. Before writing, the round **closes the partially filled tail segment**: it is
//!    padded with zeros to the full payload length (as any segment closed early) and
//!    the next record starts in the next segment. A round therefore writes only closed
//!    segments, each once, to slots that held nothing (zero-filled), in one write and
//!    `fdatasync` per generation file; no write ever covers a segment holding
//!    acknowledged records, so a torn or lost write can only lose the records it was
//!    writing, which nobody was told were durable. A small commit costs one 4 KiB
//!    segment (the log's write unit, and the direct-I/O alignment of 4 KiB-sector
//!    devices); the price is log space: each round starts a new segment.
//! 2. When a round fills a file, the next records go to the next generation (a roll).
//! 3. `durable` advances after each sync, to the start of the segment after the last
//!    one written (a write that fills its file before the roll; the round's last write
//!    together with the round's end, so a waiter wakes once, released or to lead); the
//!    generation hook has recorded a new generation before anything written into it
//!    is acknowledged.
//!
//! So a round costs one write and sync (two across a roll). With
//! `LogConfig::partial_tail_shadow` (ESE's partial-sector write) a round that ends
//! inside a segment does not close it: it writes it with a SHADOW copy in the next
//! slot, the next records continue in it, and the next round rewrites it first, each
//! copy's write durable before the other's (docs/format.md §6.3); `durable` then ends
//! inside that segment. Logs written by earlier versions may hold shadow copies too:
//! the reader and [`LogWriter::open`] handle them.
//!
//! All segments of one write carry the same write sequence; every write has a higher
//! one than the last (they increase across generations and reopenings). Closed segments
//! (payload full, or padded with zeros to the full length when closed early) are never
//! rewritten.
//!
//! **Rolling**: when the last slot of a file is written, the pre-created zero-filled
//! `E00tmp.log` (real zero writes after `fallocate`, synced, made in the background; made
//! synchronously if not ready) gets its header, is synced, renamed to the next
//! generation's name, and the directory is synced; then `E00.chk` is rewritten (copy 0,
//! sync, copy 1, sync) with the checkpoint (never beyond the durable end), and circular
//! logging deletes generations below both the checkpoint's generation and the retention
//! floor (only files whose header carries this stream's signature).
//!
//! **Running checksum** (`prev_generation_checksum` of a header): FNV-1a 64 over the
//! stored checksums (bytes 0..8) of the final segments in slots 1..n−1 of the previous
//! generation, in slot order, starting from the FNV offset basis XOR that generation's
//! own `prev_generation_checksum`; it chains every file to the whole history of the
//! stream. The reader checks it whenever it read the previous generation from slot 1.
//!
//! # Reopening after a crash
//!
//! [`read_log`] finds the end of the log; [`LogWriter::open`] reads the log from the
//! position it is given and refuses it unless it is that end (so a stale position
//! cannot make it overwrite valid log). At that position it closes
//! the segment holding it at that point (if anything follows, e.g. a partial record of
//! an interrupted write, or the segment is not yet closed, the truncated closed copy is
//! written to the shadow slot and synced, then to the real slot and synced), zeroes
//! every later slot of the file, and continues in the next segment. Stale data after
//! the end can therefore only be the remains of the one write that was interrupted,
//! which is what lets the reader tell a torn tail from damage in the middle (see
//! [`LogReader`]).

mod checkpoint;
mod config;
mod dir;
mod files;
mod open;
mod reader;
mod sequence;
mod writer;

pub use checkpoint::read_checkpoint;
pub use dir::{
    LogDirOwners, LogIdentity, create_initial_logs, is_log_file_name, is_our_log_file,
    log_dir_owners, remove_our_logs, replace_logs,
};
pub use edbstress_format::log::{LogPosition, LogRecord};
pub use sequence::{LogSequenceReport, verify_log_sequence};
pub use writer::LogCounters;
/// The log writer on its own, for the engine's tests and benches (feature
/// `test-internals`, which the engine's dev-dependency on itself turns on); other
/// crates write the log through an [`Instance`](crate::Instance).
#[cfg(feature = "test-internals")]
pub use {
    config::{DEFAULT_LOG_BUFFER_LEN, LogConfig},
    reader::{
        CorrectedSegment, LogEntry, LogReadOptions, LogReader, LogScan, LogScanSummary,
        check_log_reaches, read_log, read_log_with,
    },
    writer::{CheckpointBarrier, GenerationHook, GenerationRecord, LogWriter},
};
#[cfg(not(feature = "test-internals"))]
pub(crate) use {
    config::{DEFAULT_LOG_BUFFER_LEN, LogConfig},
    reader::{LogEntry, LogReadOptions, LogReader, LogScanSummary, check_log_reaches},
    writer::{GenerationHook, GenerationRecord, LogWriter},
};

/// The signatures that tie a log stream to its database: every log file header and
/// checkpoint copy carries both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogSignatures {
    /// Signature of the log stream.
    pub log_signature: u64,
    /// Signature of the database.
    pub db_signature: u64,
}
