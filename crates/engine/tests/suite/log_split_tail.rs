//! The log writer's split tail write (`LogConfig::split_tail_write`, the exchange2007
//! and exchange2010 profiles): a flush writes its closed segments first and the
//! partially filled tail in a second write, only when something still needs the tail.
//! Each write still puts closed segments into slots that held nothing, so what is
//! acknowledged survives an abandon and reads back in order.

use super::log_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use edbstress_engine::log::{LogWriter, read_log};
use edbstress_format::log::{CheckpointState, LogRecord, SEGMENT_LEN};
use edbstress_io::IoClass;
use log_common::*;
use rand::Rng;

fn split_config(dir: &std::path::Path, lazy: Duration) -> edbstress_engine::log::LogConfig {
    let mut cfg = config(dir, SMALL_FILE);
    cfg.lazy_flush_interval = Some(lazy);
    cfg.split_tail_write = true;
    cfg
}

/// A transaction of ~6 KB: it closes one segment and ends in the next.
fn two_segment_txn(trx: u64) -> Vec<LogRecord> {
    txn(trx, &[6_000])
}

#[test]
fn a_commit_in_the_tail_gets_the_closed_segments_then_the_tail() {
    for split in [false, true] {
        let (_tmp, dir) = new_log_dir();
        let mut cfg = split_config(&dir, Duration::from_secs(60));
        cfg.split_tail_write = split;
        let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
        let end = writer.append(&two_segment_txn(1)).unwrap();
        writer.flush_to(end).unwrap();
        assert!(writer.durable() >= end);
        let c = writer.counters();
        // Off: one write of both segments. On: the closed segment, then the tail.
        let writes = if split { 2 } else { 1 };
        assert_eq!(c.writes, writes, "split {split}: {c:?}");
        assert_eq!(c.fsyncs, writes);
        assert_eq!(c.tail_deferrals, writes - 1);
        assert_eq!(c.segments_written, 2, "no segment is written twice");
        assert_eq!(c.bytes_written, 2 * SEGMENT_LEN as u64);
        let stats = writer.stats();
        let log_writes = stats.get(0, IoClass::LogWrite).unwrap();
        assert_eq!(log_writes.ops, writes);

        // A commit that fits in a fresh segment has no closed segment to go first.
        let end = writer.append(&txn(2, &[300])).unwrap();
        writer.flush_to(end).unwrap();
        let c = writer.counters();
        assert_eq!(c.writes, writes + 1);
        assert_eq!(c.tail_deferrals, writes - 1);
        writer.shutdown().unwrap();
        let mut expected = two_segment_txn(1);
        expected.extend(txn(2, &[300]));
        assert_records(&read_all(&dir), &expected);
    }
}

#[test]
fn a_commit_in_the_closed_segments_leaves_the_tail_in_the_buffer() {
    let (_tmp, dir) = new_log_dir();
    let cfg = split_config(&dir, Duration::from_secs(60));
    let writer = LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap();
    // A ends in segment 1; B starts there, closes it and ends in segment 2.
    let end_a = writer.append(&txn(1, &[3_800])).unwrap();
    let end_b = writer.append(&txn(2, &[3_000])).unwrap();
    assert_eq!(end_a.segment, 1);
    assert_eq!(end_b.segment, 2);
    writer.flush_to(end_a).unwrap();
    assert!(writer.durable() >= end_a);
    assert!(
        writer.durable() < end_b,
        "the tail was written with nobody waiting"
    );
    let c = writer.counters();
    assert_eq!((c.writes, c.tail_deferrals, c.segments_written), (1, 1, 1));

    // B's commit asks for the tail: one more write, of the tail alone.
    writer.flush_to(end_b).unwrap();
    let c = writer.counters();
    assert_eq!((c.writes, c.segments_written), (2, 2));
    writer.shutdown().unwrap();
    let mut expected = txn(1, &[3_800]);
    expected.extend(txn(2, &[3_000]));
    assert_records(&read_all(&dir), &expected);
}

#[test]
fn a_lazy_tail_is_written_when_its_records_are_due_not_an_interval_later() {
    let (_tmp, dir) = new_log_dir();
    let lazy = Duration::from_millis(300);
    let writer = LogWriter::open(
        split_config(&dir, lazy),
        START,
        START,
        CheckpointState::default(),
    )
    .unwrap();
    let before = Instant::now();
    let end = writer.append(&two_segment_txn(1)).unwrap();
    while writer.durable() < end {
        assert!(before.elapsed() < Duration::from_secs(10), "never flushed");
        std::thread::sleep(Duration::from_millis(1));
    }
    let c = writer.counters();
    // Both rounds were the timer's: the tail kept its records' age.
    assert_eq!((c.writes, c.lazy_flushes, c.tail_deferrals), (2, 2, 1));
    assert_eq!(c.commit_flushes, 0);
    writer.abandon();
    assert_records(&read_all(&dir), &two_segment_txn(1));
}

#[test]
fn concurrent_committers_with_split_writes_lose_nothing_acknowledged() {
    let (_tmp, dir) = new_log_dir();
    let cfg = split_config(&dir, Duration::from_millis(5));
    let writer = Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
    // Durable commits wait; lazy ones (every third) do not.
    let acknowledged =
        commit_concurrently(&writer, 6, 60, 0, 3, |rng| match rng.random_range(0..10) {
            0..5 => rng.random_range(50..1_500),
            5..9 => rng.random_range(1_500..9_000),
            _ => rng.random_range(9_000..20_000),
        });
    let counters = writer.counters();
    assert!(counters.tail_deferrals > 0, "{counters:?}");
    assert!(counters.generations_rolled > 0, "{counters:?}");
    // A crash: whatever was not written is lost, nothing acknowledged is.
    Arc::try_unwrap(writer).unwrap().abandon();
    let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
    assert_ordered(&scan);
    assert_acknowledged_present(&records_of(&scan), &acknowledged);
}
