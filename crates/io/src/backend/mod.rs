//! Pluggable asynchronous I/O backends, in the manner of fio's I/O engines: io_uring, and
//! a portable pool of threads doing pread/pwrite.
//!
//! Both follow the same protocol: `submit` queues requests (each owning its buffer),
//! `flush` or `wait` hands them to the kernel or the workers in one batch, and `wait`
//! returns completions, each giving the buffer back. Every completion is recorded in the
//! backend's [`IoStats`] under its class and instance with its latency measured from
//! `submit` to completion.
//!
//! A read or write is done once: a short transfer (end of file, or a partial transfer
//! the kernel chose) is reported as `Ok(n)` with `n < len`, and the caller decides
//! whether to retry the remainder. Errors are the operating system's, except that an
//! EINVAL on an `O_DIRECT` file is replaced by an error of kind `InvalidInput` wrapping
//! [`IoError::DirectIoUnsupported`] (aligned request) or [`IoError::Misaligned`], which
//! `io::Error::get_ref` and `downcast_ref::<IoError>` recover.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::file::rw_error;
use crate::{AlignedBuf, DataFile, IoClass, IoError, IoMode, IoStats};

mod files;
mod pool;
mod threads;
mod uring;

pub use pool::BackendPool;
pub(crate) use pool::ReservedSlot;
pub use threads::{MAX_WORKER_THREADS, ThreadPoolBackend};
pub use uring::IoUringBackend;

/// Largest queue depth a backend accepts.
pub const MAX_DEPTH: usize = 4096;
/// Largest transfer of one request (1 GiB; Linux moves at most ~2 GiB per call anyway).
pub const MAX_REQUEST_BYTES: usize = 1 << 30;
/// Most buffers one [`VectoredWrite`] carries (Linux's `IOV_MAX`).
pub const MAX_WRITE_BUFFERS: usize = 1024;

/// A file registered with a backend (see [`IoBackend::register`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoOp {
    /// Read `len` bytes at `offset` into the buffer.
    Read,
    /// Write the first `len` bytes of the buffer at `offset`.
    Write,
    /// Write as [`IoOp::Write`], completed only once the data written is durable: one
    /// request timed from submission to the end of its sync (a log write and its
    /// `fdatasync`). Both backends write with `RWF_DSYNC`, the per-write `fdatasync` of
    /// the range written (the same guarantee as `pwrite` then `fdatasync`, one system
    /// call): io_uring in its write, the threads backend with `pwritev2`. The threads
    /// backend does `pwrite` then `fdatasync` (the latter skipped when the write failed)
    /// where `pwritev2`'s flag is unsupported and while the power-cut simulation is
    /// armed (it journals the write and the sync apart).
    WriteSync,
    /// `fdatasync` of the whole file (offset, buffer and length are ignored).
    Fsync,
}

impl IoOp {
    /// "read", "write" or "fdatasync".
    pub const fn name(self) -> &'static str {
        match self {
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::WriteSync => "write+fdatasync",
            IoOp::Fsync => "fdatasync",
        }
    }
}

/// One I/O handed to a backend. The buffer is owned by the backend until the request's
/// completion returns it; for `Fsync` pass `AlignedBuf::new(0)` (which allocates nothing).
#[derive(Debug)]
pub struct IoRequest {
    /// Target file.
    pub file: FileId,
    /// Read, write or fdatasync.
    pub op: IoOp,
    /// Byte offset in the file (at most `i64::MAX`).
    pub offset: u64,
    /// The data to write or the space to read into.
    pub buf: AlignedBuf,
    /// Bytes of `buf` to transfer, `≤ buf.len()` and `≤ MAX_REQUEST_BYTES`.
    pub len: usize,
    /// Accounting class.
    pub class: IoClass,
    /// Accounting instance.
    pub instance: u16,
    /// The caller's cookie, returned in the completion.
    pub tag: u64,
}

/// One write of several buffers, back to back, at one file offset: `pwritev` in the
/// threads backend, `IORING_OP_WRITEV` in io_uring. It is one I/O in every respect:
/// timed from submission to completion, counted once in the stats with its total length,
/// completed once (possibly short, like any write: `Ok(n)` covers the first `n` bytes of
/// the buffers in order), and the power-cut simulation journals, tears and drops it as
/// the single write of the concatenated bytes. It lets a caller write data that lives in
/// separate buffers (cached pages in their own frames) without copying it into one.
///
/// Each buffer is written whole (`len()` bytes); with `O_DIRECT` each must be a multiple
/// of the logical block size (an [`AlignedBuf`] of a multiple of 4096 bytes).
#[derive(Debug)]
pub struct VectoredWrite {
    /// Target file.
    pub file: FileId,
    /// Byte offset in the file where the first buffer goes (at most `i64::MAX`).
    pub offset: u64,
    /// The data: 1 to [`MAX_WRITE_BUFFERS`] buffers, at most [`MAX_REQUEST_BYTES`] in all.
    /// [`IoBackend::submit_vectored`] moves them into the backend; the completion's
    /// `bufs` gives them back in this order.
    pub bufs: Vec<AlignedBuf>,
    /// Accounting class.
    pub class: IoClass,
    /// Accounting instance.
    pub instance: u16,
    /// The caller's cookie, returned in the completion.
    pub tag: u64,
}

impl VectoredWrite {
    /// Bytes the write carries: the sum of its buffers' lengths.
    pub fn len(&self) -> usize {
        self.bufs.iter().map(|b| b.len()).sum()
    }

    /// Whether it carries no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A finished request, giving its buffer back.
#[derive(Debug)]
pub struct IoCompletion {
    /// The request's cookie.
    pub tag: u64,
    /// The request's file.
    pub file: FileId,
    /// The request's operation.
    pub op: IoOp,
    /// The request's offset.
    pub offset: u64,
    /// The request's buffer (read data is in its first `result` bytes); empty for a
    /// [`VectoredWrite`].
    pub buf: AlignedBuf,
    /// A [`VectoredWrite`]'s buffers, in the order given (`op` is [`IoOp::Write`]);
    /// empty (no allocation) for every other request.
    pub bufs: Vec<AlignedBuf>,
    /// Bytes transferred (possibly short, see the module documentation; 0 for Fsync), or
    /// the error.
    pub result: io::Result<usize>,
    /// From `submit` to completion, in nanoseconds.
    pub latency_ns: u64,
    /// The request's class.
    pub class: IoClass,
    /// The request's instance.
    pub instance: u16,
}

/// An asynchronous I/O engine. Not shared between threads: each thread driving I/O owns
/// its backend (and its counters); stats are merged afterwards.
///
/// Dropping a backend carries out every request already submitted (flushed or not) and
/// waits for them, discarding their results: no buffer is freed while the kernel may
/// use it, and a submitted write is not silently lost.
pub trait IoBackend: Send {
    /// "io_uring" or "threads".
    fn name(&self) -> &'static str;
    /// Makes `file` usable in requests. The backend keeps its own duplicate of the
    /// descriptor, so `file` may be dropped afterwards.
    fn register(&mut self, file: &DataFile) -> Result<FileId, IoError>;
    /// Closes the backend's descriptor of `file`; fails with [`IoError::FileBusy`] while
    /// requests on it are queued or in flight. The id may be reused by a later `register`.
    fn unregister(&mut self, file: FileId) -> Result<(), IoError>;
    /// Maximum number of requests in flight.
    fn depth(&self) -> usize;
    /// Requests submitted and not yet returned by `wait`.
    fn in_flight(&self) -> usize;
    /// Queues a request; it is handed to the kernel at the next `wait`/`flush` (batched
    /// submission). Fails if `in_flight() == depth()` (reap first), if the file is unknown
    /// or the length does not fit the buffer; the request (and its buffer) is then dropped.
    fn submit(&mut self, req: IoRequest) -> Result<(), IoError>;
    /// Queues a [`VectoredWrite`], as [`IoBackend::submit`] queues a request; its
    /// completion has `op` [`IoOp::Write`], the total length as its result and the
    /// buffers in `bufs`. On success the buffers move out of `req` (its `bufs` is left
    /// empty); on failure (the same as `submit`'s, or no buffer, more than
    /// [`MAX_WRITE_BUFFERS`] or more than [`MAX_REQUEST_BYTES`] in all) nothing is taken,
    /// so the caller still holds its data.
    fn submit_vectored(&mut self, req: &mut VectoredWrite) -> Result<(), IoError>;
    /// Hands everything queued to the kernel without waiting.
    fn flush(&mut self) -> Result<(), IoError>;
    /// Submits queued requests and waits until at least `min` completions are available
    /// (`min` is capped at `in_flight()`; 0 just polls), appends them all to `out` and
    /// returns how many were appended. Reuse `out` to avoid allocating.
    fn wait(&mut self, min: usize, out: &mut Vec<IoCompletion>) -> Result<usize, IoError>;
    /// Moves the completions already available to `out` without submitting anything
    /// queued or waiting, and returns how many; no system call where the backend can
    /// avoid one (io_uring reads its completion ring). A request is timed when it is
    /// reaped, so a thread busy with other work calls this often to time its requests
    /// close to their completion.
    fn reap_ready(&mut self, out: &mut Vec<IoCompletion>) -> Result<usize, IoError> {
        self.wait(0, out)
    }
    /// Counters of every completed I/O since creation or the last `take_stats`.
    fn stats(&self) -> &IoStats;
    /// Returns the counters and starts new ones.
    fn take_stats(&mut self) -> IoStats;
    /// A descriptor that polls readable while completions wait to be reaped by `wait`,
    /// for a thread that sleeps on several things at once (a thread of tasks). Only a
    /// backend opened with [`open_backend_pollable`] is sure to have one.
    fn completion_fd(&mut self) -> Result<std::os::fd::RawFd, IoError>;
}

/// Which backend [`open_backend`] creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum BackendKind {
    /// io_uring if the kernel allows it, else threads.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// io_uring or an error.
    #[serde(rename = "io_uring")]
    IoUring,
    /// The thread pool.
    #[serde(rename = "threads")]
    Threads,
}

impl BackendKind {
    /// "auto", "io_uring" or "threads".
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::IoUring => "io_uring",
            BackendKind::Threads => "threads",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = IoError;

    /// Accepts "auto", "io_uring" (or "io-uring", "uring") and "threads" (or "thread"),
    /// ignoring case.
    fn from_str(s: &str) -> Result<BackendKind, IoError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(BackendKind::Auto),
            "io_uring" | "io-uring" | "uring" => Ok(BackendKind::IoUring),
            "threads" | "thread" => Ok(BackendKind::Threads),
            _ => Err(IoError::UnknownBackend(s.to_string())),
        }
    }
}

/// Creates a backend of `kind` with room for `depth` requests in flight (1..=4096).
/// `Auto` tries io_uring (ring setup, opcode probe and a NOP round trip) and falls back to
/// the thread pool, logging why, when the kernel lacks or refuses it.
pub fn open_backend(kind: BackendKind, depth: usize) -> Result<Box<dyn IoBackend>, IoError> {
    check_depth(depth)?;
    match kind_to_open(kind) {
        BackendKind::Threads => Ok(Box::new(ThreadPoolBackend::new(depth)?)),
        BackendKind::IoUring => Ok(Box::new(IoUringBackend::new(depth)?)),
        BackendKind::Auto => match IoUringBackend::new(depth) {
            Ok(backend) => Ok(Box::new(backend)),
            Err(err) => {
                tracing::info!(
                    error = %err,
                    "io_uring is not usable here; using the threads backend (pread/pwrite)"
                );
                Ok(Box::new(ThreadPoolBackend::new(depth)?))
            }
        },
    }
}

/// The kind to open for `kind`: threads while a simulated power cut is armed (the
/// kernel's own writes could not be journalled), else `kind`.
fn kind_to_open(kind: BackendKind) -> BackendKind {
    if crate::power_cut::armed() {
        BackendKind::Threads
    } else {
        kind
    }
}

/// [`open_backend`] for a thread of tasks: its [`IoBackend::completion_fd`] wakes a
/// `poll` when a completion arrives (an io_uring without cooperative task running, a
/// thread pool that signals an eventfd).
pub(crate) fn open_backend_pollable(
    kind: BackendKind,
    depth: usize,
) -> Result<Box<dyn IoBackend>, IoError> {
    check_depth(depth)?;
    match kind_to_open(kind) {
        BackendKind::Threads => Ok(Box::new(ThreadPoolBackend::new(depth)?)),
        BackendKind::IoUring | BackendKind::Auto => Ok(Box::new(IoUringBackend::pollable(depth)?)),
    }
}

pub(crate) fn check_depth(depth: usize) -> Result<(), IoError> {
    if depth == 0 || depth > MAX_DEPTH {
        return Err(IoError::BadDepth {
            depth,
            max: MAX_DEPTH,
        });
    }
    Ok(())
}

/// Checks what the kernel would otherwise misread: a length beyond the buffer (memory
/// safety) or an offset that io_uring takes as "current position".
#[inline]
pub(crate) fn check_request(req: &IoRequest) -> Result<(), IoError> {
    if req.op != IoOp::Fsync && (req.len > req.buf.len() || req.len > MAX_REQUEST_BYTES) {
        return Err(IoError::BadLength {
            len: req.len,
            buf_len: req.buf.len(),
            max: MAX_REQUEST_BYTES,
        });
    }
    if req.offset > i64::MAX as u64 {
        return Err(IoError::BadOffset { offset: req.offset });
    }
    Ok(())
}

/// Checks a vectored write as [`check_request`] checks a request; returns its length.
pub(crate) fn check_vectored(req: &VectoredWrite) -> Result<usize, IoError> {
    let count = req.bufs.len();
    if count == 0 || count > MAX_WRITE_BUFFERS {
        return Err(IoError::BadBufferCount {
            count,
            max: MAX_WRITE_BUFFERS,
        });
    }
    let len = req.len();
    if len > MAX_REQUEST_BYTES {
        return Err(IoError::BadLength {
            len,
            buf_len: len,
            max: MAX_REQUEST_BYTES,
        });
    }
    if req.offset > i64::MAX as u64 {
        return Err(IoError::BadOffset { offset: req.offset });
    }
    Ok(len)
}

/// What a backend remembers of a registered file to explain its errors.
#[derive(Debug)]
pub(crate) struct FileOrigin {
    pub(crate) path: PathBuf,
    pub(crate) mode: IoMode,
}

/// The error of a failed request; EINVAL on an `O_DIRECT` file becomes an explanation,
/// and a full filesystem (ENOSPC) an [`IoError::Full`] with the space needed and available.
#[cold]
pub(crate) fn request_error(
    origin: &FileOrigin,
    op: IoOp,
    offset: u64,
    buf: &AlignedBuf,
    len: usize,
    err: io::Error,
) -> io::Error {
    if origin.mode == IoMode::Direct
        && op != IoOp::Fsync
        && err.raw_os_error() == Some(libc::EINVAL)
    {
        let explained = rw_error(
            &origin.path,
            origin.mode,
            op.name(),
            offset,
            buf.as_ptr() as usize,
            len,
            err,
        );
        return io::Error::new(io::ErrorKind::InvalidInput, explained);
    }
    if err.raw_os_error() == Some(libc::ENOSPC) {
        let needed = matches!(op, IoOp::Write | IoOp::WriteSync).then_some(len as u64);
        let full = IoError::from_os(&origin.path, op.name(), offset, needed, err);
        return io::Error::new(io::ErrorKind::StorageFull, full);
    }
    err
}

/// Nanoseconds in a duration, saturating.
#[inline]
pub(crate) fn duration_ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
