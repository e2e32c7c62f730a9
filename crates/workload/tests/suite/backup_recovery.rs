//! DatabaseBackup and SoftRecovery on two small prepared databases: the backup reads
//! every byte in 256 KiB reads, copies byte for byte, never overwrites and finds a
//! damaged page; soft recovery generates the log files asked for with the checkpoint
//! held back, crashes, replays them all and leaves databases that open and check clean.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use edbstress_engine::InstanceLayout;
use edbstress_engine::deep_check;
use edbstress_engine::{Instance, InstanceConfig};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{BackendKind, IoClass, IoMode};
use edbstress_report::OpMix;
use edbstress_workload::backup::{BackupError, BackupOptions, run_backup, total_mb_per_sec};
use edbstress_workload::profile::Profile;
use edbstress_workload::soft_recovery::{
    SoftRecoveryOptions, SoftRecoveryPhase, average_seconds_per_log, run_soft_recovery,
};
use parking_lot::Mutex;

const DATABASE_BYTES: u64 = 16 << 20;

/// Two prepared 16 MiB databases with 32 KiB pages (buffered I/O, so any filesystem).
fn prepared(dir: &Path) -> Vec<InstanceLayout> {
    let layouts = InstanceLayout::spread(2, &[dir.join("db")], &[dir.join("logs")]);
    let options = PrepareOptions {
        page_size: PageSize::K32,
        database_bytes: DATABASE_BYTES,
        mailboxes: 20,
        io_mode: IoMode::Buffered,
        seed: Some(17),
        ..PrepareOptions::default()
    };
    PreparePlan::check(layouts.clone(), options)
        .unwrap()
        .execute(&mut |_| {})
        .unwrap();
    layouts
}

fn backup_options(backup_path: Option<&Path>) -> BackupOptions {
    BackupOptions {
        io_mode: IoMode::Buffered,
        backup_path: backup_path.map(Path::to_path_buf),
        ..BackupOptions::default()
    }
}

#[test]
fn backup_reads_every_byte_in_256k_reads_and_copies_without_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let layouts = prepared(dir.path());
    let never = AtomicBool::new(false);

    // Read only.
    let last_progress = Mutex::new(HashMap::new());
    let (reports, stats) = run_backup(
        &layouts,
        &backup_options(None),
        &never,
        &|i, done, total| {
            last_progress.lock().insert(i, (done, total));
        },
    )
    .unwrap();
    assert_eq!(reports.len(), 2);
    for (report, layout) in reports.iter().zip(&layouts) {
        let len = std::fs::metadata(&layout.db_file).unwrap().len();
        assert_eq!(len, DATABASE_BYTES);
        assert_eq!(report.instance, layout.instance);
        assert_eq!(report.bytes_read, len);
        assert_eq!(report.bad_pages, 0);
        assert!(!report.stopped && report.passed());
        assert_eq!(report.copy, None);
        assert!(report.mb_per_sec > 0.0);
        let reads = stats
            .get(layout.instance.get(), IoClass::BackupRead)
            .unwrap();
        assert_eq!(reads.bytes, len);
        assert_eq!(reads.mean_bytes(), (256 << 10) as f64);
        assert_eq!(reads.errors, 0);
        assert_eq!(
            last_progress.lock()[&u32::from(layout.instance)],
            (len, len)
        );
    }
    assert!(total_mb_per_sec(&reports) > reports[0].mb_per_sec);
    assert_eq!(stats.total(IoClass::DbRead).ops, 0);

    // With copies: byte-identical, named like the source plus .bak.
    let backup_dir = dir.path().join("backup");
    let (reports, stats) = run_backup(
        &layouts,
        &backup_options(Some(&backup_dir)),
        &never,
        &|_, _, _| {},
    )
    .unwrap();
    let mut copies = Vec::new();
    for (report, layout) in reports.iter().zip(&layouts) {
        let copy = report.copy.clone().expect("a copy");
        assert_eq!(
            copy,
            backup_dir.join(format!("edbstress{:03}.edb.bak", layout.instance))
        );
        let bytes = std::fs::read(&copy).unwrap();
        assert!(bytes == std::fs::read(&layout.db_file).unwrap());
        copies.push((copy, bytes));
    }
    // The copy writes are not backup reads.
    assert_eq!(stats.total(IoClass::BackupRead).bytes, 2 * DATABASE_BYTES);

    // A second backup into the same place is refused and touches nothing.
    let err = run_backup(
        &layouts,
        &backup_options(Some(&backup_dir)),
        &never,
        &|_, _, _| {},
    )
    .unwrap_err();
    assert!(matches!(err, BackupError::CopyExists { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("edbstress001.edb.bak") && message.contains("already exists"),
        "{message}"
    );
    for (copy, bytes) in &copies {
        assert!(std::fs::read(copy).unwrap() == *bytes);
    }
}

#[test]
fn backup_counts_a_damaged_page_and_a_stop_leaves_no_copy() {
    let dir = tempfile::tempdir().unwrap();
    let layouts = prepared(dir.path());
    let never = AtomicBool::new(false);
    // Two bits of page 100 of the first database flipped: beyond single-bit repair.
    let mut bytes = std::fs::read(&layouts[0].db_file).unwrap();
    let at = Pgno::new(100).offset(PageSize::K32) as usize + 5000;
    bytes[at] ^= 0b0000_0001;
    bytes[at + 700] ^= 0b0100_0000;
    std::fs::write(&layouts[0].db_file, &bytes).unwrap();

    let (reports, _) = run_backup(&layouts, &backup_options(None), &never, &|_, _, _| {}).unwrap();
    assert_eq!(reports[0].bad_pages, 1);
    assert!(!reports[0].passed());
    assert_eq!(reports[1].bad_pages, 0);
    assert_eq!(reports[0].bytes_read, DATABASE_BYTES);

    // Stopped before the first read: a flagged partial result, and no copy left behind.
    let backup_dir = dir.path().join("backup");
    let stop = AtomicBool::new(true);
    let (reports, _) = run_backup(
        &layouts,
        &backup_options(Some(&backup_dir)),
        &stop,
        &|_, _, _| {},
    )
    .unwrap();
    for report in &reports {
        assert!(report.stopped && !report.passed());
        assert!(report.bytes_read < DATABASE_BYTES);
        assert_eq!(report.copy, None);
    }
    assert_eq!(std::fs::read_dir(&backup_dir).unwrap().count(), 0);
}

#[test]
fn soft_recovery_replays_every_generated_log_and_leaves_clean_databases() {
    let dir = tempfile::tempdir().unwrap();
    let layouts = prepared(dir.path());
    let options = SoftRecoveryOptions {
        logs_to_replay: 5,
        sessions_per_instance: 4,
        // A quarter of the database: pages are evicted (written) while generating.
        cache_min_bytes: 4 << 20,
        cache_max_bytes: 4 << 20,
        checkpoint_depth: 1 << 20,
        op_mix: OpMix {
            insert: 40,
            delete: 20,
            replace: 5,
            read: 35,
        },
        lazy_commit_pct: 70,
        seed: 3,
        compressibility: edbstress_engine::Compressibility::MAIL,
        io_mode: IoMode::Buffered,
        backend: BackendKind::Auto,
        // Page images in the generated logs: replay must pass over them.
        torn_write_protection: true,
        profile: Profile::Exchange2013,
    };
    let generated = Mutex::new(HashMap::new());
    let (reports, stats) = run_soft_recovery(
        &layouts,
        &options,
        &AtomicBool::new(false),
        &|phase, instance, done, total| {
            if phase == SoftRecoveryPhase::Generating {
                assert_eq!(total, 5);
                let mut g = generated.lock();
                let seen = g.entry(instance).or_insert(0);
                *seen = done.max(*seen);
            }
        },
    )
    .unwrap();
    assert_eq!(reports.len(), 2);
    for (report, layout) in reports.iter().zip(&layouts) {
        assert_eq!(report.instance, layout.instance);
        assert!(report.logs_generated >= 5, "{report:?}");
        assert!(report.logs_replayed >= 5, "{report:?}");
        assert!(!report.stopped);
        assert!(report.transactions > 0);
        assert!(report.succeeded(), "{:?}", report.recovery.lost_flushes);
        assert!(report.recovery.redone > 0);
        assert!(report.seconds_per_log().is_some());
        assert_eq!(generated.lock()[&u32::from(layout.instance)], 5);
    }
    assert!(average_seconds_per_log(&reports).is_some());
    assert!(stats.total(IoClass::RecoveryRead).ops > 0);
    assert!(stats.total(IoClass::RecoveryWrite).ops > 0);
    assert_eq!(stats.total(IoClass::DbWrite).ops, 0);

    for layout in &layouts {
        let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
        assert!(check.is_clean(), "{:?}", check.problems);
        let mut config = InstanceConfig::new(layout.clone());
        config.io_mode = IoMode::Buffered;
        let instance = Instance::open(config).unwrap();
        instance.shutdown().unwrap();
    }
}
