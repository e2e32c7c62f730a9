//! Transaction log reader on damaged logs: torn tail writes keep every acknowledged
//! commit, damage in the middle, lost writes, missing generations and foreign files
//! are errors naming the file and segment.

use super::log_common;

use edbstress_format::Generation;
use edbstress_format::log::CheckpointState;
use std::time::Duration;

use edbstress_engine::EngineError;
use edbstress_engine::log::{LogConfig, LogScan, LogSignatures, LogWriter, read_log};
use edbstress_format::log::{
    LogPosition, LogRecord, SEGMENT_LEN, SegmentHeader, encode_segment, segment_flags,
};
use edbstress_io::IoClass;
use log_common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The configuration of a writer that flushes only when asked.
fn quiet_config(dir: &std::path::Path) -> LogConfig {
    let mut cfg = config(dir, SMALL_FILE);
    cfg.lazy_flush_interval = Some(Duration::from_secs(60));
    cfg
}

/// A writer that flushes only when asked.
fn quiet_writer(dir: &std::path::Path, start: LogPosition) -> LogWriter {
    LogWriter::open(quiet_config(dir), start, START, CheckpointState::default()).unwrap()
}

/// Reopens the log at `end`, commits one more transaction and reads the whole log
/// back, which must hold `before` and then that transaction.
fn reopen_and_append(dir: &std::path::Path, end: LogPosition, before: Vec<LogRecord>) -> LogScan {
    let writer = quiet_writer(dir, end);
    let more = txn(1_000_000, &[2_000]);
    commit(&writer, &more);
    writer.shutdown().unwrap();
    let scan = read_all(dir);
    let mut expected = before;
    expected.extend(more);
    assert_records(&scan, &expected);
    scan
}

fn commit(writer: &LogWriter, records: &[LogRecord]) {
    let end = writer.append(records).unwrap();
    writer.flush_to(end).unwrap();
}

#[test]
fn log_torn_write_of_the_tail_keeps_acknowledged_commits() {
    for case in ["write of C torn", "write of C lost"] {
        let (_tmp, dir) = new_log_dir();
        let writer = quiet_writer(&dir, START);
        // Each write closes its tail segment: a small commit is one 4 KiB segment,
        // written once, and the next commit starts in the next segment.
        let a = txn(1, &[300]);
        let before = writer.counters();
        commit(&writer, &a);
        let after = writer.counters();
        assert_eq!(after.writes - before.writes, 1);
        assert_eq!(
            after.bytes_written - before.bytes_written,
            SEGMENT_LEN as u64
        );
        let real_a = read_slot(&dir, 1, 1);
        assert_eq!(
            read_slot(&dir, 1, 2),
            vec![0u8; SEGMENT_LEN],
            "no shadow copy"
        );
        let b = txn(2, &[500]);
        commit(&writer, &b);
        assert_eq!(
            read_slot(&dir, 1, 1),
            real_a,
            "a durable segment was rewritten"
        );
        let real_b = read_slot(&dir, 1, 2);
        // (Big enough that a torn write of it differs from the whole one.)
        let c = txn(3, &[2_000]);
        commit(&writer, &c);
        assert_eq!(
            read_slot(&dir, 1, 2),
            real_b,
            "a durable segment was rewritten"
        );
        let real_c = read_slot(&dir, 1, 3);
        writer.abandon();
        let ab: Vec<LogRecord> = a.iter().chain(&b).cloned().collect();
        let abc: Vec<LogRecord> = ab.iter().chain(&c).cloned().collect();
        assert_records(&read_all(&dir), &abc);

        // The last write tore or never reached the disk: the commits acknowledged
        // before it are all there.
        let zero = vec![0u8; SEGMENT_LEN];
        if case == "write of C torn" {
            write_slot(&dir, 1, 3, &torn(&real_c, &zero, 1));
        } else {
            write_slot(&dir, 1, 3, &zero);
        }
        let scan = read_all(&dir);
        assert_records(&scan, &ab);
        assert_eq!(scan.summary.torn_tail, case == "write of C torn", "{case}");

        // Writing continues after the surviving records.
        let writer = quiet_writer(&dir, scan.summary.end_of_log);
        let d = txn(4, &[7_000]);
        commit(&writer, &d);
        writer.shutdown().unwrap();
        let scan = read_all(&dir);
        let all: Vec<LogRecord> = ab.iter().chain(&d).cloned().collect();
        assert_records(&scan, &all);
        assert!(!scan.summary.torn_tail, "{case}");
    }
}

#[test]
fn log_torn_write_of_several_segments_keeps_acknowledged_commits() {
    let (_tmp, dir) = new_log_dir();
    let writer = quiet_writer(&dir, START);
    let a = txn(1, &[300]);
    commit(&writer, &a);
    let counters = writer.counters();
    // Segments 2.. in one write: the closed segment 1 is never touched again.
    let b = txn(2, &[9_000, 5_000]);
    commit(&writer, &b);
    let after = writer.counters();
    assert_eq!(after.writes - counters.writes, 1);
    writer.abandon();

    // Crash during that write: slot 4 never written, the others were. Every record of
    // `a` is there; the remains of the interrupted write are a torn tail, not damage.
    write_slot(&dir, 1, 4, &vec![0u8; SEGMENT_LEN]);
    let scan = read_all(&dir);
    let got = records_of(&scan);
    assert!(got.starts_with(&a), "lost acknowledged records: {got:?}");
    assert!(scan.summary.torn_tail);
    assert!(scan.summary.segments_after_end > 0);
    // The big record of `b` did not survive whole: it was dropped, and the log ends
    // after the last complete record.
    assert!(scan.summary.dropped_record.is_some());
    assert_eq!(scan.summary.end_of_log, scan.records.last().unwrap().end);

    // The writer truncates the partial record and continues.
    let writer = quiet_writer(&dir, scan.summary.end_of_log);
    let c = txn(3, &[100]);
    commit(&writer, &c);
    writer.shutdown().unwrap();
    let scan = read_all(&dir);
    let mut expected = got.clone();
    expected.extend(c);
    assert_records(&scan, &expected);
    assert!(!scan.summary.torn_tail);
    assert_ordered(&scan);
}

/// A log of several generations written by many flushes.
fn busy_log(dir: &std::path::Path) -> Vec<LogRecord> {
    let writer = quiet_writer(dir, START);
    let mut all = Vec::new();
    for trx in 0..400u64 {
        let records = txn(trx, &[(trx as usize * 997) % 6_000]);
        commit(&writer, &records);
        all.extend(records);
    }
    writer.shutdown().unwrap();
    all
}

#[test]
fn log_damage_in_the_middle_is_an_error_naming_file_and_segment() {
    let (_tmp, dir) = new_log_dir();
    let all = busy_log(&dir);
    assert!(generations(&dir).len() >= 3);
    let good = read_slot(&dir, 1, 100);
    let mut bad = good.clone();
    bad[1000..1100].fill(0xA5);
    write_slot(&dir, 1, 100, &bad);
    match read_log(&dir, START, sigs(), IoClass::RecoveryRead) {
        Err(EngineError::CorruptLog {
            file,
            segment,
            what,
        }) => {
            assert_eq!(file, log_path(&dir, 1));
            assert_eq!(segment, 100, "{what}");
        }
        other => panic!("expected a corrupt-log error, got {other:?}"),
    }
    // Zeroed (a lost write of a whole segment) is no better.
    write_slot(&dir, 1, 100, &vec![0u8; SEGMENT_LEN]);
    assert!(matches!(
        read_log(&dir, START, sigs(), IoClass::RecoveryRead),
        Err(EngineError::CorruptLog { segment: 100, .. })
    ));

    // A single flipped bit is corrected in memory and reported.
    let mut flipped = good.clone();
    flipped[2000] ^= 0x10;
    write_slot(&dir, 1, 100, &flipped);
    let scan = read_all(&dir);
    assert_records(&scan, &all);
    assert_eq!(scan.summary.corrected.len(), 1);
    assert_eq!(scan.summary.corrected[0].slot, 100);
    assert_eq!(scan.summary.corrected[0].bit, 2000 * 8 + 4);
    assert!(!scan.summary.torn_tail);
}

#[test]
fn log_lost_write_of_a_completed_segment_is_detected() {
    let (_tmp, dir) = new_log_dir();
    let writer = quiet_writer(&dir, START);
    for trx in 1..40 {
        commit(&writer, &txn(trx, &[1_500]));
    }
    writer.shutdown().unwrap();
    // The write of segment 2 never reached the disk, later writes did.
    write_slot(&dir, 1, 2, &vec![0u8; SEGMENT_LEN]);
    match read_log(&dir, START, sigs(), IoClass::RecoveryRead) {
        Err(EngineError::CorruptLog { file, segment, .. }) => {
            assert_eq!(file, log_path(&dir, 1));
            assert_eq!(segment, 2);
        }
        other => panic!("expected a corrupt-log error, got {other:?}"),
    }
}

#[test]
fn log_missing_generation_in_the_middle_is_an_error() {
    let (_tmp, dir) = new_log_dir();
    busy_log(&dir);
    let present = generations(&dir);
    assert!(present.len() >= 3);
    let middle = present[present.len() / 2];
    std::fs::remove_file(log_path(&dir, middle)).unwrap();
    match read_log(&dir, START, sigs(), IoClass::RecoveryRead) {
        Err(EngineError::CorruptLog { file, .. }) => assert_eq!(file, log_path(&dir, middle)),
        other => panic!("expected a corrupt-log error, got {other:?}"),
    }
    // The last generation missing is just a shorter log... only if nothing follows
    // it; a replaced generation breaks the running checksum.
    let last = *present.last().unwrap();
    let before_last = present[present.len() - 2];
    if before_last != middle {
        std::fs::copy(log_path(&dir, last), log_path(&dir, middle)).unwrap();
        assert!(matches!(
            read_log(&dir, START, sigs(), IoClass::RecoveryRead),
            Err(EngineError::CorruptLog { .. })
        ));
    }
}

#[test]
fn log_of_another_database_is_refused() {
    let (_tmp, dir) = new_log_dir();
    busy_log(&dir);
    let wrong = LogSignatures {
        log_signature: LOG_SIG,
        db_signature: DB_SIG ^ 1,
    };
    assert!(matches!(
        read_log(&dir, START, wrong, IoClass::RecoveryRead),
        Err(EngineError::Mismatch { .. })
    ));
    let mut cfg = config(&dir, SMALL_FILE);
    cfg.log_signature ^= 1;
    let end = read_all(&dir).summary.end_of_log;
    assert!(matches!(
        LogWriter::open(cfg, end, START, CheckpointState::default()),
        Err(EngineError::Mismatch { .. })
    ));
}

#[test]
fn log_reader_iterates_lazily_from_a_position() {
    let (_tmp, dir) = new_log_dir();
    let all = busy_log(&dir);
    let full = read_all(&dir);
    assert_records(&full, &all);
    // From the start of a transaction in the middle of the log (a checkpoint).
    let from_index = full
        .records
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.record, LogRecord::Begin { .. }))
        .map(|(i, _)| i)
        .nth(250)
        .unwrap();
    let from = full.records[from_index].start;
    let options = edbstress_engine::log::LogReadOptions::new(IoClass::RecoveryRead);
    let mut reader = edbstress_engine::log::LogReader::open(&dir, from, sigs(), &options).unwrap();
    assert!(reader.summary().is_none());
    let lazily: Vec<_> = reader.by_ref().map(Result::unwrap).collect();
    let expected = &full.records[from_index..];
    assert_eq!(lazily.len(), expected.len());
    for (got, want) in lazily.iter().zip(expected) {
        assert_eq!((got.start, got.end), (want.start, want.end));
        assert!(got.record == want.record, "record at {} differs", got.start);
    }
    let summary = reader.summary().unwrap();
    assert_eq!(summary.end_of_log, full.summary.end_of_log);
    assert!(summary.bytes_read < full.summary.bytes_read);
}

/// What a crash can leave of the slots one write was changing: each slot new, old,
/// or torn (some 512-byte sectors new, the others old), independently.
fn crash_image(rng: &mut SmallRng, before: &[u8], after: &[u8], slots: &[usize]) -> Vec<u8> {
    let mut image = before.to_vec();
    for &slot in slots {
        let range = slot * SEGMENT_LEN..(slot + 1) * SEGMENT_LEN;
        match rng.random_range(0..10) {
            0..4 => image[range.clone()].copy_from_slice(&after[range]),
            4..7 => {}
            _ => {
                for sector in 0..SEGMENT_LEN / 512 {
                    if rng.random_bool(0.5) {
                        let at = range.start + sector * 512;
                        image[at..at + 512].copy_from_slice(&after[at..at + 512]);
                    }
                }
            }
        }
    }
    image
}

fn header_u16(image: &[u8], slot: usize, at: usize) -> u16 {
    let i = slot * SEGMENT_LEN + at;
    u16::from_le_bytes([image[i], image[i + 1]])
}

fn header_seq(image: &[u8], slot: usize) -> u64 {
    let i = slot * SEGMENT_LEN + 24;
    u64::from_le_bytes(image[i..i + 8].try_into().unwrap())
}

fn is_segment(image: &[u8], slot: usize) -> bool {
    &image[slot * SEGMENT_LEN + 8..slot * SEGMENT_LEN + 12] == b"LSEG"
}

fn slot_is_partial_real(image: &[u8], slot: usize) -> bool {
    is_segment(image, slot)
        && header_u16(image, slot, 18) == 0
        && header_u16(image, slot, 20) < 4060
}

/// The closed segment in slot `t` of `image`, as the shadow copy the writer puts in
/// slot `t + 1` (one write sequence earlier) before overwriting `t`.
fn closed_as_shadow(image: &[u8], t: usize) -> Vec<u8> {
    let seg = &image[t * SEGMENT_LEN..(t + 1) * SEGMENT_LEN];
    let used = usize::from(header_u16(image, t, 20));
    let header = SegmentHeader {
        generation: Generation::from_le_bytes(seg[12..16].try_into().unwrap()),
        logical_index: t as u16,
        flags: segment_flags::SHADOW,
        used: 0,
        write_seq: header_seq(image, t) - 1,
    };
    let mut out = vec![0u8; SEGMENT_LEN];
    encode_segment(&mut out, &header, &seg[32..32 + used], t as u16 + 1);
    out
}

#[test]
fn log_random_crashes_never_lose_acknowledged_commits() {
    for seed in 0..24u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (_tmp, dir) = new_log_dir();
        let path = log_path(&dir, 1);
        let writer = quiet_writer(&dir, START);
        let mut appended = Vec::new();
        let mut acknowledged = 0;
        let crash_at = rng.random_range(1..30);
        let mut trx = 0;
        let (before, after) = loop {
            for _ in 0..rng.random_range(1..4) {
                let sizes: Vec<usize> = (0..rng.random_range(1..3))
                    .map(|_| rng.random_range(0..6_000))
                    .collect();
                let records = txn(trx, &sizes);
                trx += 1;
                appended.extend(records.clone());
                writer.append(&records).unwrap();
            }
            let before = std::fs::read(&path).unwrap();
            writer.flush_to(writer.current()).unwrap();
            if trx >= crash_at {
                break (before, std::fs::read(&path).unwrap());
            }
            acknowledged = appended.len();
        };
        writer.abandon();

        // The writes of the last round, as the writer issues them (each synced before
        // the next): a closed former tail goes alone first — preceded by a closed
        // copy in its shadow slot if its own slot held its newest copy — then the rest.
        let slots = before.len() / SEGMENT_LEN;
        let changed: Vec<usize> = (1..slots)
            .filter(|&s| {
                before[s * SEGMENT_LEN..(s + 1) * SEGMENT_LEN]
                    != after[s * SEGMENT_LEN..(s + 1) * SEGMENT_LEN]
            })
            .collect();
        let old_tail = (1..slots).rev().find(|&s| slot_is_partial_real(&before, s));
        let mut writes: Vec<Vec<(usize, Vec<u8>)>> = Vec::new();
        let slot_of =
            |image: &[u8], s: usize| image[s * SEGMENT_LEN..(s + 1) * SEGMENT_LEN].to_vec();
        match old_tail.filter(|&t| !slot_is_partial_real(&after, t)) {
            Some(t) => {
                let shadow_is_newest = is_segment(&before, t + 1)
                    && header_u16(&before, t + 1, 18) == 1
                    && header_seq(&before, t + 1) >= header_seq(&before, t);
                if !shadow_is_newest {
                    writes.push(vec![(t + 1, closed_as_shadow(&after, t))]);
                }
                writes.push(vec![(t, slot_of(&after, t))]);
                let rest: Vec<_> = changed
                    .iter()
                    .filter(|&&s| s != t)
                    .map(|&s| (s, slot_of(&after, s)))
                    .collect();
                if !rest.is_empty() {
                    writes.push(rest);
                }
            }
            None => writes.push(changed.iter().map(|&s| (s, slot_of(&after, s))).collect()),
        }
        let crashed = rng.random_range(0..writes.len());
        let mut image = before.clone();
        for write in &writes[..crashed] {
            for (s, bytes) in write {
                image[s * SEGMENT_LEN..(s + 1) * SEGMENT_LEN].copy_from_slice(bytes);
            }
        }
        let mut target = image.clone();
        for (s, bytes) in &writes[crashed] {
            target[s * SEGMENT_LEN..(s + 1) * SEGMENT_LEN].copy_from_slice(bytes);
        }
        let torn_slots: Vec<usize> = writes[crashed].iter().map(|(s, _)| *s).collect();
        let image = crash_image(&mut rng, &image, &target, &torn_slots);
        std::fs::write(&path, &image).unwrap();

        let scan = read_log(&dir, START, sigs(), IoClass::RecoveryRead)
            .unwrap_or_else(|e| panic!("seed {seed}: crash image unreadable: {e}"));
        let got = records_of(&scan);
        assert!(
            got.len() >= acknowledged,
            "seed {seed}: {} records read, {acknowledged} acknowledged",
            got.len()
        );
        assert!(got == appended[..got.len()], "seed {seed}: not a prefix");

        // The log continues cleanly after whatever survived.
        let writer = quiet_writer(&dir, scan.summary.end_of_log);
        let more = txn(1_000_000, &[rng.random_range(0..9_000)]);
        commit(&writer, &more);
        writer.shutdown().unwrap();
        let scan = read_log(&dir, START, sigs(), IoClass::RecoveryRead)
            .unwrap_or_else(|e| panic!("seed {seed}: reopened log unreadable: {e}"));
        let mut expected = got;
        expected.extend(more);
        assert_records(&scan, &expected);
        assert!(!scan.summary.torn_tail, "seed {seed}");
    }
}

#[test]
fn log_crash_around_a_generation_roll() {
    for case in 0..3 {
        let (_tmp, dir) = new_log_dir();
        let writer = quiet_writer(&dir, START);
        let mut appended = Vec::new();
        let mut trx = 0;
        // Until generation 3 starts (generation 2 is a small file).
        while generations(&dir).len() < 3 || writer.durable().generation.get() < 3 {
            let records = txn(trx, &[(trx as usize * 131) % 5_000]);
            commit(&writer, &records);
            appended.extend(records);
            trx += 1;
        }
        let last_durable = writer.durable();
        writer.abandon();
        let complete: Vec<LogRecord> = {
            let scan = read_all(&dir);
            assert_records(&scan, &appended);
            scan.records
                .iter()
                .filter(|e| e.end.generation.get() < 3)
                .map(|e| e.record.clone())
                .collect()
        };
        match case {
            // The rename of the new file never reached the disk.
            0 => std::fs::remove_file(log_path(&dir, 3)).unwrap(),
            // The first write into the new file tore.
            1 => {
                let slot = read_slot(&dir, 3, 1);
                write_slot(&dir, 3, 1, &torn(&slot, &vec![0; SEGMENT_LEN], 2));
                write_slot(&dir, 3, 2, &vec![0u8; SEGMENT_LEN]);
            }
            // Nothing lost.
            _ => {}
        }
        let scan = read_all(&dir);
        let got = records_of(&scan);
        assert!(got.len() >= complete.len(), "case {case}");
        assert!(got == appended[..got.len()], "case {case}: not a prefix");
        if case == 2 {
            assert_eq!(got.len(), appended.len());
            assert!(scan.summary.end_of_log <= last_durable);
        }
        let scan = reopen_and_append(&dir, scan.summary.end_of_log, got);
        assert!(!scan.summary.torn_tail, "case {case}");
    }
}

/// A record too big for the rest of a generation starts the next file; the rest of
/// the full file is closed padding. A crash after the next file was installed but
/// before its first write leaves a log whose end is the start of that file: the writer
/// must reopen there (a torn-write-protection page image made this common, since
/// whole-page records rarely fit at a file's end).
#[test]
fn log_crash_after_padding_a_generation_reopens_in_the_next_file() {
    let (_tmp, dir) = new_log_dir();
    let writer = quiet_writer(&dir, START);
    let mut appended = Vec::new();
    let mut trx = 0;
    // Small transactions until generation 2 has fewer than three segments left.
    loop {
        let at = writer.current();
        if at.generation.get() == 2 && at.segment >= 13 {
            break;
        }
        let records = txn(trx, &[300]);
        commit(&writer, &records);
        appended.extend(records);
        trx += 1;
    }
    // About three segments of payload: cannot fit into generation 2 any more.
    let big = txn(trx, &[3 * SEGMENT_LEN]);
    commit(&writer, &big);
    writer.abandon();
    let scan = read_all(&dir);
    // Its Begin still fits into generation 2, its big redo record starts generation 3.
    let begin = &scan.records[appended.len()];
    let redo = &scan.records[appended.len() + 1];
    assert_eq!(begin.end.generation.get(), 2);
    assert_eq!(
        (redo.start.generation, redo.start.segment),
        (Generation::new(3), 1),
        "the big record should start generation 3"
    );
    appended.push(big[0].clone());

    // The crash: generation 3's file was installed, none of its data written.
    for slot in 1..(SMALL_FILE / SEGMENT_LEN) as u16 {
        write_slot(&dir, 3, slot, &vec![0u8; SEGMENT_LEN]);
    }
    let scan = read_all(&dir);
    assert_records(&scan, &appended);
    let next_file = LogPosition {
        generation: Generation::new(3),
        segment: 1,
        offset: edbstress_format::log::SEGMENT_HEADER_LEN as u16,
    };
    assert_eq!(scan.summary.end_of_log, next_file);
    assert!(!scan.summary.torn_tail);

    // Reopening after the last record, in the padded file, is refused without
    // touching it (zeroing its padding would break generation 3's checksum chain).
    let wrong = scan.records.last().unwrap().end;
    assert_eq!(wrong.generation.get(), 2);
    assert!(matches!(
        LogWriter::open(quiet_config(&dir), wrong, START, CheckpointState::default()),
        Err(EngineError::Invalid(_))
    ));
    assert_records(&read_all(&dir), &appended);

    let scan = reopen_and_append(&dir, scan.summary.end_of_log, appended);
    assert_eq!(scan.records.last().unwrap().end.generation.get(), 3);
}

#[test]
fn log_shutdown_returns_the_end_a_reader_finds() {
    // Small commits (each write closes its segment) and records filling files.
    for sizes in [vec![300usize, 500, 200], vec![3_000; 40]] {
        let (_tmp, dir) = new_log_dir();
        let writer = quiet_writer(&dir, START);
        for (trx, size) in sizes.iter().enumerate() {
            commit(&writer, &txn(trx as u64, &[*size]));
        }
        let end = writer.shutdown().unwrap();
        let scan = read_all(&dir);
        assert_eq!(end, scan.summary.end_of_log, "{sizes:?}");
        // And writing continues from there.
        reopen_and_append(&dir, end, records_of(&scan));
    }
}
