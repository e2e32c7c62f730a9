//! Log formats: records, packing and reassembly, segment checksums with correction
//! and position checks, file header and checkpoint.

use edbstress_format::log::{
    AssembledRecord, CHECKPOINT_COPY_LEN, CHECKPOINT_FILE_LEN, CheckpointRecord, CheckpointState,
    DEFAULT_LOG_FILE_LEN, FRAGMENT_HEADER_LEN, LogFileHeader, LogFormatError, LogRecord,
    MAX_RECORD_BODY_LEN, RecordAssembler, SEGMENT_LEN, SEGMENT_PAYLOAD_LEN, SegmentHeader,
    SegmentPacker, SegmentVerdict, encode_segment, fragment_flags, record_type, repair_segment,
    seal_segment, segment_check_id, segment_flags, select_checkpoint, verify_log_file_header,
    verify_segment,
};
use edbstress_format::{Generation, LogPosition, Pgno};
use proptest::prelude::*;

fn record_strategy() -> impl Strategy<Value = LogRecord> {
    prop_oneof![
        any::<u64>().prop_map(|trx| LogRecord::Begin { trx }),
        (any::<u64>(), any::<bool>()).prop_map(|(trx, lazy)| LogRecord::Commit { trx, lazy }),
        any::<u64>().prop_map(|trx| LogRecord::Rollback { trx }),
        any::<u64>().prop_map(|last_dbtime| LogRecord::Shutdown { last_dbtime }),
        (
            any::<u32>(),
            prop_oneof![Just(0usize), Just(4096), Just(8192), Just(32768)]
                .prop_flat_map(|n| prop::collection::vec(any::<u8>(), n)),
        )
            .prop_map(|(pgno, image)| LogRecord::PageImage {
                pgno: Pgno::new(pgno),
                image
            }),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u8>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                prop::collection::vec(any::<u8>(), 0..12_000),
            ],
        )
            .prop_map(|(pgno, dbtime_before, dbtime_after, trx, op, payload)| {
                LogRecord::PageRedo {
                    pgno: Pgno::new(pgno),
                    dbtime_before,
                    dbtime_after,
                    trx,
                    op,
                    payload,
                }
            }),
    ]
}

/// Packs `records`, returning the full segment payloads and the pending tail.
fn pack(records: &[LogRecord]) -> (Vec<Vec<u8>>, Vec<u8>, Vec<u16>) {
    let mut packer = SegmentPacker::new();
    let mut segments = Vec::new();
    let mut starts = Vec::new();
    for record in records {
        starts.push(packer.next_record_offset());
        packer
            .push(record, |payload| segments.push(payload.to_vec()))
            .unwrap();
    }
    (segments, packer.pending().to_vec(), starts)
}

fn sealed_segment(generation: u32, index: u16, payload: &[u8], seq: u64) -> Vec<u8> {
    let mut seg = vec![0u8; SEGMENT_LEN];
    let hdr = SegmentHeader {
        generation: Generation::new(generation),
        logical_index: index,
        flags: 0,
        used: 0,
        write_seq: seq,
    };
    encode_segment(&mut seg, &hdr, payload, index);
    seg
}

#[test]
fn record_bodies_have_the_documented_layout() {
    let mut out = Vec::new();
    LogRecord::Commit {
        trx: 0x0102,
        lazy: true,
    }
    .encode(&mut out);
    assert_eq!(out, [2, 1, 0, 0, 0, 0, 0, 0, 1]);
    out.clear();
    LogRecord::PageRedo {
        pgno: Pgno::new(9),
        dbtime_before: 1,
        dbtime_after: 2,
        trx: 3,
        op: 4,
        payload: vec![0xAA, 0xBB],
    }
    .encode(&mut out);
    assert_eq!(out.len(), 31);
    assert_eq!(&out[0..4], &9u32.to_le_bytes());
    assert_eq!(&out[4..12], &1u64.to_le_bytes());
    assert_eq!(&out[12..20], &2u64.to_le_bytes());
    assert_eq!(&out[20..28], &3u64.to_le_bytes());
    assert_eq!(&out[28..], &[4, 0xAA, 0xBB]);

    assert_eq!(
        LogRecord::decode(record_type::BEGIN, &[0; 7]),
        Err(LogFormatError::BadRecordLength {
            record_type: 1,
            len: 7
        })
    );
    assert!(matches!(
        LogRecord::decode(record_type::COMMIT, &[0, 0, 0, 0, 0, 0, 0, 0, 2]),
        Err(LogFormatError::BadRecordField { .. })
    ));
    assert_eq!(
        LogRecord::decode(0, &[]),
        Err(LogFormatError::UnknownRecordType(0))
    );
    assert_eq!(
        LogRecord::decode(99, &[]),
        Err(LogFormatError::UnknownRecordType(99))
    );
}

#[test]
fn packer_framing_and_positions() {
    let small = LogRecord::Begin { trx: 1 };
    let big = LogRecord::PageRedo {
        pgno: Pgno::new(1),
        dbtime_before: 0,
        dbtime_after: 1,
        trx: 1,
        op: 0,
        payload: vec![7; 5000],
    };
    let (segments, pending, starts) = pack(&[small.clone(), big.clone(), small.clone()]);
    // Begin: 4 + 8 bytes. The redo body (29 + 5000) fills the rest of segment 1 and
    // continues in segment 2.
    assert_eq!(segments.len(), 1);
    let first = &segments[0];
    assert_eq!(first.len(), SEGMENT_PAYLOAD_LEN);
    assert_eq!(&first[..4], &[record_type::BEGIN, 3, 8, 0]);
    assert_eq!(first[12], record_type::PAGE_REDO);
    assert_eq!(first[13], fragment_flags::FIRST);
    let first_part = SEGMENT_PAYLOAD_LEN - 12 - FRAGMENT_HEADER_LEN;
    assert_eq!(
        u16::from_le_bytes([first[14], first[15]]) as usize,
        first_part
    );
    assert_eq!(pending[0], record_type::PAGE_REDO);
    assert_eq!(pending[1], fragment_flags::LAST);
    let second_part = 5029 - first_part;
    assert_eq!(
        u16::from_le_bytes([pending[2], pending[3]]) as usize,
        second_part
    );
    assert_eq!(starts, [32, 44, (32 + 4 + second_part) as u16]);

    // Reassembly with positions.
    let mut assembler = RecordAssembler::new();
    let mut out = Vec::new();
    let mut collect = |r: AssembledRecord<'_>| {
        out.push((
            LogRecord::decode(r.record_type, r.body).unwrap(),
            r.start,
            r.end,
        ))
    };
    let seg = |segment| LogPosition {
        generation: Generation::new(5),
        segment,
        offset: 0,
    };
    assembler.push_segment(seg(1), first, &mut collect).unwrap();
    assert!(assembler.in_progress());
    assembler
        .push_segment(seg(2), &pending, &mut collect)
        .unwrap();
    assert!(!assembler.in_progress());
    let at = |segment, offset| LogPosition {
        generation: Generation::new(5),
        segment,
        offset,
    };
    assert_eq!(
        out,
        [
            (small.clone(), at(1, 32), at(1, 44)),
            (big, at(1, 44), at(2, (32 + 4 + second_part) as u16)),
            (
                small,
                at(2, (32 + 4 + second_part) as u16),
                at(2, (32 + 8 + 8 + second_part) as u16)
            ),
        ]
    );
}

#[test]
fn packer_closes_segments_with_fewer_than_five_bytes_left() {
    // A redo whose body leaves exactly 4 bytes in the segment.
    let payload_len = SEGMENT_PAYLOAD_LEN - FRAGMENT_HEADER_LEN - 29 - 4;
    let record = LogRecord::PageRedo {
        pgno: Pgno::new(1),
        dbtime_before: 0,
        dbtime_after: 1,
        trx: 1,
        op: 0,
        payload: vec![1; payload_len],
    };
    let (segments, pending, _) = pack(&[record, LogRecord::Begin { trx: 2 }]);
    assert_eq!(segments.len(), 1);
    assert_eq!(segments[0].len(), SEGMENT_PAYLOAD_LEN - 4);
    assert_eq!(&pending[..2], &[record_type::BEGIN, 3]);
}

#[test]
fn oversized_records_are_refused() {
    let mut packer = SegmentPacker::new();
    let record = LogRecord::PageRedo {
        pgno: Pgno::new(1),
        dbtime_before: 0,
        dbtime_after: 1,
        trx: 1,
        op: 0,
        payload: vec![0; MAX_RECORD_BODY_LEN],
    };
    let mut emitted = 0;
    assert!(matches!(
        packer.push(&record, |_| emitted += 1),
        Err(LogFormatError::RecordTooLarge { .. })
    ));
    assert_eq!(emitted, 0);
    assert!(packer.pending().is_empty());
}

#[test]
fn broken_chains_are_reported() {
    let mut assembler = RecordAssembler::new();
    let ignore = |_: AssembledRecord<'_>| {};
    let at = LogPosition::default();
    // Continuation without a start.
    let err = assembler
        .push_segment(
            at,
            &[record_type::BEGIN, fragment_flags::LAST, 0, 0],
            ignore,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        LogFormatError::BrokenFragmentChain { offset: 0, .. }
    ));
    // Fragment longer than the payload.
    let err = assembler
        .push_segment(at, &[record_type::BEGIN, 3, 9, 0, 1, 2], ignore)
        .unwrap_err();
    assert!(matches!(err, LogFormatError::BrokenFragmentChain { .. }));
    // A new record while one is in progress.
    let mut first = vec![record_type::PAGE_REDO, fragment_flags::FIRST];
    first.extend_from_slice(&((SEGMENT_PAYLOAD_LEN - 4) as u16).to_le_bytes());
    first.resize(SEGMENT_PAYLOAD_LEN, 0);
    assembler.push_segment(at, &first, ignore).unwrap();
    assert!(assembler.in_progress());
    let err = assembler
        .push_segment(at, &[record_type::BEGIN, 3, 0, 0], ignore)
        .unwrap_err();
    assert!(matches!(err, LogFormatError::BrokenFragmentChain { .. }));
    assert!(!assembler.in_progress());
    // Type 0 ends a segment's fragments; trailing bytes are ignored.
    let mut seen = 0;
    assembler
        .push_segment(at, &[record_type::BEGIN, 3, 0, 0, 0, 9, 9, 9, 9], |_| {
            seen += 1
        })
        .unwrap();
    assert_eq!(seen, 1);
}

#[test]
fn segments_verify_and_detect_misplacement() {
    let payload = vec![0x3Cu8; 1000];
    let seg = sealed_segment(0x1A, 5, &payload, 77);
    let SegmentVerdict::Valid(hdr) = verify_segment(&seg, Generation::new(0x1A), 5) else {
        panic!("expected a valid segment");
    };
    assert_eq!(hdr.used, 1000);
    assert_eq!(hdr.write_seq, 77);
    assert_eq!(hdr.payload(&seg), &payload[..]);
    assert_eq!(&seg[8..12], b"LSEG");
    assert_eq!(
        verify_segment(&seg, Generation::new(0x1A), 6),
        SegmentVerdict::WrongPosition {
            found_generation: Generation::new(0x1A),
            found_slot: 5
        }
    );
    assert_eq!(
        verify_segment(&seg, Generation::new(0x1B), 5),
        SegmentVerdict::WrongPosition {
            found_generation: Generation::new(0x1A),
            found_slot: 5
        }
    );
    // Generations 65536 apart share checksum ids; the header still tells them apart.
    assert_eq!(
        segment_check_id(Generation::new(0x1A), 5),
        segment_check_id(Generation::new(0x1_001A), 5)
    );
    assert_eq!(
        verify_segment(&seg, Generation::new(0x1_001A), 5),
        SegmentVerdict::WrongPosition {
            found_generation: Generation::new(0x1A),
            found_slot: 5
        }
    );
    assert_eq!(
        verify_segment(&vec![0; SEGMENT_LEN], Generation::new(1), 1),
        SegmentVerdict::Unused
    );
    assert_eq!(
        verify_segment(&seg[..100], Generation::new(0x1A), 5),
        SegmentVerdict::Bad
    );

    // The shadow copy of a tail segment lives in the next slot.
    let mut shadow = vec![0u8; SEGMENT_LEN];
    let hdr = SegmentHeader {
        generation: Generation::new(3),
        logical_index: 9,
        flags: segment_flags::SHADOW,
        used: 0,
        write_seq: 12,
    };
    encode_segment(&mut shadow, &hdr, b"tail", 10);
    let SegmentVerdict::Valid(read) = verify_segment(&shadow, Generation::new(3), 10) else {
        panic!("expected a valid shadow");
    };
    assert!(read.is_shadow());
    assert_eq!(read.physical_slot(), Some(10));
    // Sealed for the wrong slot: checksum and header disagree.
    let mut odd = shadow.clone();
    seal_segment(&mut odd, &read, 9);
    assert_eq!(
        verify_segment(&odd, Generation::new(3), 9),
        SegmentVerdict::Bad
    );
}

#[test]
fn every_single_bit_flip_of_a_segment_is_repaired() {
    let payload: Vec<u8> = (0..SEGMENT_PAYLOAD_LEN)
        .map(|i| (i * 7 + i / 11) as u8)
        .collect();
    let original = sealed_segment(0xABCD, 17, &payload, 5);
    let mut seg = original.clone();
    for bit in 0..(SEGMENT_LEN * 8) as u32 {
        seg[(bit / 8) as usize] ^= 1 << (bit % 8);
        assert_eq!(
            repair_segment(&mut seg, Generation::new(0xABCD), 17),
            SegmentVerdict::Correctable { bit },
            "bit {bit}"
        );
        assert!(seg == original, "bit {bit}");
    }
}

#[test]
fn log_file_header_round_trip_and_errors() {
    let header = LogFileHeader {
        generation: Generation::new(0x1A),
        segment_len: SEGMENT_LEN as u32,
        file_len: DEFAULT_LOG_FILE_LEN as u32,
        log_signature: 11,
        db_signature: 22,
        created_unix: 33,
        checkpoint_at_creation: LogPosition {
            generation: Generation::new(0x19),
            segment: 3,
            offset: 100,
        },
        prev_generation_checksum: 0xDEAD_BEEF,
    };
    let mut seg = vec![0xFFu8; SEGMENT_LEN];
    header.encode(&mut seg);
    assert_eq!(
        verify_log_file_header(&seg, Generation::new(0x1A)),
        Ok(header)
    );
    assert_eq!(header.segment_count(), 256);
    assert_eq!(&seg[8..16], b"EDBSLOG\0");
    assert_eq!(u32::from_le_bytes(seg[28..32].try_into().unwrap()), 0x1A);
    assert_eq!(
        u64::from_le_bytes(seg[0..8].try_into().unwrap()),
        edbstress_format::block_checksum(&seg, segment_check_id(Generation::new(0x1A), 0), true)
    );
    assert_eq!(
        verify_log_file_header(&seg, Generation::new(0x1B)),
        Err(LogFormatError::WrongGeneration {
            expected: Generation::new(0x1B),
            found: Generation::new(0x1A)
        })
    );
    let mut damaged = seg.clone();
    damaged[40] ^= 1;
    assert!(matches!(
        verify_log_file_header(&damaged, Generation::new(0x1A)),
        Err(LogFormatError::BadChecksum { .. })
    ));
    assert!(matches!(
        verify_log_file_header(&vec![0; SEGMENT_LEN], Generation::new(1)),
        Err(LogFormatError::Uninitialized { .. })
    ));
    assert!(matches!(
        verify_log_file_header(&vec![0x55; SEGMENT_LEN], Generation::new(1)),
        Err(LogFormatError::BadMagic { .. })
    ));
    // A data segment is not a file header.
    let data = sealed_segment(0x1A, 1, b"x", 1);
    assert!(verify_log_file_header(&data, Generation::new(0x1A)).is_err());
}

/// Version 2 is written; a version 1 log (no split images) is still read, and a
/// version from a newer release is refused with the fix named.
#[test]
fn log_file_header_versions() {
    let header = LogFileHeader {
        generation: Generation::new(3),
        segment_len: SEGMENT_LEN as u32,
        file_len: DEFAULT_LOG_FILE_LEN as u32,
        log_signature: 1,
        db_signature: 2,
        created_unix: 3,
        checkpoint_at_creation: LogPosition::default(),
        prev_generation_checksum: 0,
    };
    let mut seg = vec![0u8; SEGMENT_LEN];
    header.encode(&mut seg);
    assert_eq!(u32::from_le_bytes(seg[16..20].try_into().unwrap()), 2);
    let with_version = |version: u32| {
        let mut s = seg.clone();
        s[16..20].copy_from_slice(&version.to_le_bytes());
        let sum =
            edbstress_format::block_checksum(&s, segment_check_id(Generation::new(3), 0), true);
        s[0..8].copy_from_slice(&sum.to_le_bytes());
        s
    };
    assert_eq!(
        verify_log_file_header(&with_version(1), Generation::new(3)),
        Ok(header)
    );
    let err = verify_log_file_header(&with_version(3), Generation::new(3)).unwrap_err();
    assert_eq!(err, LogFormatError::UnsupportedVersion { found: 3 });
    let message = err.to_string();
    assert!(
        message.contains("versions 1 to 2") && message.contains("matching edbstress release"),
        "{message}"
    );
}

#[test]
fn checkpoint_copies() {
    let older = CheckpointRecord {
        update_seq: 4,
        checkpoint: LogPosition {
            generation: Generation::new(2),
            segment: 1,
            offset: 32,
        },
        log_signature: 5,
        db_signature: 6,
        state: CheckpointState {
            last_dbtime: 77,
            next_unused_page: 901,
            next_message_id: 12_345,
        },
    };
    let newer = CheckpointRecord {
        update_seq: 5,
        ..older
    };
    let mut file = vec![0u8; CHECKPOINT_FILE_LEN];
    older.encode_file(&mut file);
    newer.encode(&mut file[CHECKPOINT_COPY_LEN..]);
    let (a, b) = file.split_at(CHECKPOINT_COPY_LEN);
    let selection = select_checkpoint(a, b).unwrap();
    assert_eq!((selection.record, selection.chosen), (newer, 1));
    assert_eq!(&a[8..16], b"EDBSCHK\0");

    // Torn second copy: fall back to the first.
    let mut torn = b.to_vec();
    torn[100] = 1;
    let selection = select_checkpoint(a, &torn).unwrap();
    assert_eq!((selection.record, selection.chosen), (older, 0));
    assert!(selection.copy0_valid && !selection.copy1_valid);
    assert!(matches!(
        selection.errors[1],
        Some(LogFormatError::BadChecksum { .. })
    ));
    let zero = vec![0u8; CHECKPOINT_COPY_LEN];
    assert!(matches!(
        select_checkpoint(&zero, &zero),
        Err(LogFormatError::Uninitialized { .. })
    ));
    assert!(matches!(
        select_checkpoint(&zero, &torn),
        Err(LogFormatError::BadChecksum { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn records_round_trip(record in record_strategy()) {
        let mut body = Vec::new();
        record.encode(&mut body);
        prop_assert_eq!(body.len(), record.body_len());
        prop_assert_eq!(LogRecord::decode(record.record_type(), &body), Ok(record));
    }

    #[test]
    fn packer_and_assembler_round_trip(records in prop::collection::vec(record_strategy(), 0..40)) {
        let (mut segments, pending, starts) = pack(&records);
        if !pending.is_empty() {
            segments.push(pending);
        }
        // Through real sealed segments, as recovery reads them.
        let mut assembler = RecordAssembler::new();
        let mut decoded = Vec::new();
        let mut positions = Vec::new();
        for (i, payload) in segments.iter().enumerate() {
            prop_assert!(payload.len() <= SEGMENT_PAYLOAD_LEN);
            let slot = (i + 1) as u16;
            let seg = sealed_segment(9, slot, payload, i as u64);
            let SegmentVerdict::Valid(hdr) = verify_segment(&seg, Generation::new(9), slot) else {
                return Err(TestCaseError::fail("sealed segment does not verify"));
            };
            assembler
                .push_segment(hdr.position(0), hdr.payload(&seg), |r| {
                    decoded.push(LogRecord::decode(r.record_type, r.body).unwrap());
                    positions.push(r.start.offset);
                })
                .unwrap();
        }
        prop_assert!(!assembler.in_progress());
        prop_assert_eq!(positions, starts);
        prop_assert_eq!(decoded, records);
    }

    #[test]
    fn segment_single_flips_are_correctable(
        payload in prop::collection::vec(any::<u8>(), 0..SEGMENT_PAYLOAD_LEN),
        generation in any::<u32>(),
        slot in 1u16..256,
        bit in 0u32..(SEGMENT_LEN * 8) as u32,
    ) {
        let original = sealed_segment(generation, slot, &payload, 1);
        let mut seg = original.clone();
        seg[(bit / 8) as usize] ^= 1 << (bit % 8);
        prop_assert_eq!(verify_segment(&seg, Generation::new(generation), slot), SegmentVerdict::Correctable { bit });
        repair_segment(&mut seg, Generation::new(generation), slot);
        prop_assert!(seg == original);
    }

    #[test]
    fn segment_two_bit_flips_are_bad(
        payload in prop::collection::vec(any::<u8>(), 0..SEGMENT_PAYLOAD_LEN),
        a in 0u32..(SEGMENT_LEN * 8) as u32,
        b in 0u32..(SEGMENT_LEN * 8) as u32,
    ) {
        prop_assume!(a != b);
        let mut seg = sealed_segment(4, 2, &payload, 1);
        for bit in [a, b] {
            seg[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
        prop_assert_eq!(verify_segment(&seg, Generation::new(4), 2), SegmentVerdict::Bad);
    }

    #[test]
    fn misplaced_segments_are_recognised(
        generation in any::<u32>(),
        slot in 1u16..256,
        other_generation in any::<u32>(),
        other_slot in 1u16..256,
    ) {
        prop_assume!((generation, slot) != (other_generation, other_slot));
        let seg = sealed_segment(generation, slot, b"payload", 3);
        prop_assert_eq!(
            verify_segment(&seg, Generation::new(other_generation), other_slot),
            SegmentVerdict::WrongPosition { found_generation: Generation::new(generation), found_slot: slot }
        );
    }

    #[test]
    fn decoders_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..5000),
        kind in any::<u8>(),
        generation in any::<u32>(),
        slot in any::<u16>(),
    ) {
        let _ = LogRecord::decode(kind, &bytes);
        let _ = verify_segment(&bytes, Generation::new(generation), slot);
        let _ = LogFileHeader::decode(&bytes);
        let _ = CheckpointRecord::decode(&bytes);
        let _ = select_checkpoint(&bytes, &bytes);
        let mut seg = bytes.clone();
        seg.resize(SEGMENT_LEN, 0);
        let _ = verify_segment(&seg, Generation::new(generation), slot);
        let _ = repair_segment(&mut seg, Generation::new(generation), slot);
        let mut assembler = RecordAssembler::new();
        for chunk in bytes.chunks(SEGMENT_PAYLOAD_LEN.min(bytes.len().max(1) / 2 + 1)) {
            let _ = assembler.push_segment(LogPosition::default(), chunk, |r| {
                let _ = LogRecord::decode(r.record_type, r.body);
            });
        }
    }
}

#[test]
fn page_image_bodies_must_be_empty_or_one_page() {
    let mut body = 7u32.to_le_bytes().to_vec();
    assert_eq!(
        LogRecord::decode(record_type::PAGE_IMAGE, &body).unwrap(),
        LogRecord::PageImage {
            pgno: Pgno::new(7),
            image: Vec::new()
        }
    );
    body.extend_from_slice(&[0xAB; 8192]);
    let LogRecord::PageImage { pgno, image } =
        LogRecord::decode(record_type::PAGE_IMAGE, &body).unwrap()
    else {
        panic!("not a page image");
    };
    assert_eq!((pgno, image.len()), (Pgno::new(7), 8192));
    body.push(0);
    assert!(matches!(
        LogRecord::decode(record_type::PAGE_IMAGE, &body),
        Err(LogFormatError::BadRecordLength { len: 8197, .. })
    ));
    assert!(LogRecord::decode(record_type::PAGE_IMAGE, &[1, 2, 3]).is_err());
}
