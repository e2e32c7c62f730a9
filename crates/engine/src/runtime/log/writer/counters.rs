//! The writer's counters: [`LogCounters`] as handed out, and the atomics behind them.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Segment images written.
    pub segments_written: u64,
    /// Log writes made durable (each write is one backend request that completes
    /// after its `fdatasync`, see `IoOp::WriteSync`; its time is in the backend's
    /// `LogWrite` latency).
    pub fsyncs: u64,
    /// Flush rounds (group-commit batches), whoever ran them; a round is one write and
    /// sync, two across a roll.
    pub flush_batches: u64,
    /// Rounds a committer waiting in `flush_to` led, on its own thread (the flusher
    /// thread runs the capacity, lazy and shutdown rounds).
    pub commit_flushes: u64,
    /// Rounds started because half the buffer was ready or an append waited for space
    /// (ESE's capacity writes).
    pub capacity_flushes: u64,
    /// Rounds started because a generation's last segment was ready.
    pub generation_flushes: u64,
    /// Rounds started by the bounded durability delay (`LogConfig::lazy_flush_interval`).
    pub lazy_flushes: u64,
    /// Rounds that wrote only the closed segments and left the partially filled tail
    /// for a second write (`LogConfig::split_tail_write`).
    pub tail_deferrals: u64,
    /// Writes of a partially filled tail segment with its shadow, and rewrites of a
    /// tail that has one (`LogConfig::partial_tail_shadow`); each also in `writes`.
    pub partial_writes: u64,
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
pub(super) struct AtomicCounters {
    pub(super) records: AtomicU64,
    pub(super) record_bytes: AtomicU64,
    pub(super) appends: AtomicU64,
    pub(super) writes: AtomicU64,
    pub(super) bytes_written: AtomicU64,
    pub(super) segments_written: AtomicU64,
    pub(super) fsyncs: AtomicU64,
    pub(super) flush_batches: AtomicU64,
    pub(super) commit_flushes: AtomicU64,
    pub(super) capacity_flushes: AtomicU64,
    pub(super) generation_flushes: AtomicU64,
    pub(super) lazy_flushes: AtomicU64,
    pub(super) tail_deferrals: AtomicU64,
    pub(super) partial_writes: AtomicU64,
    pub(super) flush_waits: AtomicU64,
    pub(super) buffer_waits: AtomicU64,
    pub(super) generations_rolled: AtomicU64,
    pub(super) roll_waits: AtomicU64,
    pub(super) files_precreated: AtomicU64,
    pub(super) checkpoint_writes: AtomicU64,
    pub(super) generations_deleted: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl AtomicCounters {
    pub(super) fn snapshot(&self) -> LogCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogCounters {
            records: get(&self.records),
            record_bytes: get(&self.record_bytes),
            appends: get(&self.appends),
            writes: get(&self.writes),
            bytes_written: get(&self.bytes_written),
            segments_written: get(&self.segments_written),
            fsyncs: get(&self.fsyncs),
            flush_batches: get(&self.flush_batches),
            commit_flushes: get(&self.commit_flushes),
            capacity_flushes: get(&self.capacity_flushes),
            generation_flushes: get(&self.generation_flushes),
            lazy_flushes: get(&self.lazy_flushes),
            tail_deferrals: get(&self.tail_deferrals),
            partial_writes: get(&self.partial_writes),
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
