//! Database pages: checksum verification (with single-bit correction) and the record
//! layout decoder, on arbitrary bytes at every page size.
#![no_main]

use edbstress_format::Page;
use edbstress_format::Pgno;
use edbstress_format::checksum::verify_page;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let pgno = data
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap()));
    let _ = verify_page(data, Pgno::new(pgno));
    let sizes = [4096usize, 8192, 16384, 32768];
    let size = sizes[data.first().copied().unwrap_or(0) as usize % sizes.len()];
    let mut page = data.to_vec();
    page.resize(size, 0);
    let _ = verify_page(&page, Pgno::new(pgno));
    for buf in [data, &page[..]] {
        if let Ok(p) = Page::new_unvalidated(buf) {
            let _ = p.check();
            let _ = p.header();
            let _ = p.free_space();
            for i in 0..p.record_count().min(4096) {
                let _ = p.record(i);
            }
            let _ = p.search(b"key");
        }
        if let Ok(p) = Page::new(buf) {
            let _ = p.check();
        }
    }
});
