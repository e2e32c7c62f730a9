//! Reading and writing the database header pair (slots 0 and 1) of a database file,
//! and the content of a page no change has used yet.
//!
//! The header is written primary first, made durable, then the shadow, so a torn
//! header write always leaves one valid copy (engine.md §1).
//!
//! [`DbFileIo`] carries the I/O an open database does on its file outside the page
//! cache (header writes, growth, the checkpoint barrier's flush, recovery's torn-page
//! rebuilds) through a backend of the run's kind, which times and counts it.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use edbstress_format::header::{DatabaseHeader, HeaderError, HeaderSelection};
use edbstress_format::{InstanceId, PageSize, Pgno};
use edbstress_io::blocking::FileIo;
use edbstress_io::{AlignedBuf, BackendKind, DataFile, IoClass, IoError, IoStats};

// Recovery and fault injection read the header through here too.
pub(crate) use crate::dbheader::{HeaderReadError, read_header_from};
use crate::error::EngineError;

/// The length a database file has at least: its two header slots and every page its
/// header counts. A longer file is fine: growth writes the new pages before the header
/// that counts them, so a crash in between leaves a file longer than its header says.
pub fn expected_len(header: &DatabaseHeader) -> u64 {
    (u64::from(header.page_count) + 2) * header.page_size.bytes() as u64
}

/// A database file shorter than its header says.
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "{} is truncated: the file has {len} bytes, its header says {expected} ({pages} pages of {page_size} and the two header copies); the database is damaged: restore it from a good copy, or run `edbstress prepare --recreate` to build it again",
    path.display()
)]
pub struct Truncated {
    /// The database file.
    pub path: std::path::PathBuf,
    /// Its length.
    pub len: u64,
    /// The length its header implies.
    pub expected: u64,
    /// Pages the header counts.
    pub pages: u32,
    /// Page size.
    pub page_size: PageSize,
}

/// Checks that the file at `path`, `len` bytes long, holds every page `header` counts.
pub fn check_length(path: &Path, len: u64, header: &DatabaseHeader) -> Result<(), Truncated> {
    let expected = expected_len(header);
    if len < expected {
        return Err(Truncated {
            path: path.to_path_buf(),
            len,
            expected,
            pages: header.page_count,
            page_size: header.page_size,
        });
    }
    Ok(())
}

/// What every open of a database for use checks before trusting it: a header copy
/// whose checksum holds, and a file as long as that header says. The errors name the
/// file, say whether it is damaged ([`EngineError::Damaged`]: a bad header checksum
/// with our signature, or a truncated file) or not ours, and what to do.
pub fn read_verified_header(file: &DataFile) -> Result<HeaderSelection, EngineError> {
    let path = file.path();
    let sel = read_header_from(file).map_err(|e| match e {
        HeaderReadError::Io(e) => EngineError::Io(e),
        HeaderReadError::Header(HeaderError::BadChecksum) => EngineError::Damaged(format!(
            "{} is not a valid edbstress database: it carries the edbstress signature but no header copy passes its checksum (bad header checksum); if it was an edbstress database it is damaged: restore it from a good copy, or move it away and run `edbstress prepare`",
            path.display()
        )),
        HeaderReadError::Header(e) => EngineError::Invalid(format!("{}: {e}", path.display())),
    })?;
    check_length(path, file.len()?, &sel.header)
        .map_err(|e| EngineError::Damaged(e.to_string()))?;
    Ok(sel)
}

/// The database file registered with a backend of its own for the I/O an instance or
/// recovery does on it outside the page cache, one request at a time, each timed and
/// counted by the backend under the class the caller names. Not shared between threads
/// by itself: put it behind a mutex.
pub(crate) struct DbFileIo {
    io: FileIo,
    instance: InstanceId,
    /// The backend's counters as of the last request, readable while a request (a
    /// growth write, a flush) is in progress.
    published: Arc<Mutex<IoStats>>,
}

impl DbFileIo {
    /// A backend of `kind` (one request deep) with `file` registered; its I/O is
    /// accounted to `instance`.
    pub(crate) fn open(
        file: &DataFile,
        kind: BackendKind,
        instance: InstanceId,
    ) -> Result<DbFileIo, IoError> {
        Ok(DbFileIo {
            io: FileIo::open(file, kind, instance.get())?,
            instance,
            published: Arc::default(),
        })
    }

    /// Writes `header` to slot 0 and makes it durable, then slot 1 (the shadow): two
    /// durable writes of class [`IoClass::DbHeader`].
    pub(crate) fn write_header(&mut self, header: &DatabaseHeader) -> Result<(), IoError> {
        let result = write_header_through(&mut self.io, IoClass::DbHeader, header);
        self.publish(IoClass::DbHeader, result)
    }

    /// Writes `buf[..len]` at `offset` (not synced), counted under `class`.
    pub(crate) fn write(
        &mut self,
        class: IoClass,
        buf: &mut AlignedBuf,
        len: usize,
        offset: u64,
    ) -> Result<(), IoError> {
        let result = self.io.write_all(class, buf, len, offset, false);
        self.publish(class, result)
    }

    /// Reads up to `len` bytes at `offset` in one request, counted under `class`.
    pub(crate) fn read(
        &mut self,
        class: IoClass,
        buf: &mut AlignedBuf,
        len: usize,
        offset: u64,
    ) -> Result<usize, IoError> {
        let result = self.io.read(class, buf, len, offset);
        self.publish(class, result)
    }

    /// `fdatasync` of the file, counted under `class`.
    pub(crate) fn sync(&mut self, class: IoClass) -> Result<(), IoError> {
        let result = self.io.sync(class);
        self.publish(class, result)
    }

    /// "io_uring" or "threads".
    pub(crate) fn backend_name(&self) -> &'static str {
        self.io.backend_name()
    }

    /// Makes the counters of the request just done readable through
    /// [`DbFileIo::stats_handle`]; passes its result on.
    fn publish<T>(&self, class: IoClass, result: Result<T, IoError>) -> Result<T, IoError> {
        // Only the request's class changed: copy it in place (a whole `IoStats` clone
        // allocated, faulted in and freed ~200 KB per class, per request).
        if let Some(now) = self.io.stats().get(self.instance.get(), class) {
            self.published
                .lock()
                .entry(self.instance.get(), class)
                .clone_from(now);
        }
        result
    }

    /// What the backend carried so far.
    pub(crate) fn stats(&self) -> &IoStats {
        self.io.stats()
    }

    /// The counters as of the last request, updated after each: read them without
    /// waiting for a request in progress.
    pub(crate) fn stats_handle(&self) -> Arc<Mutex<IoStats>> {
        Arc::clone(&self.published)
    }
}

/// Writes `header` to slot 0 and makes it durable, then to slot 1 (the shadow), through
/// a backend of its own, counted as [`IoClass::OfflineWrite`]: for the offline tools
/// (prepare) that build a database before any run measures it. An open instance and
/// recovery use [`DbFileIo`].
pub fn write_header(file: &DataFile, header: &DatabaseHeader) -> Result<(), IoError> {
    write_header_through(&mut FileIo::offline(file)?, IoClass::OfflineWrite, header)
}

/// Writes `header` to slot 0, then slot 1, each one durable write through `io`.
fn write_header_through(
    io: &mut FileIo,
    class: IoClass,
    header: &DatabaseHeader,
) -> Result<(), IoError> {
    let ps = header.page_size.bytes();
    let mut slot = AlignedBuf::new(ps);
    header.encode(&mut slot);
    for offset in [0, ps as u64] {
        io.write_all(class, &mut slot, ps, offset, true)?;
    }
    Ok(())
}

/// Makes a directory's entries durable (new files survive a crash); best effort, as
/// some filesystems refuse to fsync directories.
pub fn sync_dir(dir: &Path) {
    let _ = edbstress_io::sync_dir(dir);
}

/// Formats `page` as page `pgno` never used by a change (empty, dbtime 0) and seals it:
/// what prepare and database growth write for pages beyond the data, and what
/// recovery restores for a page whose logged image is empty.
pub fn format_unused_page(page: &mut [u8], pgno: Pgno) {
    edbstress_format::page::PageMut::format(page, pgno, 0, edbstress_format::page::flags::EMPTY, 0);
    edbstress_format::checksum::seal_page(page, pgno);
}
