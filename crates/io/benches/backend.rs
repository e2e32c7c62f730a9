//! 4 KiB random reads at depth 32 on a 64 MiB file through each backend (IOPS as
//! criterion's element throughput), and the cost of recording a latency.
//!
//! The file goes to a temporary directory under `EDBSTRESS_BENCH_DIR` (default: the
//! system temp dir) and is read with O_DIRECT when the filesystem allows it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edbstress_io::blocking::FileIo;
use edbstress_io::{
    AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoError, IoMode, IoOp,
    IoRequest, IoStats, LatencyHistogram, open_backend,
};

const FILE_BYTES: u64 = 64 << 20;
const BLOCK: usize = 4096;
const DEPTH: usize = 32;

/// xorshift64*: cheap, deterministic offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A 64 MiB file with real data written (unwritten extents would be read as zeroes
/// without touching the device), opened in `mode`, or None if the filesystem refuses it.
fn data_file(dir: &std::path::Path, mode: IoMode) -> Option<DataFile> {
    let path = dir.join(format!("bench-{mode:?}.dat"));
    let file = match DataFile::create_new(&path, mode) {
        Ok(file) => file,
        Err(IoError::DirectIoUnsupported { .. }) => {
            eprintln!(
                "O_DIRECT unsupported in {}: skipping direct reads",
                dir.display()
            );
            return None;
        }
        Err(e) => panic!("create bench file: {e}"),
    };
    file.allocate(FILE_BYTES).expect("allocate");
    let mut chunk = AlignedBuf::new(1 << 20);
    for (i, b) in chunk.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let mut io = FileIo::offline(&file).expect("fill backend");
    let len = chunk.len();
    for offset in (0..FILE_BYTES).step_by(len) {
        io.write_all(IoClass::OfflineWrite, &mut chunk, len, offset, false)
            .expect("fill");
    }
    io.sync(IoClass::OfflineWrite).expect("sync");
    Some(file)
}

/// `count` random 4 KiB reads keeping DEPTH in flight, recycling the buffers.
fn random_reads(backend: &mut dyn IoBackend, file: FileId, count: u64, rng: &mut Rng) -> Duration {
    let blocks = FILE_BYTES / BLOCK as u64;
    let mut spare: Vec<AlignedBuf> = (0..DEPTH).map(|_| AlignedBuf::new(BLOCK)).collect();
    let mut done = Vec::with_capacity(DEPTH);
    let (mut submitted, mut completed) = (0u64, 0u64);
    let start = Instant::now();
    while completed < count {
        while submitted < count && backend.in_flight() < backend.depth() {
            let buf = spare.pop().expect("a buffer per slot");
            let req = IoRequest {
                file,
                op: IoOp::Read,
                offset: (rng.next() % blocks) * BLOCK as u64,
                len: BLOCK,
                buf,
                class: IoClass::DbRead,
                instance: 0,
                tag: submitted,
            };
            backend.submit(req).expect("submit");
            submitted += 1;
        }
        completed += backend.wait(1, &mut done).expect("wait") as u64;
        for c in done.drain(..) {
            assert_eq!(c.result.expect("read"), BLOCK);
            spare.push(c.buf);
        }
    }
    start.elapsed()
}

fn backends(c: &mut Criterion) {
    let base =
        std::env::var_os("EDBSTRESS_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into());
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    // Direct: what the device does. Buffered: the file sits in the page cache, so the
    // numbers show each backend's own CPU cost per I/O.
    for (mode, group_name, seconds) in [
        (IoMode::Direct, "random_read_4k_qd32_direct", 3),
        (IoMode::Buffered, "random_read_4k_qd32_page_cache", 2),
    ] {
        let Some(file) = data_file(dir.path(), mode) else {
            continue;
        };
        let mut group = c.benchmark_group(group_name);
        group
            .throughput(Throughput::Elements(1))
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(seconds));
        for kind in [BackendKind::IoUring, BackendKind::Threads] {
            let mut backend = match open_backend(kind, DEPTH) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("skipping {kind}: {e}");
                    continue;
                }
            };
            let id = backend.register(&file).expect("register");
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            group.bench_function(kind.name(), |b| {
                b.iter_custom(|iters| random_reads(backend.as_mut(), id, iters, &mut rng))
            });
            let reads = backend.stats().total(IoClass::DbRead);
            eprintln!(
                "{kind} {mode:?}: {} reads, latency mean {:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
                reads.ops,
                reads.latency.mean_ns() / 1e3,
                reads.latency.percentile_ns(50.0) as f64 / 1e3,
                reads.latency.percentile_ns(99.0) as f64 / 1e3,
                reads.latency.max_ns() as f64 / 1e3,
            );
        }
        group.finish();
    }
}

fn recording(c: &mut Criterion) {
    let mut rng = Rng(42);
    // Latencies spread from ~1 µs to ~67 ms, so the hot path sees varied buckets.
    let values: Vec<u64> = (0..4096).map(|_| 1_000 + rng.next() % (1 << 26)).collect();
    let mut group = c.benchmark_group("record");
    group
        .throughput(Throughput::Elements(values.len() as u64))
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let mut hist = LatencyHistogram::new();
    group.bench_function("latency_histogram", |b| {
        b.iter(|| {
            for &v in &values {
                hist.record(black_box(v));
            }
        })
    });
    let mut stats = IoStats::new();
    group.bench_function("io_stats", |b| {
        b.iter(|| {
            for (i, &v) in values.iter().enumerate() {
                let class = IoClass::ALL[i & 3];
                stats.record(black_box((i & 1) as u16), class, 4096, black_box(v), true);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, backends, recording);
criterion_main!(benches);
