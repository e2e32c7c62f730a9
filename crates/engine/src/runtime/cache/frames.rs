//! What the instance lock protects: frame bookkeeping, the page map, the available pool,
//! the dirty list ordered by first change, and the LRU-2 reference history (kept in
//! atomics beside the lock so the page writer can rank frames without holding it).

use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use edbstress_format::Pgno;
use edbstress_format::log::LogPosition;
use edbstress_io::{AlignedBuf, IoStats};

/// `HashMap<pgno, frame>` with a multiplicative hash: page numbers are trusted (they come
/// from our own B+tree), so SipHash's flooding resistance buys nothing and costs ~15 ns.
pub(crate) type PgnoMap = HashMap<Pgno, u32, BuildHasherDefault<PgnoHasher>>;

/// Fibonacci hashing with a final fold, so that both the high bits (hashbrown's control
/// bytes) and the low bits (bucket index) depend on every bit of the page number: page
/// numbers with a common stride (every 64th page) must not collide in the low bits.
#[derive(Default, Clone, Copy)]
pub(crate) struct PgnoHasher(u64);

impl Hasher for PgnoHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let h = (u64::from(n) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

/// Where a frame is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameState {
    /// In the available pool (or just allocated): holds no page.
    Free,
    /// Reserved by a reader (fault_in or prefetch); its buffer is out being filled.
    Reading,
    /// Holds a page that is in the map.
    Resident,
}

/// Bookkeeping of one frame; its bytes are `Core::pages[frame]`.
#[derive(Debug)]
pub(crate) struct FrameMeta {
    pub(crate) pgno: Pgno,
    pub(crate) state: FrameState,
    pub(crate) dirty: bool,
    /// The page is being written: from a snapshot, or (out of the map, see
    /// [`WriteOut`]) from the frame's own buffer.
    pub(crate) in_flight: bool,
    /// Lower bound of the log position of the first unflushed change (the checkpoint
    /// may not pass it).
    pub(crate) first_dirty: LogPosition,
    /// The log must be durable to here before the page may be written (WAL).
    pub(crate) last_change: LogPosition,
    /// Incremented by every change; never reset, so it orders all contents a frame has
    /// ever held.
    pub(crate) version: u64,
    /// Version of the snapshot of the last successful write.
    pub(crate) written_version: u64,
    /// first_dirty of the first change made while a write was in flight: the page's
    /// first_dirty once that write completes.
    pub(crate) redirty_first: Option<LogPosition>,
    /// Installed by a fault and not looked up since: that first lookup is the faulting
    /// session's retry, neither a hit nor a new reference.
    pub(crate) fresh: bool,
    /// Operations in progress that need the page to stay (see `CacheGuard::pin`); the
    /// writer never evicts a pinned page.
    pub(crate) pins: u32,
}

impl FrameMeta {
    pub(crate) fn new() -> FrameMeta {
        FrameMeta {
            pgno: Pgno::NONE,
            state: FrameState::Free,
            dirty: false,
            in_flight: false,
            first_dirty: LogPosition::default(),
            last_change: LogPosition::default(),
            version: 0,
            written_version: 0,
            redirty_first: None,
            fresh: false,
            pins: 0,
        }
    }
}

/// Set in `LruSlot::last` while a frame must not be chosen by the eviction scan: it holds
/// no page, or it is already chosen and waiting for its write.
pub(crate) const EXCLUDED: u64 = 1 << 63;

/// LRU-2 history of one frame, on the logical reference clock.
///
/// Following the LRU-K paper (O'Neil, O'Neil, Weikum 1993), references closer than the
/// correlation window to the previous one (a transaction's read phase and apply phase, a
/// fault and its retry) count as one: they move `last` but not `hist2`. An uncorrelated
/// reference shifts `last` into `hist2`. A page is ranked by `hist2` (0 = referenced
/// once: coldest), ties by `last`; pages inside their correlation window rank after all
/// others. Written only under the instance lock, read by the writer's scan without it.
#[derive(Debug)]
pub(crate) struct LruSlot {
    /// Clock of the most recent reference, or'ed with [`EXCLUDED`].
    pub(crate) last: AtomicU64,
    /// Clock of the end of the previous correlated period; 0 if referenced only once.
    pub(crate) hist2: AtomicU64,
}

impl LruSlot {
    pub(crate) fn new() -> LruSlot {
        LruSlot {
            last: AtomicU64::new(EXCLUDED),
            hist2: AtomicU64::new(0),
        }
    }

    /// A reference at `now`; returns whether the frame was chosen for eviction (the
    /// reference cancels that: the page is no longer cold).
    #[inline]
    pub(crate) fn touch(&self, now: u64, window: u64) -> bool {
        let raw = self.last.load(Relaxed);
        let last = raw & !EXCLUDED;
        if now.saturating_sub(last) > window {
            self.hist2.store(last, Relaxed);
        }
        self.last.store(now, Relaxed);
        raw & EXCLUDED != 0
    }

    /// The first reference of a page just installed in the frame.
    pub(crate) fn install(&self, now: u64) {
        self.hist2.store(0, Relaxed);
        self.last.store(now, Relaxed);
    }

    /// The frame holds no page any more.
    pub(crate) fn clear(&self) {
        self.hist2.store(0, Relaxed);
        self.last.store(EXCLUDED, Relaxed);
    }
}

/// The eviction rank of a frame: smaller is colder. `(recently referenced, hist2, last)`.
pub(crate) type EvictionKey = (bool, u64, u64);

/// The rank of a frame from its history at clock `now`, or `None` when excluded.
#[inline]
pub(crate) fn eviction_key(
    raw_last: u64,
    hist2: u64,
    now: u64,
    window: u64,
) -> Option<EvictionKey> {
    if raw_last & EXCLUDED != 0 {
        return None;
    }
    let recent = now.saturating_sub(raw_last) <= window;
    Some((recent, hist2, raw_last))
}

/// Why a page was written (for the counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushReason {
    /// To refill the available pool (evicting the coldest pages).
    Pool,
    /// Its first change fell more than the checkpoint depth behind the log.
    Checkpoint,
    /// `flush_all`.
    Requested,
}

/// How the page writer is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopMode {
    Run,
    /// Finish the writes in flight, then exit (after `flush_all`).
    Stop,
    /// Crash simulation: exit as soon as the writes in flight are done, write nothing more.
    Abandon,
}

/// Counters kept under the lock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) stalls: u64,
    pub(crate) stall_ns: u64,
    pub(crate) reads: u64,
    pub(crate) write_out_waits: u64,
    pub(crate) prefetched: u64,
    pub(crate) pages_written: u64,
    /// Pages whose write carried their frame's own buffer (no copy).
    pub(crate) pages_written_from_frames: u64,
    /// Pages copied into a write snapshot (under the lock).
    pub(crate) pages_copied: u64,
    pub(crate) writes: u64,
    pub(crate) bytes_written: u64,
    pub(crate) checkpoint_flushes: u64,
    pub(crate) pool_flushes: u64,
    pub(crate) requested_flushes: u64,
    pub(crate) dropped_writes: u64,
    pub(crate) evictions: u64,
    /// Clean pages evicted by faulting sessions themselves when the pool was empty
    /// ([`Core::scavenge_clean`]).
    pub(crate) scavenged: u64,
    pub(crate) correctable_repaired: u64,
    pub(crate) wal_waits: u64,
    /// Frames handed out by `take_frame` (the pool's consumption, for pacing).
    pub(crate) frames_taken: u64,
    /// Most pool writes the page writer had in flight at once.
    pub(crate) pool_writes_peak: u64,
    /// Transactions that waited for the checkpoint (past its hard limit), and how long.
    pub(crate) checkpoint_waits: u64,
    pub(crate) checkpoint_wait_ns: u64,
}

/// A page chosen for eviction whose write (alone or as one page of a run) carries the
/// frame's own buffer instead of a snapshot copy. Until the write ends the page is out of
/// the map (no session can see or change it), its frame stays `Resident` and in flight
/// (so the dirty list, the checkpoint and `flush_all` still see it unwritten), and a
/// session that faults it in waits for the write as for a read in progress; the write's
/// end then installs it again instead of evicting it. One entry per page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteOut {
    pub(crate) pgno: Pgno,
    /// A session waited for it: keep it cached once written.
    pub(crate) wanted: bool,
}

/// The cache contents and the engine state, all behind the instance lock.
pub(crate) struct Core<S> {
    pub(crate) state: S,
    pub(crate) frames: Vec<FrameMeta>,
    pub(crate) pages: Vec<AlignedBuf>,
    pub(crate) map: PgnoMap,
    /// Free frames holding no page (a stack: the most recently freed buffer is warmest).
    pub(crate) available: Vec<u32>,
    /// Pages being read by a session or prefetch (few: one per reading session).
    pub(crate) reading: Vec<Pgno>,
    /// Pages being written straight from their frame's buffer before eviction (see
    /// [`WriteOut`]): out of the map until the write ends.
    pub(crate) writing_out: Vec<WriteOut>,
    /// Dirty frames by `(first_dirty.pack(), frame)`: the first is the checkpoint.
    pub(crate) dirty: BTreeSet<(u64, u32)>,
    pub(crate) max_frames: usize,
    pub(crate) page_len: usize,
    /// The logical LRU clock: one tick per reference.
    pub(crate) clock: u64,
    pub(crate) correlation_window: u64,
    /// Frames chosen for eviction whose write (or in-flight write) is pending.
    pub(crate) pending_evictions: usize,
    /// Frames with at least one pin (the eviction scan looks this much further).
    pub(crate) pinned_frames: usize,
    /// Sessions waiting for a frame.
    pub(crate) frame_waiters: usize,
    /// Sessions waiting for the checkpoint to come back within its hard limit.
    pub(crate) checkpoint_waiters: usize,
    /// Most frames a waiting session needs at once (a transaction creating several
    /// pages); the writer refills the pool to at least this.
    pub(crate) frames_wanted: usize,
    /// Free frames the page writer keeps ahead of the measured demand (see
    /// `pool_thresholds`); 0 until pool writes are measured.
    pub(crate) pool_reserve: usize,
    /// End of the change marked before the current one, and of the current one: the
    /// change being marked starts at or after `previous_change_end`.
    pub(crate) previous_change_end: LogPosition,
    pub(crate) current_change_end: LogPosition,
    pub(crate) warned_out_of_order: bool,
    /// Fault injection: pages whose next write is reported done but not issued.
    pub(crate) drop_writes: Vec<Pgno>,
    pub(crate) flush_requested: u64,
    pub(crate) flush_served: u64,
    pub(crate) stop: StopMode,
    /// The page writer's failure: every later flush, fault or wait reports it.
    pub(crate) failed: Option<String>,
    pub(crate) counts: Counts,
    /// Counters of prefetch backends dropped after a failure (the live ones count
    /// their own).
    pub(crate) retired_read_stats: IoStats,
}

impl<S> Core<S> {
    pub(crate) fn new(
        state: S,
        max_frames: usize,
        page_len: usize,
        correlation_window: u64,
        log_start: LogPosition,
    ) -> Core<S> {
        Core {
            state,
            frames: Vec::new(),
            pages: Vec::new(),
            map: PgnoMap::default(),
            available: Vec::new(),
            reading: Vec::new(),
            writing_out: Vec::new(),
            dirty: BTreeSet::new(),
            max_frames,
            page_len,
            clock: 0,
            correlation_window,
            pending_evictions: 0,
            pinned_frames: 0,
            frame_waiters: 0,
            checkpoint_waiters: 0,
            frames_wanted: 0,
            pool_reserve: 0,
            previous_change_end: log_start,
            current_change_end: log_start,
            warned_out_of_order: false,
            drop_writes: Vec::new(),
            flush_requested: 0,
            flush_served: 0,
            stop: StopMode::Run,
            failed: None,
            counts: Counts::default(),
            retired_read_stats: IoStats::new(),
        }
    }

    /// Free frames plus frames that may still be allocated: what sessions can get
    /// without waiting.
    #[inline]
    pub(crate) fn obtainable(&self) -> usize {
        self.available.len() + (self.max_frames - self.frames.len())
    }

    /// A frame holding no page: from the pool, else a new one while below the maximum
    /// (its buffer is then empty: the caller allocates it, outside the lock if it can).
    /// Never evicts: that is the page writer's job.
    pub(crate) fn take_frame(&mut self) -> Option<u32> {
        if let Some(f) = self.available.pop() {
            self.counts.frames_taken += 1;
            return Some(f);
        }
        if self.frames.len() < self.max_frames {
            let f = self.frames.len() as u32;
            self.frames.push(FrameMeta::new());
            self.pages.push(AlignedBuf::empty());
            self.counts.frames_taken += 1;
            return Some(f);
        }
        None
    }

    /// Adds every frame not allocated yet to the pool, with an empty buffer (whoever
    /// takes the frame allocates it, as for a frame taken by growth). The page writer
    /// does this before it evicts anything: the pool's reserve then comes out of the
    /// cache's maximum instead of keeping the cache below it. Otherwise a cache whose
    /// reserve is over a tenth of it (small caches: the reserve has a floor of 24–48
    /// frames) would stay below the 90 % the warm-up waits for, growing only when a
    /// burst of new pages emptied the pool.
    pub(crate) fn grow_pool_to_max(&mut self) {
        let start = self.frames.len() as u32;
        let end = self.max_frames as u32;
        for _ in start..end {
            self.frames.push(FrameMeta::new());
            self.pages.push(AlignedBuf::empty());
        }
        // Popped in frame order, like the frames allocated at start.
        self.available.extend((start..end).rev());
    }

    /// Allocates `count` frames with their buffers into the pool (at start).
    pub(crate) fn allocate_frames(&mut self, count: usize) -> Result<(), edbstress_io::IoError> {
        let count = count.min(self.max_frames - self.frames.len());
        for _ in 0..count {
            self.frames.push(FrameMeta::new());
            self.pages.push(AlignedBuf::try_new(self.page_len)?);
        }
        // Popped in frame order: the first pages land in the first frames.
        let end = self.frames.len() as u32;
        self.available.extend((end - count as u32..end).rev());
        Ok(())
    }

    /// Whether `pgno` is being read, or written out of its frame: not in the map, and
    /// neither to be read from disk nor created until that ends.
    pub(crate) fn in_transit(&self, pgno: Pgno) -> bool {
        self.reading.contains(&pgno) || self.writing_out.iter().any(|w| w.pgno == pgno)
    }

    /// Puts a frame that holds no page back in the pool.
    pub(crate) fn release_frame(&mut self, f: u32, lru: &LruSlot) {
        let meta = &mut self.frames[f as usize];
        debug_assert!(!meta.dirty && !meta.in_flight);
        meta.pgno = Pgno::NONE;
        if meta.pins > 0 {
            meta.pins = 0;
            self.pinned_frames -= 1;
        }
        meta.state = FrameState::Free;
        lru.clear();
        self.available.push(f);
    }

    /// Makes `f` hold `pgno` (clean) and counts the install as its first reference;
    /// `fresh` when a fault read it (see [`FrameMeta::fresh`]).
    pub(crate) fn install(&mut self, f: u32, pgno: Pgno, lru: &LruSlot, fresh: bool) {
        let meta = &mut self.frames[f as usize];
        meta.fresh = fresh;
        meta.pgno = pgno;
        meta.state = FrameState::Resident;
        meta.dirty = false;
        meta.in_flight = false;
        meta.redirty_first = None;
        self.clock += 1;
        lru.install(self.clock);
        self.map.insert(pgno, f);
    }

    /// A reference to the resident frame whose history is `lru`.
    #[inline]
    pub(crate) fn touch(&mut self, lru: &LruSlot) {
        self.clock += 1;
        if lru.touch(self.clock, self.correlation_window) {
            self.pending_evictions -= 1;
        }
    }

    /// A faulting session's own scavenge when the pool is empty, as ESE's allocator
    /// does (`ErrBFIAllocPage` asks for a synchronous avail-pool maintenance before it
    /// waits): up to `batch` clean pages among the coldest quarter of the cache by LRU-2
    /// (at least `batch` frames), coldest first, are evicted at once, under the lock and
    /// without I/O. Dirty ones are left to the page
    /// writer (they need a write first). Returns the frames freed; none means the
    /// session must wait for the writer (a page fault stall).
    pub(crate) fn scavenge_clean(&mut self, lru: &[LruSlot], batch: usize) -> usize {
        let (now, window) = (self.clock, self.correlation_window);
        // The clean pages among the coldest quarter, at most `batch` of them, coldest
        // first.
        let looked_at = batch.max(self.max_frames / 4);
        let mut coldest: BinaryHeap<(EvictionKey, u32)> = BinaryHeap::with_capacity(looked_at + 1);
        for (f, meta) in self.frames.iter().enumerate() {
            if meta.state != FrameState::Resident || meta.pins > 0 || meta.in_flight {
                continue;
            }
            let slot = &lru[f];
            let raw = slot.last.load(Relaxed);
            // Excluded: chosen by the writer already, whose queue owns it.
            let Some(key) = eviction_key(raw, slot.hist2.load(Relaxed), now, window) else {
                continue;
            };
            if coldest.len() < looked_at {
                coldest.push((key, f as u32));
            } else if let Some(mut top) = coldest.peek_mut()
                && (key, f as u32) < *top
            {
                *top = (key, f as u32);
            }
        }
        let mut freed = 0;
        for (_, f) in coldest.into_sorted_vec() {
            if freed >= batch {
                break;
            }
            if !self.frames[f as usize].dirty {
                self.evict(f, &lru[f as usize]);
                freed += 1;
            }
        }
        self.counts.scavenged += freed as u64;
        freed
    }

    /// Drops the clean page of `f` from the cache and puts the frame in the pool.
    pub(crate) fn evict(&mut self, f: u32, lru: &LruSlot) {
        let pgno = self.frames[f as usize].pgno;
        self.map.remove(&pgno);
        self.counts.evictions += 1;
        self.release_frame(f, lru);
    }

    /// A lower bound of the start of the change ending at `end`, from the order in which
    /// changes are marked: the engine appends a transaction's records and marks its pages
    /// in one hold of the instance lock, so a change starts where the previously marked
    /// one ended, or later.
    pub(crate) fn change_start_bound(&mut self, end: LogPosition) -> LogPosition {
        self.note_change_end(end);
        if self.previous_change_end <= end {
            return self.previous_change_end;
        }
        // Marked out of log order: nothing known bounds this change's start, so keep the
        // checkpoint at the start of the log until the page is written (safe, and the
        // checkpoint-depth flushing writes such a page at once).
        if !self.warned_out_of_order {
            self.warned_out_of_order = true;
            tracing::warn!(
                %end,
                previous = %self.previous_change_end,
                "pages marked dirty out of log order; use mark_dirty_span to give the change's start"
            );
        }
        LogPosition::default()
    }

    /// Follows the sequence of changes marked: `end` is the current one's end.
    pub(crate) fn note_change_end(&mut self, end: LogPosition) {
        if end != self.current_change_end {
            self.previous_change_end = self.current_change_end;
            self.current_change_end = end;
        }
    }

    /// Records a change of resident frame `f` whose log records span `start..end`.
    pub(crate) fn mark_dirty(&mut self, f: u32, start: LogPosition, end: LogPosition) {
        let meta = &mut self.frames[f as usize];
        debug_assert_eq!(meta.state, FrameState::Resident);
        meta.version += 1;
        if end > meta.last_change || !meta.dirty {
            meta.last_change = end;
        }
        if meta.dirty {
            if meta.in_flight && meta.redirty_first.is_none() {
                meta.redirty_first = Some(start);
            }
            return;
        }
        meta.dirty = true;
        meta.first_dirty = start;
        self.dirty.insert((start.pack(), f));
    }

    /// The frame's snapshot of version `version` is on disk.
    pub(crate) fn mark_written(&mut self, f: u32, version: u64) -> bool {
        let meta = &mut self.frames[f as usize];
        meta.in_flight = false;
        meta.written_version = meta.written_version.max(version);
        let redirty = meta.redirty_first.take();
        if meta.version == version {
            meta.dirty = false;
            let key = (meta.first_dirty.pack(), f);
            self.dirty.remove(&key);
            return true;
        }
        // Changed while being written: still dirty, but only since the first change
        // after the snapshot.
        if let Some(first) = redirty {
            let old = (meta.first_dirty.pack(), f);
            meta.first_dirty = first;
            self.dirty.remove(&old);
            self.dirty.insert((first.pack(), f));
        }
        false
    }

    /// Oldest first_dirty among dirty frames.
    pub(crate) fn oldest_dirty(&self) -> Option<LogPosition> {
        self.dirty
            .first()
            .map(|&(packed, _)| LogPosition::unpack(packed))
    }
}
