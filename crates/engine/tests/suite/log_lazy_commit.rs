//! ESE's lazy commit: without a durability delay (`lazy_flush_interval: None`, the
//! default) lazily committed records wait in the log buffer, and the buffer is written
//! only when a durable commit waits, when half of it is ready (a capacity write) or when
//! a generation's last segment is ready (a new generation).

use super::log_common;

use std::time::{Duration, Instant};

use edbstress_engine::log::{LogConfig, LogWriter};
use edbstress_format::log::{CheckpointState, DEFAULT_LOG_FILE_LEN};
use log_common::*;

fn ese_config(dir: &std::path::Path, file_len: usize, buffer_len: usize) -> LogConfig {
    let mut cfg = config(dir, file_len);
    cfg.lazy_flush_interval = None;
    cfg.buffer_len = buffer_len;
    cfg
}

/// Waits up to 5 s for `done`; false if it never held.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn lazy_commits_wait_in_the_buffer_until_a_durable_commit() {
    let (_tmp, dir) = new_log_dir();
    let cfg = ese_config(&dir, DEFAULT_LOG_FILE_LEN, 9000 * 512);
    let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
    let lazy_end = writer.append(&txn(1, &[300, 2_000])).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        writer.durable() < lazy_end,
        "a lazy commit was written alone"
    );
    assert_eq!(
        writer.counters().flush_batches,
        0,
        "{:?}",
        writer.counters()
    );
    // A durable commit's write takes the lazy one with it: one write for both.
    let durable_end = writer.append(&txn(2, &[300])).unwrap();
    writer.flush_to(durable_end).unwrap();
    assert!(writer.durable() >= lazy_end);
    let c = writer.counters();
    assert_eq!(
        (c.writes, c.commit_flushes, c.lazy_flushes),
        (1, 1, 0),
        "{c:?}"
    );
    writer.abandon();
    let mut expected = txn(1, &[300, 2_000]);
    expected.extend(txn(2, &[300]));
    assert_records(&read_all(&dir), &expected);
}

#[test]
fn half_a_ready_buffer_is_written_without_a_commit_waiting() {
    let (_tmp, dir) = new_log_dir();
    // 32 segments of buffer: the 16th ready segment starts a capacity write.
    let cfg = ese_config(&dir, DEFAULT_LOG_FILE_LEN, 32 * 4096);
    let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
    let mut trx = 0;
    let mut end = writer.append(&txn(trx, &[1_000])).unwrap();
    // Under half: nothing is written.
    while end.segment < 14 {
        trx += 1;
        end = writer.append(&txn(trx, &[1_000])).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        writer.counters().flush_batches,
        0,
        "{:?}",
        writer.counters()
    );
    while end.segment < 20 {
        trx += 1;
        end = writer.append(&txn(trx, &[1_000])).unwrap();
    }
    assert!(
        eventually(|| writer.durable().segment >= 16),
        "durable to {}: {:?}",
        writer.durable(),
        writer.counters()
    );
    let c = writer.counters();
    assert!(c.capacity_flushes >= 1, "{c:?}");
    assert_eq!((c.commit_flushes, c.lazy_flushes), (0, 0), "{c:?}");
    writer.abandon();
}

#[test]
fn a_finished_generation_is_written_without_a_commit_waiting() {
    let (_tmp, dir) = new_log_dir();
    // A buffer larger than the file (15 data segments): only the new generation writes.
    let cfg = ese_config(&dir, SMALL_FILE, 9000 * 512);
    let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
    let mut trx = 0;
    let mut end = writer.append(&txn(trx, &[1_000])).unwrap();
    while end.generation.get() == 1 {
        trx += 1;
        end = writer.append(&txn(trx, &[1_000])).unwrap();
    }
    assert!(
        eventually(|| writer.durable().generation.get() >= 2),
        "generation 1 never written: {:?}",
        writer.counters()
    );
    let c = writer.counters();
    assert!(c.generation_flushes >= 1, "{c:?}");
    assert_eq!(
        (c.commit_flushes, c.lazy_flushes, c.capacity_flushes),
        (0, 0, 0),
        "{c:?}"
    );
    // A lazy commit after that write stays in the buffer.
    let later = writer.append(&txn(trx + 1, &[1_000])).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        writer.durable() < later,
        "durable {} end {later}",
        writer.durable()
    );
    writer.abandon();
}

#[test]
fn a_zero_delay_writes_each_lazy_commit_at_once_without_the_committer_waiting() {
    let (_tmp, dir) = new_log_dir();
    let mut cfg = ese_config(&dir, DEFAULT_LOG_FILE_LEN, 9000 * 512);
    cfg.lazy_flush_interval = Some(Duration::ZERO);
    let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
    for trx in 0..5u64 {
        let end = writer.append(&txn(trx, &[300])).unwrap();
        assert!(
            eventually(|| writer.durable() >= end),
            "lazy commit {trx} never written: {:?}",
            writer.counters()
        );
    }
    let c = writer.counters();
    assert_eq!(
        (c.lazy_flushes, c.commit_flushes, c.flush_waits),
        (5, 0, 0),
        "{c:?}"
    );
    writer.abandon();
}
