//! Log streams of 512-byte segments: the file header is one 512-byte segment that
//! records the length, data segments are 512 bytes with the same 32-byte header, and
//! the packer fills 480-byte payloads.

use edbstress_format::log::{
    DEFAULT_LOG_FILE_LEN, LogFileHeader, LogFormatError, LogRecord, RecordAssembler,
    SEGMENT_HEADER_LEN, SegmentHeader, SegmentLen, SegmentPacker, SegmentVerdict, encode_segment,
    repair_segment, verify_log_file_header, verify_segment,
};
use edbstress_format::{Generation, LogPosition, Pgno};

fn header(segment_len: u32) -> LogFileHeader {
    LogFileHeader {
        generation: Generation::new(7),
        segment_len,
        file_len: DEFAULT_LOG_FILE_LEN as u32,
        log_signature: 1,
        db_signature: 2,
        created_unix: 3,
        checkpoint_at_creation: LogPosition::default(),
        prev_generation_checksum: 4,
    }
}

#[test]
fn segment_lengths_are_512_and_4096() {
    assert_eq!(SegmentLen::Sector512.bytes(), 512);
    assert_eq!(SegmentLen::Sector512.payload_len(), 480);
    assert_eq!(SegmentLen::Sector512.max_file_len(), 32 << 20);
    assert_eq!(SegmentLen::Page4096.payload_len(), 4064);
    assert_eq!(SegmentLen::from_bytes(512), Some(SegmentLen::Sector512));
    assert_eq!(SegmentLen::from_bytes(4096), Some(SegmentLen::Page4096));
    assert_eq!(SegmentLen::from_bytes(1024), None);
    assert_eq!(SegmentLen::default(), SegmentLen::Page4096);
}

#[test]
fn a_512_byte_file_header_round_trips_and_is_found_in_a_files_first_bytes() {
    let h = header(512);
    let mut seg = vec![0xAAu8; 512];
    h.encode(&mut seg);
    assert_eq!(verify_log_file_header(&seg, Generation::new(7)), Ok(h));
    assert_eq!(h.segment_count(), 2048);
    assert_eq!(h.segment_length(), SegmentLen::Sector512);
    assert_eq!(u32::from_le_bytes(seg[20..24].try_into().unwrap()), 512);
    assert!(seg[72..].iter().all(|&b| b == 0));
    // A reader that reads the first 4096 bytes of a file finds the header in them.
    let mut head = seg.clone();
    head.resize(4096, 0x55);
    assert_eq!(LogFileHeader::bytes_in(&head).len(), 512);
    assert_eq!(LogFileHeader::decode(LogFileHeader::bytes_in(&head)), Ok(h));
    // The 512-byte header is not a 4096-byte one, nor the other way round.
    assert!(LogFileHeader::decode(&head).is_err());
    let mut big = vec![0u8; 4096];
    header(4096).encode(&mut big);
    assert_eq!(LogFileHeader::bytes_in(&big).len(), 4096);
    // (Its first 512 bytes checksum alike, its reserved bytes being zero: the length
    // it records tells them apart.)
    assert!(matches!(
        LogFileHeader::decode(&big[..512]),
        Err(LogFormatError::Invalid { .. })
    ));
    // An unsupported length recorded: the header is rejected, naming it.
    let mut seg = vec![0u8; 1024];
    seg[20..24].copy_from_slice(&1024u32.to_le_bytes());
    assert_eq!(LogFileHeader::bytes_in(&seg).len(), 1024);
    assert!(LogFileHeader::decode(&seg).is_err());
    // A file length that is not a multiple of 512 is refused.
    let mut bad = header(512);
    bad.file_len = 512 * 100 + 8;
    let mut seg = vec![0u8; 512];
    bad.encode(&mut seg);
    assert!(matches!(
        LogFileHeader::decode(&seg),
        Err(LogFormatError::Invalid { .. })
    ));
}

#[test]
fn a_512_byte_data_segment_is_checked_and_corrected_like_a_4096_byte_one() {
    let hdr = SegmentHeader {
        generation: Generation::new(7),
        logical_index: 9,
        flags: 0,
        used: 0,
        write_seq: 12,
    };
    let mut seg = vec![0u8; 512];
    encode_segment(&mut seg, &hdr, &[3u8; 480], 9);
    let SegmentVerdict::Valid(found) = verify_segment(&seg, Generation::new(7), 9) else {
        panic!("not valid");
    };
    assert_eq!((found.used, found.write_seq), (480, 12));
    assert!(matches!(
        verify_segment(&seg, Generation::new(7), 10),
        SegmentVerdict::WrongPosition { .. }
    ));
    for bit in [0u32, 100, 8 * 300 + 5, 4095] {
        let mut damaged = seg.clone();
        damaged[bit as usize / 8] ^= 1 << (bit % 8);
        assert_eq!(
            repair_segment(&mut damaged, Generation::new(7), 9),
            SegmentVerdict::Correctable { bit },
            "bit {bit}"
        );
        assert_eq!(damaged, seg);
    }
    let mut torn = seg.clone();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for b in &mut torn[256..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    assert_eq!(
        verify_segment(&torn, Generation::new(7), 9),
        SegmentVerdict::Bad
    );
    assert_eq!(
        verify_segment(&vec![0u8; 512], Generation::new(7), 9),
        SegmentVerdict::Unused
    );
}

#[test]
fn the_packer_fills_480_byte_payloads_and_records_reassemble() {
    let mut packer = SegmentPacker::with_segment_len(SegmentLen::Sector512);
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let records: Vec<LogRecord> = (0..20u64)
        .map(|trx| LogRecord::PageRedo {
            pgno: Pgno::new(trx as u32),
            dbtime_before: trx,
            dbtime_after: trx + 1,
            trx,
            op: 1,
            payload: vec![trx as u8; 50 + 97 * trx as usize],
        })
        .collect();
    for r in &records {
        packer.push(r, |p| payloads.push(p.to_vec())).unwrap();
    }
    packer.close_segment(|p| payloads.push(p.to_vec()));
    assert!(payloads.len() > 20);
    assert!(payloads.iter().all(|p| p.len() <= 480));
    // Through sealed 512-byte segments, as recovery reads them.
    let mut assembler = RecordAssembler::new();
    let mut decoded = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        let slot = i as u16 + 1;
        let hdr = SegmentHeader {
            generation: Generation::new(1),
            logical_index: slot,
            flags: 0,
            used: 0,
            write_seq: i as u64,
        };
        let mut seg = vec![0u8; 512];
        encode_segment(&mut seg, &hdr, p, slot);
        let SegmentVerdict::Valid(found) = verify_segment(&seg, Generation::new(1), slot) else {
            panic!("sealed segment {slot} does not verify");
        };
        assembler
            .push_segment(found.position(0), found.payload(&seg), |r| {
                decoded.push(LogRecord::decode(r.record_type, r.body).unwrap());
            })
            .unwrap();
    }
    assert_eq!(decoded, records);
    assert_eq!(SEGMENT_HEADER_LEN, 32);
}
