//! The results.json loader.
#![no_main]

use edbstress_report::export::read_results;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = read_results(data);
});
