//! Behaviour of the page cache on real database files made by `prepare`: faults, LRU-2
//! eviction, write-back under the write-ahead rule, coalescing, stalls, checkpoint
//! depth and crash abandon. Concurrency, corruption, failures and prefetch are in
//! cache_faults.rs; the fixtures in cache_common/.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use edbstress_engine::EngineError;
use edbstress_engine::WalSync;
use edbstress_format::Pgno;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_io::IoClass;

use super::cache_common;
use cache_common::*;

#[test]
fn fault_in_returns_disk_bytes_then_hits() {
    let db = database();
    let cache = new_cache(&db, config(64), &FakeWal::new(1000));
    for pgno in 1..=10 {
        let mut guard = cache.lock();
        assert!(guard.lookup(Pgno::new(pgno)).is_none());
        assert!(!guard.contains(Pgno::new(pgno)));
        let mut guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in");
        let f = guard.lookup(Pgno::new(pgno)).expect("installed");
        assert_eq!(guard.page(f), &disk_page(&db.path, pgno)[..], "page {pgno}");
        assert_eq!(guard.pgno(f), pgno);
    }
    let c = cache.counters();
    assert_eq!((c.misses, c.reads, c.hits), (10, 10, 0), "{c:?}");
    for pgno in 1..=10 {
        let mut guard = cache.lock();
        assert!(guard.lookup(Pgno::new(pgno)).is_some());
    }
    let c = cache.counters();
    assert_eq!(c.hits, 10);
    // The retry may also come through a new guard (the fault's guard dropped).
    drop(
        cache
            .fault_in(cache.lock(), Pgno::new(11))
            .expect("fault_in"),
    );
    assert!(cache.lock().lookup(Pgno::new(11)).is_some());
    assert_eq!(
        cache.counters().hits,
        10,
        "the retry after a fault is not a hit"
    );
    assert!(cache.lock().lookup(Pgno::new(11)).is_some());
    assert_eq!(cache.counters().hits, 11);
    assert_eq!(
        c.frames, 16,
        "min_frames allocated, no growth needed yet: {c:?}"
    );
    let stats = cache.io_stats();
    let reads = stats.get(3, IoClass::DbRead).expect("db reads recorded");
    assert_eq!((reads.ops, reads.bytes), (11, 11 * PAGE_LEN as u64));
    assert!(stats.get(3, IoClass::DbWrite).is_none());
    // A second fault_in of a cached page reads nothing.
    let guard = cache
        .fault_in(cache.lock(), Pgno::new(5))
        .expect("fault_in");
    drop(guard);
    assert_eq!(cache.counters().reads, 11);
    assert!(matches!(
        cache.fault_in(cache.lock(), Pgno::new(0)),
        Err(EngineError::Invalid(_))
    ));
    cache.shutdown().expect("shutdown");
}

#[test]
fn random_reads_stay_within_max_frames() {
    let db = database();
    let cache = new_cache(&db, config(64), &FakeWal::new(1000));
    let mut rng = 0x1234_5678_9abc_def0u64;
    for i in 0..3000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let pgno = 1 + (rng % u64::from(db.pages)) as u32;
        let page = read_through(&cache, pgno);
        if i % 500 == 0 {
            assert_eq!(page, disk_page(&db.path, pgno));
        }
        let c = cache.counters();
        assert!(c.frames <= 64, "{c:?}");
    }
    let c = cache.counters();
    assert_eq!(c.max_frames, 64);
    assert!(c.evictions > 2000, "{c:?}");
    assert!(c.hits > 0 && c.misses > 2000, "{c:?}");
    assert_eq!(c.reads, c.misses);
    assert_eq!(c.pages_written, 0, "clean pages are never written");
    cache.shutdown().expect("shutdown");
}

/// A cache whose pool reserve is over a tenth of it (128 frames: 16–32 free) still
/// reaches its maximum size: the reserve comes out of the maximum, so a warm-up
/// waiting for 90 % ends. Each read waits for the page writer to refill the pool, so
/// no burst empties it (a burst used to be the only way past 87 %).
#[test]
fn a_small_cache_reaches_its_maximum_before_it_evicts() {
    let db = database();
    let config = config(128);
    let reserve = config.available_start();
    assert!(reserve * 10 > 128, "the reserve is over a tenth: {reserve}");
    let cache = new_cache(&db, config, &FakeWal::new(1000));
    for pgno in 10..600 {
        read_through(&cache, pgno);
        wait_until("the pool refilled", || {
            let c = cache.counters();
            c.available + (c.max_frames - c.frames) >= reserve
        });
    }
    let c = cache.counters();
    assert_eq!(c.frames, 128, "{c:?}");
    assert!(c.evictions > 400 && c.stalls == 0, "{c:?}");
    assert!(
        c.available <= 2 * reserve,
        "the pool stays within its thresholds: {c:?}"
    );
    cache.shutdown().expect("shutdown");
}

#[test]
fn lru2_keeps_a_twice_referenced_page_through_a_scan() {
    // 32 frames: each refill scans anew. 128: a scan lists 8+ candidates, and refills
    // take from it while it lasts.
    for frames in [32, 128] {
        lru2_scan_case(frames);
    }
}

#[test]
fn a_page_referenced_again_after_the_writers_scan_is_not_evicted_from_its_list() {
    // 128 frames: one scan of the page writer lists the coldest 16 or more pages, and
    // the refills after it take from that list. Pages of the list referenced again in
    // between are no longer cold: they must be skipped, not evicted.
    let db = database();
    let cache = new_cache(&db, config(128), &FakeWal::new(1000));
    cache.set_correlation_window(4);
    // Fill the cache with pages referenced once, then make the writer evict (and scan).
    for p in 300..500 {
        read_through(&cache, p);
    }
    // The oldest pages still cached are the ones the last scan listed first.
    let again: Vec<u32> = {
        let guard = cache.lock();
        (300..500)
            .filter(|&p| guard.contains(Pgno::new(p)))
            .take(12)
            .collect()
    };
    assert_eq!(again.len(), 12);
    for &p in &again {
        read_through(&cache, p);
    }
    // More pages referenced once: refills take from the list made before.
    for p in 600..664 {
        read_through(&cache, p);
    }
    let guard = cache.lock();
    let evicted: Vec<u32> = again
        .iter()
        .copied()
        .filter(|&p| !guard.contains(Pgno::new(p)))
        .collect();
    assert!(
        evicted.is_empty(),
        "pages referenced twice were evicted before pages referenced once: {evicted:?}"
    );
    drop(guard);
    cache.shutdown().expect("shutdown");
}

fn lru2_scan_case(frames: usize) {
    let db = database();
    let cache = new_cache(&db, config(frames), &FakeWal::new(1000));
    cache.set_correlation_window(4);
    let hot = 100;
    read_through(&cache, hot);
    // Uncorrelated second reference: far enough on the reference clock.
    for p in 200..210 {
        read_through(&cache, p);
        read_through(&cache, p);
    }
    assert!(cache.lock().lookup(Pgno::new(hot)).is_some());
    // A page referenced twice in quick succession (correlated): counts as once.
    let burst = 101;
    read_through(&cache, burst);
    read_through(&cache, burst);
    read_through(&cache, burst);
    // A scan of pages referenced once each, 10 times the cache.
    let scan = 10 * frames as u32;
    for p in 300..300 + scan {
        read_through(&cache, p);
    }
    let guard = cache.lock();
    assert!(
        guard.contains(Pgno::new(hot)),
        "{frames} frames: the page referenced twice was evicted by a scan"
    );
    assert!(
        !guard.contains(Pgno::new(burst)),
        "{frames} frames: a correlated burst must not protect a page"
    );
    assert!(
        !guard.contains(Pgno::new(200)),
        "{frames} frames: a page referenced long ago must go"
    );
    drop(guard);
    let c = cache.counters();
    assert!(c.evictions >= u64::from(scan) - frames as u64, "{c:?}");
    cache.shutdown().expect("shutdown");
}

#[test]
fn flush_all_writes_sealed_pages_after_the_log() {
    let db = database();
    let pages: Vec<u32> = (0..60).map(|i| 7 + i * 31).collect();
    let wal = FakeWal::with_audit(1000, Some((db.path.clone(), pages.clone())));
    let cache = new_cache(&db, config(128), &wal);
    let mut last = 0;
    for &p in &pages {
        last = modify(&cache, &wal, p);
    }
    assert_eq!(cache.lock().dirty_count(), pages.len());
    assert!(
        cache.checkpoint() <= pos(1000),
        "checkpoint before the first change"
    );
    cache.flush_all().expect("flush_all");
    assert_eq!(cache.lock().dirty_count(), 0);
    assert!(wal.durable_n() >= last);
    assert_eq!(cache.checkpoint(), pos(wal.state.lock().current));
    for &p in &pages {
        let on_disk = disk_page(&db.path, p);
        assert_eq!(
            verify_page(&on_disk, Pgno::new(p)),
            PageVerdict::Valid,
            "page {p}"
        );
        let mut guard = cache.lock();
        let f = guard.lookup(Pgno::new(p)).expect("still cached");
        assert_eq!(
            guard.page(f),
            &on_disk[..],
            "cache and disk differ for page {p}"
        );
        assert!(!guard.is_dirty(f));
    }
    wal.audit_now();
    let violations = wal.violations.lock().clone();
    assert!(violations.is_empty(), "{violations:?}");
    let c = cache.counters();
    assert_eq!(c.pages_written, pages.len() as u64);
    assert_eq!(c.requested_flushes, pages.len() as u64);
    let writes = cache.io_stats().total(IoClass::DbWrite);
    assert_eq!(writes.bytes, (pages.len() * PAGE_LEN) as u64);
    cache.shutdown().expect("shutdown");
}

#[test]
fn no_page_is_written_before_the_log_is_durable() {
    let db = database();
    let wal = FakeWal::new(1000);
    wal.block(true);
    let cache = new_cache(&db, config(64), &wal);
    let before: Vec<Vec<u8>> = (1..=5).map(|p| disk_page(&db.path, p)).collect();
    for p in 1..=5 {
        modify(&cache, &wal, p);
    }
    thread::scope(|s| {
        let flusher = s.spawn(|| cache.flush_all());
        wait_until("the writer to ask for the log", || wal.waiting() > 0);
        thread::sleep(Duration::from_millis(100));
        for p in 1..=5u32 {
            assert_eq!(
                disk_page(&db.path, p),
                before[p as usize - 1],
                "page {p} written early"
            );
        }
        assert!(!flusher.is_finished());
        wal.block(false);
        flusher.join().expect("join").expect("flush_all");
    });
    for p in 1..=5 {
        assert_eq!(marker(&disk_page(&db.path, p)), 1000 + 100 * u64::from(p));
    }
    assert!(cache.counters().wal_waits >= 1);
    cache.shutdown().expect("shutdown");
}

#[test]
fn contiguous_dirty_pages_are_coalesced() {
    let db = database();
    let wal = FakeWal::new(1000);
    let cache = new_cache(&db, config(64), &wal);
    for p in 500..516 {
        modify(&cache, &wal, p);
    }
    // And two isolated pages.
    modify(&cache, &wal, 600);
    modify(&cache, &wal, 700);
    cache.flush_all().expect("flush_all");
    let c = cache.counters();
    assert_eq!(c.pages_written, 18, "{c:?}");
    assert!(
        c.writes <= 4,
        "16 contiguous pages took {} writes: {c:?}",
        c.writes
    );
    let writes = cache.io_stats().total(IoClass::DbWrite);
    assert_eq!(writes.ops, c.writes);
    assert!(writes.mean_bytes() > PAGE_LEN as f64);
    for p in 500..516 {
        let on_disk = disk_page(&db.path, p);
        assert_eq!(verify_page(&on_disk, Pgno::new(p)), PageVerdict::Valid);
        assert_eq!(marker(&on_disk), 1000 + 100 * u64::from(p - 499));
    }
    cache.shutdown().expect("shutdown");
}

/// The page writer's own writes (checkpoint depth here, pool refills alike) join a
/// dirty neighbour only when it is due itself (here: past the checkpoint depth)
/// and its changes are durable already, as ESE gathers writes: a neighbour that
/// would force a log flush waits for its own turn.
#[test]
fn neighbours_join_a_write_only_when_their_log_is_durable() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(64);
    cfg.checkpoint_depth = 1;
    let cache = new_cache(&db, cfg, &wal);
    // Four contiguous pages changed in one hold of the lock (so the writer plans them
    // together), each by its own log append; `durable`: make the log durable to the
    // last change before releasing the lock.
    let change_run = |first: u32, durable: bool| {
        let mut guard = cache.lock();
        for p in first..first + 4 {
            while guard.lookup(Pgno::new(p)).is_none() {
                guard = cache.fault_in(guard, Pgno::new(p)).expect("fault_in");
            }
        }
        let mut end = 0;
        for p in first..first + 4 {
            let f = guard.lookup(Pgno::new(p)).expect("resident");
            end = wal.append(100);
            set_marker(guard.page_mut(f), end);
            guard.mark_dirty(f, pos(end));
        }
        if durable {
            wal.flush_to(pos(end)).expect("flush");
        }
    };
    change_run(500, false);
    wait_until("the checkpoint writes", || cache.counters().dirty == 0);
    let c = cache.counters();
    assert_eq!(
        (c.pages_written, c.writes),
        (4, 4),
        "each page waits for its own turn: {c:?}"
    );
    change_run(600, true);
    wait_until("the checkpoint writes", || cache.counters().dirty == 0);
    let c = cache.counters();
    assert_eq!(
        (c.pages_written, c.writes),
        (8, 5),
        "durable neighbours join one write: {c:?}"
    );
    for p in (500..504).chain(600..604) {
        assert_eq!(
            verify_page(&disk_page(&db.path, p), Pgno::new(p)),
            PageVerdict::Valid
        );
    }
    cache.shutdown().expect("shutdown");
}

#[test]
fn coalescing_stops_at_coalesce_max() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(64);
    cfg.coalesce_max = 4 * PAGE_LEN;
    let cache = new_cache(&db, cfg, &wal);
    for p in 500..520 {
        modify(&cache, &wal, p);
    }
    cache.flush_all().expect("flush_all");
    let c = cache.counters();
    assert_eq!(c.pages_written, 20);
    assert_eq!(c.writes, 5, "20 pages in runs of at most 4: {c:?}");
    cache.shutdown().expect("shutdown");
}

#[test]
fn fault_stalls_while_every_frame_is_dirty_and_the_log_is_not_durable() {
    let db = database();
    let wal = FakeWal::new(1000);
    wal.block(true);
    let mut cfg = config(16);
    cfg.min_frames = 16;
    let cache = new_cache(&db, cfg, &wal);
    for p in 1..=16 {
        modify(&cache, &wal, p);
    }
    let c = cache.counters();
    assert_eq!((c.frames, c.available, c.dirty), (16, 0, 16));
    let faulted = AtomicBool::new(false);
    thread::scope(|s| {
        let reader = s.spawn(|| {
            let page = read_through(&cache, 1000);
            faulted.store(true, Ordering::SeqCst);
            page
        });
        wait_until("a stall", || cache.counters().stalls == 1);
        thread::sleep(Duration::from_millis(150));
        assert!(
            !faulted.load(Ordering::SeqCst),
            "a dirty page was evicted unwritten"
        );
        for p in 1..=16 {
            assert_eq!(
                test_marker(&disk_page(&db.path, p)),
                None,
                "page {p} written early"
            );
        }
        wal.block(false);
        let page = reader.join().expect("join");
        assert_eq!(page, disk_page(&db.path, 1000));
    });
    let c = cache.counters();
    assert_eq!(c.stalls, 1);
    assert!(c.stall_ns >= 150_000_000, "{c:?}");
    assert!(c.pool_flushes >= 1, "{c:?}");
    assert!(c.frames <= 16);
    cache.shutdown().expect("shutdown");
    for p in 1..=16 {
        assert_eq!(marker(&disk_page(&db.path, p)), 1000 + 100 * u64::from(p));
    }
}

#[test]
fn wait_for_frame_and_new_page() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(8);
    cfg.min_frames = 0;
    let cache = new_cache(&db, cfg, &wal);
    let mut created = Vec::new();
    for p in 900..940 {
        let mut guard = cache.lock();
        let f = loop {
            match guard.new_page(Pgno::new(p)) {
                Some(f) => break f,
                None => guard = cache.try_wait_for_frame(guard).expect("frame"),
            }
        };
        assert!(
            guard.page(f).iter().all(|&b| b == 0),
            "a new page starts zeroed"
        );
        let end = wal.append(10);
        let page = guard.page_mut(f);
        page[100] = 0xAB;
        set_marker(page, end);
        guard.mark_dirty(f, pos(end));
        created.push((p, end));
    }
    cache.shutdown().expect("shutdown");
    for (p, end) in created {
        let on_disk = disk_page(&db.path, p);
        assert_eq!(verify_page(&on_disk, Pgno::new(p)), PageVerdict::Valid);
        assert_eq!((on_disk[100], marker(&on_disk)), (0xAB, end));
    }
}

#[test]
fn checkpoint_depth_flushes_old_pages_only() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(64);
    cfg.checkpoint_depth = 10_000;
    let cache = new_cache(&db, cfg, &wal);
    for p in 1..=5 {
        modify(&cache, &wal, p * 3);
    }
    thread::sleep(Duration::from_millis(120));
    assert_eq!(
        cache.counters().dirty,
        5,
        "within the depth: nothing written"
    );
    let old_checkpoint = cache.checkpoint();
    assert!(old_checkpoint <= pos(1100), "{old_checkpoint}");
    // The log moves on far beyond the depth; one recent change stays within it.
    wal.set_current(50_000);
    let recent = {
        let mut guard = cache.lock();
        if guard.lookup(Pgno::new(40)).is_none() {
            guard = cache.fault_in(guard, Pgno::new(40)).expect("fault_in");
        }
        let f = guard.lookup(Pgno::new(40)).expect("cached");
        let end = wal.append(100);
        set_marker(guard.page_mut(f), end);
        guard.mark_dirty_span(f, pos(end - 100), pos(end));
        end
    };
    wait_until("checkpoint flushing", || cache.counters().dirty == 1);
    assert_eq!(cache.checkpoint(), pos(recent - 100));
    let c = cache.counters();
    assert_eq!(c.checkpoint_flushes, 5, "{c:?}");
    for p in 1..=5 {
        assert_eq!(
            verify_page(&disk_page(&db.path, p * 3), Pgno::new(p * 3)),
            PageVerdict::Valid
        );
    }
    cache.shutdown().expect("shutdown");
}

#[test]
fn abandon_leaves_dirty_pages_unwritten() {
    let db = database();
    let wal = FakeWal::new(1000);
    let cache = new_cache(&db, config(64), &wal);
    let flushed = modify(&cache, &wal, 10);
    cache.flush_all().expect("flush_all");
    let before: Vec<Vec<u8>> = (20..30).map(|p| disk_page(&db.path, p)).collect();
    for p in 20..30 {
        modify(&cache, &wal, p);
    }
    cache.abandon();
    assert_eq!(marker(&disk_page(&db.path, 10)), flushed);
    for p in 20..30u32 {
        assert_eq!(disk_page(&db.path, p), before[p as usize - 20], "page {p}");
    }
}
