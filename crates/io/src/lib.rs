//! The I/O layer of edbstress: opening files for direct or buffered I/O, page-aligned
//! buffers, pluggable asynchronous backends (io_uring, and a portable thread pool using
//! pread/pwrite chosen automatically when io_uring is unavailable), and the accounting
//! every I/O goes through: an I/O class, an instance and a latency recorded into
//! mergeable fixed-bucket histograms.
//!
//! This is the only crate of the workspace allowed to use `unsafe`; every block carries
//! a `// SAFETY:` comment. It knows nothing about pages, logs or B+trees: it moves bytes
//! at offsets and times them.
//!
//! Typical use: open or create a [`DataFile`], pick a backend with [`open_backend`],
//! [`IoBackend::register`] the file, then keep up to `depth()` [`IoRequest`]s in flight
//! with [`IoBackend::submit`] and [`IoBackend::wait`], recycling the [`AlignedBuf`] each
//! [`IoCompletion`] hands back. Page-sized buffers live in huge-page chunks that the
//! io_uring backend registers as fixed buffers (`buf/slab.rs`). A [`VectoredWrite`]
//! ([`IoBackend::submit_vectored`]) writes several buffers at one offset as one I/O
//! (`pwritev`, `IORING_OP_WRITEV`).
//! Threads that each need one I/O done now (sessions
//! reading a page they missed) share a [`BackendPool`] instead, which lends a backend
//! to each for the length of its request. Every completion is counted in the backend's
//! [`IoStats`] (per instance and [`IoClass`], with a [`LatencyHistogram`]); merge the
//! stats of all backends for reports. I/O that must be done before its caller goes on
//! and is too rare to batch (headers, file creation, background reads) goes through a
//! backend too, one request at a time, with the helpers of [`blocking`]; a caller
//! without a backend of its own (the offline tools, header reads) uses a
//! [`blocking::FileIo`].
//!
//! # One door
//!
//! Data files — databases, log generations, checkpoint files, backup copies — are read,
//! written and flushed only through a backend: [`DataFile`] opens, sizes and allocates
//! them but has no public read, write or sync, so every byte moved is timed and
//! counted under an [`IoClass`]. The workspace's `clippy.toml` forbids, outside this
//! crate, the `std` calls that would go around the door (`FileExt`'s positional reads
//! and writes, `File::sync_data`/`sync_all`, nix's `fsync`/`fdatasync`); this crate
//! allows them where it issues I/O, and a directory is made durable with [`sync_dir`].
//! Files the tool reads or writes whole as text or JSON (configurations, results,
//! its own logs) are not data files: they use `std::fs::read`/`write` and a temporary
//! name renamed into place (the results writer allows itself the `sync_data` that
//! makes its temporary file durable first). A test that damages a data file on
//! purpose allows the lint where it does so.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod backend;
pub mod blocking;
mod buf;
mod class;
mod error;
mod file;
mod histogram;
mod memory;
#[cfg(feature = "power-cut-sim")]
pub mod power_cut;
/// Without the `power-cut-sim` feature every write and flush goes straight through.
#[cfg(not(feature = "power-cut-sim"))]
mod power_cut {
    use std::fs::File;
    use std::io;

    #[inline]
    pub(crate) fn armed() -> bool {
        false
    }

    #[inline]
    pub(crate) fn write(
        _file: &File,
        _offset: u64,
        _buf: &[u8],
        write: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        write()
    }

    #[inline]
    pub(crate) fn write_parts<P: AsRef<[u8]>>(
        _file: &File,
        _offset: u64,
        _parts: &[P],
        write: impl FnOnce() -> io::Result<usize>,
    ) -> io::Result<usize> {
        write()
    }

    #[inline]
    pub(crate) fn sync(_file: &File, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        sync()
    }
}
pub mod probe;
mod size;
mod stats;
pub mod tasks;

pub use backend::{
    BackendKind, BackendPool, FileId, IoBackend, IoCompletion, IoOp, IoRequest, IoUringBackend,
    MAX_DEPTH, MAX_REQUEST_BYTES, MAX_WORKER_THREADS, MAX_WRITE_BUFFERS, ThreadPoolBackend,
    VectoredWrite, open_backend,
};
pub use buf::{AlignedBuf, BUF_ALIGN};
pub use class::IoClass;
pub use error::IoError;
pub use file::{Access, DataFile, IoMode, available_space, filesystem_id, sync_dir};
pub use histogram::{HistogramDecodeError, LatencyHistogram, MAX_LATENCY_NS};
pub use memory::bound_allocator_footprint;
pub use size::{ByteSize, ByteSizeError};
pub use stats::{ClassStats, IoStats};
