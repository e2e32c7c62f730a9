//! Random bytes into every decoder of on-disk formats must never panic: these are the
//! stable-toolchain equivalents of the cargo-fuzz targets in `fuzz/` (page, log
//! segment, log record, checkpoint and database header).

use edbstress_format::checksum::verify_page;
use edbstress_format::header::HEADER_REGION_LEN;
use edbstress_format::log::{
    CHECKPOINT_COPY_LEN, CheckpointRecord, LogFileHeader, LogRecord, RecordAssembler, SEGMENT_LEN,
    repair_segment, select_checkpoint, verify_segment,
};
use edbstress_format::{DatabaseHeader, LogPosition, Page, select_header};
use edbstress_format::{Generation, Pgno};
use proptest::prelude::*;

/// Arbitrary bytes, sometimes of a length a decoder expects.
fn bytes(sizes: &'static [usize]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        prop::sample::select(sizes).prop_flat_map(|n| prop::collection::vec(any::<u8>(), n)),
        // Mostly zero with a few random bytes: closer to a real block than noise.
        prop::sample::select(sizes).prop_flat_map(|n| {
            prop::collection::vec((0..n, any::<u8>()), 0..16).prop_map(move |pokes| {
                let mut v = vec![0u8; n];
                for (at, b) in pokes {
                    v[at] = b;
                }
                v
            })
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pages_never_panic(data in bytes(&[4096, 8192, 16384, 32768]), pgno in any::<u32>()) {
        let _ = verify_page(&data, Pgno::new(pgno));
        if let Ok(p) = Page::new_unvalidated(&data) {
            let _ = p.check();
            let _ = p.free_space();
            for i in 0..p.record_count().min(4096) {
                let _ = p.record(i);
            }
            let _ = p.search(b"key");
        }
        if let Ok(p) = Page::new(&data) {
            let _ = p.check();
        }
    }

    #[test]
    fn log_segments_never_panic(data in bytes(&[SEGMENT_LEN]), generation in any::<u32>(), slot in any::<u16>()) {
        let _ = verify_segment(&data, Generation::new(generation), slot);
        let _ = LogFileHeader::decode(&data);
        let mut seg = data.clone();
        seg.resize(SEGMENT_LEN, 0);
        let _ = repair_segment(&mut seg, Generation::new(generation), slot);
    }

    #[test]
    fn log_records_never_panic(record_type in any::<u8>(), data in bytes(&[64, 4064])) {
        let _ = LogRecord::decode(record_type, &data);
        let mut assembler = RecordAssembler::new();
        let half = data.len() / 2;
        for (i, payload) in [&data[..half], &data[half..]].into_iter().enumerate() {
            let position = LogPosition { generation: Generation::new(1), segment: 1 + i as u16, offset: 0 };
            let _ = assembler.push_segment(position, payload, |_| {});
        }
    }

    #[test]
    fn checkpoints_never_panic(a in bytes(&[CHECKPOINT_COPY_LEN]), b in bytes(&[CHECKPOINT_COPY_LEN])) {
        let _ = CheckpointRecord::decode(&a);
        let _ = select_checkpoint(&a, &b);
    }

    #[test]
    fn database_headers_never_panic(a in bytes(&[HEADER_REGION_LEN]), b in bytes(&[HEADER_REGION_LEN])) {
        let _ = DatabaseHeader::decode(&a);
        let _ = select_header(&a, &b);
    }
}
