//! B+tree operations through an instance on a warm cache (every page in memory, so the
//! figures are CPU cost, not I/O): point get of a message, seek to a mailbox's next
//! message, a lazy-commit insert of a small message (tree insert plus log record), and
//! a 64 KiB message inserted and deleted again (long-value pages and the free list).
//!
//! The 64 MiB database goes to a temporary directory under `EDBSTRESS_BENCH_DIR`
//! (default: the system temp dir).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::{Durability, Instance, InstanceConfig, TxnOp};
use edbstress_engine::{PrepareOptions, PreparePlan};
use edbstress_io::IoMode;

/// xorshift64*: cheap, deterministic picks.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

fn btree(c: &mut Criterion) {
    let base = std::env::var_os("EDBSTRESS_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    let layout = InstanceLayout::new(
        InstanceId::new(1),
        &dir.path().join("db"),
        &dir.path().join("logs"),
    );
    // Buffered I/O: the bench measures the tree code, and tmpfs refuses O_DIRECT.
    let options = PrepareOptions {
        database_bytes: 64 << 20,
        mailboxes: 100,
        io_mode: IoMode::Buffered,
        ..PrepareOptions::default()
    };
    PreparePlan::check(vec![layout.clone()], options)
        .expect("plan")
        .execute(&mut |_| {})
        .expect("prepare");
    let mut config = InstanceConfig::new(layout);
    config.io_mode = IoMode::Buffered;
    config.cache_min_bytes = 256 << 20;
    config.cache_max_bytes = 256 << 20;
    let instance = Instance::open(config).expect("open");
    let mailboxes = u64::from(instance.mailbox_count());
    let keys = instance.all_keys().expect("keys");
    // Warm: touch every message once.
    for key in &keys {
        instance.read(*key, false).expect("warm read");
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut group = c.benchmark_group("btree_warm");
    group.bench_function("get", |b| {
        b.iter(|| {
            let key = keys[rng.below(keys.len() as u64) as usize];
            black_box(instance.read(key, false).expect("read"))
        })
    });
    group.bench_function("seek", |b| {
        b.iter(|| {
            let mailbox = rng.below(mailboxes) as u32;
            let from = rng.below(instance.next_message_id());
            black_box(instance.seek_message(mailbox, from).expect("seek"))
        })
    });
    let props = [7u8; 300];
    let body = [9u8; 2048];
    group.bench_function("insert_lazy_commit", |b| {
        b.iter(|| {
            let mailbox = rng.below(mailboxes) as u32;
            let op = TxnOp::Insert {
                mailbox,
                props: &props,
                body: &body,
            };
            black_box(instance.commit(&[op], Durability::Lazy).expect("insert"))
        })
    });
    // A 64 KiB message in and out again: long-value chunks, right-edge splits,
    // pages taken from and given back to the free list, emptied leaves released.
    let large = vec![5u8; 64 << 10];
    group.bench_function("insert_delete_64k_lazy", |b| {
        b.iter(|| {
            let mailbox = rng.below(mailboxes) as u32;
            let op = TxnOp::Insert {
                mailbox,
                props: &props,
                body: &large,
            };
            let key = instance
                .commit(&[op], Durability::Lazy)
                .expect("insert")
                .inserted[0];
            black_box(
                instance
                    .commit(&[TxnOp::Delete { key }], Durability::Lazy)
                    .expect("delete"),
            )
        })
    });
    group.finish();
    instance.shutdown().expect("shutdown");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = btree
}
criterion_main!(benches);
