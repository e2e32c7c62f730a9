//! Many sessions on the instance lock at once, on a cache far smaller than the pages
//! they share, while the page writer evicts: every access (hit or miss) sees the newest
//! committed bytes, a pinned page stays cached across releases of the lock, pin counts
//! return to zero and no change is lost. Asserted on page contents and counters. The
//! same with the sessions running as tasks on two threads (`edbstress_io::tasks`):
//! their reads and their waits for each other's reads suspend the task, not the thread.

use std::collections::HashMap;
use std::thread;

use edbstress_engine::{CacheGuard, FrameId, PageCache};
use edbstress_format::Pgno;
use edbstress_format::checksum::{PageVerdict, verify_page};
use edbstress_io::BackendKind;
use edbstress_io::tasks::{deal, run_tasks};

use super::cache_common;
use cache_common::*;

/// Pages the sessions share: six times the cache.
const PAGES: u64 = 288;
const SESSIONS: u64 = 8;
const OPS: u64 = 1200;

#[test]
fn sessions_sharing_pages_see_the_newest_bytes_while_the_writer_evicts() {
    sessions_sharing_pages(BackendKind::Auto, 0);
}

#[test]
fn sessions_sharing_pages_with_the_threads_backend() {
    sessions_sharing_pages(BackendKind::Threads, 0);
}

#[test]
fn sessions_as_tasks_sharing_pages_see_the_newest_bytes() {
    sessions_sharing_pages(BackendKind::Auto, 2);
}

#[test]
fn sessions_as_tasks_sharing_pages_with_the_threads_backend() {
    sessions_sharing_pages(BackendKind::Threads, 2);
}

type Cache = PageCache<HashMap<u32, u64>>;
type Guard<'a> = CacheGuard<'a, HashMap<u32, u64>>;

/// The page under the lock, faulted in as often as needed.
fn resident<'a>(cache: &'a Cache, mut guard: Guard<'a>, pgno: u32) -> (Guard<'a>, FrameId) {
    loop {
        match guard.lookup(Pgno::new(pgno)) {
            Some(f) => return (guard, f),
            None => guard = cache.fault_in(guard, Pgno::new(pgno)).expect("fault_in"),
        }
    }
}

/// `task_threads` 0: a thread per session; else the sessions run as tasks on that many
/// threads.
fn sessions_sharing_pages(backend: BackendKind, task_threads: u64) {
    let db = database();
    let wal = FakeWal::new(1000);
    let mut cfg = config(48);
    cfg.backend = backend;
    // The engine state under the instance lock: each page's last committed marker.
    let cache = new_cache_with(&db, cfg, &wal, HashMap::<u32, u64>::new());
    let session = |t: u64| {
        let (cache, wal) = (&cache, &wal);
        move || {
            let mut rng = 0x2545_F491_4F6C_DD1Du64 ^ (t + 1);
            let mut next = || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            for i in 0..OPS {
                let pgno = 1 + (next() % PAGES) as u32;
                let (mut guard, f) = resident(cache, cache.lock(), pgno);
                // Whatever the path (hit, own read, another session's read, a page
                // back from its eviction write), the bytes are the last commit's.
                let expected = guard.state_ref().get(&pgno).copied();
                assert_eq!(
                    test_marker(guard.page(f)),
                    expected,
                    "page {pgno}: stale bytes"
                );
                match next() % 4 {
                    0 | 1 => {
                        let end = wal.append(50);
                        let value = end << 8 | t;
                        set_marker(guard.page_mut(f), value);
                        guard.mark_dirty(f, pos(end));
                        guard.state().insert(pgno, value);
                    }
                    2 => {
                        // Pinned, the page survives releases of the lock while other
                        // sessions fault pages in and the writer evicts.
                        assert!(guard.pin(Pgno::new(pgno)));
                        drop(guard);
                        for _ in 0..3 {
                            let other = 1 + (next() % PAGES) as u32;
                            drop(resident(cache, cache.lock(), other));
                        }
                        let mut guard = cache.lock();
                        assert!(
                            guard.contains(Pgno::new(pgno)),
                            "page {pgno} was evicted while pinned (op {i})"
                        );
                        guard.unpin(Pgno::new(pgno));
                    }
                    _ => {}
                }
            }
        }
    };
    thread::scope(|s| {
        if task_threads == 0 {
            for t in 0..SESSIONS {
                s.spawn(session(t));
            }
        } else {
            let lists = deal(SESSIONS as u32, task_threads as u32, |t| {
                Box::new(session(u64::from(t)))
            });
            for tasks in lists {
                s.spawn(move || run_tasks(tasks).expect("tasks"));
            }
        }
    });
    let c = cache.counters();
    assert_eq!(c.pinned, 0, "every pin was released: {c:?}");
    assert!(
        c.evictions > 1000 && c.pool_flushes > 0 && c.misses > 1000,
        "the test must force misses, evictions and write-back: {c:?}"
    );
    assert!(c.frames <= 48, "{c:?}");
    let expected = cache.shutdown().expect("shutdown");
    assert!(expected.len() as u64 > PAGES * 3 / 4, "{}", expected.len());
    for (&p, &value) in &expected {
        let on_disk = disk_page(&db.path, p);
        assert_eq!(
            verify_page(&on_disk, Pgno::new(p)),
            PageVerdict::Valid,
            "page {p}"
        );
        assert_eq!(
            test_marker(&on_disk),
            Some(value),
            "page {p} lost its last change"
        );
    }
}
