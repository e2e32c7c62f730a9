//! Raw storage measurements (`edbstress probe`): what the storage under a path can do
//! with the I/O shapes of a mailbox database, through the same backends as every other
//! command, so a user sees the ceiling next to the transactional results.
//!
//! A measurement runs on a [`ProbeFile`]: a file of ours, identified by a signature block
//! at offset 0 and filled with data before the first measurement (reading unwritten
//! extents returns zeroes without touching the device, which would flatter reads).
//! Requests go to the data region after the first MiB, so writes never touch the
//! signature.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::{
    Access, AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoCompletion, IoError,
    IoMode, IoOp, IoRequest, LatencyHistogram, available_space, open_backend,
};

/// File name `edbstress probe` uses in the directory it measures.
pub const PROBE_FILE_NAME: &str = "edbstress-probe.dat";
/// Where measurements start in a probe file: the first MiB holds the signature block.
pub const PROBE_DATA_START: u64 = 1 << 20;
/// Smallest probe file: the signature MiB and 1 MiB of data.
pub const MIN_PROBE_FILE_BYTES: u64 = 2 << 20;
/// First bytes of a probe file; anything else at offset 0 is someone else's file.
const PROBE_MAGIC: &[u8; 16] = b"EDBSTRESS-PROBE1";
/// Signature block size (one O_DIRECT-aligned block).
const SIGNATURE_BYTES: usize = 4096;
/// Request size used to fill a new probe file.
const FILL_CHUNK: usize = 1 << 20;
/// Requests in flight while filling.
const FILL_DEPTH: usize = 8;

/// The access pattern of one measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbePattern {
    /// Random reads of `block_size` at block-aligned offsets.
    RandRead,
    /// Random writes of `block_size` at block-aligned offsets.
    RandWrite,
    /// Sequential reads, wrapping around the data region.
    Read,
    /// Sequential writes, wrapping around the data region.
    Write,
    /// Sequential writes at depth 1, each made durable before the next (a log commit).
    LogWrite,
}

impl ProbePattern {
    /// "randread", "randwrite", "read", "write" or "logwrite".
    pub const fn name(self) -> &'static str {
        match self {
            ProbePattern::RandRead => "randread",
            ProbePattern::RandWrite => "randwrite",
            ProbePattern::Read => "read",
            ProbePattern::Write => "write",
            ProbePattern::LogWrite => "logwrite",
        }
    }

    /// Whether the pattern writes.
    pub const fn is_write(self) -> bool {
        !matches!(self, ProbePattern::RandRead | ProbePattern::Read)
    }
}

impl FromStr for ProbePattern {
    type Err = String;

    /// Accepts the names of [`ProbePattern::name`], ignoring case.
    fn from_str(s: &str) -> Result<ProbePattern, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "randread" => Ok(ProbePattern::RandRead),
            "randwrite" => Ok(ProbePattern::RandWrite),
            "read" => Ok(ProbePattern::Read),
            "write" => Ok(ProbePattern::Write),
            "logwrite" => Ok(ProbePattern::LogWrite),
            _ => Err(format!(
                "unknown pattern '{s}': use randread, randwrite, read, write or logwrite"
            )),
        }
    }
}

/// How a `logwrite` makes each write durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogSync {
    /// A write, then `fdatasync` (what the engine's log does).
    #[default]
    Fdatasync,
    /// A write on a descriptor opened with `O_DSYNC` (durable when it completes).
    Dsync,
}

impl LogSync {
    /// "fdatasync" or "dsync".
    pub const fn name(self) -> &'static str {
        match self {
            LogSync::Fdatasync => "fdatasync",
            LogSync::Dsync => "dsync",
        }
    }
}

/// One measurement to make.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeSpec {
    /// Access pattern.
    pub pattern: ProbePattern,
    /// Bytes per request (a multiple of 4096).
    pub block_size: usize,
    /// Requests kept in flight (`logwrite` always uses 1).
    pub queue_depth: usize,
    /// How long to measure.
    pub duration: Duration,
    /// Durability of `logwrite` writes (ignored by the other patterns).
    pub log_sync: LogSync,
    /// Backend to drive the requests.
    pub backend: BackendKind,
}

/// What one measurement found. Latencies are per request (for `logwrite`, per durable
/// write: write plus sync).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Access pattern.
    pub pattern: ProbePattern,
    /// Bytes per request.
    pub block_size: usize,
    /// Requests in flight.
    pub queue_depth: usize,
    /// `logwrite` durability, else null.
    pub log_sync: Option<LogSync>,
    /// Backend that ran it ("io_uring" or "threads").
    pub backend: String,
    /// Whether the file was opened with `O_DIRECT`.
    pub direct: bool,
    /// Requests completed.
    pub ops: u64,
    /// Bytes transferred.
    pub bytes: u64,
    /// Wall-clock seconds measured.
    pub seconds: f64,
    /// Requests per second.
    pub iops: f64,
    /// Megabytes (MiB) per second.
    pub mb_per_sec: f64,
    /// Mean latency in milliseconds.
    pub avg_latency_ms: f64,
    /// Median latency in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency in milliseconds.
    pub p99_ms: f64,
    /// 99.9th percentile latency in milliseconds.
    pub p999_ms: f64,
    /// Largest latency in milliseconds.
    pub max_ms: f64,
    /// User plus system CPU seconds of the whole process during the measurement.
    pub cpu_seconds: f64,
    /// CPU microseconds per request (`cpu_seconds / ops`).
    pub cpu_us_per_op: f64,
}

/// A probe file: ours (signature block), filled with data, open for the measurements.
#[derive(Debug)]
pub struct ProbeFile {
    file: DataFile,
    size: u64,
    created: bool,
}

impl ProbeFile {
    /// Opens the probe file at `path`, or creates it (`O_EXCL`) with `size` bytes (rounded
    /// down to whole MiB) of data after checking the free space. An existing file is used
    /// only if it carries our signature (its recorded size then wins over `size`; if it
    /// was never completely filled it is filled again); any other file is refused, never
    /// overwritten.
    pub fn open_or_create(path: &Path, size: u64, mode: IoMode) -> Result<ProbeFile, IoError> {
        let size = size / FILL_CHUNK as u64 * FILL_CHUNK as u64;
        if size < MIN_PROBE_FILE_BYTES {
            return Err(IoError::ProbeTooSmall {
                size,
                min: MIN_PROBE_FILE_BYTES,
            });
        }
        match DataFile::create_new(path, mode) {
            Ok(file) => {
                let dir = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                let available = available_space(dir)?;
                if available < size {
                    drop(file);
                    let _ = fs::remove_file(path); // ours: just created, still empty
                    return Err(IoError::NoSpace {
                        path: path.to_path_buf(),
                        needed: size,
                        available,
                    });
                }
                let probe = ProbeFile {
                    file,
                    size,
                    created: true,
                };
                if let Err(err) = probe.fill() {
                    let _ = probe.remove();
                    return Err(err);
                }
                Ok(probe)
            }
            Err(IoError::AlreadyExists { .. }) => {
                let file = DataFile::open(path, mode, Access::ReadWrite)?;
                let Some((recorded, filled)) = read_signature(&file)? else {
                    return Err(IoError::ForeignFile {
                        path: path.to_path_buf(),
                    });
                };
                let probe = ProbeFile {
                    file,
                    size: recorded,
                    created: false,
                };
                if !filled || probe.file.len()? < recorded {
                    probe.fill()?;
                }
                Ok(probe)
            }
            Err(err) => Err(err),
        }
    }

    /// The open file.
    pub fn file(&self) -> &DataFile {
        &self.file
    }

    /// Total size in bytes (signature MiB included).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether this call created the file (rather than reusing one of ours).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Deletes the file (it is ours: it carries our signature).
    pub fn remove(self) -> Result<(), IoError> {
        let path = self.file.path().to_path_buf();
        drop(self.file);
        fs::remove_file(&path).map_err(|e| IoError::file_op(&path, "remove", e))
    }

    /// Writes the signature (marked unfilled), the data region, then the signature marked
    /// filled, so an interrupted fill is redone next time rather than trusted.
    fn fill(&self) -> Result<(), IoError> {
        write_signature(&self.file, self.size, false)?;
        self.file.allocate(self.size)?;
        let mut backend = open_backend(BackendKind::Auto, FILL_DEPTH)?;
        let id = backend.register(&self.file)?;
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut free: Vec<AlignedBuf> = (0..FILL_DEPTH)
            .map(|_| {
                let mut buf = AlignedBuf::new(FILL_CHUNK);
                fill_pattern(&mut buf, &mut seed);
                buf
            })
            .collect();
        let mut done = Vec::with_capacity(FILL_DEPTH);
        let mut offset = PROBE_DATA_START;
        // The size is whole MiB, so every request is a full chunk.
        while offset < self.size || backend.in_flight() > 0 {
            while offset < self.size {
                let Some(buf) = free.pop() else { break };
                let req = request(id, IoOp::Write, offset, buf, FILL_CHUNK, IoClass::DbWrite);
                backend.submit(req)?;
                offset += FILL_CHUNK as u64;
            }
            backend.wait(1, &mut done)?;
            for c in done.drain(..) {
                check_completion(&self.file, &c, FILL_CHUNK)?;
                free.push(c.buf);
            }
        }
        self.file.sync_data()?;
        write_signature(&self.file, self.size, true)?;
        self.file.sync_data()
    }
}

/// The path of the probe file in `dir`.
pub fn probe_path(dir: &Path) -> PathBuf {
    dir.join(PROBE_FILE_NAME)
}

/// Reads the signature block: `Some((size, filled))` for one of our files.
fn read_signature(file: &DataFile) -> Result<Option<(u64, bool)>, IoError> {
    if file.len()? < SIGNATURE_BYTES as u64 {
        return Ok(None);
    }
    let mut block = AlignedBuf::new(SIGNATURE_BYTES);
    file.read_exact_at(&mut block, 0)?;
    if &block[..16] != PROBE_MAGIC {
        return Ok(None);
    }
    let mut size = [0u8; 8];
    size.copy_from_slice(&block[16..24]);
    let size = u64::from_le_bytes(size);
    if size < MIN_PROBE_FILE_BYTES || size % FILL_CHUNK as u64 != 0 {
        return Ok(None);
    }
    Ok(Some((size, block[24] == 1)))
}

fn write_signature(file: &DataFile, size: u64, filled: bool) -> Result<(), IoError> {
    let mut block = AlignedBuf::new(SIGNATURE_BYTES);
    block[..16].copy_from_slice(PROBE_MAGIC);
    block[16..24].copy_from_slice(&size.to_le_bytes());
    block[24] = u8::from(filled);
    let note = b"edbstress probe test file; safe to delete";
    block[32..32 + note.len()].copy_from_slice(note);
    file.write_all_at(&block, 0)
}

/// Incompressible bytes, so compressing or deduplicating storage is measured honestly.
fn fill_pattern(buf: &mut [u8], seed: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        let word = splitmix(seed).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// splitmix64: a cheap, well-mixed generator for offsets and data.
#[inline]
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
fn request(
    file: FileId,
    op: IoOp,
    offset: u64,
    buf: AlignedBuf,
    len: usize,
    class: IoClass,
) -> IoRequest {
    IoRequest {
        file,
        op,
        offset,
        buf,
        len,
        class,
        instance: 0,
        tag: 0,
    }
}

/// A failed or short transfer ends the measurement with an error naming the file.
fn check_completion(file: &DataFile, c: &IoCompletion, want: usize) -> Result<(), IoError> {
    let source = match &c.result {
        Ok(n) if *n == want || c.op == IoOp::Fsync => return Ok(()),
        Ok(n) => io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short transfer: {n} of {want} bytes"),
        ),
        Err(e) => io::Error::new(e.kind(), e.to_string()),
    };
    Err(IoError::Io {
        path: file.path().to_path_buf(),
        op: c.op.name(),
        offset: c.offset,
        source,
    })
}

/// User plus system CPU seconds of this process (all threads), from getrusage.
pub fn process_cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Runs one measurement on `probe`.
pub fn run_probe(probe: &ProbeFile, spec: &ProbeSpec) -> Result<ProbeResult, IoError> {
    let block = spec.block_size;
    if block == 0 || block % 4096 != 0 || block > crate::MAX_REQUEST_BYTES {
        return Err(IoError::BadProbeSpec(format!(
            "block size {block} must be a positive multiple of 4096 bytes (at most 1 GiB)"
        )));
    }
    let region_bytes = probe.size - PROBE_DATA_START;
    let blocks = region_bytes / block as u64;
    if blocks == 0 {
        return Err(IoError::BadProbeSpec(format!(
            "block size {block} is larger than the probe file's data region \
             ({region_bytes} bytes); use a larger --size"
        )));
    }
    if spec.duration.is_zero() {
        return Err(IoError::BadProbeSpec(
            "the duration must be positive".into(),
        ));
    }
    let depth = if spec.pattern == ProbePattern::LogWrite {
        1
    } else {
        spec.queue_depth
    };
    let mut backend = open_backend(spec.backend, depth)?;
    let data = probe.file();
    let dsync_file;
    let target = if spec.pattern == ProbePattern::LogWrite && spec.log_sync == LogSync::Dsync {
        dsync_file = DataFile::open_dsync(data.path(), data.mode())?;
        &dsync_file
    } else {
        data
    };
    let id = backend.register(target)?;
    let region = Region {
        start: PROBE_DATA_START,
        block: block as u64,
        blocks,
    };
    let measured = if spec.pattern == ProbePattern::LogWrite {
        log_writes(backend.as_mut(), target, id, &region, spec)?
    } else {
        queued(backend.as_mut(), target, id, &region, spec, depth)?
    };
    let Measured {
        ops,
        bytes,
        seconds,
        cpu_seconds,
        latency,
    } = measured;
    let ms = |ns: u64| ns as f64 / 1e6;
    let per_sec = |n: f64| if seconds > 0.0 { n / seconds } else { 0.0 };
    Ok(ProbeResult {
        pattern: spec.pattern,
        block_size: block,
        queue_depth: depth,
        log_sync: (spec.pattern == ProbePattern::LogWrite).then_some(spec.log_sync),
        backend: backend.name().to_string(),
        direct: data.mode() == IoMode::Direct,
        ops,
        bytes,
        seconds,
        iops: per_sec(ops as f64),
        mb_per_sec: per_sec(bytes as f64 / (1u64 << 20) as f64),
        avg_latency_ms: latency.mean_ns() / 1e6,
        p50_ms: ms(latency.percentile_ns(50.0)),
        p99_ms: ms(latency.percentile_ns(99.0)),
        p999_ms: ms(latency.percentile_ns(99.9)),
        max_ms: ms(latency.max_ns()),
        cpu_seconds,
        cpu_us_per_op: if ops > 0 {
            cpu_seconds * 1e6 / ops as f64
        } else {
            0.0
        },
    })
}

/// The data region in whole blocks.
struct Region {
    start: u64,
    block: u64,
    blocks: u64,
}

/// What a measurement loop counted.
struct Measured {
    ops: u64,
    bytes: u64,
    seconds: f64,
    cpu_seconds: f64,
    latency: LatencyHistogram,
}

/// Keeps `depth` requests in flight for the duration, resubmitting each buffer as its
/// completion arrives: no allocation, one `wait` per batch of completions. Latencies and
/// counts come from the backend's own per-class statistics (no second recording).
fn queued(
    backend: &mut dyn IoBackend,
    file: &DataFile,
    id: FileId,
    region: &Region,
    spec: &ProbeSpec,
    depth: usize,
) -> Result<Measured, IoError> {
    let (op, class) = if spec.pattern.is_write() {
        (IoOp::Write, IoClass::DbWrite)
    } else {
        (IoOp::Read, IoClass::DbRead)
    };
    let random = matches!(
        spec.pattern,
        ProbePattern::RandRead | ProbePattern::RandWrite
    );
    let block = region.block as usize;
    let mut seed = 0x5DEE_CE66_D1CE_4E5Bu64;
    let mut next_block = 0u64;
    let mut next_offset = |seed: &mut u64| {
        let index = if random {
            // Multiply-shift maps 64 random bits onto 0..blocks without a division.
            ((u128::from(splitmix(seed)) * u128::from(region.blocks)) >> 64) as u64
        } else {
            let i = next_block;
            next_block = if i + 1 == region.blocks { 0 } else { i + 1 };
            i
        };
        region.start + index * region.block
    };
    let mut bufs: Vec<AlignedBuf> = (0..depth)
        .map(|_| {
            let mut buf = AlignedBuf::new(block);
            fill_pattern(&mut buf, &mut seed);
            buf
        })
        .collect();
    let mut done: Vec<IoCompletion> = Vec::with_capacity(depth);
    backend.take_stats();
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + spec.duration;
    for buf in bufs.drain(..) {
        let offset = next_offset(&mut seed);
        backend.submit(request(id, op, offset, buf, block, class))?;
    }
    let mut failure = None;
    loop {
        backend.wait(1, &mut done)?;
        let stop = Instant::now() >= deadline;
        for c in done.drain(..) {
            if let Err(err) = check_completion(file, &c, block) {
                failure.get_or_insert(err);
            }
            if !stop && failure.is_none() {
                let offset = next_offset(&mut seed);
                backend.submit(request(id, op, offset, c.buf, block, class))?;
            }
        }
        if stop || failure.is_some() {
            break;
        }
    }
    while backend.in_flight() > 0 {
        let n = backend.in_flight();
        backend.wait(n, &mut done)?;
        done.clear();
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    if let Some(err) = failure {
        return Err(err);
    }
    let total = backend.stats().total(class);
    Ok(Measured {
        ops: total.ops,
        bytes: total.bytes,
        seconds,
        cpu_seconds,
        latency: total.latency,
    })
}

/// Sequential writes at depth 1, each durable (fdatasync after it, or `O_DSYNC`) before
/// the next starts; the latency is that of the whole durable write.
fn log_writes(
    backend: &mut dyn IoBackend,
    file: &DataFile,
    id: FileId,
    region: &Region,
    spec: &ProbeSpec,
) -> Result<Measured, IoError> {
    let block = region.block as usize;
    let mut seed = 0x1234_5678_9ABC_DEF0u64;
    let mut buf = AlignedBuf::new(block);
    fill_pattern(&mut buf, &mut seed);
    let mut sync_buf = AlignedBuf::new(0);
    let mut latency = LatencyHistogram::new();
    let mut done: Vec<IoCompletion> = Vec::with_capacity(1);
    let (mut ops, mut bytes, mut next_block) = (0u64, 0u64, 0u64);
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let deadline = start + spec.duration;
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        let offset = region.start + next_block * region.block;
        next_block = (next_block + 1) % region.blocks;
        let req = request(id, IoOp::Write, offset, buf, block, IoClass::LogWrite);
        buf = complete_one(backend, file, req, &mut done, block)?;
        if spec.log_sync == LogSync::Fdatasync {
            let req = request(id, IoOp::Fsync, 0, sync_buf, 0, IoClass::LogWrite);
            sync_buf = complete_one(backend, file, req, &mut done, 0)?;
        }
        latency.record(crate::backend::duration_ns(t0.elapsed()));
        ops += 1;
        bytes += block as u64;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    Ok(Measured {
        ops,
        bytes,
        seconds,
        cpu_seconds,
        latency,
    })
}

/// Submits one request, waits for it and returns its buffer.
fn complete_one(
    backend: &mut dyn IoBackend,
    file: &DataFile,
    req: IoRequest,
    done: &mut Vec<IoCompletion>,
    want: usize,
) -> Result<AlignedBuf, IoError> {
    backend.submit(req)?;
    while done.is_empty() {
        backend.wait(1, done)?;
    }
    let c = done.swap_remove(0);
    check_completion(file, &c, want)?;
    Ok(c.buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: ProbePattern, block_size: usize, depth: usize) -> ProbeSpec {
        ProbeSpec {
            pattern,
            block_size,
            queue_depth: depth,
            duration: Duration::from_millis(300),
            log_sync: LogSync::Fdatasync,
            backend: BackendKind::Auto,
        }
    }

    /// Direct I/O where the temp filesystem allows it (tmpfs does not).
    fn mode(dir: &Path) -> IoMode {
        match DataFile::create_new(dir.join("direct-check"), IoMode::Direct) {
            Ok(_) => IoMode::Direct,
            Err(_) => IoMode::Buffered,
        }
    }

    fn sane(r: &ProbeResult) {
        assert!(r.ops > 0, "{r:?}");
        assert_eq!(r.bytes, r.ops * r.block_size as u64, "{r:?}");
        assert!(r.iops > 0.0 && r.mb_per_sec > 0.0, "{r:?}");
        assert!(r.seconds >= 0.3 && r.seconds < 5.0, "{r:?}");
        assert!(r.avg_latency_ms > 0.0, "{r:?}");
        assert!(r.p50_ms <= r.p99_ms && r.p99_ms <= r.p999_ms, "{r:?}");
        assert!(r.p999_ms <= r.max_ms * 1.001 + 0.001, "{r:?}");
        assert!(r.cpu_seconds >= 0.0 && r.cpu_seconds < 10.0, "{r:?}");
    }

    #[test]
    fn every_pattern_measures_something() {
        let dir = tempfile::tempdir().unwrap();
        let mode = mode(dir.path());
        let path = probe_path(dir.path());
        let probe = ProbeFile::open_or_create(&path, 8 << 20, mode).unwrap();
        assert!(probe.created());
        assert_eq!(probe.size(), 8 << 20);
        for (pattern, block, depth) in [
            (ProbePattern::RandRead, 32 << 10, 32),
            (ProbePattern::RandWrite, 32 << 10, 32),
            (ProbePattern::Read, 1 << 20, 8),
            (ProbePattern::Write, 256 << 10, 8),
            (ProbePattern::LogWrite, 8 << 10, 1),
        ] {
            let r = run_probe(&probe, &spec(pattern, block, depth)).unwrap();
            assert_eq!(r.pattern, pattern);
            assert_eq!(r.queue_depth, depth);
            sane(&r);
        }
        let mut dsync = spec(ProbePattern::LogWrite, 4096, 1);
        dsync.log_sync = LogSync::Dsync;
        dsync.backend = BackendKind::Threads;
        let r = run_probe(&probe, &dsync).unwrap();
        assert_eq!(r.log_sync, Some(LogSync::Dsync));
        assert_eq!(r.backend, "threads");
        sane(&r);
        // The signature survived the writes: the file is reused, not refilled.
        drop(probe);
        let again = ProbeFile::open_or_create(&path, 64 << 20, mode).unwrap();
        assert!(!again.created());
        assert_eq!(again.size(), 8 << 20);
        again.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn refuses_foreign_files_and_bad_specs() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("data.bin");
        fs::write(&foreign, vec![7u8; 3 << 20]).unwrap();
        let err = ProbeFile::open_or_create(&foreign, 8 << 20, IoMode::Buffered).unwrap_err();
        assert!(matches!(err, IoError::ForeignFile { .. }), "{err}");
        assert_eq!(fs::read(&foreign).unwrap(), vec![7u8; 3 << 20]);
        let small = dir.path().join("small.dat");
        let err = ProbeFile::open_or_create(&small, 1 << 20, IoMode::Buffered).unwrap_err();
        assert!(matches!(err, IoError::ProbeTooSmall { .. }), "{err}");
        assert!(!small.exists());

        let probe =
            ProbeFile::open_or_create(&probe_path(dir.path()), 2 << 20, IoMode::Buffered).unwrap();
        for (block, depth) in [(1000, 4), (2 << 20, 4)] {
            let err = run_probe(&probe, &spec(ProbePattern::RandRead, block, depth)).unwrap_err();
            assert!(matches!(err, IoError::BadProbeSpec(_)), "{err}");
        }
    }

    #[test]
    fn an_unfinished_probe_file_is_filled_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = probe_path(dir.path());
        let probe = ProbeFile::open_or_create(&path, 4 << 20, IoMode::Buffered).unwrap();
        write_signature(probe.file(), 4 << 20, false).unwrap();
        probe.file().set_len(2 << 20).unwrap();
        drop(probe);
        let probe = ProbeFile::open_or_create(&path, 4 << 20, IoMode::Buffered).unwrap();
        assert_eq!(probe.file().len().unwrap(), 4 << 20);
        assert_eq!(read_signature(probe.file()).unwrap(), Some((4 << 20, true)));
    }
}
