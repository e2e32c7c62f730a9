//! A small run configuration on temporary directories.

#![allow(dead_code)] // the cli crate's report tests use a subset

use std::path::Path;
use std::time::Duration;

use edbstress_engine::{
    Durability, Instance, InstanceId, InstanceLayout, PrepareOptions, PreparePlan, TxnOp,
};
use edbstress_format::PageSize;
use edbstress_io::{BackendKind, IoMode};
use edbstress_report::{Pacing, TestType};
use edbstress_workload::config::RunConfig;
use edbstress_workload::profile::Profile;

/// A short run of `test` with 2 small databases under `root`.
pub fn small_config(root: &Path, test: TestType) -> RunConfig {
    let profile = Profile::Exchange2013;
    let d = profile.defaults();
    RunConfig {
        start_at: None,
        host_name: None,
        fleet_id: None,
        campaign_id: None,
        progress_interval: None,
        test,
        profile,
        mailboxes: None,
        iops_per_mailbox: 0.12,
        mailbox_quota: 2 << 30,
        databases: 2,
        database_size: 64 << 20,
        copies: 2,
        db_paths: vec![root.join("db")],
        log_paths: vec![root.join("logs")],
        page_size: PageSize::K32,
        cache_min: 8 << 20,
        cache_max: 16 << 20,
        checkpoint_depth: 4 << 20,
        write_coalesce: 32 << 10,
        torn_write_protection: false,
        allow_cached_databases: true,
        threads: Some(4),
        session_threads: None,
        auto_tune: false,
        pacing: Pacing::OpenLoop,
        auto_tune_growth: None,
        auto_tune_margin: 0.8,
        duration: Duration::from_secs(3),
        sample_interval: Duration::from_secs(1),
        warmup_timeout: Duration::from_secs(10),
        op_mix: d.op_mix,
        lazy_commit_pct: d.lazy_commit_pct,
        bdm: true,
        bdm_mb_per_sec: 20.0,
        target_margin: 1.05,
        thresholds: profile.thresholds(test),
        results_dir: root.join("results"),
        seed: 7,
        backup_path: None,
        logs_to_replay: 3,
        compressibility: 1.7,
        io_mode: IoMode::Buffered,
        backend: BackendKind::Auto,
        verify_after: true,
    }
}

/// Commits insert `i` (props: its number, in mailbox `i % 8`) durably: the log grows by
/// about `body`'s length per call.
pub fn insert_durably(instance: &Instance, i: u32, body: &[u8]) {
    let props = i.to_le_bytes();
    instance
        .commit(
            &[TxnOp::Insert {
                mailbox: i % 8,
                props: &props,
                body,
            }],
            Durability::Durable,
        )
        .unwrap();
}

/// Prepares one buffered database of `options` (io mode, threads and the rest of the
/// defaults filled in) under `dir`: `dir/db`, its log in `dir/logs`.
pub fn prepare_instance(dir: &Path, options: PrepareOptions) -> InstanceLayout {
    let layout = InstanceLayout::new(InstanceId::new(1), &dir.join("db"), &dir.join("logs"));
    let options = PrepareOptions {
        io_mode: IoMode::Buffered,
        threads: 1,
        ..options
    };
    PreparePlan::check(vec![layout.clone()], options)
        .unwrap()
        .execute(&mut |_| {})
        .unwrap();
    layout
}
