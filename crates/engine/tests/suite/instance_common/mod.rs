//! A small instance made by a real prepare, for the engine's integration tests:
//! database under `DIR/db`, logs under `DIR/logs`, buffered I/O so the tests run on
//! any filesystem.

#![allow(dead_code)] // the suite and power_cut's binary use different subsets

use std::path::Path;

use edbstress_engine::InstanceId;
use edbstress_engine::{CheckReport, Instance, InstanceConfig, deep_check};
use edbstress_engine::{Durability, InstanceLayout, MessageKey, TxnOp};
use edbstress_engine::{PrepareOptions, PreparePlan, RecoveryOptions, recover};
use edbstress_format::PageSize;
use edbstress_io::IoMode;
use rand::RngCore;
use rand::rngs::SmallRng;

/// Prepare options of a small buffered database; the same seed gives the same bytes.
pub fn small_options(
    page_size: PageSize,
    database_bytes: u64,
    mailboxes: u32,
    seed: u64,
) -> PrepareOptions {
    PrepareOptions {
        page_size,
        database_bytes,
        mailboxes,
        io_mode: IoMode::Buffered,
        seed: Some(seed),
        ..PrepareOptions::default()
    }
}

/// Prepares instance 1 under `dir` with `options`.
pub fn prepare_at(dir: &Path, options: PrepareOptions) -> InstanceLayout {
    let layout = InstanceLayout::new(InstanceId::new(1), &dir.join("db"), &dir.join("logs"));
    PreparePlan::check(vec![layout.clone()], options)
        .unwrap()
        .execute(&mut |_| {})
        .unwrap();
    layout
}

/// Prepares a small buffered database (see [`small_options`]) as instance 1 under `dir`.
pub fn prepare_small(
    dir: &Path,
    page_size: PageSize,
    database_bytes: u64,
    mailboxes: u32,
    seed: u64,
) -> InstanceLayout {
    prepare_at(
        dir,
        small_options(page_size, database_bytes, mailboxes, seed),
    )
}

/// The instance configuration for `layout`, with buffered I/O.
pub fn buffered_config(layout: &InstanceLayout) -> InstanceConfig {
    let mut config = InstanceConfig::new(layout.clone());
    config.io_mode = IoMode::Buffered;
    config
}

/// Crashes `instance` (nothing flushed, nothing shut down), recovers `layout` with
/// buffered I/O and deep-checks the database: recovery must succeed and the check
/// find nothing. Returns the check.
pub fn crash_recover_and_check(instance: Instance, layout: &InstanceLayout) -> CheckReport {
    instance.crash();
    let report = recover(
        layout,
        &RecoveryOptions {
            io_mode: IoMode::Buffered,
            ..RecoveryOptions::default()
        },
    )
    .unwrap();
    assert!(report.succeeded(), "{report:?}");
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
    check
}

/// Durably inserts one message of 20,000 incompressible bytes into mailbox
/// `written.len() % 4` (its props: that count) and records its key and body in
/// `written`: each call moves the log by about three segments.
pub fn insert_incompressible(
    instance: &Instance,
    rng: &mut SmallRng,
    written: &mut Vec<(MessageKey, Vec<u8>)>,
) {
    let mut body = vec![0u8; 20_000];
    rng.fill_bytes(&mut body);
    let props = (written.len() as u64).to_le_bytes();
    let out = instance
        .commit(
            &[TxnOp::Insert {
                mailbox: (written.len() % 4) as u32,
                props: &props,
                body: &body,
            }],
            Durability::Durable,
        )
        .unwrap();
    written.push((out.inserted[0], body));
}
