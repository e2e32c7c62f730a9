//! Lost-flush detection: a page write the "storage" acknowledges but drops is found by
//! recovery, which names the page and refuses to call the database clean.

use edbstress_engine::instance::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::layout::InstanceLayout;
use edbstress_engine::prepare::{PrepareOptions, PreparePlan};
use edbstress_engine::recovery::{RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_io::{IoClass, IoMode};

/// A small prepared instance (buffered I/O, so tests run on any filesystem).
fn prepared(dir: &std::path::Path) -> (InstanceLayout, InstanceConfig) {
    let layout = InstanceLayout::new(1, &dir.join("db"), &dir.join("logs"));
    let options = PrepareOptions {
        page_size: PageSize::K8,
        database_bytes: 2 << 20,
        mailboxes: 4,
        io_mode: IoMode::Buffered,
        ..PrepareOptions::default()
    };
    PreparePlan::check(vec![layout.clone()], options)
        .unwrap()
        .execute(&mut |_| {})
        .unwrap();
    let mut config = InstanceConfig::new(layout.clone());
    config.io_mode = IoMode::Buffered;
    (layout, config)
}

fn recovery_options() -> RecoveryOptions {
    RecoveryOptions {
        io_mode: IoMode::Buffered,
        ..RecoveryOptions::default()
    }
}

/// Inserts a message durably, optionally has the storage drop the next write of its
/// leaf, flushes everything and writes the checkpoint, then changes the same leaf
/// durably and crashes. Returns the message's key and leaf.
fn change_flush_change_crash(
    config: &InstanceConfig,
    drop_write: bool,
) -> (edbstress_engine::schema::MessageKey, u32) {
    let instance = Instance::open(config.clone()).unwrap();
    let insert = TxnOp::Insert {
        mailbox: 2,
        props: b"first version",
        body: b"hello",
    };
    let key = instance
        .commit(&[insert], Durability::Durable)
        .unwrap()
        .inserted[0];
    let leaf = instance.locate(key).unwrap();
    if drop_write {
        instance.drop_next_write(leaf);
    }
    instance.checkpoint_now().unwrap();
    let replace = TxnOp::Replace {
        key,
        props: b"second version",
        body: None,
    };
    assert_eq!(
        instance
            .commit(&[replace], Durability::Durable)
            .unwrap()
            .found,
        vec![true]
    );
    instance.crash();
    (key, leaf)
}

#[test]
fn recovery_reports_a_dropped_page_write_as_lost_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path());
    let (_, leaf) = change_flush_change_crash(&config, true);
    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(!report.succeeded());
    assert_eq!(report.lost_flushes.len(), 1, "{report:?}");
    assert_eq!(report.lost_flushes[0].pgno, leaf);
    assert!(report.lost_flushes[0].page_dbtime < report.lost_flushes[0].expected_dbtime);
    // Still not clean: opening refuses until the damage is dealt with.
    assert!(Instance::open(config).is_err());
}

#[test]
fn without_a_dropped_write_the_same_sequence_recovers_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path());
    let (key, _) = change_flush_change_crash(&config, false);
    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert!(report.redone >= 1);
    // Replay I/O is accounted as recovery I/O, not as transactional I/O.
    assert!(
        report.io.total(IoClass::RecoveryWrite).ops >= 1,
        "{:?}",
        report.io.total(IoClass::RecoveryWrite)
    );
    assert!(report.io.total(IoClass::RecoveryRead).ops >= 1);
    assert_eq!(
        report.io.total(IoClass::DbRead).ops + report.io.total(IoClass::DbWrite).ops,
        0
    );
    let instance = Instance::open(config).unwrap();
    let m = instance.read(key, true).unwrap().unwrap();
    assert_eq!(m.props, b"second version");
    assert_eq!(m.body.unwrap(), b"hello");
    instance.shutdown().unwrap();
}
