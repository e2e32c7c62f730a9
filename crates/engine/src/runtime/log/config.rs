//! How an instance's log is written ([`LogConfig`]): shared by the writer and by
//! [`super::open`], which reopens a log directory for writing.

use std::path::PathBuf;
use std::time::Duration;

use edbstress_format::InstanceId;
use edbstress_format::log::SegmentLen;
use edbstress_io::{BackendKind, IoMode};

use super::LogSignatures;
use crate::error::EngineError;

/// Default log buffer: 9000 × 512 bytes, the `LogBuffers` value Jetstress 2007 prints
/// among its ESE settings in its reports (docs/fidelity.md, "log_buffer").
pub const DEFAULT_LOG_BUFFER_LEN: usize = 9000 * 512;

/// How an instance's log is written.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// The log directory (holds `E00*.log`, `E00tmp.log`, `E00.chk`).
    pub dir: PathBuf,
    /// Instance number, for I/O accounting.
    pub instance: InstanceId,
    /// Signature of the database the log belongs to.
    pub db_signature: u64,
    /// Signature of the log stream.
    pub log_signature: u64,
    /// Length of new generation files: a multiple of 4096, at least 3 segments.
    /// Existing files keep the length in their header.
    pub file_len: usize,
    /// Segment (log sector) length of new generation files: every log write is whole
    /// segments. The writer continues an existing generation in the length its header
    /// records, and so the generations after it; a generation that holds no records
    /// yet is created again with this length (docs/format.md §6).
    pub segment_len: SegmentLen,
    /// Log buffer size in bytes; appends wait while this much is not yet durable, and
    /// the buffer is written without a commit asking once half of it is ready (ESE's
    /// capacity write: `csecReady >= m_csecLGBuf / 2`, logwrite.cxx).
    pub buffer_len: usize,
    /// `None` (ESE's lazy commit): a lazy commit's records wait in the buffer until a
    /// durable commit, a capacity write, a new generation or a page write's
    /// write-ahead writes them; there is no timer. `Some(d)`: the flusher thread writes
    /// them at the latest `d` after the first of them, the committer not waiting (a
    /// bounded durability delay; tests use it to have lazy commits written in the
    /// background). `Some(Duration::ZERO)`: at once, as the exchange2007/2010 profiles
    /// have it (docs/fidelity.md, "lazy_commit_write").
    pub lazy_flush_interval: Option<Duration>,
    /// A flush that finds closed segments and a partially filled tail writes the
    /// closed segments first and the tail (closed) in a second write, when a commit
    /// still waits for it or the lazy-flush time of its records has come (ESE's full
    /// sectors, then its deferred partial-sector write: records appended meanwhile
    /// join the second write). Off: one write takes both. The exchange2007/2010
    /// profiles set it (docs/fidelity.md: Jetstress 2010's ~4.7 KB log writes).
    pub split_tail_write: bool,
    /// A write that ends inside a segment writes that segment partially filled and a
    /// shadow copy of it in the next slot, and the next records continue in it; the
    /// next write rewrites it first, alone (ESE's partial-sector write and its
    /// shadow, `ErrLGIWritePartialSector`/`ErrLGIWriteFullSectors`, logwrite.cxx).
    /// Recovery takes of the segment and its shadow the valid copy written last, so a
    /// torn rewrite falls back to the shadow (docs/format.md §6.3). Off: every write
    /// closes (pads) the segment it ends in, and the next records start in the next.
    pub partial_tail_shadow: bool,
    /// Delete generations wholly before the checkpoint (and the retention floor).
    pub circular: bool,
    /// Direct (`O_DIRECT`) or buffered; every write is followed by `fdatasync` either way.
    pub io_mode: IoMode,
    /// The io crate backend that carries, times and counts the log writes (`--backend`).
    pub backend: BackendKind,
}

impl LogConfig {
    /// The defaults: 1 MiB files, a 9000 × 512-byte buffer, no lazy-flush timer, the
    /// tail written with the closed segments before it, no circular logging, direct
    /// I/O, the `auto` backend. For the engine's tests (feature `test-internals`): an
    /// instance sets every field from its own configuration.
    #[cfg(feature = "test-internals")]
    pub fn new(
        dir: impl Into<PathBuf>,
        instance: InstanceId,
        db_signature: u64,
        log_signature: u64,
    ) -> LogConfig {
        LogConfig {
            dir: dir.into(),
            instance,
            db_signature,
            log_signature,
            file_len: edbstress_format::log::DEFAULT_LOG_FILE_LEN,
            segment_len: SegmentLen::Page4096,
            buffer_len: DEFAULT_LOG_BUFFER_LEN,
            lazy_flush_interval: None,
            split_tail_write: false,
            partial_tail_shadow: false,
            circular: false,
            io_mode: IoMode::Direct,
            backend: BackendKind::Auto,
        }
    }

    /// The signatures every log file and checkpoint must carry.
    pub fn signatures(&self) -> LogSignatures {
        LogSignatures {
            log_signature: self.log_signature,
            db_signature: self.db_signature,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), EngineError> {
        // Files stay a multiple of 4096 whatever the segment length, so that a stream
        // can continue in either.
        let page = SegmentLen::Page4096.bytes();
        let (min, max) = (3 * page, self.segment_len.max_file_len());
        if self.file_len % page != 0 || !(min..=max).contains(&self.file_len) {
            return Err(EngineError::Invalid(format!(
                "log file length {} is not a multiple of {page} between {min} and {max} bytes \
                 (the most {} segments of {} can address)",
                self.file_len,
                u16::MAX as usize + 1,
                self.segment_len
            )));
        }
        if self.buffer_len < page {
            return Err(EngineError::Invalid(format!(
                "log buffer of {} bytes is smaller than {page} bytes",
                self.buffer_len
            )));
        }
        Ok(())
    }
}
