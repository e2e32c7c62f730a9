//! `BackendPool`: many threads each waiting for their own reads, on a real file, with
//! both backend kinds.

use std::sync::Arc;

use super::common;

use edbstress_io::{
    Access, AlignedBuf, BackendKind, BackendPool, DataFile, FileId, IoClass, IoMode, IoOp,
    IoRequest, IoUringBackend,
};

const BLOCK: usize = 4096;
const BLOCKS: u64 = 256;

/// A file of `BLOCKS` blocks, each filled with its own number.
fn numbered_file(dir: &std::path::Path) -> Arc<DataFile> {
    let path = dir.join("blocks.dat");
    let file = DataFile::create_new(&path, IoMode::Buffered).unwrap();
    let blocks: Vec<u8> = (0..BLOCKS).flat_map(|block| [block as u8; BLOCK]).collect();
    common::pwrite(file.path(), &blocks, 0);
    drop(file);
    Arc::new(DataFile::open(&path, IoMode::Buffered, Access::ReadOnly).unwrap())
}

fn read(pool: &BackendPool, block: u64, instance: u16) -> AlignedBuf {
    let completion = pool
        .run(IoRequest {
            file: FileId(0),
            op: IoOp::Read,
            offset: block * BLOCK as u64,
            buf: AlignedBuf::new(BLOCK),
            len: BLOCK,
            class: IoClass::DbRead,
            instance,
            tag: block,
        })
        .unwrap();
    assert_eq!(completion.result.unwrap(), BLOCK);
    assert_eq!(completion.tag, block);
    completion.buf
}

/// 6 threads reading at once through a pool of at most `max_backends` backends (fewer
/// than the threads: callers wait for a backend).
fn concurrent_reads(kind: BackendKind, max_backends: usize) {
    let dir = tempfile::tempdir().unwrap();
    let file = numbered_file(dir.path());
    let pool = BackendPool::new(kind, 1, max_backends, vec![file]).unwrap();
    assert_eq!(pool.name(), kind.name());
    assert_eq!(pool.kind(), kind);
    std::thread::scope(|scope| {
        for t in 0..6u64 {
            let pool = &pool;
            scope.spawn(move || {
                for i in 0..100u64 {
                    let block = (t * 37 + i * 11) % BLOCKS;
                    let buf = read(pool, block, 2);
                    assert!(buf.iter().all(|&b| b == block as u8), "block {block}");
                }
            });
        }
    });
    let stats = pool.stats();
    let reads = stats.get(2, IoClass::DbRead).expect("reads counted");
    assert_eq!(
        (reads.ops, reads.bytes, reads.errors),
        (600, 600 * BLOCK as u64, 0)
    );
    assert_eq!(reads.latency.count(), 600);
    assert!(
        (1..=max_backends).contains(&pool.backends()),
        "{}",
        pool.backends()
    );
}

#[test]
fn threads_pool_serves_concurrent_readers() {
    concurrent_reads(BackendKind::Threads, 8);
    concurrent_reads(BackendKind::Threads, 2);
}

#[test]
fn io_uring_pool_serves_concurrent_readers() {
    if let Err(e) = IoUringBackend::new(1) {
        eprintln!(
            "SKIP io_uring_pool_serves_concurrent_readers: io_uring is not usable here ({e})"
        );
        return;
    }
    concurrent_reads(BackendKind::IoUring, 8);
    concurrent_reads(BackendKind::IoUring, 2);
}

#[test]
fn auto_resolves_to_a_concrete_kind_and_errors_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = numbered_file(dir.path());
    let pool = BackendPool::new(BackendKind::Auto, 1, 2, vec![file]).unwrap();
    assert_ne!(pool.kind(), BackendKind::Auto);
    // A length beyond the buffer is refused and leaves the backend usable.
    let refused = pool.run(IoRequest {
        file: FileId(0),
        op: IoOp::Read,
        offset: 0,
        buf: AlignedBuf::new(BLOCK),
        len: 2 * BLOCK,
        class: IoClass::DbRead,
        instance: 0,
        tag: 0,
    });
    assert!(refused.is_err());
    // Past the end of the file: a short (empty) read, reported as such.
    let past = pool
        .run(IoRequest {
            file: FileId(0),
            op: IoOp::Read,
            offset: BLOCKS * BLOCK as u64,
            buf: AlignedBuf::new(BLOCK),
            len: BLOCK,
            class: IoClass::DbRead,
            instance: 0,
            tag: 1,
        })
        .unwrap();
    assert_eq!(past.result.unwrap(), 0);
    assert!(read(&pool, 3, 0).iter().all(|&b| b == 3));
    assert_eq!(pool.backends(), 1, "one caller at a time needs one backend");
}
