//! The page writer's eviction writes that carry the frame's own buffer (no snapshot
//! copy): while such a write is in flight the page is out of the cache's map yet still
//! dirty (the checkpoint holds), a session that faults it in waits for the write and
//! gets it back without a read, and `new_page` of it waits too and finds the page.
//! On real database files made by `prepare`, with a log whose durability the test
//! holds back, so that the writes stay in flight as long as the test needs.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use edbstress_engine::InstanceId;
use edbstress_engine::{CacheConfig, PageCache};
use edbstress_format::Pgno;
use edbstress_io::BackendKind;

use super::cache_common;
use cache_common::*;

const FRAMES: usize = 16;

/// A log whose flushes block until the test releases it.
fn held_wal() -> Arc<FakeWal> {
    let wal = FakeWal::new(1000);
    wal.block(true);
    wal
}

/// Every frame in use from the start (`min_frames` = `max_frames`), so that a miss
/// needs an eviction at once.
fn write_out_config(backend: BackendKind) -> CacheConfig {
    CacheConfig {
        min_frames: FRAMES,
        instance: InstanceId::new(1),
        backend,
        ..config(FRAMES)
    }
}

/// Fills every frame with a dirty page (1..=16, marker = end of its change), then a
/// reader of page 1000 finds no frame: the writer chooses pages to evict, takes them
/// out of the map for their writes and blocks in the log flush the write-ahead rule
/// needs. Returns the pages out of the map, with the markers of all 16.
fn pages_in_flight<'scope>(
    cache: &'scope PageCache<()>,
    wal: &FakeWal,
    scope: &'scope thread::Scope<'scope, '_>,
) -> (Vec<u32>, Vec<u64>) {
    let mut markers = Vec::new();
    for p in 1..=FRAMES as u32 {
        let mut guard = cache.lock();
        if guard.lookup(Pgno::new(p)).is_none() {
            guard = cache.fault_in(guard, Pgno::new(p)).expect("fault_in");
        }
        let f = guard.lookup(Pgno::new(p)).expect("resident");
        let end = wal.append(100);
        guard.page_mut(f)[MARK..MARK + 8].copy_from_slice(&end.to_le_bytes());
        guard.mark_dirty(f, pos(end));
        markers.push(end);
    }
    let checkpoint = cache.checkpoint();
    scope.spawn(move || read_through(cache, 1000));
    // The writer may have chosen its pages already (the frames ran low while they were
    // filled), so wait for the reader's stall too: its miss is counted by then.
    wait_until("the reader's stall", || cache.counters().stalls == 1);
    wait_until("the page writer's log flush", || wal.waiting() == 1);
    let out: Vec<u32> = (1..=FRAMES as u32)
        .filter(|&p| !cache.lock().contains(Pgno::new(p)))
        .collect();
    assert!(!out.is_empty(), "no page is being written out of its frame");
    let c = cache.counters();
    assert_eq!(c.dirty, FRAMES, "pages in flight are still dirty: {c:?}");
    assert_eq!(
        cache.checkpoint(),
        checkpoint,
        "the checkpoint passed unwritten pages"
    );
    for &p in &out {
        let on_disk = marker(&disk_page(cache.file().path(), p));
        assert_ne!(on_disk, markers[p as usize - 1], "page {p} written early");
    }
    (out, markers)
}

#[test]
fn a_page_faulted_during_its_eviction_write_comes_back_without_a_read() {
    for backend in [BackendKind::Auto, BackendKind::Threads] {
        let db = database();
        let wal = held_wal();
        let cache = new_cache(&db, write_out_config(backend), &wal);
        let (markers, reads_before) = thread::scope(|s| {
            let _release = ReleaseOnDrop(&wal);
            let (out, markers) = pages_in_flight(&cache, &wal, s);
            let p = out[0];
            let before = cache.counters();
            let cache = &cache;
            let reader = s.spawn(move || read_through(cache, p));
            // Counted under the instance lock in the same hold that registers the wait.
            wait_until("the fault to wait", || {
                cache.counters().misses == before.misses + 1
            });
            wal.block(false);
            let page = reader.join().expect("join");
            assert_eq!(
                marker(&page),
                markers[p as usize - 1],
                "page {p} ({backend:?})"
            );
            assert!(cache.lock().contains(Pgno::new(p)), "page {p} was evicted");
            (markers, before.reads)
        });
        // Page 1000's read is the only one: page p came back from its own frame.
        let c = cache.counters();
        assert_eq!(c.reads, reads_before + 1, "{backend:?}");
        assert_eq!(c.write_out_waits, 1, "{backend:?}");
        cache.shutdown().expect("shutdown");
        for p in 1..=FRAMES as u32 {
            let on_disk = marker(&disk_page(&db.path, p));
            assert_eq!(on_disk, markers[p as usize - 1], "page {p} ({backend:?})");
        }
    }
}

#[test]
fn new_page_of_a_page_being_written_out_waits_and_finds_it() {
    let db = database();
    let wal = held_wal();
    let cache = new_cache(&db, write_out_config(BackendKind::Auto), &wal);
    thread::scope(|s| {
        let _release = ReleaseOnDrop(&wal);
        let (out, markers) = pages_in_flight(&cache, &wal, s);
        let p = out[0];
        let cache = &cache;
        let creator = s.spawn(move || {
            let mut guard = cache.lock();
            let mut refused = 0;
            let f = loop {
                match guard.new_page(Pgno::new(p)) {
                    Some(f) => break f,
                    None => {
                        refused += 1;
                        guard = cache.try_wait_for_frame(guard).expect("frame");
                    }
                }
            };
            (refused, guard.page(f).to_vec())
        });
        thread::sleep(Duration::from_millis(100));
        assert!(
            !creator.is_finished(),
            "new_page went on while page {p} was in flight"
        );
        wal.block(false);
        let (refused, page) = creator.join().expect("join");
        // Refused while in flight, then the written page itself: not a zeroed frame.
        assert_eq!(refused, 1);
        assert_eq!(marker(&page), markers[p as usize - 1]);
    });
    cache.shutdown().expect("shutdown");
}
