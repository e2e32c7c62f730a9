//! The checkpoint file: each copy's decoder and the choice between the two copies.
#![no_main]

use edbstress_format::log::{CHECKPOINT_COPY_LEN, CheckpointRecord, select_checkpoint};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = CheckpointRecord::decode(data);
    let mut file = data.to_vec();
    file.resize(2 * CHECKPOINT_COPY_LEN, 0);
    let (copy0, copy1) = file.split_at(CHECKPOINT_COPY_LEN);
    let _ = CheckpointRecord::decode(copy0);
    let _ = select_checkpoint(copy0, copy1);
    let _ = select_checkpoint(copy1, copy0);
});
