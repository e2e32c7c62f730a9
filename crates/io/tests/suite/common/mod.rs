//! Helpers shared by the integration tests.
#![allow(dead_code)] // the suite and vectored_power_cut's binary use different subsets

use std::path::Path;

use edbstress_io::{
    BackendKind, DataFile, IoBackend, IoError, IoMode, IoUringBackend, ThreadPoolBackend,
};

/// SplitMix64: deterministic pseudo-random numbers without a dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A random permutation of 0..n.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
        v
    }
}

/// The explicit backend kinds this machine can run; io_uring is skipped with a message
/// when the kernel refuses it (the Auto fallback is tested separately).
pub fn backends(depth: usize) -> Vec<Box<dyn IoBackend>> {
    let mut out: Vec<Box<dyn IoBackend>> = Vec::new();
    match IoUringBackend::new(depth) {
        Ok(b) => out.push(Box::new(b)),
        Err(e) => eprintln!("skipping io_uring backend: {e}"),
    }
    out.push(Box::new(
        ThreadPoolBackend::new(depth).expect("thread pool backend"),
    ));
    out
}

/// Kinds to loop over in tests that construct backends themselves.
pub fn kinds() -> Vec<BackendKind> {
    let mut kinds = vec![BackendKind::Threads];
    match IoUringBackend::new(1) {
        Ok(_) => kinds.insert(0, BackendKind::IoUring),
        Err(e) => eprintln!("skipping io_uring backend: {e}"),
    }
    kinds
}

/// Modes to test in `dir`: Direct only where the filesystem supports it.
pub fn modes(dir: &Path) -> Vec<IoMode> {
    let probe = dir.join("direct-probe");
    match DataFile::create_new(&probe, IoMode::Direct) {
        Ok(_) => {
            std::fs::remove_file(&probe).expect("remove probe");
            vec![IoMode::Direct, IoMode::Buffered]
        }
        Err(IoError::DirectIoUnsupported { .. }) => {
            eprintln!(
                "{} does not support O_DIRECT; testing buffered only",
                dir.display()
            );
            vec![IoMode::Buffered]
        }
        Err(e) => panic!("probe file: {e}"),
    }
}

/// Fills `block` with bytes derived from its block number and a generation, so that
/// any misplaced or stale block is detected.
pub fn fill_block(block: &mut [u8], number: u64, generation: u64) {
    let mut rng = Rng(number.wrapping_mul(1_000_003) ^ generation.rotate_left(32));
    for chunk in block.chunks_mut(8) {
        let v = rng.next().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Reads `buf.len()` bytes at `offset` of the file at `path` with a plain `pread`, to
/// check what a backend wrote without going through one.
#[allow(clippy::disallowed_methods)] // the tests look at files behind the backends
pub fn pread(path: &Path, buf: &mut [u8], offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).expect("open for pread");
    file.read_exact_at(buf, offset).expect("pread");
}

/// Writes `buf` at `offset` of the file at `path` with a plain `pwrite` and makes it
/// durable: a test's starting content, laid down without a backend.
#[allow(clippy::disallowed_methods)] // the tests set files up behind the backends
pub fn pwrite(path: &Path, buf: &[u8], offset: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for pwrite");
    file.write_all_at(buf, offset).expect("pwrite");
    file.sync_data().expect("fdatasync");
}
