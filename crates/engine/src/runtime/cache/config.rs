//! What a [`PageCache`](super::PageCache) is given ([`CacheConfig`]) and what it
//! reports ([`CacheCounters`]): plain data, kept apart from the cache's mechanics.

use edbstress_format::InstanceId;
use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoClass, MAX_DEPTH};

use crate::error::EngineError;

/// How a [`PageCache`] is sized and how its page writer behaves.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Page size of the database.
    pub page_size: PageSize,
    /// Frames allocated at start.
    pub min_frames: usize,
    /// Frames the cache may grow to (at least 4).
    pub max_frames: usize,
    /// Checkpoint depth in bytes of log: pages whose first unflushed change is further
    /// behind the log's end are written, oldest first (20 MB or 100 MB by profile).
    pub checkpoint_depth: u64,
    /// Largest write in bytes when coalescing contiguous dirty pages (512 KiB).
    pub coalesce_max: usize,
    /// Background writes in flight (e.g. 32); also the depth of [`PageCache::prefetch`].
    pub write_depth: usize,
    /// Instance number for I/O accounting.
    pub instance: InstanceId,
    /// I/O backend of the page writer and of prefetch.
    pub backend: BackendKind,
    /// Check the slotted-page structure of every page read (after its checksum), so
    /// users of cached pages may skip per-access checks. Off only for tests that use
    /// the cache with raw page bytes.
    pub verify_structure: bool,
    /// Class of page reads on a miss (database reads; recovery reads during replay).
    pub read_class: IoClass,
    /// Class of page writes (database writes; recovery writes during replay).
    pub write_class: IoClass,
}

impl CacheConfig {
    /// A configuration with the usual values: all frames up to `max_frames` allocated
    /// lazily from 1/8 of them, 20 MB checkpoint depth, 512 KiB coalescing, 32 writes in
    /// flight, instance 0, automatic backend.
    pub fn new(page_size: PageSize, max_frames: usize) -> CacheConfig {
        CacheConfig {
            page_size,
            min_frames: max_frames / 8,
            max_frames,
            checkpoint_depth: 20 << 20,
            coalesce_max: 512 << 10,
            write_depth: 32,
            instance: InstanceId::default(),
            backend: BackendKind::Auto,
            verify_structure: true,
            read_class: IoClass::DbRead,
            write_class: IoClass::DbWrite,
        }
    }

    /// Free frames below which the page writer starts evicting: 1 % of the maximum
    /// (Jetstress's flush threshold), but at least what one large transaction needs
    /// (24 frames: a 512 KB body in 32 KB pages plus its row and splits) as long as that
    /// is at most an eighth of the cache, so small test caches do not stall on every
    /// large insert; at least 1.
    pub fn available_start(&self) -> usize {
        (self.max_frames / 100)
            .max(24.min(self.max_frames / 8))
            .max(1)
    }

    /// Free frames at which the page writer stops evicting: 2 % of the maximum, with the
    /// same floor doubled (48 frames, at most a quarter of the cache); at least 2.
    pub fn available_stop(&self) -> usize {
        (self.max_frames / 50)
            .max(48.min(self.max_frames / 4))
            .max(2)
    }

    /// Free frames below which the page writer tops the pool up again (halfway between
    /// [`CacheConfig::available_start`] and [`CacheConfig::available_stop`]): the pool is
    /// refilled in small steps as it is consumed, not from 1 % to 2 % in one burst, and
    /// each step's writes are paced (see the page writer).
    pub fn available_refill(&self) -> usize {
        let (start, stop) = (self.available_start(), self.available_stop());
        start + (stop - start) / 2
    }

    pub(super) fn validate(&self) -> Result<(), EngineError> {
        let invalid = |what: String| Err(EngineError::Invalid(what));
        if self.max_frames < 4 || self.max_frames > u32::MAX as usize {
            return invalid(format!(
                "the database cache needs between 4 and {} frames, not {}; give it {} memory",
                u32::MAX,
                self.max_frames,
                if self.max_frames < 4 { "more" } else { "less" }
            ));
        }
        if self.min_frames > self.max_frames {
            return invalid(format!(
                "the database cache's minimum ({} frames) exceeds its maximum ({}); lower the minimum",
                self.min_frames, self.max_frames
            ));
        }
        if self.write_depth == 0 || self.write_depth > MAX_DEPTH {
            return invalid(format!(
                "the page writer's depth must be between 1 and {MAX_DEPTH}, not {}",
                self.write_depth
            ));
        }
        if self.checkpoint_depth == 0 {
            return invalid("the checkpoint depth must be more than 0 bytes of log".to_string());
        }
        Ok(())
    }
}

/// A snapshot of the cache's counters (all cumulative since creation except `frames`,
/// `available`, `dirty` and `pinned`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounters {
    /// Frames allocated.
    pub frames: usize,
    /// Frames the cache may grow to.
    pub max_frames: usize,
    /// Frames in the available pool.
    pub available: usize,
    /// Dirty pages.
    pub dirty: usize,
    /// Pages held by at least one pin ([`super::CacheGuard::pin`]): 0 whenever no
    /// operation is in progress.
    pub pinned: usize,
    /// Lookups that found their page (the lookup retrying a fault is not counted).
    pub hits: u64,
    /// `fault_in` calls that found the page absent (each reads it, or waits for another
    /// session's read of it).
    pub misses: u64,
    /// Page fault stalls: waits for a frame when none was free.
    pub stalls: u64,
    /// Time spent in those waits, in nanoseconds.
    pub stall_ns: u64,
    /// Pages read by `fault_in`.
    pub reads: u64,
    /// Eviction writes (from the frame's own buffer) that a fault waited for: the page
    /// went back into the cache when the write ended, without a read.
    pub write_out_waits: u64,
    /// Pages read and installed by `prefetch`.
    pub prefetched: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Pages whose write carried the frame's own buffer, no copy: pages being evicted,
    /// alone or within a run (counted when the write is planned).
    pub pages_written_from_frames: u64,
    /// Pages copied into a snapshot for their write, under the instance lock: pages
    /// that stay cached while written (checkpoint depth, `flush_all`, pinned), and
    /// those of writes dropped by fault injection (counted when the write is planned).
    pub pages_copied: u64,
    /// Write I/Os (a coalesced run is one).
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Pages written because their first change fell behind the checkpoint depth.
    pub checkpoint_flushes: u64,
    /// Pages written to refill the available pool (evictions of dirty pages, with the
    /// neighbours coalesced into their writes).
    pub pool_flushes: u64,
    /// Pages written by `flush_all`.
    pub requested_flushes: u64,
    /// Page writes skipped by [`PageCache::drop_next_write`].
    pub dropped_writes: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Clean pages a faulting session evicted itself because the available pool was
    /// empty (instead of waiting for the page writer: no stall).
    pub scavenged: u64,
    /// Pages read with a single flipped bit, repaired in memory.
    pub correctable_repaired: u64,
    /// Batches of writes that had to wait for the log to become durable first.
    pub wal_waits: u64,
    /// Frames taken from the available pool (or by growth): the pool's consumption.
    pub frames_taken: u64,
    /// Most writes refilling the pool that the page writer had in flight at once (paced
    /// by consumption: see docs/engine.md, "Page writer").
    pub pool_writes_peak: u64,
    /// Transactions that waited because they took the checkpoint depth past its hard
    /// limit (1.25 × the depth + 63.5 MiB; docs/engine.md, "Checkpoint
    /// depth under load").
    pub checkpoint_waits: u64,
    /// Time those transactions waited, nanoseconds.
    pub checkpoint_wait_ns: u64,
}
