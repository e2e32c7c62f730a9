//! Data files opened for direct or buffered I/O, and filesystem queries.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::IoError;
use crate::buf::BUF_ALIGN;

/// How a file is accessed: bypassing the page cache (`O_DIRECT`, the default for tests of
/// storage) or through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// `O_DIRECT`: buffers, lengths and offsets must be aligned (use [`crate::AlignedBuf`]
    /// and multiples of 4096).
    #[default]
    Direct,
    /// Through the page cache.
    Buffered,
}

/// Whether a file is opened for reading only or for reading and writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `O_RDONLY`.
    ReadOnly,
    /// `O_RDWR`.
    ReadWrite,
}

/// An open file together with its path and I/O mode. Every error it returns names the
/// path, the operation and, for reads and writes, the offset.
#[derive(Debug)]
pub struct DataFile {
    file: File,
    path: PathBuf,
    mode: IoMode,
    access: Access,
}

impl DataFile {
    /// Creates a new file for reading and writing (`O_CREAT | O_EXCL`): fails with
    /// [`IoError::AlreadyExists`] rather than overwrite anything. In direct mode, if the
    /// filesystem refuses `O_DIRECT`, the just-created file is removed again and
    /// [`IoError::DirectIoUnsupported`] is returned.
    pub fn create_new(path: impl AsRef<Path>, mode: IoMode) -> Result<DataFile, IoError> {
        let path = path.as_ref();
        // Created without O_DIRECT first: on filesystems that reject the flag, open(2)
        // with O_CREAT|O_DIRECT may leave an empty file behind before failing, which we
        // could not tell apart from someone else's file.
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|source| match source.kind() {
                io::ErrorKind::AlreadyExists => IoError::AlreadyExists {
                    path: path.to_path_buf(),
                },
                _ => IoError::file_op(path, "create", source),
            })?;
        let file = match mode {
            IoMode::Buffered => created,
            IoMode::Direct => {
                drop(created);
                match Self::open_file(path, mode, Access::ReadWrite) {
                    Ok(file) => file,
                    Err(err) => {
                        // Best effort: the file is ours (O_EXCL) and empty; leaving it would
                        // make a retry with --buffered fail with "already exists".
                        let _ = std::fs::remove_file(path);
                        return Err(err);
                    }
                }
            }
        };
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            mode,
            access: Access::ReadWrite,
        })
    }

    /// Opens an existing file. In direct mode a filesystem that refuses `O_DIRECT` gives
    /// [`IoError::DirectIoUnsupported`].
    pub fn open(path: impl AsRef<Path>, mode: IoMode, access: Access) -> Result<DataFile, IoError> {
        let path = path.as_ref();
        let file = Self::open_file(path, mode, access)?;
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            mode,
            access,
        })
    }

    /// Opens an existing file for reading and writing with `O_DSYNC`: every write is
    /// durable (data, and the metadata needed to read it) when it completes.
    pub fn open_dsync(path: impl AsRef<Path>, mode: IoMode) -> Result<DataFile, IoError> {
        let path = path.as_ref();
        let file = Self::open_file_with(path, mode, Access::ReadWrite, libc::O_DSYNC)?;
        Ok(DataFile {
            file,
            path: path.to_path_buf(),
            mode,
            access: Access::ReadWrite,
        })
    }

    fn open_file(path: &Path, mode: IoMode, access: Access) -> Result<File, IoError> {
        Self::open_file_with(path, mode, access, 0)
    }

    fn open_file_with(
        path: &Path,
        mode: IoMode,
        access: Access,
        extra_flags: i32,
    ) -> Result<File, IoError> {
        let options = |direct: bool| {
            let mut options = OpenOptions::new();
            options.read(true).write(access == Access::ReadWrite);
            let direct_flag = if direct { libc::O_DIRECT } else { 0 };
            options.custom_flags(direct_flag | extra_flags);
            options
        };
        match options(mode == IoMode::Direct).open(path) {
            Ok(file) => Ok(file),
            Err(source) if mode == IoMode::Direct && is_einval(&source) => {
                // EINVAL from open(2) can have other causes; the flag is to blame only if
                // the same open succeeds without it.
                match options(false).open(path) {
                    Ok(_) => Err(IoError::DirectIoUnsupported {
                        path: path.to_path_buf(),
                    }),
                    Err(_) => Err(IoError::file_op(path, "open", source)),
                }
            }
            Err(source) => Err(IoError::file_op(path, "open", source)),
        }
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Direct or buffered.
    pub fn mode(&self) -> IoMode {
        self.mode
    }

    /// Read-only or read-write.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The underlying `std::fs::File`, for the backends that register it.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Current size in bytes.
    pub fn len(&self) -> Result<u64, IoError> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| IoError::file_op(&self.path, "stat", e))
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> Result<bool, IoError> {
        Ok(self.len()? == 0)
    }

    /// Makes the file at least `len` bytes long with its blocks reserved (`fallocate`),
    /// so later writes cannot fail for lack of space and need no allocation; on
    /// filesystems without `fallocate` (some ZFS versions, NFS < 4.2) it only extends the
    /// size with `set_len`. Never shrinks the file.
    pub fn allocate(&self, len: u64) -> Result<(), IoError> {
        let current = self.len()?;
        if current >= len {
            return Ok(());
        }
        let Ok(size) = libc::off_t::try_from(len) else {
            return Err(IoError::file_op(
                &self.path,
                "fallocate",
                io::Error::new(io::ErrorKind::InvalidInput, "length exceeds off_t"),
            ));
        };
        loop {
            // SAFETY: fallocate takes no pointers; the descriptor is owned by self.file and
            // open for the duration of the call.
            let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, size) };
            if rc == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => return self.set_len(len),
                _ => {
                    return Err(IoError::from_os(
                        &self.path,
                        "fallocate",
                        0,
                        Some(len - current),
                        err,
                    ));
                }
            }
        }
    }

    /// Asks the kernel to drop the file's clean pages from the page cache
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)`; dirty ones are queued for writeback and
    /// stay). For a file used with direct I/O those pages are pure cost: every direct
    /// write to a range that has some must write back and invalidate them first, and
    /// io_uring hands such writes to a kernel worker thread instead of issuing them
    /// inline (a database copied with `cp` just before a run has all of them). Best
    /// effort: returns whether the kernel took the advice.
    pub fn drop_cached_pages(&self) -> bool {
        // SAFETY: posix_fadvise takes no pointers; the descriptor is owned by self.file
        // and open for the duration of the call.
        let rc =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        rc == 0
    }

    /// Truncates or extends the file to exactly `len` bytes (extension is sparse).
    pub fn set_len(&self, len: u64) -> Result<(), IoError> {
        self.file
            .set_len(len)
            .map_err(|e| IoError::file_op(&self.path, "set_len", e))
    }

    /// Reads exactly `buf.len()` bytes at `offset`; reaching end of file first is an error
    /// (kind `UnexpectedEof`). Retries on EINTR and short reads.
    #[allow(clippy::disallowed_methods)] // the io crate issues the I/O
    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
        let (addr, len) = (buf.as_ptr() as usize, buf.len());
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| rw_error(&self.path, self.mode, "read", offset, addr, len, e))
    }

    /// Writes all of `buf` at `offset`, retrying on EINTR and short writes.
    #[allow(clippy::disallowed_methods)] // the io crate issues the I/O
    pub(crate) fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<(), IoError> {
        crate::power_cut::write(&self.file, offset, buf, || {
            self.file.write_all_at(buf, offset).map(|()| buf.len())
        })
        .map(|_| ())
        .map_err(|e| {
            rw_error(
                &self.path,
                self.mode,
                "write",
                offset,
                buf.as_ptr() as usize,
                buf.len(),
                e,
            )
        })
    }

    /// `fdatasync`: the file's data (and the metadata needed to read it back, such as its
    /// size) are on stable storage when this returns.
    #[allow(clippy::disallowed_methods)] // the io crate issues the I/O
    pub(crate) fn sync_data(&self) -> Result<(), IoError> {
        crate::power_cut::sync(&self.file, || self.file.sync_data())
            .map_err(|e| IoError::file_op(&self.path, "fdatasync", e))
    }

    /// Whether direct I/O on this file takes requests of `block` bytes at offsets that
    /// are multiples of `block` (a power of two, at most 4096): the device's logical
    /// sector and the filesystem decide, and one with 4 KiB logical sectors refuses
    /// 512-byte requests (EINVAL). Tried with one read of `block` bytes at offset
    /// `block`, which must hold written data (a read beyond the end of the file or in
    /// a hole is not checked by the kernel). A buffered file takes any request.
    #[allow(clippy::disallowed_methods)] // the io crate issues the I/O
    pub fn takes_direct_requests_of(&self, block: usize) -> Result<bool, IoError> {
        if self.mode != IoMode::Direct {
            return Ok(true);
        }
        let mut buf = crate::AlignedBuf::new(block);
        loop {
            match self.file.read_at(&mut buf, block as u64) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_einval(&e) => return Ok(false),
                Err(e) => {
                    return Err(IoError::from_os(
                        &self.path,
                        "read",
                        block as u64,
                        Some(block as u64),
                        e,
                    ));
                }
            }
        }
    }

    /// The raw descriptor; it stays owned by this `DataFile`.
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsRawFd for DataFile {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsFd for DataFile {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

fn is_einval(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EINVAL)
}

/// Turns a failed read or write into an [`IoError`]. With `O_DIRECT`, EINVAL on a request
/// that is aligned to 4096 in address, length and offset means the filesystem accepted the
/// flag at open but cannot do direct I/O; on a misaligned one it means the caller's
/// alignment is wrong.
pub(crate) fn rw_error(
    path: &Path,
    mode: IoMode,
    op: &'static str,
    offset: u64,
    addr: usize,
    len: usize,
    source: io::Error,
) -> IoError {
    if mode == IoMode::Direct && is_einval(&source) {
        let aligned =
            addr % BUF_ALIGN == 0 && len % BUF_ALIGN == 0 && offset % BUF_ALIGN as u64 == 0;
        if aligned {
            return IoError::DirectIoUnsupported {
                path: path.to_path_buf(),
            };
        }
        return IoError::Misaligned {
            path: path.to_path_buf(),
            op,
            offset,
            len,
        };
    }
    IoError::from_os(path, op, offset, Some(len as u64), source)
}

/// Makes the entries of the directory `dir` durable (`fsync` of the directory: a file
/// created or renamed in it survives a crash). Filesystems that cannot fsync a
/// directory (EINVAL) are accepted: they order metadata themselves.
#[allow(clippy::disallowed_methods)] // the io crate issues the I/O
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    let handle = File::open(dir).map_err(|e| IoError::file_op(dir, "open directory", e))?;
    match handle.sync_all() {
        Ok(()) => Ok(()),
        Err(e) if is_einval(&e) => Ok(()),
        Err(e) => Err(IoError::file_op(dir, "fsync directory", e)),
    }
}

/// Bytes available to unprivileged users on the filesystem holding `path`
/// (`statvfs`: `f_bavail × f_frsize`). `path` must exist: for a file about to be created,
/// pass its directory.
pub fn available_space(path: &Path) -> Result<u64, IoError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        IoError::file_op(
            path,
            "statvfs",
            io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"),
        )
    })?;
    let mut st = MaybeUninit::<libc::statvfs>::uninit();
    loop {
        // SAFETY: c_path is a NUL-terminated string alive across the call, and st points to
        // writable memory of the type statvfs fills in.
        let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(IoError::file_op(path, "statvfs", err));
        }
    }
    // SAFETY: statvfs returned 0, so it initialised the whole struct.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // the field types differ between libc targets
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// The id of the filesystem (device, `st_dev`) holding `path`, so callers can group files
/// that share free space. `path` must exist (pass the directory of a file to be created).
pub fn filesystem_id(path: &Path) -> Result<u64, IoError> {
    std::fs::metadata(path)
        .map(|m| m.dev())
        .map_err(|e| IoError::file_op(path, "stat", e))
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use super::*;
    use crate::AlignedBuf;

    /// The modes files in `dir` can be opened in: direct only where the filesystem
    /// takes `O_DIRECT`.
    fn modes(dir: &Path) -> Vec<IoMode> {
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

    #[test]
    fn sync_round_trip_in_each_mode() {
        let dir = tempfile::tempdir().unwrap();
        for mode in modes(dir.path()) {
            let path = dir.path().join(format!("{mode:?}.dat"));
            let file = DataFile::create_new(&path, mode).unwrap();
            assert_eq!(file.mode(), mode);
            assert_eq!(file.path(), path);
            assert_eq!(file.access(), Access::ReadWrite);
            file.allocate(64 * 1024).unwrap();
            assert_eq!(file.len().unwrap(), 64 * 1024);

            let mut block = AlignedBuf::new(8192);
            block
                .iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = (i * 7 + 3) as u8);
            file.write_all_at(&block, 16384).unwrap();
            file.sync_data().unwrap();
            drop(file);

            let file = DataFile::open(&path, mode, Access::ReadOnly).unwrap();
            let mut back = AlignedBuf::new(8192);
            file.read_exact_at(&mut back, 16384).unwrap();
            assert_eq!(&back[..], &block[..]);
            // Untouched allocated space reads as zeroes.
            file.read_exact_at(&mut back, 0).unwrap();
            assert!(back.iter().all(|&b| b == 0));
            assert!(file.raw_fd() >= 0);
            // A read-only file refuses writes with a clear error.
            let err = file.write_all_at(&block, 0).unwrap_err();
            assert!(
                matches!(
                    err,
                    IoError::Io {
                        op: "write",
                        offset: 0,
                        ..
                    }
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn read_past_end_of_file() {
        let dir = tempfile::tempdir().unwrap();
        for mode in modes(dir.path()) {
            let path = dir.path().join(format!("eof-{mode:?}"));
            let file = DataFile::create_new(&path, mode).unwrap();
            file.set_len(4096).unwrap();
            let mut buf = AlignedBuf::new(8192);
            // Exact read crossing EOF is an error naming path, op and offset.
            let err = file.read_exact_at(&mut buf, 0).unwrap_err();
            match &err {
                IoError::Io {
                    path: p,
                    op,
                    offset,
                    source,
                } => {
                    assert_eq!(p, &path);
                    assert_eq!(*op, "read");
                    assert_eq!(*offset, 0);
                    assert_eq!(source.kind(), ErrorKind::UnexpectedEof);
                }
                other => panic!("unexpected error {other}"),
            }
            assert!(err.to_string().contains("at offset 0"), "{err}");
        }
    }

    #[test]
    fn misaligned_direct_io_is_explained() {
        let dir = tempfile::tempdir().unwrap();
        if !modes(dir.path()).contains(&IoMode::Direct) {
            return;
        }
        let path = dir.path().join("d");
        let file = DataFile::create_new(&path, IoMode::Direct).unwrap();
        file.allocate(16384).unwrap();
        let buf = AlignedBuf::new(4096);
        let err = file.write_all_at(&buf, 1).unwrap_err();
        assert!(
            matches!(
                err,
                IoError::Misaligned {
                    offset: 1,
                    len: 4096,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("multiples of 4096"), "{err}");
    }

    #[test]
    fn direct_io_unsupported_is_reported_on_such_a_filesystem() {
        // tmpfs refused O_DIRECT before Linux 6.6; newer kernels accept it.
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            println!("skipped: no /dev/shm");
            return;
        }
        let dir = tempfile::tempdir_in(shm).unwrap();
        let path = dir.path().join("db.edb");
        match DataFile::create_new(&path, IoMode::Direct) {
            Ok(file) => {
                // Some filesystems only fail at the first I/O.
                file.set_len(4096).unwrap();
                let mut buf = AlignedBuf::new(4096);
                match file.read_exact_at(&mut buf, 0) {
                    Ok(()) => println!("skipped: /dev/shm accepts O_DIRECT on this kernel"),
                    Err(err) => {
                        assert!(matches!(err, IoError::DirectIoUnsupported { .. }), "{err}")
                    }
                }
            }
            Err(err) => {
                assert!(matches!(&err, IoError::DirectIoUnsupported { path: p } if p == &path));
                let msg = err.to_string();
                assert!(
                    msg.contains("--buffered") && msg.contains("db.edb"),
                    "{msg}"
                );
                // The half-created file was removed, so a buffered retry works.
                assert!(!path.exists());
                DataFile::create_new(&path, IoMode::Buffered).unwrap();
            }
        }
    }
}
