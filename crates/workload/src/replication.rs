//! Log replication readers (engine.md §7): with `copies > 1`, each passive copy ships
//! every log generation. What that costs the active storage is modelled by
//! (copies − 1) readers per instance, each following the log as it is written: it
//! opens each generation, reads and checks its header (the log copier verifies a file
//! is the generation of this log stream it expects before it ships it), then reads
//! the file sequentially in large reads as soon as a whole read's worth is durable,
//! and the rest once the generation is closed. Per 1 MiB file that is one 4 KiB header
//! read and four 256 KiB reads (Jetstress: 213–233 KB per replication read).
//!
//! Each reader has a backend of the run's `--backend` kind (one request deep) that
//! carries, times and counts its reads as [`IoClass::ReplicationRead`].
//!
//! Readers start at the generation being written when they are spawned (files of
//! earlier runs are not shipped). As Exchange's active copy in a DAG does not truncate
//! logs until every copy has them, the readers hold circular logging back: given a
//! [`RetentionFloor`], they keep the instance's retention floor at the lowest
//! generation any of them still needs, and clear it when they stop. The floor is
//! capped at [`RetentionFloor::most_generations`] behind the log's current generation
//! (the run passes the log room its free-space check budgeted; re-checked after every
//! read, file and poll), so a stuck reader cannot fill the log volume: past the cap its next file goes and is counted as
//! missed, which is what a passive copy falling that far behind would suffer (it
//! would need reseeding).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::log::{
    LogFileHeader, LogPosition, SEGMENT_LEN, SegmentLen, log_file_name, verify_log_file_header,
};
use edbstress_io::blocking::{self, Target};
use edbstress_io::{
    Access, AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoError, IoMode,
    IoStats, open_backend,
};
use parking_lot::Mutex;

use crate::stop::StopSignal;

/// Default bytes per replication read.
pub const DEFAULT_REPLICATION_READ_LEN: usize = 256 << 10;

/// How often a reader looks for newly durable log.
const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Pause after a failed open or read, so a failing device does not make readers spin.
const ERROR_DELAY: Duration = Duration::from_millis(20);
/// Direct I/O needs lengths in multiples of this.
const IO_ALIGN: usize = 4096;

/// The end of the instance's durable log (what a reader may ship).
pub type DurableEndSource = Arc<dyn Fn() -> LogPosition + Send + Sync>;

/// Sets the instance's log retention floor (`Instance::set_log_retention_floor`):
/// circular logging keeps generations from `Some(floor)` on; `None` clears it.
pub type FloorSink = Arc<dyn Fn(Option<Generation>) + Send + Sync>;

/// How the readers hold circular logging back.
#[derive(Clone)]
pub struct RetentionFloor {
    /// Where the floor goes.
    pub set: FloorSink,
    /// Most generations the floor may hold behind the log's current generation: the
    /// log room the run budgeted divided by the log file size.
    pub most_generations: u32,
    /// The log's current generation (the one being written).
    pub current: Arc<dyn Fn() -> Generation + Send + Sync>,
}

/// How to ship the logs of one instance.
#[derive(Clone, Debug)]
pub struct ReplicationConfig {
    /// Instance number the reads are accounted to.
    pub instance: InstanceId,
    /// The instance's log directory.
    pub log_dir: PathBuf,
    /// Readers: the number of passive copies (copies − 1); 0 reads nothing.
    pub readers: u32,
    /// Bytes per read (rounded down to a multiple of 4 KiB, at least 4 KiB);
    /// [`DEFAULT_REPLICATION_READ_LEN`] normally.
    pub read_len: usize,
    /// Direct or buffered I/O; direct falls back to buffered on a filesystem that
    /// refuses it.
    pub io_mode: IoMode,
    /// The io backend each reader reads through (`--backend`).
    pub backend: BackendKind,
}

/// Why log replication could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// The log directory is missing or not a directory.
    #[error(
        "log replication cannot read {path}: {why}; give the log directory of an open instance"
    )]
    LogDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A read buffer or a reader's backend could not be set up.
    #[error("log replication: {0}")]
    Io(#[from] IoError),
    /// A reader thread could not be started.
    #[error("cannot start a log replication reader thread: {0}")]
    Thread(std::io::Error),
}

/// Progress of the readers of one instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicationProgress {
    /// Log files read completely, all readers together.
    pub files_read: u64,
    /// Log files removed before a reader got to them, all readers together.
    pub missed: u64,
}

/// What the readers of one instance did.
#[derive(Clone, Debug, Default)]
pub struct ReplicationReport {
    /// Log files read completely, all readers together.
    pub files_read: u64,
    /// Bytes read, all readers together.
    pub bytes_read: u64,
    /// Log files removed before a reader got to them, all readers together.
    pub missed: u64,
    /// Closed log files not yet read when the readers stopped: the most any reader
    /// was behind.
    pub behind: u64,
    /// Opens and reads that failed.
    pub io_errors: u64,
    /// The last I/O error, if any, for the test log.
    pub last_error: Option<String>,
    /// The readers' I/O, class [`IoClass::ReplicationRead`] of the instance.
    pub stats: IoStats,
}

/// What all readers of an instance share with its handle, updated after every read.
#[derive(Default)]
struct ReplicationState {
    stats: IoStats,
    files_read: u64,
    bytes_read: u64,
    missed: u64,
    io_errors: u64,
    last_error: Option<String>,
}

/// Starts log replication readers.
pub struct LogReplicator;

impl LogReplicator {
    /// Starts `config.readers` reader threads. Each reads every generation from the
    /// one `durable_end` is in now, following the durable end of the log, until `stop`
    /// is set or the handle is stopped.
    pub fn spawn(
        config: ReplicationConfig,
        durable_end: DurableEndSource,
        stop: Arc<AtomicBool>,
    ) -> Result<ReplicationHandle, ReplicationError> {
        LogReplicator::spawn_retaining(config, durable_end, None, stop)
    }

    /// [`LogReplicator::spawn`] with readers that keep `floor` at the lowest
    /// generation any of them still needs (see the module's documentation), and clear
    /// it when they stop.
    pub fn spawn_retaining(
        config: ReplicationConfig,
        durable_end: DurableEndSource,
        floor: Option<RetentionFloor>,
        stop: Arc<AtomicBool>,
    ) -> Result<ReplicationHandle, ReplicationError> {
        match std::fs::metadata(&config.log_dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(ReplicationError::LogDir {
                    path: config.log_dir.clone(),
                    why: "it is not a directory".into(),
                });
            }
            Err(e) => {
                return Err(ReplicationError::LogDir {
                    path: config.log_dir.clone(),
                    why: e.to_string(),
                });
            }
        }
        let read_len = (config.read_len / IO_ALIGN).max(1) * IO_ALIGN;
        let first = durable_end().generation;
        let state = Arc::new(Mutex::new(ReplicationState::default()));
        let stop = StopSignal::new(stop);
        let positions: Arc<[AtomicU32]> = (0..config.readers)
            .map(|_| AtomicU32::new(first.get()))
            .collect();
        let retention = floor.filter(|_| config.readers > 0).map(|floor| {
            (floor.set)(Some(first));
            Arc::new(Retention { floor, positions })
        });
        let mut handle = ReplicationHandle {
            state: Arc::clone(&state),
            stop: stop.clone(),
            durable_end: Arc::clone(&durable_end),
            readers: Vec::new(),
            backend: None,
            retention: retention.clone(),
        };
        for reader in 0..config.readers {
            let io = open_backend(config.backend, 1)?;
            handle.backend = Some(io.name());
            let mut r = Reader {
                instance: config.instance,
                log_dir: config.log_dir.clone(),
                io_mode: config.io_mode,
                buf: AlignedBuf::try_new(read_len)?,
                io,
                next: first,
                slot: reader as usize,
                retention: retention.clone(),
                seg_len: SegmentLen::Page4096,
                durable_end: Arc::clone(&durable_end),
                stop: stop.clone(),
                state: Arc::clone(&state),
            };
            let thread = std::thread::Builder::new()
                .name(format!("logship-{}-{}", config.instance, reader + 1))
                .spawn(move || {
                    r.run();
                    r.next
                })
                // Dropping `handle` stops and joins the readers already started.
                .map_err(ReplicationError::Thread)?;
            handle.readers.push(thread);
        }
        Ok(handle)
    }
}

/// The running readers of one instance.
pub struct ReplicationHandle {
    state: Arc<Mutex<ReplicationState>>,
    stop: StopSignal,
    durable_end: DurableEndSource,
    /// Each returns the generation it would have read next.
    readers: Vec<JoinHandle<Generation>>,
    /// "io_uring" or "threads": the kind of the readers' backends (None without readers).
    backend: Option<&'static str>,
    /// The retention floor the readers keep, cleared when they stop.
    retention: Option<Arc<Retention>>,
}

/// What the readers of an instance share to keep its retention floor.
struct Retention {
    floor: RetentionFloor,
    /// Each reader's next generation.
    positions: Arc<[AtomicU32]>,
}

impl Retention {
    /// Reader `slot` moved on to `next`: the floor goes to the lowest generation any
    /// reader still needs, at most `most_generations` behind the current one.
    fn moved(&self, slot: usize, next: Generation) {
        self.positions[slot].store(next.get(), Ordering::Release);
        let needed = self
            .positions
            .iter()
            .map(|p| p.load(Ordering::Acquire))
            .min()
            .unwrap_or(next.get());
        let current = (self.floor.current)().get();
        let lowest = current.saturating_sub(self.floor.most_generations);
        (self.floor.set)(Some(Generation::new(needed.max(lowest))));
    }
}

impl ReplicationHandle {
    /// The readers' I/O counters so far (cumulative).
    pub fn stats(&self) -> IoStats {
        self.state.lock().stats.clone()
    }

    /// "io_uring" or "threads": the backend kind that carries the reads (`None` when
    /// there are no readers).
    pub fn backend(&self) -> Option<&'static str> {
        self.backend
    }

    /// Files read and missed so far.
    pub fn progress(&self) -> ReplicationProgress {
        let s = self.state.lock();
        ReplicationProgress {
            files_read: s.files_read,
            missed: s.missed,
        }
    }

    /// Stops the readers (without touching the run's stop flag), waits for them and
    /// reports what they did.
    pub fn stop_and_join(mut self) -> ReplicationReport {
        let behind = self.join();
        let s = std::mem::take(&mut *self.state.lock());
        ReplicationReport {
            files_read: s.files_read,
            bytes_read: s.bytes_read,
            missed: s.missed,
            behind,
            io_errors: s.io_errors,
            last_error: s.last_error,
            stats: s.stats,
        }
    }

    /// Stops and joins every reader; the most closed files any had not read.
    fn join(&mut self) -> u64 {
        self.stop.stop();
        let next: Vec<Generation> = self
            .readers
            .drain(..)
            // A panicked reader still leaves its counters in the shared state.
            .filter_map(|t| t.join().ok())
            .collect();
        if let Some(retention) = self.retention.take() {
            (retention.floor.set)(None);
        }
        let current = (self.durable_end)().generation;
        next.into_iter()
            .map(|n| u64::from(current.since(n)))
            .max()
            .unwrap_or(0)
    }
}

impl Drop for ReplicationHandle {
    fn drop(&mut self) {
        // A handle dropped without stop_and_join must not leave readers running.
        self.join();
    }
}

/// One passive copy's log shipping.
struct Reader {
    instance: InstanceId,
    log_dir: PathBuf,
    io_mode: IoMode,
    buf: AlignedBuf,
    /// Carries, times and counts the reads; its counters are moved into the shared
    /// state after each read.
    io: Box<dyn IoBackend>,
    /// The next generation to read.
    next: Generation,
    /// This reader's place in `retention`'s positions.
    slot: usize,
    retention: Option<Arc<Retention>>,
    /// Segment length of the file being read, from its header.
    seg_len: SegmentLen,
    durable_end: DurableEndSource,
    stop: StopSignal,
    state: Arc<Mutex<ReplicationState>>,
}

/// How reading one generation ended.
enum FileOutcome {
    Read,
    Missing,
    Failed,
    Stopped,
}

impl Reader {
    fn run(&mut self) {
        while !self.stop.is_stopped() {
            let path = self.log_dir.join(log_file_name(self.next));
            match self.read_file(&path) {
                FileOutcome::Read => self.state.lock().files_read += 1,
                FileOutcome::Missing => self.state.lock().missed += 1,
                // Not retried: a passive copy would reseed; the error is reported.
                FileOutcome::Failed => {
                    if !self.stop.sleep(ERROR_DELAY) {
                        return;
                    }
                }
                FileOutcome::Stopped => return,
            }
            // The last generation a log file name can carry has no successor.
            let Some(next) = self.next.next() else {
                return;
            };
            self.next = next;
            if let Some(retention) = &self.retention {
                retention.moved(self.slot, next);
            }
        }
    }

    /// Segments of generation `self.next` before the one holding the durable end of
    /// the log, or `None` once it is closed (a later generation holds durable data).
    fn durable_segments(&self) -> Option<u64> {
        let end = (self.durable_end)();
        match end.generation.cmp(&self.next) {
            std::cmp::Ordering::Greater => None,
            std::cmp::Ordering::Equal => Some(u64::from(end.segment)),
            std::cmp::Ordering::Less => Some(0),
        }
    }

    /// Bytes of generation `self.next` that are durable (in segments of the file's
    /// length), or `None` once it is closed.
    fn durable_len(&self) -> Option<u64> {
        self.durable_segments()
            .map(|n| n * self.seg_len.bytes() as u64)
    }

    /// Follows generation `self.next` at `path` as it is written: its header first
    /// (once durable), then the file in whole reads as they become durable, and the
    /// rest once it is closed.
    fn read_file(&mut self, path: &Path) -> FileOutcome {
        // The file exists once its header is durable: wait for some data in it.
        loop {
            if self.stop.is_stopped() {
                return FileOutcome::Stopped;
            }
            if self.durable_segments().is_none_or(|n| n > 1) {
                break;
            }
            self.keep_floor();
            self.stop.sleep(POLL_INTERVAL);
        }
        let file = match open_for_reading(path, self.io_mode) {
            Ok(file) => file,
            Err(IoError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return FileOutcome::Missing;
            }
            Err(e) => {
                self.io_error(&e);
                return FileOutcome::Failed;
            }
        };
        // Its length does not change (files are created full length). Once open, a
        // removal by circular logging does not stop the read.
        let len = match file.len() {
            Ok(len) => len,
            Err(e) => {
                self.io_error(&e);
                return FileOutcome::Failed;
            }
        };
        let id = match self.io.register(&file) {
            Ok(id) => id,
            Err(e) => {
                self.io_error(&e);
                return FileOutcome::Failed;
            }
        };
        let outcome = self.read_registered(&file, id, len);
        if let Err(e) = self.io.unregister(id) {
            self.io_error(&e);
        }
        outcome
    }

    /// The reads of [`Reader::read_file`] once `file` (`len` bytes) is registered as
    /// `id` with the reader's backend.
    fn read_registered(&mut self, file: &DataFile, id: FileId, len: u64) -> FileOutcome {
        let path = file.path();
        // The first 4 KiB hold the header whatever the file's segment length.
        match self.read_at(file, id, 0, SEGMENT_LEN) {
            Ok(_) => {
                let head = LogFileHeader::bytes_in(&self.buf[..SEGMENT_LEN]);
                match verify_log_file_header(head, self.next) {
                    Ok(header) => self.seg_len = header.segment_length(),
                    Err(e) => {
                        let mut s = self.state.lock();
                        s.io_errors += 1;
                        s.last_error = Some(format!("{}: {e}", path.display()));
                        return FileOutcome::Failed;
                    }
                }
            }
            Err(outcome) => return outcome,
        }
        let read_len = self.buf.len() as u64;
        let mut offset = 0u64;
        while offset < len {
            if self.stop.is_stopped() {
                return FileOutcome::Stopped;
            }
            let available = self.durable_len().unwrap_or(len).min(len);
            let want = (len - offset).min(read_len);
            if available < offset + want {
                self.keep_floor();
                self.stop.sleep(POLL_INTERVAL);
                continue;
            }
            match self.read_at(file, id, offset, want as usize) {
                Ok(0) => break,
                Ok(n) => offset += n as u64,
                Err(outcome) => return outcome,
            }
        }
        FileOutcome::Read
    }

    /// One read of `want` bytes at `offset` through the reader's backend, which
    /// times and counts it; its counters join the shared state at once.
    fn read_at(
        &mut self,
        file: &DataFile,
        id: FileId,
        offset: u64,
        want: usize,
    ) -> Result<usize, FileOutcome> {
        // Direct I/O reads whole blocks; a tail shorter than that is read rounded up
        // and comes back short.
        let request = want.div_ceil(IO_ALIGN) * IO_ALIGN;
        let from = Target {
            file: id,
            path: file.path(),
            class: IoClass::ReplicationRead,
            instance: self.instance.get(),
        };
        let result = blocking::read(&mut *self.io, from, &mut self.buf, request, offset);
        let counted = self.io.take_stats();
        let mut s = self.state.lock();
        s.stats.merge(&counted);
        match result {
            Ok(n) => {
                s.bytes_read += n as u64;
                drop(s);
                self.keep_floor();
                Ok(n)
            }
            Err(e) => {
                drop(s);
                self.io_error(&e);
                Err(FileOutcome::Failed)
            }
        }
    }

    /// The log may have moved on while this reader waits or reads: the floor's cap
    /// follows it even while every reader is inside one file.
    fn keep_floor(&self) {
        if let Some(retention) = &self.retention {
            retention.moved(self.slot, self.next);
        }
    }

    fn io_error(&self, e: &IoError) {
        let mut s = self.state.lock();
        s.io_errors += 1;
        s.last_error = Some(e.to_string());
    }
}

/// Opens `path` read-only in `mode`, or buffered if its filesystem refuses direct I/O.
fn open_for_reading(path: &Path, mode: IoMode) -> Result<DataFile, IoError> {
    match DataFile::open(path, mode, Access::ReadOnly) {
        Err(IoError::DirectIoUnsupported { .. }) => {
            DataFile::open(path, IoMode::Buffered, Access::ReadOnly)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A retention over `readers` readers at `first`, the log's current generation read
    /// from `current`, recording every floor it sets.
    fn retention(
        readers: usize,
        first: u32,
        current: Arc<AtomicU32>,
        most_generations: u32,
    ) -> (Retention, Arc<Mutex<Vec<Option<Generation>>>>) {
        let set = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&set);
        let retention = Retention {
            floor: RetentionFloor {
                set: Arc::new(move |floor| sink.lock().push(floor)),
                most_generations,
                current: Arc::new(move || Generation::new(current.load(Ordering::Relaxed))),
            },
            positions: (0..readers).map(|_| AtomicU32::new(first)).collect(),
        };
        (retention, set)
    }

    #[test]
    fn the_floor_is_the_slowest_reader_capped_behind_the_current_generation() {
        let current = Arc::new(AtomicU32::new(12));
        let (retention, set) = retention(2, 10, Arc::clone(&current), 8);
        retention.moved(0, Generation::new(11));
        retention.moved(0, Generation::new(12));
        // Reader 1 still needs 10.
        assert_eq!(set.lock().last(), Some(&Some(Generation::new(10))));
        retention.moved(1, Generation::new(12));
        assert_eq!(set.lock().last(), Some(&Some(Generation::new(12))));
        // Reader 1 stuck at 13 while the log runs 20 generations ahead: the floor
        // holds at most 8 behind the current generation.
        retention.moved(1, Generation::new(13));
        current.store(33, Ordering::Relaxed);
        retention.moved(0, Generation::new(33));
        assert_eq!(set.lock().last(), Some(&Some(Generation::new(25))));
    }
}
