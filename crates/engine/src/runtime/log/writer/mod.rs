//! The log writer: a log buffer filled by committing sessions, made durable in group
//! commit rounds (led by a waiting committer, or run by the flusher thread when nobody
//! waits), generation rolls, the checkpoint file and circular logging. See the module
//! documentation of [`crate::runtime::log`] for the protocol.
//!
//! - [`LogWriter`] (this file): the public API — open, append, flush, checkpoint,
//!   shutdown — used by the instance and by recovery;
//! - `shared`: the state appenders and threads share (log buffer, positions, the
//!   rounds' I/O state, the pre-creation state);
//! - `round`: a round and its I/O (writes, rolls, the checkpoint file, circular
//!   deletion), and the flusher thread;
//! - `precreate`: the thread that makes the next generation file in advance;
//! - `geometry`, `counters`: segment addresses and file lengths; the counters.

mod counters;
mod geometry;
mod precreate;
mod round;
mod shared;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use edbstress_format::Generation;
use edbstress_format::log::{
    CheckpointState, FRAGMENT_HEADER_LEN, LogPosition, LogRecord, MAX_RECORD_BODY_LEN,
    SegmentPacker,
};
use edbstress_io::{AlignedBuf, IoStats, open_backend};
use parking_lot::{Condvar, Mutex};

pub use self::counters::LogCounters;
use self::counters::{AtomicCounters, bump};
use self::geometry::{Geometry, SegAddr};
use self::precreate::run_precreator;
use self::round::{FlushReason, internal, run_flusher};
use self::shared::{PrecreateState, RoundIo, Shared, State, StopMode, stage};
use super::checkpoint::CheckpointFile;
use super::config::LogConfig;
use super::files::{FIRST_RECORD_OFFSET, closed_min_used};
use super::open::{OpenedLog, open_for_writing};
use crate::error::EngineError;
use crate::runtime::session_wait::SessionCondvar;

/// Initial size of a round's write image: 256 KiB, grown in these steps.
const IMAGE_BYTES: usize = 256 << 10;

/// Refuses 512-byte log segments with direct I/O where the log directory's device or
/// filesystem takes only larger direct requests (4 KiB logical sectors): every log
/// write would fail. Tried on the checkpoint file, which opening needs and which
/// holds written data; without one the first write reports the misalignment.
fn check_direct_segment_writes(config: &LogConfig) -> Result<(), EngineError> {
    let block = config.segment_len.bytes();
    if config.io_mode != edbstress_io::IoMode::Direct || block >= edbstress_io::BUF_ALIGN {
        return Ok(());
    }
    let path = config.dir.join(edbstress_format::log::CHECKPOINT_FILE_NAME);
    let Ok(file) =
        edbstress_io::DataFile::open(&path, config.io_mode, edbstress_io::Access::ReadOnly)
    else {
        return Ok(());
    };
    if file.takes_direct_requests_of(block)? {
        return Ok(());
    }
    Err(EngineError::Invalid(format!(
        "the log is written in {block}-byte segments (the log sector of the exchange2007 and \
         exchange2010 profiles), but direct I/O in {} takes only larger requests (a device or \
         filesystem with 4 KiB logical sectors); put the logs on storage with 512-byte \
         logical sectors, or run with buffered I/O (--buffered)",
        config.dir.display()
    )))
}

/// Makes the database's completed page writes durable (an `fdatasync` of the file).
pub type CheckpointBarrier = Box<dyn Fn() -> Result<(), EngineError> + Send + Sync>;

/// What the log writer asks the database to record, durably, before it acknowledges
/// anything written into a generation: see [`LogWriter::set_generation_hook`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerationRecord {
    /// The generation that now holds a durable write.
    pub generation: Generation,
    /// The checkpoint last written to `E00.chk` (every page change before it is
    /// durable in the database).
    pub checkpoint: LogPosition,
    /// The engine state written with that checkpoint.
    pub state: CheckpointState,
}

/// Records a [`GenerationRecord`] durably in the database header.
pub type GenerationHook = Box<dyn Fn(GenerationRecord) -> Result<(), EngineError> + Send + Sync>;

/// Appends transaction log records and makes them durable. `Send + Sync`: share it
/// through an `Arc`. See [`crate::runtime::log`] for positions and the on-disk protocol.
pub struct LogWriter {
    shared: Arc<Shared>,
    /// The checkpoint file's I/O counters (see `CheckpointFile::stats_handle`).
    checkpoint_io: Arc<Mutex<IoStats>>,
    /// What the scan that checked the start position read at open.
    scan_io: IoStats,
    flusher: Option<JoinHandle<()>>,
    precreator: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("dir", &self.shared.dir)
            .field("current", &self.current())
            .field("durable", &self.durable())
            .finish()
    }
}

impl LogWriter {
    /// Opens the log to continue writing at `start`: the end of the valid log as
    /// [`crate::runtime::log::LogScan`] reports it (`end_of_log`), a position returned by
    /// [`LogWriter::shutdown`], or `(1, 1, 0)` for a freshly prepared instance.
    ///
    /// The segment holding `start` is closed at `start` (rewritten, shadow first, if
    /// anything follows `start` in it or it is not yet closed), later slots are
    /// zeroed, and writing continues in the next segment; a missing generation file
    /// at segment 1 is created. `checkpoint` is the initial value for
    /// [`LogWriter::set_checkpoint`]. Starts the flusher and the next-file
    /// pre-creation threads.
    pub fn open(
        config: LogConfig,
        start: LogPosition,
        checkpoint: LogPosition,
        state: CheckpointState,
    ) -> Result<LogWriter, EngineError> {
        config.validate()?;
        check_direct_segment_writes(&config)?;
        let signatures = config.signatures();
        // One write outstanding at a time: a round waits for each (and its sync).
        // Opening the log (closing its tail, creating a generation) writes through it too.
        let mut log_io = open_backend(config.backend, 1)?;
        let OpenedLog {
            file,
            generation,
            segments,
            segment_len,
            next_index,
            fold,
            write_seq,
            oldest_generation,
            scan_io,
        } = open_for_writing(&config, start, checkpoint, &mut *log_io)?;
        let checkpoint_file = CheckpointFile::open(
            &config.dir,
            signatures,
            config.io_mode,
            config.backend,
            config.instance,
        )?;
        let checkpoint_io = checkpoint_file.stats_handle();
        // The pre-creation thread's zero-fill has a backend of its own: it must not
        // hold up log writes.
        let precreate_io = open_backend(config.backend, 1)?;
        let geometry = Geometry {
            first_generation: generation,
            first_segments: segments,
            segments: (config.file_len / segment_len.bytes()) as u32,
            seg_len: segment_len,
        };
        let tail = SegAddr {
            generation,
            index: next_index,
        };
        let start_pos = tail.at(FIRST_RECORD_OFFSET);
        let capacity = (config.buffer_len / segment_len.bytes()).max(4);
        let file_id = log_io.register(&file)?;
        let log_io_name = log_io.name();
        let round_io = RoundIo {
            file,
            file_id,
            generation,
            segments,
            next_index: u32::from(next_index),
            write_seq,
            fold,
            oldest_generation,
            delete_pending: false,
            shadow_of: None,
            image: AlignedBuf::try_new(IMAGE_BYTES)?,
            batch: Default::default(),
        };
        let shared = Arc::new(Shared {
            dir: config.dir.clone(),
            instance: config.instance,
            signatures,
            io_mode: config.io_mode,
            file_len: config.file_len,
            circular: config.circular,
            lazy_flush_interval: config.lazy_flush_interval,
            split_tail_write: config.split_tail_write,
            partial_tail_shadow: config.partial_tail_shadow,
            geometry,
            max_record_body: (segments.min(geometry.segments).saturating_sub(1) as usize
                * closed_min_used(segment_len))
            .min(MAX_RECORD_BODY_LEN),
            capacity,
            // ESE's capacity write: half the buffer ready (logwrite.cxx).
            wake_segments: (capacity / 2).max(1),
            state: Mutex::new(State {
                packer: SegmentPacker::with_segment_len(segment_len),
                tail,
                staged: Vec::new(),
                staged_payload: Vec::new(),
                in_flight: 0,
                writing: false,
                tail_deferred: false,
                tail_written: None,
                flusher_waits_for_round: false,
                task_wanted: LogPosition::default(),
                rounds: 0,
                in_flight_end: start_pos,
                appended_end: start_pos,
                durable: start_pos,
                first_unflushed: None,
                space_waiters: 0,
                error: None,
                stop: StopMode::Run,
            }),
            round_io: Mutex::new(round_io),
            work: Condvar::new(),
            round_cv: [SessionCondvar::new(), SessionCondvar::new()],
            space_cv: Condvar::new(),
            current: AtomicU64::new(start_pos.pack()),
            durable: AtomicU64::new(start_pos.pack()),
            checkpoint: Mutex::new((checkpoint, state)),
            retention_floor: AtomicU32::new(u32::MAX),
            checkpoint_file: Mutex::new(checkpoint_file),
            written_checkpoint: Mutex::new((checkpoint, state)),
            checkpoint_barrier: Mutex::new(None),
            generation_hook: Mutex::new(None),
            recorded_generation: AtomicU32::new(0),
            log_io: Mutex::new(log_io),
            log_io_name,
            counters: AtomicCounters::default(),
            precreate: Mutex::new(PrecreateState {
                wanted: true,
                ..PrecreateState::default()
            }),
            precreate_cv: Condvar::new(),
        });
        let spawn_err = |e: std::io::Error| {
            EngineError::Invalid(format!("cannot start a log writer thread: {e}"))
        };
        let precreator = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("log-precreate-{}", config.instance))
                .spawn(move || run_precreator(shared, precreate_io))
                .map_err(spawn_err)?
        };
        let mut writer = LogWriter {
            shared: Arc::clone(&shared),
            checkpoint_io,
            scan_io,
            flusher: None,
            precreator: Some(precreator),
        };
        let flusher = std::thread::Builder::new()
            .name(format!("log-flush-{}", config.instance))
            .spawn(move || run_flusher(shared))
            .map_err(spawn_err)?;
        writer.flusher = Some(flusher);
        Ok(writer)
    }

    /// Appends `records` contiguously and in order to the log buffer and returns the
    /// end position (just after the last record). Blocks while the buffer is full.
    pub fn append(&self, records: &[LogRecord]) -> Result<LogPosition, EngineError> {
        self.append_span(records).map(|(_, end)| end)
    }

    /// Like [`LogWriter::append`], returning the start of the first record as well
    /// (what a page's first-dirty position, and so the checkpoint, should be).
    pub fn append_span(
        &self,
        records: &[LogRecord],
    ) -> Result<(LogPosition, LogPosition), EngineError> {
        let shared = &*self.shared;
        let payload_len = shared.geometry.seg_len.payload_len();
        if records.is_empty() {
            let here = self.current();
            return Ok((here, here));
        }
        let mut bytes = 0usize;
        let mut body_bytes = 0u64;
        for record in records {
            let len = record.body_len();
            if len > shared.max_record_body {
                return Err(EngineError::Invalid(format!(
                    "log record body of {len} bytes exceeds the limit of {} bytes (a record \
                     must fit in one log file and be at most {MAX_RECORD_BODY_LEN} bytes)",
                    shared.max_record_body
                )));
            }
            body_bytes += len as u64;
            // Body, a fragment header per started segment, and a little waste per segment.
            bytes += len + 2 * FRAGMENT_HEADER_LEN * (len / (payload_len / 2) + 2);
        }
        let need = bytes / (payload_len - 2 * FRAGMENT_HEADER_LEN) + 2;

        let mut st = shared.state.lock();
        loop {
            st.usable()?;
            let unwritten = st.staged.len() + st.in_flight;
            if unwritten == 0 || unwritten + need <= shared.capacity {
                break;
            }
            bump(&shared.counters.buffer_waits, 1);
            st.space_waiters += 1;
            shared.work.notify_one();
            shared.space_cv.wait(&mut st);
            st.space_waiters -= 1;
        }
        let staged_before = st.staged.len();
        let generation_before = st.tail.generation;
        let was_idle = !st.has_unflushed();
        let mut first = None;
        let mut end = st.appended_end;
        for record in records {
            let len = record.body_len();
            // Records never span generations: one that does not fit the rest of this
            // file starts in the next one (the rest is written as empty closed
            // segments). Recovery can then always cut the log inside one file.
            if len > st.room_in_generation(&shared.geometry) {
                let generation = st.tail.generation;
                st.close_tail(&shared.geometry)?;
                while st.tail.generation == generation {
                    st.close_tail(&shared.geometry)?;
                }
            }
            first.get_or_insert(st.next_record_position());
            let State {
                packer,
                tail,
                staged,
                staged_payload,
                ..
            } = &mut *st;
            let mut last_closed = None;
            let mut stage_err = Ok(());
            packer
                .push(record, |payload| {
                    last_closed = Some(tail.at(FIRST_RECORD_OFFSET + payload.len() as u16));
                    if let Err(e) = stage(&shared.geometry, tail, staged, staged_payload, payload) {
                        stage_err = Err(e);
                    }
                })
                .map_err(|e| EngineError::Invalid(format!("cannot append a log record: {e}")))?;
            stage_err?;
            end = if packer.pending().is_empty() {
                // The record ended exactly where its last segment was closed.
                last_closed.unwrap_or(end)
            } else {
                tail.at(packer.next_record_offset())
            };
        }
        st.appended_end = end;
        let now_current = st.next_record_position();
        shared.current.store(now_current.pack(), Ordering::Release);
        if st.first_unflushed.is_none() {
            st.first_unflushed = Some(Instant::now());
        }
        let crossed_wake = (staged_before < shared.wake_segments
            && st.staged.len() >= shared.wake_segments)
            || st.tail.generation != generation_before;
        drop(st);
        // Without a timer the flusher has nothing to do for a lazy commit: it is woken
        // only by a capacity write or a new generation.
        if (was_idle && shared.lazy_flush_interval.is_some()) || crossed_wake {
            shared.work.notify_one();
        }
        let counters = &shared.counters;
        bump(&counters.appends, 1);
        bump(&counters.records, records.len() as u64);
        bump(&counters.record_bytes, body_bytes);
        Ok((first.unwrap_or(end), end))
    }

    /// Waits until everything up to `pos` is durable (written and `fdatasync`ed).
    /// Concurrent callers share one write (group commit): a caller that finds no
    /// round in progress runs one itself, taking everything appended so far; callers
    /// arriving during a round wait for the round that covers them, and one of those
    /// the round in progress does not cover is woken at its end to lead the next. A
    /// `pos` beyond the appended data waits for all appended data.
    pub fn flush_to(&self, pos: LogPosition) -> Result<(), EngineError> {
        let shared = &*self.shared;
        if shared.durable_position() >= pos {
            return Ok(());
        }
        let mut st = shared.state.lock();
        let target = pos.min(st.appended_end);
        if st.durable >= target {
            return Ok(());
        }
        st.usable()?;
        bump(&shared.counters.flush_waits, 1);
        loop {
            if let Some(e) = &st.error {
                return Err(EngineError::ShutDown(Some(e.clone())));
            }
            if st.stop == StopMode::Abandon {
                return Err(EngineError::ShutDown(None));
            }
            if st.durable >= target {
                return Ok(());
            }
            if st.writing {
                // The round in progress covers `target`, or the next one will.
                let covering = st.rounds + u64::from(target > st.in_flight_end);
                shared.round_cv[(covering % 2) as usize].wait(&mut st);
            } else if st.has_unflushed() && edbstress_io::tasks::in_task() {
                // The flusher leads it (see `State::task_wanted`); every round's end
                // notifies both condition variables.
                if st.task_wanted < target {
                    st.task_wanted = target;
                }
                shared.work.notify_one();
                shared.round_cv[0].wait(&mut st);
            } else if st.has_unflushed() {
                // A failed round is recorded in the state: the loop returns it.
                let _ = shared.run_round(&mut st, FlushReason::Commit);
            } else {
                return Err(internal(format!(
                    "a commit waits for {target} with nothing to write (durable to {})",
                    st.durable
                )));
            }
        }
    }

    /// Where the next record will start: at or after the end of every appended record.
    pub fn current(&self) -> LogPosition {
        LogPosition::unpack(self.shared.current.load(Ordering::Acquire))
    }

    /// End of durable data: every record ending at or before it is on stable storage.
    pub fn durable(&self) -> LogPosition {
        self.shared.durable_position()
    }

    /// Log bytes (whole segments, segment headers included) from `older` to `newer`;
    /// 0 if `newer` is not after `older`.
    pub fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        self.shared.geometry.bytes_between(older, newer)
    }

    /// The generation records are being appended to.
    pub fn generation(&self) -> Generation {
        self.current().generation
    }

    /// Sets the checkpoint (oldest position recovery needs) written to `E00.chk` at
    /// the next roll or [`LogWriter::write_checkpoint`], with the engine state recovery
    /// must start from (taken at the same moment as `pos`, or later). The position
    /// written is never beyond the durable end of the log.
    pub fn set_checkpoint(&self, pos: LogPosition, state: CheckpointState) {
        *self.shared.checkpoint.lock() = (pos, state);
    }

    /// Sets what makes the database's page writes durable; it runs before every
    /// checkpoint write (the checkpoint must never cover a page write that a power
    /// loss could still undo).
    pub fn set_checkpoint_barrier(&self, barrier: CheckpointBarrier) {
        *self.shared.checkpoint_barrier.lock() = Some(barrier);
    }

    /// Sets what records, in the database, that a generation holds durable data; it
    /// runs once per generation after the first write into it is durable and before
    /// that write is acknowledged (so a lost newest log is detectable: docs/format.md,
    /// "log required"). `recorded` is the generation the database already records;
    /// set the hook before the first append.
    pub fn set_generation_hook(&self, hook: GenerationHook, recorded: Generation) {
        *self.shared.generation_hook.lock() = Some(hook);
        self.shared
            .recorded_generation
            .store(recorded.get(), Ordering::Release);
    }

    /// Writes the checkpoint file now (both copies, each made durable in turn).
    /// Returns the position written.
    pub fn write_checkpoint(&self) -> Result<LogPosition, EngineError> {
        self.shared.write_checkpoint()
    }

    /// Circular logging keeps generations `>= generation` (for readers such as log
    /// replication that have not finished with them); `Generation::MAX` removes the
    /// floor, and circular logging keeps what the checkpoint needs.
    pub fn set_retention_floor(&self, generation: Generation) {
        self.shared
            .retention_floor
            .store(generation.get(), Ordering::Release);
    }

    /// A snapshot of this writer's I/O as the backends that carried it counted it: log
    /// writes (class `LogWrite`: one operation per write, its latency from submission
    /// to the end of the `fdatasync` that makes it durable), and the bookkeeping —
    /// log file creation (`LogCreate`), checkpoint file writes (`LogCheckpoint`), what
    /// opening the log wrote (`LogReopen`) and read (`LogRead`: the scan that checked
    /// the start position and the generation files it reopened).
    pub fn stats(&self) -> IoStats {
        let mut stats = self.shared.log_io.lock().stats().clone();
        stats.merge(&self.scan_io);
        stats.merge(&self.checkpoint_io.lock());
        stats.merge(&self.shared.precreate.lock().stats);
        stats
    }

    /// "io_uring" or "threads": the backend that carries the log writes.
    pub fn backend_name(&self) -> &'static str {
        self.shared.log_io_name
    }

    /// A snapshot of the writer's counters.
    pub fn counters(&self) -> LogCounters {
        self.shared.counters.snapshot()
    }

    /// Flushes everything appended, stops the threads and writes the checkpoint.
    /// Returns the end of the log as a reader finds it (pass it to [`LogWriter::open`]
    /// to continue): the end of the last record, or the start of the next generation
    /// when that record's file is full. (The flusher closed the last segment, so the
    /// next record would have started in the next one; the reader reports the end of
    /// the records, and a clean shutdown records that.)
    pub fn shutdown(mut self) -> Result<LogPosition, EngineError> {
        self.stop(StopMode::Shutdown);
        let end = {
            let st = self.shared.state.lock();
            if let Some(e) = &st.error {
                return Err(EngineError::ShutDown(Some(e.clone())));
            }
            st.appended_end
        };
        self.shared.write_checkpoint()?;
        let addr = SegAddr {
            generation: end.generation,
            index: end.segment,
        };
        let geometry = &self.shared.geometry;
        if end.offset > FIRST_RECORD_OFFSET && geometry.is_last_slot(addr) {
            if let Some(next) = geometry.next(addr) {
                return Ok(next.at(FIRST_RECORD_OFFSET));
            }
        }
        Ok(end)
    }

    /// Crash simulation: stops the threads without writing what is still in the
    /// buffer (a write already in progress completes). Dropping a writer without
    /// [`LogWriter::shutdown`] does the same.
    pub fn abandon(mut self) {
        self.stop(StopMode::Abandon);
    }

    fn stop(&mut self, mode: StopMode) {
        {
            let mut st = self.shared.state.lock();
            if st.stop == StopMode::Run {
                st.stop = mode;
            }
            self.shared.work.notify_all();
            self.shared.wake_all_committers();
            self.shared.space_cv.notify_all();
        }
        if let Some(flusher) = self.flusher.take() {
            if flusher.join().is_err() {
                tracing::error!("the log flusher thread panicked");
            }
        }
        {
            // A round a committer leads completes before the writer counts as stopped
            // (one already writing when the writer is abandoned included).
            let mut st = self.shared.state.lock();
            while st.writing && st.error.is_none() {
                let round = (st.rounds % 2) as usize;
                self.shared.round_cv[round].wait(&mut st);
            }
        }
        {
            let mut p = self.shared.precreate.lock();
            p.stop = true;
            self.shared.precreate_cv.notify_all();
        }
        if let Some(precreator) = self.precreator.take() {
            if precreator.join().is_err() {
                tracing::error!("the log pre-creation thread panicked");
            }
        }
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        self.stop(StopMode::Abandon);
    }
}
