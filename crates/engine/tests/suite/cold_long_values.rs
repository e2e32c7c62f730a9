//! Long values through a cache much smaller than they are: deleting one whose leaves
//! were evicted, and inserting one whose new pages come from a free list that is not
//! cached, fault those pages in before the transaction changes anything (the warm-up
//! walks). The results must be the same as with everything cached: every message
//! reads back whole, deleted ones are gone, their pages are reused, the tree passes
//! the deep check, and a crash after it all recovers to the same contents.

use super::instance_common;
use instance_common::*;

use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_format::PageSize;

/// 20–60 KB: 10 to 30 chunks of a 4 KiB-page database, 5 to 15 pages.
fn body(i: u64) -> Vec<u8> {
    let len = 20_000 + (i * 7919 % 40_000) as usize;
    (0..len)
        .map(|b| (b as u64 ^ i.wrapping_mul(131)) as u8)
        .collect()
}

#[test]
fn long_values_deleted_and_reinserted_through_a_small_cache() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare_small(dir.path(), PageSize::K4, 1 << 20, 4, 11);
    let mut config = buffered_config(&layout);
    // 128 frames: each message's pages are a large part of the cache, and the pages
    // of earlier messages are evicted long before they are deleted.
    config.cache_min_bytes = 512 << 10;
    config.cache_max_bytes = 512 << 10;
    let instance = Instance::open(config.clone()).unwrap();
    let insert = |i: u64| {
        let b = body(i);
        instance
            .commit(
                &[TxnOp::Insert {
                    mailbox: (i % 4) as u32,
                    props: &i.to_le_bytes(),
                    body: &b,
                }],
                Durability::Lazy,
            )
            .unwrap_or_else(|e| panic!("insert {i}: {e}"))
            .inserted[0]
    };
    let mut live: Vec<_> = (0..120u64).map(|i| (insert(i), i)).collect();
    let retries_before = instance.counters().retries;
    // Delete every other message (its leaves are cold by now), then insert as many
    // again: their pages come back from the free list, also cold.
    let deleted: Vec<_> = live.iter().step_by(2).copied().collect();
    for &(key, i) in &deleted {
        let out = instance
            .commit(&[TxnOp::Delete { key }], Durability::Lazy)
            .unwrap_or_else(|e| panic!("delete {i}: {e}"));
        assert_eq!(out.found, [true], "message {i}");
    }
    live.retain(|entry| !deleted.contains(entry));
    let grown = instance.counters().growths;
    // Fewer than were deleted: the mailbox table may split meanwhile and take a page.
    for i in 1000..1050u64 {
        live.push((insert(i), i));
    }
    assert!(
        instance.counters().retries > retries_before,
        "the cache was meant to be too small to hold the messages"
    );
    assert_eq!(
        instance.counters().growths,
        grown,
        "the file grew although the deletes freed enough pages"
    );
    for &(key, i) in &deleted {
        assert!(instance.read(key, true).unwrap().is_none(), "message {i}");
    }
    for &(key, i) in &live {
        let m = instance
            .read(key, true)
            .unwrap()
            .unwrap_or_else(|| panic!("message {i} lost"));
        assert_eq!(m.props, i.to_le_bytes());
        assert_eq!(m.body.unwrap(), body(i), "body of message {i}");
    }
    // A durable commit makes the whole log durable; the crash then loses only pages.
    instance
        .commit(&[TxnOp::Delete { key: live[0].0 }], Durability::Durable)
        .unwrap();
    let (gone, _) = live.remove(0);
    crash_recover_and_check(instance, &layout);
    let instance = Instance::open(config).unwrap();
    assert!(instance.read(gone, false).unwrap().is_none());
    for &(key, i) in &live {
        let m = instance
            .read(key, true)
            .unwrap()
            .unwrap_or_else(|| panic!("message {i} lost in recovery"));
        assert_eq!(
            m.body.unwrap(),
            body(i),
            "body of message {i} after recovery"
        );
    }
    instance.shutdown().unwrap();
}
