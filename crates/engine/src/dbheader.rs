//! Reading the database header pair (slots 0 and 1) of a database file, and telling
//! an edbstress database from any other file by its header's signature. Depends on
//! the format and I/O layers only, so that the lock files (which must only ever sit
//! beside a database) can check the signature without the rest of the engine.

use std::path::Path;

use edbstress_format::PageSize;
use edbstress_format::header::{HeaderError, HeaderSelection, select_header};
use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, AlignedBuf, DataFile, IoClass, IoError, IoMode};

/// Why a header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderReadError {
    /// The file could not be read.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Neither copy is a valid edbstress header.
    #[error("{0}")]
    Header(HeaderError),
}

/// The largest page size: both header slots fit in twice this.
const MAX_PAGE: usize = 32 * 1024;

/// Reads both header slots of the database at `path` and selects the valid copy.
pub fn read_header(path: &Path, mode: IoMode) -> Result<HeaderSelection, HeaderReadError> {
    let file = DataFile::open(path, mode, Access::ReadOnly)?;
    read_header_from(&file)
}

/// Like [`read_header`] on an open file, read through a backend of its own (class
/// [`IoClass::HeaderRead`]).
pub fn read_header_from(file: &DataFile) -> Result<HeaderSelection, HeaderReadError> {
    let len = file.len()?;
    // The slot size is the page size, unknown until a header is decoded: read the
    // largest possible span and try the page sizes the primary copy claims, then all.
    let span = (2 * MAX_PAGE as u64).min(len) as usize;
    if span < 2 * 4096 {
        return Err(HeaderReadError::Header(HeaderError::Invalid(format!(
            "file is only {len} bytes long, too short to hold a database header"
        ))));
    }
    let mut buf = AlignedBuf::new(2 * MAX_PAGE);
    let aligned = span - span % 4096;
    FileIo::offline(file)?.read_exact(IoClass::HeaderRead, &mut buf, aligned, 0)?;
    let mut last_err = HeaderError::NotOurs;
    for ps in [PageSize::K32, PageSize::K8, PageSize::K4, PageSize::K16] {
        let p = ps.bytes();
        if 2 * p > aligned {
            continue;
        }
        match select_header(&buf[..p], &buf[p..2 * p]) {
            Ok(sel) if sel.header.page_size == ps => return Ok(sel),
            Ok(_) => continue,
            Err(HeaderError::NotOurs) => {}
            Err(e) => last_err = e,
        }
    }
    Err(HeaderReadError::Header(last_err))
}

/// Checks that the file at `path` carries the edbstress database signature (a header
/// copy with our magic, even if damaged); the error says what was found instead.
pub fn check_database_signature(path: &Path) -> Result<(), String> {
    // A file too short for a header has no magic to look at (read_header reports it
    // as an invalid header, like a damaged one of ours).
    let len = std::fs::metadata(path)
        .map_err(|e| format!("it cannot be read: {e}"))?
        .len();
    if len < 2 * 4096 {
        return Err(format!(
            "it is only {len} bytes long, too short for a database header"
        ));
    }
    match read_header(path, IoMode::Buffered) {
        Ok(_) => Ok(()),
        Err(HeaderReadError::Header(HeaderError::NotOurs)) => {
            Err("no edbstress signature in its header".into())
        }
        Err(HeaderReadError::Header(HeaderError::Uninitialized)) => {
            Err("its header is all zero".into())
        }
        Err(HeaderReadError::Header(_)) => Ok(()),
        Err(HeaderReadError::Io(e)) => Err(format!("it cannot be read: {e}")),
    }
}
