//! The database header: each slot's decoder and the choice between primary and shadow.
#![no_main]

use edbstress_format::header::HEADER_REGION_LEN;
use edbstress_format::{DatabaseHeader, select_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = DatabaseHeader::decode(data);
    let mut slots = data.to_vec();
    slots.resize(2 * HEADER_REGION_LEN, 0);
    let (primary, shadow) = slots.split_at(HEADER_REGION_LEN);
    let _ = DatabaseHeader::decode(primary);
    let _ = select_header(primary, shadow);
    let _ = select_header(shadow, primary);
});
