//! `Auto` falls back to the thread pool when the kernel refuses io_uring, here refused
//! for real by a seccomp filter like those of container runtimes.

use super::common;

use edbstress_io::{
    AlignedBuf, BackendKind, DataFile, IoClass, IoError, IoMode, IoOp, IoRequest, open_backend,
};

/// Makes io_uring_setup fail with EPERM on the calling thread (seccomp filters apply to
/// the thread that installs them and threads it starts later). Returns false if the
/// kernel has no seccomp filters.
fn forbid_io_uring_on_this_thread() -> bool {
    let stmt = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let mut filter = [
        // A = seccomp_data.nr (offset 0)
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        // if A == io_uring_setup fall through to EPERM, else skip to ALLOW
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_setup as u32,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes only integers and affects this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return false;
    }
    // SAFETY: `prog` points at `filter`, both alive across the call; the kernel copies
    // the program before returning.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    rc == 0
}

#[test]
fn auto_falls_back_to_threads_when_io_uring_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fallback.dat");
    std::thread::spawn(move || {
        if !forbid_io_uring_on_this_thread() {
            println!("skipped: seccomp filters unavailable");
            return;
        }
        let err = open_backend(BackendKind::IoUring, 8)
            .err()
            .expect("io_uring must be refused");
        assert!(matches!(err, IoError::IoUringUnavailable { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("Operation not permitted"), "{msg}");
        assert!(msg.contains("threads backend"), "{msg}");

        let mut backend = open_backend(BackendKind::Auto, 8).unwrap();
        assert_eq!(backend.name(), "threads");
        let file = DataFile::create_new(&path, IoMode::Buffered).unwrap();
        let id = backend.register(&file).unwrap();
        let mut buf = AlignedBuf::new(4096);
        buf.fill(0x5A);
        backend
            .submit(IoRequest {
                file: id,
                op: IoOp::Write,
                offset: 8192,
                len: buf.len(),
                buf,
                class: IoClass::LogWrite,
                instance: 0,
                tag: 1,
            })
            .unwrap();
        let mut done = Vec::new();
        backend.wait(1, &mut done).unwrap();
        assert_eq!(*done[0].result.as_ref().unwrap(), 4096);
        let mut back = [0u8; 4096];
        common::pread(file.path(), &mut back, 8192);
        assert!(back.iter().all(|&b| b == 0x5A));
    })
    .join()
    .unwrap();
    // Other threads are unaffected.
    if let Ok(b) = open_backend(BackendKind::IoUring, 8) {
        assert_eq!(b.name(), "io_uring");
    }
}
