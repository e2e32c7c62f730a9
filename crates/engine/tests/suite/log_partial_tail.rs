//! The log writer's partial-tail writes (`LogConfig::partial_tail_shadow`): a write
//! that ends inside a segment writes it partially filled with a shadow copy in the
//! next slot, the next records continue in it, and the next write rewrites it first.
//! A torn rewrite of the segment or of its shadow keeps every acknowledged commit:
//! the reader takes the valid copy written last.

use super::instance_common;
use super::log_common;

use std::sync::Arc;
use std::time::Duration;

use edbstress_engine::log::{LogConfig, LogWriter, read_log};
use edbstress_engine::{Durability, Instance, RecoveryOptions, TxnOp, deep_check, recover};
use edbstress_format::Generation;
use edbstress_format::PageSize;
use edbstress_format::log::{
    CheckpointState, LogPosition, LogRecord, SEGMENT_LEN, SegmentVerdict, verify_segment,
};
use edbstress_io::{IoClass, IoMode};
use log_common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A writer with partial tails that flushes only when asked.
fn partial_config(dir: &std::path::Path) -> LogConfig {
    let mut cfg = config(dir, SMALL_FILE);
    cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    cfg.partial_tail_shadow = true;
    cfg
}

fn partial_writer(dir: &std::path::Path, start: LogPosition) -> LogWriter {
    LogWriter::open(
        partial_config(dir),
        start,
        START,
        CheckpointState::default(),
    )
    .unwrap()
}

fn commit(writer: &LogWriter, records: &[LogRecord]) {
    let end = writer.append(records).unwrap();
    writer.flush_to(end).unwrap();
    assert!(writer.durable() >= end);
}

/// Slot `slot` of generation 1 verified where it lies: (is it a shadow, its logical
/// segment, its used bytes, its write sequence).
fn slot_header(dir: &std::path::Path, slot: u16) -> (bool, u16, u16, u64) {
    match verify_segment(&read_slot(dir, 1, slot), Generation::new(1), slot) {
        SegmentVerdict::Valid(h) => (h.is_shadow(), h.logical_index, h.used, h.write_seq),
        other => panic!("slot {slot} is not a valid segment: {other:?}"),
    }
}

#[test]
fn a_partial_tail_is_written_with_its_shadow_and_continued() {
    let (_tmp, dir) = new_log_dir();
    let writer = partial_writer(&dir, START);
    let seg = SEGMENT_LEN as u64;

    // A fresh segment: the segment and its shadow in one write of two slots.
    let a = txn(1, &[300]);
    commit(&writer, &a);
    let c = writer.counters();
    assert_eq!(
        (c.writes, c.partial_writes, c.bytes_written),
        (1, 1, 2 * seg)
    );
    let (shadow, logical, used_a, _) = slot_header(&dir, 1);
    assert!(!shadow && logical == 1);
    assert!((used_a as usize) < 4064, "the segment stays open: {used_a}");
    let (shadow, logical, used, _) = slot_header(&dir, 2);
    assert!(
        shadow && logical == 1 && used == used_a,
        "slot 2 is the shadow"
    );

    // The next commit continues in the same segment: rewritten in its own slot, then
    // in the shadow slot, two writes.
    let b = txn(2, &[500]);
    commit(&writer, &b);
    let c = writer.counters();
    assert_eq!(
        (c.writes, c.partial_writes, c.bytes_written),
        (3, 3, 4 * seg)
    );
    let (_, _, used_ab, seq_real) = slot_header(&dir, 1);
    let (shadow, _, used, seq_shadow) = slot_header(&dir, 2);
    assert!(shadow && used == used_ab && used_ab > used_a);
    assert!(
        seq_shadow > seq_real,
        "the shadow is written after the segment"
    );

    // A commit that fills the segment: its final version alone, then the next
    // segment (over the old shadow) and its shadow in one write.
    let big = txn(3, &[6_000]);
    commit(&writer, &big);
    let c = writer.counters();
    assert_eq!((c.writes, c.partial_writes), (5, 4), "{c:?}");
    assert_eq!(c.segments_written, 1, "segment 1 is final");
    let (shadow, logical, used_2, _) = slot_header(&dir, 2);
    assert!(!shadow && logical == 2 && (used_2 as usize) < 4064);
    let (shadow, logical, used, _) = slot_header(&dir, 3);
    assert!(shadow && logical == 2 && used == used_2);

    writer.shutdown().unwrap();
    let expected: Vec<LogRecord> = a.iter().chain(&b).chain(&big).cloned().collect();
    assert_records(&read_all(&dir), &expected);
}

#[test]
fn a_torn_rewrite_of_the_tail_recovers_every_acknowledged_commit_from_its_shadow() {
    for case in ["segment torn", "shadow torn", "segment lost"] {
        let (_tmp, dir) = new_log_dir();
        let writer = partial_writer(&dir, START);
        let a = txn(1, &[300]);
        let b = txn(2, &[500]);
        commit(&writer, &a);
        commit(&writer, &b);
        let (real_ab, shadow_ab) = (read_slot(&dir, 1, 1), read_slot(&dir, 1, 2));
        // (Big enough that a torn rewrite differs from the whole one.)
        let c = txn(3, &[2_000]);
        commit(&writer, &c);
        let (real_abc, shadow_abc) = (read_slot(&dir, 1, 1), read_slot(&dir, 1, 2));
        writer.abandon();
        let ab: Vec<LogRecord> = a.iter().chain(&b).cloned().collect();
        let abc: Vec<LogRecord> = ab.iter().chain(&c).cloned().collect();
        assert_records(&read_all(&dir), &abc);

        // The power went during C's write. Its first write (the segment's own slot)
        // tore or never reached the disk, and the shadow still holds A and B; or
        // the segment was written and the shadow's rewrite tore.
        let expected = match case {
            "segment torn" => {
                write_slot(&dir, 1, 1, &torn(&real_abc, &real_ab, 2));
                write_slot(&dir, 1, 2, &shadow_ab);
                &ab
            }
            "segment lost" => {
                write_slot(&dir, 1, 1, &real_ab);
                write_slot(&dir, 1, 2, &shadow_ab);
                &ab
            }
            _ => {
                write_slot(&dir, 1, 2, &torn(&shadow_abc, &shadow_ab, 1));
                &abc
            }
        };
        let scan = read_all(&dir);
        assert_records(&scan, expected);
        assert_eq!(scan.summary.torn_tail, case != "segment lost", "{case}");

        // Writing continues after the surviving records, and the log reads back
        // whole.
        let writer = partial_writer(&dir, scan.summary.end_of_log);
        let d = txn(4, &[7_000]);
        commit(&writer, &d);
        writer.shutdown().unwrap();
        let scan = read_all(&dir);
        let all: Vec<LogRecord> = expected.iter().chain(&d).cloned().collect();
        assert_records(&scan, &all);
        assert!(!scan.summary.torn_tail, "{case}");
    }
}

#[test]
fn concurrent_committers_with_partial_tails_lose_nothing_acknowledged() {
    for split in [false, true] {
        let (_tmp, dir) = new_log_dir();
        let mut cfg = partial_config(&dir);
        cfg.lazy_flush_interval = Some(Duration::from_millis(5));
        cfg.split_tail_write = split;
        let writer =
            Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
        let acknowledged =
            commit_concurrently(&writer, 6, 60, 7, 3, |rng| match rng.random_range(0..10) {
                0..6 => rng.random_range(50..1_500),
                6..9 => rng.random_range(1_500..9_000),
                _ => rng.random_range(9_000..20_000),
            });
        let counters = writer.counters();
        assert!(counters.partial_writes > 0, "{counters:?}");
        assert!(counters.generations_rolled > 0, "{counters:?}");
        // A crash: whatever was not written is lost, nothing acknowledged is.
        Arc::try_unwrap(writer).unwrap().abandon();
        let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
        assert_ordered(&scan);
        assert_acknowledged_present(&records_of(&scan), &acknowledged);
    }
}

#[test]
fn recovery_after_a_torn_tail_segment_keeps_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 4 << 20, 4, 41);
    let mut config = instance_common::buffered_config(&layout);
    config.partial_tail_shadow = true;
    config.cache_min_bytes = 2 << 20;
    config.cache_max_bytes = 2 << 20;
    let instance = Instance::open(config.clone()).unwrap();
    let mut rng = SmallRng::seed_from_u64(41);
    let mut written = Vec::new();
    for _ in 0..20 {
        instance_common::insert_incompressible(&instance, &mut rng, &mut written);
    }
    // Small durable commits last: the log ends inside a segment with its shadow.
    for i in 0..3u8 {
        let body = vec![i; 300];
        let out = instance
            .commit(
                &[TxnOp::Insert {
                    mailbox: 1,
                    props: b"tail",
                    body: &body,
                }],
                Durability::Durable,
            )
            .unwrap();
        written.push((out.inserted[0], body));
    }
    let end = instance.crash();
    let (generation, k) = (end.generation, end.segment);
    let shadow = read_slot(&layout.log_dir, generation.get(), k + 1);
    match verify_segment(&shadow, generation, k + 1) {
        SegmentVerdict::Valid(h) => assert!(h.is_shadow() && h.logical_index == k),
        other => panic!("no shadow of the tail segment {k}: {other:?}"),
    }
    // The power went during the next rewrite of the tail segment: its first sectors
    // new, the rest garbage.
    let real = read_slot(&layout.log_dir, generation.get(), k);
    let garbage: Vec<u8> = (0..SEGMENT_LEN).map(|_| rng.random()).collect();
    write_slot(
        &layout.log_dir,
        generation.get(),
        k,
        &torn(&real, &garbage, 1),
    );

    let options = RecoveryOptions {
        io_mode: IoMode::Buffered,
        ..RecoveryOptions::default()
    };
    let report = recover(&layout, &options).unwrap();
    assert!(report.succeeded(), "{report:?}");
    let check = deep_check(&layout.db_file, IoMode::Buffered).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
    let instance = Instance::open(config).unwrap();
    for (key, body) in &written {
        let m = instance.read(*key, true).unwrap().expect("commit survives");
        assert_eq!(m.body.as_ref(), Some(body));
    }
    instance.shutdown().unwrap();
}
