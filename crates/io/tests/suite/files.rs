//! DataFile, alignment and filesystem queries on real files.

use super::common;

use std::io::ErrorKind;
use std::path::Path;

use edbstress_io::{Access, AlignedBuf, DataFile, IoError, IoMode, available_space, filesystem_id};

#[test]
fn create_new_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.edb");
    for mode in common::modes(dir.path()) {
        std::fs::write(&path, b"precious").unwrap();
        let err = DataFile::create_new(&path, mode).unwrap_err();
        assert!(
            matches!(&err, IoError::AlreadyExists { path: p } if p == &path),
            "{err}"
        );
        assert!(err.to_string().contains("already exists"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn sync_round_trip_in_each_mode() {
    let dir = tempfile::tempdir().unwrap();
    for mode in common::modes(dir.path()) {
        let path = dir.path().join(format!("{mode:?}.dat"));
        let file = DataFile::create_new(&path, mode).unwrap();
        assert_eq!(file.mode(), mode);
        assert_eq!(file.path(), path);
        assert_eq!(file.access(), Access::ReadWrite);
        file.allocate(64 * 1024).unwrap();
        assert_eq!(file.len().unwrap(), 64 * 1024);

        let mut block = AlignedBuf::new(8192);
        common::fill_block(&mut block, 3, 1);
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
    for mode in common::modes(dir.path()) {
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
        // A single read reports the short count; past EOF, zero.
        assert_eq!(file.read_at(&mut buf, 0).unwrap(), 4096);
        assert_eq!(file.read_at(&mut buf, 1 << 20).unwrap(), 0);
    }
}

#[test]
fn allocate_never_shrinks_and_set_len_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = DataFile::create_new(dir.path().join("a"), IoMode::Buffered).unwrap();
    file.allocate(1 << 20).unwrap();
    assert_eq!(file.len().unwrap(), 1 << 20);
    file.allocate(4096).unwrap();
    assert_eq!(file.len().unwrap(), 1 << 20);
    file.set_len(8192).unwrap();
    assert_eq!(file.len().unwrap(), 8192);
}

#[test]
fn open_missing_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.edb");
    let err = DataFile::open(&path, IoMode::Direct, Access::ReadWrite).unwrap_err();
    assert!(
        matches!(&err, IoError::Io { op: "open", source, .. } if source.kind() == ErrorKind::NotFound),
        "{err}"
    );
    assert!(err.to_string().contains("missing.edb"), "{err}");
}

#[test]
fn misaligned_direct_io_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    if !common::modes(dir.path()).contains(&IoMode::Direct) {
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
                Err(err) => assert!(matches!(err, IoError::DirectIoUnsupported { .. }), "{err}"),
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

#[test]
fn direct_io_unsupported_message_is_actionable() {
    let err = IoError::DirectIoUnsupported {
        path: "/mnt/nfs/db.edb".into(),
    };
    let msg = err.to_string();
    assert!(msg.contains("/mnt/nfs/db.edb"), "{msg}");
    assert!(
        msg.contains("O_DIRECT") && msg.contains("--buffered"),
        "{msg}"
    );
    assert!(msg.contains("ext4 or xfs"), "{msg}");
}

#[test]
fn available_space_and_filesystem_id() {
    let dir = tempfile::tempdir().unwrap();
    assert!(available_space(dir.path()).unwrap() > 0);
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::write(&a, b"x").unwrap();
    std::fs::write(&b, b"y").unwrap();
    assert_eq!(filesystem_id(&a).unwrap(), filesystem_id(&b).unwrap());
    assert_eq!(
        filesystem_id(&a).unwrap(),
        filesystem_id(dir.path()).unwrap()
    );
    if Path::new("/proc").is_dir() {
        // procfs is a different filesystem from any temp directory.
        assert_ne!(
            filesystem_id(Path::new("/proc")).unwrap(),
            filesystem_id(&a).unwrap()
        );
    }
    let missing = dir.path().join("nope");
    assert!(matches!(
        available_space(&missing),
        Err(IoError::Io { op: "statvfs", .. })
    ));
    assert!(filesystem_id(&missing).is_err());
}

/// Pages of `file`'s first `len` bytes resident in the page cache (mmap + mincore).
fn resident_pages(file: &std::fs::File, len: usize) -> usize {
    use std::os::fd::AsRawFd;
    let page = 4096;
    // SAFETY: a shared read-only mapping of `len` bytes of an open file of at least that
    // size; it is only passed to mincore and unmapped before returning.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED, "mmap");
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: addr is a live mapping of len bytes; vec has one byte per page of it.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: addr and len are the mapping made above.
    unsafe { libc::munmap(addr, len) };
    assert_eq!(rc, 0, "mincore");
    vec.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn drop_cached_pages_empties_the_page_cache_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copied.edb");
    let len = 1 << 20;
    // Written through the page cache, as `cp` does, and made clean.
    std::fs::write(&path, vec![0x5Au8; len]).unwrap();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let plain = std::fs::File::open(&path).unwrap();
    let before = resident_pages(&plain, len);
    if before == 0 {
        eprintln!(
            "SKIPPED: the filesystem of {} keeps no written pages cached",
            path.display()
        );
        return;
    }
    let file = DataFile::open(&path, IoMode::Buffered, Access::ReadOnly).unwrap();
    assert!(file.drop_cached_pages(), "posix_fadvise refused");
    let after = resident_pages(&plain, len);
    // tmpfs keeps them (its pages are the file); any disk filesystem drops clean pages.
    if filesystem_is_tmpfs(dir.path()) {
        eprintln!(
            "SKIPPED: {} is on tmpfs, whose pages cannot be dropped",
            path.display()
        );
        return;
    }
    assert_eq!(after, 0, "{before} pages cached before, {after} after");
    // The contents are untouched.
    assert!(std::fs::read(&path).unwrap().iter().all(|&b| b == 0x5A));
}

fn filesystem_is_tmpfs(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|mounts| {
        // The longest mount point that prefixes dir.
        mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let (_, point, kind) = (f.next()?, f.next()?, f.next()?);
                dir.starts_with(point)
                    .then(|| (point.len(), kind == "tmpfs"))
            })
            .max()
            .is_some_and(|(_, tmpfs)| tmpfs)
    })
}
