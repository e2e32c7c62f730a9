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

    /// The filesystem holding `path` ran out of space (ENOSPC) during an operation on it.
    #[error("{}", full_message(path, op, *offset, *needed, *available, source))]
    Full {
        /// The file the operation was on.
        path: PathBuf,
        /// What was being done: "write", "fallocate", "create", "fdatasync", ...
        op: &'static str,
        /// The byte offset of a write (0 for other operations).
        offset: u64,
        /// Bytes the operation needed, when known (a write's length, an extension's size).
        needed: Option<u64>,
        /// Bytes available to unprivileged users on that filesystem right after the
        /// failure (`statvfs`), when it could be read.
        available: Option<u64>,
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

    /// A vectored write carried no buffer, or more than one system call takes.
    #[error(
        "a vectored write of {count} buffers cannot be submitted: it needs between 1 and {max}"
    )]
    BadBufferCount {
        /// The number of buffers given.
        count: usize,
        /// The most one write carries (`IOV_MAX`).
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
    /// An `Io` error for an operation without an offset (a [`IoError::Full`] for ENOSPC).
    pub(crate) fn file_op(path: &std::path::Path, op: &'static str, source: io::Error) -> Self {
        IoError::from_os(path, op, 0, None, source)
    }

    /// The error of a failed operation on `path`: [`IoError::Full`], with the space
    /// `needed` and the space now available, when the filesystem is full (ENOSPC), else
    /// [`IoError::Io`]. `path` need not exist (a file that could not be created): the
    /// free space is then read from its directory.
    pub fn from_os(
        path: &std::path::Path,
        op: &'static str,
        offset: u64,
        needed: Option<u64>,
        source: io::Error,
    ) -> Self {
        if source.raw_os_error() != Some(libc::ENOSPC) {
            return IoError::Io {
                path: path.to_path_buf(),
                op,
                offset,
                source,
            };
        }
        let available = crate::file::available_space(path)
            .or_else(|_| {
                let dir = match path.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => std::path::Path::new("."),
                };
                crate::file::available_space(dir)
            })
            .ok();
        IoError::Full {
            path: path.to_path_buf(),
            op,
            offset,
            needed,
            available,
            source,
        }
    }

    /// Whether this is [`IoError::Full`]: the filesystem ran out of space.
    pub fn is_full(&self) -> bool {
        matches!(self, IoError::Full { .. })
    }
}

/// "the filesystem holding P is full: writing 32.0 KiB at offset N needs 32.0 KiB, 0 B
/// available (No space left on device); free space …".
fn full_message(
    path: &std::path::Path,
    op: &str,
    offset: u64,
    needed: Option<u64>,
    available: Option<u64>,
    source: &io::Error,
) -> String {
    let action = match op {
        "write" => format!("writing at offset {offset}"),
        "fallocate" => "reserving space".to_string(),
        "create" => "creating the file".to_string(),
        "fdatasync" | "fsync" => "flushing written data".to_string(),
        other => other.to_string(),
    };
    let available_text = available.map_or_else(
        || "free space unknown".to_string(),
        |a| format!("{} available", crate::ByteSize(a).approx()),
    );
    let figures = match needed {
        Some(n) => format!(
            "{action} needs {}, {available_text}",
            crate::ByteSize(n).approx()
        ),
        None => format!("{action} failed, {available_text}"),
    };
    // Space that shows as free but cannot be used: inodes, metadata space or a quota.
    let hint = match (needed, available) {
        (Some(n), Some(a)) if a >= n => {
            " (the space shows as free, so the filesystem may be out of inodes or reserved space)"
        }
        _ => "",
    };
    format!(
        "the filesystem holding {} is full: {figures}{hint} ({source}); free space on it or move the files to a bigger filesystem",
        path.display()
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enospc_becomes_full_with_the_space_needed_and_available() {
        let dir = tempfile::tempdir().unwrap();
        // A file that could not be created: the free space comes from its directory.
        let path = dir.path().join("E00tmp.log");
        let enospc = || io::Error::from_raw_os_error(libc::ENOSPC);
        let err = IoError::from_os(&path, "fallocate", 0, Some(1 << 20), enospc());
        let IoError::Full { available, .. } = &err else {
            panic!("expected Full, got {err:?}");
        };
        assert!(available.is_some(), "statvfs of the directory");
        assert!(err.is_full());
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "the filesystem holding {} is full: reserving space needs 1.0 MiB, ",
                path.display()
            )),
            "{message}"
        );
        assert!(message.contains(" available"), "{message}");
        assert!(message.contains("No space left"), "{message}");
        let write = IoError::from_os(&path, "write", 8192, Some(32768), enospc()).to_string();
        assert!(
            write.contains("writing at offset 8192 needs 32.0 KiB"),
            "{write}"
        );
        // Anything else stays an ordinary I/O error.
        let other = IoError::from_os(&path, "write", 0, Some(1), io::Error::other("boom"));
        assert!(matches!(other, IoError::Io { .. }), "{other:?}");
    }
}
