//! The engine's database and log I/O goes through the io crate's backends: with
//! `--backend threads` and with `--backend io_uring`, the page reads of sessions that
//! miss in the cache, the page writer's writes and the log writer's writes are carried,
//! timed and counted by a backend of the chosen kind, and every counted read and log
//! write is one the engine made.

use super::instance_common;
use super::log_common;

use std::sync::atomic::{AtomicU64, Ordering};

use edbstress_engine::log::{LogReadOptions, LogReader, LogWriter};
use edbstress_engine::{Durability, Instance, TxnOp};
use edbstress_format::PageSize;
use edbstress_format::log::CheckpointState;
use edbstress_io::{BackendKind, IoClass, IoUringBackend};

/// Runs reads and inserts from 4 threads on a database 8× the cache, with `backend`.
fn run_transactions(backend: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 8 << 20, 20, 7);
    let mut config = instance_common::buffered_config(&layout);
    config.backend = backend;
    config.cache_min_bytes = 1 << 20;
    config.cache_max_bytes = 1 << 20;
    let instance = Instance::open(config).unwrap();
    assert_eq!(
        instance.read_backend(),
        backend.name(),
        "page reads go through the backend asked for"
    );
    assert_eq!(
        instance.log_backend(),
        backend.name(),
        "log writes go through the backend asked for"
    );
    let mailboxes = instance.mailbox_count();
    let found = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for t in 0..4u32 {
            let (instance, found) = (&instance, &found);
            scope.spawn(move || {
                for i in 0..150u32 {
                    let mailbox = (t * 151 + i * 7) % mailboxes;
                    if i % 5 == 0 {
                        let body = vec![i as u8; 3000];
                        instance
                            .commit(
                                &[TxnOp::Insert {
                                    mailbox,
                                    props: &[1, 2, 3],
                                    body: &body,
                                }],
                                Durability::Lazy,
                            )
                            .unwrap();
                    } else if let Some(key) =
                        instance.seek_message(mailbox, u64::from(i) * 13).unwrap()
                    {
                        if instance.read(key, true).unwrap().is_some() {
                            found.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    instance.checkpoint_now().unwrap();
    let cache = instance.cache_counters();
    let stats = instance.io_stats();
    let reads = stats
        .get(1, IoClass::DbRead)
        .expect("database reads counted");
    let writes = stats
        .get(1, IoClass::DbWrite)
        .expect("database writes counted");
    assert!(
        found.load(Ordering::Relaxed) > 0,
        "the reads found messages"
    );
    assert!(
        cache.reads > 50,
        "a database 8× the cache misses: {cache:?}"
    );
    assert_eq!(
        reads.ops,
        cache.reads,
        "every page the cache read was carried and counted by the {} backend",
        backend.name()
    );
    assert_eq!(reads.bytes, cache.reads * 8192);
    assert_eq!(reads.errors, 0);
    assert_eq!(reads.latency.count(), reads.ops, "each read timed once");
    assert!(
        writes.ops > 0 && writes.errors == 0,
        "the page writer's writes are counted by its backend: {writes:?}"
    );
    let log = instance.log_counters();
    let log_writes = stats.get(1, IoClass::LogWrite).expect("log writes counted");
    assert!(log.writes > 0, "the inserts were logged: {log:?}");
    assert_eq!(
        log_writes.ops,
        log.writes,
        "every log write was carried and counted by the {} backend",
        backend.name()
    );
    assert_eq!(log_writes.bytes, log.bytes_written);
    assert_eq!(log_writes.errors, 0);
    assert_eq!(
        log_writes.latency.count(),
        log_writes.ops,
        "each write timed once"
    );
    instance.shutdown().unwrap();
}

#[test]
fn threads_backend_carries_transactional_reads_and_writes_and_log_writes() {
    run_transactions(BackendKind::Threads);
}

#[test]
fn io_uring_backend_carries_transactional_reads_and_writes_and_log_writes() {
    if let Err(e) = IoUringBackend::new(4) {
        eprintln!(
            "SKIP io_uring_backend_carries_transactional_reads_and_writes_and_log_writes: io_uring is not usable here ({e})"
        );
        return;
    }
    run_transactions(BackendKind::IoUring);
}

/// Writes records across generations (the prepared 1 MiB one, then small ones) with
/// `backend`, then reads them
/// back with `backend`: every write and read is one the backend carried and counted.
fn log_writes_and_reads(backend: BackendKind) {
    let (_tmp, dir) = log_common::new_log_dir();
    let mut config = log_common::config(&dir, log_common::SMALL_FILE);
    config.backend = backend;
    let writer = LogWriter::open(
        config,
        log_common::START,
        log_common::START,
        CheckpointState::default(),
    )
    .unwrap();
    assert_eq!(writer.backend_name(), backend.name());
    for trx in 0..300u64 {
        let end = writer
            .append(&[
                log_common::redo(trx, 0, 3000),
                log_common::redo(trx, 1, 200),
            ])
            .unwrap();
        writer.flush_to(end).unwrap();
    }
    let counters = writer.counters();
    let written = writer.stats();
    let writes = written
        .get(0, IoClass::LogWrite)
        .expect("log writes counted");
    assert!(counters.generations_rolled >= 2, "{counters:?}");
    assert_eq!(writes.ops, counters.writes, "every log write counted once");
    assert_eq!(writes.bytes, counters.bytes_written);
    assert_eq!(writes.latency.count(), writes.ops);
    writer.shutdown().unwrap();

    let mut options = LogReadOptions::new(IoClass::RecoveryRead);
    options.io_mode = edbstress_io::IoMode::Buffered;
    options.backend = backend;
    let mut reader =
        LogReader::open(&dir, log_common::START, log_common::sigs(), &options).unwrap();
    let mut records = 0;
    while reader.next_record().unwrap().is_some() {
        records += 1;
    }
    assert_eq!(records, 600, "every record read back");
    let summary = reader.summary().unwrap().clone();
    let reads = reader
        .stats()
        .get(0, IoClass::RecoveryRead)
        .expect("log reads counted");
    assert_eq!(
        reads.bytes,
        summary.bytes_read,
        "every byte the reader read was carried by the {} backend",
        backend.name()
    );
    assert!(
        reads.ops >= u64::from(summary.generations_read),
        "{reads:?}"
    );
    assert_eq!(reads.errors, 0);
}

#[test]
fn threads_backend_carries_log_writes_and_reads() {
    log_writes_and_reads(BackendKind::Threads);
}

#[test]
fn io_uring_backend_carries_log_writes_and_reads() {
    if let Err(e) = IoUringBackend::new(4) {
        eprintln!(
            "SKIP io_uring_backend_carries_log_writes_and_reads: io_uring is not usable here ({e})"
        );
        return;
    }
    log_writes_and_reads(BackendKind::IoUring);
}
