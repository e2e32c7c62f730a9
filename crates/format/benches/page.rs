//! Page operations on a 32 KiB page: binary search of a full page, insert into the
//! middle, delete and re-insert, replace data, compaction, and validating a page.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use edbstress_format::page::{Page, PageMut};

const PAGE: usize = 32 * 1024;

fn key(i: u32) -> [u8; 8] {
    // Big-endian keys sort like the numbers: the page search order.
    (u64::from(i) * 2).to_be_bytes()
}

/// A page filled with 16-byte-data records at even keys; returns it and its count.
fn full_page() -> (Vec<u8>, u32) {
    let mut buf = vec![0u8; PAGE];
    let mut page = PageMut::format(&mut buf, 7, 1, 0, 1);
    let mut n = 0;
    while page.append(&key(n), &[n as u8; 16]).is_ok() {
        n += 1;
    }
    (buf, n)
}

fn page_ops(c: &mut Criterion) {
    let (full, count) = full_page();
    let mut group = c.benchmark_group("page_32k");
    group.bench_function("search", |b| {
        let page = Page::new_unvalidated(&full).unwrap();
        let mut i = 0u32;
        b.iter(|| {
            i = (i + 7919) % count;
            black_box(page.search(black_box(&key(i))))
        })
    });
    group.bench_function("delete_insert_middle", |b| {
        let mut buf = full.clone();
        let mut page = PageMut::new(&mut buf).unwrap();
        let mid = count as usize / 2;
        b.iter(|| {
            page.delete(mid);
            page.insert(mid, &key(mid as u32), &[1u8; 16]).unwrap();
        })
    });
    group.bench_function("replace_data", |b| {
        let mut buf = full.clone();
        let mut page = PageMut::new(&mut buf).unwrap();
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 31) % count as usize;
            page.replace_data(i, &[i as u8; 16]).unwrap();
        })
    });
    group.bench_function("compact", |b| {
        let mut buf = full.clone();
        b.iter(|| {
            let mut page = PageMut::new(&mut buf).unwrap();
            page.compact();
        })
    });
    group.bench_function("validate", |b| {
        b.iter(|| Page::new(black_box(&full)).unwrap().record_count())
    });
    group.finish();
}

criterion_group!(benches, page_ops);
criterion_main!(benches);
