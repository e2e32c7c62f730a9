//! Unit tests of the cache's bookkeeping: page-number hashing, LRU-2 history and
//! ranking, the change-start bound and dirty-list maintenance.

use edbstress_format::Pgno;
use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault};

use edbstress_format::log::LogPosition;

use super::frames::{Core, EXCLUDED, LruSlot, PgnoHasher, eviction_key};

fn pos(n: u64) -> LogPosition {
    LogPosition::unpack(n)
}

fn core(max_frames: usize) -> Core<()> {
    Core::new((), max_frames, 4096, 4, pos(1000))
}

#[test]
fn strided_page_numbers_spread_over_buckets() {
    let build = BuildHasherDefault::<PgnoHasher>::default();
    for stride in [1u32, 2, 64, 4096] {
        let buckets: HashSet<u64> = (1..=4096u32)
            .map(|i| build.hash_one(i * stride) & 4095)
            .collect();
        // A uniform hash fills ~63 % of 4096 buckets with 4096 keys; a hash keeping the
        // stride's zero low bits would fill 4096 / stride.
        assert!(
            buckets.len() > 2400,
            "stride {stride}: {} buckets",
            buckets.len()
        );
    }
}

#[test]
fn correlated_references_do_not_count_twice() {
    let slot = LruSlot::new();
    slot.install(10);
    assert!(!slot.touch(12, 4), "not chosen for eviction");
    assert_eq!(
        slot.hist2.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "correlated"
    );
    assert!(!slot.touch(20, 4));
    assert_eq!(
        slot.hist2.load(std::sync::atomic::Ordering::Relaxed),
        12,
        "end of the previous burst"
    );
    assert_eq!(slot.last.load(std::sync::atomic::Ordering::Relaxed), 20);
    // Chosen for eviction, then referenced: the reference cancels the choice.
    slot.last
        .store(20 | EXCLUDED, std::sync::atomic::Ordering::Relaxed);
    assert!(slot.touch(30, 4));
    assert_eq!(slot.last.load(std::sync::atomic::Ordering::Relaxed), 30);
    slot.clear();
    assert_eq!(
        eviction_key(
            slot.last.load(std::sync::atomic::Ordering::Relaxed),
            0,
            40,
            4
        ),
        None
    );
}

#[test]
fn eviction_ranks_once_referenced_pages_first() {
    let now = 1000;
    let window = 10;
    let once_old = eviction_key(100, 0, now, window).expect("resident");
    let once_new = eviction_key(900, 0, now, window).expect("resident");
    let twice_long_ago = eviction_key(950, 50, now, window).expect("resident");
    let twice_recently = eviction_key(960, 800, now, window).expect("resident");
    let in_window = eviction_key(995, 0, now, window).expect("resident");
    let mut keys = vec![
        in_window,
        twice_recently,
        twice_long_ago,
        once_new,
        once_old,
    ];
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            once_old,
            once_new,
            twice_long_ago,
            twice_recently,
            in_window
        ]
    );
    assert_eq!(eviction_key(5 | EXCLUDED, 0, now, window), None);
}

#[test]
fn change_start_bound_follows_the_order_of_marking() {
    let mut c = core(8);
    // Before any change: the log's end when the cache was created.
    assert_eq!(c.change_start_bound(pos(1100)), pos(1000));
    // Another page of the same transaction: same bound.
    assert_eq!(c.change_start_bound(pos(1100)), pos(1000));
    // The next transaction starts after the previous one's end.
    assert_eq!(c.change_start_bound(pos(1250)), pos(1100));
    assert_eq!(c.change_start_bound(pos(1300)), pos(1250));
    // Out of order: nothing bounds it but the start of the log.
    assert_eq!(c.change_start_bound(pos(1200)), LogPosition::default());
    assert_eq!(c.change_start_bound(pos(1400)), pos(1200));
}

#[test]
fn frames_grow_to_the_maximum_then_come_from_the_pool() {
    let mut c = core(6);
    c.allocate_frames(2).expect("allocate");
    assert_eq!(
        (c.frames.len(), c.available.len(), c.obtainable()),
        (2, 2, 6)
    );
    let taken: Vec<u32> = (0..6).map(|_| c.take_frame().expect("frame")).collect();
    assert_eq!(
        taken,
        vec![0, 1, 2, 3, 4, 5],
        "pool first, in frame order, then growth"
    );
    assert_eq!((c.obtainable(), c.take_frame()), (0, None));
    let slot = LruSlot::new();
    c.release_frame(3, &slot);
    assert_eq!((c.obtainable(), c.take_frame()), (1, Some(3)));
}

#[test]
fn a_write_of_an_older_version_leaves_the_page_dirty_since_the_newer_change() {
    let mut c = core(4);
    let slot = LruSlot::new();
    let f = c.take_frame().expect("frame");
    c.install(f, Pgno::new(42), &slot, false);
    c.mark_dirty(f, pos(100), pos(150));
    c.mark_dirty(f, pos(150), pos(200));
    assert_eq!(c.oldest_dirty(), Some(pos(100)));
    let snapshot = c.frames[f as usize].version;
    c.frames[f as usize].in_flight = true;
    c.mark_dirty(f, pos(300), pos(350));
    c.mark_dirty(f, pos(350), pos(400));
    assert!(!c.mark_written(f, snapshot), "changed during the write");
    assert_eq!(
        c.oldest_dirty(),
        Some(pos(300)),
        "dirty since the first change after the snapshot"
    );
    assert_eq!(c.frames[f as usize].last_change, pos(400));
    assert_eq!(c.dirty.len(), 1);
    let latest = c.frames[f as usize].version;
    c.frames[f as usize].in_flight = true;
    assert!(c.mark_written(f, latest));
    assert_eq!((c.oldest_dirty(), c.dirty.len()), (None, 0));
    assert_eq!(c.frames[f as usize].written_version, latest);
}
