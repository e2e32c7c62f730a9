//! The error type of the I/O layer.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the I/O layer. Each message names the file or resource,
/// the operation, and where it helps, what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The filesystem holding `path` refuses `O_DIRECT`, either when the file is opened or
    /// at its first aligned read or write.
    #[error(
        "{} is on a filesystem that does not support direct I/O (O_DIRECT); run with --buffered \
         to test through the page cache, or put the files on a filesystem that supports it such \
         as ext4 or xfs",
        path.display()
    )]
    DirectIoUnsupported {
        /// The file that could not be opened or accessed with `O_DIRECT`.
        path: PathBuf,
    },

    /// A system call on a file failed.
    #[error("{op} of {}{} failed: {source}", path.display(), offset_phrase(op, *offset))]
    Io {
        /// The file the operation was on.
        path: PathBuf,
        /// What was being done: "open", "read", "write", "fdatasync", "fallocate", ...
        op: &'static str,
        /// The byte offset of a read or write; 0 for operations without one (it is then
        /// left out of the message).
        offset: u64,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// `DataFile::create_new` found a file already at the path; it never overwrites.
    #[error(
        "{} already exists and will not be overwritten; delete it or choose another path",
        path.display()
    )]
    AlreadyExists {
        /// The existing file.
        path: PathBuf,
    },

    /// A direct I/O request was not aligned, so the kernel rejected it with EINVAL.
    #[error(
        "{op} of {len} bytes at offset {offset} of {} was rejected: direct I/O (O_DIRECT) needs \
         the buffer address, length and offset to be multiples of the device's logical block \
         size (use AlignedBuf and multiples of 4096)",
        path.display()
    )]
    Misaligned {
        /// The file the request was on.
        path: PathBuf,
        /// "read" or "write".
        op: &'static str,
        /// The requested byte offset.
        offset: u64,
        /// The requested length in bytes.
        len: usize,
    },

    /// A request was submitted while `depth()` requests were already in flight.
    #[error(
        "the I/O queue is full ({depth} requests in flight); reap completions with wait() first"
    )]
    QueueFull {
        /// The backend's maximum number of requests in flight.
        depth: usize,
    },

    /// A request named a file id that was not returned by `register` on this backend.
    #[error("file id {0} is not registered with this I/O backend")]
    UnknownFile(u32),

    /// A request asked to transfer more bytes than its buffer holds, or more than one
    /// request can carry.
    #[error(
        "I/O request of {len} bytes does not fit: its buffer holds {buf_len} bytes and one \
         request carries at most {max} bytes"
    )]
    BadLength {
        /// The requested transfer length.
        len: usize,
        /// The length of the request's buffer.
        buf_len: usize,
        /// The largest transfer the backend accepts in one request.
        max: usize,
    },

    /// A request's offset is beyond what a file can have (`i64::MAX`).
    #[error("I/O request offset {offset} is beyond the largest file offset (2^63 - 1)")]
    BadOffset {
        /// The requested offset.
        offset: u64,
    },

    /// A file cannot be unregistered while requests on it are queued or in flight.
    #[error(
        "file id {file} still has {in_flight} requests in flight; reap them before unregistering it"
    )]
    FileBusy {
        /// The file id.
        file: u32,
        /// Its requests not yet reaped.
        in_flight: usize,
    },

    /// The requested queue depth is outside what the backends support.
    #[error("queue depth {depth} is out of range; it must be between 1 and {max}")]
    BadDepth {
        /// The depth asked for.
        depth: usize,
        /// The largest depth supported.
        max: usize,
    },

    /// An aligned buffer of the requested size could not be allocated.
    #[error("cannot allocate an aligned I/O buffer of {len} bytes")]
    BufferAllocation {
        /// The requested length.
        len: usize,
    },

    /// The kernel does not provide a usable io_uring.
    #[error(
        "io_uring is not available: {reason}: {source} (the kernel may be older than 5.6, \
         io_uring may be disabled by /proc/sys/kernel/io_uring_disabled or blocked by a seccomp \
         policy as in many containers, or before Linux 5.12 the locked-memory limit, ulimit -l, \
         may be too small for the ring); use the threads backend, or auto to fall back to it"
    )]
    IoUringUnavailable {
        /// Which step failed.
        reason: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// An operation of the backend itself (not of one I/O) failed.
    #[error("{backend} backend: {op} failed: {source}")]
    Backend {
        /// "io_uring" or "threads".
        backend: &'static str,
        /// The failed operation, e.g. "io_uring_enter".
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// A probe file path holds a file that is not one of ours.
    #[error(
        "{} exists and is not an edbstress probe file; it will not be used or overwritten: \
         choose another --file or --path, or delete it yourself if it is not needed",
        path.display()
    )]
    ForeignFile {
        /// The existing file.
        path: PathBuf,
    },

    /// Not enough free space for a file about to be created.
    #[error(
        "not enough free space for {}: it needs {needed} bytes and {available} are available; \
         free space or choose a smaller --size",
        path.display()
    )]
    NoSpace {
        /// The file that would have been created.
        path: PathBuf,
        /// Bytes it needs.
        needed: u64,
        /// Bytes available to unprivileged users.
        available: u64,
    },

    /// A probe file size below the minimum.
    #[error("a probe file of {size} bytes is too small; use at least {min} bytes")]
    ProbeTooSmall {
        /// The size asked for.
        size: u64,
        /// The smallest size accepted.
        min: u64,
    },

    /// A probe measurement was asked with impossible parameters.
    #[error("invalid probe measurement: {0}")]
    BadProbeSpec(String),

    /// A backend name could not be parsed.
    #[error("unknown I/O backend {0:?}; expected auto, io_uring or threads")]
    UnknownBackend(String),
}

impl IoError {
    /// An `Io` error for an operation without an offset.
    pub(crate) fn file_op(path: &std::path::Path, op: &'static str, source: io::Error) -> Self {
        IoError::Io {
            path: path.to_path_buf(),
            op,
            offset: 0,
            source,
        }
    }
}

/// " at offset N" for reads and writes (even at 0) and for any other operation with a
/// non-zero offset; nothing for operations such as open or fdatasync.
fn offset_phrase(op: &str, offset: u64) -> String {
    if offset != 0 || op.starts_with("read") || op.starts_with("write") {
        format!(" at offset {offset}")
    } else {
        String::new()
    }
}
