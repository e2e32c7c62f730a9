//! Background database maintenance (BDM) during a run (engine.md §7): per instance, a
//! throttled sequential checksum scan of the database file in large reads, wrapping
//! around at the end, on its own thread while the instance is open and writing.
//!
//! The scan is read-only: correctable pages are counted, not repaired. Because the
//! engine may be writing a page while it is read (a torn read), a page that fails
//! verification is read again on its own a few times; only a page that fails every
//! time is reported.
//!
//! The reads go through a backend of the run's `--backend` kind (one request deep),
//! which times and counts them as [`IoClass::BdmRead`]; the scan times nothing itself.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::stop::StopSignal;

use edbstress_io::blocking::{self, Target};

use edbstress_engine::{HeaderReadError, read_header_from};
use edbstress_format::InstanceId;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_format::header::HeaderError;
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoError, IoMode,
    IoStats, open_backend,
};
use parking_lot::Mutex;

/// Default bytes per BDM read.
pub const DEFAULT_BDM_READ_LEN: usize = 256 << 10;

/// Re-reads of a page that failed verification before it counts as damaged.
const REREADS: u32 = 3;
/// Pause before each re-read, so a write in progress can finish.
const REREAD_DELAY: Duration = Duration::from_millis(20);
/// Pause after a failed read, so a failing device does not make the scan spin.
const ERROR_DELAY: Duration = Duration::from_millis(20);
/// Damaged pages listed individually in a report (all are counted).
const MAX_LISTED: usize = 1000;

/// How to run the scan of one instance's database.
#[derive(Clone, Debug)]
pub struct BdmConfig {
    /// Instance number the reads are accounted to.
    pub instance: InstanceId,
    /// The database file.
    pub db_file: PathBuf,
    /// Scan rate in bytes per second; `f64::INFINITY` scans as fast as the storage
    /// allows.
    pub bytes_per_sec: f64,
    /// Bytes per read (rounded down to whole pages, at least one page);
    /// [`DEFAULT_BDM_READ_LEN`] normally.
    pub read_len: usize,
    /// Direct or buffered I/O (the instance's mode).
    pub io_mode: IoMode,
    /// The io backend the scan reads through (`--backend`).
    pub backend: BackendKind,
}

/// Why a scan could not be started.
#[derive(Debug, thiserror::Error)]
pub enum BdmError {
    /// The configuration cannot be used.
    #[error("background database maintenance: {0}")]
    Invalid(String),
    /// The file is not an edbstress database.
    #[error(
        "background database maintenance cannot scan {path}: it is not an edbstress database \
         ({why}); give the database file of a prepared instance"
    )]
    NotOurs {
        /// The file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// The file could not be opened or its header read.
    #[error("background database maintenance: {0}")]
    Io(#[from] IoError),
    /// The scan thread could not be started.
    #[error("cannot start the background database maintenance thread: {0}")]
    Thread(std::io::Error),
}

/// Progress of a running scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BdmProgress {
    /// Pages verified, over all passes.
    pub pages_checked: u64,
    /// Complete passes over the file.
    pub passes: u64,
    /// Distinct pages found damaged so far.
    pub bad_pages: u64,
    /// Distinct pages found with a single flipped bit so far.
    pub correctable_pages: u64,
}

/// A page the scan found damaged, with what was wrong with it the first time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPage {
    /// The page.
    pub pgno: Pgno,
    /// What was wrong.
    pub damage: PageDamage,
}

/// What is wrong with a damaged page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageDamage {
    /// The checksum does not match and one flipped bit does not explain it.
    ChecksumMismatch,
    /// The page is intact but holds the contents of another page (a misdirected
    /// write or read).
    HoldsPage(Pgno),
}

impl fmt::Display for PageDamage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageDamage::ChecksumMismatch => f.write_str("checksum mismatch"),
            PageDamage::HoldsPage(found) => write!(f, "holds the contents of page {found}"),
        }
    }
}

/// "page N (what)".
impl fmt::Display for BadPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {} ({})", self.pgno, self.damage)
    }
}

/// What a scan did, from its start to its stop.
#[derive(Clone, Debug, Default)]
pub struct BdmReport {
    /// Pages verified, over all passes.
    pub pages_checked: u64,
    /// Complete passes over the file.
    pub passes: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Damaged pages (each page once, with what was wrong the first time), at most
    /// 1000 listed; `bad_page_count` counts them all.
    pub bad_pages: Vec<BadPage>,
    /// Distinct damaged pages.
    pub bad_page_count: u64,
    /// Distinct pages with a single flipped bit (left as they are: the scan is
    /// read-only).
    pub correctable_pages: u64,
    /// Reads (or file length queries) that failed.
    pub io_errors: u64,
    /// The last I/O error, if any, for the test log.
    pub last_error: Option<String>,
    /// The scan's I/O, class [`IoClass::BdmRead`] of its instance.
    pub stats: IoStats,
}

/// Everything the scan thread shares with its handle; kept up to date after every
/// read, so a report can be built even if the thread died.
#[derive(Default)]
struct ScanState {
    stats: IoStats,
    pages_checked: u64,
    passes: u64,
    bytes_read: u64,
    bad: BTreeSet<Pgno>,
    bad_listed: Vec<BadPage>,
    correctable: BTreeSet<Pgno>,
    io_errors: u64,
    last_error: Option<String>,
}

/// Token bucket limiting the scan to a rate; holds at most one read's worth (or a
/// tenth of a second's) of credit so a pause is not followed by a long burst.
struct Throttle {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Instant,
}

impl Throttle {
    fn new(rate: f64, read_len: usize) -> Throttle {
        let capacity = (read_len as f64).max(rate * 0.1);
        Throttle {
            rate,
            capacity,
            // One read may start at once.
            tokens: read_len as f64,
            last: Instant::now(),
        }
    }

    /// Waits until `bytes` may be read and takes them; false if stopped meanwhile.
    fn acquire(&mut self, bytes: usize, stop: &StopSignal) -> bool {
        if self.rate.is_infinite() {
            return !stop.is_stopped();
        }
        let bytes = bytes as f64;
        loop {
            let now = Instant::now();
            self.tokens = (self.tokens + (now - self.last).as_secs_f64() * self.rate)
                .min(self.capacity.max(bytes));
            self.last = now;
            if self.tokens >= bytes {
                self.tokens -= bytes;
                return !stop.is_stopped();
            }
            let wait = Duration::from_secs_f64((bytes - self.tokens) / self.rate);
            if !stop.sleep(wait.min(StopSignal::STEP)) {
                return false;
            }
        }
    }
}

/// Starts background database maintenance scans.
pub struct BdmScanner;

impl BdmScanner {
    /// Opens the database read-only, reads its header for the page size and starts
    /// the scan thread. The scan runs until `stop` is set or the handle is stopped.
    pub fn spawn(config: BdmConfig, stop: Arc<AtomicBool>) -> Result<BdmHandle, BdmError> {
        if config.bytes_per_sec.is_nan() || config.bytes_per_sec <= 0.0 {
            return Err(BdmError::Invalid(format!(
                "the scan rate must be a positive number of bytes per second, not {}; \
                 use infinity for an unthrottled scan",
                config.bytes_per_sec
            )));
        }
        let file = DataFile::open(&config.db_file, config.io_mode, Access::ReadOnly)?;
        let page_size = match read_header_from(&file) {
            Ok(selection) => selection.header.page_size,
            Err(HeaderReadError::Io(e)) => return Err(e.into()),
            Err(HeaderReadError::Header(HeaderError::NotOurs | HeaderError::Uninitialized)) => {
                return Err(BdmError::NotOurs {
                    path: config.db_file.clone(),
                    why: "no edbstress signature in its header".into(),
                });
            }
            Err(HeaderReadError::Header(e)) => {
                return Err(BdmError::NotOurs {
                    path: config.db_file.clone(),
                    why: format!("neither header copy is usable: {e}"),
                });
            }
        };
        let read_len = (config.read_len / page_size.bytes()).max(1) * page_size.bytes();
        let buf = AlignedBuf::try_new(read_len)?;
        let mut io = open_backend(config.backend, 1)?;
        let file_id = io.register(&file)?;
        let state = Arc::new(Mutex::new(ScanState::default()));
        let stop = StopSignal::new(stop);
        let scan = Scan {
            instance: config.instance,
            file,
            io,
            file_id,
            page_size,
            buf,
            page: AlignedBuf::new(page_size.bytes()),
            throttle: Throttle::new(config.bytes_per_sec, read_len),
            stop: stop.clone(),
            state: Arc::clone(&state),
        };
        let thread = std::thread::Builder::new()
            .name(format!("bdm-{}", config.instance))
            .spawn(move || scan.run())
            .map_err(BdmError::Thread)?;
        Ok(BdmHandle {
            state,
            stop,
            thread: Some(thread),
        })
    }
}

/// A running scan.
pub struct BdmHandle {
    state: Arc<Mutex<ScanState>>,
    stop: StopSignal,
    thread: Option<JoinHandle<()>>,
}

impl BdmHandle {
    /// The scan's I/O counters so far (cumulative).
    pub fn stats(&self) -> IoStats {
        self.state.lock().stats.clone()
    }

    /// How far the scan has got.
    pub fn progress(&self) -> BdmProgress {
        let s = self.state.lock();
        BdmProgress {
            pages_checked: s.pages_checked,
            passes: s.passes,
            bad_pages: s.bad.len() as u64,
            correctable_pages: s.correctable.len() as u64,
        }
    }

    /// Stops the scan (without touching the run's stop flag), waits for its thread
    /// and reports what it did.
    pub fn stop_and_join(mut self) -> BdmReport {
        self.stop.stop();
        if let Some(thread) = self.thread.take() {
            // A panicked scan still leaves its counters in the shared state.
            let _ = thread.join();
        }
        let s = std::mem::take(&mut *self.state.lock());
        BdmReport {
            pages_checked: s.pages_checked,
            passes: s.passes,
            bytes_read: s.bytes_read,
            bad_page_count: s.bad.len() as u64,
            bad_pages: s.bad_listed,
            correctable_pages: s.correctable.len() as u64,
            io_errors: s.io_errors,
            last_error: s.last_error,
            stats: s.stats,
        }
    }
}

impl Drop for BdmHandle {
    fn drop(&mut self) {
        // A handle dropped without stop_and_join must not leave the thread scanning.
        self.stop.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How a page was judged after any re-reads.
enum PageOutcome {
    Fine,
    Correctable,
    Bad(PageDamage),
}

/// Which of the scan's buffers a read fills.
#[derive(Clone, Copy)]
enum Buffer {
    /// The large sequential read.
    Scan,
    /// A page read again on its own.
    Page,
}

/// The scan thread's state.
struct Scan {
    instance: InstanceId,
    file: DataFile,
    /// Carries, times and counts the reads (`file` registered as `file_id`); its
    /// counters are moved into the shared state after each read.
    io: Box<dyn IoBackend>,
    file_id: FileId,
    page_size: PageSize,
    buf: AlignedBuf,
    page: AlignedBuf,
    throttle: Throttle,
    stop: StopSignal,
    state: Arc<Mutex<ScanState>>,
}

impl Scan {
    fn run(mut self) {
        while !self.stop.is_stopped() {
            if self.pass() {
                self.state.lock().passes += 1;
            }
        }
    }

    /// One pass from page 1 to the current end of the file; true if it got to the end.
    fn pass(&mut self) -> bool {
        let ps = self.page_size.bytes() as u64;
        // The file grows while the instance runs: each pass covers what is there now.
        let end = match self.file.len() {
            Ok(len) => len - len % ps,
            Err(e) => {
                self.io_error(&e);
                self.stop.sleep(ERROR_DELAY);
                return false;
            }
        };
        let mut offset = Pgno::FIRST.offset(self.page_size);
        if offset >= end {
            // Nothing but headers: wait rather than spin; no pass was made.
            self.stop.sleep(StopSignal::STEP);
            return false;
        }
        while offset < end {
            let len = (end - offset).min(self.buf.len() as u64) as usize;
            if !self.throttle.acquire(len, &self.stop) {
                return false;
            }
            let result = self.read(Buffer::Scan, len, offset);
            let got = match result {
                Ok(n) => n - n % ps as usize,
                Err(e) => {
                    self.io_error(&e);
                    offset += len as u64;
                    if !self.stop.sleep(ERROR_DELAY) {
                        return false;
                    }
                    continue;
                }
            };
            if got == 0 {
                // The file shrank under us: the pass ends here.
                break;
            }
            let first = (offset / ps - 1) as u32;
            let mut outcomes = Vec::new();
            for i in 0..got / ps as usize {
                let pgno = Pgno::new(first + i as u32);
                let page = &self.buf[i * ps as usize..(i + 1) * ps as usize];
                match verify_page(page, pgno) {
                    PageVerdict::Valid | PageVerdict::Uninitialized => {}
                    first_verdict => {
                        if let Some(outcome) = self.recheck(pgno, first_verdict) {
                            outcomes.push((pgno, outcome));
                        } else {
                            return false;
                        }
                    }
                }
            }
            let mut s = self.state.lock();
            s.pages_checked += (got / ps as usize) as u64;
            s.bytes_read += got as u64;
            for (pgno, outcome) in outcomes {
                match outcome {
                    PageOutcome::Fine => {}
                    PageOutcome::Correctable => {
                        s.correctable.insert(pgno);
                    }
                    PageOutcome::Bad(what) => {
                        if s.bad.insert(pgno) && s.bad_listed.len() < MAX_LISTED {
                            s.bad_listed.push(BadPage { pgno, damage: what });
                        }
                    }
                }
            }
            drop(s);
            offset += got as u64;
        }
        true
    }

    /// Reads page `pgno` again, alone, up to [`REREADS`] times after a short pause;
    /// the page is damaged only if no read of it verifies. None if stopped meanwhile.
    fn recheck(&mut self, pgno: Pgno, first: PageVerdict) -> Option<PageOutcome> {
        let offset = pgno.offset(self.page_size);
        let mut verdict = first;
        for _ in 0..REREADS {
            if !self.stop.sleep(REREAD_DELAY) || !self.throttle.acquire(self.page.len(), &self.stop)
            {
                return None;
            }
            let len = self.page.len();
            match self.read(Buffer::Page, len, offset) {
                Ok(n) if n == len => self.state.lock().bytes_read += len as u64,
                Ok(n) => {
                    let e = IoError::Io {
                        path: self.file.path().to_path_buf(),
                        op: "read",
                        offset,
                        source: std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("page {pgno} read back {n} of {len} bytes"),
                        ),
                    };
                    self.io_error(&e);
                    continue;
                }
                Err(e) => {
                    self.io_error(&e);
                    continue;
                }
            }
            verdict = verify_page(&self.page, pgno);
            if matches!(verdict, PageVerdict::Valid | PageVerdict::Uninitialized) {
                return Some(PageOutcome::Fine);
            }
        }
        Some(match verdict {
            PageVerdict::Valid | PageVerdict::Uninitialized => PageOutcome::Fine,
            PageVerdict::Correctable { .. } => PageOutcome::Correctable,
            PageVerdict::WrongPageNumber { found } => {
                PageOutcome::Bad(PageDamage::HoldsPage(found))
            }
            PageVerdict::Bad => PageOutcome::Bad(PageDamage::ChecksumMismatch),
        })
    }

    /// One read of `len` bytes at `offset` into the scan or page buffer, through the
    /// scan's backend; its counters join the shared state at once.
    fn read(&mut self, into: Buffer, len: usize, offset: u64) -> Result<usize, IoError> {
        let from = Target {
            file: self.file_id,
            path: self.file.path(),
            class: IoClass::BdmRead,
            instance: self.instance.get(),
        };
        let buf = match into {
            Buffer::Scan => &mut self.buf,
            Buffer::Page => &mut self.page,
        };
        let result = blocking::read(&mut *self.io, from, buf, len, offset);
        let counted = self.io.take_stats();
        self.state.lock().stats.merge(&counted);
        result
    }

    fn io_error(&self, e: &IoError) {
        let mut s = self.state.lock();
        s.io_errors += 1;
        s.last_error = Some(e.to_string());
    }
}
