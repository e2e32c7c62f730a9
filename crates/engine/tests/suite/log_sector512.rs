//! Log streams of 512-byte segments (`LogConfig::segment_len`, the log sector of ESE
//! 2007/2010) with partial-sector writes and their shadow: written with direct I/O,
//! recorded in every file header, read back by the reader, recovery and the offline
//! log scan, and a torn tail sector recovered from its shadow.

use super::instance_common;
use super::log_common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use edbstress_engine::log::{LogConfig, LogWriter, read_log};
use edbstress_engine::{
    Durability, Instance, RecoveryOptions, TxnOp, deep_check, recover, scan_log_dir,
};
use edbstress_format::log::{
    CHECKPOINT_FILE_NAME, CheckpointState, LogFileHeader, LogPosition, LogRecord, SegmentLen,
    SegmentVerdict, verify_segment,
};
use edbstress_format::{Generation, PageSize};
use edbstress_io::{Access, DataFile, IoClass, IoMode};
use log_common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const SECTOR: usize = 512;

/// Whether direct I/O in `dir` takes 512-byte requests; says so loudly when not.
fn direct_512_possible(dir: &Path) -> bool {
    let file = DataFile::open(
        dir.join(CHECKPOINT_FILE_NAME),
        IoMode::Direct,
        Access::ReadOnly,
    )
    .unwrap();
    let ok = file.takes_direct_requests_of(SECTOR).unwrap();
    if !ok {
        eprintln!(
            "SKIPPED: direct I/O in {} does not take 512-byte requests (4 KiB logical sectors)",
            dir.display()
        );
    }
    ok
}

/// A 512-byte-segment writer with partial sectors that flushes only when asked.
fn sector_config(dir: &Path) -> LogConfig {
    let mut cfg = config(dir, SMALL_FILE);
    cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    cfg.segment_len = SegmentLen::Sector512;
    cfg.partial_tail_shadow = true;
    cfg
}

fn sector_writer(dir: &Path, start: LogPosition) -> LogWriter {
    LogWriter::open(sector_config(dir), start, START, CheckpointState::default()).unwrap()
}

fn commit(writer: &LogWriter, records: &[LogRecord]) {
    let end = writer.append(records).unwrap();
    writer.flush_to(end).unwrap();
    assert!(writer.durable() >= end);
}

#[allow(clippy::disallowed_methods)] // reads what is on disk, behind the engine's back
fn read_sector(dir: &Path, generation: u32, slot: u16) -> Vec<u8> {
    let file = std::fs::File::open(log_path(dir, generation)).unwrap();
    let mut buf = vec![0u8; SECTOR];
    file.read_exact_at(&mut buf, u64::from(slot) * SECTOR as u64)
        .unwrap();
    buf
}

#[allow(clippy::disallowed_methods)] // damages the file on purpose, behind the engine's back
fn write_sector(dir: &Path, generation: u32, slot: u16, bytes: &[u8]) {
    assert_eq!(bytes.len(), SECTOR);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(log_path(dir, generation))
        .unwrap();
    file.write_all_at(bytes, u64::from(slot) * SECTOR as u64)
        .unwrap();
    file.sync_all().unwrap();
}

/// Sector `slot` of generation 1 verified where it lies: (shadow, logical, used, seq).
fn sector_header(dir: &Path, slot: u16) -> (bool, u16, u16, u64) {
    match verify_segment(&read_sector(dir, 1, slot), Generation::new(1), slot) {
        SegmentVerdict::Valid(h) => (h.is_shadow(), h.logical_index, h.used, h.write_seq),
        other => panic!("sector {slot} is not a valid segment: {other:?}"),
    }
}

fn file_header(dir: &Path, generation: u32) -> LogFileHeader {
    let head = std::fs::read(log_path(dir, generation)).unwrap();
    LogFileHeader::decode(LogFileHeader::bytes_in(&head[..4096])).unwrap()
}

#[test]
fn a_512_byte_log_writes_partial_sectors_with_their_shadow_and_reads_back() {
    let (_tmp, dir) = new_log_dir();
    if !direct_512_possible(&dir) {
        return;
    }
    // The prepared generation holds no records: it is created again with 512-byte
    // segments.
    assert_eq!(file_header(&dir, 1).segment_len, 4096);
    let writer = sector_writer(&dir, START);
    assert_eq!(file_header(&dir, 1).segment_len, 512);
    assert_eq!(file_header(&dir, 1).segment_count(), SMALL_FILE / SECTOR);

    // A small commit: its sector and the shadow, 1 KiB in one write.
    let a = txn(1, &[100]);
    commit(&writer, &a);
    let c = writer.counters();
    assert_eq!((c.writes, c.partial_writes, c.bytes_written), (1, 1, 1024));
    let (shadow, logical, used_a, _) = sector_header(&dir, 1);
    assert!(!shadow && logical == 1 && (used_a as usize) < SECTOR - 32);
    assert_eq!(
        sector_header(&dir, 2),
        (true, 1, used_a, sector_header(&dir, 1).3)
    );

    // The next one continues the sector: rewritten, then its shadow.
    let b = txn(2, &[120]);
    commit(&writer, &b);
    let c = writer.counters();
    assert_eq!((c.writes, c.partial_writes, c.bytes_written), (3, 3, 2048));
    let (_, _, used_ab, seq_real) = sector_header(&dir, 1);
    let (shadow, _, used, seq_shadow) = sector_header(&dir, 2);
    assert!(shadow && used == used_ab && used_ab > used_a && seq_shadow > seq_real);

    // A commit spanning many sectors, then enough to roll a file: every record reads
    // back in order, across generations of 512-byte segments.
    let big = txn(3, &[3_000]);
    commit(&writer, &big);
    assert!(writer.counters().segments_written >= 6);
    let mut all: Vec<LogRecord> = a.iter().chain(&b).chain(&big).cloned().collect();
    for trx in 4..40 {
        let t = txn(trx, &[1_900]);
        commit(&writer, &t);
        all.extend(t);
    }
    assert!(writer.counters().generations_rolled > 0);
    writer.shutdown().unwrap();
    assert_records(&read_all(&dir), &all);
    assert_eq!(file_header(&dir, 2).segment_len, 512);

    // The offline scan reads each file in its header's segments: nothing damaged.
    let report = scan_log_dir(&dir, IoMode::Direct, None).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.bad_segments, 0);
    let files = generations(&dir).len() as u64;
    assert_eq!(report.segments_seen, files * (SMALL_FILE / SECTOR) as u64);
}

#[test]
fn a_torn_512_byte_tail_sector_is_recovered_from_its_shadow() {
    for case in ["sector torn", "shadow torn", "sector lost"] {
        let (_tmp, dir) = new_log_dir();
        if !direct_512_possible(&dir) {
            return;
        }
        let writer = sector_writer(&dir, START);
        let a = txn(1, &[60]);
        let b = txn(2, &[80]);
        commit(&writer, &a);
        commit(&writer, &b);
        let (real_ab, shadow_ab) = (read_sector(&dir, 1, 1), read_sector(&dir, 1, 2));
        let c = txn(3, &[90]);
        commit(&writer, &c);
        let (real_abc, shadow_abc) = (read_sector(&dir, 1, 1), read_sector(&dir, 1, 2));
        assert_eq!(writer.counters().segments_written, 0, "all in sector 1");
        writer.abandon();
        let ab: Vec<LogRecord> = a.iter().chain(&b).cloned().collect();
        let abc: Vec<LogRecord> = ab.iter().chain(&c).cloned().collect();
        assert_records(&read_all(&dir), &abc);

        // The power went during C's write: the sector's rewrite half done (its first
        // 256 bytes new) or lost, with the shadow still holding A and B; or the
        // sector written and the shadow's rewrite half done.
        let half = |new: &[u8], old: &[u8]| {
            let mut out = old.to_vec();
            out[..256].copy_from_slice(&new[..256]);
            out
        };
        let expected = match case {
            "sector torn" => {
                write_sector(&dir, 1, 1, &half(&real_abc, &real_ab));
                write_sector(&dir, 1, 2, &shadow_ab);
                &ab
            }
            "sector lost" => {
                write_sector(&dir, 1, 1, &real_ab);
                write_sector(&dir, 1, 2, &shadow_ab);
                &ab
            }
            _ => {
                write_sector(&dir, 1, 2, &half(&shadow_abc, &shadow_ab));
                &abc
            }
        };
        let scan = read_all(&dir);
        assert_records(&scan, expected);
        assert_eq!(scan.summary.torn_tail, case != "sector lost", "{case}");

        // Writing continues after the surviving records and the log reads back whole.
        let writer = sector_writer(&dir, scan.summary.end_of_log);
        let d = txn(4, &[2_500]);
        commit(&writer, &d);
        writer.shutdown().unwrap();
        let scan = read_all(&dir);
        let all: Vec<LogRecord> = expected.iter().chain(&d).cloned().collect();
        assert_records(&scan, &all);
        assert!(!scan.summary.torn_tail, "{case}");
    }
}

#[test]
fn concurrent_committers_on_a_512_byte_log_lose_nothing_acknowledged() {
    for split in [false, true] {
        let (_tmp, dir) = new_log_dir();
        if !direct_512_possible(&dir) {
            return;
        }
        let mut cfg = sector_config(&dir);
        cfg.lazy_flush_interval = Some(Duration::from_millis(5));
        cfg.split_tail_write = split;
        let writer =
            Arc::new(LogWriter::open(cfg, START, START, CheckpointState::default()).unwrap());
        let acknowledged =
            commit_concurrently(&writer, 6, 40, 11, 3, |rng| match rng.random_range(0..10) {
                0..7 => rng.random_range(20..400),
                7..9 => rng.random_range(400..3_000),
                _ => rng.random_range(3_000..12_000),
            });
        let counters = writer.counters();
        assert!(counters.partial_writes > 0, "{counters:?}");
        assert!(counters.generations_rolled > 0, "{counters:?}");
        Arc::try_unwrap(writer).unwrap().abandon();
        let scan = read_log(&dir, START, sigs(), IoClass::LogRead).unwrap();
        assert_ordered(&scan);
        assert_acknowledged_present(&records_of(&scan), &acknowledged);
    }
}

#[test]
fn an_instance_on_512_byte_log_sectors_recovers_every_acknowledged_commit() {
    let dir = tempfile::tempdir().unwrap();
    let layout = instance_common::prepare_small(dir.path(), PageSize::K8, 4 << 20, 4, 43);
    let mut config = instance_common::buffered_config(&layout);
    config.log_segment_len = SegmentLen::Sector512;
    config.partial_tail_shadow = true;
    config.cache_min_bytes = 2 << 20;
    config.cache_max_bytes = 2 << 20;
    let instance = Instance::open(config.clone()).unwrap();
    let mut rng = SmallRng::seed_from_u64(43);
    let mut written = Vec::new();
    for _ in 0..20 {
        instance_common::insert_incompressible(&instance, &mut rng, &mut written);
    }
    for i in 0..3u8 {
        let body = vec![i; 60];
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
    assert_eq!(
        file_header(&layout.log_dir, generation.get()).segment_len,
        512
    );
    let shadow = read_sector(&layout.log_dir, generation.get(), k + 1);
    match verify_segment(&shadow, generation, k + 1) {
        SegmentVerdict::Valid(h) => assert!(h.is_shadow() && h.logical_index == k),
        other => panic!("no shadow of the tail sector {k}: {other:?}"),
    }
    // The power went during the next rewrite of the tail sector: garbage after its
    // first 128 bytes.
    let mut real = read_sector(&layout.log_dir, generation.get(), k);
    for b in &mut real[128..] {
        *b = rng.random();
    }
    write_sector(&layout.log_dir, generation.get(), k, &real);

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
    let scan = scan_log_dir(&layout.log_dir, IoMode::Buffered, None).unwrap();
    assert_eq!(scan.wrong_position_segments, 0, "{:?}", scan.problems);
}

#[test]
fn a_log_with_records_keeps_its_segment_length_when_reopened_with_another() {
    let (_tmp, dir) = new_log_dir();
    if !direct_512_possible(&dir) {
        return;
    }
    // A 4 KiB stream with records in it, reopened by a 512-byte writer: it continues
    // in 4 KiB segments, new generations included.
    let mut page_cfg = config(&dir, SMALL_FILE);
    page_cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    let writer = LogWriter::open(page_cfg, START, START, CheckpointState::default()).unwrap();
    let a = txn(1, &[500]);
    commit(&writer, &a);
    writer.shutdown().unwrap();
    let end = read_all(&dir).summary.end_of_log;
    let writer = sector_writer(&dir, end);
    let mut all = a.clone();
    // (The prepared generation is 1 MiB: fill it and roll.)
    for trx in 2..32 {
        let t = txn(trx, &[20_000, 20_000]);
        commit(&writer, &t);
        all.extend(t);
    }
    assert!(writer.counters().generations_rolled > 0);
    writer.shutdown().unwrap();
    for generation in generations(&dir) {
        assert_eq!(file_header(&dir, generation).segment_len, 4096);
    }
    assert_records(&read_all(&dir), &all);
}
