//! The log reader: records in order from a position to the end of the log, with the
//! end of the log classified as clean or torn, and damage before the end reported.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::log::{LogPosition, LogRecord, RecordAssembler, SegmentHeader, SegmentLen};
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoMode, IoOp, IoRequest,
    IoStats, open_backend,
};

use super::LogSignatures;
use super::files::{
    FIRST_RECORD_OFFSET, RunningChecksum, SlotState, choose_copy, classify_slot, corrupt,
    decode_file_header, generation_path, header_read_len, is_closed, leading_continuation,
    list_generations, unfinished_record_offset,
};
use crate::error::EngineError;

/// Bytes read per I/O (256 KiB, like ESE's log reads): 64 segments of 4 KiB, 512 of
/// 512 bytes.
const WINDOW_BYTES: usize = 256 << 10;

/// One record read from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// Position of the record's first fragment header.
    pub start: LogPosition,
    /// Position just after its last fragment.
    pub end: LogPosition,
    /// The record.
    pub record: LogRecord,
}

/// How a log is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogReadOptions {
    /// Class the reads are accounted to (`LogRead`, `RecoveryRead`, `ReplicationRead`).
    pub class: IoClass,
    /// Instance the reads are accounted to.
    pub instance: InstanceId,
    /// Direct or buffered reads.
    pub io_mode: IoMode,
    /// The io crate backend that carries, times and counts the reads (`--backend`).
    pub backend: BackendKind,
}

impl LogReadOptions {
    /// Direct reads of instance 0 accounted to `class`, through the `auto` backend.
    #[cfg(feature = "test-internals")]
    pub fn new(class: IoClass) -> LogReadOptions {
        LogReadOptions {
            class,
            instance: InstanceId::default(),
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
        }
    }
}

/// A segment that had one flipped bit, corrected in memory while reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorrectedSegment {
    /// The log file.
    pub file: PathBuf,
    /// The slot in the file.
    pub slot: u16,
    /// Index of the flipped bit within the segment.
    pub bit: u32,
}

/// What a completed read found at the end of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogScanSummary {
    /// Where the writer continues: just after the last complete record (or the start
    /// position, normalised, when no record ends after it) — or, when the log filled
    /// the file of that record (its last segments closed padding), the start of the
    /// next generation. Pass it to [`super::LogWriter::open`].
    pub end_of_log: LogPosition,
    /// Generation files opened.
    pub generations_read: u32,
    /// Segments that formed the log (their chosen copies).
    pub segments_read: u64,
    /// Bytes read from log files.
    pub bytes_read: u64,
    /// Records returned (those starting at or after the start position).
    pub records_read: u64,
    /// The log ends in a torn or incomplete write: damaged segments, data of an
    /// interrupted write after the end, or a trailing partial record. Normal after a
    /// crash; the records of that write were never acknowledged as durable.
    pub torn_tail: bool,
    /// Start of the trailing partial record that was dropped, if any.
    pub dropped_record: Option<LogPosition>,
    /// Damaged slots after the end of the log.
    pub damaged_after_end: u64,
    /// Valid segments after the end of the log (of the interrupted write).
    pub segments_after_end: u64,
    /// Segments read with one flipped bit (corrected in memory; the file is unchanged).
    pub corrected: Vec<CorrectedSegment>,
    /// Highest write sequence of the segments that formed the log.
    pub max_write_seq: u64,
    /// Generation of the last segment holding log data that was read (the segment
    /// just before the start position counts), 0 when none: compared with the
    /// database header's `log_required` to detect a lost newest generation.
    pub last_data_generation: Generation,
}

/// Checks that a log read from `from` (whose reading ended with `summary`, or that is
/// about to be read when `summary` is `None`) reaches generation `log_required`, the
/// newest generation the database header records as holding a durable write
/// (docs/format.md, "log required"). A log that ends before it, or holds nothing in
/// it, lost writes the storage had acknowledged: [`EngineError::LostLog`].
pub fn check_log_reaches(
    dir: &Path,
    log_required: Generation,
    from: LogPosition,
    summary: Option<&LogScanSummary>,
) -> Result<(), EngineError> {
    if log_required == Generation::NONE || log_required < from.generation {
        return Ok(());
    }
    let file = generation_path(dir, log_required);
    let present = file.exists();
    let end = match summary {
        Some(s) if s.last_data_generation >= log_required => return Ok(()),
        Some(s) => format!("the log ends at {}", s.end_of_log),
        None if present => return Ok(()),
        None => {
            let newest = list_generations(dir)?.last().copied();
            newest.map_or("no log generation is present".to_string(), |g| {
                format!("the newest log generation present is {g:#x}")
            })
        }
    };
    let what = if present {
        format!(
            "{} holds no log data, but the database's header records a durable write in \
             generation {log_required:#x}; {end}",
            file.display()
        )
    } else {
        format!(
            "{} is missing, but the database's header records a durable write in generation \
             {log_required:#x}; {end}",
            file.display()
        )
    };
    Err(EngineError::LostLog {
        file,
        generation: log_required,
        what,
    })
}

/// A whole log read by [`read_log`] (the engine's tests: feature `test-internals`).
#[cfg(feature = "test-internals")]
#[derive(Clone, Debug)]
pub struct LogScan {
    /// The records, in log order.
    pub records: Vec<LogEntry>,
    /// The end of the log and what was found there.
    pub summary: LogScanSummary,
    /// The reads, accounted to the requested class.
    pub io: IoStats,
}

/// Reads the log in `dir` from `from` to its end and collects every record. See
/// [`LogReader`] to iterate lazily instead (bounded memory).
#[cfg(feature = "test-internals")]
pub fn read_log(
    dir: &Path,
    from: LogPosition,
    signatures: LogSignatures,
    class: IoClass,
) -> Result<LogScan, EngineError> {
    read_log_with(dir, from, signatures, &LogReadOptions::new(class))
}

/// [`read_log`] with explicit options.
#[cfg(feature = "test-internals")]
pub fn read_log_with(
    dir: &Path,
    from: LogPosition,
    signatures: LogSignatures,
    options: &LogReadOptions,
) -> Result<LogScan, EngineError> {
    let mut reader = LogReader::open(dir, from, signatures, options)?;
    let mut records = Vec::new();
    while let Some(entry) = reader.next_record()? {
        records.push(entry);
    }
    let summary = reader.summary().cloned().ok_or_else(|| {
        EngineError::Invalid("log reader finished without a summary (a bug)".into())
    })?;
    Ok(LogScan {
        records,
        summary,
        io: reader.stats().clone(),
    })
}

/// The generation file being read, through a window of segments.
struct Cursor {
    generation: Generation,
    path: PathBuf,
    /// `file` as registered with the reader's backend.
    file_id: FileId,
    segments: u32,
    /// The file's segment length (its header's).
    seg_len: SegmentLen,
    /// Segments per window read.
    window_segments: u32,
    window: AlignedBuf,
    window_first: u32,
    window_count: u32,
    /// Classification of each window slot, made once: a slot is looked at as the
    /// shadow candidate of one segment and as the next segment, and a bit corrected in
    /// memory the first time must still be reported the second.
    states: Vec<Option<SlotState>>,
    /// Next logical segment of the log.
    next: u32,
    /// Running checksum, if this generation is read from slot 1.
    fold: Option<RunningChecksum>,
    /// The last segment of the log in this file: index, and whether the log may
    /// continue after it (closed and read from its own slot).
    last: Option<(u32, bool)>,
}

/// Reads log records lazily, in order, from a position to the end of the log.
///
/// Holds one 256 KiB window of segments, the record being assembled and the records
/// of the current segment: memory does not grow with the log. Iterate with
/// [`LogReader::next_record`] (or as an `Iterator`); once it returns `Ok(None)`,
/// [`LogReader::summary`] reports the end of the log.
///
/// Rules: of a slot and its shadow the valid copy with the higher write sequence is
/// used (a single flipped bit is corrected in memory); the log ends at the first
/// segment without a valid copy, after a partially filled segment or a shadow copy,
/// or at the end of the last generation. Data after that end is accepted only as the
/// remains of one interrupted write (all of one write sequence, newer than the log);
/// anything else — valid data of several writes after a damaged segment, data after a
/// partially filled segment, a later generation file, a missing generation in the
/// middle, a broken record chain — is a [`EngineError::CorruptLog`] naming the file
/// and segment. Files of another log stream give [`EngineError::Mismatch`].
pub struct LogReader {
    dir: PathBuf,
    signatures: LogSignatures,
    options: LogReadOptions,
    from: LogPosition,
    /// Generations with a file, ascending.
    present: Vec<Generation>,
    cursor: Option<Cursor>,
    assembler: RecordAssembler,
    /// The next segment fed is the first one.
    first_segment: bool,
    /// Inside a record that began before the start position.
    skipping: bool,
    /// The segment whose leading continuation was not fed to the assembler, and its
    /// length.
    skipped: Option<(Generation, u16, u16)>,
    ready: VecDeque<LogEntry>,
    last_complete_end: Option<LogPosition>,
    /// Start of the generation after the last one read through its final slot: the
    /// writer had closed every segment of that file (padding the rest once a record no
    /// longer fitted), so the log continues there even when no record was completed in
    /// it yet.
    next_generation_start: Option<LogPosition>,
    unfinished_start: Option<LogPosition>,
    summary: LogScanSummary,
    chain_max_seq: u64,
    /// The unused copy of the last segment is damaged (a torn tail write).
    tail_copy_damaged: bool,
    finished: bool,
    failed: bool,
    /// Carries, times and counts the reads (one at a time); the generation being read
    /// is registered with it as `registered`.
    io: Box<dyn IoBackend>,
    registered: Option<FileId>,
}

impl LogReader {
    /// Opens the log in `dir` for reading from `from` (an offset below the first
    /// record offset means the start of the segment). Checks that the generation
    /// holding `from` exists (unless `from` is the start of a generation after the
    /// last one, which the writer would create: then the log is empty there).
    pub fn open(
        dir: &Path,
        from: LogPosition,
        signatures: LogSignatures,
        options: &LogReadOptions,
    ) -> Result<LogReader, EngineError> {
        if from.generation == Generation::NONE {
            return Err(EngineError::Invalid(format!(
                "log position {from} is impossible: generations start at 1"
            )));
        }
        let from = LogPosition {
            generation: from.generation,
            segment: from.segment.max(1),
            offset: from.offset.max(FIRST_RECORD_OFFSET),
        };
        let present = list_generations(dir)?;
        let mut reader = LogReader {
            dir: dir.to_path_buf(),
            signatures,
            options: *options,
            from,
            present,
            cursor: None,
            assembler: RecordAssembler::new(),
            first_segment: true,
            skipping: false,
            skipped: None,
            ready: VecDeque::new(),
            last_complete_end: None,
            next_generation_start: None,
            unfinished_start: None,
            summary: LogScanSummary {
                end_of_log: from,
                generations_read: 0,
                segments_read: 0,
                bytes_read: 0,
                records_read: 0,
                torn_tail: false,
                dropped_record: None,
                damaged_after_end: 0,
                segments_after_end: 0,
                corrected: Vec::new(),
                max_write_seq: 0,
                last_data_generation: Generation::NONE,
            },
            chain_max_seq: 0,
            tail_copy_damaged: false,
            finished: false,
            failed: false,
            io: open_backend(options.backend, 1)?,
            registered: None,
        };
        let g = from.generation;
        if !reader.present.contains(&g) {
            let later = reader.present.iter().any(|&x| x > g);
            if from.segment == 1 && from.offset == FIRST_RECORD_OFFSET && !later {
                reader.finish(false)?;
                return Ok(reader);
            }
            return Err(corrupt(
                &generation_path(dir, g),
                0,
                format!("the log file holding the start position {from} is missing"),
            ));
        }
        let cursor = reader.open_generation(g, None)?;
        if u32::from(from.segment) >= cursor.segments {
            return Err(EngineError::Invalid(format!(
                "log position {from} is past the last segment of {} ({} segments)",
                cursor.path.display(),
                cursor.segments
            )));
        }
        let mut cursor = cursor;
        cursor.next = u32::from(from.segment);
        if from.segment != 1 {
            cursor.fold = None;
            // A start at a segment boundary follows a closed segment: that one holds
            // the generation's data before the start.
            let before = u32::from(from.segment) - 1;
            reader.ensure_window(&mut cursor, before, 1)?;
            if matches!(slot_state(&mut cursor, before), SlotState::Valid { .. }) {
                reader.summary.last_data_generation = g;
            }
        }
        reader.cursor = Some(cursor);
        Ok(reader)
    }

    /// The next record starting at or after the start position, `Ok(None)` at the end
    /// of the log.
    pub fn next_record(&mut self) -> Result<Option<LogEntry>, EngineError> {
        if self.failed {
            return Err(EngineError::Invalid(
                "the log reader stopped at an earlier error".into(),
            ));
        }
        loop {
            if let Some(entry) = self.ready.pop_front() {
                return Ok(Some(entry));
            }
            if self.finished {
                return Ok(None);
            }
            if let Err(e) = self.advance() {
                self.failed = true;
                return Err(e);
            }
        }
    }

    /// What was found at the end of the log; `None` until the end was reached.
    pub fn summary(&self) -> Option<&LogScanSummary> {
        self.finished.then_some(&self.summary)
    }

    /// The reads so far, accounted to the options' class and instance.
    pub fn stats(&self) -> &IoStats {
        self.io.stats()
    }

    fn open_generation(
        &mut self,
        generation: Generation,
        expected_prev: Option<u64>,
    ) -> Result<Cursor, EngineError> {
        let path = generation_path(&self.dir, generation);
        let file = DataFile::open(&path, self.options.io_mode, Access::ReadOnly)?;
        // The previous generation is read no more: one descriptor held at a time.
        if let Some(previous) = self.registered.take() {
            self.io.unregister(previous)?;
        }
        let file_id = self.io.register(&file)?;
        self.registered = Some(file_id);
        let window = AlignedBuf::try_new(WINDOW_BYTES)?;
        let head = header_read_len(file.len()?);
        let (window, read) = self.read_window(file_id, &path, window, head, 0);
        read?;
        let header = decode_file_header(&window[..head], &path, generation, self.signatures)?;
        let seg_len = header.segment_length();
        let window_segments = (WINDOW_BYTES / seg_len.bytes()) as u32;
        if let Some(expected) = expected_prev {
            if header.prev_generation_checksum != expected {
                return Err(corrupt(
                    &path,
                    0,
                    format!(
                        "its running checksum of generation {:#x} does not match that \
                         generation's segments: the files are not consecutive generations of \
                         one log (a file was replaced or restored from elsewhere)",
                        generation.prev().unwrap_or(Generation::NONE)
                    ),
                ));
            }
        }
        let segments = header.segment_count() as u32;
        let actual = file.len()?;
        if actual < u64::from(header.file_len) {
            return Err(corrupt(
                &path,
                (actual / seg_len.bytes() as u64) as u32,
                format!(
                    "the file is {actual} bytes long, its header says {}: it was truncated",
                    header.file_len
                ),
            ));
        }
        self.summary.generations_read += 1;
        // Write sequences are compared within a generation (a reopened writer may
        // restart them lower in a new file).
        self.chain_max_seq = 0;
        Ok(Cursor {
            generation,
            path,
            file_id,
            segments,
            seg_len,
            window_segments,
            window,
            window_first: 0,
            window_count: 1,
            states: vec![None; window_segments as usize],
            next: 1,
            fold: Some(RunningChecksum::seeded(header.prev_generation_checksum)),
            last: None,
        })
    }

    /// Reads `window[..len]` at `offset` of the registered `file` through the reader's
    /// backend, which times and counts it (the options' class and instance). Gives the
    /// window back (a new, empty one if the backend failed with it) with the outcome;
    /// a short read is continued from where it stopped.
    fn read_window(
        &mut self,
        file: FileId,
        path: &Path,
        window: AlignedBuf,
        len: usize,
        offset: u64,
    ) -> (AlignedBuf, Result<(), EngineError>) {
        let mut window = window;
        let mut done = 0;
        while done < len {
            let part = len - done;
            // The first request reads into the window itself; a continuation into a
            // buffer of its own, copied over.
            let buf = if done == 0 {
                std::mem::take(&mut window)
            } else {
                match AlignedBuf::try_new(part) {
                    Ok(buf) => buf,
                    Err(e) => return (window, Err(e.into())),
                }
            };
            let at = offset + done as u64;
            let request = IoRequest {
                file,
                op: IoOp::Read,
                offset: at,
                buf,
                len: part,
                class: self.options.class,
                instance: self.options.instance.get(),
                tag: 0,
            };
            let mut completions = Vec::with_capacity(1);
            let waited = self
                .io
                .submit(request)
                .and_then(|()| self.io.wait(1, &mut completions));
            let completion = match (waited, completions.pop()) {
                (Ok(_), Some(completion)) => completion,
                (Err(e), _) => return (window, Err(e.into())),
                (Ok(_), None) => {
                    return (
                        window,
                        Err(EngineError::Invalid(
                            "the log reader's backend returned no completion (a bug)".into(),
                        )),
                    );
                }
            };
            if done == 0 {
                window = completion.buf;
            } else if let Ok(n) = completion.result {
                window[done..done + n].copy_from_slice(&completion.buf[..n]);
            }
            let n = match completion.result {
                Ok(0) => Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the file ends before byte {}", offset + len as u64),
                )),
                Ok(n) => Ok(n.min(part)),
                Err(e) => Err(e),
            };
            match n {
                Ok(n) => done += n,
                Err(source) => {
                    let error = edbstress_io::IoError::Io {
                        path: path.to_path_buf(),
                        op: "read",
                        offset: at,
                        source,
                    };
                    return (window, Err(error.into()));
                }
            }
        }
        self.summary.bytes_read += len as u64;
        (window, Ok(()))
    }

    /// Makes slots `first..first + count` of the cursor's file available in its window.
    fn ensure_window(
        &mut self,
        cursor: &mut Cursor,
        first: u32,
        count: u32,
    ) -> Result<(), EngineError> {
        if first >= cursor.window_first
            && first + count <= cursor.window_first + cursor.window_count
        {
            return Ok(());
        }
        let seg = cursor.seg_len.bytes();
        let n = cursor.window_segments.min(cursor.segments - first);
        let len = n as usize * seg;
        let window = std::mem::take(&mut cursor.window);
        let offset = u64::from(first) * seg as u64;
        let (window, result) = self.read_window(cursor.file_id, &cursor.path, window, len, offset);
        cursor.window = window;
        result?;
        cursor.window_first = first;
        cursor.window_count = n;
        cursor.states.fill(None);
        Ok(())
    }

    /// Reads one segment of the log, or moves to the next generation, or finishes.
    fn advance(&mut self) -> Result<(), EngineError> {
        let Some(mut cursor) = self.cursor.take() else {
            return self.finish(false);
        };
        let result = self.advance_in(&mut cursor);
        if !self.finished && self.cursor.is_none() && result.is_ok() {
            self.cursor = Some(cursor);
        }
        result
    }

    fn advance_in(&mut self, cursor: &mut Cursor) -> Result<(), EngineError> {
        let n = cursor.segments;
        let k = cursor.next;
        if k >= n {
            return self.next_generation(cursor);
        }
        let has_shadow_slot = k + 1 < n;
        self.ensure_window(cursor, k, if has_shadow_slot { 2 } else { 1 })?;
        let real = slot_state(cursor, k);
        let shadow = has_shadow_slot.then(|| slot_state(cursor, k + 1));
        let Some((slot, header, corrected)) = choose_copy(real, shadow, k as u16) else {
            return self.end_in_generation(cursor, k);
        };
        if let Some(bit) = corrected {
            self.summary.corrected.push(CorrectedSegment {
                file: cursor.path.clone(),
                slot,
                bit,
            });
        }
        let from_own_slot = u32::from(slot) == k;
        // The other copy of the last segment damaged: the last write was torn.
        let other = if from_own_slot { shadow } else { Some(real) };
        let closed = is_closed(header.used, cursor.seg_len);
        if !(from_own_slot && closed) && other == Some(SlotState::Damaged) {
            self.tail_copy_damaged = true;
        }
        let seg = slot_mut(cursor, u32::from(slot)).to_vec();
        match (&mut cursor.fold, from_own_slot) {
            (Some(fold), true) => fold.add_segment(&seg),
            (fold, _) => *fold = None,
        }
        self.chain_max_seq = self.chain_max_seq.max(header.write_seq);
        self.summary.max_write_seq = self.summary.max_write_seq.max(header.write_seq);
        self.summary.segments_read += 1;
        self.summary.last_data_generation = cursor.generation;
        self.feed(cursor, k as u16, &header, &seg)?;
        cursor.next = k + 1;
        let continues = from_own_slot && closed;
        cursor.last = Some((k, continues));
        if !continues {
            return self.end_in_generation(cursor, k + 1);
        }
        Ok(())
    }

    /// Parses one chosen segment and queues the records that end in it.
    fn feed(
        &mut self,
        cursor: &Cursor,
        k: u16,
        header: &SegmentHeader,
        seg: &[u8],
    ) -> Result<(), EngineError> {
        let payload = header.payload(seg);
        let generation = cursor.generation;
        let at = |offset: usize| LogPosition {
            generation,
            segment: k,
            offset: FIRST_RECORD_OFFSET + offset as u16,
        };
        let mut skip = 0;
        if self.first_segment || self.skipping {
            let leading = leading_continuation(payload)
                .map_err(|what| corrupt(&cursor.path, u32::from(k), what))?;
            match leading {
                Some((end, last)) => {
                    skip = end;
                    self.skipping = !last;
                    if last {
                        self.last_complete_end = Some(at(end));
                    }
                }
                None if self.skipping => {
                    return Err(corrupt(
                        &cursor.path,
                        u32::from(k),
                        "a record continues into this segment, but it starts with a new record",
                    ));
                }
                None => {}
            }
            self.first_segment = false;
            if self.skipping {
                return Ok(());
            }
        }
        if skip > 0 {
            self.skipped = Some((generation, k, skip as u16));
        }
        let from = self.from;
        // The assembler saw the first segment without its leading continuation: its
        // positions there (also of records completed in later segments) are shifted.
        let skipped = self.skipped;
        let fix = |mut p: LogPosition| {
            if let Some((g, seg, by)) = skipped {
                if p.generation == g && p.segment == seg {
                    p.offset += by;
                }
            }
            p
        };
        let mut decode_error = None;
        let mut last_end = None;
        let ready = &mut self.ready;
        let mut delivered = 0u64;
        let chained = self
            .assembler
            .push_segment(at(0), &payload[skip..], |assembled| {
                if decode_error.is_some() {
                    return;
                }
                let start = fix(assembled.start);
                let end = fix(assembled.end);
                match LogRecord::decode(assembled.record_type, assembled.body) {
                    Ok(record) => {
                        last_end = Some(end);
                        if start >= from {
                            ready.push_back(LogEntry { start, end, record });
                            delivered += 1;
                        }
                    }
                    Err(e) => decode_error = Some((start, e)),
                }
            });
        self.summary.records_read += delivered;
        if let Some(end) = last_end {
            self.last_complete_end = Some(end);
        }
        if let Some((start, e)) = decode_error {
            return Err(corrupt(
                &cursor.path,
                u32::from(k),
                format!("the record at {start} cannot be decoded: {e}"),
            ));
        }
        chained.map_err(|e| corrupt(&cursor.path, u32::from(k), e.to_string()))?;
        if self.assembler.in_progress() {
            if let Some(offset) = unfinished_record_offset(payload) {
                self.unfinished_start = Some(at(offset));
            }
        }
        Ok(())
    }

    /// The log of this generation ended before its last slot: `first_missing` is the
    /// first slot after it. Checks what lies beyond, then finishes.
    fn end_in_generation(
        &mut self,
        cursor: &mut Cursor,
        first_missing: u32,
    ) -> Result<(), EngineError> {
        let n = cursor.segments;
        let mut seqs: Vec<(u64, u32)> = Vec::new();
        let mut damaged = 0u64;
        let mut slot = first_missing;
        while slot < n {
            let count = (n - slot).min(cursor.window_segments);
            self.ensure_window(cursor, slot, count)?;
            for s in slot..slot + count {
                match slot_state(cursor, s) {
                    SlotState::Unused => {}
                    SlotState::Damaged => damaged += 1,
                    SlotState::Valid { header, .. } => {
                        let shadow_of_last = header.is_shadow()
                            && cursor.last.is_some_and(|(last, _)| {
                                u32::from(header.logical_index) == last && s == last + 1
                            });
                        if !shadow_of_last {
                            seqs.push((header.write_seq, s));
                        }
                    }
                }
            }
            slot += count;
        }
        if let Some(&(_, after)) = seqs.first() {
            if let Some((last, false)) = cursor.last {
                return Err(corrupt(
                    &cursor.path,
                    after,
                    format!(
                        "segment {last} ends the log partially filled, but segment {after} holds \
                         later data: a log write was lost"
                    ),
                ));
            }
            let newest = seqs.iter().map(|&(seq, _)| seq).max().unwrap_or(0);
            let oldest = seqs.iter().map(|&(seq, _)| seq).min().unwrap_or(0);
            if newest != oldest {
                return Err(corrupt(
                    &cursor.path,
                    first_missing,
                    format!(
                        "segment {first_missing} is damaged or missing, but later segments hold \
                         data of several writes (write sequences {oldest} to {newest}): the log \
                         is damaged in the middle"
                    ),
                ));
            }
            if oldest < self.chain_max_seq {
                return Err(corrupt(
                    &cursor.path,
                    after,
                    format!(
                        "segment {after}, after the end of the log, holds data older (write \
                         sequence {oldest}) than the log before it ({}): stale or misdirected data",
                        self.chain_max_seq
                    ),
                ));
            }
        }
        if let Some(&later) = self.present.iter().find(|&&x| x > cursor.generation) {
            return Err(corrupt(
                &cursor.path,
                first_missing,
                format!(
                    "the log of generation {:#x} ends at segment {first_missing}, but generation \
                     {later:#x} exists: the log is damaged in the middle",
                    cursor.generation
                ),
            ));
        }
        self.summary.damaged_after_end = damaged;
        self.summary.segments_after_end = seqs.len() as u64;
        self.finish(damaged > 0 || !seqs.is_empty())
    }

    /// The log filled this generation: continue with the next file, if any.
    fn next_generation(&mut self, cursor: &mut Cursor) -> Result<(), EngineError> {
        let Some(next) = cursor.generation.checked_add(1) else {
            return self.finish(false);
        };
        self.next_generation_start = Some(LogPosition {
            generation: next,
            segment: 1,
            offset: FIRST_RECORD_OFFSET,
        });
        if self.present.contains(&next) {
            let expected = cursor.fold.map(RunningChecksum::value);
            let next_cursor = self.open_generation(next, expected)?;
            self.cursor = Some(next_cursor);
            return Ok(());
        }
        if let Some(&later) = self.present.iter().find(|&&x| x > next) {
            return Err(corrupt(
                &generation_path(&self.dir, next),
                0,
                format!(
                    "log generation {next:#x} is missing, but generation {later:#x} exists: the \
                     log has a hole"
                ),
            ));
        }
        self.finish(false)
    }

    fn finish(&mut self, torn: bool) -> Result<(), EngineError> {
        if self.skipping {
            let path = generation_path(&self.dir, self.from.generation);
            return Err(corrupt(
                &path,
                u32::from(self.from.segment),
                format!(
                    "the log ends inside a record that began before the start position {}; \
                     read from a record boundary",
                    self.from
                ),
            ));
        }
        let dropped = if self.assembler.in_progress() {
            self.unfinished_start
        } else {
            None
        };
        self.summary.dropped_record = dropped;
        self.summary.torn_tail = torn || self.tail_copy_damaged || self.assembler.in_progress();
        let end = self.last_complete_end.unwrap_or(self.from);
        self.summary.end_of_log = end.max(self.next_generation_start.unwrap_or(end));
        self.finished = true;
        self.cursor = None;
        Ok(())
    }
}

/// Slot `slot` of the cursor's window (which must hold it).
fn slot_mut(cursor: &mut Cursor, slot: u32) -> &mut [u8] {
    let seg = cursor.seg_len.bytes();
    let at = (slot - cursor.window_first) as usize * seg;
    &mut cursor.window[at..at + seg]
}

/// The classification of slot `slot` (in the window), made on first use.
fn slot_state(cursor: &mut Cursor, slot: u32) -> SlotState {
    let index = (slot - cursor.window_first) as usize;
    if let Some(state) = cursor.states[index] {
        return state;
    }
    let generation = cursor.generation;
    let state = classify_slot(slot_mut(cursor, slot), generation, slot as u16);
    cursor.states[index] = Some(state);
    state
}

impl Iterator for LogReader {
    type Item = Result<LogEntry, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        self.next_record().transpose()
    }
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("dir", &self.dir)
            .field("from", &self.from)
            .field("finished", &self.finished)
            .finish()
    }
}
