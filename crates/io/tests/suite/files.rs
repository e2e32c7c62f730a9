//! DataFile's opening, sizing and filesystem queries on real files (its reads and
//! writes, private to the crate, are tested beside them in `src/file.rs`).

use super::common;

use std::io::ErrorKind;
use std::path::Path;

use edbstress_io::blocking::FileIo;
use edbstress_io::{Access, DataFile, IoClass, IoError, IoMode, available_space, filesystem_id};

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
    let written = DataFile::open(&path, IoMode::Buffered, Access::ReadOnly).unwrap();
    FileIo::offline(&written)
        .unwrap()
        .sync(IoClass::OfflineWrite)
        .unwrap();
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
