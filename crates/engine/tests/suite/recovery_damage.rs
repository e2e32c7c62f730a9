//! Recovery facing storage damage, on one leaf changed after a checkpoint:
//!
//! - a lost flush — a page write the "storage" acknowledges but drops — is found by
//!   recovery, which names the page and refuses to call the database clean;
//! - a torn write — the page fails its checksum — is rebuilt from its logged image with
//!   `torn_write_protection` (a change that makes a page dirty logs the page's on-disk
//!   image first) and replayed; without it, recovery refuses the page and names it;
//! - a torn page whose damage cancels out in the checksum is rebuilt all the same with
//!   `torn_write_protection` (a page that is not its image is never trusted).

use super::instance_common;
use instance_common::*;

use std::os::unix::fs::FileExt;

use edbstress_engine::EngineError;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{RecoveryOptions, recover};
use edbstress_engine::{ScanOptions, scan_database};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{IoClass, IoMode};

/// A small prepared instance (buffered I/O, so tests run on any filesystem).
fn prepared(
    dir: &std::path::Path,
    torn_write_protection: bool,
) -> (InstanceLayout, InstanceConfig) {
    let layout = prepare_small(dir, PageSize::K8, 2 << 20, 4, 5);
    let mut config = buffered_config(&layout);
    config.torn_write_protection = torn_write_protection;
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
) -> (edbstress_engine::MessageKey, u32) {
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
        resort: None,
    };
    assert_eq!(
        instance
            .commit(&[replace], Durability::Durable)
            .unwrap()
            .found,
        vec![true]
    );
    instance.crash();
    (key, leaf.get())
}

#[test]
fn recovery_reports_a_dropped_page_write_as_lost_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), false);
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
    let (layout, config) = prepared(dir.path(), false);
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

/// The database file, opened to be damaged behind the engine's back.
fn open_for_damage(layout: &InstanceLayout) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&layout.db_file)
        .unwrap()
}

/// What a power cut does to an 8 KiB page write on a device atomic per 4 KiB sector:
/// the first sector keeps its old bytes, the second holds new ones.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn tear(layout: &InstanceLayout, pgno: u32) {
    let file = open_for_damage(layout);
    let offset = Pgno::new(pgno).offset(PageSize::K8) + 4096;
    let mut sector = vec![0u8; 4096];
    file.read_exact_at(&mut sector, offset).unwrap();
    // New bytes, not complements: complementing whole aligned 8-byte words cancels
    // out in an ESE-style block sum (docs/format.md §5.3).
    for (i, b) in sector[1000..1200].iter_mut().enumerate() {
        *b = b.wrapping_add(1 + (i % 7) as u8);
    }
    file.write_all_at(&sector, offset).unwrap();
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
    let (key, leaf) = change_flush_change_crash(&config, false);
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

/// A torn page whose changed bytes cancel out in the ESE-style sum: bit 0 of the
/// little-endian `u32` words 32 and 33 and bit 1 of words 34 and 35 (bytes 128..144,
/// the first record) flipped. Each of the sum's halves is an XOR — of the words, and of
/// the set bits' indices (32·m + k) — and 32 ^ 33 ^ 34 ^ 35 = 0, so the page still
/// verifies. The power-cut test met such a page: a branch page's old first sector with
/// a new second one holding four more tag entries whose bytes XOR to zero.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn tear_undetectably(layout: &InstanceLayout, pgno: u32) {
    let file = open_for_damage(layout);
    let offset = Pgno::new(pgno).offset(PageSize::K8);
    let mut page = vec![0u8; 8192];
    file.read_exact_at(&mut page, offset).unwrap();
    for (word, bit) in [(32, 0), (33, 0), (34, 1), (35, 1)] {
        page[word * 4] ^= 1 << bit;
    }
    assert_eq!(
        edbstress_format::checksum::verify_page(&page, Pgno::new(pgno)),
        edbstress_format::checksum::PageVerdict::Valid,
        "the damage was meant to cancel out in the checksum"
    );
    file.write_all_at(&page, offset).unwrap();
}

#[test]
fn recovery_rebuilds_a_torn_page_that_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), true);
    let (key, leaf) = change_flush_change_crash(&config, false);
    tear_undetectably(&layout, leaf);

    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    // Rebuilt either way: as damaged if the flips broke the page's structure, as a page
    // that verifies but is not its image otherwise.
    assert_eq!(
        report.pages_restored.len() as u64 + report.pages_rebuilt_whole,
        1,
        "{report:?}"
    );
    assert!(scan_is_clean(&layout));
    let instance = Instance::open(config).unwrap();
    let message = instance.read(key, true).unwrap().expect("message kept");
    assert_eq!(message.props, b"second version");
    assert_eq!(message.body.unwrap(), b"hello");
    instance.shutdown().unwrap();
}

#[test]
fn recovery_leaves_pages_that_verify_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, config) = prepared(dir.path(), true);
    let (key, _) = change_flush_change_crash(&config, false);
    let report = recover(&layout, &recovery_options()).unwrap();
    assert!(report.succeeded(), "{report:?}");
    assert!(report.pages_restored.is_empty(), "{report:?}");
    assert_eq!(report.pages_rebuilt_whole, 0, "{report:?}");
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
    let (_, leaf) = change_flush_change_crash(&config, false);
    tear(&layout, leaf);
    match recover(&layout, &recovery_options()) {
        Err(EngineError::CorruptPage { pgno, .. }) => assert_eq!(pgno, leaf),
        other => panic!("expected the torn page {leaf} to be refused, got {other:?}"),
    }
}
