//! The log writer: a log buffer filled by committing sessions, a flusher thread that
//! makes it durable with group commit, generation rolls, the checkpoint file and
//! circular logging. See the module documentation of [`crate::log`] for the protocol.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use edbstress_format::log::{
    CheckpointState, DEFAULT_LOG_FILE_LEN, FRAGMENT_HEADER_LEN, LogFileHeader, LogPosition,
    LogRecord, MAX_LOG_FILE_LEN, MAX_RECORD_BODY_LEN, SEGMENT_LEN, SEGMENT_PAYLOAD_LEN,
    SegmentPacker,
};
use edbstress_io::{AlignedBuf, DataFile, IoClass, IoMode, IoStats};
use parking_lot::{Condvar, Mutex};

use super::LogSignatures;
use super::checkpoint::CheckpointFile;
use super::files::{
    CLOSED_MIN_USED, FIRST_RECORD_OFFSET, RunningChecksum, create_zeroed_file, generation_path,
    install_generation, next_file_path, read_file_header, seal_data_segment,
};
use super::open::{OpenedLog, open_for_writing};
use crate::error::EngineError;

/// Default log buffer: 9000 × 512 bytes, the value of Jetstress ESRP runs.
pub const DEFAULT_LOG_BUFFER_LEN: usize = 9000 * 512;
/// Default time after which appended records are written without a commit asking.
pub const DEFAULT_LAZY_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

/// How an instance's log is written.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// The log directory (holds `E00*.log`, `E00tmp.log`, `E00.chk`).
    pub dir: PathBuf,
    /// Instance number, for I/O accounting.
    pub instance: u16,
    /// Signature of the database the log belongs to.
    pub db_signature: u64,
    /// Signature of the log stream.
    pub log_signature: u64,
    /// Length of new generation files: a multiple of 4096, at least 3 segments.
    /// Existing files keep the length in their header.
    pub file_len: usize,
    /// Log buffer size in bytes; appends wait while this much is not yet durable.
    pub buffer_len: usize,
    /// Appended records are written at the latest this long after the first of them.
    pub lazy_flush_interval: Duration,
    /// Delete generations wholly before the checkpoint (and the retention floor).
    pub circular: bool,
    /// Direct (`O_DIRECT`) or buffered; every write is followed by `fdatasync` either way.
    pub io_mode: IoMode,
}

impl LogConfig {
    /// The defaults: 1 MiB files, a 9000 × 512-byte buffer, 10 ms lazy flush, no
    /// circular logging, direct I/O.
    pub fn new(
        dir: impl Into<PathBuf>,
        instance: u16,
        db_signature: u64,
        log_signature: u64,
    ) -> LogConfig {
        LogConfig {
            dir: dir.into(),
            instance,
            db_signature,
            log_signature,
            file_len: DEFAULT_LOG_FILE_LEN,
            buffer_len: DEFAULT_LOG_BUFFER_LEN,
            lazy_flush_interval: DEFAULT_LAZY_FLUSH_INTERVAL,
            circular: false,
            io_mode: IoMode::Direct,
        }
    }

    /// The signatures every log file and checkpoint must carry.
    pub fn signatures(&self) -> LogSignatures {
        LogSignatures {
            log_signature: self.log_signature,
            db_signature: self.db_signature,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), EngineError> {
        if self.file_len % SEGMENT_LEN != 0
            || !(3 * SEGMENT_LEN..=MAX_LOG_FILE_LEN).contains(&self.file_len)
        {
            return Err(EngineError::Invalid(format!(
                "log file length {} is not a multiple of {SEGMENT_LEN} between {} and {} bytes",
                self.file_len,
                3 * SEGMENT_LEN,
                MAX_LOG_FILE_LEN
            )));
        }
        if self.buffer_len < SEGMENT_LEN {
            return Err(EngineError::Invalid(format!(
                "log buffer of {} bytes is smaller than one {SEGMENT_LEN}-byte segment",
                self.buffer_len
            )));
        }
        if self.lazy_flush_interval.is_zero() {
            return Err(EngineError::Invalid(
                "the lazy flush interval must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

/// Counters of a log writer since it was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    /// Records appended.
    pub records: u64,
    /// Encoded record body bytes appended.
    pub record_bytes: u64,
    /// `append` calls.
    pub appends: u64,
    /// Log writes (each followed by one `fdatasync`).
    pub writes: u64,
    /// Bytes written by log writes.
    pub bytes_written: u64,
    /// Segment images written, shadow copies included.
    pub segments_written: u64,
    /// `fdatasync` calls after log writes.
    pub fsyncs: u64,
    /// Nanoseconds spent in those `fdatasync` calls.
    pub fsync_ns: u64,
    /// Flush rounds of the flusher thread (group-commit batches); a round is one write
    /// and sync, two when it closes a shadowed tail segment, more across a roll.
    pub flush_batches: u64,
    /// Rounds started because a commit waited in `flush_to`.
    pub commit_flushes: u64,
    /// Rounds started because the buffer passed a quarter full.
    pub capacity_flushes: u64,
    /// Rounds started by the lazy-flush timer.
    pub lazy_flushes: u64,
    /// `flush_to` calls that had to wait.
    pub flush_waits: u64,
    /// Times an `append` waited for buffer space.
    pub buffer_waits: u64,
    /// Generations rolled (new files started).
    pub generations_rolled: u64,
    /// Rolls that waited for the next file (its background creation was still
    /// running, or it had to be created during the roll).
    pub roll_waits: u64,
    /// Next files pre-created in the background.
    pub files_precreated: u64,
    /// Checkpoint file writes (each writes both copies).
    pub checkpoint_writes: u64,
    /// Generations deleted by circular logging.
    pub generations_deleted: u64,
}

/// [`LogCounters`] as atomics.
#[derive(Default)]
struct AtomicCounters {
    records: AtomicU64,
    record_bytes: AtomicU64,
    appends: AtomicU64,
    writes: AtomicU64,
    bytes_written: AtomicU64,
    segments_written: AtomicU64,
    fsyncs: AtomicU64,
    fsync_ns: AtomicU64,
    flush_batches: AtomicU64,
    commit_flushes: AtomicU64,
    capacity_flushes: AtomicU64,
    lazy_flushes: AtomicU64,
    flush_waits: AtomicU64,
    buffer_waits: AtomicU64,
    generations_rolled: AtomicU64,
    roll_waits: AtomicU64,
    files_precreated: AtomicU64,
    checkpoint_writes: AtomicU64,
    generations_deleted: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl AtomicCounters {
    fn snapshot(&self) -> LogCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogCounters {
            records: get(&self.records),
            record_bytes: get(&self.record_bytes),
            appends: get(&self.appends),
            writes: get(&self.writes),
            bytes_written: get(&self.bytes_written),
            segments_written: get(&self.segments_written),
            fsyncs: get(&self.fsyncs),
            fsync_ns: get(&self.fsync_ns),
            flush_batches: get(&self.flush_batches),
            commit_flushes: get(&self.commit_flushes),
            capacity_flushes: get(&self.capacity_flushes),
            lazy_flushes: get(&self.lazy_flushes),
            flush_waits: get(&self.flush_waits),
            buffer_waits: get(&self.buffer_waits),
            generations_rolled: get(&self.generations_rolled),
            roll_waits: get(&self.roll_waits),
            files_precreated: get(&self.files_precreated),
            checkpoint_writes: get(&self.checkpoint_writes),
            generations_deleted: get(&self.generations_deleted),
        }
    }
}

/// A logical segment: generation and index within its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegAddr {
    pub(crate) generation: u32,
    pub(crate) index: u16,
}

impl SegAddr {
    fn at(self, offset: u16) -> LogPosition {
        LogPosition {
            generation: self.generation,
            segment: self.index,
            offset,
        }
    }
}

/// File geometry of the generations this writer writes: the one it opened in keeps
/// the length in its header, new ones get the configured length.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    first_generation: u32,
    first_segments: u32,
    segments: u32,
}

impl Geometry {
    fn segments_in(&self, generation: u32) -> u32 {
        if generation == self.first_generation {
            self.first_segments
        } else {
            self.segments
        }
    }

    fn is_last_slot(&self, addr: SegAddr) -> bool {
        u32::from(addr.index) + 1 >= self.segments_in(addr.generation)
    }

    /// The segment after `addr`: the next slot, or slot 1 of the next generation.
    fn next(&self, addr: SegAddr) -> Option<SegAddr> {
        if self.is_last_slot(addr) {
            Some(SegAddr {
                generation: addr.generation.checked_add(1)?,
                index: 1,
            })
        } else {
            Some(SegAddr {
                generation: addr.generation,
                index: addr.index + 1,
            })
        }
    }

    /// Log bytes (whole segments, headers included) from `older` to `newer`.
    fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        if newer <= older {
            return 0;
        }
        let seg = SEGMENT_LEN as u64;
        let linear = |segment: u16, offset: u16| u64::from(segment) * seg + u64::from(offset);
        if older.generation == newer.generation {
            return linear(newer.segment, newer.offset)
                .saturating_sub(linear(older.segment, older.offset));
        }
        let data_len = |generation: u32| u64::from(self.segments_in(generation)) * seg;
        // Rest of the older generation, whole generations between (slot 0 is the file
        // header), start of the newer one.
        let mut total =
            data_len(older.generation).saturating_sub(linear(older.segment, older.offset));
        let between = u64::from(newer.generation - older.generation - 1);
        total += between * u64::from(self.segments.saturating_sub(1)) * seg;
        let first = self.first_generation;
        if first > older.generation && first < newer.generation {
            // Counted above with the configured length.
            total = (total + data_len(first)).saturating_sub(u64::from(self.segments) * seg);
        }
        total + linear(newer.segment, newer.offset).saturating_sub(seg)
    }
}

/// A closed segment waiting in the log buffer.
#[derive(Clone, Copy, Debug)]
struct StagedSegment {
    addr: SegAddr,
    used: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopMode {
    Run,
    /// Flush everything, then stop.
    Shutdown,
    /// Stop without writing anything more (crash simulation).
    Abandon,
}

/// Everything appenders and the flusher share, under one mutex.
struct State {
    packer: SegmentPacker,
    /// The segment `packer.pending()` belongs to.
    tail: SegAddr,
    /// Closed segments not yet taken by the flusher, in log order.
    staged: Vec<StagedSegment>,
    /// Their payloads, `SEGMENT_PAYLOAD_LEN` bytes each (zero padded).
    staged_payload: Vec<u8>,
    /// Segments taken by the flusher and not yet durable.
    in_flight: usize,
    /// The tail segment and payload length the flusher last took.
    taken_tail: Option<(SegAddr, usize)>,
    /// End of the last appended record.
    appended_end: LogPosition,
    /// End of durable data.
    durable: LogPosition,
    /// The highest position a `flush_to` is waiting for.
    requested: LogPosition,
    /// When the oldest record not yet taken by the flusher was appended.
    first_unflushed: Option<Instant>,
    /// Appends waiting for buffer space (the flusher writes at once for them).
    space_waiters: usize,
    /// Set when a write failed: the log cannot be trusted any more.
    error: Option<String>,
    stop: StopMode,
}

impl State {
    fn usable(&self) -> Result<(), EngineError> {
        if let Some(e) = &self.error {
            return Err(EngineError::ShutDown(Some(e.clone())));
        }
        match self.stop {
            StopMode::Run => Ok(()),
            StopMode::Shutdown | StopMode::Abandon => Err(EngineError::ShutDown(None)),
        }
    }

    fn has_unflushed(&self) -> bool {
        let pending = self.packer.pending().len();
        let taken = match self.taken_tail {
            Some((addr, len)) if addr == self.tail => len,
            _ => 0,
        };
        !self.staged.is_empty() || pending > taken
    }

    /// Body bytes a record starting now can hold without leaving the tail's file:
    /// the first fragment fills the pending segment, later ones whole segments, each
    /// closed once fewer than a header and one byte are left.
    fn room_in_generation(&self, geometry: &Geometry) -> usize {
        let slots_after = geometry
            .segments_in(self.tail.generation)
            .saturating_sub(u32::from(self.tail.index) + 1) as usize;
        CLOSED_MIN_USED - self.packer.pending().len() + slots_after * CLOSED_MIN_USED
    }

    fn next_record_position(&self) -> LogPosition {
        self.tail.at(self.packer.next_record_offset())
    }

    /// Closes the pending segment early (it is written padded), or, if it is empty,
    /// stages an empty closed segment: the next record starts in the next segment.
    fn close_tail(&mut self, geometry: &Geometry) -> Result<(), EngineError> {
        let State {
            packer,
            tail,
            staged,
            staged_payload,
            ..
        } = self;
        let mut result = Ok(());
        let mut sink = |payload: &[u8]| {
            if let Err(e) = stage(geometry, tail, staged, staged_payload, payload) {
                result = Err(e);
            }
        };
        if packer.pending().is_empty() {
            sink(&[]);
        } else {
            packer.close_segment(sink);
        }
        result
    }

    /// Moves the staged segments and a copy of the tail into `batch`.
    fn take_batch(&mut self, batch: &mut Batch) {
        batch.segments.clear();
        batch.payload.clear();
        std::mem::swap(&mut self.staged, &mut batch.segments);
        std::mem::swap(&mut self.staged_payload, &mut batch.payload);
        batch.tail_payload.clear();
        let pending = self.packer.pending();
        if pending.is_empty() {
            batch.tail = None;
        } else {
            batch.tail_payload.extend_from_slice(pending);
            batch.tail = Some(self.tail);
            self.taken_tail = Some((self.tail, pending.len()));
        }
        self.in_flight = batch.segments.len() + usize::from(batch.tail.is_some());
        self.first_unflushed = None;
    }
}

/// Appends a closed segment payload to the log buffer and advances the tail.
fn stage(
    geometry: &Geometry,
    tail: &mut SegAddr,
    staged: &mut Vec<StagedSegment>,
    staged_payload: &mut Vec<u8>,
    payload: &[u8],
) -> Result<(), EngineError> {
    staged.push(StagedSegment {
        addr: *tail,
        used: payload.len() as u16,
    });
    staged_payload.extend_from_slice(payload);
    staged_payload.resize(staged.len() * SEGMENT_PAYLOAD_LEN, 0);
    *tail = geometry.next(*tail).ok_or_else(|| {
        EngineError::Invalid("log generation numbers are exhausted (2^32 generations)".into())
    })?;
    Ok(())
}

/// What the flusher writes in one round.
#[derive(Default)]
struct Batch {
    segments: Vec<StagedSegment>,
    payload: Vec<u8>,
    tail: Option<SegAddr>,
    tail_payload: Vec<u8>,
}

/// State of the background creation of `E00tmp.log`.
#[derive(Default)]
struct PrecreateState {
    /// A zero-filled, durable `E00tmp.log` is waiting.
    ready: bool,
    /// The flusher asked for one.
    wanted: bool,
    creating: bool,
    stop: bool,
    error: Option<String>,
}

struct Shared {
    dir: PathBuf,
    instance: u16,
    signatures: LogSignatures,
    io_mode: IoMode,
    file_len: usize,
    circular: bool,
    lazy_flush_interval: Duration,
    geometry: Geometry,
    /// Largest record body: it must fit in one file.
    max_record_body: usize,
    /// Buffer capacity in segments.
    capacity: usize,
    /// Staged segments that wake the flusher.
    wake_segments: usize,

    state: Mutex<State>,
    /// The flusher waits here for work.
    work: Condvar,
    /// `flush_to` waits here for durability.
    durable_cv: Condvar,
    /// `append` waits here for buffer space.
    space_cv: Condvar,

    current: AtomicU64,
    durable: AtomicU64,
    /// The checkpoint to write and the engine state that goes with it, set together.
    checkpoint: Mutex<(LogPosition, CheckpointState)>,
    retention_floor: AtomicU32,

    checkpoint_file: Mutex<CheckpointFile>,
    /// The checkpoint and state last written to `E00.chk` (what the database header
    /// may safely record as its own fallback checkpoint).
    written_checkpoint: Mutex<(LogPosition, CheckpointState)>,
    /// Makes the database's page writes durable before a checkpoint is written.
    checkpoint_barrier: Mutex<Option<CheckpointBarrier>>,
    /// Records in the database that a generation holds durable data.
    generation_hook: Mutex<Option<GenerationHook>>,
    /// Highest generation the hook recorded (or the database had recorded at open).
    recorded_generation: AtomicU32,
    stats: Mutex<IoStats>,
    counters: AtomicCounters,

    precreate: Mutex<PrecreateState>,
    precreate_cv: Condvar,
}

impl Shared {
    fn durable_position(&self) -> LogPosition {
        LogPosition::unpack(self.durable.load(Ordering::Acquire))
    }

    /// The checkpoint as written: never beyond durable data, or recovery would start
    /// after the end of the log.
    fn checkpoint_to_write(&self) -> LogPosition {
        let set = self.checkpoint.lock().0;
        set.min(self.durable_position())
    }

    fn write_checkpoint(&self) -> Result<LogPosition, EngineError> {
        let mut file = self.checkpoint_file.lock();
        let state = self.checkpoint.lock().1;
        let checkpoint = self.checkpoint_to_write();
        // The position covers only pages whose writes had completed; completed is not
        // durable (a device cache may still lose them), and recovery will not replay
        // changes before the checkpoint, so those writes are made durable first.
        if let Some(barrier) = &*self.checkpoint_barrier.lock() {
            barrier()?;
        }
        file.write(checkpoint, state)?;
        *self.written_checkpoint.lock() = (checkpoint, state);
        bump(&self.counters.checkpoint_writes, 1);
        Ok(checkpoint)
    }

    fn advance_durable(&self, pos: LogPosition) {
        let mut st = self.state.lock();
        if pos > st.durable {
            st.durable = pos;
            self.durable.store(pos.pack(), Ordering::Release);
        }
        self.durable_cv.notify_all();
    }

    fn abandoned(&self) -> bool {
        self.state.lock().stop == StopMode::Abandon
    }

    fn request_next_file(&self) {
        let mut p = self.precreate.lock();
        p.wanted = true;
        self.precreate_cv.notify_all();
    }

    /// The zero-filled next file: the pre-created one, or one made now.
    fn take_next_file(&self) -> Result<DataFile, EngineError> {
        let path = next_file_path(&self.dir);
        {
            let mut p = self.precreate.lock();
            let mut waited = false;
            while p.creating || (p.wanted && !p.stop && !p.ready && p.error.is_none()) {
                waited = true;
                self.precreate_cv.wait(&mut p);
            }
            if waited {
                bump(&self.counters.roll_waits, 1);
            }
            if p.ready {
                p.ready = false;
                drop(p);
                return Ok(DataFile::open(
                    &path,
                    self.io_mode,
                    edbstress_io::Access::ReadWrite,
                )?);
            }
            if let Some(e) = p.error.take() {
                tracing::warn!(
                    "pre-creating {} failed ({e}); creating it during the roll",
                    path.display()
                );
            }
            p.wanted = false;
        }
        bump(&self.counters.roll_waits, 1);
        create_zeroed_file(&path, self.file_len, self.io_mode)
    }
}

/// Where the newest durable copy of the partially filled tail segment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Newest {
    /// In both its slot and the shadow slot (written together when nothing of it was
    /// durable before).
    Both,
    /// In its own slot; the shadow slot holds an older copy.
    Real,
    /// In the shadow slot; its own slot holds an older copy.
    Shadow,
}

/// The partially filled tail segment as it is on disk.
#[derive(Clone, Copy, Debug)]
struct TailOnDisk {
    index: u16,
    newest: Newest,
}

/// One segment image of a write.
struct SegImage<'a> {
    logical: u16,
    shadow: bool,
    closed: bool,
    payload: &'a [u8],
}

/// The flusher thread's own state: the open generation file and what is on disk.
struct FlusherIo {
    file: DataFile,
    generation: u32,
    segments: u32,
    /// First slot of the current file whose final (closed) version is not written.
    next_index: u32,
    /// The partially filled tail segment on disk, whose copies hold acknowledged data:
    /// no single write may overwrite every copy of its newest content.
    tail_on_disk: Option<TailOnDisk>,
    write_seq: u64,
    fold: RunningChecksum,
    oldest_generation: u32,
    /// Circular logging waits for the new generation to be recorded in the database
    /// (whose header then names a checkpoint at least as new as the one that allows
    /// the deletion): the header's checkpoint must never point at a deleted file.
    delete_pending: bool,
    image: AlignedBuf,
}

impl FlusherIo {
    /// Writes a batch: closed segments in order, then the tail; rolls to the next
    /// generation whenever a file fills.
    fn write_batch(&mut self, shared: &Shared, batch: &Batch) -> Result<(), EngineError> {
        let count = batch.segments.len();
        let closed_payload = |i: usize| {
            let at = i * SEGMENT_PAYLOAD_LEN;
            &batch.payload[at..at + usize::from(batch.segments[i].used)]
        };
        let mut i = 0;
        loop {
            if shared.abandoned() {
                return Ok(());
            }
            let generation = self.generation;
            let mut j = i;
            while j < count && batch.segments[j].addr.generation == generation {
                j += 1;
            }
            let tail = if j == count {
                batch.tail.filter(|t| t.generation == generation)
            } else {
                None
            };
            if i == j && tail.is_none() {
                if i == count && batch.tail.is_none() {
                    return Ok(());
                }
                return Err(internal(format!(
                    "log batch continues in another generation while generation {generation:#x} \
                     is not full"
                )));
            }

            // The tail segment of the previous round is closed now: write its final
            // version before anything touches its shadow slot, and never over the
            // only slot holding its newest copy.
            if let (Some(on_disk), true) = (self.tail_on_disk, i < j) {
                let staged = batch.segments[i];
                if staged.addr.index != on_disk.index {
                    return Err(internal(format!(
                        "log batch starts at segment {} but the tail on disk is segment {}",
                        staged.addr.index, on_disk.index
                    )));
                }
                let closed = SegImage {
                    logical: on_disk.index,
                    shadow: false,
                    closed: true,
                    payload: closed_payload(i),
                };
                if on_disk.newest == Newest::Real {
                    let shadow = SegImage {
                        shadow: true,
                        ..closed
                    };
                    self.write_segments(shared, on_disk.index + 1, &[shadow])?;
                    self.tail_on_disk = Some(TailOnDisk {
                        newest: Newest::Shadow,
                        ..on_disk
                    });
                    shared.advance_durable(staged.addr.at(FIRST_RECORD_OFFSET + staged.used));
                    if shared.abandoned() {
                        return Ok(());
                    }
                }
                let closed = SegImage {
                    logical: on_disk.index,
                    shadow: false,
                    closed: true,
                    payload: closed_payload(i),
                };
                self.write_segments(shared, on_disk.index, &[closed])?;
                self.tail_on_disk = None;
                shared.advance_durable(self.after(staged.addr));
                i += 1;
                if shared.abandoned() {
                    return Ok(());
                }
            }

            // Then the closed segments that follow and the new tail.
            let mut items: Vec<SegImage<'_>> = (i..j)
                .map(|k| SegImage {
                    logical: batch.segments[k].addr.index,
                    shadow: false,
                    closed: true,
                    payload: closed_payload(k),
                })
                .collect();
            let mut new_tail = None;
            if let Some(t) = tail {
                let payload = &batch.tail_payload[..];
                let image = |shadow| SegImage {
                    logical: t.index,
                    shadow,
                    closed: false,
                    payload,
                };
                let newest = match self.tail_on_disk {
                    // A rewrite goes to the one slot without the newest copy: a torn
                    // write then still leaves that copy.
                    Some(on_disk) if on_disk.index == t.index && items.is_empty() => {
                        match on_disk.newest {
                            Newest::Both | Newest::Real => {
                                items.push(image(true));
                                Newest::Shadow
                            }
                            Newest::Shadow => {
                                items.push(image(false));
                                Newest::Real
                            }
                        }
                    }
                    None => {
                        items.push(image(false));
                        items.push(image(true));
                        Newest::Both
                    }
                    Some(on_disk) => {
                        return Err(internal(format!(
                            "log tail segment {} written while segment {} is the tail on disk",
                            t.index, on_disk.index
                        )));
                    }
                };
                new_tail = Some((t, newest));
            }
            if let Some(first) = items.first() {
                let first_slot = first.logical + u16::from(first.shadow);
                self.write_segments(shared, first_slot, &items)?;
            }
            let durable = match new_tail {
                Some((t, newest)) => {
                    self.tail_on_disk = Some(TailOnDisk {
                        index: t.index,
                        newest,
                    });
                    Some(t.at(FIRST_RECORD_OFFSET + batch.tail_payload.len() as u16))
                }
                None if i < j => Some(self.after(batch.segments[j - 1].addr)),
                None => None,
            };
            if let Some(pos) = durable {
                shared.advance_durable(pos);
            }
            i = j;
            if self.next_index >= self.segments {
                self.roll(shared)?;
                continue;
            }
            if i < count || batch.tail.is_some_and(|t| t.generation != generation) {
                return Err(internal(format!(
                    "log batch continues beyond generation {generation:#x} before it is full"
                )));
            }
            return Ok(());
        }
    }

    /// Where the next record starts after the closed segment `addr`.
    fn after(&self, addr: SegAddr) -> LogPosition {
        let next = if u32::from(addr.index) + 1 >= self.segments {
            SegAddr {
                generation: addr.generation.wrapping_add(1),
                index: 1,
            }
        } else {
            SegAddr {
                generation: addr.generation,
                index: addr.index + 1,
            }
        };
        next.at(FIRST_RECORD_OFFSET)
    }

    /// One write and `fdatasync` of consecutive slots from `first_slot`, each sealed
    /// with one new write sequence. Closed real segments are final: they advance
    /// `next_index` and the running checksum.
    fn write_segments(
        &mut self,
        shared: &Shared,
        first_slot: u16,
        items: &[SegImage<'_>],
    ) -> Result<(), EngineError> {
        let count = items.len();
        if u32::from(first_slot) + count as u32 > self.segments {
            return Err(internal(format!(
                "log write of {count} segments at slot {first_slot} runs past the end of a \
                 {}-segment file",
                self.segments
            )));
        }
        let len = count * SEGMENT_LEN;
        if self.image.len() < len {
            self.image = AlignedBuf::try_new(len.next_multiple_of(64 * SEGMENT_LEN))?;
        }
        self.write_seq += 1;
        let seq = self.write_seq;
        for (n, item) in items.iter().enumerate() {
            let slot = first_slot + n as u16;
            let physical = item.logical + u16::from(item.shadow);
            let in_order = item.shadow || u32::from(item.logical) >= self.next_index;
            if physical != slot || slot == 0 || !in_order {
                return Err(internal(format!(
                    "log segment {} (shadow: {}) does not belong at slot {slot} (next unwritten \
                     segment {})",
                    item.logical, item.shadow, self.next_index
                )));
            }
            let seg = &mut self.image[n * SEGMENT_LEN..(n + 1) * SEGMENT_LEN];
            seal_data_segment(
                seg,
                self.generation,
                item.logical,
                item.shadow,
                item.payload,
                item.closed,
                seq,
            );
        }

        let offset = u64::from(first_slot) * SEGMENT_LEN as u64;
        let started = Instant::now();
        let written = self.file.write_all_at(&self.image[..len], offset);
        let synced_at = Instant::now();
        let result = written.and_then(|()| self.file.sync_data());
        let finished = Instant::now();
        shared.stats.lock().record(
            shared.instance,
            IoClass::LogWrite,
            len as u64,
            (finished - started).as_nanos() as u64,
            result.is_ok(),
        );
        result?;
        let counters = &shared.counters;
        bump(&counters.writes, 1);
        bump(&counters.bytes_written, len as u64);
        bump(&counters.segments_written, count as u64);
        bump(&counters.fsyncs, 1);
        bump(&counters.fsync_ns, (finished - synced_at).as_nanos() as u64);
        // Before anything written here is acknowledged: the database must know that
        // this generation holds durable data (docs/format.md, "log required").
        if self.generation > shared.recorded_generation.load(Ordering::Acquire) {
            self.record_generation(shared)?;
        }

        for (n, item) in items.iter().enumerate() {
            if item.closed && !item.shadow {
                if u32::from(item.logical) != self.next_index {
                    return Err(internal(format!(
                        "closed log segment {} written before segment {}",
                        item.logical, self.next_index
                    )));
                }
                self.fold
                    .add_segment(&self.image[n * SEGMENT_LEN..(n + 1) * SEGMENT_LEN]);
                self.next_index += 1;
            }
        }
        Ok(())
    }

    /// Starts the next generation: header into the zero-filled next file, rename,
    /// directory sync; then the checkpoint and circular logging.
    fn roll(&mut self, shared: &Shared) -> Result<(), EngineError> {
        let generation = self.generation.checked_add(1).ok_or_else(|| {
            EngineError::Invalid("log generation numbers are exhausted (2^32 generations)".into())
        })?;
        let tmp = shared.take_next_file()?;
        let header = LogFileHeader {
            generation,
            segment_len: SEGMENT_LEN as u32,
            file_len: shared.file_len as u32,
            log_signature: shared.signatures.log_signature,
            db_signature: shared.signatures.db_signature,
            created_unix: unix_now(),
            checkpoint_at_creation: shared.checkpoint_to_write(),
            prev_generation_checksum: self.fold.value(),
        };
        self.file = install_generation(&shared.dir, tmp, &header, shared.io_mode)?;
        self.generation = generation;
        self.segments = shared.geometry.segments_in(generation);
        self.next_index = 1;
        self.tail_on_disk = None;
        self.fold = RunningChecksum::seeded(header.prev_generation_checksum);
        bump(&shared.counters.generations_rolled, 1);
        shared.request_next_file();
        shared.write_checkpoint()?;
        self.delete_pending = shared.circular;
        Ok(())
    }

    /// The first write into this generation is durable: record it in the database
    /// (with the checkpoint last written), then let circular logging delete what that
    /// checkpoint no longer needs.
    fn record_generation(&mut self, shared: &Shared) -> Result<(), EngineError> {
        let (checkpoint, state) = *shared.written_checkpoint.lock();
        if let Some(hook) = &*shared.generation_hook.lock() {
            hook(GenerationRecord {
                generation: self.generation,
                checkpoint,
                state,
            })?;
        }
        shared
            .recorded_generation
            .fetch_max(self.generation, Ordering::AcqRel);
        if std::mem::take(&mut self.delete_pending) {
            self.delete_old_generations(shared, checkpoint);
        }
        Ok(())
    }

    /// Deletes generations wholly before the written checkpoint and the retention
    /// floor, only files that carry this log stream's signature.
    fn delete_old_generations(&mut self, shared: &Shared, checkpoint: LogPosition) {
        let floor = shared.retention_floor.load(Ordering::Acquire);
        let keep_from = checkpoint.generation.min(floor).min(self.generation);
        while self.oldest_generation < keep_from {
            let generation = self.oldest_generation;
            self.oldest_generation += 1;
            let path = generation_path(&shared.dir, generation);
            let ours = match DataFile::open(&path, shared.io_mode, edbstress_io::Access::ReadOnly) {
                Ok(file) => read_file_header(&file, generation, shared.signatures).is_ok(),
                Err(_) => continue,
            };
            if !ours {
                tracing::warn!(
                    "circular logging keeps {}: it does not carry this log stream's signature",
                    path.display()
                );
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => bump(&shared.counters.generations_deleted, 1),
                Err(e) => {
                    tracing::warn!("circular logging could not delete {}: {e}", path.display())
                }
            }
        }
    }
}

fn internal(what: String) -> EngineError {
    EngineError::Invalid(format!("log writer inconsistency (a bug): {what}"))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why the flusher started a round.
#[derive(Clone, Copy)]
enum FlushReason {
    Commit,
    Capacity,
    Lazy,
    Shutdown,
}

/// Stops everything waiting on a log thread if that thread panics (a bug): waiters
/// get an error instead of hanging.
struct PanicGuard<'a>(&'a Shared);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let shared = self.0;
            {
                let mut p = shared.precreate.lock();
                p.creating = false;
                p.stop = true;
                shared.precreate_cv.notify_all();
            }
            let mut st = shared.state.lock();
            st.error = Some("a transaction log thread panicked".into());
            shared.durable_cv.notify_all();
            shared.space_cv.notify_all();
        }
    }
}

fn run_flusher(shared: Arc<Shared>, mut io: FlusherIo) {
    let _guard = PanicGuard(&shared);
    let mut batch = Batch::default();
    loop {
        let reason = {
            let mut st = shared.state.lock();
            let reason = loop {
                if st.stop == StopMode::Abandon || st.error.is_some() {
                    return;
                }
                if !st.has_unflushed() {
                    if st.stop == StopMode::Shutdown {
                        return;
                    }
                    shared.work.wait(&mut st);
                    continue;
                }
                if st.stop == StopMode::Shutdown {
                    break FlushReason::Shutdown;
                }
                if st.requested > st.durable {
                    break FlushReason::Commit;
                }
                if st.staged.len() >= shared.wake_segments || st.space_waiters > 0 {
                    break FlushReason::Capacity;
                }
                let since = *st.first_unflushed.get_or_insert_with(Instant::now);
                let deadline = since + shared.lazy_flush_interval;
                if Instant::now() >= deadline {
                    break FlushReason::Lazy;
                }
                shared.work.wait_until(&mut st, deadline);
            };
            // The last slot has no room for a shadow: close it, so it is written once,
            // complete, and the tail moves to the next generation.
            if shared.geometry.is_last_slot(st.tail) && !st.packer.pending().is_empty() {
                if let Err(e) = st.close_tail(&shared.geometry) {
                    fail(&shared, &mut st, &e);
                    return;
                }
                let here = st.next_record_position();
                shared.current.store(here.pack(), Ordering::Release);
            }
            st.take_batch(&mut batch);
            reason
        };
        let counters = &shared.counters;
        bump(&counters.flush_batches, 1);
        match reason {
            FlushReason::Commit => bump(&counters.commit_flushes, 1),
            FlushReason::Capacity => bump(&counters.capacity_flushes, 1),
            FlushReason::Lazy => bump(&counters.lazy_flushes, 1),
            FlushReason::Shutdown => {}
        }
        let result = io.write_batch(&shared, &batch);
        let mut st = shared.state.lock();
        st.in_flight = 0;
        shared.space_cv.notify_all();
        if let Err(e) = result {
            fail(&shared, &mut st, &e);
            return;
        }
    }
}

/// Records a fatal log error: nothing more is written or acknowledged.
fn fail(shared: &Shared, st: &mut State, e: &EngineError) {
    tracing::error!(
        "transaction log of instance {} failed: {e}",
        shared.instance
    );
    st.error = Some(e.to_string());
    shared.durable_cv.notify_all();
    shared.space_cv.notify_all();
}

fn run_precreator(shared: Arc<Shared>) {
    let _guard = PanicGuard(&shared);
    let path = next_file_path(&shared.dir);
    loop {
        {
            let mut p = shared.precreate.lock();
            while !p.wanted && !p.stop {
                shared.precreate_cv.wait(&mut p);
            }
            if p.stop {
                return;
            }
            p.wanted = false;
            p.creating = true;
        }
        let result = create_zeroed_file(&path, shared.file_len, shared.io_mode);
        let mut p = shared.precreate.lock();
        p.creating = false;
        match result {
            Ok(_) => {
                p.ready = true;
                bump(&shared.counters.files_precreated, 1);
            }
            Err(e) => p.error = Some(e.to_string()),
        }
        shared.precreate_cv.notify_all();
    }
}

/// Makes the database's completed page writes durable (an `fdatasync` of the file).
pub type CheckpointBarrier = Box<dyn Fn() -> Result<(), EngineError> + Send + Sync>;

/// What the log writer asks the database to record, durably, before it acknowledges
/// anything written into a generation: see [`LogWriter::set_generation_hook`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerationRecord {
    /// The generation that now holds a durable write.
    pub generation: u32,
    /// The checkpoint last written to `E00.chk` (every page change before it is
    /// durable in the database).
    pub checkpoint: LogPosition,
    /// The engine state written with that checkpoint.
    pub state: CheckpointState,
}

/// Records a [`GenerationRecord`] durably in the database header.
pub type GenerationHook = Box<dyn Fn(GenerationRecord) -> Result<(), EngineError> + Send + Sync>;

/// Appends transaction log records and makes them durable. `Send + Sync`: share it
/// through an `Arc`. See [`crate::log`] for positions and the on-disk protocol.
pub struct LogWriter {
    shared: Arc<Shared>,
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
    /// [`crate::log::LogScan`] reports it (`end_of_log`), a position returned by
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
        let signatures = config.signatures();
        let OpenedLog {
            file,
            generation,
            segments,
            next_index,
            fold,
            write_seq,
            oldest_generation,
        } = open_for_writing(&config, start, checkpoint)?;
        let checkpoint_file = CheckpointFile::open(&config.dir, signatures, config.io_mode)?;
        let geometry = Geometry {
            first_generation: generation,
            first_segments: segments,
            segments: (config.file_len / SEGMENT_LEN) as u32,
        };
        let tail = SegAddr {
            generation,
            index: next_index,
        };
        let start_pos = tail.at(FIRST_RECORD_OFFSET);
        let capacity = (config.buffer_len / SEGMENT_LEN).max(4);
        let shared = Arc::new(Shared {
            dir: config.dir.clone(),
            instance: config.instance,
            signatures,
            io_mode: config.io_mode,
            file_len: config.file_len,
            circular: config.circular,
            lazy_flush_interval: config.lazy_flush_interval,
            geometry,
            max_record_body: (segments.min(geometry.segments).saturating_sub(1) as usize
                * CLOSED_MIN_USED)
                .min(MAX_RECORD_BODY_LEN),
            capacity,
            wake_segments: (capacity / 4).max(1),
            state: Mutex::new(State {
                packer: SegmentPacker::new(),
                tail,
                staged: Vec::new(),
                staged_payload: Vec::new(),
                in_flight: 0,
                taken_tail: None,
                appended_end: start_pos,
                durable: start_pos,
                requested: start_pos,
                first_unflushed: None,
                space_waiters: 0,
                error: None,
                stop: StopMode::Run,
            }),
            work: Condvar::new(),
            durable_cv: Condvar::new(),
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
            stats: Mutex::new(IoStats::new()),
            counters: AtomicCounters::default(),
            precreate: Mutex::new(PrecreateState {
                wanted: true,
                ..PrecreateState::default()
            }),
            precreate_cv: Condvar::new(),
        });
        let io = FlusherIo {
            file,
            generation,
            segments,
            next_index: u32::from(next_index),
            tail_on_disk: None,
            write_seq,
            fold,
            oldest_generation,
            delete_pending: false,
            image: AlignedBuf::try_new(64 * SEGMENT_LEN)?,
        };
        let spawn_err = |e: std::io::Error| {
            EngineError::Invalid(format!("cannot start a log writer thread: {e}"))
        };
        let precreator = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("log-precreate-{}", config.instance))
                .spawn(move || run_precreator(shared))
                .map_err(spawn_err)?
        };
        let mut writer = LogWriter {
            shared: Arc::clone(&shared),
            flusher: None,
            precreator: Some(precreator),
        };
        let flusher = std::thread::Builder::new()
            .name(format!("log-flush-{}", config.instance))
            .spawn(move || run_flusher(shared, io))
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
            bytes += len + 2 * FRAGMENT_HEADER_LEN * (len / (SEGMENT_PAYLOAD_LEN / 2) + 2);
        }
        let need = bytes / (SEGMENT_PAYLOAD_LEN - 2 * FRAGMENT_HEADER_LEN) + 2;

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
        let crossed_wake =
            staged_before < shared.wake_segments && st.staged.len() >= shared.wake_segments;
        drop(st);
        if was_idle || crossed_wake {
            shared.work.notify_one();
        }
        let counters = &shared.counters;
        bump(&counters.appends, 1);
        bump(&counters.records, records.len() as u64);
        bump(&counters.record_bytes, body_bytes);
        Ok((first.unwrap_or(end), end))
    }

    /// Waits until everything up to `pos` is durable (written and `fdatasync`ed).
    /// Concurrent callers share one write (group commit). A `pos` beyond the
    /// appended data waits for all appended data.
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
        if st.requested < target {
            st.requested = target;
            shared.work.notify_one();
        }
        bump(&shared.counters.flush_waits, 1);
        while st.durable < target {
            if let Some(e) = &st.error {
                return Err(EngineError::ShutDown(Some(e.clone())));
            }
            if st.stop == StopMode::Abandon {
                return Err(EngineError::ShutDown(None));
            }
            shared.durable_cv.wait(&mut st);
        }
        Ok(())
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
    pub fn generation(&self) -> u32 {
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
    pub fn set_generation_hook(&self, hook: GenerationHook, recorded: u32) {
        *self.shared.generation_hook.lock() = Some(hook);
        self.shared
            .recorded_generation
            .store(recorded, Ordering::Release);
    }

    /// Writes the checkpoint file now (both copies, each made durable in turn).
    /// Returns the position written.
    pub fn write_checkpoint(&self) -> Result<LogPosition, EngineError> {
        self.shared.write_checkpoint()
    }

    /// Circular logging keeps generations `>= generation` (for readers such as log
    /// replication that have not finished with them).
    pub fn set_retention_floor(&self, generation: u32) {
        self.shared
            .retention_floor
            .store(generation, Ordering::Release);
    }

    /// A snapshot of this writer's log write I/O (class `LogWrite`): one operation per
    /// write, its latency including the `fdatasync` that follows it.
    pub fn stats(&self) -> IoStats {
        self.shared.stats.lock().clone()
    }

    /// A snapshot of the writer's counters.
    pub fn counters(&self) -> LogCounters {
        self.shared.counters.snapshot()
    }

    /// Flushes everything appended, stops the threads and writes the checkpoint.
    /// Returns the position where the next record would have started (pass it to
    /// [`LogWriter::open`] to continue).
    pub fn shutdown(mut self) -> Result<LogPosition, EngineError> {
        self.stop(StopMode::Shutdown);
        if let Some(e) = &self.shared.state.lock().error {
            return Err(EngineError::ShutDown(Some(e.clone())));
        }
        self.shared.write_checkpoint()?;
        Ok(self.current())
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
            self.shared.durable_cv.notify_all();
            self.shared.space_cv.notify_all();
        }
        if let Some(flusher) = self.flusher.take() {
            if flusher.join().is_err() {
                tracing::error!("the log flusher thread panicked");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(generation: u32, segment: u16, offset: u16) -> LogPosition {
        LogPosition {
            generation,
            segment,
            offset,
        }
    }

    #[test]
    fn log_geometry_counts_bytes_across_generations() {
        // Generation 3 is a 1 MiB file (256 segments), later ones 16 segments.
        let g = Geometry {
            first_generation: 3,
            first_segments: 256,
            segments: 16,
        };
        let seg = SEGMENT_LEN as u64;
        assert_eq!(g.bytes_between(pos(3, 1, 32), pos(3, 1, 100)), 68);
        assert_eq!(g.bytes_between(pos(3, 2, 32), pos(3, 1, 32)), 0);
        assert_eq!(g.bytes_between(pos(3, 1, 32), pos(3, 3, 32)), 2 * seg);
        // To the end of generation 3 (255 data segments from slot 1), then slot 1 of 4.
        assert_eq!(g.bytes_between(pos(3, 1, 0), pos(4, 1, 0)), 255 * seg);
        // Whole generations in between hold 15 data segments each.
        assert_eq!(g.bytes_between(pos(4, 1, 0), pos(7, 1, 0)), 3 * 15 * seg);
        assert_eq!(
            g.bytes_between(pos(2, 15, 0), pos(5, 1, 0)),
            seg + 255 * seg + 15 * seg
        );
        assert_eq!(
            g.next(SegAddr {
                generation: 3,
                index: 255
            }),
            Some(SegAddr {
                generation: 4,
                index: 1
            })
        );
        assert!(g.is_last_slot(SegAddr {
            generation: 4,
            index: 15
        }));
    }
}
