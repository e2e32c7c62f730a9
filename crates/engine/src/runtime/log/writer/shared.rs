//! What appenders, committers, the flusher and the pre-creation thread share: the log
//! buffer ([`State`], under one mutex), the round's I/O (held by whoever runs the
//! round), the durable and checkpoint positions, and the condition variables they
//! wait on.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use edbstress_format::Generation;
use edbstress_format::InstanceId;
use edbstress_format::log::{CheckpointState, LogPosition, SegmentPacker};
use edbstress_io::{AlignedBuf, DataFile, FileId, IoBackend, IoMode, IoStats};
use parking_lot::{Condvar, Mutex};

use super::counters::{AtomicCounters, bump};
use super::geometry::{Geometry, SegAddr};
use super::{CheckpointBarrier, GenerationHook};
use crate::error::EngineError;
use crate::runtime::log::LogSignatures;
use crate::runtime::log::checkpoint::CheckpointFile;
use crate::runtime::log::files::{RunningChecksum, closed_min_used};
use crate::runtime::session_wait::SessionCondvar;

/// A closed segment waiting in the log buffer.
#[derive(Clone, Copy, Debug)]
pub(super) struct StagedSegment {
    pub(super) addr: SegAddr,
    pub(super) used: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopMode {
    Run,
    /// Flush everything, then stop.
    Shutdown,
    /// Stop without writing anything more (crash simulation).
    Abandon,
}

/// Everything appenders, committers and the flusher share, under one mutex.
pub(super) struct State {
    pub(super) packer: SegmentPacker,
    /// The segment `packer.pending()` belongs to.
    pub(super) tail: SegAddr,
    /// Closed segments not yet taken by a round, in log order.
    pub(super) staged: Vec<StagedSegment>,
    /// Their payloads, a segment's payload length each (zero padded).
    pub(super) staged_payload: Vec<u8>,
    /// Segments taken by the round in progress and not yet durable.
    pub(super) in_flight: usize,
    /// A round is in progress: its runner (the flusher thread or a committer leading
    /// it) holds [`Shared::round_io`]; nobody else starts one until it ends.
    pub(super) writing: bool,
    /// The last round wrote only closed segments and left the partially filled tail
    /// (`split_tail_write`): the next round, whoever runs it, takes everything, so a
    /// commit in the tail is never passed over twice.
    pub(super) tail_deferred: bool,
    /// With `partial_tail_shadow`: the partially filled segment and how many of its
    /// payload bytes the last partial write put on disk (with its shadow). The
    /// pending segment is unflushed only beyond them.
    pub(super) tail_written: Option<(SegAddr, usize)>,
    /// The flusher waits for the round in progress to end (it is woken when it does).
    pub(super) flusher_waits_for_round: bool,
    /// Rounds started: the one in progress, if any, is number `rounds`.
    pub(super) rounds: u64,
    /// Where `durable` will be when the round in progress has ended.
    pub(super) in_flight_end: LogPosition,
    /// End of the last appended record.
    pub(super) appended_end: LogPosition,
    /// End of durable data.
    pub(super) durable: LogPosition,
    /// When the oldest record not yet taken by a round was appended.
    pub(super) first_unflushed: Option<Instant>,
    /// Appends waiting for buffer space (the flusher writes at once for them).
    pub(super) space_waiters: usize,
    /// The furthest position a commit running as a task waits to be durable: a task
    /// does not lead a round (its I/O would stop the other tasks of its thread), the
    /// flusher runs one at once for it.
    pub(super) task_wanted: LogPosition,
    /// Set when a write failed: the log cannot be trusted any more.
    pub(super) error: Option<String>,
    pub(super) stop: StopMode,
}

impl State {
    pub(super) fn usable(&self) -> Result<(), EngineError> {
        if let Some(e) = &self.error {
            return Err(EngineError::ShutDown(Some(e.clone())));
        }
        match self.stop {
            StopMode::Run => Ok(()),
            StopMode::Shutdown | StopMode::Abandon => Err(EngineError::ShutDown(None)),
        }
    }

    pub(super) fn has_unflushed(&self) -> bool {
        !self.staged.is_empty() || self.tail_unflushed()
    }

    /// The pending segment holds records no write has put on disk.
    pub(super) fn tail_unflushed(&self) -> bool {
        let pending = self.packer.pending().len();
        pending > 0 && self.tail_written != Some((self.tail, pending))
    }

    /// A generation's last segment is staged: the tail has moved on to a later file
    /// (ESE writes its buffer when it starts a new generation).
    pub(super) fn generation_ready(&self) -> bool {
        self.staged
            .first()
            .is_some_and(|s| s.addr.generation != self.tail.generation)
    }

    /// Body bytes a record starting now can hold without leaving the tail's file:
    /// the first fragment fills the pending segment, later ones whole segments, each
    /// closed once fewer than a header and one byte are left.
    pub(super) fn room_in_generation(&self, geometry: &Geometry) -> usize {
        let slots_after = geometry
            .segments_in(self.tail.generation)
            .saturating_sub(u32::from(self.tail.index) + 1) as usize;
        let closed = closed_min_used(geometry.seg_len);
        closed - self.packer.pending().len() + slots_after * closed
    }

    pub(super) fn next_record_position(&self) -> LogPosition {
        self.tail.at(self.packer.next_record_offset())
    }

    /// Closes the pending segment early (it is written padded), or, if it is empty,
    /// stages an empty closed segment: the next record starts in the next segment.
    pub(super) fn close_tail(&mut self, geometry: &Geometry) -> Result<(), EngineError> {
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

    /// Moves the staged (closed) segments into `batch`.
    pub(super) fn take_batch(&mut self, batch: &mut Batch) {
        batch.segments.clear();
        batch.payload.clear();
        std::mem::swap(&mut self.staged, &mut batch.segments);
        std::mem::swap(&mut self.staged_payload, &mut batch.payload);
        batch.tail = None;
        batch.tail_payload.clear();
        self.in_flight = batch.segments.len();
        self.first_unflushed = None;
    }
}

/// Appends a closed segment payload to the log buffer and advances the tail.
pub(super) fn stage(
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
    staged_payload.resize(staged.len() * geometry.seg_len.payload_len(), 0);
    *tail = geometry.next(*tail).ok_or_else(|| {
        EngineError::Invalid("log generation numbers are exhausted (2^32 generations)".into())
    })?;
    Ok(())
}

/// What one round writes.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) segments: Vec<StagedSegment>,
    pub(super) payload: Vec<u8>,
    /// With `partial_tail_shadow`: the partially filled segment written after the
    /// closed ones, with its shadow (its payload in `tail_payload`).
    pub(super) tail: Option<SegAddr>,
    pub(super) tail_payload: Vec<u8>,
}

pub(super) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) instance: InstanceId,
    pub(super) signatures: LogSignatures,
    pub(super) io_mode: IoMode,
    pub(super) file_len: usize,
    pub(super) circular: bool,
    /// A bounded durability delay for lazy commits (`LogConfig::lazy_flush_interval`);
    /// `None`: no timer, as ESE.
    pub(super) lazy_flush_interval: Option<Duration>,
    /// Write closed segments and the partially filled tail in two writes.
    pub(super) split_tail_write: bool,
    /// Write a partially filled tail with its shadow and continue it (see
    /// `LogConfig::partial_tail_shadow`).
    pub(super) partial_tail_shadow: bool,
    pub(super) geometry: Geometry,
    /// Largest record body: it must fit in one file.
    pub(super) max_record_body: usize,
    /// Buffer capacity in segments.
    pub(super) capacity: usize,
    /// Staged segments that wake the flusher for a capacity write: half the buffer.
    pub(super) wake_segments: usize,

    pub(super) state: Mutex<State>,
    /// The open generation file and what is on disk: locked only by the runner of the
    /// round in progress (`State::writing`), so never contended.
    pub(super) round_io: Mutex<RoundIo>,
    /// The flusher waits here for work (and for a round in progress to end).
    pub(super) work: Condvar,
    /// `flush_to` waits here, on the variable of the round that will cover its
    /// position: round `n`'s is `round_cv[n % 2]`. A round's end wakes all of its own
    /// waiters (released) and one of the next round's (to lead it), so a committer that
    /// arrived during a round sleeps once, not once per round. `LogWriter`'s stop
    /// waits on the round in progress's variable.
    pub(super) round_cv: [SessionCondvar; 2],
    /// `append` waits here for buffer space.
    pub(super) space_cv: Condvar,

    pub(super) current: AtomicU64,
    pub(super) durable: AtomicU64,
    /// The checkpoint to write and the engine state that goes with it, set together.
    pub(super) checkpoint: Mutex<(LogPosition, CheckpointState)>,
    pub(super) retention_floor: AtomicU32,

    pub(super) checkpoint_file: Mutex<CheckpointFile>,
    /// The checkpoint and state last written to `E00.chk` (what the database header
    /// may safely record as its own fallback checkpoint).
    pub(super) written_checkpoint: Mutex<(LogPosition, CheckpointState)>,
    /// Makes the database's page writes durable before a checkpoint is written.
    pub(super) checkpoint_barrier: Mutex<Option<CheckpointBarrier>>,
    /// Records in the database that a generation holds durable data.
    pub(super) generation_hook: Mutex<Option<GenerationHook>>,
    /// Highest generation the hook recorded (or the database had recorded at open).
    pub(super) recorded_generation: AtomicU32,
    /// Carries, times and counts the rounds' log writes (the current generation
    /// registered); here so that [`super::LogWriter::stats`] reads its counters. Only
    /// the runner of a round submits, locking it for one write at a time.
    pub(super) log_io: Mutex<Box<dyn IoBackend>>,
    pub(super) log_io_name: &'static str,
    pub(super) counters: AtomicCounters,

    pub(super) precreate: Mutex<PrecreateState>,
    pub(super) precreate_cv: Condvar,
}

impl Shared {
    pub(super) fn durable_position(&self) -> LogPosition {
        LogPosition::unpack(self.durable.load(Ordering::Acquire))
    }

    /// The checkpoint as written: never beyond durable data, or recovery would start
    /// after the end of the log.
    pub(super) fn checkpoint_to_write(&self) -> LogPosition {
        let set = self.checkpoint.lock().0;
        set.min(self.durable_position())
    }

    pub(super) fn write_checkpoint(&self) -> Result<LogPosition, EngineError> {
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

    /// Acknowledges everything before `pos` (written and synced) and wakes the waiters.
    pub(super) fn advance_durable(&self, pos: LogPosition) {
        let mut st = self.state.lock();
        self.mark_durable(&mut st, pos);
    }

    /// [`Shared::advance_durable`] with the state already locked: wakes the waiters
    /// of the round in progress (those it covers).
    pub(super) fn mark_durable(&self, st: &mut State, pos: LogPosition) {
        if pos > st.durable {
            st.durable = pos;
            self.durable.store(pos.pack(), Ordering::Release);
        }
        self.round_cv[(st.rounds % 2) as usize].notify_all();
    }

    /// Wakes every committer waiting in `flush_to` (an error, a stop).
    pub(super) fn wake_all_committers(&self) {
        for cv in &self.round_cv {
            cv.notify_all();
        }
    }

    pub(super) fn abandoned(&self) -> bool {
        self.state.lock().stop == StopMode::Abandon
    }
}

/// The rounds' I/O state: the open generation file and what is on disk. Held by the
/// runner of the round in progress (`Shared::round_io`).
pub(super) struct RoundIo {
    pub(super) file: DataFile,
    /// `file` as registered with the log's backend (`Shared::log_io`).
    pub(super) file_id: FileId,
    pub(super) generation: Generation,
    pub(super) segments: u32,
    /// First slot of the current file whose final (closed) version is not written.
    pub(super) next_index: u32,
    pub(super) write_seq: u64,
    pub(super) fold: RunningChecksum,
    pub(super) oldest_generation: Generation,
    /// Circular logging waits for the new generation to be recorded in the database
    /// (whose header then names a checkpoint at least as new as the one that allows
    /// the deletion): the header's checkpoint must never point at a deleted file.
    pub(super) delete_pending: bool,
    /// A partially filled segment of the current file whose shadow copy is in the
    /// next slot (`partial_tail_shadow`): its next write goes to its own slot alone,
    /// before anything overwrites the shadow.
    pub(super) shadow_of: Option<u16>,
    pub(super) image: AlignedBuf,
    /// The segments of the round in progress (kept to reuse its allocations).
    pub(super) batch: Batch,
}

/// State of the background creation of `E00tmp.log`.
#[derive(Default)]
pub(super) struct PrecreateState {
    /// A zero-filled, durable `E00tmp.log` is waiting.
    pub(super) ready: bool,
    /// A roll asked for one.
    pub(super) wanted: bool,
    pub(super) creating: bool,
    pub(super) stop: bool,
    pub(super) error: Option<String>,
    /// The pre-creation backend's counters as of its last creation.
    pub(super) stats: IoStats,
}

/// Stops everything waiting on a log thread, or on a round a committer was leading, if
/// it panics (a bug): waiters get an error instead of hanging.
pub(super) struct PanicGuard<'a>(pub(super) &'a Shared);

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
            shared.wake_all_committers();
            shared.space_cv.notify_all();
            shared.work.notify_all();
        }
    }
}
