//! Torn-write protection: with `torn_write_protection`, a change that makes a page
//! dirty logs the page's on-disk image first, and recovery rebuilds a page whose write
//! was torn (it fails its checksum) from that image, then replays the changes after it.
//! Without it, recovery refuses the torn page and names it.

use edbstress_engine::error::EngineError;
use edbstress_engine::instance::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::layout::InstanceLayout;
use edbstress_engine::prepare::{PrepareOptions, PreparePlan};
use edbstress_engine::recovery::{RecoveryOptions, recover};
use edbstress_engine::schema::MessageKey;
use edbstress_engine::verify::{ScanOptions, scan_database};
use edbstress_format::{PageSize, page_offset};
use edbstress_io::IoMode;
use std::os::unix::fs::FileExt;

fn prepared(
    dir: &std::path::Path,
    torn_write_protection: bool,
) -> (InstanceLayout, InstanceConfig) {
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
    config.torn_write_protection = torn_write_protection;
    (layout, config)
}

/// Inserts a message, writes everything and the checkpoint, replaces the message
/// (its leaf is dirty again, after the checkpoint), writes the leaf once more without
/// moving the checkpoint, and crashes. Returns the key and its leaf.
fn change_checkpoint_change_crash(config: &InstanceConfig) -> (MessageKey, u32) {
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

/// What a power cut does to an 8 KiB page write on a device atomic per 4 KiB sector:
/// the first sector keeps its old bytes, the second holds new ones.
fn tear(layout: &InstanceLayout, pgno: u32) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&layout.db_file)
        .unwrap();
    let offset = page_offset(pgno, PageSize::K8) + 4096;
    let mut sector = vec![0u8; 4096];
    file.read_exact_at(&mut sector, offset).unwrap();
    // New bytes, not complements: complementing whole aligned 8-byte words cancels
    // out in an ESE-style block sum (docs/format.md §5.3).
    for (i, b) in sector[1000..1200].iter_mut().enumerate() {
        *b = b.wrapping_add(1 + (i % 7) as u8);
    }
    file.write_all_at(&sector, offset).unwrap();
}

fn recovery_options() -> RecoveryOptions {
    RecoveryOptions {
        io_mode: IoMode::Buffered,
        ..RecoveryOptions::default()
    }
}

fn scan_is_clean(layout: &InstanceLayout) -> bool {
    let options = ScanOptions {
        io_mode: IoMode::Buffered,
        ..ScanOptions::default()
    };
    scan_database(&layout.db_file, &options, &mut |_, _| {})
        .unwrap()
        .is_clean()
}

#[test]
fn recovery_rebuilds_a_torn_page_from_its_logged_image() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), true);
    let (key, leaf) = change_checkpoint_change_crash(&config);
    tear(&layout, leaf);
    assert!(!scan_is_clean(&layout));

    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert_eq!(report.pages_restored, vec![leaf]);
    assert!(report.redone > 0);
    assert!(scan_is_clean(&layout));

    let instance = Instance::open(config).unwrap();
    let message = instance.read(key, true).unwrap().expect("message kept");
    assert_eq!(message.props, b"second version");
    instance.shutdown().unwrap();
}

#[test]
fn recovery_leaves_pages_that_verify_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), true);
    let (key, _) = change_checkpoint_change_crash(&config);
    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert!(report.pages_restored.is_empty(), "{report:?}");
    let instance = Instance::open(config).unwrap();
    assert_eq!(
        instance.read(key, false).unwrap().unwrap().props,
        b"second version"
    );
    instance.shutdown().unwrap();
}

#[test]
fn without_protection_recovery_names_the_torn_page() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), false);
    let (_, leaf) = change_checkpoint_change_crash(&config);
    tear(&layout, leaf);
    match recover(&layout, &recovery_options()) {
        Err(EngineError::CorruptPage { pgno, .. }) => assert_eq!(pgno, leaf),
        other => panic!("expected the torn page {leaf} to be refused, got {other:?}"),
    }
}
