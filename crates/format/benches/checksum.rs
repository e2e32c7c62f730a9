//! Throughput of page checksum computation and verification.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use edbstress_format::{
    PageSize, PageVerdict, Pgno, compute_page_checksums, seal_page, verify_page,
};
use std::hint::black_box;

fn sealed_page(size: PageSize, pgno: Pgno) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut page: Vec<u8> = (0..size.bytes())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    seal_page(&mut page, pgno);
    page
}

fn checksum(c: &mut Criterion) {
    let mut group = c.benchmark_group("page_checksum");
    for size in [PageSize::K8, PageSize::K32] {
        let pgno = Pgno::new(4711);
        let page = sealed_page(size, pgno);
        assert_eq!(verify_page(&page, pgno), PageVerdict::Valid);
        group.throughput(Throughput::Bytes(size.bytes() as u64));
        group.bench_with_input(BenchmarkId::new("compute", size), &page, |b, page| {
            b.iter(|| compute_page_checksums(black_box(page), black_box(pgno)))
        });
        group.bench_with_input(BenchmarkId::new("verify", size), &page, |b, page| {
            b.iter(|| verify_page(black_box(page), black_box(pgno)))
        });
    }
    // Pages not in any CPU cache, as after a direct read or long after a write: 256 MiB
    // of sealed pages visited in a scattered order.
    let size = PageSize::K32;
    let count = (256 << 20) / size.bytes();
    let template = sealed_page(size, Pgno::NONE);
    let mut pages = vec![0u8; count * size.bytes()];
    for (pgno, page) in pages.chunks_exact_mut(size.bytes()).enumerate() {
        page.copy_from_slice(&template);
        page[100] = pgno as u8;
        seal_page(page, Pgno::new(pgno as u32));
    }
    let mut next = 0usize;
    group.throughput(Throughput::Bytes(size.bytes() as u64));
    group.bench_function(BenchmarkId::new("verify_cold", size), |b| {
        b.iter(|| {
            next = (next + 7919) % count;
            let page = &pages[next * size.bytes()..][..size.bytes()];
            verify_page(black_box(page), Pgno::new(next as u32))
        })
    });
    group.finish();
}

criterion_group!(benches, checksum);
criterion_main!(benches);
