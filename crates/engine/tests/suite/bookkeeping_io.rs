//! The engine's bookkeeping I/O goes through the io crate's backends too: with
//! `--backend threads` and with `--backend io_uring`, database growth, header writes,
//! the checkpoint barrier's flush, log file creation (zero-fill and generation
//! headers), the checkpoint file and the reads and writes of reopening a log are
//! carried, timed and counted by a backend of the chosen kind, each under its own
//! class, and each count is what the engine says it did.

use super::instance_common;
use super::log_common;

use edbstress_engine::log::{LogWriter, read_log};
use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_format::PageSize;
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CheckpointState, DEFAULT_LOG_FILE_LEN, SEGMENT_LEN,
};
use edbstress_io::{BackendKind, ClassStats, IoClass, IoStats, IoUringBackend};

fn uring_usable(test: &str) -> bool {
    match IoUringBackend::new(4) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("SKIP {test}: io_uring is not usable here ({e})");
            false
        }
    }
}

/// The counters of `class` of instance `instance`, each one timed, none failed.
fn counted(stats: &IoStats, instance: u16, class: IoClass) -> ClassStats {
    let s = stats.get(instance, class).cloned().unwrap_or_default();
    assert_eq!(s.errors, 0, "{class}: {s:?}");
    assert_eq!(s.latency.count(), s.ops, "{class}: each request timed once");
    s
}

/// Inserts large messages until the database file has grown and the log has rolled
/// over several generations, then checks every bookkeeping class against the
/// engine's own counters.
fn growth_rolls_and_checkpoints(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 4 << 20, 20, 11);
    let mut config = instance_common::buffered_config(&layout);
    config.backend = backend;
    config.cache_min_bytes = 2 << 20;
    config.cache_max_bytes = 2 << 20;
    config.checkpoint_depth = 2 << 20;
    let instance = Instance::open(config).unwrap();
    assert_eq!(instance.file_io_backend(), backend.name());
    assert_eq!(instance.log_backend(), backend.name());
    let first_generation = instance.log_generation().get();
    let body = vec![0x5a; 24 * 1024];
    let mut inserted = 0u32;
    while instance.counters().growths < 2 || instance.log_generation().get() < first_generation + 3
    {
        assert!(
            inserted < 4000,
            "neither growth nor rolls after {inserted} inserts"
        );
        instance
            .commit(
                &[TxnOp::Insert {
                    mailbox: inserted % 20,
                    props: &[1, 2, 3],
                    body: &body,
                }],
                Durability::Durable,
            )
            .unwrap();
        inserted += 1;
    }
    instance.checkpoint_now().unwrap();
    // A roll may still be going on behind the last acknowledged commit (its header,
    // checkpoint barrier and write, and the next pre-creation): the counters and the statistics are read
    // until a snapshot of the statistics lies between two equal snapshots of the
    // counters and agrees with them, or a bound is reached (then the assertions below
    // say what disagrees).
    let (log, stats, engine) = {
        let mut tries = 0;
        loop {
            let (log_before, engine_before) = (instance.log_counters(), instance.counters());
            let stats = instance.io_stats();
            let (log, engine) = (instance.log_counters(), instance.counters());
            let stable = log == log_before
                && engine.header_writes == engine_before.header_writes
                && engine.pages_grown == engine_before.pages_grown;
            let ops = |class| stats.get(1, class).map_or(0, |s: &ClassStats| s.ops);
            // A checkpoint's barrier (DbFlush) is issued before its copies are written
            // and counted: a snapshot between the two is not yet settled.
            let agrees = ops(IoClass::LogCheckpoint) == 2 * log.checkpoint_writes
                && ops(IoClass::DbFlush) == log.checkpoint_writes
                && ops(IoClass::DbHeader) == 2 * engine.header_writes
                && ops(IoClass::LogCreate) == 2 * log.files_precreated + log.generations_rolled;
            tries += 1;
            if (stable && agrees) || tries == 1000 {
                break (log, stats, engine);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    let page = PageSize::K8.bytes() as u64;

    let growth = counted(&stats, 1, IoClass::DbGrowth);
    assert!(engine.growths >= 2 && engine.pages_grown > 0, "{engine:?}");
    assert_eq!(
        growth.bytes,
        engine.pages_grown * page,
        "every page growth added was written through the {} backend",
        backend.name()
    );
    assert!(
        growth.ops >= 2 * engine.growths,
        "at least one write and one flush per growth: {growth:?}"
    );

    let header = counted(&stats, 1, IoClass::DbHeader);
    // At open, at each growth and for each generation recorded.
    assert!(engine.header_writes > engine.growths, "{engine:?}");
    assert_eq!(
        header.ops,
        2 * engine.header_writes,
        "both copies each time"
    );
    assert_eq!(header.bytes, 2 * page * engine.header_writes);

    let flush = counted(&stats, 1, IoClass::DbFlush);
    assert!(log.checkpoint_writes > 0, "{log:?}");
    assert_eq!(
        flush.ops, log.checkpoint_writes,
        "one database flush before each checkpoint write"
    );
    assert_eq!(flush.bytes, 0);

    let checkpoint = counted(&stats, 1, IoClass::LogCheckpoint);
    assert_eq!(
        checkpoint.ops,
        2 * log.checkpoint_writes,
        "both copies each time"
    );
    assert_eq!(
        checkpoint.bytes,
        2 * CHECKPOINT_COPY_LEN as u64 * log.checkpoint_writes
    );

    let create = counted(&stats, 1, IoClass::LogCreate);
    assert!(log.generations_rolled >= 3, "{log:?}");
    assert!(log.files_precreated >= log.generations_rolled, "{log:?}");
    assert_eq!(
        create.bytes,
        log.files_precreated * DEFAULT_LOG_FILE_LEN as u64
            + log.generations_rolled * SEGMENT_LEN as u64,
        "each pre-created file zero-filled, each new generation's header written"
    );
    assert_eq!(
        create.ops,
        2 * log.files_precreated + log.generations_rolled,
        "one zero-fill write and one flush per file, one header write per roll"
    );

    let log_writes = counted(&stats, 1, IoClass::LogWrite);
    assert_eq!(
        log_writes.ops, log.writes,
        "log writes are still counted apart"
    );
    instance.shutdown().unwrap();
}

#[test]
fn threads_backend_counts_growth_headers_log_creation_and_checkpoints() {
    growth_rolls_and_checkpoints(BackendKind::Threads);
}

#[test]
fn io_uring_backend_counts_growth_headers_log_creation_and_checkpoints() {
    if uring_usable("io_uring_backend_counts_growth_headers_log_creation_and_checkpoints") {
        growth_rolls_and_checkpoints(BackendKind::IoUring);
    }
}

/// A torn last write leaves a damaged segment after the end of the log: reopening the
/// writer there zeroes it, through the writer's backend (class `LogReopen`).
fn reopen_zeroes_a_torn_tail(backend: BackendKind) {
    let (_tmp, dir) = log_common::new_log_dir();
    let mut config = log_common::config(&dir, log_common::SMALL_FILE);
    config.backend = backend;
    let writer = LogWriter::open(
        config.clone(),
        log_common::START,
        log_common::START,
        CheckpointState::default(),
    )
    .unwrap();
    for (trx, len) in [(1, 300), (2, 500), (3, 2_000)] {
        let end = writer.append(&log_common::txn(trx, &[len])).unwrap();
        writer.flush_to(end).unwrap();
    }
    let opened = writer.stats();
    assert_eq!(
        counted(&opened, 0, IoClass::LogReopen).ops,
        0,
        "nothing to close or zero in a fresh log"
    );
    let last = log_common::read_slot(&dir, 1, 3);
    writer.abandon();
    let zero = vec![0u8; SEGMENT_LEN];
    log_common::write_slot(&dir, 1, 3, &log_common::torn(&last, &zero, 1));
    let scan = read_log(
        &dir,
        log_common::START,
        log_common::sigs(),
        IoClass::LogRead,
    )
    .unwrap();
    assert!(scan.summary.torn_tail);

    let writer = LogWriter::open(
        config,
        scan.summary.end_of_log,
        log_common::START,
        CheckpointState::default(),
    )
    .unwrap();
    let reopen = counted(&writer.stats(), 0, IoClass::LogReopen);
    assert_eq!(
        (reopen.ops, reopen.bytes),
        (2, SEGMENT_LEN as u64),
        "the torn segment zeroed in one write, then flushed, through the {} backend",
        backend.name()
    );
    assert_eq!(log_common::read_slot(&dir, 1, 3), zero);
    // What opening read to check the start (the scan, then the generation file whole)
    // is counted too.
    let read = counted(&writer.stats(), 0, IoClass::LogRead);
    assert!(
        read.bytes >= (log_common::SMALL_FILE + SEGMENT_LEN) as u64,
        "the reopened generation read through the {} backend: {read:?}",
        backend.name()
    );
    writer.shutdown().unwrap();
}

#[test]
fn threads_backend_counts_the_writes_of_reopening_a_log() {
    reopen_zeroes_a_torn_tail(BackendKind::Threads);
}

#[test]
fn io_uring_backend_counts_the_writes_of_reopening_a_log() {
    if uring_usable("io_uring_backend_counts_the_writes_of_reopening_a_log") {
        reopen_zeroes_a_torn_tail(BackendKind::IoUring);
    }
}
