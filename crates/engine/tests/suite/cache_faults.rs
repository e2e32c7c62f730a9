//! The page cache under concurrency and when things go wrong, on real database files
//! made by `prepare`: concurrent sessions, a page changed while it is being written,
//! corrupt pages, failed page writes and log flushes, prefetch, dropped writes,
//! invalid configurations. The fixtures are in cache_common/.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use edbstress_engine::EngineError;
use edbstress_engine::PageCache;
use edbstress_format::Pgno;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_io::{Access, BackendKind, DataFile, IoClass, IoMode};

use super::cache_common;
use cache_common::*;

#[test]
fn concurrent_sessions_keep_the_last_value_of_every_page() {
    concurrent_sessions(BackendKind::Auto);
}

#[test]
fn concurrent_sessions_with_the_threads_backend() {
    concurrent_sessions(BackendKind::Threads);
}

fn concurrent_sessions(backend: BackendKind) {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(48);
    cfg.checkpoint_depth = 20_000;
    cfg.backend = backend;
    // The engine state under the instance lock: the value each page must end with.
    let cache = new_cache_with(&db, cfg, &wal, HashMap::<u32, u64>::new());
    const THREADS: u64 = 4;
    const OPS: u64 = 1500;
    thread::scope(|s| {
        for t in 0..THREADS {
            let cache = &cache;
            let wal = &wal;
            s.spawn(move || {
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                for _ in 0..OPS {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let pgno = 1 + (rng % 300) as u32;
                    let mut guard = cache.lock();
                    let f = loop {
                        match guard.lookup(Pgno::new(pgno)) {
                            Some(f) => break f,
                            None => {
                                guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in")
                            }
                        }
                    };
                    // Appending under the instance lock, as the engine does.
                    let end = wal.append(50);
                    let value = end << 8 | t;
                    set_marker(guard.page_mut(f), value);
                    guard.mark_dirty(f, pos(end));
                    guard.state().insert(pgno, value);
                }
            });
        }
    });
    let c = cache.counters();
    assert!(
        c.evictions > 0 && c.pool_flushes > 0,
        "the test must force write-back: {c:?}"
    );
    let expected = cache.shutdown().expect("shutdown");
    assert!(expected.len() > 250);
    for (&p, &value) in &expected {
        let on_disk = disk_page(&db.path, p);
        assert_eq!(
            verify_page(&on_disk, Pgno::new(p)),
            PageVerdict::Valid,
            "page {p}"
        );
        assert_eq!(marker(&on_disk), value, "page {p} lost its last change");
    }
}

#[test]
fn a_page_changed_while_being_written_stays_dirty() {
    let db = database();
    let wal = FakeWal::new(1000);
    wal.block(true);
    let cache = new_cache(&db, config(64), &wal);
    let first = modify(&cache, &wal, 77);
    let second = thread::scope(|s| {
        let flusher = s.spawn(|| cache.flush_all());
        // The snapshot is taken; the writer waits for the log.
        wait_until("the writer to ask for the log", || wal.waiting() > 0);
        let second = modify(&cache, &wal, 77);
        wal.block(false);
        flusher.join().expect("join").expect("flush_all");
        second
    });
    assert_eq!(
        marker(&disk_page(&db.path, 77)),
        first,
        "the snapshot was written"
    );
    {
        let mut guard = cache.lock();
        let f = guard.lookup(Pgno::new(77)).expect("cached");
        assert!(guard.is_dirty(f), "the newer change is not on disk yet");
        assert_eq!(marker(guard.page(f)), second);
    }
    assert!(
        cache.checkpoint() > pos(first - 100),
        "checkpoint moved past the written change"
    );
    cache.flush_all().expect("flush_all");
    assert_eq!(marker(&disk_page(&db.path, 77)), second);
    assert_eq!(cache.counters().dirty, 0);
    cache.shutdown().expect("shutdown");
}

#[test]
fn corrupt_pages_are_reported_and_single_bits_repaired() {
    let db = database();
    let good = disk_page(&db.path, 50);
    let mut flipped = good.clone();
    flipped[3000] ^= 0x10;
    write_disk_page(&db.path, 50, &flipped);
    let mut bad = disk_page(&db.path, 51);
    bad[3000] ^= 0x10;
    bad[5000] ^= 0x03;
    write_disk_page(&db.path, 51, &bad);
    write_disk_page(&db.path, 52, &disk_page(&db.path, 60));
    write_disk_page(&db.path, 53, &[0u8; PAGE_LEN]);
    let cache = new_cache(&db, config(64), &FakeWal::new(1000));
    assert_eq!(read_through(&cache, 50), good, "repaired in memory");
    assert_eq!(cache.counters().correctable_repaired, 1);
    for (pgno, what) in [
        (51, "checksum"),
        (52, "holds page 60"),
        (53, "uninitialized"),
    ] {
        match cache.fault_in(cache.lock(), Pgno::new(pgno)) {
            Err(EngineError::CorruptPage {
                pgno: p,
                what: w,
                path,
            }) => {
                assert_eq!(p, pgno);
                assert!(w.contains(what), "{w}");
                assert_eq!(path, db.path);
            }
            Err(e) => panic!("page {pgno}: unexpected error {e}"),
            Ok(_) => panic!("page {pgno}: corruption not detected"),
        }
        assert!(!cache.lock().contains(Pgno::new(pgno)));
    }
    let c = cache.counters();
    assert_eq!(
        c.frames - c.available,
        1,
        "failed reads gave their frames back: {c:?}"
    );
    cache.shutdown().expect("shutdown");
}

#[test]
fn write_failures_are_reported_everywhere() {
    let db = database();
    let wal = FakeWal::new(1000);
    // Writes to a read-only descriptor fail with EBADF.
    let cache = PageCache::new(
        config(64),
        open(&db.path, Access::ReadOnly),
        wal.clone(),
        (),
    )
    .expect("cache");
    modify(&cache, &wal, 9);
    assert!(cache.failed().is_none());
    let err = cache.flush_all().expect_err("the write must fail");
    let message = err.to_string();
    assert!(matches!(err, EngineError::ShutDown(Some(_))), "{message}");
    assert!(
        message.contains("write") && message.contains("db.edb"),
        "{message}"
    );
    assert!(cache.failed().is_some());
    assert!(matches!(
        cache.fault_in(cache.lock(), Pgno::new(11)),
        Err(EngineError::ShutDown(_))
    ));
    assert!(matches!(
        cache.prefetch(&[Pgno::new(12)]),
        Err(EngineError::ShutDown(_))
    ));
    assert!(cache.try_wait_for_frame(cache.lock()).is_err());
    assert_eq!(
        cache.counters().dirty,
        1,
        "the page stays dirty: never dropped"
    );
    assert!(cache.io_stats().total(IoClass::DbWrite).errors >= 1);
    assert!(cache.shutdown().is_err());
}

#[test]
fn log_failures_hold_pages_back_and_are_reported() {
    let db = database();
    let wal = FakeWal::new(1000);
    wal.state.lock().broken = true;
    let before = disk_page(&db.path, 9);
    let cache = new_cache(&db, config(64), &wal);
    modify(&cache, &wal, 9);
    let err = cache.flush_all().expect_err("the log failed");
    assert!(err.to_string().contains("log device failed"), "{err}");
    cache.abandon();
    assert_eq!(disk_page(&db.path, 9), before);
}

#[test]
fn prefetch_installs_pages_without_evicting() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(16);
    cfg.min_frames = 16;
    let cache = new_cache(&db, cfg, &wal);
    let pgnos: Vec<u32> = (0..10).map(|i| 30 + i * 7).collect();
    cache
        .prefetch(&pgnos.iter().copied().map(Pgno::new).collect::<Vec<_>>())
        .expect("prefetch");
    let c = cache.counters();
    assert_eq!((c.prefetched, c.reads), (10, 0));
    {
        let mut guard = cache.lock();
        for &p in &pgnos {
            let f = guard.lookup(Pgno::new(p)).expect("prefetched");
            assert_eq!(guard.page(f), &disk_page(&db.path, p)[..]);
        }
    }
    let stats = cache.io_stats();
    assert_eq!(stats.get(3, IoClass::RecoveryRead).map(|s| s.ops), Some(10));
    cache.shutdown().expect("shutdown");

    // Every frame dirty and the log stuck: prefetch finds no free frame and must
    // neither evict nor wait.
    wal.block(true);
    let mut cfg = config(16);
    cfg.min_frames = 16;
    let cache = new_cache(&db, cfg, &wal);
    for p in 500..516 {
        modify(&cache, &wal, p);
    }
    cache
        .prefetch(&[900, 901, 902].map(Pgno::new))
        .expect("prefetch with no free frame");
    let c = cache.counters();
    assert_eq!((c.prefetched, c.dirty, c.stalls), (0, 16, 0), "{c:?}");
    assert!(!cache.lock().contains(Pgno::new(900)));
    wal.block(false);
    cache.shutdown().expect("shutdown");
}

#[test]
fn prefetch_joins_adjacent_pages_into_one_read_in_page_order() {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(16);
    cfg.min_frames = 16;
    let cache = new_cache(&db, cfg, &wal);
    // Unsorted, with repeats, as a log file references its pages.
    let pgnos = [42u32, 50, 40, 41, 42, 40, 60, 61];
    cache.prefetch(&pgnos.map(Pgno::new)).expect("prefetch");
    let c = cache.counters();
    assert_eq!((c.prefetched, c.reads), (6, 0), "{c:?}");
    {
        let mut guard = cache.lock();
        for p in [40u32, 41, 42, 50, 60, 61] {
            let f = guard.lookup(Pgno::new(p)).expect("prefetched");
            assert_eq!(guard.page(f), &disk_page(&db.path, p)[..], "page {p}");
        }
    }
    // 40–42, 50 and 60–61: three reads, of six pages' bytes.
    let stats = cache.io_stats();
    let read = stats.get(3, IoClass::RecoveryRead).expect("recovery reads");
    assert_eq!(read.ops, 3);
    assert_eq!(read.bytes, 6 * disk_page(&db.path, 40).len() as u64);
    cache.shutdown().expect("shutdown");
}

#[test]
fn dropped_write_is_reported_done_but_not_issued() {
    let db = database();
    let wal = FakeWal::new(1000);
    let cache = new_cache(&db, config(64), &wal);
    let before = disk_page(&db.path, 33);
    cache.drop_next_write(Pgno::new(33));
    modify(&cache, &wal, 32);
    modify(&cache, &wal, 33);
    modify(&cache, &wal, 34);
    cache.flush_all().expect("flush_all");
    let c = cache.counters();
    assert_eq!(
        (c.dirty, c.dropped_writes, c.pages_written),
        (0, 1, 2),
        "{c:?}"
    );
    assert_eq!(
        disk_page(&db.path, 33),
        before,
        "the dropped write reached the disk"
    );
    assert_ne!(disk_page(&db.path, 32), before);
    // Only the next write is dropped.
    let again = modify(&cache, &wal, 33);
    cache.flush_all().expect("flush_all");
    assert_eq!(marker(&disk_page(&db.path, 33)), again);
    cache.shutdown().expect("shutdown");
}

#[test]
fn invalid_configurations_are_refused() {
    let db = database();
    let file = open(&db.path, Access::ReadWrite);
    let mut cfg = config(64);
    cfg.max_frames = 2;
    cfg.min_frames = 0;
    assert!(matches!(
        PageCache::new(cfg, file.clone(), FakeWal::new(0), ()),
        Err(EngineError::Invalid(_))
    ));
    let mut cfg = config(64);
    cfg.min_frames = 65;
    assert!(PageCache::new(cfg, file.clone(), FakeWal::new(0), ()).is_err());
    let mut cfg = config(64);
    cfg.write_depth = 0;
    assert!(PageCache::new(cfg, file, FakeWal::new(0), ()).is_err());
    let cfg = config(100_000);
    assert_eq!((cfg.available_start(), cfg.available_stop()), (1000, 2000));
    let cfg = config(1000);
    assert_eq!((cfg.available_start(), cfg.available_stop()), (24, 48));
    let cfg = config(10);
    assert_eq!((cfg.available_start(), cfg.available_stop()), (1, 2));
}

/// CPU time of this process (user + system), from /proc/self/stat, in seconds.
fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    ticks as f64 / 100.0
}

/// Throughput and CPU cost; run with
/// `cargo test -p edbstress-engine --release --test tests -- cache_faults::perf_numbers
/// --ignored --nocapture`.
#[test]
#[ignore = "measurement, prints numbers"]
fn perf_numbers() {
    let db = database();
    for mode in [IoMode::Buffered, IoMode::Direct] {
        let file = Arc::new(DataFile::open(&db.path, mode, Access::ReadWrite).expect("open"));
        let wal = FakeWal::new(1000);
        let mut cfg = config(1024);
        cfg.min_frames = 1024;
        let cache = PageCache::new(cfg, file.clone(), wal.clone(), ()).expect("cache");
        for p in 1..=1000 {
            read_through(&cache, p);
        }
        // Hits: lock, lookup, read a byte, unlock.
        let n = 2_000_000u64;
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..n {
            let pgno = 1 + (i.wrapping_mul(0x9E37_79B9) % 1000) as u32;
            let mut guard = cache.lock();
            let f = guard.lookup(Pgno::new(pgno)).expect("hit");
            sum += u64::from(guard.page(f)[MARK]);
        }
        let lock_lookup_ns = start.elapsed().as_nanos() as f64 / n as f64;
        let start = Instant::now();
        {
            let mut guard = cache.lock();
            for i in 0..n {
                let pgno = 1 + (i.wrapping_mul(0x9E37_79B9) % 1000) as u32;
                let f = guard.lookup(Pgno::new(pgno)).expect("hit");
                sum += u64::from(guard.page(f)[MARK]);
            }
        }
        let lookup_ns = start.elapsed().as_nanos() as f64 / n as f64;
        cache.shutdown().expect("shutdown");

        // Misses with write-back over ~2000 pages; every page read is modified, so
        // every eviction writes (pool flushes).
        for frames in [64, 1024] {
            let mut cfg = config(frames);
            cfg.min_frames = frames;
            let cache = PageCache::new(cfg, file.clone(), wal.clone(), ()).expect("cache");
            let ops = if mode == IoMode::Buffered {
                40_000u64
            } else {
                10_000
            };
            let cpu0 = process_cpu_seconds();
            let start = Instant::now();
            let mut rng = 0x2545_F491_4F6C_DD1Du64;
            for _ in 0..ops {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                modify(&cache, &wal, 1 + (rng % u64::from(db.pages)) as u32);
            }
            cache.flush_all().expect("flush");
            let wall = start.elapsed().as_secs_f64();
            let cpu = process_cpu_seconds() - cpu0;
            let c = cache.counters();
            let stats = cache.io_stats();
            let r = stats.total(IoClass::DbRead);
            let w = stats.total(IoClass::DbWrite);
            println!(
                "{mode:?}: hit (lock+lookup+unlock) {lock_lookup_ns:.1} ns, lookup under one lock {lookup_ns:.1} ns; \
             {frames} frames, {} misses: miss+modify+write-back: {:.1} µs CPU/miss, {:.0} ops/s wall; reads {} (mean {:.0} µs), writes {} of {} pages (mean {:.0} µs), stalls {}, evictions {} [{sum}]",
                c.misses,
                cpu * 1e6 / c.misses.max(1) as f64,
                ops as f64 / wall,
                c.reads,
                r.latency.mean_ns() / 1000.0,
                c.writes,
                c.pages_written,
                w.latency.mean_ns() / 1000.0,
                c.stalls,
                c.evictions,
            );
            cache.shutdown().expect("shutdown");
        }
    }
}
