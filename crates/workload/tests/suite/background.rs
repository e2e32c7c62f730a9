//! Background activities of a run on small real databases and log directories: the
//! BDM checksum scan (whole-file passes, damage found, throttling, no false alarms
//! while the engine writes) and the log replication readers (every closed generation
//! read by every reader, removed files counted as missed, generations kept until read
//! up to the readers' cap).

use super::common::{insert_durably, prepare_instance};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use edbstress_engine::Compressibility;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::PrepareOptions;
use edbstress_engine::{Instance, InstanceConfig};
use edbstress_format::Generation;
use edbstress_format::log::{LogFileHeader, LogPosition, SEGMENT_LEN, log_file_name};
use edbstress_format::{PageSize, Pgno};
use edbstress_io::{BackendKind, IoClass, IoMode};
use edbstress_report::OpMix;
use edbstress_workload::bdm::{BadPage, BdmConfig, BdmError, BdmHandle, BdmScanner, PageDamage};
use edbstress_workload::replication::{
    LogReplicator, ReplicationConfig, ReplicationError, RetentionFloor,
};
use edbstress_workload::transaction::TransactionGenerator;

const READ_LEN: usize = 256 << 10;
const PS: PageSize = PageSize::K32;
/// 256 data pages of 32 KiB plus the two header slots: every full pass is 32 reads
/// of exactly 256 KiB.
const DB_BYTES: u64 = (8 << 20) + 2 * 32768;
const DATA_PAGES: u64 = 256;

/// Guards against a hang; never reached when things work.
const DEADLINE: Duration = Duration::from_secs(60);

fn prepare(dir: &Path) -> InstanceLayout {
    prepare_instance(
        dir,
        PrepareOptions {
            page_size: PS,
            database_bytes: DB_BYTES,
            mailboxes: 8,
            seed: Some(11),
            ..PrepareOptions::default()
        },
    )
}

fn open_instance(layout: &InstanceLayout, cache_bytes: u64) -> Instance {
    let mut config = InstanceConfig::new(layout.clone());
    config.io_mode = IoMode::Buffered;
    config.cache_min_bytes = cache_bytes;
    config.cache_max_bytes = cache_bytes;
    Instance::open(config).unwrap()
}

fn bdm_config(db_file: &Path, bytes_per_sec: f64) -> BdmConfig {
    BdmConfig {
        instance: InstanceId::new(1),
        db_file: db_file.to_path_buf(),
        bytes_per_sec,
        read_len: READ_LEN,
        io_mode: IoMode::Direct,
        backend: BackendKind::Auto,
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn one_pass(handle: &BdmHandle) {
    wait_until("a BDM pass", || handle.progress().passes >= 1);
}

/// Flips `bits` (byte, bit) of page `pgno` on disk.
#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn flip_bits(db_file: &Path, pgno: u32, bits: &[(usize, u8)]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(db_file)
        .unwrap();
    let mut page = vec![0u8; PS.bytes()];
    let offset = Pgno::new(pgno).offset(PS);
    file.read_exact_at(&mut page, offset).unwrap();
    for &(byte, bit) in bits {
        page[byte] ^= 1 << bit;
    }
    file.write_all_at(&page, offset).unwrap();
    file.sync_all().unwrap();
}

/// Whether io_uring works here; says loudly that `what` is skipped when it does not.
fn io_uring_usable(what: &str) -> bool {
    match edbstress_io::IoUringBackend::new(4) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {what} through io_uring: io_uring is not usable here ({e})");
            false
        }
    }
}

#[test]
fn bdm_scans_every_page_and_reports_damaged_ones_through_threads() {
    bdm_scans_every_page_and_reports_damaged_ones(BackendKind::Threads);
}

#[test]
fn bdm_scans_every_page_and_reports_damaged_ones_through_io_uring() {
    if !io_uring_usable("BDM") {
        return;
    }
    bdm_scans_every_page_and_reports_damaged_ones(BackendKind::IoUring);
}

/// The scan reads through a backend of `backend`'s kind, which times and counts every
/// read (the scan times nothing itself).
fn bdm_scans_every_page_and_reports_damaged_ones(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    let stop = Arc::new(AtomicBool::new(false));

    let handle = BdmScanner::spawn(
        BdmConfig {
            backend,
            ..bdm_config(&layout.db_file, 200e6)
        },
        Arc::clone(&stop),
    )
    .unwrap();
    one_pass(&handle);
    let report = handle.stop_and_join();
    assert!(
        !stop.load(Ordering::Relaxed),
        "the run's stop flag is left alone"
    );
    assert!(report.passes >= 1);
    assert!(report.pages_checked >= DATA_PAGES, "{report:?}");
    assert!(report.bad_pages.is_empty(), "{:?}", report.bad_pages);
    assert_eq!(report.bad_page_count, 0);
    assert_eq!(report.correctable_pages, 0);
    assert_eq!(report.io_errors, 0);
    let reads = report.stats.get(1, IoClass::BdmRead).unwrap();
    assert_eq!(reads.bytes, report.bytes_read);
    assert_eq!(
        reads.bytes,
        reads.ops * READ_LEN as u64,
        "every read is 256 KiB"
    );
    assert!(reads.ops >= DATA_PAGES * PS.bytes() as u64 / READ_LEN as u64);
    assert_eq!(report.stats.total(IoClass::BdmRead).ops, reads.ops);
    assert_eq!((reads.errors, reads.latency.count()), (0, reads.ops));

    // Two flipped bits: damaged. One flipped bit elsewhere: correctable.
    flip_bits(&layout.db_file, 50, &[(1000, 3), (20000, 5)]);
    flip_bits(&layout.db_file, 60, &[(3000, 1)]);
    let handle = BdmScanner::spawn(
        BdmConfig {
            backend,
            ..bdm_config(&layout.db_file, 200e6)
        },
        Arc::clone(&stop),
    )
    .unwrap();
    one_pass(&handle);
    let progress = handle.progress();
    let report = handle.stop_and_join();
    assert!(progress.bad_pages == 1 && progress.correctable_pages == 1);
    assert_eq!(report.bad_page_count, 1);
    assert_eq!(
        report.bad_pages.len(),
        1,
        "each page once: {:?}",
        report.bad_pages
    );
    assert_eq!(
        report.bad_pages[0],
        BadPage {
            pgno: Pgno::new(50),
            damage: PageDamage::ChecksumMismatch
        }
    );
    assert_eq!(
        report.bad_pages[0].to_string(),
        "page 50 (checksum mismatch)"
    );
    assert_eq!(report.correctable_pages, 1);
    // The damaged page was read again on its own before it was reported.
    let reads = report.stats.get(1, IoClass::BdmRead).unwrap();
    assert!(
        reads.ops * (READ_LEN as u64) > reads.bytes,
        "single-page re-reads"
    );
}

#[test]
fn bdm_throttle_limits_the_bytes_read() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    let rate = 2e6;
    let started = Instant::now();
    let handle = BdmScanner::spawn(
        bdm_config(&layout.db_file, rate),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let report = handle.stop_and_join();
    let elapsed = started.elapsed().as_secs_f64();
    assert!(report.bytes_read > 0);
    // One read may start at once; after that the rate holds (a slow machine reads less).
    let limit = READ_LEN as f64 + rate * elapsed * 1.05;
    assert!(
        (report.bytes_read as f64) <= limit,
        "{} bytes in {elapsed:.2} s at {rate} B/s",
        report.bytes_read
    );
}

#[test]
fn bdm_finds_no_damage_while_the_instance_commits() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    // A cache of 32 pages: the engine writes pages back all the time.
    let instance = open_instance(&layout, 1 << 20);
    let mut config = bdm_config(&layout.db_file, 500e6);
    // The engine writes through the page cache here; reads through it race the
    // writes at memory-copy granularity, the hardest case for torn reads.
    config.io_mode = IoMode::Buffered;
    let handle = BdmScanner::spawn(config, Arc::new(AtomicBool::new(false))).unwrap();
    let mix = OpMix {
        insert: 40,
        delete: 20,
        replace: 30,
        read: 10,
    };
    let mut generator = TransactionGenerator::new(5, 0, mix, 70, Compressibility::MAIL);
    let started = Instant::now();
    let db_writes = || instance.io_stats().total(IoClass::DbWrite).ops;
    while (db_writes() < 200 || handle.progress().passes < 3) && started.elapsed() < DEADLINE {
        for _ in 0..20 {
            let kind = generator.next_kind();
            generator.run(&instance, kind).unwrap();
        }
    }
    let report = handle.stop_and_join();
    instance.shutdown().unwrap();
    assert!(report.passes >= 1, "{report:?}");
    assert!(report.bad_pages.is_empty(), "{:?}", report.bad_pages);
    assert_eq!(report.correctable_pages, 0);
    assert_eq!(report.io_errors, 0, "{:?}", report.last_error);
}

#[test]
fn bdm_refuses_what_it_cannot_scan() {
    let dir = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let missing = dir.path().join("none.edb");
    let err = BdmScanner::spawn(bdm_config(&missing, 1e6), Arc::clone(&stop))
        .err()
        .unwrap();
    assert!(matches!(err, BdmError::Io(_)), "{err}");
    assert!(err.to_string().contains("none.edb"), "{err}");

    let other = dir.path().join("other.bin");
    std::fs::write(&other, vec![7u8; 1 << 20]).unwrap();
    let mut config = bdm_config(&other, 1e6);
    config.io_mode = IoMode::Buffered;
    let err = BdmScanner::spawn(config, Arc::clone(&stop)).err().unwrap();
    assert!(matches!(err, BdmError::NotOurs { .. }), "{err}");
    assert_eq!(std::fs::read(&other).unwrap(), vec![7u8; 1 << 20]);

    let err = BdmScanner::spawn(bdm_config(&other, 0.0), stop)
        .err()
        .unwrap();
    assert!(matches!(err, BdmError::Invalid(_)), "{err}");
}

fn replication_config(log_dir: &Path, readers: u32) -> ReplicationConfig {
    ReplicationConfig {
        instance: InstanceId::new(1),
        log_dir: log_dir.to_path_buf(),
        readers,
        read_len: READ_LEN,
        io_mode: IoMode::Direct,
        backend: BackendKind::Auto,
    }
}

#[test]
fn replication_readers_follow_the_log_as_it_is_written_through_threads() {
    replication_readers_follow_the_log(BackendKind::Threads);
}

#[test]
fn replication_readers_follow_the_log_as_it_is_written_through_io_uring() {
    if !io_uring_usable("replication") {
        return;
    }
    replication_readers_follow_the_log(BackendKind::IoUring);
}

/// Two readers follow a log rolling over several generations, reading through a
/// backend of `backend`'s kind, which times and counts every read (the readers time
/// nothing themselves).
fn replication_readers_follow_the_log(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    let instance = Arc::new(open_instance(&layout, 4 << 20));
    let start = instance.log_generation();
    let source = Arc::clone(&instance);
    let handle = LogReplicator::spawn(
        ReplicationConfig {
            backend,
            ..replication_config(&layout.log_dir, 2)
        },
        Arc::new(move || source.log_durable()),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    assert_eq!(handle.backend(), Some(backend.name()));
    let body = vec![0x5a; 64 << 10];
    let mut i = 0u32;
    let mut commit = |instance: &Instance| {
        insert_durably(instance, i, &body);
        i += 1;
    };
    while instance.log_generation().since(start) < 5 {
        commit(&instance);
    }
    // Then more than a read's worth into the open generation, without closing it.
    while instance.log_durable().segment < 100 {
        commit(&instance);
    }
    let closed = u64::from(instance.log_generation().since(start));
    assert!(closed >= 5, "the log rolled {closed} generations");
    // Per file: the header (checked), then 256 KiB reads.
    let per_file = (1u64 << 20) + 4096;
    wait_until("the readers to catch up", || {
        handle.progress().files_read >= 2 * closed
    });
    // The open generation is read as it is written: its header and first 256 KiB.
    wait_until("the readers to follow the open generation", || {
        handle.stats().total(IoClass::ReplicationRead).bytes
            >= 2 * (closed * per_file + 4096 + READ_LEN as u64)
    });
    let report = handle.stop_and_join();
    Arc::try_unwrap(instance)
        .ok()
        .expect("the readers let go of the instance")
        .shutdown()
        .unwrap();
    assert_eq!(report.files_read, 2 * closed, "{report:?}");
    assert_eq!(report.missed, 0);
    assert_eq!(report.behind, 0);
    assert_eq!(report.io_errors, 0, "{:?}", report.last_error);
    let reads = report.stats.get(1, IoClass::ReplicationRead).unwrap();
    assert_eq!(reads.bytes, report.bytes_read);
    assert_eq!(reads.errors, 0);
    assert_eq!(
        reads.latency.count(),
        reads.ops,
        "each read timed once by the {} backend",
        backend.name()
    );
    // Closed files: 5 reads each; the open one: the header and whole 256 KiB reads.
    let open_bytes = reads.bytes - 2 * closed * per_file;
    let open_reads = reads.ops - 2 * closed * 5;
    assert_eq!(
        open_bytes,
        2 * 4096 + (open_reads - 2) * READ_LEN as u64,
        "{reads:?}"
    );
}

/// A log file of `len` bytes: a real header, then filler.
fn write_log(dir: &Path, generation: u32, len: usize) -> PathBuf {
    let path = dir.join(log_file_name(Generation::new(generation)));
    let mut bytes = vec![generation as u8; len];
    LogFileHeader {
        generation: Generation::new(generation),
        segment_len: SEGMENT_LEN as u32,
        file_len: len.next_multiple_of(SEGMENT_LEN) as u32,
        log_signature: 7,
        db_signature: 8,
        created_unix: 0,
        checkpoint_at_creation: LogPosition::default(),
        prev_generation_checksum: 0,
    }
    .encode(&mut bytes[..SEGMENT_LEN]);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A durable end of the log in generation `generation` (nothing of it written yet).
fn durable_in(generation: &AtomicU32) -> LogPosition {
    LogPosition {
        generation: Generation::new(generation.load(Ordering::Relaxed)),
        segment: 1,
        offset: 32,
    }
}

#[test]
fn replication_counts_removed_files_as_missed_and_reads_odd_tails() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path();
    // Generations 1 and 2 are from before the readers started: never read.
    write_log(logs, 1, 1 << 20);
    write_log(logs, 2, 1 << 20);
    write_log(logs, 3, 1 << 20);
    write_log(logs, 4, (300 << 10) + 100);
    // 5 was removed by circular logging.
    write_log(logs, 6, 1 << 20);
    let generation = Arc::new(AtomicU32::new(3));
    let source = Arc::clone(&generation);
    let handle = LogReplicator::spawn(
        replication_config(logs, 2),
        Arc::new(move || durable_in(&source)),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    generation.store(7, Ordering::Relaxed);
    wait_until("generations 3..6 to be shipped", || {
        let p = handle.progress();
        p.files_read + p.missed >= 8
    });
    let report = handle.stop_and_join();
    assert_eq!(report.files_read, 6);
    assert_eq!(report.missed, 2);
    assert_eq!(report.behind, 0);
    assert_eq!(report.io_errors, 0, "{:?}", report.last_error);
    // Per reader: each file's header, then 4 + 2 (256 KiB and the 44 KiB tail) + 4 reads.
    assert_eq!(
        report.bytes_read,
        2 * ((2 << 20) + (300 << 10) + 100 + 3 * 4096)
    );
    assert_eq!(report.stats.total(IoClass::ReplicationRead).ops, 2 * 13);

    // A file that is not the generation its name says is an error, not shipped.
    write_log(logs, 8, 1 << 20);
    std::fs::rename(
        logs.join(log_file_name(Generation::new(8))),
        logs.join(log_file_name(Generation::new(9))),
    )
    .unwrap();
    let generation = Arc::new(AtomicU32::new(9));
    let source = Arc::clone(&generation);
    let handle = LogReplicator::spawn(
        replication_config(logs, 1),
        Arc::new(move || durable_in(&source)),
        Arc::new(AtomicBool::new(false)),
    )
    .unwrap();
    generation.store(10, Ordering::Relaxed);
    wait_until("the wrong file to be refused", || {
        handle.stats().total(IoClass::ReplicationRead).ops >= 1
    });
    let report = handle.stop_and_join();
    assert_eq!(report.files_read, 0);
    assert_eq!(report.io_errors, 1);
    assert!(report.last_error.unwrap().contains("E0000000009"));

    // Stopped by the run's flag before reading anything: all closed files are behind.
    let generation = Arc::new(AtomicU32::new(3));
    let source = Arc::clone(&generation);
    let handle = LogReplicator::spawn(
        replication_config(logs, 1),
        Arc::new(move || durable_in(&source)),
        Arc::new(AtomicBool::new(true)),
    )
    .unwrap();
    generation.store(10, Ordering::Relaxed);
    let report = handle.stop_and_join();
    assert_eq!(report.files_read + report.missed, 0);
    assert_eq!(report.behind, 7);
}

#[test]
fn replication_refuses_a_missing_log_directory() {
    let dir = tempfile::tempdir().unwrap();
    let err = LogReplicator::spawn(
        replication_config(&dir.path().join("nope"), 1),
        Arc::new(LogPosition::default),
        Arc::new(AtomicBool::new(false)),
    )
    .err()
    .unwrap();
    assert!(matches!(err, ReplicationError::LogDir { .. }), "{err}");
    assert!(err.to_string().contains("nope"), "{err}");
}

/// Readers that fall behind hold circular logging back through the instance's
/// retention floor: while they are held at the first generation none of the files
/// after it is deleted, once they have read them the files go, and none is missed.
/// With a cap of 2 generations, files further behind go anyway and are counted missed.
#[test]
fn replication_readers_keep_generations_until_read_up_to_their_cap() {
    let dir = tempfile::tempdir().unwrap();
    let layout = prepare(dir.path());
    let mut config = InstanceConfig::new(layout.clone());
    config.io_mode = IoMode::Buffered;
    config.cache_min_bytes = 4 << 20;
    config.cache_max_bytes = 4 << 20;
    config.circular_logging = true;
    config.checkpoint_depth = 256 << 10;
    let instance = Arc::new(Instance::open(config).unwrap());
    let body = vec![0x3c; 64 << 10];
    let mut i = 0u32;
    let mut roll = |instance: &Instance, generations: u32| {
        let from = instance.log_generation();
        while instance.log_generation().since(from) < generations {
            insert_durably(instance, i, &body);
            i += 1;
        }
    };
    let files = |from: Generation, to: Generation| -> usize {
        (from.get()..to.get())
            .filter(|&g| {
                layout
                    .log_dir
                    .join(log_file_name(Generation::new(g)))
                    .exists()
            })
            .count()
    };
    // The readers see the log durable only up to the start of generation `shown`.
    let shown = Arc::new(AtomicU32::new(instance.log_generation().get()));
    let spawn = |most_generations: u32| {
        let (source, shown) = (Arc::clone(&instance), Arc::clone(&shown));
        let (floor_of, current_of) = (Arc::clone(&instance), Arc::clone(&instance));
        LogReplicator::spawn_retaining(
            replication_config(&layout.log_dir, 2),
            Arc::new(move || {
                let real = source.log_durable();
                let held = shown.load(Ordering::Relaxed);
                if real.generation.get() > held {
                    durable_in(&AtomicU32::new(held))
                } else {
                    real
                }
            }),
            Some(RetentionFloor {
                set: Arc::new(move |floor| floor_of.set_log_retention_floor(floor)),
                most_generations,
                current: Arc::new(move || current_of.log_generation()),
            }),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap()
    };

    let start = instance.log_generation();
    let handle = spawn(100);
    roll(&instance, 6);
    let now = instance.log_generation();
    assert_eq!(
        files(start, now),
        now.since(start) as usize,
        "every generation the held readers still need is kept"
    );
    shown.store(u32::MAX, Ordering::Relaxed);
    let closed = u64::from(now.since(start));
    wait_until("the readers to catch up", || {
        handle.progress().files_read >= 2 * closed
    });
    let deleted = instance.log_counters().generations_deleted;
    roll(&instance, 2);
    assert!(
        instance.log_counters().generations_deleted > deleted,
        "read generations go at the next roll"
    );
    assert_eq!(files(start, now), 0, "the generations read are gone");
    let report = handle.stop_and_join();
    assert_eq!(report.missed, 0, "{report:?}");
    assert_eq!(report.io_errors, 0, "{:?}", report.last_error);

    // A cap of 2 generations: readers held 6 behind lose the oldest files.
    let start = instance.log_generation();
    shown.store(start.get(), Ordering::Relaxed);
    let handle = spawn(2);
    roll(&instance, 6);
    // The floor follows the log at the readers' next poll, and files go at a roll.
    wait_until("the capped floor to let the oldest files go", || {
        roll(&instance, 1);
        let now = instance.log_generation();
        files(start, Generation::new(now.get() - 3)) == 0
    });
    let now = instance.log_generation();
    shown.store(u32::MAX, Ordering::Relaxed);
    let closed = u64::from(now.since(start));
    wait_until("the readers to pass the lost files", || {
        let p = handle.progress();
        p.files_read + p.missed >= 2 * closed
    });
    let report = handle.stop_and_join();
    assert!(report.missed >= 2 * 3, "{report:?}");
    Arc::try_unwrap(instance)
        .ok()
        .expect("the readers let go of the instance")
        .shutdown()
        .unwrap();
}
