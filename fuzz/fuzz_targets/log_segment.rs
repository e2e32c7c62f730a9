//! Log segments: data segment verification and repair, and the log file header.
#![no_main]

use edbstress_format::log::{LogFileHeader, SEGMENT_LEN, repair_segment, verify_segment};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let generation = data
        .get(..4)
        .map_or(1, |b| u32::from_le_bytes(b.try_into().unwrap()));
    let slot = data
        .get(4..6)
        .map_or(1, |b| u16::from_le_bytes([b[0], b[1]]));
    let _ = verify_segment(data, generation, slot);
    let _ = LogFileHeader::decode(data);
    let mut seg = data.to_vec();
    seg.resize(SEGMENT_LEN, 0);
    let _ = verify_segment(&seg, generation, slot);
    let _ = LogFileHeader::decode(&seg);
    let _ = repair_segment(&mut seg, generation, slot);
});
