//! The database page cache (buffer manager) of one instance: frames of one page each,
//! LRU-2 replacement, an available pool refilled by a background page writer, the
//! write-ahead rule, write coalescing and checkpoint-depth maintenance (engine spec §4).
//!
//! # Locking
//! [`PageCache`] owns the instance lock: one mutex over the cache contents and the
//! engine's own state `S` (B+tree metadata, dbtime, space), taken with
//! [`PageCache::lock`]. It is held for CPU work only. I/O never happens under it: a
//! session that misses calls [`PageCache::fault_in`], which releases the lock, reads
//! and verifies the page, re-takes the lock and installs it; the caller then retries
//! its operation from the start. Sessions block only on that lock, on a read they
//! asked for, and on a frame when none is free and none can be freed at once (a *page
//! fault stall*, counted): a session that finds the pool empty first evicts the
//! coldest clean pages itself, as ESE's allocator scavenges synchronously before it
//! waits, so only a shortage of clean cold pages makes it wait for the page writer.
//!
//! # Frames and replacement
//! Frames are page-sized [`AlignedBuf`]s: `min_frames` at start, more allocated as
//! pages are read, up to `max_frames`; when the page writer first has to refill the
//! available pool, the frames not allocated yet join it, so the cache is at its maximum
//! before any page is evicted. From then on frames come only from the available pool,
//! which the page writer keeps near [`CacheConfig::available_stop`] (2 % of the
//! maximum, with a floor for small caches), topping it up from
//! [`CacheConfig::available_refill`] (1.5 %) with its dirty pages' writes paced by
//! consumption (`pacing.rs`) and [`CacheConfig::available_start`] (1 %) the mark below
//! which it hurries, by evicting the coldest pages by LRU-2: pages are ranked by the
//! time of their second-most-recent reference on a
//! logical clock (one tick per reference), pages referenced once being the coldest.
//! References closer together than a correlation window (a fault and its retry, a
//! transaction's read and apply phases) count as one, as in the LRU-K paper.
//!
//! # Writing
//! A dirty frame records `first_dirty` (a lower bound of the log position where its
//! first unflushed change starts: the checkpoint never passes it), `last_change` (the
//! log must be durable to here before the page is written) and a version. The page
//! writer plans runs of contiguous dirty pages (up to `coalesce_max` bytes) under the
//! lock, seals their checksums outside it, calls [`WalSync::flush_to`] for the newest
//! change of the batch, and writes each run as one vectored write, with up to
//! `write_depth` writes in flight. A page chosen for eviction, alone or within a run,
//! is written from its frame's own buffer, out of the page map until the write ends
//! (see `frames::WriteOut`); any other page from a snapshot copied under the lock, and
//! if changed while being written it stays dirty. A dirty page is never evicted
//! unwritten. A failed write is recorded and reported by every later
//! [`PageCache::fault_in`], [`PageCache::flush_all`], [`PageCache::prefetch`] and
//! [`PageCache::try_wait_for_frame`], and by [`PageCache::failed`].

// Without `test-internals` the cache is driven only through `Instance`: the methods
// only the engine's tests call (frame waits, guards' inspection, the raw file) are
// then unused.
#![cfg_attr(not(feature = "test-internals"), allow(dead_code))]

mod config;
pub(crate) mod depth;
mod frames;
mod pacing;
mod prefetch;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use edbstress_format::Pgno;
use edbstress_format::checksum::{PageVerdict, repair_page, verify_page};
use edbstress_format::log::LogPosition;
use edbstress_io::{
    AlignedBuf, BackendPool, DataFile, FileId, IoBackend, IoMode, IoOp, IoRequest, IoStats,
    open_backend,
};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::EngineError;
use crate::runtime::session_wait::SessionCondvar;
use frames::{Core, FrameState, LruSlot, StopMode};
use prefetch::Prefetcher;
use writer::Writer;

pub use config::{CacheConfig, CacheCounters};

/// What the cache needs of the transaction log: where it ends, where it is durable, and
/// a way to make it durable (the write-ahead rule), plus distances for checkpoint depth.
pub trait WalSync: Send + Sync {
    /// End of the appended log.
    fn current(&self) -> LogPosition;
    /// End of the durable log.
    fn durable(&self) -> LogPosition;
    /// Returns once the log is durable at least up to `pos`.
    fn flush_to(&self, pos: LogPosition) -> Result<(), EngineError>;
    /// Bytes of log from `older` to `newer` (0 if `newer` is not after `older`).
    fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64;
}

/// A frame of the cache, valid while the [`CacheGuard`] it came from is held: once the
/// lock is released the frame may be given to another page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameId(u32);

impl FrameId {
    /// The frame's index (0-based).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Everything the sessions and the page writer share.
pub(crate) struct Shared<S> {
    pub(crate) core: Mutex<Core<S>>,
    /// Signalled when frames enter the pool (and on failure).
    pub(crate) frame_freed: SessionCondvar,
    /// Wakes the page writer.
    pub(crate) writer_wake: Condvar,
    /// Signalled when a read ends (sessions waiting for a page another one reads).
    pub(crate) read_done: SessionCondvar,
    /// Signalled when a `flush_all` request is served (and on failure).
    pub(crate) flush_done: Condvar,
    /// Signalled when writes end while sessions wait for the checkpoint (and on failure).
    pub(crate) checkpoint_moved: SessionCondvar,
    /// LRU-2 history per frame (index = frame), beside the lock for the eviction scan.
    pub(crate) lru: Box<[LruSlot]>,
    pub(crate) failed: AtomicBool,
    pub(crate) config: CacheConfig,
    pub(crate) file: Arc<DataFile>,
    pub(crate) wal: Arc<dyn WalSync>,
    pub(crate) prefetcher: Mutex<Option<Prefetcher>>,
    /// The backends that carry the page reads of [`PageCache::fault_in`]: lent to one
    /// missing session at a time, the database file registered as [`READ_FILE`].
    pub(crate) reads: BackendPool,
    /// The page writer's backend, here so that [`PageCache::io_stats`] reads its
    /// counters; the writer locks it for each call, never while it waits for the
    /// instance lock.
    pub(crate) write_backend: Mutex<Box<dyn IoBackend>>,
}

/// The database file's id in [`Shared::reads`].
const READ_FILE: FileId = FileId(0);
/// Requests one session has outstanding in the read pool: its own page.
const READ_DEPTH: usize = 1;
/// Most backends of the read pool: page reads outstanding at once (one per session
/// waiting for a page; more sessions than this wait for a backend), and the most
/// threads of sessions running as tasks (each reserves one; the workload's
/// `session_threads` allows as many).
const MAX_READ_BACKENDS: usize = 128;

impl<S> Shared<S> {
    /// Records the page writer's failure (the first one wins) and wakes every waiter.
    pub(crate) fn fail(&self, core: &mut Core<S>, message: String) {
        if core.failed.is_none() {
            tracing::error!(instance = self.config.instance.get(), error = %message, "database page writer failed");
            core.failed = Some(message);
            self.failed.store(true, Ordering::Release);
        }
        self.frame_freed.notify_all();
        self.read_done.notify_all();
        self.flush_done.notify_all();
        self.checkpoint_moved.notify_all();
        self.writer_wake.notify_all();
    }

    pub(crate) fn check(&self, core: &Core<S>) -> Result<(), EngineError> {
        match &core.failed {
            None => Ok(()),
            Some(message) => Err(EngineError::ShutDown(Some(message.clone()))),
        }
    }

    pub(crate) fn corrupt(&self, pgno: Pgno, what: String) -> EngineError {
        EngineError::CorruptPage {
            path: self.file.path().to_path_buf(),
            pgno,
            what,
        }
    }

    /// Checks a page just read — checksum, then structure (once, so that code using
    /// cached pages can skip the per-access structure check); repairs a single flipped
    /// bit. `Ok(Some(bit))` when repaired.
    pub(crate) fn verify(&self, page: &mut [u8], pgno: Pgno) -> Result<Option<u32>, EngineError> {
        let structure = |page: &[u8]| {
            if !self.config.verify_structure {
                return Ok(());
            }
            edbstress_format::page::Page::new(page)
                .map(|_| ())
                .map_err(|e| {
                    self.corrupt(pgno, format!("valid checksum but malformed structure: {e}"))
                })
        };
        match verify_page(page, pgno) {
            PageVerdict::Valid => structure(page).map(|()| None),
            PageVerdict::Correctable { bit } => {
                repair_page(page, pgno);
                tracing::warn!(pgno = pgno.get(), bit, path = %self.file.path().display(), "repaired a flipped bit in a page read from the database");
                structure(page).map(|()| Some(bit))
            }
            PageVerdict::Uninitialized => {
                Err(self.corrupt(pgno, "uninitialized: all zeros, never written".to_string()))
            }
            PageVerdict::WrongPageNumber { found } => Err(self.corrupt(
                pgno,
                format!("it holds page {found}: a misdirected write or read"),
            )),
            PageVerdict::Bad => {
                Err(self.corrupt(pgno, "bad checksum, not correctable".to_string()))
            }
        }
    }
}

/// The page cache of one instance, with its instance lock and page writer thread.
/// `Send + Sync`: sessions share it by reference.
pub struct PageCache<S: Send> {
    shared: Arc<Shared<S>>,
    writer: Option<JoinHandle<()>>,
}

/// The instance lock, held: access to the cached pages and to the engine state `S`.
/// Dropping it releases the lock.
pub struct CacheGuard<'a, S> {
    core: MutexGuard<'a, Core<S>>,
    shared: &'a Shared<S>,
    /// A page `new_page` could not create because it was being read or written out:
    /// the next wait for frames with this guard first waits for that to end.
    blocked_on: Option<Pgno>,
}

impl<S: Send + 'static> PageCache<S> {
    /// Creates the cache over `file` (opened read-write, direct or buffered), allocates
    /// `min_frames` frames and starts the page writer thread.
    pub fn new(
        config: CacheConfig,
        file: Arc<DataFile>,
        wal: Arc<dyn WalSync>,
        state: S,
    ) -> Result<Self, EngineError> {
        config.validate()?;
        if file.mode() == IoMode::Direct {
            // Cached pages of the database (a copy made just before the run) would make
            // each first write of a page a write-back-and-invalidate in a kernel worker.
            file.drop_cached_pages();
        }
        let page_len = config.page_size.bytes();
        // Short against the residence time of an unreferenced page (at least a cache's
        // worth of misses) yet longer than a transaction's burst of references.
        let window = (config.max_frames as u64 / 8).clamp(16, 4096);
        let mut core = Core::new(state, config.max_frames, page_len, window, wal.current());
        core.allocate_frames(config.min_frames)?;
        let mut backend = open_backend(config.backend, config.write_depth)?;
        let file_id = backend.register(&file)?;
        let lru = (0..config.max_frames).map(|_| LruSlot::new()).collect();
        let reads = BackendPool::new(
            config.backend,
            READ_DEPTH,
            MAX_READ_BACKENDS,
            vec![Arc::clone(&file)],
        )?;
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            frame_freed: SessionCondvar::new(),
            writer_wake: Condvar::new(),
            read_done: SessionCondvar::new(),
            flush_done: Condvar::new(),
            checkpoint_moved: SessionCondvar::new(),
            lru,
            failed: AtomicBool::new(false),
            config,
            file,
            wal,
            prefetcher: Mutex::new(None),
            reads,
            write_backend: Mutex::new(backend),
        });
        let writer = Writer::new(Arc::clone(&shared), file_id);
        let for_panic = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name(format!("edbs-pagewriter{}", shared.config.instance))
            .spawn(move || {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.run()));
                if outcome.is_err() {
                    let mut core = for_panic.core.lock();
                    for_panic.fail(&mut core, "the database page writer thread panicked".to_string());
                }
            })
            .map_err(|e| {
                EngineError::Invalid(format!(
                    "cannot start the database page writer thread: {e}; the system is out of threads or memory"
                ))
            })?;
        Ok(PageCache {
            shared,
            writer: Some(handle),
        })
    }

    /// Takes the instance lock.
    pub fn lock(&self) -> CacheGuard<'_, S> {
        CacheGuard {
            core: self.shared.core.lock(),
            shared: &self.shared,
            blocked_on: None,
        }
    }

    /// Makes page `pgno` resident. Releases the lock, reads the page (unless another
    /// session installs it meanwhile, or is reading it: then waits for that read),
    /// verifies its checksum (valid: installed; one flipped bit: repaired in memory and
    /// counted; anything else: [`EngineError::CorruptPage`] saying what), re-takes the
    /// lock and installs it. The frame comes from the available pool; when none is free
    /// at the maximum size this waits for the page writer (a page fault stall).
    ///
    /// The caller retries its operation afterwards (with the returned guard or a new
    /// one); the first [`CacheGuard::lookup`] of the page after the install is not
    /// counted as a hit or as a new reference.
    pub fn fault_in<'a>(
        &'a self,
        mut guard: CacheGuard<'a, S>,
        pgno: Pgno,
    ) -> Result<CacheGuard<'a, S>, EngineError> {
        let shared = &*self.shared;
        if pgno == 0 {
            return Err(EngineError::Invalid(
                "page 0 does not exist: data pages are numbered from 1".to_string(),
            ));
        }
        let mut missed = false;
        let mut stalled: Option<Instant> = None;
        let frame = loop {
            let core = &mut guard.core;
            if let Err(e) = shared.check(core) {
                end_stall(core, stalled);
                return Err(e);
            }
            if core.map.contains_key(&pgno) {
                end_stall(core, stalled);
                return Ok(guard);
            }
            if !missed {
                missed = true;
                core.counts.misses += 1;
            }
            if core.reading.contains(&pgno) {
                shared.read_done.wait(core);
                continue;
            }
            if let Some(out) = core.writing_out.iter_mut().find(|w| w.pgno == pgno) {
                // Its eviction write carries the frame's buffer: the write's end puts
                // the page back in the map for us, and no read is needed.
                if !out.wanted {
                    out.wanted = true;
                    core.counts.write_out_waits += 1;
                }
                shared.read_done.wait(core);
                continue;
            }
            if let Some(f) = core.take_frame() {
                break f;
            }
            if core.scavenge_clean(&shared.lru, shared.config.available_stop()) > 0 {
                shared.writer_wake.notify_one();
                continue;
            }
            if stalled.is_none() {
                core.counts.stalls += 1;
                stalled = Some(Instant::now());
            }
            wait_for_free_frame(shared, core);
        };
        let core = &mut guard.core;
        end_stall(core, stalled);
        if pool_short(core, &shared.config) {
            shared.writer_wake.notify_one();
        }
        core.frames[frame as usize].state = FrameState::Reading;
        core.reading.push(pgno);
        let mut buf = std::mem::take(&mut core.pages[frame as usize]);
        let read = MutexGuard::unlocked(core, || read_page(shared, &mut buf, pgno));
        if let Some(i) = core.reading.iter().position(|&p| p == pgno) {
            core.reading.swap_remove(i);
        }
        shared.read_done.notify_all();
        core.pages[frame as usize] = buf;
        match read {
            Ok(repaired) => {
                core.counts.reads += 1;
                if repaired.is_some() {
                    core.counts.correctable_repaired += 1;
                }
                let lru = &shared.lru[frame as usize];
                if core.map.contains_key(&pgno) {
                    // Created meanwhile by new_page: that version wins.
                    core.release_frame(frame, lru);
                    shared.frame_freed.notify_one();
                } else {
                    core.install(frame, pgno, lru, true);
                }
                Ok(guard)
            }
            Err(e) => {
                core.release_frame(frame, &shared.lru[frame as usize]);
                shared.frame_freed.notify_one();
                Err(e)
            }
        }
    }

    /// Reads many pages at once with the asynchronous backend, `write_depth` at a time
    /// (recovery prefetch), and installs those not cached yet. Takes frames only from
    /// the available pool or by growing: it never evicts, and stops early when no frame
    /// is free. A page that fails verification ends it with that error, after the reads
    /// in flight are done.
    pub fn prefetch(&self, pgnos: &[Pgno]) -> Result<(), EngineError> {
        let shared = &*self.shared;
        shared.check(&shared.core.lock())?;
        let mut slot = shared.prefetcher.lock();
        let prefetcher = match &mut *slot {
            Some(prefetcher) => prefetcher,
            None => slot.insert(Prefetcher::new(&shared.config, &shared.file)?),
        };
        let result = prefetcher.run(shared, pgnos);
        if prefetcher.broken {
            // Dropping the backend waits for whatever the kernel still holds; its
            // counters are kept.
            let stats = prefetcher.stats().clone();
            shared.core.lock().retired_read_stats.merge(&stats);
            *slot = None;
        }
        result
    }

    /// Releases the lock, waits until a frame is obtainable (counted as a stall when it
    /// has to wait) and re-takes the lock. Returns at once after a page writer failure:
    /// check [`PageCache::failed`], or use [`PageCache::try_wait_for_frame`].
    pub fn wait_for_frame<'a>(&'a self, mut guard: CacheGuard<'a, S>) -> CacheGuard<'a, S> {
        let _ = self.wait_frame(&mut guard);
        guard
    }

    /// [`PageCache::wait_for_frame`] that reports a page writer failure.
    pub fn try_wait_for_frame<'a>(
        &'a self,
        mut guard: CacheGuard<'a, S>,
    ) -> Result<CacheGuard<'a, S>, EngineError> {
        self.wait_frame(&mut guard)?;
        Ok(guard)
    }

    /// Releases the lock and waits until `count` frames can be had at once (a
    /// transaction that creates several pages needs them together); counted as a stall.
    pub fn try_wait_for_frames<'a>(
        &'a self,
        mut guard: CacheGuard<'a, S>,
        count: usize,
    ) -> Result<CacheGuard<'a, S>, EngineError> {
        let most = self.shared.config.max_frames / 2;
        if count > most {
            return Err(EngineError::Invalid(format!(
                "a transaction needs {count} new pages at once, more than half the database cache ({} pages); use a larger cache",
                self.shared.config.max_frames
            )));
        }
        self.wait_frames(&mut guard, count)?;
        Ok(guard)
    }

    fn wait_frame(&self, guard: &mut CacheGuard<'_, S>) -> Result<(), EngineError> {
        self.wait_frames(guard, 1)
    }

    fn wait_frames(&self, guard: &mut CacheGuard<'_, S>, count: usize) -> Result<(), EngineError> {
        let shared = &*self.shared;
        let blocked_on = guard.blocked_on.take();
        let core = &mut guard.core;
        if let Some(pgno) = blocked_on {
            // new_page refused this page while it was read or written out: retrying
            // before that ends would only find it in transit again.
            while core.in_transit(pgno) {
                shared.check(core)?;
                shared.read_done.wait(core);
            }
        }
        let mut stalled: Option<Instant> = None;
        let result = loop {
            if let Err(e) = shared.check(core) {
                break Err(e);
            }
            if core.obtainable() >= count {
                break Ok(());
            }
            if core.scavenge_clean(&shared.lru, shared.config.available_stop().max(count)) > 0 {
                shared.writer_wake.notify_one();
                continue;
            }
            core.frames_wanted = core.frames_wanted.max(count);
            if stalled.is_none() {
                core.counts.stalls += 1;
                stalled = Some(Instant::now());
            }
            wait_for_free_frame(shared, core);
        };
        end_stall(core, stalled);
        result
    }

    /// The checkpoint: the oldest `first_dirty` among dirty pages, or the log's current
    /// end when no page is dirty. Recovery must start there.
    pub fn checkpoint(&self) -> LogPosition {
        let core = self.shared.core.lock();
        match core.oldest_dirty() {
            Some(position) => position,
            None => self.shared.wal.current(),
        }
    }

    /// Writes every page dirty now and waits until each is on disk (pages changed
    /// meanwhile are on disk at least as of the call).
    pub fn flush_all(&self) -> Result<(), EngineError> {
        let shared = &*self.shared;
        let mut core = shared.core.lock();
        shared.check(&core)?;
        core.flush_requested += 1;
        let ticket = core.flush_requested;
        shared.writer_wake.notify_one();
        while core.flush_served < ticket {
            shared.check(&core)?;
            shared.flush_done.wait(&mut core);
        }
        Ok(())
    }

    /// Clean shutdown: [`PageCache::flush_all`], stops the page writer, returns the
    /// engine state.
    pub fn shutdown(mut self) -> Result<S, EngineError> {
        let flushed = self.flush_all();
        let joined = self.stop_writer(StopMode::Stop);
        flushed?;
        joined?;
        let shared = Arc::clone(&self.shared);
        drop(self);
        match Arc::try_unwrap(shared) {
            Ok(shared) => {
                let core = shared.core.into_inner();
                match core.failed {
                    None => Ok(core.state),
                    Some(message) => Err(EngineError::ShutDown(Some(message))),
                }
            }
            Err(_) => Err(EngineError::ShutDown(Some(
                "the page cache is still in use by another thread".to_string(),
            ))),
        }
    }

    /// Crash simulation: stops the page writer (after the writes already in flight) and
    /// drops the dirty pages unwritten.
    pub fn abandon(mut self) {
        let dirty = self.shared.core.lock().dirty.len();
        let _ = self.stop_writer(StopMode::Abandon);
        tracing::info!(
            instance = self.shared.config.instance.get(),
            dirty,
            "page cache abandoned with its dirty pages unwritten"
        );
    }

    fn stop_writer(&mut self, mode: StopMode) -> Result<(), EngineError> {
        let Some(handle) = self.writer.take() else {
            return Ok(());
        };
        {
            let mut core = self.shared.core.lock();
            if core.stop == StopMode::Run {
                core.stop = mode;
            }
            self.shared.writer_wake.notify_all();
        }
        handle.join().map_err(|_| {
            EngineError::ShutDown(Some("the database page writer thread panicked".to_string()))
        })
    }

    /// Sets the LRU-2 correlation window: references to a page less than `references`
    /// ticks of the reference clock apart count as one. The default is 1/8 of
    /// `max_frames`, between 16 and 4096.
    pub fn set_correlation_window(&self, references: u64) {
        self.shared.core.lock().correlation_window = references;
    }
}

impl<S: Send> PageCache<S> {
    /// A snapshot of the counters.
    pub fn counters(&self) -> CacheCounters {
        let core = self.shared.core.lock();
        let c = &core.counts;
        CacheCounters {
            frames: core.frames.len(),
            max_frames: core.max_frames,
            available: core.available.len(),
            dirty: core.dirty.len(),
            pinned: core.pinned_frames,
            hits: c.hits,
            misses: c.misses,
            stalls: c.stalls,
            stall_ns: c.stall_ns,
            reads: c.reads,
            write_out_waits: c.write_out_waits,
            prefetched: c.prefetched,
            pages_written: c.pages_written,
            pages_written_from_frames: c.pages_written_from_frames,
            pages_copied: c.pages_copied,
            writes: c.writes,
            bytes_written: c.bytes_written,
            checkpoint_flushes: c.checkpoint_flushes,
            pool_flushes: c.pool_flushes,
            requested_flushes: c.requested_flushes,
            dropped_writes: c.dropped_writes,
            evictions: c.evictions,
            scavenged: c.scavenged,
            correctable_repaired: c.correctable_repaired,
            wal_waits: c.wal_waits,
            frames_taken: c.frames_taken,
            pool_writes_peak: c.pool_writes_peak,
            checkpoint_waits: c.checkpoint_waits,
            checkpoint_wait_ns: c.checkpoint_wait_ns,
        }
    }

    /// The cache's I/O as the io backends that carried it counted it: the configured
    /// read class (fault_in), write class (page writer) and RecoveryRead (prefetch),
    /// under the configured instance. Waits for reads in flight and for a prefetch
    /// batch to end.
    pub fn io_stats(&self) -> IoStats {
        let shared = &*self.shared;
        let mut stats = shared.reads.stats();
        stats.merge(&shared.core.lock().retired_read_stats);
        stats.merge(shared.write_backend.lock().stats());
        // Not under the instance lock: prefetch takes it while holding its own.
        if let Some(prefetcher) = &*shared.prefetcher.lock() {
            stats.merge(prefetcher.stats());
        }
        stats
    }

    /// "io_uring" or "threads": the backend that carries the page reads of
    /// [`PageCache::fault_in`] (the page writer and prefetch use the same kind).
    pub fn read_backend(&self) -> &'static str {
        self.shared.reads.name()
    }

    /// Fault injection for lost-flush detection tests: the next write of page `pgno` is
    /// reported done (the page becomes clean and may be evicted) but never issued.
    pub fn drop_next_write(&self, pgno: Pgno) {
        let mut core = self.shared.core.lock();
        if !core.drop_writes.contains(&pgno) {
            core.drop_writes.push(pgno);
        }
    }

    /// The page writer's error, if it failed. After a failure the cache writes nothing
    /// more; fault_in, prefetch, flush_all and shutdown return
    /// [`EngineError::ShutDown`] with this message.
    pub fn failed(&self) -> Option<String> {
        if !self.has_failed() {
            return None;
        }
        self.shared.core.lock().failed.clone()
    }

    /// Whether the page writer failed, without taking the cache lock (a caller that
    /// holds it must release it before [`PageCache::failed`]).
    pub fn has_failed(&self) -> bool {
        self.shared.failed.load(Ordering::Acquire)
    }

    /// The database file.
    pub fn file(&self) -> &Arc<DataFile> {
        &self.shared.file
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.shared.config
    }
}

impl<S: Send> Drop for PageCache<S> {
    /// Dropped without `shutdown` or `abandon`: stops the page writer like `abandon`.
    fn drop(&mut self) {
        let Some(handle) = self.writer.take() else {
            return;
        };
        let dirty = {
            let mut core = self.shared.core.lock();
            if core.stop == StopMode::Run {
                core.stop = StopMode::Abandon;
            }
            self.shared.writer_wake.notify_all();
            core.dirty.len()
        };
        if dirty > 0 {
            tracing::warn!(
                instance = self.shared.config.instance.get(),
                dirty,
                "page cache dropped without shutdown: dirty pages were not written"
            );
        }
        let _ = handle.join();
    }
}

impl<S> CacheGuard<'_, S> {
    /// The engine state protected by the instance lock.
    pub fn state(&mut self) -> &mut S {
        &mut self.core.state
    }

    /// The engine state, read-only.
    pub fn state_ref(&self) -> &S {
        &self.core.state
    }

    /// The frame holding `pgno`, if cached: a hit, and a reference for LRU-2.
    #[inline]
    pub fn lookup(&mut self, pgno: Pgno) -> Option<FrameId> {
        let f = *self.core.map.get(&pgno)?;
        let meta = &mut self.core.frames[f as usize];
        if meta.fresh {
            // The retry after the fault that installed it: the install was the reference.
            meta.fresh = false;
        } else {
            self.core.counts.hits += 1;
            self.core.touch(&self.shared.lru[f as usize]);
        }
        Some(FrameId(f))
    }

    /// The frame holding `pgno`, if cached, without counting a hit or a reference:
    /// for read-only walks that only make sure pages are cached before an operation
    /// that will look them up for real.
    pub fn peek(&self, pgno: Pgno) -> Option<FrameId> {
        self.core.map.get(&pgno).map(|&f| FrameId(f))
    }

    /// Whether `pgno` is cached; neither a hit nor a reference.
    pub fn contains(&self, pgno: Pgno) -> bool {
        self.core.map.contains_key(&pgno)
    }

    /// The page in frame `f`.
    pub fn page(&self, f: FrameId) -> &[u8] {
        debug_assert_eq!(self.core.frames[f.index()].state, FrameState::Resident);
        &self.core.pages[f.index()]
    }

    /// The page in frame `f`, to modify; call [`CacheGuard::mark_dirty`] before
    /// releasing the lock.
    pub fn page_mut(&mut self, f: FrameId) -> &mut [u8] {
        debug_assert_eq!(self.core.frames[f.index()].state, FrameState::Resident);
        &mut self.core.pages[f.index()]
    }

    /// The page number held by frame `f`.
    pub fn pgno(&self, f: FrameId) -> Pgno {
        self.core.frames[f.index()].pgno
    }

    /// Whether frame `f` holds unwritten changes.
    pub fn is_dirty(&self, f: FrameId) -> bool {
        self.core.frames[f.index()].dirty
    }

    /// Whether a change marked now on frame `f` would start a new dirty period — the
    /// page is clean, or its write is in flight and this is the first change since the
    /// snapshot — so that the change's start may become the page's `first_dirty`, and
    /// the checkpoint may move up to it.
    pub fn starts_dirty_period(&self, f: FrameId) -> bool {
        let meta = &self.core.frames[f.index()];
        !meta.dirty || (meta.in_flight && meta.redirty_first.is_none())
    }

    /// Records a change of frame `f` whose log records end at `change_end` (the end of
    /// the transaction's append): the page may be written only once the log is durable
    /// there. Its `first_dirty`, if it was clean, is the end of the change marked before
    /// this one: a transaction's records start at or after it when, as the engine does,
    /// each transaction appends its records and marks its pages in one hold of the
    /// instance lock. Marking out of log order is safe but pins the checkpoint to the
    /// start of the log until the page is written; give the start with
    /// [`CacheGuard::mark_dirty_span`] when it is known.
    pub fn mark_dirty(&mut self, f: FrameId, change_end: LogPosition) {
        let start = self.core.change_start_bound(change_end);
        self.core.mark_dirty(f.0, start, change_end);
    }

    /// [`CacheGuard::mark_dirty`] with the log position where the change's records
    /// start (what the checkpoint may not pass).
    pub fn mark_dirty_span(
        &mut self,
        f: FrameId,
        change_start: LogPosition,
        change_end: LogPosition,
    ) {
        self.core.note_change_end(change_end);
        self.core
            .mark_dirty(f.0, change_start.min(change_end), change_end);
    }

    /// A frame for page `pgno`, which is being created: zero-filled and not read (the
    /// caller formats it and marks it dirty), or the cached page if there is one. `None`
    /// when no frame is free, or while the page is being read or written out of its
    /// frame: call [`PageCache::wait_for_frame`] with this guard (it waits for either)
    /// and retry.
    pub fn new_page(&mut self, pgno: Pgno) -> Option<FrameId> {
        self.create_page(pgno, true)
    }

    /// [`CacheGuard::new_page`] for a caller that overwrites the whole page before
    /// anything reads it (formats it): the frame keeps whatever bytes it held, which
    /// spares zeroing a page that formatting zeroes again.
    pub fn new_page_to_format(&mut self, pgno: Pgno) -> Option<FrameId> {
        self.create_page(pgno, false)
    }

    fn create_page(&mut self, pgno: Pgno, zeroed: bool) -> Option<FrameId> {
        if let Some(f) = self.lookup(pgno) {
            return Some(f);
        }
        if pgno == Pgno::NONE {
            return None;
        }
        if self.core.in_transit(pgno) {
            if let Some(out) = self.core.writing_out.iter_mut().find(|w| w.pgno == pgno) {
                out.wanted = true;
            }
            self.blocked_on = Some(pgno);
            return None;
        }
        let f = self.core.take_frame()?;
        let shared = self.shared;
        let core = &mut self.core;
        if pool_short(core, &shared.config) {
            shared.writer_wake.notify_one();
        }
        let page_len = core.page_len;
        let page = &mut core.pages[f as usize];
        if page.is_empty() {
            *page = AlignedBuf::new(page_len);
        } else if zeroed {
            page.fill(0);
        }
        core.install(f, pgno, &shared.lru[f as usize], false);
        Some(FrameId(f))
    }

    /// Keeps page `pgno` (if cached) from being evicted until [`CacheGuard::unpin`]:
    /// an operation that faulted several pages in, one per attempt, needs all of them
    /// at once on its final attempt. Returns whether the page was pinned.
    pub fn pin(&mut self, pgno: Pgno) -> bool {
        match self.core.map.get(&pgno) {
            Some(&f) => {
                let core = &mut *self.core;
                let meta = &mut core.frames[f as usize];
                meta.pins += 1;
                if meta.pins == 1 {
                    core.pinned_frames += 1;
                }
                true
            }
            None => false,
        }
    }

    /// Releases a pin taken by [`CacheGuard::pin`].
    pub fn unpin(&mut self, pgno: Pgno) {
        if let Some(&f) = self.core.map.get(&pgno) {
            let core = &mut *self.core;
            let meta = &mut core.frames[f as usize];
            if meta.pins == 1 {
                core.pinned_frames -= 1;
            }
            meta.pins = meta.pins.saturating_sub(1);
        }
    }

    /// Forgets a page created with [`CacheGuard::new_page`] that was never marked
    /// dirty (a transaction attempt that is being undone) and frees its frame.
    pub fn discard(&mut self, f: FrameId) {
        let meta = &self.core.frames[f.index()];
        if meta.dirty || meta.in_flight {
            debug_assert!(false, "discard of a dirty or in-flight frame");
            return;
        }
        self.core.evict(f.0, &self.shared.lru[f.index()]);
    }

    /// The checkpoint as of now ([`PageCache::checkpoint`], under the held lock), so the
    /// caller can pair it with state it reads under the same lock.
    pub fn checkpoint_position(&self) -> LogPosition {
        match self.core.oldest_dirty() {
            Some(position) => position,
            None => self.shared.wal.current(),
        }
    }

    /// Number of dirty pages.
    pub fn dirty_count(&self) -> usize {
        self.core.dirty.len()
    }
}

/// Whether the page writer has pool maintenance to do: the free frames plus those it
/// is already evicting fall below the refill threshold (it chooses more pages to
/// evict), or the free ones alone below the start threshold (it hurries). Checked after
/// each frame taken; the first test keeps the writer from scanning for cold pages
/// after every single frame.
pub(crate) fn pool_short<S>(core: &Core<S>, config: &CacheConfig) -> bool {
    let (start, refill, _) = pool_thresholds(core, config);
    let obtainable = core.obtainable();
    obtainable + core.pending_evictions < refill || obtainable < start
}

/// The pool's start, refill and stop thresholds now: the configured ones
/// ([`CacheConfig::available_start`] …), raised to the demand the page writer measured
/// (`Core::pool_reserve`: the frames sessions take while it turns cold pages into free
/// frames) so that the pool stays ahead of a closed-loop load, at most a quarter of the
/// cache.
pub(crate) fn pool_thresholds<S>(core: &Core<S>, config: &CacheConfig) -> (usize, usize, usize) {
    let most = (config.max_frames / 4).max(config.available_stop());
    let start = config.available_start().max(core.pool_reserve).min(most);
    let stop = config.available_stop().max(2 * core.pool_reserve).min(most);
    (start, start + (stop - start) / 2, stop)
}

/// Waits on the pool's condition variable, telling the page writer someone waits.
fn wait_for_free_frame<S>(shared: &Shared<S>, core: &mut MutexGuard<'_, Core<S>>) {
    core.frame_waiters += 1;
    shared.writer_wake.notify_one();
    shared.frame_freed.wait(core);
    core.frame_waiters -= 1;
    if core.frame_waiters == 0 {
        core.frames_wanted = 0;
    }
}

fn end_stall<S>(core: &mut Core<S>, stalled: Option<Instant>) {
    if let Some(since) = stalled {
        core.counts.stall_ns += u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    }
}

/// Reads and verifies page `pgno` into `buf` (allocated here if empty), without the
/// lock, through a backend of the read pool, which times and counts the read. The
/// repaired bit, if any, or why the page is unusable. When the backend fails the
/// buffer stays with it and `buf` is left empty (the frame gets a new one later).
fn read_page<S>(
    shared: &Shared<S>,
    buf: &mut AlignedBuf,
    pgno: Pgno,
) -> Result<Option<u32>, EngineError> {
    let page_size = shared.config.page_size;
    let page_len = page_size.bytes();
    if buf.is_empty() {
        *buf = AlignedBuf::try_new(page_len)?;
    }
    let offset = pgno.offset(page_size);
    let request = IoRequest {
        file: READ_FILE,
        op: IoOp::Read,
        offset,
        buf: std::mem::take(buf),
        len: page_len,
        class: shared.config.read_class,
        instance: shared.config.instance.get(),
        tag: 0,
    };
    let completion = shared.reads.run(request)?;
    *buf = completion.buf;
    match completion.result {
        Ok(n) if n == page_len => shared.verify(buf, pgno),
        Ok(n) => Err(EngineError::Io(edbstress_io::IoError::Io {
            path: shared.file.path().to_path_buf(),
            op: "read",
            offset,
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "short read: {n} of {page_len} bytes; is the page beyond the end of the file?"
                ),
            ),
        })),
        Err(source) => Err(EngineError::Io(edbstress_io::IoError::Io {
            path: shared.file.path().to_path_buf(),
            op: "read",
            offset,
            source,
        })),
    }
}

#[cfg(test)]
mod tests;
