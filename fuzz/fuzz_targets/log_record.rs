//! Log records: the record body decoder and the fragment assembler that parses a
//! segment's payload into records.
#![no_main]

use edbstress_format::LogPosition;
use edbstress_format::log::{LogRecord, RecordAssembler};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&record_type, body)) = data.split_first() {
        let _ = LogRecord::decode(record_type, body);
    }
    // The same bytes as two consecutive payloads, so fragment chains cross segments.
    let mut assembler = RecordAssembler::new();
    let half = data.len() / 2;
    for (i, payload) in [&data[..half], &data[half..]].into_iter().enumerate() {
        let position = LogPosition {
            generation: 1,
            segment: 1 + i as u16,
            offset: 0,
        };
        let _ = assembler.push_segment(position, payload, |record| {
            let _ = record;
        });
    }
});
