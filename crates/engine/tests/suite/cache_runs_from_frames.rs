//! Runs of pages being evicted are written straight from their frames: one vectored
//! write of the frames' own buffers (no snapshot copy), every page of the run out of the
//! cache's map while it is written. A session that asks for one of them waits and gets
//! the written bytes back without a read; a neighbour that joins the run without being
//! evicted is copied and stays cached; a failed run write loses nothing.
//!
//! Each test dirties every frame and then misses a page in one hold of the instance
//! lock, so that the page writer's first look finds a session stalled for a frame: it
//! evicts the 8 coldest pages (the pool's stop threshold for 32 frames) with the full
//! write depth, in one round.

use std::sync::Arc;
use std::thread;

use edbstress_engine::{CacheConfig, EngineError, PageCache, WalSync};
use edbstress_format::Pgno;
use edbstress_io::{Access, IoClass};

use super::cache_common;
use cache_common::*;

const FRAMES: u32 = 32;
/// Pages the writer evicts at once: `available_stop` for 32 frames.
const EVICTED: u32 = 8;

fn all_frames(cfg: CacheConfig) -> CacheConfig {
    CacheConfig {
        min_frames: FRAMES as usize,
        ..cfg
    }
}

/// The marker of page p: the end of its change (the log starts at 1000, 100 bytes a
/// change).
fn marker_of(p: u32) -> u64 {
    1000 + 100 * u64::from(p)
}

/// In one hold of the lock: makes pages 1..=FRAMES dirty (marker: [`marker_of`]), the
/// changes of pages 1..=`durable` durable and the others not, holds the log (`hold`)
/// so that a flush blocks, then reads page `then` (stalling for a frame) and returns it.
fn fill_then_read(
    cache: &PageCache<()>,
    wal: &FakeWal,
    durable: u32,
    hold: bool,
    then: u32,
) -> Result<Vec<u8>, EngineError> {
    let mut guard = cache.lock();
    for p in 1..=FRAMES {
        if p == durable + 1 {
            wal.flush_to(pos(wal.append(0))).expect("flush");
            wal.block(hold);
        }
        let f = guard.new_page(Pgno::new(p)).expect("a free frame");
        let end = wal.append(100);
        assert_eq!(end, marker_of(p));
        set_marker(guard.page_mut(f), end);
        guard.mark_dirty(f, pos(end));
    }
    if durable >= FRAMES {
        wal.flush_to(pos(wal.append(0))).expect("flush");
        wal.block(hold);
    }
    // The writer gets the lock only once this waits for a frame.
    guard = cache.fault_in(guard, Pgno::new(then))?;
    let f = guard.lookup(Pgno::new(then)).expect("resident");
    Ok(guard.page(f).to_vec())
}

fn try_read(cache: &PageCache<()>, pgno: u32) -> Result<Vec<u8>, EngineError> {
    let mut guard = cache.lock();
    if guard.lookup(Pgno::new(pgno)).is_none() {
        guard = cache.fault_in(guard, Pgno::new(pgno))?;
    }
    let f = guard.lookup(Pgno::new(pgno)).expect("resident");
    Ok(guard.page(f).to_vec())
}

fn cached(cache: &PageCache<()>, pgno: u32) -> bool {
    cache.lock().contains(Pgno::new(pgno))
}

#[test]
fn a_run_of_evicted_pages_is_written_from_its_frames_in_one_write() {
    let db = database();
    let wal = FakeWal::new(1000);
    let cache = new_cache(&db, all_frames(config(FRAMES as usize)), &wal);
    // No frame is free: the reader stalls and the writer evicts pages 1..=8, coldest
    // and contiguous, as one run.
    fill_then_read(&cache, &wal, FRAMES, false, 1000).expect("page 1000");
    let c = cache.counters();
    assert_eq!(
        (c.pages_written_from_frames, c.pages_copied),
        (EVICTED as u64, 0),
        "no page was copied: {c:?}"
    );
    assert_eq!(
        (c.writes, c.pages_written, c.pool_flushes, c.evictions),
        (1, EVICTED as u64, EVICTED as u64, EVICTED as u64),
        "one write of the whole run: {c:?}"
    );
    let writes = cache.io_stats().total(IoClass::DbWrite);
    assert_eq!(
        (writes.ops, writes.bytes),
        (1, u64::from(EVICTED) * PAGE_LEN as u64),
        "one I/O of the run's length"
    );
    for p in 1..=EVICTED {
        assert!(!cached(&cache, p), "page {p} was not evicted");
        let on_disk = disk_page(&db.path, p);
        assert_eq!(marker(&on_disk), marker_of(p), "page {p} on disk");
    }
    // The evicted pages read back from disk with valid checksums (sealed in place).
    for p in 1..=EVICTED {
        assert_eq!(marker(&read_through(&cache, p)), marker_of(p));
    }
    cache.shutdown().expect("shutdown");
}

#[test]
fn a_page_of_a_run_being_written_out_comes_back_with_its_new_bytes() {
    let db = database();
    let wal = FakeWal::new(1000);
    let cache = new_cache(&db, all_frames(config(FRAMES as usize)), &wal);
    // Pages 1..=7 durable: they coalesce into one run. Page 8 is evicted too, alone,
    // and its change is not durable: the writer's log flush for the batch blocks, so
    // the run stays in flight as long as the test needs.
    thread::scope(|s| {
        let _release = ReleaseOnDrop(&wal);
        let (cache, held) = (&cache, &wal);
        let stalled = s.spawn(move || fill_then_read(cache, held, EVICTED - 1, true, 1000));
        wait_until("the page writer's log flush", || wal.waiting() == 1);
        for p in 1..=EVICTED {
            assert!(!cached(cache, p), "page {p} is not out of the map");
        }
        let c = cache.counters();
        assert_eq!(
            (c.pages_written_from_frames, c.pages_copied, c.dirty),
            (EVICTED as u64, 0, FRAMES as usize),
            "pages in flight stay dirty: {c:?}"
        );
        for p in 1..=EVICTED {
            let on_disk = disk_page(&db.path, p);
            assert_ne!(marker(&on_disk), marker_of(p), "page {p} written early");
        }
        let before = cache.counters();
        let reader = s.spawn(move || try_read(cache, 3));
        wait_until("the fault to wait", || {
            cache.counters().misses == before.misses + 1
        });
        wal.block(false);
        let page = reader.join().expect("join").expect("page 3");
        assert_eq!(marker(&page), marker_of(3), "page 3 has its written bytes");
        stalled.join().expect("join").expect("page 1000");
        let c = cache.counters();
        assert_eq!(c.write_out_waits, 1, "{c:?}");
        assert_eq!(c.reads, before.reads + 1, "only page 1000 was read: {c:?}");
        assert_eq!(c.pages_copied, 0, "{c:?}");
        assert!(c.pages_written_from_frames >= c.pages_written, "{c:?}");
        // The run of pages 1..=7 was one write: (pages - 1) summed over the writes. (The
        // writer may evict one more page once page 3 stays cached.)
        assert!(c.pages_written - c.writes >= 6, "{c:?}");
    });
    {
        let mut guard = cache.lock();
        let f = guard
            .lookup(Pgno::new(3))
            .expect("page 3 kept, not evicted");
        assert!(!guard.is_dirty(f));
        assert_eq!(guard.page(f), &disk_page(&db.path, 3)[..], "frame = disk");
    }
    for p in [1, 2, 4, 5, 6, 7, 8] {
        assert!(!cached(&cache, p), "page {p} was not evicted");
    }
    for p in 1..=EVICTED {
        assert_eq!(marker(&disk_page(&db.path, p)), marker_of(p));
    }
    cache.shutdown().expect("shutdown");
}

#[test]
fn a_neighbour_due_for_the_checkpoint_joins_the_run_as_a_copy_and_stays_cached() {
    let db = database();
    let wal = FakeWal::new(1000);
    // Page p's change starts at 1000 + 100 (p - 1) and the log ends at 4200: pages
    // 1..=12 are more than 2050 bytes behind, due for the checkpoint.
    let cfg = CacheConfig {
        checkpoint_depth: 2050,
        ..all_frames(config(FRAMES as usize))
    };
    let cache = new_cache(&db, cfg, &wal);
    fill_then_read(&cache, &wal, FRAMES, false, 1000).expect("page 1000");
    let c = cache.counters();
    assert_eq!(
        (c.pages_written_from_frames, c.pages_copied),
        (EVICTED as u64, 4),
        "pages 1..=8 from their frames, 9..=12 copied: {c:?}"
    );
    assert_eq!((c.writes, c.pages_written), (1, 12), "one run: {c:?}");
    let mut guard = cache.lock();
    for p in 1..=12 {
        assert_eq!(marker(&disk_page(&db.path, p)), marker_of(p));
        let resident = guard.lookup(Pgno::new(p));
        if p <= EVICTED {
            assert!(resident.is_none(), "page {p} was not evicted");
        } else {
            let f = resident.expect("a copied page stays cached");
            assert!(!guard.is_dirty(f), "page {p}");
            assert_eq!(guard.page(f), &disk_page(&db.path, p)[..], "page {p}");
        }
    }
    drop(guard);
    cache.shutdown().expect("shutdown");
}

#[test]
fn a_failed_run_write_loses_nothing() {
    let db = database();
    let wal = FakeWal::new(1000);
    // Writes to a read-only descriptor fail (EBADF); reads work.
    let cache = PageCache::new(
        all_frames(config(FRAMES as usize)),
        open(&db.path, Access::ReadOnly),
        Arc::clone(&wal) as Arc<dyn WalSync>,
        (),
    )
    .expect("cache");
    thread::scope(|s| {
        let _release = ReleaseOnDrop(&wal);
        let (cache, held) = (&cache, &wal);
        let stalled = s.spawn(move || fill_then_read(cache, held, EVICTED - 1, true, 1000));
        wait_until("the page writer's log flush", || wal.waiting() == 1);
        assert!(!cached(cache, 3), "page 3 is not out of the map");
        let before = cache.counters();
        let reader = s.spawn(move || try_read(cache, 3));
        wait_until("the fault to wait", || {
            cache.counters().misses == before.misses + 1
        });
        wal.block(false);
        let err = reader.join().expect("join").expect_err("the cache failed");
        assert!(matches!(err, EngineError::ShutDown(Some(_))), "{err}");
        assert!(stalled.join().expect("join").is_err());
    });
    assert!(cache.failed().is_some());
    let c = cache.counters();
    assert_eq!(
        (c.dirty, c.pages_written, c.evictions),
        (FRAMES as usize, 0, 0),
        "every page still dirty: {c:?}"
    );
    assert!(cache.io_stats().total(IoClass::DbWrite).errors >= 1);
    let mut guard = cache.lock();
    for p in 1..=FRAMES {
        let f = guard
            .lookup(Pgno::new(p))
            .unwrap_or_else(|| panic!("page {p} is back in the map"));
        assert!(guard.is_dirty(f), "page {p}");
        assert_eq!(marker(guard.page(f)), marker_of(p), "page {p}");
    }
    drop(guard);
    cache.abandon();
}

#[test]
fn a_run_longer_than_one_vectored_write_takes_is_split() {
    // 16 MiB of coalescing (the workload's maximum) is 2048 pages of 8 KiB, more than
    // one vectored write carries (IOV_MAX, 1024 buffers): a longer run is cut there.
    let db = database();
    let wal = FakeWal::new(1000);
    let cfg = CacheConfig {
        coalesce_max: 16 << 20,
        ..config(2048)
    };
    let cache = new_cache(&db, cfg, &wal);
    let pages = 1100;
    {
        let mut guard = cache.lock();
        for p in 1..=pages {
            let f = match guard.new_page(Pgno::new(p)) {
                Some(f) => f,
                None => {
                    guard = cache.try_wait_for_frame(guard).expect("frame");
                    guard.new_page(Pgno::new(p)).expect("a free frame")
                }
            };
            let end = wal.append(100);
            set_marker(guard.page_mut(f), end);
            guard.mark_dirty(f, pos(end));
        }
    }
    cache.flush_all().expect("flush_all");
    let c = cache.counters();
    assert_eq!(c.pages_written, u64::from(pages), "{c:?}");
    assert!(c.writes >= 2, "one write cannot carry {pages} pages: {c:?}");
    for p in [1, 1024, 1025, pages] {
        assert_eq!(marker(&disk_page(&db.path, p)), 1000 + 100 * u64::from(p));
    }
    cache.shutdown().expect("shutdown");
}
