//! The checkpoint depth under sustained load from several sessions: a transaction
//! that takes the depth past its hard limit returns only once the page writer has
//! brought the checkpoint back within it, so the depth never exceeds the limit by more
//! than the transactions the sessions have in progress; the waits are counted, and a
//! crash afterwards recovers to a database that checks clean.

use super::instance_common;

use std::sync::atomic::{AtomicU64, Ordering};

use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_format::PageSize;

const SESSIONS: u32 = 4;
const TRANSACTIONS: u32 = 120;
/// The checkpoint depth, and the hard limit set to it: every transaction that finds
/// the page writer behind waits.
const DEPTH: u64 = 128 << 10;
/// Log of one transaction here, at most: an insert of a body under 7 KB (two
/// long-value chunks, the row, the view entry, a split's before image of an 8 KiB page
/// or two, begin and commit).
const TRANSACTION_LOG_MAX: u64 = 64 << 10;

#[test]
fn sessions_wait_for_the_checkpoint_past_its_hard_limit() {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 8 << 20, 16, 5);
    let mut config = instance_common::buffered_config(&layout);
    config.cache_min_bytes = 1 << 20;
    config.cache_max_bytes = 1 << 20;
    config.checkpoint_depth = DEPTH;
    config.checkpoint_too_deep = Some(DEPTH);
    let instance = Instance::open(config).unwrap();
    assert_eq!(instance.checkpoint_hard_limit(), DEPTH);
    let mailboxes = instance.mailbox_count();
    let deepest = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for s in 0..SESSIONS {
            let (instance, deepest) = (&instance, &deepest);
            scope.spawn(move || {
                for i in 0..TRANSACTIONS {
                    let body = vec![(s * 31 + i) as u8; 1500 + (i as usize * 211) % 5000];
                    let props = [s as u8, i as u8];
                    let durability = if i % 3 == 0 {
                        Durability::Durable
                    } else {
                        Durability::Lazy
                    };
                    instance
                        .commit(
                            &[TxnOp::Insert {
                                mailbox: (s * 5 + i) % mailboxes,
                                props: &props,
                                body: &body,
                            }],
                            durability,
                        )
                        .unwrap();
                    deepest.fetch_max(instance.checkpoint_depth_bytes(), Ordering::Relaxed);
                }
            });
        }
    });
    let cache = instance.cache_counters();
    let deepest = deepest.into_inner();
    eprintln!(
        "deepest checkpoint {deepest} bytes (limit {DEPTH}); {} waits, {:.1} ms; {} pages written for depth; log {} generations",
        cache.checkpoint_waits,
        cache.checkpoint_wait_ns as f64 / 1e6,
        cache.checkpoint_flushes,
        instance.log_generation().get()
    );
    // Every session may have appended one transaction past the limit before waiting.
    let bound = DEPTH + u64::from(SESSIONS) * TRANSACTION_LOG_MAX;
    assert!(
        deepest <= bound,
        "the checkpoint fell {deepest} bytes behind, past {bound}"
    );
    assert!(
        cache.checkpoint_waits > 0,
        "with the limit at the depth some transaction must have found the writer behind: {cache:?}"
    );
    assert!(cache.checkpoint_wait_ns > 0);
    assert!(cache.checkpoint_flushes > 0, "{cache:?}");
    instance_common::crash_recover_and_check(instance, &layout);
}
