//! Soft recovery (`edbstress recover`, engine.md §6): replays the log from the
//! checkpoint into a database that was not shut down cleanly.
//!
//! A redo record is applied only when its `dbtime_after` is newer than the page's
//! dbtime; the page must then be exactly at the record's `dbtime_before`, otherwise the
//! storage lost a write it had acknowledged (a **lost flush**), which is reported by
//! page and leaves the database marked as needing recovery. Records of a transaction
//! are applied only when its Commit record is in the log: a transaction whose commit
//! never reached the disk (a lazy commit, or the torn tail) is rolled back by not being
//! replayed — the engine never writes a page before its transaction's commit is durable,
//! so there is nothing to undo on disk. The log is streamed through a look-ahead window
//! (memory does not grow with the log); pages referenced by the records in it are read
//! ahead with deep asynchronous I/O so replay runs at device speed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::Pgno;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_format::header::{DatabaseHeader, DbState, HeaderError};
use edbstress_format::log::{
    CHECKPOINT_FILE_NAME, CheckpointRecord, CheckpointState, LogPosition, LogRecord,
};
use edbstress_format::page::{PageHeader, flags};
use edbstress_io::blocking::{self, Target};
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, IoClass, IoMode, IoStats, open_backend,
};
use serde::Serialize;

use crate::dbfile::{DbFileIo, HeaderReadError, read_header_from};
use crate::error::EngineError;
use crate::layout::InstanceLayout;
use crate::runtime::btree::TreeState;
use crate::runtime::cache::{CacheConfig, PageCache, WalSync};
use crate::runtime::log::{
    LogEntry, LogReadOptions, LogReader, LogSignatures, check_log_reaches, read_checkpoint,
};
use crate::runtime::redo::{RedoOp, page_dbtime};
use crate::runtime::schema::{MAILBOX_TABLE_OBJECT_ID, RowHeader};

/// How to recover.
#[derive(Clone, Debug)]
pub struct RecoveryOptions {
    /// Direct or buffered I/O.
    pub io_mode: IoMode,
    /// Backend for prefetch reads and page writes.
    pub backend: BackendKind,
    /// Cache used for replay, in bytes.
    pub cache_bytes: u64,
}

impl Default for RecoveryOptions {
    fn default() -> Self {
        RecoveryOptions {
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
            cache_bytes: 256 << 20,
        }
    }
}

/// A page found older than the log requires.
#[derive(Clone, Debug, Serialize)]
pub struct LostFlush {
    /// The page.
    pub pgno: Pgno,
    /// dbtime on the page.
    pub page_dbtime: u64,
    /// dbtime the log record expected.
    pub expected_dbtime: u64,
    /// Log position of the record.
    pub position: String,
}

/// What recovery did for one instance.
#[derive(Clone, Debug, Serialize)]
pub struct RecoveryReport {
    /// Instance number.
    pub instance: InstanceId,
    /// The database.
    pub db_file: PathBuf,
    /// Its log directory.
    pub log_dir: PathBuf,
    /// The database was shut down cleanly: nothing to do.
    pub was_clean: bool,
    /// Where replay started (the checkpoint).
    pub start: String,
    /// End of the valid log.
    pub end: String,
    /// Log generations read.
    pub generations_replayed: u32,
    /// Log records read.
    pub records: u64,
    /// Page changes applied.
    pub redone: u64,
    /// Page changes already on disk.
    pub skipped: u64,
    /// Transactions replayed (commit record present).
    pub transactions_committed: u64,
    /// Transactions rolled back (no commit record).
    pub transactions_rolled_back: u64,
    /// Lost flushes found, by page.
    pub lost_flushes: Vec<LostFlush>,
    /// Pages found damaged (a torn write) and rebuilt from their first image in the
    /// replayed log before any change of theirs was replayed (torn-write protection).
    pub pages_restored: Vec<Pgno>,
    /// Pages that verified but were newer on disk than their first image in the replayed
    /// log, rebuilt from it all the same (torn-write protection: a checksum cannot prove
    /// a page whole, see `TornPageRestorer`).
    pub pages_rebuilt_whole: u64,
    /// Pages read ahead.
    pub pages_prefetched: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// I/O of the replay (reads and writes of the database, reads of the log).
    pub io: IoStats,
}

impl RecoveryReport {
    /// The report of a recovery of `db_file` and `log_dir` (instance `instance`) that
    /// has done nothing yet: every count zero, no problem found, no I/O. Recovery fills
    /// it in as it goes; tests and callers that summarise reports start from it too.
    pub fn new(instance: InstanceId, db_file: PathBuf, log_dir: PathBuf) -> RecoveryReport {
        RecoveryReport {
            instance,
            db_file,
            log_dir,
            was_clean: false,
            start: String::new(),
            end: String::new(),
            generations_replayed: 0,
            records: 0,
            redone: 0,
            skipped: 0,
            transactions_committed: 0,
            transactions_rolled_back: 0,
            lost_flushes: Vec::new(),
            pages_restored: Vec::new(),
            pages_rebuilt_whole: 0,
            pages_prefetched: 0,
            seconds: 0.0,
            io: IoStats::new(),
        }
    }

    /// Whether recovery brought the database to a clean state.
    pub fn succeeded(&self) -> bool {
        self.lost_flushes.is_empty()
    }
}

/// The log as replay sees it: never appended to, and every record replay applies was
/// read from disk, so any replayed page may be written at any time.
struct ReplayedLog;

impl ReplayedLog {
    const END: LogPosition = LogPosition {
        generation: Generation::MAX,
        segment: u16::MAX,
        offset: u16::MAX,
    };
}

impl WalSync for ReplayedLog {
    fn current(&self) -> LogPosition {
        Self::END
    }
    fn durable(&self) -> LogPosition {
        Self::END
    }
    fn flush_to(&self, _pos: LogPosition) -> Result<(), EngineError> {
        Ok(())
    }
    fn bytes_between(&self, _older: LogPosition, _newer: LogPosition) -> u64 {
        // Replay never flushes for checkpoint depth: everything is flushed at the end.
        0
    }
}

fn header_error(path: &std::path::Path, e: HeaderReadError) -> EngineError {
    match e {
        HeaderReadError::Io(e) => EngineError::Io(e),
        HeaderReadError::Header(HeaderError::NotOurs) => {
            EngineError::Invalid(format!("{} is not an edbstress database", path.display()))
        }
        HeaderReadError::Header(e) => EngineError::Invalid(format!("{}: {e}", path.display())),
    }
}

/// Writes both copies of the checkpoint file (copy 0, made durable, then copy 1)
/// through a backend of `backend`'s kind; returns what it counted (class
/// [`IoClass::LogCheckpoint`] of `instance`).
pub fn write_checkpoint(
    dir: &std::path::Path,
    record: &CheckpointRecord,
    io_mode: IoMode,
    backend: BackendKind,
    instance: InstanceId,
) -> Result<IoStats, EngineError> {
    let path = dir.join(CHECKPOINT_FILE_NAME);
    let file = match DataFile::open(&path, io_mode, Access::ReadWrite) {
        // Lost with both its copies: recovery started from the header's checkpoint
        // and writes a new file.
        Err(edbstress_io::IoError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            DataFile::create_new(&path, io_mode)?
        }
        other => other?,
    };
    let mut copy = AlignedBuf::new(4096);
    record.encode(&mut copy);
    let mut io = open_backend(backend, 1)?;
    let id = io.register(&file)?;
    let to = Target {
        file: id,
        path: &path,
        class: IoClass::LogCheckpoint,
        instance: instance.get(),
    };
    for offset in [0, 4096] {
        blocking::write_all(&mut *io, to, &mut copy, 4096, offset, true)?;
    }
    Ok(io.take_stats())
}

/// Recovers one instance.
pub fn recover(
    layout: &InstanceLayout,
    options: &RecoveryOptions,
) -> Result<RecoveryReport, EngineError> {
    let started = Instant::now();
    let path = &layout.db_file;
    let _lock = crate::runtime::lock::DatabaseLock::acquire(path)?;
    let file = Arc::new(DataFile::open(path, options.io_mode, Access::ReadWrite)?);
    let mut header = read_header_from(&file)
        .map_err(|e| header_error(path, e))?
        .header;
    let mut report = RecoveryReport {
        was_clean: header.state == DbState::Clean,
        start: header.checkpoint.to_string(),
        end: header.checkpoint.to_string(),
        ..RecoveryReport::new(layout.instance, path.clone(), layout.log_dir.clone())
    };
    match header.state {
        DbState::Clean => {
            report.seconds = started.elapsed().as_secs_f64();
            return Ok(report);
        }
        DbState::Creating => {
            return Err(EngineError::Invalid(format!(
                "{} was left unfinished by an interrupted prepare; run `edbstress prepare` again",
                path.display()
            )));
        }
        DbState::DirtyNeedsRecovery => {}
    }
    let start = replay_start(layout, options, &header)?;
    let checkpoint = start.checkpoint;
    // A missing newest generation is refused before replay changes anything.
    check_log_reaches(&layout.log_dir, header.log_required, checkpoint, None)?;
    report.start = checkpoint.to_string();
    let signatures = LogSignatures {
        log_signature: header.log_signature,
        db_signature: header.signature,
    };
    let read_options = LogReadOptions {
        class: IoClass::RecoveryRead,
        instance: layout.instance,
        io_mode: options.io_mode,
        backend: options.backend,
    };
    // The log is streamed: memory holds the look-ahead window and the transaction
    // being assembled, not the log (Jetstress replays 500 log files per instance).
    let mut reader = LogReader::open(&layout.log_dir, checkpoint, signatures, &read_options)?;
    let cache = replay_cache(layout, options, &header, &start.saved, file.clone())?;
    let file_io = DbFileIo::open(&file, options.backend, layout.instance)?;
    let mut torn_pages = TornPageRestorer::new(file_io, header.page_size, &layout.log_dir);
    let image_scan_io = check_first_images(
        &layout.log_dir,
        (checkpoint, signatures),
        &read_options,
        &mut torn_pages,
    )?;
    let unfinished = replay(&mut reader, &cache, &mut torn_pages, &mut report)?;
    let summary = reader.summary().cloned().ok_or_else(|| {
        EngineError::Invalid("log reader finished without a summary (a bug)".into())
    })?;
    let log_end = summary.end_of_log;
    check_log_reaches(
        &layout.log_dir,
        header.log_required,
        checkpoint,
        Some(&summary),
    )?;
    report.end = log_end.to_string();
    report.generations_replayed = summary.generations_read;
    report.pages_restored = torn_pages.restored;
    report.pages_rebuilt_whole = torn_pages.rebuilt_whole;
    report.transactions_rolled_back += unfinished;
    cache.flush_all()?;
    // Replayed pages must be durable before the checkpoint moves to the end of the log.
    torn_pages.io.sync(IoClass::DbFlush)?;
    report.pages_prefetched = cache.counters().prefetched;
    report.io = cache.io_stats();
    report.io.merge(reader.stats());
    report.io.merge(&image_scan_io);
    let state = cache.shutdown()?;
    if report.lost_flushes.is_empty() {
        header.state = DbState::Clean;
        header.checkpoint = log_end;
        header.last_dbtime = state.dbtime;
        header.next_unused_page = state.next_unused_page.get();
        header.page_count = header.page_count.max(state.page_count);
        header.next_message_id = state.next_message_id;
        header.update_seq += 1;
        let checkpoint_io = write_checkpoint(
            &layout.log_dir,
            &CheckpointRecord {
                update_seq: start.checkpoint_seq + 1,
                checkpoint: log_end,
                log_signature: header.log_signature,
                db_signature: header.signature,
                state: state.checkpoint_state(),
            },
            options.io_mode,
            options.backend,
            layout.instance,
        )?;
        report.io.merge(&checkpoint_io);
        torn_pages.io.write_header(&header)?;
    }
    // Torn-page checks and rebuilds, the final flush and the header writes.
    report.io.merge(torn_pages.io.stats());
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Where replay starts: the checkpoint to replay from, the update sequence of the
/// checkpoint file it came from (0 without one) and the counters saved with it.
struct ReplayStart {
    checkpoint: LogPosition,
    checkpoint_seq: u64,
    saved: CheckpointState,
}

/// Reads the checkpoint file of the log directory, which must belong to the database
/// of `header`; falls back to the header's checkpoint when both copies are damaged.
fn replay_start(
    layout: &InstanceLayout,
    options: &RecoveryOptions,
    header: &DatabaseHeader,
) -> Result<ReplayStart, EngineError> {
    match read_checkpoint(&layout.log_dir, options.io_mode) {
        Ok(chk) => {
            if chk.db_signature != header.signature || chk.log_signature != header.log_signature {
                return Err(EngineError::Mismatch {
                    what: format!(
                        "the checkpoint file in {} belongs to another database than {}",
                        layout.log_dir.display(),
                        layout.db_file.display()
                    ),
                });
            }
            Ok(ReplayStart {
                checkpoint: chk.checkpoint,
                checkpoint_seq: chk.update_seq,
                saved: chk.state,
            })
        }
        // Both copies damaged: the header's checkpoint moves with the log (recorded
        // with each new generation, before circular logging deletes anything it no
        // longer needs), is never newer than the file's, hence safe (replay skips what
        // is already on disk).
        Err(_) => Ok(ReplayStart {
            checkpoint: header.checkpoint,
            checkpoint_seq: 0,
            saved: CheckpointState::default(),
        }),
    }
}

/// The page cache replay reads and writes the database through, sized by
/// `options.cache_bytes`, starting from the counters of `header` and the checkpoint.
fn replay_cache(
    layout: &InstanceLayout,
    options: &RecoveryOptions,
    header: &DatabaseHeader,
    saved: &CheckpointState,
    file: Arc<DataFile>,
) -> Result<PageCache<TreeState>, EngineError> {
    let page_size = header.page_size;
    let frames = (options.cache_bytes / page_size.bytes() as u64).max(64) as usize;
    PageCache::new(
        CacheConfig {
            page_size,
            min_frames: frames.min(1024),
            max_frames: frames,
            checkpoint_depth: u64::MAX,
            coalesce_max: 512 * 1024,
            write_depth: 32,
            instance: layout.instance,
            backend: options.backend,
            verify_structure: true,
            read_class: IoClass::RecoveryRead,
            write_class: IoClass::RecoveryWrite,
        },
        file,
        Arc::new(ReplayedLog),
        // The checkpoint carries the counters as of its position; replay raises them.
        TreeState {
            page_size,
            dbtime: header.last_dbtime.max(saved.last_dbtime),
            next_unused_page: Pgno::new(header.next_unused_page.max(saved.next_unused_page)),
            page_count: header.page_count,
            next_message_id: header.next_message_id.max(saved.next_message_id),
            space: Default::default(),
        },
    )
}

/// Torn-write protection (the log holds page images): every page's first image is
/// handled before replay reads any page. A page may be changed after the checkpoint
/// before its first image there (a dirty period that began before the checkpoint
/// and whose write completed before it was computed); checking it only when its
/// image reaches the look-ahead window would come after replay had read it. Returns
/// what the scans read.
fn check_first_images(
    log_dir: &std::path::Path,
    (checkpoint, signatures): (LogPosition, LogSignatures),
    read_options: &LogReadOptions,
    torn_pages: &mut TornPageRestorer<'_>,
) -> Result<IoStats, EngineError> {
    let mut image_scan_io = IoStats::default();
    let protected = first_transaction_logs_images(
        log_dir,
        checkpoint,
        signatures,
        read_options,
        &mut image_scan_io,
    )?;
    if protected {
        torn_pages.rebuild_whole = true;
        let mut images = LogReader::open(log_dir, checkpoint, signatures, read_options)?;
        while let Some(entry) = images.next_record()? {
            if let LogRecord::PageImage { pgno, image } = &entry.record {
                torn_pages.check(*pgno, image, entry.start)?;
            }
        }
        image_scan_io.merge(images.stats());
    }
    Ok(image_scan_io)
}

/// The log as replay consumes it: one generation's records at a time in a look-ahead
/// window whose pages are read ahead, and the first record of the next generation.
///
/// ESE's soft-recovery pre-read: before a log file is replayed, the pages its
/// records reference are read, sorted and de-duplicated, adjacent ones joined, at
/// most 8 reads outstanding (`PageCache::prefetch`). The window holds one log file's
/// records (1 MiB of log), `carry` the first record of the next file.
#[derive(Default)]
struct ReplayWindow {
    window: VecDeque<LogEntry>,
    carry: Option<LogEntry>,
    log_exhausted: bool,
}

impl ReplayWindow {
    /// The next record to replay; when the window is empty, reads the next log file's
    /// records into it and pre-reads the pages they reference. Page images are checked
    /// as they enter the window (before any change to their page can be fetched).
    fn next(
        &mut self,
        reader: &mut LogReader,
        cache: &PageCache<TreeState>,
        torn_pages: &mut TornPageRestorer<'_>,
        report: &mut RecoveryReport,
    ) -> Result<Option<LogEntry>, EngineError> {
        if self.window.is_empty() && !self.log_exhausted {
            let mut pgnos = Vec::new();
            let mut generation = None;
            loop {
                let entry = match self.carry.take() {
                    Some(entry) => entry,
                    None => match reader.next_record()? {
                        Some(entry) => {
                            if let LogRecord::PageImage { pgno, image } = &entry.record {
                                torn_pages.check(*pgno, image, entry.start)?;
                            }
                            report.records += 1;
                            entry
                        }
                        None => {
                            self.log_exhausted = true;
                            break;
                        }
                    },
                };
                if *generation.get_or_insert(entry.start.generation) != entry.start.generation {
                    self.carry = Some(entry);
                    break;
                }
                if let LogRecord::PageRedo { pgno, .. } = &entry.record {
                    pgnos.push(*pgno);
                }
                self.window.push_back(entry);
            }
            cache.prefetch(&pgnos)?;
        }
        Ok(self.window.pop_front())
    }
}

/// Replays the log from `reader` into `cache`: the changes of each transaction whose
/// commit is in the log, in log order. Returns how many transactions were left
/// without a commit or rollback record (rolled back by not being replayed).
fn replay(
    reader: &mut LogReader,
    cache: &PageCache<TreeState>,
    torn_pages: &mut TornPageRestorer<'_>,
    report: &mut RecoveryReport,
) -> Result<u64, EngineError> {
    let mut window = ReplayWindow::default();
    let mut pending: HashMap<u64, Vec<LogEntry>> = HashMap::new();
    let mut poisoned: HashSet<Pgno> = HashSet::new();
    while let Some(entry) = window.next(reader, cache, torn_pages, report)? {
        match &entry.record {
            LogRecord::Begin { trx } => {
                pending.insert(*trx, Vec::new());
            }
            LogRecord::PageRedo { trx, .. } => pending.entry(*trx).or_default().push(entry),
            LogRecord::Rollback { trx } => {
                pending.remove(trx);
                report.transactions_rolled_back += 1;
            }
            LogRecord::Shutdown { .. } | LogRecord::PageImage { .. } => {}
            LogRecord::Commit { trx, .. } => {
                let Some(entries) = pending.remove(trx) else {
                    continue;
                };
                for entry in entries {
                    apply_redo(&entry, cache, &mut poisoned, report)?;
                }
                report.transactions_committed += 1;
            }
        }
    }
    Ok(pending.len() as u64)
}

/// Applies one page change of a committed transaction, unless its page already has
/// it; a page older than the change expects is a lost flush, and the page takes no
/// further change (`poisoned`).
fn apply_redo(
    entry: &LogEntry,
    cache: &PageCache<TreeState>,
    poisoned: &mut HashSet<Pgno>,
    report: &mut RecoveryReport,
) -> Result<(), EngineError> {
    let log_dir = &report.log_dir;
    let LogRecord::PageRedo {
        pgno,
        dbtime_before,
        dbtime_after,
        op,
        payload,
        ..
    } = &entry.record
    else {
        return Ok(());
    };
    let pgno = *pgno;
    if poisoned.contains(&pgno) {
        return Ok(());
    }
    let mut g = cache.lock();
    let frame = loop {
        if let Some(f) = g.lookup(pgno) {
            break f;
        }
        g = cache.fault_in(g, pgno)?;
    };
    {
        let s = g.state();
        s.dbtime = s.dbtime.max(*dbtime_after);
        s.next_unused_page = s.next_unused_page.max(pgno + 1);
        s.page_count = s.page_count.max(pgno.get());
    }
    let on_disk = page_dbtime(g.page(frame));
    if *dbtime_after <= on_disk {
        report.skipped += 1;
    } else if on_disk != *dbtime_before {
        report.lost_flushes.push(LostFlush {
            pgno,
            page_dbtime: on_disk,
            expected_dbtime: *dbtime_before,
            position: entry.start.to_string(),
        });
        poisoned.insert(pgno);
        return Ok(());
    } else {
        let redo =
            RedoOp::decode(*op, payload).map_err(|e| corrupt_record(log_dir, entry.start, e))?;
        redo.apply(g.page_mut(frame), pgno, *dbtime_after)
            .map_err(|e| corrupt_record(log_dir, entry.start, e))?;
        g.mark_dirty_span(frame, entry.start, entry.end);
        report.redone += 1;
    }
    // New message sequence numbers (and so ids) must not reuse the ones the log
    // handed out.
    if let RedoOp::Insert { data, .. } =
        RedoOp::decode(*op, payload).map_err(|e| corrupt_record(log_dir, entry.start, e))?
    {
        let h = PageHeader::read(g.page(frame));
        if h.object_id == MAILBOX_TABLE_OBJECT_ID && h.flags & flags::LEAF != 0 {
            if let Some(row) = RowHeader::decode(&data) {
                let s = g.state();
                s.next_message_id = s.next_message_id.max(row.lvid + 1);
            }
        }
    }
    Ok(())
}

/// Torn-write protection: the engine logs a page's on-disk image whenever a change
/// starts a dirty period (an empty image stands for a page no change had used,
/// formatted as growth writes it), and a page's first_dirty — so the checkpoint —
/// never passes it. A write a power cut can still tear was issued after the last
/// `fdatasync` before the checkpoint in force, so its page was dirty when that
/// checkpoint was computed and its image is in the replayed log. Each page's first
/// image there is handled before replay reads any page (`recover` scans the log for
/// them first): a page that fails verification (a torn, misdirected or damaged write)
/// is rebuilt from that image, a state whose later changes are all in the log, and
/// replay redoes them. (A page can be changed after the checkpoint *before* its first
/// image there — a dirty period that began before the checkpoint, written and
/// `fdatasync`ed before it was written — so the image must not wait for replay to
/// reach it: replay would have read the page by then.)
///
/// A valid checksum does not prove a page whole: both halves of the ESE-style sum are
/// linear (XOR), so a torn page whose changed bytes cancel out passes it — seen in the
/// power-cut test as a branch page whose old first sector (with its old sum) met a new
/// second sector holding four more 18-byte tag entries (`e0 f2 104 116`, which XOR to
/// zero). So a page that is not *older* than its image is rebuilt from the image unless
/// it is that image exactly: a whole newer page loses nothing (its changes since are in
/// the log), a torn one is repaired. A whole page older than its image is left alone,
/// so replay still reports it as a lost flush, not hidden.
struct TornPageRestorer<'a> {
    /// The database file's I/O outside the cache: the checks read as
    /// [`IoClass::RecoveryRead`], the rebuilds write as [`IoClass::RecoveryWrite`]
    /// (recovery's flush and header writes use it too).
    io: DbFileIo,
    page_size: edbstress_format::PageSize,
    log_dir: &'a std::path::Path,
    /// Pages whose first image was seen (checked, restored if needed).
    checked: HashSet<Pgno>,
    page: AlignedBuf,
    /// The page as its image rebuilds it.
    rebuilt: AlignedBuf,
    /// Pages found damaged and rebuilt, in the order met.
    restored: Vec<Pgno>,
    /// Pages that looked whole but were newer than their image, rebuilt from it.
    rebuilt_whole: u64,
    /// Whether a page that verifies is rebuilt too (set when every first image is
    /// handled before replay; a page replay has already read must not be rewritten
    /// under it).
    rebuild_whole: bool,
}

impl<'a> TornPageRestorer<'a> {
    fn new(
        io: DbFileIo,
        page_size: edbstress_format::PageSize,
        log_dir: &'a std::path::Path,
    ) -> Self {
        TornPageRestorer {
            io,
            page_size,
            log_dir,
            checked: HashSet::new(),
            page: AlignedBuf::new(page_size.bytes()),
            rebuilt: AlignedBuf::new(page_size.bytes()),
            restored: Vec::new(),
            rebuilt_whole: 0,
            rebuild_whole: false,
        }
    }

    /// Handles the image of `pgno` logged at `at`: the first one of a page is checked
    /// against the page on disk (later ones only for their size).
    fn check(&mut self, pgno: Pgno, image: &[u8], at: LogPosition) -> Result<(), EngineError> {
        let page_len = self.page_size.bytes();
        if !image.is_empty() && image.len() != page_len {
            return Err(corrupt_record(
                self.log_dir,
                at,
                format!(
                    "page image of {} bytes in a database of {page_len}-byte pages",
                    image.len()
                ),
            ));
        }
        if !self.checked.insert(pgno) {
            return Ok(());
        }
        let offset = pgno.offset(self.page_size);
        let read = self
            .io
            .read(IoClass::RecoveryRead, &mut self.page, page_len, offset)?;
        let page = &mut self.page;
        if read < page.len() {
            // Past the end of the file: never written, nothing torn.
            return Ok(());
        }
        let whole = match verify_page(page, pgno) {
            PageVerdict::Uninitialized => return Ok(()),
            PageVerdict::Valid => edbstress_format::page::Page::new(page).is_ok(),
            _ => false,
        };
        let rebuilt = &mut self.rebuilt;
        if image.is_empty() {
            crate::dbfile::format_unused_page(rebuilt, pgno);
        } else {
            rebuilt.copy_from_slice(image);
            // The frame's checksum fields may predate its last change (they are sealed
            // into write snapshots, not into frames), and the log segment's checksum
            // already protected the bytes: seal afresh.
            edbstress_format::checksum::seal_page(rebuilt, pgno);
        }
        if whole {
            if !self.rebuild_whole
                || page_dbtime(page) < page_dbtime(rebuilt)
                || page[..] == rebuilt[..]
            {
                return Ok(());
            }
            self.rebuilt_whole += 1;
        } else {
            self.restored.push(pgno);
        }
        self.io
            .write(IoClass::RecoveryWrite, &mut self.rebuilt, page_len, offset)?;
        Ok(())
    }
}

/// Whether the log from `checkpoint` carries page images (torn-write protection):
/// with it on, the first transaction after a checkpoint always starts with one — the
/// checkpoint is the start of the append that made its oldest dirty page dirty, or,
/// with no page dirty, the next append makes a clean page dirty. Reads up to the first
/// commit only (its reads are added to `io`), so replay without protection pays
/// nearly nothing for the question.
fn first_transaction_logs_images(
    dir: &std::path::Path,
    checkpoint: LogPosition,
    signatures: LogSignatures,
    options: &LogReadOptions,
    io: &mut IoStats,
) -> Result<bool, EngineError> {
    let mut reader = LogReader::open(dir, checkpoint, signatures, options)?;
    let mut found = false;
    while let Some(entry) = reader.next_record()? {
        match entry.record {
            LogRecord::PageImage { .. } => {
                found = true;
                break;
            }
            LogRecord::Commit { .. } => break,
            _ => {}
        }
    }
    io.merge(reader.stats());
    Ok(found)
}

fn corrupt_record(
    dir: &std::path::Path,
    at: LogPosition,
    e: impl std::fmt::Display,
) -> EngineError {
    EngineError::CorruptLog {
        file: dir.join(edbstress_format::log::log_file_name(at.generation)),
        segment: u32::from(at.segment),
        what: format!("record at {at} cannot be replayed: {e}"),
    }
}
