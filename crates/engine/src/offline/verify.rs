//! Offline verification of databases and logs (`edbstress checksum`, like
//! `eseutil /k`): every page of a database is read with large, deep-queued sequential
//! reads and classified by its checksum (engine.md §2); every segment of every log
//! generation and both copies of the checkpoint file are checked. Correctable pages
//! can be repaired in place.

use std::path::{Path, PathBuf};
use std::time::Instant;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::checksum::{PageVerdict, repair_page, verify_page};
use edbstress_format::header::{DatabaseHeader, HeaderError};
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_NAME, LogFileHeader, SegmentLen, SegmentVerdict,
    parse_log_file_name, select_checkpoint, verify_log_file_header, verify_segment,
};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::blocking::FileIo;
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, IoClass, IoError, IoMode, IoOp, IoRequest, IoStats,
    open_backend,
};
use serde::Serialize;

use crate::dbheader::{HeaderReadError, read_header_from};
use crate::error::EngineError;
use crate::runtime::log::{LogSequenceReport, verify_log_sequence};

/// How to scan.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// I/O backend.
    pub backend: BackendKind,
    /// Bytes per read.
    pub read_len: usize,
    /// Reads in flight.
    pub queue_depth: usize,
    /// Rewrite correctable pages with the flipped bit restored.
    pub repair: bool,
    /// Problems listed individually per database (all are counted).
    pub max_listed: usize,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
            read_len: 1 << 20,
            queue_depth: 16,
            repair: false,
            max_listed: 1000,
        }
    }
}

/// Why a scan could not be carried out at all.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// The file is not an edbstress database.
    #[error(
        "{path} is not an edbstress database ({why}); give the path of a database made by `edbstress prepare`"
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// The file or directory could not be opened or read.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Another edbstress process holds the database (only a repair takes the lock).
    #[error(transparent)]
    Locked(#[from] crate::runtime::lock::LockError),
}

/// What is wrong with one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PageProblemKind {
    /// One flipped bit, at this bit index within the page.
    Correctable {
        /// Bit index within the page (byte = bit / 8).
        bit: u32,
    },
    /// The checksum does not match and cannot be corrected.
    Bad,
    /// A valid page of another page number (a misdirected write or read).
    WrongPageNumber {
        /// The page number the contents belong to.
        found: Pgno,
    },
    /// All zero: never written, or zeroed.
    Uninitialized,
    /// The page lies beyond the end of the file.
    Missing,
    /// Reading the page failed.
    ReadError,
}

/// One damaged page.
#[derive(Clone, Debug, Serialize)]
pub struct PageProblem {
    /// Page number.
    pub pgno: Pgno,
    /// File offset of the page.
    pub offset: u64,
    /// What is wrong.
    #[serde(flatten)]
    pub kind: PageProblemKind,
    /// Whether `--repair` fixed it.
    pub repaired: bool,
}

/// State of the header pair.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HeaderStatus {
    /// Slot 0 is valid.
    pub primary_valid: bool,
    /// Slot 1 is valid.
    pub shadow_valid: bool,
    /// Database state recorded in the header in use.
    pub state: String,
}

/// Result of verifying one database.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DatabaseScanReport {
    /// The database file.
    pub path: PathBuf,
    /// Page size in bytes.
    pub page_size: usize,
    /// Pages the header says the file holds.
    pub page_count: u32,
    /// The header pair.
    pub header: HeaderStatus,
    /// Pages read and checked.
    pub pages_seen: u64,
    /// Pages with an uncorrectable checksum mismatch (read errors and missing pages included).
    pub bad_pages: u64,
    /// Pages with a single flipped bit.
    pub correctable_pages: u64,
    /// Valid pages found at the wrong page number.
    pub wrong_pgno_pages: u64,
    /// All-zero pages.
    pub uninitialized_pages: u64,
    /// Pages rewritten by `--repair`.
    pub repaired_pages: u64,
    /// Highest dbtime of any valid page.
    pub highest_dbtime: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// MB read (MB = 2^20 bytes).
    pub mb_read: f64,
    /// Read throughput, MB/s.
    pub mb_per_sec: f64,
    /// I/O backend used.
    pub backend: String,
    /// Damaged pages (at most `max_listed`).
    pub problems: Vec<PageProblem>,
    /// Whether `problems` lists them all.
    pub problems_complete: bool,
    /// The file is shorter than its header says: what is missing (its pages are
    /// counted as missing too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// The scan was stopped before its end (it then covers only the pages read).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
}

impl DatabaseScanReport {
    /// Whether the database is free of integrity problems once the scan's repairs are
    /// made: a correctable page that was repaired is no longer a problem.
    pub fn is_clean(&self) -> bool {
        self.header.primary_valid
            && self.header.shadow_valid
            && self.truncated.is_none()
            && self.bad_pages
                + self.correctable_pages.saturating_sub(self.repaired_pages)
                + self.wrong_pgno_pages
                + self.uninitialized_pages
                == 0
    }
}

/// Running tallies of a scan.
struct PageTally<'a> {
    report: &'a mut DatabaseScanReport,
    max_listed: usize,
}

impl PageTally<'_> {
    fn add(&mut self, pgno: Pgno, offset: u64, kind: PageProblemKind) {
        let r = &mut *self.report;
        match kind {
            PageProblemKind::Correctable { .. } => r.correctable_pages += 1,
            PageProblemKind::WrongPageNumber { .. } => r.wrong_pgno_pages += 1,
            PageProblemKind::Uninitialized => r.uninitialized_pages += 1,
            PageProblemKind::Bad | PageProblemKind::Missing | PageProblemKind::ReadError => {
                r.bad_pages += 1
            }
        }
        if r.problems.len() < self.max_listed {
            r.problems.push(PageProblem {
                pgno,
                offset,
                kind,
                repaired: false,
            });
        } else {
            r.problems_complete = false;
        }
    }

    fn check(&mut self, page: &[u8], pgno: Pgno, offset: u64) {
        self.report.pages_seen += 1;
        let kind = match verify_page(page, pgno) {
            PageVerdict::Valid => {
                let dbtime = u64::from_le_bytes(page[8..16].try_into().unwrap_or_default());
                self.report.highest_dbtime = self.report.highest_dbtime.max(dbtime);
                return;
            }
            PageVerdict::Uninitialized => PageProblemKind::Uninitialized,
            PageVerdict::Correctable { bit } => PageProblemKind::Correctable { bit },
            PageVerdict::WrongPageNumber { found } => PageProblemKind::WrongPageNumber { found },
            PageVerdict::Bad => PageProblemKind::Bad,
        };
        self.add(pgno, offset, kind);
    }
}

/// Verifies every page of the database at `path`. `progress` receives bytes read so
/// far and the total.
pub fn scan_database(
    path: &Path,
    options: &ScanOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<DatabaseScanReport, ScanError> {
    scan_database_until(path, options, &|| false, progress)
}

/// [`scan_database`] that ends early when `should_stop` says so (a run interrupted
/// while it verifies); the report then says `stopped` and covers the pages read.
pub fn scan_database_until(
    path: &Path,
    options: &ScanOptions,
    should_stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<DatabaseScanReport, ScanError> {
    let started = Instant::now();
    // Repair writes, so it needs the database alone; a plain scan only needs no writer
    // (whose half-done writes would look like damage), and opens the file first so a
    // missing one is reported as such rather than as a lock problem.
    let (file, _lock) = if options.repair {
        let lock = crate::runtime::lock::DatabaseLock::acquire(path)?;
        (
            DataFile::open(path, options.io_mode, Access::ReadWrite)?,
            lock,
        )
    } else {
        let file = DataFile::open(path, options.io_mode, Access::ReadOnly)?;
        (
            file,
            crate::runtime::lock::DatabaseLock::acquire_shared(path)?,
        )
    };
    let selection = match read_header_from(&file) {
        Ok(sel) => sel,
        Err(HeaderReadError::Io(e)) => return Err(e.into()),
        Err(HeaderReadError::Header(HeaderError::NotOurs | HeaderError::Uninitialized)) => {
            return Err(ScanError::NotOurs {
                path: path.to_path_buf(),
                why: "no edbstress signature in its header".into(),
            });
        }
        Err(HeaderReadError::Header(e)) => {
            // Ours (the signature is there) but neither copy is usable: report, as
            // the page size and count are unknown.
            return Ok(unreadable_header_report(path, &e, started));
        }
    };
    let header = selection.header;
    let ps = header.page_size;
    let mut report = DatabaseScanReport {
        path: path.to_path_buf(),
        page_size: ps.bytes(),
        page_count: header.page_count,
        header: HeaderStatus {
            primary_valid: selection.primary_valid,
            shadow_valid: selection.shadow_valid,
            state: format!("{:?}", header.state),
        },
        problems_complete: true,
        ..DatabaseScanReport::default()
    };
    let file_len = file.len()?;
    report.truncated = crate::dbfile::check_length(path, file_len, &header)
        .err()
        .map(|e| e.to_string());
    let start = Pgno::FIRST.offset(ps);
    let end = Pgno::new(header.page_count + 1).offset(ps);
    let readable_end = end.min(file_len - file_len % ps.bytes() as u64);
    let read_options = SequentialReadOptions {
        backend: options.backend,
        read_len: (options.read_len / ps.bytes()).max(1) * ps.bytes(),
        queue_depth: options.queue_depth,
        class: IoClass::ChecksumRead,
        instance: InstanceId::default(),
    };
    let mut tally = PageTally {
        report: &mut report,
        max_listed: options.max_listed,
    };
    let mut bytes_read = 0u64;
    let summary = read_sequentially(
        &file,
        start..readable_end,
        &read_options,
        should_stop,
        &mut |chunk| {
            let got = chunk.data.len();
            bytes_read += got as u64;
            let first_pgno = Pgno::new((chunk.offset / ps.bytes() as u64 - 1) as u32);
            for (i, page) in chunk.data[..got - got % ps.bytes()]
                .chunks_exact(ps.bytes())
                .enumerate()
            {
                let pgno = first_pgno + i as u32;
                tally.check(page, pgno, pgno.offset(ps));
            }
            // Whatever could not be read is reported page by page.
            let unread = (chunk.wanted - got).div_ceil(ps.bytes());
            for i in 0..unread {
                let pgno = first_pgno + ((got / ps.bytes()) + i) as u32;
                tally.report.pages_seen += 1;
                tally.add(pgno, pgno.offset(ps), PageProblemKind::ReadError);
            }
            progress(bytes_read, end - start);
            Ok(())
        },
    )?;
    tally.report.backend = summary.backend.to_string();
    tally.report.stopped = summary.stopped;
    if summary.stopped {
        return Ok(finish_report(report, bytes_read, started));
    }
    // Pages the header promises but the file does not have.
    let mut pgno = Pgno::new(((readable_end.max(start)) / ps.bytes() as u64 - 1) as u32);
    while pgno.offset(ps) < end {
        tally.report.pages_seen += 1;
        tally.add(pgno, pgno.offset(ps), PageProblemKind::Missing);
        pgno += 1;
    }
    if options.repair {
        repair_pages(&file, ps, &mut report)?;
    }
    Ok(finish_report(report, bytes_read, started))
}

/// Fills in the figures of a scan that read `bytes_read` since `started`.
fn finish_report(
    mut report: DatabaseScanReport,
    bytes_read: u64,
    started: Instant,
) -> DatabaseScanReport {
    report.bytes_read = bytes_read;
    report.seconds = started.elapsed().as_secs_f64();
    report.mb_read = bytes_read as f64 / 1048576.0;
    report.mb_per_sec = if report.seconds > 0.0 {
        report.mb_read / report.seconds
    } else {
        0.0
    };
    report
}

/// How [`read_sequentially`] reads.
#[derive(Clone, Debug)]
pub struct SequentialReadOptions {
    /// I/O backend.
    pub backend: BackendKind,
    /// Bytes per read (the last read of the range may be shorter). Keep it a multiple
    /// of 4096 for direct I/O.
    pub read_len: usize,
    /// Reads in flight.
    pub queue_depth: usize,
    /// Class the reads are accounted to.
    pub class: IoClass,
    /// Instance the reads are accounted to.
    pub instance: InstanceId,
}

/// One completed read of [`read_sequentially`], handed over in completion order (not
/// necessarily file order).
#[derive(Debug)]
pub struct ReadChunk<'a> {
    /// File offset of the read.
    pub offset: u64,
    /// Bytes asked for.
    pub wanted: usize,
    /// Bytes read: shorter than `wanted` when the read failed (then empty) or hit the
    /// end of the file.
    pub data: &'a [u8],
}

/// What [`read_sequentially`] did.
#[derive(Debug)]
pub struct SequentialReadSummary {
    /// I/O backend used.
    pub backend: &'static str,
    /// Bytes read.
    pub bytes_read: u64,
    /// Whether `should_stop` ended the reads before the end of the range.
    pub stopped: bool,
    /// The reads, by instance and class (failed reads counted as errors).
    pub stats: IoStats,
}

/// Reads `range` of `file` front to back with `queue_depth` reads of `read_len` bytes
/// in flight, handing every completed read to `on_chunk` (the database scans of the
/// checksum verification and of the backup test). `should_stop` is asked before each
/// new read: once it says yes, reads in flight are finished and no more are issued.
/// An error of `on_chunk` ends the reads and is returned.
pub fn read_sequentially(
    file: &DataFile,
    range: std::ops::Range<u64>,
    options: &SequentialReadOptions,
    should_stop: &dyn Fn() -> bool,
    on_chunk: &mut dyn FnMut(ReadChunk<'_>) -> Result<(), IoError>,
) -> Result<SequentialReadSummary, IoError> {
    let read_len = options.read_len.max(1);
    let mut backend = open_backend(options.backend, options.queue_depth)?;
    let file_id = backend.register(file)?;
    let depth = backend.depth().max(1);
    let mut spare: Vec<AlignedBuf> = (0..depth)
        .map(|_| AlignedBuf::try_new(read_len))
        .collect::<Result<_, _>>()?;
    let mut completions = Vec::with_capacity(depth);
    let mut next = range.start;
    let mut bytes_read = 0u64;
    let mut stopped = false;
    while (next < range.end && !stopped) || backend.in_flight() > 0 {
        while next < range.end && backend.in_flight() < depth {
            if should_stop() {
                stopped = true;
                break;
            }
            let Some(buf) = spare.pop() else { break };
            let len = (range.end - next).min(read_len as u64) as usize;
            backend.submit(IoRequest {
                file: file_id,
                op: IoOp::Read,
                offset: next,
                len,
                buf,
                class: options.class,
                instance: options.instance.get(),
                tag: len as u64,
            })?;
            next += len as u64;
        }
        if backend.in_flight() == 0 {
            break;
        }
        backend.wait(1, &mut completions)?;
        for c in completions.drain(..) {
            let wanted = c.tag as usize;
            let got = c.result.as_ref().map_or(0, |&n| n.min(wanted));
            bytes_read += got as u64;
            on_chunk(ReadChunk {
                offset: c.offset,
                wanted,
                data: &c.buf[..got],
            })?;
            spare.push(c.buf);
        }
    }
    Ok(SequentialReadSummary {
        backend: backend.name(),
        bytes_read,
        stopped,
        stats: backend.take_stats(),
    })
}

fn unreadable_header_report(path: &Path, e: &HeaderError, started: Instant) -> DatabaseScanReport {
    DatabaseScanReport {
        path: path.to_path_buf(),
        header: HeaderStatus {
            primary_valid: false,
            shadow_valid: false,
            state: format!("unreadable: {e}"),
        },
        seconds: started.elapsed().as_secs_f64(),
        problems_complete: true,
        ..DatabaseScanReport::default()
    }
}

/// Rewrites every listed correctable page with its bit restored, re-verifying each
/// before it is written. Correctable pages beyond the listing limit are found again
/// by a later scan.
fn repair_pages(
    file: &DataFile,
    ps: PageSize,
    report: &mut DatabaseScanReport,
) -> Result<(), IoError> {
    let mut page = AlignedBuf::new(ps.bytes());
    let mut io = None;
    for problem in &mut report.problems {
        if !matches!(problem.kind, PageProblemKind::Correctable { .. }) {
            continue;
        }
        let io = match &mut io {
            Some(io) => io,
            None => io.insert(FileIo::offline(file)?),
        };
        io.read_exact(IoClass::OfflineRead, &mut page, ps.bytes(), problem.offset)?;
        if matches!(
            repair_page(&mut page, problem.pgno),
            PageVerdict::Correctable { .. }
        ) && verify_page(&page, problem.pgno) == PageVerdict::Valid
        {
            io.write_all(
                IoClass::OfflineWrite,
                &mut page,
                ps.bytes(),
                problem.offset,
                false,
            )?;
            problem.repaired = true;
            report.repaired_pages += 1;
        }
    }
    if let Some(io) = io.as_mut().filter(|_| report.repaired_pages > 0) {
        io.sync(IoClass::OfflineWrite)?;
    }
    Ok(())
}

/// What is wrong with one log segment or file.
#[derive(Clone, Debug, Serialize)]
pub struct LogProblem {
    /// The file.
    pub file: PathBuf,
    /// Segment index in the file (0 = file header).
    pub segment: u32,
    /// What is wrong.
    pub kind: String,
}

/// Result of verifying one instance log directory.
#[derive(Clone, Debug, Serialize)]
pub struct LogScanReport {
    /// The directory.
    pub dir: PathBuf,
    /// Log generation files checked.
    pub files: u64,
    /// Segments checked (file headers included).
    pub segments_seen: u64,
    /// Segments never written (all zero).
    pub unused_segments: u64,
    /// Segments (or file headers) with an uncorrectable checksum mismatch.
    pub bad_segments: u64,
    /// Segments with a single flipped bit.
    pub correctable_segments: u64,
    /// Valid segments found at another position.
    pub wrong_position_segments: u64,
    /// Valid checkpoint copies (of 2).
    pub checkpoint_copies_valid: u32,
    /// Bytes read.
    pub bytes_read: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Problems found.
    pub problems: Vec<LogProblem>,
    /// The log read as recovery reads it, and what its database requires of it.
    pub sequence: LogSequenceReport,
}

impl LogScanReport {
    /// Whether the logs are free of integrity problems.
    pub fn is_clean(&self) -> bool {
        self.bad_segments + self.correctable_segments + self.wrong_position_segments == 0
            && self.checkpoint_copies_valid == 2
            && self.sequence.problems.is_empty()
    }
}

/// Verifies every log generation in `dir` and its checkpoint file, then reads the log
/// as recovery would and checks it against `owner`, the header of its database when
/// known (see [`verify_log_sequence`]).
pub fn scan_log_dir(
    dir: &Path,
    io_mode: IoMode,
    owner: Option<&DatabaseHeader>,
) -> Result<LogScanReport, ScanError> {
    let started = Instant::now();
    let mut report = LogScanReport {
        dir: dir.to_path_buf(),
        files: 0,
        segments_seen: 0,
        unused_segments: 0,
        bad_segments: 0,
        correctable_segments: 0,
        wrong_position_segments: 0,
        checkpoint_copies_valid: 0,
        bytes_read: 0,
        seconds: 0.0,
        problems: Vec::new(),
        sequence: LogSequenceReport::default(),
    };
    let io = |e: std::io::Error| IoError::Io {
        path: dir.to_path_buf(),
        op: "list directory",
        offset: 0,
        source: e,
    };
    let mut generations = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if let Some(generation) = entry.file_name().to_str().and_then(parse_log_file_name) {
            generations.push((generation, entry.path()));
        }
    }
    generations.sort();
    for (generation, path) in generations {
        scan_log_file(&path, generation, io_mode, &mut report)?;
    }
    let chk_path = dir.join(CHECKPOINT_FILE_NAME);
    match DataFile::open(&chk_path, io_mode, Access::ReadOnly) {
        Ok(chk) => {
            let mut copies = AlignedBuf::new(2 * CHECKPOINT_COPY_LEN);
            FileIo::offline(&chk)?.read_exact(
                IoClass::OfflineRead,
                &mut copies,
                2 * CHECKPOINT_COPY_LEN,
                0,
            )?;
            report.bytes_read += copies.len() as u64;
            let sel = select_checkpoint(
                &copies[..CHECKPOINT_COPY_LEN],
                &copies[CHECKPOINT_COPY_LEN..],
            );
            report.checkpoint_copies_valid =
                sel.map_or(0, |s| u32::from(s.copy0_valid) + u32::from(s.copy1_valid));
            if report.checkpoint_copies_valid < 2 {
                report.problems.push(LogProblem {
                    file: chk_path,
                    segment: 0,
                    kind: format!(
                        "{} of 2 checkpoint copies valid",
                        report.checkpoint_copies_valid
                    ),
                });
            }
        }
        Err(e) => report.problems.push(LogProblem {
            file: chk_path,
            segment: 0,
            kind: format!("checkpoint file unreadable: {e}"),
        }),
    }
    report.sequence = verify_log_sequence(dir, io_mode, owner).map_err(|e| match e {
        EngineError::Io(e) => ScanError::Io(e),
        other => ScanError::Io(IoError::Io {
            path: dir.to_path_buf(),
            op: "read log",
            offset: 0,
            source: std::io::Error::other(other.to_string()),
        }),
    })?;
    if report.bad_segments + report.wrong_position_segments > 0 {
        // A damaged segment already fails the log, and the chain stops at it: saying
        // so again adds nothing.
        report.sequence.problems.clear();
    }
    for problem in &report.sequence.problems {
        report.problems.push(LogProblem {
            file: dir.to_path_buf(),
            segment: 0,
            kind: format!("log sequence: {problem}"),
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn scan_log_file(
    path: &Path,
    generation: Generation,
    io_mode: IoMode,
    report: &mut LogScanReport,
) -> Result<(), IoError> {
    let file = DataFile::open(path, io_mode, Access::ReadOnly)?;
    let len = file.len()?;
    let unit = SegmentLen::Sector512.bytes() as u64;
    let len = (len - len % unit) as usize;
    let mut image = AlignedBuf::new(len);
    FileIo::offline(&file)?.read_exact(IoClass::OfflineRead, &mut image, len, 0)?;
    // The segment length the header records; 4 KiB if it records none we know (the
    // header is then reported bad).
    let seg_len = SegmentLen::from_bytes(LogFileHeader::bytes_in(&image).len() as u64)
        .unwrap_or_default()
        .bytes();
    let image = &image[..len - len % seg_len];
    report.files += 1;
    report.bytes_read += len as u64;
    let problem = |segment: u32, kind: String, report: &mut LogScanReport| {
        report.problems.push(LogProblem {
            file: path.to_path_buf(),
            segment,
            kind,
        });
    };
    for (slot, seg) in image.chunks_exact(seg_len).enumerate() {
        report.segments_seen += 1;
        if slot == 0 {
            if let Err(e) = verify_log_file_header(seg, generation) {
                report.bad_segments += 1;
                problem(0, format!("bad file header: {e}"), report);
            }
            continue;
        }
        match verify_segment(seg, generation, slot as u16) {
            SegmentVerdict::Valid(_) => {}
            SegmentVerdict::Unused => report.unused_segments += 1,
            SegmentVerdict::Correctable { bit } => {
                report.correctable_segments += 1;
                problem(
                    slot as u32,
                    format!("correctable: bit {bit} flipped"),
                    report,
                );
            }
            SegmentVerdict::WrongPosition {
                found_generation,
                found_slot,
            } => {
                report.wrong_position_segments += 1;
                problem(
                    slot as u32,
                    format!("holds segment {found_slot} of generation {found_generation}"),
                    report,
                );
            }
            SegmentVerdict::Bad => {
                report.bad_segments += 1;
                problem(slot as u32, "bad checksum".into(), report);
            }
        }
    }
    Ok(())
}
