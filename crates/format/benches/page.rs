//! Page operations on a 32 KiB page: binary search of a full page (in CPU cache, and
//! cold: one of many pages whose records were inserted out of key order, as a branch
//! page's are), insert into the middle, delete and re-insert, replace data, compaction,
//! and validating a page.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use edbstress_format::Pgno;
use edbstress_format::page::{Page, PageMut, flags};

const PAGE: usize = 32 * 1024;

fn key(i: u32) -> [u8; 8] {
    // Big-endian keys sort like the numbers: the page search order.
    (u64::from(i) * 2).to_be_bytes()
}

/// A page filled with 16-byte-data records at even keys; returns it and its count.
fn full_page() -> (Vec<u8>, u32) {
    let mut buf = vec![0u8; PAGE];
    let mut page = PageMut::format(&mut buf, Pgno::new(7), 1, 0, 1);
    let mut n = 0;
    while page.append(&key(n), &[n as u8; 16]).is_ok() {
        n += 1;
    }
    (buf, n)
}

/// A full page of 8-byte keys with 4-byte data, inserted in a scattered order; returns
/// it and its record count.
fn scattered_branch_page() -> (Vec<u8>, u32) {
    let mut buf = vec![0u8; PAGE];
    let mut page = PageMut::format(&mut buf, Pgno::new(7), 1, flags::BRANCH, 1);
    // 4,096 slots visited by a stride coprime to them: every key once, out of order.
    let mut n = 0;
    for step in 0..4096u32 {
        let k = key(step.wrapping_mul(2557) % 4096);
        let at = match page.search(&k) {
            Ok(_) => continue,
            Err(at) => at,
        };
        if page.insert(at, &k, &step.to_le_bytes()).is_err() {
            break;
        }
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
    // A branch page of a cache much larger than the CPU's: 256 MiB of full pages of
    // 8-byte keys and 4-byte child numbers, inserted in a scattered key order (bodies
    // then lie in insertion order, not key order), each search on another page.
    let (branch, branch_count) = scattered_branch_page();
    let copies = (256 << 20) / PAGE;
    let branches = branch.repeat(copies);
    group.bench_function("search_cold", |b| {
        let (mut i, mut p) = (0u32, 0usize);
        b.iter(|| {
            i = (i + 7919) % branch_count;
            p = (p + 4099) % copies;
            let page = Page::new_unvalidated(&branches[p * PAGE..][..PAGE]).unwrap();
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
