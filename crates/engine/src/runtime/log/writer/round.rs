//! A flush round and its I/O. Each round takes what was appended (group commit),
//! closes the partially filled tail segment and writes it with the closed segments
//! before it, each once (with `split_tail_write`, the closed segments first and the
//! tail in the next round, when something needs it; with `partial_tail_shadow`, the
//! tail is not closed but written with a shadow copy and continued, as ESE writes a
//! partial sector); when a file fills it rolls to the next generation, records it in
//! the database, rewrites the checkpoint file and, with circular logging, deletes old
//! generations.
//!
//! Rounds run one at a time ([`State::writing`]), on whichever thread starts one: a
//! committer in `LogWriter::flush_to` whose position is not durable and finds no round
//! in progress leads the round itself (no hand-off to another thread); the flusher
//! thread runs the rounds nobody waits for (lazy flush, buffer capacity, shutdown).
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use edbstress_format::Generation;
use edbstress_format::log::{LogFileHeader, LogPosition};
use edbstress_io::{AlignedBuf, DataFile, IoClass, IoError, IoOp, IoRequest};

use super::GenerationRecord;
use super::counters::bump;
use super::geometry::SegAddr;
use super::shared::{Batch, PanicGuard, RoundIo, Shared, State, StopMode};
use crate::error::EngineError;
use crate::runtime::log::files::{
    FIRST_RECORD_OFFSET, RunningChecksum, generation_path, install_generation, read_file_header,
    seal_data_segment,
};
use parking_lot::MutexGuard;

/// One segment image of a write (written to its own slot, closed).
pub(super) struct SegImage<'a> {
    pub(super) logical: u16,
    pub(super) payload: &'a [u8],
}

impl RoundIo {
    /// Writes a batch of closed segments: one write per generation file they fall in,
    /// rolling to the next generation whenever a file fills. Every segment is written
    /// once, closed, to a slot that held nothing: no write covers acknowledged data.
    /// Acknowledges a write that fills its file before rolling; returns the durable end
    /// of a last write that did not, for the round's end to acknowledge (`None` if
    /// there is none, or the round was abandoned).
    pub(super) fn write_batch(
        &mut self,
        shared: &Shared,
        batch: &Batch,
    ) -> Result<Option<LogPosition>, EngineError> {
        let count = batch.segments.len();
        let payload_len = shared.geometry.seg_len.payload_len();
        let mut i = 0;
        let mut last_durable = None;
        while i < count {
            if shared.abandoned() {
                return Ok(None);
            }
            let generation = self.generation;
            let mut j = i;
            while j < count && batch.segments[j].addr.generation == generation {
                j += 1;
            }
            if i == j {
                return Err(internal(format!(
                    "log batch continues in another generation while generation {generation:#x} \
                     is not full"
                )));
            }
            let items: Vec<SegImage<'_>> = (i..j)
                .map(|k| {
                    let at = k * payload_len;
                    SegImage {
                        logical: batch.segments[k].addr.index,
                        payload: &batch.payload[at..at + usize::from(batch.segments[k].used)],
                    }
                })
                .collect();
            if self.shadow_of == Some(items[0].logical) && items.len() > 1 {
                // The segment whose shadow is in the next slot goes first and alone:
                // one write over both could tear both, losing acknowledged records
                // (ESE's first full sector after a partial one, logwrite.cxx).
                self.write_segments(shared, items[0].logical, &items[..1])?;
                self.write_segments(shared, items[1].logical, &items[1..])?;
            } else {
                self.write_segments(shared, items[0].logical, &items)?;
            }
            let durable = self.after(batch.segments[j - 1].addr);
            i = j;
            if self.next_index >= self.segments {
                // Released before the roll (its syncs and the checkpoint file's).
                shared.advance_durable(durable);
                self.roll(shared)?;
            } else if i < count {
                return Err(internal(format!(
                    "log batch continues beyond generation {generation:#x} before it is full"
                )));
            } else {
                last_durable = Some(durable);
            }
        }
        Ok(last_durable)
    }

    /// Where the next record starts after the closed segment `addr`.
    pub(super) fn after(&self, addr: SegAddr) -> LogPosition {
        let next = if u32::from(addr.index) + 1 >= self.segments {
            SegAddr {
                generation: addr.generation.next().unwrap_or(Generation::NONE),
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

    /// One write and `fdatasync` of consecutive closed segments into their slots from
    /// `first_slot` (the next unwritten one), each sealed with one new write sequence.
    /// They are final: they advance `next_index` and the running checksum.
    pub(super) fn write_segments(
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
        let seg = shared.geometry.seg_len.bytes();
        let len = count * seg;
        if self.image.len() < len {
            self.image = AlignedBuf::try_new(len.next_multiple_of(super::IMAGE_BYTES))?;
        }
        self.write_seq += 1;
        let seq = self.write_seq;
        for (n, item) in items.iter().enumerate() {
            let slot = first_slot + n as u16;
            if item.logical != slot || slot == 0 || u32::from(slot) != self.next_index + n as u32 {
                return Err(internal(format!(
                    "log segment {} does not belong at slot {slot} (next unwritten segment {})",
                    item.logical, self.next_index
                )));
            }
            seal_data_segment(
                &mut self.image[n * seg..(n + 1) * seg],
                self.generation,
                item.logical,
                false,
                item.payload,
                true,
                seq,
            );
        }

        let offset = u64::from(first_slot) * seg as u64;
        self.write_durably(shared, offset, len)?;
        let counters = &shared.counters;
        bump(&counters.writes, 1);
        bump(&counters.bytes_written, len as u64);
        bump(&counters.segments_written, count as u64);
        bump(&counters.fsyncs, 1);
        // Before anything written here is acknowledged: the database must know that
        // this generation holds durable data (docs/format.md, "log required").
        if self.generation.get() > shared.recorded_generation.load(Ordering::Acquire) {
            self.record_generation(shared)?;
        }

        for n in 0..count {
            self.fold.add_segment(&self.image[n * seg..(n + 1) * seg]);
            self.next_index += 1;
        }
        if self
            .shadow_of
            .is_some_and(|k| k >= first_slot && usize::from(k - first_slot) < count)
        {
            self.shadow_of = None;
        }
        Ok(())
    }

    /// Writes the partially filled segment `addr` (the next unwritten slot of the
    /// current file, not its last) and its shadow copy in the next slot, durably. A
    /// fresh segment and its shadow go in one write: nothing acknowledged is in either
    /// slot. A segment that already has a shadow is rewritten in its own slot first,
    /// then in the shadow slot, each write durable before the next: whichever tears,
    /// the other slot holds a valid copy with every acknowledged record, and recovery
    /// takes the valid copy written last (ESE's `ErrLGIWritePartialSector`). Neither
    /// copy is final: the segment stays the next unwritten slot.
    pub(super) fn write_partial(
        &mut self,
        shared: &Shared,
        addr: SegAddr,
        payload: &[u8],
    ) -> Result<(), EngineError> {
        let k = addr.index;
        if addr.generation != self.generation
            || u32::from(k) != self.next_index
            || u32::from(k) + 1 >= self.segments
        {
            return Err(internal(format!(
                "partial log segment {k} of generation {:#x} is not the next unwritten slot \
                 ({}) of generation {:#x} with a slot after it",
                addr.generation, self.next_index, self.generation
            )));
        }
        let seg = shared.geometry.seg_len.bytes();
        if self.image.len() < 2 * seg {
            self.image = AlignedBuf::try_new(super::IMAGE_BYTES)?;
        }
        let generation = self.generation;
        let offset = u64::from(k) * seg as u64;
        let counters = &shared.counters;
        self.write_seq += 1;
        let seq = self.write_seq;
        seal_data_segment(
            &mut self.image[..seg],
            generation,
            k,
            false,
            payload,
            false,
            seq,
        );
        if self.shadow_of == Some(k) {
            self.write_durably(shared, offset, seg)?;
            self.write_seq += 1;
            let seq = self.write_seq;
            seal_data_segment(
                &mut self.image[..seg],
                generation,
                k,
                true,
                payload,
                false,
                seq,
            );
            self.write_durably(shared, offset + seg as u64, seg)?;
            bump(&counters.writes, 2);
            bump(&counters.fsyncs, 2);
            bump(&counters.partial_writes, 2);
        } else {
            seal_data_segment(
                &mut self.image[seg..2 * seg],
                generation,
                k,
                true,
                payload,
                false,
                seq,
            );
            self.write_durably(shared, offset, 2 * seg)?;
            bump(&counters.writes, 1);
            bump(&counters.fsyncs, 1);
            bump(&counters.partial_writes, 1);
        }
        bump(&counters.bytes_written, 2 * seg as u64);
        self.shadow_of = Some(k);
        if self.generation.get() > shared.recorded_generation.load(Ordering::Acquire) {
            self.record_generation(shared)?;
        }
        Ok(())
    }

    /// Writes `self.image[..len]` at `offset` through the log's backend, which times
    /// and counts it (class `LogWrite`), and returns once it and its `fdatasync`
    /// completed. A short write (the kernel's choice) is continued from where it
    /// stopped, each part its own durable request.
    fn write_durably(
        &mut self,
        shared: &Shared,
        offset: u64,
        len: usize,
    ) -> Result<(), EngineError> {
        let mut done = 0;
        let mut completions = Vec::with_capacity(1);
        while done < len {
            // The backend owns the buffer until the completion gives it back.
            let buf = if done == 0 {
                std::mem::replace(&mut self.image, AlignedBuf::new(0))
            } else {
                let mut rest = AlignedBuf::try_new(len - done)?;
                rest.copy_from_slice(&self.image[done..len]);
                rest
            };
            let part = len - done;
            let request = IoRequest {
                file: self.file_id,
                op: IoOp::WriteSync,
                offset: offset + done as u64,
                buf,
                len: part,
                class: IoClass::LogWrite,
                instance: shared.instance.get(),
                tag: 0,
            };
            completions.clear();
            {
                let mut io = shared.log_io.lock();
                io.submit(request)?;
                io.wait(1, &mut completions)?;
            }
            let Some(completion) = completions.pop() else {
                return Err(internal("the log backend returned no completion".into()));
            };
            let written = completion.result;
            if done == 0 {
                self.image = completion.buf;
            }
            let at = offset + done as u64;
            let n = written.map_err(|e| self.write_error(at, e))?;
            if n == 0 {
                let e =
                    std::io::Error::new(std::io::ErrorKind::WriteZero, "the write wrote nothing");
                return Err(self.write_error(at, e));
            }
            done += n.min(part);
        }
        Ok(())
    }

    /// A failed log write as the engine reports it; a full filesystem stays an
    /// [`IoError::Full`] (the backend wraps it in the `io::Error`).
    #[cold]
    fn write_error(&self, offset: u64, source: std::io::Error) -> EngineError {
        if source.get_ref().is_some_and(|inner| inner.is::<IoError>()) {
            if let Some(Ok(inner)) = source.into_inner().map(|b| b.downcast::<IoError>()) {
                return EngineError::Io(*inner);
            }
            unreachable!("checked to hold an IoError");
        }
        EngineError::Io(IoError::Io {
            path: self.file.path().to_path_buf(),
            op: "log write",
            offset,
            source,
        })
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
            segment_len: shared.geometry.seg_len.bytes() as u32,
            file_len: shared.file_len as u32,
            log_signature: shared.signatures.log_signature,
            db_signature: shared.signatures.db_signature,
            created_unix: unix_now(),
            checkpoint_at_creation: shared.checkpoint_to_write(),
            prev_generation_checksum: self.fold.value(),
        };
        {
            let mut io = shared.log_io.lock();
            let file = install_generation(
                &shared.dir,
                tmp,
                &header,
                shared.io_mode,
                &mut **io,
                shared.instance,
            )?;
            io.unregister(self.file_id)?;
            self.file_id = io.register(&file)?;
            self.file = file;
        }
        self.generation = generation;
        self.segments = shared.geometry.segments_in(generation);
        self.next_index = 1;
        self.shadow_of = None;
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
            .fetch_max(self.generation.get(), Ordering::AcqRel);
        if std::mem::take(&mut self.delete_pending) {
            self.delete_old_generations(shared, checkpoint);
        }
        Ok(())
    }

    /// Deletes generations wholly before the written checkpoint and the retention
    /// floor, only files that carry this log stream's signature.
    fn delete_old_generations(&mut self, shared: &Shared, checkpoint: LogPosition) {
        let floor = Generation::new(shared.retention_floor.load(Ordering::Acquire));
        let keep_from = checkpoint.generation.min(floor).min(self.generation);
        while self.oldest_generation < keep_from {
            let generation = self.oldest_generation;
            self.oldest_generation = generation.next().unwrap_or(keep_from);
            let path = generation_path(&shared.dir, generation);
            let ours = match DataFile::open(&path, shared.io_mode, edbstress_io::Access::ReadOnly) {
                Ok(file) => read_file_header(
                    &mut **shared.log_io.lock(),
                    &file,
                    (shared.instance.get(), IoClass::HeaderRead),
                    generation,
                    shared.signatures,
                )
                .is_ok(),
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

pub(super) fn internal(what: String) -> EngineError {
    EngineError::Invalid(format!("log writer inconsistency (a bug): {what}"))
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a round runs.
#[derive(Clone, Copy)]
pub(super) enum FlushReason {
    /// A committer waiting in `flush_to` leads it.
    Commit,
    /// Half the buffer is ready, or an append waits for space.
    Capacity,
    /// A generation's last segment is ready.
    Generation,
    /// The bounded durability delay passed (only with `lazy_flush_interval`).
    Lazy,
    Shutdown,
}

impl Shared {
    /// Runs one round: takes what was appended, writes it and makes it durable, then
    /// acknowledges it and wakes the waiters. Called with the state locked, nothing
    /// stopping it (no error, not abandoned), no round in progress and something
    /// unflushed; returns with the state locked, the round over. A failed round
    /// poisons the log (the error is recorded for every waiter) and is returned.
    pub(super) fn run_round(
        &self,
        st: &mut MutexGuard<'_, State>,
        reason: FlushReason,
    ) -> Result<(), EngineError> {
        debug_assert!(!st.writing && st.has_unflushed());
        // Never contended: only the runner of the round in progress locks it.
        let mut io = self.round_io.lock();
        // With `split_tail_write`, a round that finds closed segments and a partially
        // filled tail writes the closed segments alone, as ESE writes its full sectors
        // first; the tail follows in the next round (whoever runs it), which runs at
        // once when a commit waits for it or its lazy-flush time has come
        // (`first_unflushed` keeps its records' age), and takes what was appended
        // during the first write too (ESE's deferred partial write).
        let shutdown = matches!(reason, FlushReason::Shutdown);
        let defer_tail = self.split_tail_write
            && !st.tail_deferred
            && !shutdown
            && !st.staged.is_empty()
            && st.tail_unflushed();
        st.tail_deferred = defer_tail;
        // With `partial_tail_shadow` the tail is written partially filled with its
        // shadow and the next records continue in it (not in a file's last slot,
        // which has no slot for the shadow, nor at shutdown).
        let partial = !defer_tail
            && self.partial_tail_shadow
            && !shutdown
            && st.tail_unflushed()
            && !self.geometry.is_last_slot(st.tail);
        // Otherwise the partially filled tail is closed (padded) and written once: the
        // next records start in the next segment, so no later write rewrites a segment
        // holding acknowledged commits and a torn write can only lose what it was
        // writing (docs/format.md §6.3).
        if !defer_tail
            && !partial
            && !st.packer.pending().is_empty()
            && (st.tail_unflushed() || shutdown)
        {
            if let Err(e) = st.close_tail(&self.geometry) {
                fail(self, st, &e);
                return Err(e);
            }
            let here = st.next_record_position();
            self.current.store(here.pack(), Ordering::Release);
        }
        let tail_since = st.first_unflushed;
        let mut batch = std::mem::take(&mut io.batch);
        st.take_batch(&mut batch);
        if defer_tail {
            st.first_unflushed = tail_since;
        }
        let tail_end = st.next_record_position();
        if partial {
            let pending = st.packer.pending();
            batch.tail = Some(st.tail);
            batch.tail_payload.extend_from_slice(pending);
            st.tail_written = Some((st.tail, pending.len()));
        }
        st.writing = true;
        st.rounds += 1;
        st.in_flight_end = if partial {
            tail_end
        } else {
            batch
                .segments
                .last()
                .and_then(|last| self.geometry.next(last.addr))
                .map_or(st.durable, |next| next.at(FIRST_RECORD_OFFSET))
        };
        let counters = &self.counters;
        bump(&counters.flush_batches, 1);
        if defer_tail {
            bump(&counters.tail_deferrals, 1);
        }
        match reason {
            FlushReason::Commit => bump(&counters.commit_flushes, 1),
            FlushReason::Capacity => bump(&counters.capacity_flushes, 1),
            FlushReason::Generation => bump(&counters.generation_flushes, 1),
            FlushReason::Lazy => bump(&counters.lazy_flushes, 1),
            FlushReason::Shutdown => {}
        }
        let result = MutexGuard::unlocked(st, || {
            // A panic here (a bug) fails the log instead of leaving `writing` set.
            let _guard = PanicGuard(self);
            let result = io
                .write_batch(self, &batch)
                .and_then(|durable| match batch.tail {
                    Some(addr) if !self.abandoned() => io
                        .write_partial(self, addr, &batch.tail_payload)
                        .map(|()| Some(tail_end)),
                    _ => Ok(durable),
                });
            io.batch = batch;
            drop(io);
            result
        });
        // The round's last write is acknowledged, and the next round may start, in one
        // hold of the lock: a waiter wakes once, either released or to lead.
        st.writing = false;
        st.in_flight = 0;
        self.space_cv.notify_all();
        if std::mem::take(&mut st.flusher_waits_for_round) {
            self.work.notify_one();
        }
        match result {
            Ok(durable) => {
                // This round's waiters (released: it covered them), and one of the
                // next round's, which leads it if no one else has started it.
                let round = st.rounds;
                if let Some(pos) = durable {
                    self.mark_durable(st, pos);
                } else {
                    self.round_cv[(round % 2) as usize].notify_all();
                }
                self.round_cv[((round + 1) % 2) as usize].notify_one();
                Ok(())
            }
            Err(e) => {
                fail(self, st, &e);
                Err(e)
            }
        }
    }
}

/// The flusher thread: runs the rounds nobody waits for — when half the buffer is
/// ready or an append waits for space, when a generation's last segment is ready, at
/// shutdown, and (only with `lazy_flush_interval`) when the oldest unwritten record is
/// that old. Committers lead their own rounds; a lazy commit starts none.
pub(super) fn run_flusher(shared: Arc<Shared>) {
    let _guard = PanicGuard(&shared);
    let mut st = shared.state.lock();
    loop {
        let reason = loop {
            if st.stop == StopMode::Abandon || st.error.is_some() {
                return;
            }
            if st.writing {
                st.flusher_waits_for_round = true;
                shared.work.wait(&mut st);
                continue;
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
            if st.staged.len() >= shared.wake_segments || st.space_waiters > 0 {
                break FlushReason::Capacity;
            }
            if st.generation_ready() {
                break FlushReason::Generation;
            }
            if st.task_wanted > st.durable {
                break FlushReason::Commit;
            }
            let Some(interval) = shared.lazy_flush_interval else {
                shared.work.wait(&mut st);
                continue;
            };
            let since = *st.first_unflushed.get_or_insert_with(Instant::now);
            let deadline = since + interval;
            if Instant::now() >= deadline {
                break FlushReason::Lazy;
            }
            shared.work.wait_until(&mut st, deadline);
        };
        if shared.run_round(&mut st, reason).is_err() {
            return;
        }
    }
}

/// Records a fatal log error: nothing more is written or acknowledged.
pub(super) fn fail(shared: &Shared, st: &mut State, e: &EngineError) {
    tracing::error!(
        "transaction log of instance {} failed: {e}",
        shared.instance
    );
    st.error = Some(e.to_string());
    shared.wake_all_committers();
    shared.space_cv.notify_all();
    shared.work.notify_all();
}
