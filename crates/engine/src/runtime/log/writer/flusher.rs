//! The flusher thread and its I/O: each round takes what was appended (group commit)
//! and writes it with the shadowed tail protocol; when a file fills it rolls to the
//! next generation, records it in the database, rewrites the checkpoint file and, with
//! circular logging, deletes old generations.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use edbstress_format::log::{LogFileHeader, LogPosition, SEGMENT_LEN, SEGMENT_PAYLOAD_LEN};
use edbstress_io::{AlignedBuf, DataFile, IoClass};

use super::GenerationRecord;
use super::counters::bump;
use super::geometry::SegAddr;
use super::shared::{Batch, PanicGuard, Shared, State, StopMode};
use crate::error::EngineError;
use crate::runtime::log::files::{
    FIRST_RECORD_OFFSET, RunningChecksum, generation_path, install_generation, read_file_header,
    seal_data_segment,
};

/// Where the newest durable copy of the partially filled tail segment is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Newest {
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
pub(super) struct TailOnDisk {
    pub(super) index: u16,
    pub(super) newest: Newest,
}

/// One segment image of a write.
pub(super) struct SegImage<'a> {
    pub(super) logical: u16,
    pub(super) shadow: bool,
    pub(super) closed: bool,
    pub(super) payload: &'a [u8],
}

/// The flusher thread's own state: the open generation file and what is on disk.
pub(super) struct FlusherIo {
    pub(super) file: DataFile,
    pub(super) generation: u32,
    pub(super) segments: u32,
    /// First slot of the current file whose final (closed) version is not written.
    pub(super) next_index: u32,
    /// The partially filled tail segment on disk, whose copies hold acknowledged data:
    /// no single write may overwrite every copy of its newest content.
    pub(super) tail_on_disk: Option<TailOnDisk>,
    pub(super) write_seq: u64,
    pub(super) fold: RunningChecksum,
    pub(super) oldest_generation: u32,
    /// Circular logging waits for the new generation to be recorded in the database
    /// (whose header then names a checkpoint at least as new as the one that allows
    /// the deletion): the header's checkpoint must never point at a deleted file.
    pub(super) delete_pending: bool,
    pub(super) image: AlignedBuf,
}

impl FlusherIo {
    /// Writes a batch: closed segments in order, then the tail; rolls to the next
    /// generation whenever a file fills.
    pub(super) fn write_batch(
        &mut self,
        shared: &Shared,
        batch: &Batch,
    ) -> Result<(), EngineError> {
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
    pub(super) fn after(&self, addr: SegAddr) -> LogPosition {
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

pub(super) fn internal(what: String) -> EngineError {
    EngineError::Invalid(format!("log writer inconsistency (a bug): {what}"))
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why the flusher started a round.
#[derive(Clone, Copy)]
pub(super) enum FlushReason {
    Commit,
    Capacity,
    Lazy,
    Shutdown,
}

pub(super) fn run_flusher(shared: Arc<Shared>, mut io: FlusherIo) {
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
pub(super) fn fail(shared: &Shared, st: &mut State, e: &EngineError) {
    tracing::error!(
        "transaction log of instance {} failed: {e}",
        shared.instance
    );
    st.error = Some(e.to_string());
    shared.durable_cv.notify_all();
    shared.space_cv.notify_all();
}
