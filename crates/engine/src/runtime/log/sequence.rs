//! Verifying a log directory as recovery would read it (`edbstress checksum`): the
//! generations must be consecutive files of one log stream, each filled before the
//! next begins, and the log must cover what its database requires — the checkpoint,
//! the newest generation the database header records as written (`log_required`), and
//! for a cleanly shut down database, its recorded end of the log. Segment checksums
//! alone cannot see a missing middle file, a file of another instance, a truncated
//! file or a zeroed stretch in the middle; the reader's chain rules do.

use std::path::Path;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::header::{DatabaseHeader, DbState};
use edbstress_format::log::{LogFileHeader, LogPosition, SEGMENT_LEN};
use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, AlignedBuf, BackendKind, DataFile, IoClass, IoMode};
use serde::Serialize;

use super::files::{FIRST_RECORD_OFFSET, generation_path, list_generations};
use super::reader::{LogReadOptions, LogReader, check_log_reaches};
use super::{LogSignatures, read_checkpoint};
use crate::error::EngineError;

/// What reading a log directory from its oldest generation to its end found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LogSequenceReport {
    /// Oldest and newest generation files present (0 when none).
    pub first_generation: Generation,
    /// Newest generation file present.
    pub last_generation: Generation,
    /// Records read.
    pub records: u64,
    /// Where the log ends (empty when it could not be read to the end).
    pub end_of_log: String,
    /// The checkpoint recovery would start from (from `E00.chk`, else the database
    /// header), empty when neither is readable.
    pub checkpoint: String,
    /// What breaks the sequence or what the database requires of it; empty when the
    /// log is whole.
    pub problems: Vec<String>,
}

/// Reads the log in `dir` as recovery would, from its oldest generation to its end,
/// and checks it against `owner`, the header of the database it belongs to (when that
/// database is known). Problems are collected, not returned as errors; an `Err` is an
/// I/O failure.
pub fn verify_log_sequence(
    dir: &Path,
    io_mode: IoMode,
    owner: Option<&DatabaseHeader>,
) -> Result<LogSequenceReport, EngineError> {
    let mut report = LogSequenceReport::default();
    let generations = list_generations(dir)?;
    let (Some(&first), Some(&last)) = (generations.first(), generations.last()) else {
        if let Some(h) = owner.filter(|h| h.state == DbState::DirtyNeedsRecovery) {
            report.problems.push(format!(
                "no log file, but the database needs recovery from {}",
                h.checkpoint
            ));
        }
        return Ok(report);
    };
    report.first_generation = first;
    report.last_generation = last;

    let checkpoint = read_checkpoint(dir, io_mode).ok();
    let signatures = match (owner, &checkpoint) {
        (Some(h), _) => LogSignatures {
            log_signature: h.log_signature,
            db_signature: h.signature,
        },
        (None, Some(c)) => LogSignatures {
            log_signature: c.log_signature,
            db_signature: c.db_signature,
        },
        (None, None) => match first_file_signatures(dir, first, io_mode)? {
            Some(s) => s,
            None => {
                report.problems.push(format!(
                    "{} has no valid file header: the log stream cannot be identified",
                    generation_path(dir, first).display()
                ));
                return Ok(report);
            }
        },
    };
    if let Some(c) = &checkpoint {
        if c.db_signature != signatures.db_signature || c.log_signature != signatures.log_signature
        {
            report.problems.push(format!(
                "E00.chk belongs to another database (database signature {:#018x}, this log's is \
                 {:#018x})",
                c.db_signature, signatures.db_signature
            ));
        }
    }
    // The checkpoint recovery would use: the file's, else the header's (its fallback).
    let start = match (&checkpoint, owner) {
        (Some(c), _) => Some(c.checkpoint),
        (None, Some(h)) if h.state == DbState::DirtyNeedsRecovery => Some(h.checkpoint),
        _ => None,
    };
    report.checkpoint = start.map(|p| p.to_string()).unwrap_or_default();

    let options = LogReadOptions {
        class: IoClass::LogRead,
        instance: owner.map_or(InstanceId::default(), |h| h.instance),
        io_mode,
        backend: BackendKind::Auto,
    };
    let from = LogPosition {
        generation: first,
        segment: 1,
        offset: FIRST_RECORD_OFFSET,
    };
    let summary = match read_to_end(dir, from, signatures, &options, &mut report.records) {
        Ok(summary) => summary,
        Err(e) if e.is_integrity() => {
            report.problems.push(e.to_string());
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let end = summary.end_of_log;
    report.end_of_log = end.to_string();

    if let Some(start) = start {
        if start.generation < first {
            report.problems.push(format!(
                "the checkpoint {start} is in generation {:#x}, whose file is missing (the \
                 oldest present is {first:#x}): recovery cannot start",
                start.generation
            ));
        } else if start > end {
            report.problems.push(format!(
                "the checkpoint {start} lies beyond the end of the log at {end}: log data \
                 the checkpoint covers was lost"
            ));
        }
    }
    if let Some(h) = owner {
        match h.state {
            DbState::DirtyNeedsRecovery => {
                let from = start.unwrap_or(h.checkpoint);
                if let Err(e) = check_log_reaches(dir, h.log_required, from, Some(&summary)) {
                    report.problems.push(e.to_string());
                }
            }
            DbState::Clean if h.checkpoint.generation >= first => {
                // Recorded as the writer's next position; the reader reports the start
                // of a segment as its first record offset.
                let clean_end = LogPosition {
                    generation: h.checkpoint.generation,
                    segment: h.checkpoint.segment.max(1),
                    offset: h.checkpoint.offset.max(FIRST_RECORD_OFFSET),
                };
                if end < clean_end {
                    report.problems.push(format!(
                        "the log ends at {end}, before the position {} the database recorded at \
                         its clean shutdown: log data was lost",
                        h.checkpoint
                    ));
                } else if end > clean_end {
                    report.problems.push(format!(
                        "the log continues to {end}, past the position {} the database recorded \
                         at its clean shutdown: the database is older than its log (restored \
                         from a copy?)",
                        h.checkpoint
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(report)
}

fn read_to_end(
    dir: &Path,
    from: LogPosition,
    signatures: LogSignatures,
    options: &LogReadOptions,
    records: &mut u64,
) -> Result<super::LogScanSummary, EngineError> {
    let mut reader = LogReader::open(dir, from, signatures, options)?;
    while reader.next_record()?.is_some() {
        *records += 1;
    }
    reader
        .summary()
        .cloned()
        .ok_or_else(|| EngineError::Invalid("log reader finished without a summary (a bug)".into()))
}

/// The signatures in the file header of generation `generation`, if it is valid.
fn first_file_signatures(
    dir: &Path,
    generation: Generation,
    io_mode: IoMode,
) -> Result<Option<LogSignatures>, EngineError> {
    let file = DataFile::open(generation_path(dir, generation), io_mode, Access::ReadOnly)?;
    let mut seg = AlignedBuf::new(SEGMENT_LEN);
    let read = FileIo::offline(&file)?.read(IoClass::HeaderRead, &mut seg, SEGMENT_LEN, 0)?;
    let head = LogFileHeader::bytes_in(&seg[..read]);
    Ok(LogFileHeader::decode(head).ok().map(|h| LogSignatures {
        log_signature: h.log_signature,
        db_signature: h.db_signature,
    }))
}
