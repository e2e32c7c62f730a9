//! One request at a time on a backend, waited for at once: the I/O that must be done
//! before its caller can go on and is rare enough that batching would not pay (database
//! header writes and growth, log file creation, the checkpoint file, log replication's
//! reads). Carrying it through a backend rather than a plain `pwrite` is what makes it
//! timed and counted under its [`IoClass`] like every other request, and makes it honour
//! `--backend` (and, under the power-cut simulation, the journal: the threads backend
//! journals each write).
//!
//! The functions take the backend by `&mut dyn IoBackend`, so a caller that already owns
//! one (the log writer's) uses it for its bookkeeping as well; the backend must have
//! nothing in flight (its completions would be mixed up with ours). A caller without
//! one (an offline tool, a header read) opens a [`FileIo`]: one file on a backend of
//! its own.

use std::io;
use std::path::{Path, PathBuf};

use crate::{
    AlignedBuf, BackendKind, DataFile, FileId, IoBackend, IoClass, IoCompletion, IoError, IoOp,
    IoRequest, IoStats, open_backend,
};

/// The backend kind of I/O whose caller has no run configuration to take one from (the
/// offline tools, header reads): the thread pool, which every kernel has and which
/// costs one thread to set up rather than a ring.
pub const OFFLINE_BACKEND: BackendKind = BackendKind::Threads;

/// The file a blocking request is for and how it is accounted.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The file as registered with the backend.
    pub file: FileId,
    /// Its path, for error messages.
    pub path: &'a Path,
    /// Accounting class.
    pub class: IoClass,
    /// Accounting instance.
    pub instance: u16,
}

impl Target<'_> {
    fn request(&self, op: IoOp, offset: u64, buf: AlignedBuf, len: usize) -> IoRequest {
        IoRequest {
            file: self.file,
            op,
            offset,
            buf,
            len,
            class: self.class,
            instance: self.instance,
            tag: 0,
        }
    }
}

/// Submits `request`, waits for it and returns its completion (timed and counted by
/// `io`). Fails if the backend has other requests in flight.
pub fn run_one(io: &mut dyn IoBackend, request: IoRequest) -> Result<IoCompletion, IoError> {
    if io.in_flight() != 0 {
        return Err(IoError::Backend {
            backend: io.name(),
            op: "blocking request",
            source: io::Error::other("the backend has other requests in flight"),
        });
    }
    io.submit(request)?;
    let mut out = Vec::with_capacity(1);
    io.wait(1, &mut out)?;
    out.pop().ok_or_else(|| IoError::Backend {
        backend: io.name(),
        op: "wait",
        source: io::Error::other("the backend returned no completion"),
    })
}

/// Writes `buf[..len]` at `offset`, all of it: a short write (the kernel's choice) is
/// continued where it stopped, each part its own request. With `durable`, each request
/// is an [`IoOp::WriteSync`] (complete once the data is durable), otherwise a plain
/// [`IoOp::Write`]. `buf` is lent to the backend and comes back (a fresh zeroed buffer
/// of its length if a failing backend kept it).
pub fn write_all(
    io: &mut dyn IoBackend,
    to: Target<'_>,
    buf: &mut AlignedBuf,
    len: usize,
    offset: u64,
    durable: bool,
) -> Result<(), IoError> {
    let op = if durable {
        IoOp::WriteSync
    } else {
        IoOp::Write
    };
    let mut done = 0;
    while done < len {
        let at = offset + done as u64;
        let part = len - done;
        let lent = if done == 0 {
            std::mem::replace(buf, AlignedBuf::new(0))
        } else {
            let mut rest = AlignedBuf::try_new(part)?;
            rest.copy_from_slice(&buf[done..len]);
            rest
        };
        let first = done == 0;
        let restore_len = if first { lent.len() } else { 0 };
        let completion = match run_one(io, to.request(op, at, lent, part)) {
            Ok(c) => c,
            Err(e) => {
                if first {
                    *buf = AlignedBuf::new(restore_len);
                }
                return Err(e);
            }
        };
        if first {
            *buf = completion.buf;
        }
        let n = completion
            .result
            .map_err(|e| error(to.path, op.name(), at, e))?;
        if n == 0 {
            let e = io::Error::new(io::ErrorKind::WriteZero, "the write wrote nothing");
            return Err(error(to.path, op.name(), at, e));
        }
        done += n.min(part);
    }
    Ok(())
}

/// Reads up to `len` bytes at `offset` into `buf` in one request; returns how many were
/// read (short at the end of the file). `buf` is lent to the backend and comes back.
pub fn read(
    io: &mut dyn IoBackend,
    from: Target<'_>,
    buf: &mut AlignedBuf,
    len: usize,
    offset: u64,
) -> Result<usize, IoError> {
    let lent = std::mem::replace(buf, AlignedBuf::new(0));
    let restore_len = lent.len();
    let completion = match run_one(io, from.request(IoOp::Read, offset, lent, len)) {
        Ok(c) => c,
        Err(e) => {
            *buf = AlignedBuf::new(restore_len);
            return Err(e);
        }
    };
    *buf = completion.buf;
    completion
        .result
        .map_err(|e| error(from.path, "read", offset, e))
}

/// Reads exactly `len` bytes at `offset` into `buf`: a short read (rare) is continued
/// where it stopped, into a buffer of its own; reaching the end of the file first is an
/// error of kind `UnexpectedEof` naming the file and offset.
pub fn read_exact(
    io: &mut dyn IoBackend,
    from: Target<'_>,
    buf: &mut AlignedBuf,
    len: usize,
    offset: u64,
) -> Result<(), IoError> {
    if len == 0 {
        return Ok(());
    }
    let mut done = read(io, from, buf, len, offset)?;
    while done < len {
        let mut rest = AlignedBuf::try_new(len - done)?;
        let at = offset + done as u64;
        let n = read(io, from, &mut rest, len - done, at)?;
        if n == 0 {
            let e = io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the file ends before the data read",
            );
            return Err(error(from.path, "read", at, e));
        }
        buf[done..done + n].copy_from_slice(&rest[..n]);
        done += n;
    }
    Ok(())
}

/// `fdatasync` of the whole file, as one request.
pub fn sync(io: &mut dyn IoBackend, file: Target<'_>) -> Result<(), IoError> {
    let completion = run_one(io, file.request(IoOp::Fsync, 0, AlignedBuf::new(0), 0))?;
    completion
        .result
        .map(drop)
        .map_err(|e| error(file.path, "fdatasync", 0, e))
}

/// One data file on a backend of its own (one request deep), for a caller that does a
/// few requests on it one at a time: each is timed and counted in [`FileIo::stats`]
/// under the class the caller names and accounted to the instance given at open.
pub struct FileIo {
    io: Box<dyn IoBackend>,
    file: FileId,
    path: PathBuf,
    instance: u16,
}

impl FileIo {
    /// A backend of `kind` with `file` registered (the backend keeps its own descriptor:
    /// `file` may be dropped); its I/O is accounted to `instance`.
    pub fn open(file: &DataFile, kind: BackendKind, instance: u16) -> Result<FileIo, IoError> {
        let mut io = open_backend(kind, 1)?;
        let id = io.register(file)?;
        Ok(FileIo {
            io,
            file: id,
            path: file.path().to_path_buf(),
            instance,
        })
    }

    /// Like [`FileIo::open`] on a backend of the [`OFFLINE_BACKEND`] kind, instance 0.
    pub fn offline(file: &DataFile) -> Result<FileIo, IoError> {
        FileIo::open(file, OFFLINE_BACKEND, 0)
    }

    /// The backend and the request target of `class`, borrowed apart.
    fn parts(&mut self, class: IoClass) -> (&mut dyn IoBackend, Target<'_>) {
        let to = Target {
            file: self.file,
            path: &self.path,
            class,
            instance: self.instance,
        };
        (&mut *self.io, to)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`read`]: up to `len` bytes at `offset` in one request.
    pub fn read(
        &mut self,
        class: IoClass,
        buf: &mut AlignedBuf,
        len: usize,
        offset: u64,
    ) -> Result<usize, IoError> {
        let (io, from) = self.parts(class);
        read(io, from, buf, len, offset)
    }

    /// [`read_exact`]: exactly `len` bytes at `offset`.
    pub fn read_exact(
        &mut self,
        class: IoClass,
        buf: &mut AlignedBuf,
        len: usize,
        offset: u64,
    ) -> Result<(), IoError> {
        let (io, from) = self.parts(class);
        read_exact(io, from, buf, len, offset)
    }

    /// [`write_all`]: all of `buf[..len]` at `offset`, durable ones as
    /// [`IoOp::WriteSync`].
    pub fn write_all(
        &mut self,
        class: IoClass,
        buf: &mut AlignedBuf,
        len: usize,
        offset: u64,
        durable: bool,
    ) -> Result<(), IoError> {
        let (io, to) = self.parts(class);
        write_all(io, to, buf, len, offset, durable)
    }

    /// [`sync`]: `fdatasync` of the file.
    pub fn sync(&mut self, class: IoClass) -> Result<(), IoError> {
        let (io, to) = self.parts(class);
        sync(io, to)
    }

    /// "io_uring" or "threads".
    pub fn backend_name(&self) -> &'static str {
        self.io.name()
    }

    /// What the backend carried so far.
    pub fn stats(&self) -> &IoStats {
        self.io.stats()
    }
}

/// The error of a failed request as an [`IoError`]: the backend's own explanation
/// (a full filesystem, a misaligned direct I/O) when it gave one, else the operating
/// system's error with the file and offset.
fn error(path: &Path, op: &'static str, offset: u64, source: io::Error) -> IoError {
    // Only an error with a payload can carry an IoError; a raw OS error is kept whole.
    let source = if source.get_ref().is_some() {
        let kind = source.kind();
        match source.into_inner().map(|inner| inner.downcast::<IoError>()) {
            Some(Ok(inner)) => return *inner,
            Some(Err(other)) => io::Error::new(kind, other),
            None => io::Error::from(kind),
        }
    } else {
        source
    };
    IoError::Io {
        path: path.to_path_buf(),
        op,
        offset,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BackendKind, DataFile, IoMode, IoUringBackend, open_backend};

    fn each_backend(f: impl Fn(BackendKind)) {
        f(BackendKind::Threads);
        if IoUringBackend::new(1).is_ok() {
            f(BackendKind::IoUring);
        }
    }

    #[test]
    fn blocking_requests_are_done_and_counted_under_their_class() {
        each_backend(|kind| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            let file = DataFile::create_new(&path, IoMode::Buffered).unwrap();
            let mut io = open_backend(kind, 1).unwrap();
            let id = io.register(&file).unwrap();
            let to = |class| Target {
                file: id,
                path: &path,
                class,
                instance: 3,
            };
            let mut buf = AlignedBuf::new(8192);
            buf.fill(7);
            write_all(&mut *io, to(IoClass::DbGrowth), &mut buf, 8192, 4096, false).unwrap();
            assert_eq!(buf.len(), 8192, "the buffer comes back");
            write_all(&mut *io, to(IoClass::DbHeader), &mut buf, 4096, 0, true).unwrap();
            sync(&mut *io, to(IoClass::DbFlush)).unwrap();
            let mut back = AlignedBuf::new(16384);
            let n = read(&mut *io, to(IoClass::ReplicationRead), &mut back, 16384, 0).unwrap();
            assert_eq!(n, 12288, "a read past the end comes back short");
            assert!(back[..12288].iter().all(|&b| b == 7));
            let stats = io.stats();
            for (class, bytes) in [
                (IoClass::DbGrowth, 8192),
                (IoClass::DbHeader, 4096),
                (IoClass::DbFlush, 0),
                (IoClass::ReplicationRead, 12288),
            ] {
                let s = stats.get(3, class).expect("counted");
                assert_eq!((s.ops, s.bytes, s.errors), (1, bytes, 0), "{kind} {class}");
                assert_eq!(s.latency.count(), 1);
            }
        });
    }

    #[test]
    fn a_file_on_a_backend_of_its_own_reads_exactly_and_counts_under_each_class() {
        each_backend(|kind| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f");
            let file = DataFile::create_new(&path, IoMode::Buffered).unwrap();
            let mut io = FileIo::open(&file, kind, 2).unwrap();
            drop(file);
            assert_eq!(io.path(), path);
            let mut buf = AlignedBuf::new(8192);
            buf.fill(9);
            io.write_all(IoClass::OfflineWrite, &mut buf, 8192, 0, true)
                .unwrap();
            io.sync(IoClass::OfflineWrite).unwrap();
            let mut back = AlignedBuf::new(8192);
            io.read_exact(IoClass::HeaderRead, &mut back, 8192, 0)
                .unwrap();
            assert!(back.iter().all(|&b| b == 9));
            // Past the end: the error says so, with the file and where it ended.
            let err = io
                .read_exact(IoClass::HeaderRead, &mut back, 8192, 4096)
                .unwrap_err();
            match &err {
                IoError::Io {
                    path: p,
                    op: "read",
                    offset: 8192,
                    source,
                } => {
                    assert_eq!(p, &path);
                    assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
                }
                other => panic!("{kind}: unexpected error {other}"),
            }
            let stats = io.stats();
            let written = stats.get(2, IoClass::OfflineWrite).unwrap();
            assert_eq!((written.ops, written.bytes), (2, 8192), "{kind}");
            let read = stats.get(2, IoClass::HeaderRead).unwrap();
            // The full read, then the short one and the read that found the end.
            assert_eq!((read.ops, read.bytes), (3, 8192 + 4096), "{kind}");
        });
    }

    #[test]
    fn a_failed_request_names_the_file_and_keeps_the_buffer() {
        each_backend(|kind| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ro");
            std::fs::write(&path, [0u8; 4096]).unwrap();
            let file = DataFile::open(&path, IoMode::Buffered, crate::Access::ReadOnly).unwrap();
            let mut io = open_backend(kind, 1).unwrap();
            let id = io.register(&file).unwrap();
            let to = Target {
                file: id,
                path: &path,
                class: IoClass::LogCreate,
                instance: 0,
            };
            let mut buf = AlignedBuf::new(4096);
            let err = write_all(&mut *io, to, &mut buf, 4096, 0, true).unwrap_err();
            assert!(err.to_string().contains("ro"), "{err}");
            assert_eq!(buf.len(), 4096);
            assert_eq!(io.stats().get(0, IoClass::LogCreate).unwrap().errors, 1);
        });
    }
}
