//! Lost-flush detection: a page write the "storage" acknowledges but drops is found by
//! recovery, which names the page and refuses to call the database clean.

use edbstress_engine::instance::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::layout::InstanceLayout;
use edbstress_engine::prepare::{PrepareOptions, PreparePlan};
use edbstress_engine::recovery::{RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_io::IoMode;

#[test]
fn recovery_reports_a_dropped_page_write_as_lost_flush() {
    let dir = tempfile::tempdir().unwrap();
    let layout = InstanceLayout::new(1, &dir.path().join("db"), &dir.path().join("logs"));
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
    let instance = Instance::open(config).unwrap();

    let out = instance
        .commit(
            &[TxnOp::Insert {
                mailbox: 2,
                props: b"first version",
                body: b"hello",
            }],
            Durability::Durable,
        )
        .unwrap();
    let key = out.inserted[0];
    let leaf = instance.locate(key).unwrap();
    // The storage "acknowledges" the next write of that leaf without keeping it.
    instance.drop_next_write(leaf);
    instance.checkpoint_now().unwrap();
    let out = instance
        .commit(
            &[TxnOp::Replace {
                key,
                props: b"second version",
                body: None,
            }],
            Durability::Durable,
        )
        .unwrap();
    assert_eq!(out.found, vec![true]);
    instance.crash();

    let report = recover(
        &layout,
        &RecoveryOptions {
            io_mode: IoMode::Buffered,
            ..RecoveryOptions::default()
        },
    )
    .unwrap();
    assert!(!report.succeeded());
    assert_eq!(report.lost_flushes.len(), 1, "{report:?}");
    assert_eq!(report.lost_flushes[0].pgno, leaf);
    assert!(report.lost_flushes[0].page_dbtime < report.lost_flushes[0].expected_dbtime);
    // Still not clean: opening refuses until the damage is dealt with.
    let mut config = InstanceConfig::new(layout);
    config.io_mode = IoMode::Buffered;
    assert!(Instance::open(config).is_err());
}

#[test]
fn without_a_dropped_write_the_same_sequence_recovers_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let layout = InstanceLayout::new(1, &dir.path().join("db"), &dir.path().join("logs"));
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
    let instance = Instance::open(config.clone()).unwrap();
    let out = instance
        .commit(
            &[TxnOp::Insert {
                mailbox: 2,
                props: b"first version",
                body: b"hello",
            }],
            Durability::Durable,
        )
        .unwrap();
    let key = out.inserted[0];
    instance.checkpoint_now().unwrap();
    instance
        .commit(
            &[TxnOp::Replace {
                key,
                props: b"second version",
                body: None,
            }],
            Durability::Durable,
        )
        .unwrap();
    instance.crash();
    let report = recover(
        &layout,
        &RecoveryOptions {
            io_mode: IoMode::Buffered,
            ..RecoveryOptions::default()
        },
    )
    .unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert!(report.redone >= 1);
    let instance = Instance::open(config).unwrap();
    let m = instance.read(key, true).unwrap().unwrap();
    assert_eq!(m.props, b"second version");
    assert_eq!(m.body.unwrap(), b"hello");
    instance.shutdown().unwrap();
}
