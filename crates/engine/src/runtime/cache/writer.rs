//! The page writer: one thread per cache that keeps the available pool filled by
//! evicting the coldest pages, writes pages whose first change falls too far behind the
//! log (checkpoint depth), and serves `flush_all`.
//!
//! Each round it plans writes under the instance lock (choosing pages, coalescing
//! contiguous dirty neighbours; a page being evicted lends the write its frame's own
//! buffer and leaves the page map until the write ends, any other page is copied into
//! a snapshot), then without the lock seals the pages' checksums, makes the log durable
//! up to the newest change in the batch (WAL), submits each run as one vectored write
//! (one buffer per page; a lone page as a plain write) to its I/O backend and reaps
//! completions; the next round,
//! under the lock, marks pages clean whose version did not move meanwhile.
//! Writes that refill the pool are paced: no more in flight than consumption needs
//! ([`Pacing`]), the full depth while a session waits for a frame.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use edbstress_format::InstanceId;
use edbstress_format::Pgno;
use edbstress_format::checksum::seal_page;
use edbstress_format::log::LogPosition;
use edbstress_io::{AlignedBuf, FileId, IoCompletion, IoOp, IoRequest, VectoredWrite};
use parking_lot::MutexGuard;

use super::Shared;
use super::frames::{
    Core, EXCLUDED, EvictionKey, FlushReason, FrameState, StopMode, WriteOut, eviction_key,
};
use super::pacing::Pacing;

/// How often the writer looks at the checkpoint depth when nothing wakes it.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(50);

/// Header bytes `seal_page` sets: block 0's sum (0..8), blocks 1-3's sums and the page
/// number (40..68). Copied back into a frame whose snapshot was written unchanged, so a
/// clean frame holds exactly the bytes on disk.
const SEALED_FIELDS: [std::ops::Range<usize>; 2] = [0..8, 40..68];

/// One write: a run of contiguous pages.
struct WriteJob {
    first_pgno: Pgno,
    /// The run's pages, in page order.
    pages: Vec<JobPage>,
    /// One buffer per page, in page order: the frame's own for a page written out of
    /// its frame, a snapshot copy for any other. Moved into the vectored write while it
    /// is in flight; the empty vector comes back to be reused.
    bufs: Vec<AlignedBuf>,
    len: usize,
    reason: FlushReason,
    /// Fault injection: report done without issuing.
    dropped: bool,
    /// Handed to the backend and not yet reaped.
    submitted: bool,
    /// Newest change among the pages: the log must be durable to here first.
    last_change: LogPosition,
    /// The cache's `frames_taken` when the write was planned (pacing measures the
    /// frames taken during a pool write's life).
    taken_at_plan: u64,
}

/// One page of a write.
#[derive(Clone, Copy)]
struct JobPage {
    frame: u32,
    /// The page's version as written.
    version: u64,
    /// Written from the frame's own buffer: the page is being evicted, and is out of
    /// the map until the write ends ([`super::frames::WriteOut`]).
    out: bool,
    /// Set when the write ends: a session faulted the page in while it was out.
    wanted: bool,
}

/// A job that is over, to be accounted for under the lock.
struct Finished {
    slot: usize,
    result: Result<(), String>,
    /// The job's buffers, in page order; empty when the backend lost them.
    bufs: Vec<AlignedBuf>,
}

/// A page `flush_all` waits for: done when the frame no longer holds that page dirty at
/// a version older than `version`.
#[derive(Clone, Copy)]
struct FlushItem {
    frame: u32,
    pgno: Pgno,
    version: u64,
}

pub(crate) struct Writer<S> {
    shared: Arc<Shared<S>>,
    file: FileId,
    page_len: usize,
    coalesce_pages: u32,
    instance: InstanceId,
    jobs: Vec<WriteJob>,
    free_slots: Vec<usize>,
    /// Jobs planned and not finished (planned, submitted or dropped).
    in_flight: usize,
    planned: Vec<usize>,
    /// Page-sized snapshot buffers not in use.
    spare_pages: Vec<AlignedBuf>,
    completions: Vec<IoCompletion>,
    finished: Vec<Finished>,
    /// Dirty frames chosen for eviction, waiting for a write slot: (frame, pgno).
    pool_queue: VecDeque<(u32, Pgno)>,
    /// Pool writes planned and not finished.
    pool_in_flight: usize,
    pacing: Pacing,
    cold: BinaryHeap<(EvictionKey, u32)>,
    /// The last scan's coldest frames, coldest first; `candidates[next_candidate..]`
    /// not looked at yet.
    candidates: Vec<(EvictionKey, u32)>,
    next_candidate: usize,
    /// The LRU clock at that scan.
    scanned_at: u64,
    seeds: Vec<u32>,
    flush_queue: VecDeque<FlushItem>,
    flush_recheck: Vec<FlushItem>,
    /// The last flush request whose dirty pages were queued.
    flush_taken: u64,
    wal_waits: u64,
}

impl<S> Writer<S> {
    pub(crate) fn new(shared: Arc<Shared<S>>, file: FileId) -> Writer<S> {
        let config = &shared.config;
        let page_len = config.page_size.bytes();
        // A run is one vectored write of one buffer per page: at most IOV_MAX pages
        // (8 MiB of 8 KiB pages; the workload allows up to 16 MiB of coalescing).
        let most = edbstress_io::MAX_WRITE_BUFFERS;
        let coalesce_pages = (config.coalesce_max / page_len).clamp(1, most) as u32;
        let depth = shared.write_backend.lock().depth();
        let instance = config.instance;
        Writer {
            jobs: (0..depth)
                .map(|_| WriteJob {
                    first_pgno: Pgno::NONE,
                    pages: Vec::new(),
                    bufs: Vec::new(),
                    len: 0,
                    reason: FlushReason::Pool,
                    dropped: false,
                    submitted: false,
                    last_change: LogPosition::default(),
                    taken_at_plan: 0,
                })
                .collect(),
            free_slots: (0..depth).rev().collect(),
            in_flight: 0,
            planned: Vec::with_capacity(depth),
            spare_pages: Vec::new(),
            completions: Vec::with_capacity(depth),
            finished: Vec::with_capacity(depth),
            pool_queue: VecDeque::new(),
            pool_in_flight: 0,
            pacing: Pacing::new(),
            cold: BinaryHeap::new(),
            candidates: Vec::new(),
            next_candidate: 0,
            scanned_at: 0,
            seeds: Vec::new(),
            flush_queue: VecDeque::new(),
            flush_recheck: Vec::new(),
            flush_taken: 0,
            wal_waits: 0,
            shared,
            file,
            page_len,
            coalesce_pages,
            instance,
        }
    }

    /// The thread's body; returns when told to stop (after its writes in flight end).
    pub(crate) fn run(mut self) {
        let shared = Arc::clone(&self.shared);
        let mut core = shared.core.lock();
        loop {
            if !self.finished.is_empty() {
                self.complete(&mut core);
            }
            let stop = core.stop;
            if stop != StopMode::Run && self.in_flight == 0 {
                break;
            }
            let planned = if stop == StopMode::Run && core.failed.is_none() {
                self.plan(&mut core)
            } else {
                0
            };
            if planned == 0 && self.in_flight == 0 {
                shared.writer_wake.wait_for(&mut core, MAINTENANCE_INTERVAL);
                continue;
            }
            // Having just submitted, only collect what is done: the next round may plan
            // more. Otherwise sleep until a write completes. (Not until several do: the
            // io_uring backend times a request when its completion is reaped, so a
            // batched wait would add the wait for the others to each write's latency.)
            let min = if planned > 0 { 0 } else { 1 };
            MutexGuard::unlocked(&mut core, || {
                if planned > 0 {
                    self.issue();
                }
                if self.in_flight > self.finished.len() {
                    self.reap(min);
                }
            });
        }
        if self.wal_waits > 0 {
            core.counts.wal_waits += std::mem::take(&mut self.wal_waits);
        }
    }

    /// Chooses the next writes; returns how many were planned.
    fn plan(&mut self, core: &mut MutexGuard<'_, Core<S>>) -> usize {
        self.plan_pool(core);
        self.plan_flush_all(core);
        self.plan_checkpoint(core);
        self.planned.len()
    }

    /// Available-pool maintenance: when the pool is short ([`super::pool_short`]) or
    /// sessions wait, choose the coldest pages to evict until the stop threshold would
    /// be reached, evicting clean ones at once; then write the dirty ones, paced: no more
    /// pool writes in flight than consumption needs ([`Pacing`]).
    fn plan_pool(&mut self, core: &mut MutexGuard<'_, Core<S>>) {
        let shared = Arc::clone(&self.shared);
        let config = &shared.config;
        let (start, _, stop) = super::pool_thresholds(core, config);
        let stop = stop.max(core.frames_wanted);
        let obtainable = core.obtainable();
        let waiting = core.frame_waiters > 0;
        if super::pool_short(core, config) || waiting {
            let need = stop.saturating_sub(obtainable + core.pending_evictions);
            if need > 0 {
                if core.frames.len() < core.max_frames {
                    core.grow_pool_to_max();
                }
                self.choose_cold(core, need);
            }
        }
        let cap = self
            .pacing
            .cap(self.jobs.len(), waiting, core.obtainable() < start);
        let mut freed = 0;
        while !self.free_slots.is_empty() && self.pool_in_flight < cap {
            let Some((f, pgno)) = self.pool_queue.pop_front() else {
                break;
            };
            let lru = &shared.lru[f as usize];
            let meta = &core.frames[f as usize];
            let chosen = lru.last.load(Relaxed) & EXCLUDED != 0;
            if meta.state != FrameState::Resident || meta.pgno != pgno || !chosen || meta.in_flight
            {
                // Gone, referenced again (no longer cold), or its write is in flight
                // already (the completion evicts it).
                continue;
            }
            if !meta.dirty {
                core.pending_evictions -= 1;
                core.evict(f, lru);
                freed += 1;
                continue;
            }
            self.build_job(core, f, FlushReason::Pool);
        }
        if freed > 0 {
            shared.frame_freed.notify_all();
        }
    }

    /// Picks the `need` coldest frames, then under the lock evicts the clean ones and
    /// queues the dirty ones for writing. The candidates come from the last scan of the
    /// LRU history while it lasts, else from a new one.
    fn choose_cold(&mut self, core: &mut MutexGuard<'_, Core<S>>, need: usize) {
        let (mut freed, mut chosen) = (0, 0);
        if core.clock.saturating_sub(self.scanned_at) <= stale_after(core.frames.len()) {
            (freed, chosen) = self.take_candidates(core, need);
        }
        if chosen < need {
            self.scan_cold(core, need - chosen);
            let (more_freed, more_chosen) = self.take_candidates(core, need - chosen);
            freed += more_freed;
            chosen += more_chosen;
        }
        self.pacing.chose(chosen - freed, freed);
        if freed > 0 {
            self.shared.frame_freed.notify_all();
        }
    }

    /// Scans the LRU history without the lock for the coldest frames, coldest first,
    /// into `candidates`: at least a sixteenth of the cache, so that one scan (a pass
    /// over every frame) serves several refills of the pool.
    fn scan_cold(&mut self, core: &mut MutexGuard<'_, Core<S>>, need: usize) {
        let shared = Arc::clone(&self.shared);
        let (now, window, frames) = (core.clock, core.correlation_window, core.frames.len());
        let batch = frames / 16;
        // Pinned frames are skipped, and dirty ones whose last change is not durable yet
        // are taken only if too few others are cold: look that much further.
        let need = 2 * need.max(batch) + core.pinned_frames;
        MutexGuard::unlocked(core, || {
            self.cold.clear();
            for (f, slot) in shared.lru[..frames].iter().enumerate() {
                let raw = slot.last.load(Relaxed);
                let Some(key) = eviction_key(raw, slot.hist2.load(Relaxed), now, window) else {
                    continue;
                };
                let entry = (key, f as u32);
                if self.cold.len() < need {
                    self.cold.push(entry);
                } else if let Some(mut top) = self.cold.peek_mut()
                    && entry < *top
                {
                    *top = entry;
                }
            }
            self.candidates.clear();
            self.candidates.extend(self.cold.drain());
            self.candidates.sort_unstable();
        });
        self.next_candidate = 0;
        self.scanned_at = now;
    }

    /// Takes up to `wanted` of the scan's candidates from `next_candidate` on, evicting
    /// the clean ones and queueing the dirty ones; returns (evicted, taken). A candidate
    /// referenced since the scan is skipped (its `last` moved): the others are still
    /// colder than every frame the scan did not list, since only references make a
    /// frame warmer.
    fn take_candidates(&mut self, core: &mut Core<S>, wanted: usize) -> (usize, usize) {
        let shared = &self.shared;
        // Like ESE, pages whose changes the log already holds durably go first: writing
        // one whose last change is still in the log buffer would force a log write
        // (the write-ahead rule) that group commit or the lazy flush would otherwise
        // have made later and larger. Those are taken only when too few others are cold.
        let durable = shared.wal.durable();
        let (mut freed, mut chosen) = (0, 0);
        let from = self.next_candidate;
        let mut next = from;
        for young in [false, true] {
            for (i, &((_, _, raw_last), f)) in self.candidates.iter().enumerate().skip(from) {
                if chosen >= wanted {
                    break;
                }
                next = next.max(i + 1);
                let lru = &shared.lru[f as usize];
                let meta = &core.frames[f as usize];
                // Referenced, evicted or chosen since the scan: skip it.
                if meta.state != FrameState::Resident
                    || meta.pins > 0
                    || lru.last.load(Relaxed) != raw_last
                {
                    continue;
                }
                if !meta.dirty && !meta.in_flight {
                    core.evict(f, lru);
                    freed += 1;
                    chosen += 1;
                    continue;
                }
                let (in_flight, pgno) = (meta.in_flight, meta.pgno);
                if !in_flight && !young && meta.last_change > durable {
                    continue;
                }
                lru.last.store(raw_last | EXCLUDED, Relaxed);
                core.pending_evictions += 1;
                chosen += 1;
                if !in_flight {
                    self.pool_queue.push_back((f, pgno));
                }
            }
        }
        // What was passed over (taken, or young and skipped) is not looked at again:
        // the next scan lists the young ones anew if they are still cold.
        self.next_candidate = next;
        (freed, chosen)
    }

    /// `flush_all`: writes every page dirty when the request was taken, and reports the
    /// request served once each is on disk (at that version or a newer one).
    fn plan_flush_all(&mut self, core: &mut MutexGuard<'_, Core<S>>) {
        if core.flush_requested > self.flush_taken {
            self.flush_taken = core.flush_requested;
            let start = self.flush_queue.len();
            for &(_, f) in &core.dirty {
                let meta = &core.frames[f as usize];
                self.flush_queue.push_back(FlushItem {
                    frame: f,
                    pgno: meta.pgno,
                    version: meta.version,
                });
            }
            // In page order, so that runs coalesce and the device sees ascending offsets.
            self.flush_queue.make_contiguous()[start..].sort_unstable_by_key(|item| item.pgno);
        }
        if core.flush_served == self.flush_taken {
            return;
        }
        while !self.free_slots.is_empty() {
            let Some(item) = self.flush_queue.pop_front() else {
                break;
            };
            if flushed(core, item) {
                continue;
            }
            if !core.frames[item.frame as usize].in_flight {
                self.build_job(core, item.frame, FlushReason::Requested);
            }
            self.flush_recheck.push(item);
        }
        if !self.flush_queue.is_empty() {
            return;
        }
        // Everything was issued once: keep what is still in flight, requeue what an
        // older in-flight write or a failure left dirty.
        let mut i = 0;
        while i < self.flush_recheck.len() {
            let item = self.flush_recheck[i];
            if flushed(core, item) {
                self.flush_recheck.swap_remove(i);
            } else if core.frames[item.frame as usize].in_flight {
                i += 1;
            } else {
                self.flush_queue.push_back(item);
                self.flush_recheck.swap_remove(i);
            }
        }
        if self.flush_queue.is_empty() && self.flush_recheck.is_empty() {
            core.flush_served = self.flush_taken;
            self.shared.flush_done.notify_all();
        }
    }

    /// Checkpoint-depth maintenance: writes, oldest first, the pages whose first change
    /// is more than `checkpoint_depth` bytes of log behind its current end.
    fn plan_checkpoint(&mut self, core: &mut MutexGuard<'_, Core<S>>) {
        if core.dirty.is_empty() || self.free_slots.is_empty() {
            return;
        }
        let wal = &self.shared.wal;
        let current = wal.current();
        let depth = self.shared.config.checkpoint_depth;
        self.seeds.clear();
        for &(packed, f) in &core.dirty {
            if self.seeds.len() >= self.free_slots.len() {
                break;
            }
            if wal.bytes_between(LogPosition::unpack(packed), current) <= depth {
                break;
            }
            if !core.frames[f as usize].in_flight {
                self.seeds.push(f);
            }
        }
        for i in 0..self.seeds.len() {
            let f = self.seeds[i];
            // An earlier seed's run may have taken this one in.
            if !core.frames[f as usize].in_flight && !self.free_slots.is_empty() {
                self.build_job(core, f, FlushReason::Checkpoint);
            }
        }
    }

    /// Plans the write of dirty frame `seed`, extended to contiguous dirty neighbours up
    /// to the coalescing limit, copying the snapshots into a write buffer.
    fn build_job(&mut self, core: &mut Core<S>, seed: u32, reason: FlushReason) {
        let Some(slot) = self.free_slots.pop() else {
            return;
        };
        let pgno = core.frames[seed as usize].pgno;
        let (mut lo, mut hi) = (pgno, pgno);
        let dropped = match core.drop_writes.iter().position(|&p| p == pgno) {
            Some(i) => {
                core.drop_writes.swap_remove(i);
                true
            }
            None => {
                // As ESE gathers writes: adjacent pages join one I/O when each is being
                // written anyway. For flush_all that is every dirty page; for the writer's
                // own writes a neighbour joins when it is due itself — chosen for
                // eviction, or past the checkpoint depth — and can go at once: not being
                // written, its changes already durable (a neighbour that would force a
                // log flush waits for its own turn). So coalescing never writes a page
                // early or adds a log write; how large writes get follows from how often
                // due pages are contiguous (docs/fidelity.md).
                let due = match reason {
                    FlushReason::Requested => None,
                    FlushReason::Pool | FlushReason::Checkpoint => Some((
                        self.shared.wal.durable(),
                        self.shared.wal.current(),
                        self.shared.config.checkpoint_depth,
                    )),
                };
                let shared = &self.shared;
                let joinable = |core: &Core<S>, q: Pgno| {
                    core.map.get(&q).is_some_and(|&f| {
                        let meta = &core.frames[f as usize];
                        meta.dirty
                            && !meta.in_flight
                            && due.is_none_or(|(durable, current, depth)| {
                                let chosen =
                                    shared.lru[f as usize].last.load(Relaxed) & EXCLUDED != 0;
                                let old =
                                    shared.wal.bytes_between(meta.first_dirty, current) > depth;
                                meta.last_change <= durable && (chosen || old)
                            })
                    }) && !core.drop_writes.contains(&q)
                };
                while hi.pages_since(lo) + 1 < self.coalesce_pages
                    && lo > Pgno::FIRST
                    && joinable(core, lo - 1)
                {
                    lo -= 1;
                }
                while hi.pages_since(lo) + 1 < self.coalesce_pages
                    && hi.get() < u32::MAX
                    && joinable(core, hi + 1)
                {
                    hi += 1;
                }
                false
            }
        };
        let pages = (hi.pages_since(lo) + 1) as usize;
        let job = &mut self.jobs[slot];
        job.pages.clear();
        job.bufs.clear();
        job.last_change = LogPosition::default();
        for q in (lo.get()..=hi.get()).map(Pgno::new) {
            let f = if q == pgno { seed } else { core.map[&q] };
            let meta = &mut core.frames[f as usize];
            // A page on its way out of the cache (chosen for eviction, unpinned) needs no
            // snapshot: it leaves the map, so nobody sees or changes it until its write
            // ends, and the write carries the frame's own buffer. That spares a page
            // copy under the instance lock. A page that stays cached (due for the
            // checkpoint or flush_all, pinned) is copied, so sessions keep using it.
            let out = !dropped
                && meta.pins == 0
                && self.shared.lru[f as usize].last.load(Relaxed) & EXCLUDED != 0;
            meta.in_flight = true;
            job.pages.push(JobPage {
                frame: f,
                version: meta.version,
                out,
                wanted: false,
            });
            job.last_change = job.last_change.max(meta.last_change);
            if out {
                core.map.remove(&q);
                core.writing_out.push(WriteOut {
                    pgno: q,
                    wanted: false,
                });
                job.bufs.push(std::mem::take(&mut core.pages[f as usize]));
                core.counts.pages_written_from_frames += 1;
            } else {
                let mut snapshot = self
                    .spare_pages
                    .pop()
                    .unwrap_or_else(|| AlignedBuf::new(self.page_len));
                snapshot.copy_from_slice(&core.pages[f as usize]);
                job.bufs.push(snapshot);
                core.counts.pages_copied += 1;
            }
        }
        job.first_pgno = lo;
        job.len = pages * self.page_len;
        job.reason = reason;
        job.dropped = dropped;
        job.submitted = false;
        job.taken_at_plan = core.counts.frames_taken;
        self.planned.push(slot);
        self.in_flight += 1;
        if reason == FlushReason::Pool {
            self.pool_in_flight += 1;
            let peak = &mut core.counts.pool_writes_peak;
            *peak = (*peak).max(self.pool_in_flight as u64);
        }
    }

    /// Without the lock: seals the pages' checksums, makes the log durable to the newest
    /// change among them, and submits each run as one vectored write.
    fn issue(&mut self) {
        let page_size = self.shared.config.page_size;
        let mut needed = LogPosition::default();
        for &slot in &self.planned {
            let job = &mut self.jobs[slot];
            for (i, page) in job.bufs.iter_mut().enumerate() {
                seal_page(page, job.first_pgno + i as u32);
            }
            needed = needed.max(job.last_change);
        }
        if let Err(message) = self.make_durable(needed) {
            for slot in std::mem::take(&mut self.planned) {
                let bufs = std::mem::take(&mut self.jobs[slot].bufs);
                self.finished.push(Finished {
                    slot,
                    result: Err(message.clone()),
                    bufs,
                });
            }
            return;
        }
        for i in 0..self.planned.len() {
            let slot = self.planned[i];
            let job = &mut self.jobs[slot];
            let bufs = std::mem::take(&mut job.bufs);
            if job.dropped {
                self.finished.push(Finished {
                    slot,
                    result: Ok(()),
                    bufs,
                });
                continue;
            }
            let offset = job.first_pgno.offset(page_size);
            let (class, instance, tag) = (self.shared.config.write_class, self.instance, slot);
            // Locked per call, and never while waiting for the instance lock, so that
            // `io_stats` can read the backend's counters between calls.
            let mut backend = self.shared.write_backend.lock();
            let submitted = if bufs.len() == 1 {
                // A lone page (most writes) as a plain write: io_uring's WRITE of one
                // buffer costs ~0.6 µs less CPU than its WRITEV (docs/performance.md).
                let mut bufs = bufs;
                let buf = bufs.pop().unwrap_or_default();
                // The empty vector waits for the completion's buffer.
                job.bufs = bufs;
                let request = IoRequest {
                    file: self.file,
                    op: IoOp::Write,
                    offset,
                    buf,
                    len: job.len,
                    class,
                    instance: instance.get(),
                    tag: tag as u64,
                };
                // A refused request is dropped with its buffer (unreachable: slots,
                // file and length are the writer's own); the cache then fails.
                backend.submit(request).map_err(|e| (e, Vec::new()))
            } else {
                let mut request = VectoredWrite {
                    file: self.file,
                    offset,
                    bufs,
                    class,
                    instance: instance.get(),
                    tag: tag as u64,
                };
                // A refused vectored write leaves its buffers with us: no frame's page
                // is lost with it.
                backend
                    .submit_vectored(&mut request)
                    .map_err(|e| (e, request.bufs))
            };
            drop(backend);
            match submitted {
                Ok(()) => job.submitted = true,
                Err((e, bufs)) => self.finished.push(Finished {
                    slot,
                    result: Err(format!(
                        "cannot submit the write of {} bytes at offset {offset} of {}: {e}",
                        job.len,
                        self.shared.file.path().display()
                    )),
                    bufs,
                }),
            }
        }
        self.planned.clear();
    }

    /// The write-ahead rule: no page leaves before the log holding its last change is
    /// durable.
    fn make_durable(&mut self, needed: LogPosition) -> Result<(), String> {
        let wal = &self.shared.wal;
        if wal.durable() >= needed {
            return Ok(());
        }
        self.wal_waits += 1;
        wal.flush_to(needed).map_err(|e| {
            format!("database pages cannot be written because the log could not be made durable to {needed}: {e}")
        })?;
        let durable = wal.durable();
        if durable < needed {
            return Err(format!(
                "the log reported a flush to {needed} done but is durable only to {durable}; database pages are held back to keep the write-ahead rule"
            ));
        }
        Ok(())
    }

    /// Without the lock: collects finished writes (waiting for at least `min`).
    fn reap(&mut self, min: usize) {
        let reaped = self
            .shared
            .write_backend
            .lock()
            .wait(min, &mut self.completions);
        match reaped {
            Ok(_) => {
                for c in self.completions.drain(..) {
                    let slot = c.tag as usize;
                    let job = &mut self.jobs[slot];
                    job.submitted = false;
                    let result = match c.result {
                        Ok(n) if n == job.len => Ok(()),
                        Ok(n) => Err(format!(
                            "short write: {n} of {} bytes at offset {} of {} (is the filesystem full?)",
                            job.len,
                            c.offset,
                            self.shared.file.path().display()
                        )),
                        Err(e) => Err(format!(
                            "write of {} bytes at offset {} of {} failed: {e}",
                            job.len,
                            c.offset,
                            self.shared.file.path().display()
                        )),
                    };
                    // A lone page's plain write gives back its buffer, a run's its buffers.
                    let bufs = if c.bufs.is_empty() {
                        let mut bufs = std::mem::take(&mut job.bufs);
                        bufs.push(c.buf);
                        bufs
                    } else {
                        c.bufs
                    };
                    self.finished.push(Finished { slot, result, bufs });
                }
            }
            Err(e) => {
                // The backend itself is broken: give up on everything it holds (its
                // buffers are freed when it is dropped, after the kernel is done).
                let message = format!("the database write backend failed: {e}");
                for (slot, job) in self.jobs.iter_mut().enumerate() {
                    if job.submitted {
                        job.submitted = false;
                        self.finished.push(Finished {
                            slot,
                            result: Err(message.clone()),
                            bufs: Vec::new(),
                        });
                    }
                }
            }
        }
    }

    /// Under the lock: accounts for finished writes, marks pages clean, evicts the
    /// written pages chosen for eviction, records failures.
    fn complete(&mut self, core: &mut MutexGuard<'_, Core<S>>) {
        let shared = Arc::clone(&self.shared);
        core.counts.wal_waits += std::mem::take(&mut self.wal_waits);
        let mut freed = 0;
        let mut finished = std::mem::take(&mut self.finished);
        for mut fin in finished.drain(..) {
            let job = &mut self.jobs[fin.slot];
            let pages = job.pages.len() as u64;
            // Pages written out of their frames: each buffer goes home and the page is
            // mapped again (dirty and in flight until accounted for below), whatever
            // the outcome. (If the backend lost the buffers, the cache has failed and
            // those pages stay out of the map: their bytes are gone.)
            let returned = fin.bufs.len() == job.pages.len();
            let mut any_wanted = false;
            for (i, page) in job.pages.iter_mut().enumerate() {
                if page.out && returned {
                    let f = page.frame;
                    let pgno = core.frames[f as usize].pgno;
                    if let Some(w) = core.writing_out.iter().position(|w| w.pgno == pgno) {
                        page.wanted = core.writing_out.swap_remove(w).wanted;
                    }
                    core.pages[f as usize] = std::mem::take(&mut fin.bufs[i]);
                    core.map.insert(pgno, f);
                    any_wanted |= page.wanted;
                }
            }
            if any_wanted {
                shared.read_done.notify_all();
            }
            match &fin.result {
                Ok(()) => {
                    let counts = &mut core.counts;
                    if job.dropped {
                        counts.dropped_writes += pages;
                    } else {
                        counts.writes += 1;
                        counts.pages_written += pages;
                        counts.bytes_written += job.len as u64;
                    }
                    match job.reason {
                        FlushReason::Pool => counts.pool_flushes += pages,
                        FlushReason::Checkpoint => counts.checkpoint_flushes += pages,
                        FlushReason::Requested => counts.requested_flushes += pages,
                    }
                    for (i, page) in job.pages.iter().enumerate() {
                        let f = page.frame;
                        let lru = &shared.lru[f as usize];
                        let chosen = lru.last.load(Relaxed) & EXCLUDED != 0;
                        if core.mark_written(f, page.version) {
                            if page.out {
                                // The frame's own buffer was written: sealed already.
                                if page.wanted {
                                    // Faulted in meanwhile: cached again, not evicted.
                                    let pgno = core.frames[f as usize].pgno;
                                    if chosen {
                                        core.pending_evictions -= 1;
                                    }
                                    core.install(f, pgno, lru, true);
                                    continue;
                                }
                            } else {
                                let sealed = &fin.bufs[i];
                                let frame = &mut core.pages[f as usize];
                                for range in SEALED_FIELDS {
                                    frame[range.clone()].copy_from_slice(&sealed[range]);
                                }
                            }
                            if chosen {
                                core.pending_evictions -= 1;
                                core.evict(f, lru);
                                freed += 1;
                            }
                        } else if chosen {
                            // Changed while being written: dirty again, so not evicted
                            // now; a later scan will choose it again if it is still cold.
                            core.pending_evictions -= 1;
                            lru.last.fetch_and(!EXCLUDED, Relaxed);
                        }
                    }
                }
                Err(message) => {
                    for page in &job.pages {
                        let meta = &mut core.frames[page.frame as usize];
                        meta.in_flight = false;
                        // Keep the older first_dirty: nothing of this page reached disk.
                        meta.redirty_first = None;
                        let lru = &shared.lru[page.frame as usize];
                        if lru.last.load(Relaxed) & EXCLUDED != 0 {
                            core.pending_evictions -= 1;
                            lru.last.fetch_and(!EXCLUDED, Relaxed);
                        }
                    }
                    shared.fail(core, message.clone());
                }
            }
            if job.reason == FlushReason::Pool {
                self.pool_in_flight -= 1;
                if fin.result.is_ok() && !job.dropped {
                    self.pacing
                        .write_ended(core.counts.frames_taken - job.taken_at_plan);
                    core.pool_reserve = self.pacing.reserve();
                }
            }
            job.pages.clear();
            // The snapshots are kept for later writes (the frames' buffers went home,
            // leaving empty ones), and the vector for the slot's next job.
            self.spare_pages
                .extend(fin.bufs.drain(..).filter(|b| !b.is_empty()));
            job.bufs = fin.bufs;
            self.free_slots.push(fin.slot);
            self.in_flight -= 1;
        }
        self.finished = finished;
        if freed > 0 {
            shared.frame_freed.notify_all();
        }
        if core.checkpoint_waiters > 0 {
            shared.checkpoint_moved.notify_all();
        }
    }
}

/// Whether the page of `item` is on disk at its version or newer (or left the cache,
/// which only a written page can).
fn flushed<S>(core: &Core<S>, item: FlushItem) -> bool {
    let meta = &core.frames[item.frame as usize];
    meta.state != FrameState::Resident
        || meta.pgno != item.pgno
        || !meta.dirty
        || meta.written_version >= item.version
}

/// References (ticks of the LRU clock) after which a scan's candidates are not used:
/// twice the cache's frames. Frames recently referenced at the scan rank warmer and
/// may have gone cold since; long before that many references, the sixteenth of the
/// cache a scan lists has been taken. Measured in docs/performance.md, "thirteenth
/// part": the scan's CPU fell from ~3 % of the run's to ~1 %.
fn stale_after(frames: usize) -> u64 {
    frames as u64 * 2
}
