//! Vectored writes (`IoBackend::submit_vectored`) on both backends, on real files: the
//! bytes land back to back at one offset, the write is one I/O of its total length in the
//! statistics, the buffers come back in order, and a refused write keeps its buffers.

use super::common;

use edbstress_io::{
    AlignedBuf, DataFile, FileId, IoBackend, IoClass, IoCompletion, IoError, IoMode, IoOp,
    IoRequest, MAX_WRITE_BUFFERS, VectoredWrite,
};

const BLOCK: usize = 4096;

fn new_file(dir: &std::path::Path, name: &str, mode: IoMode, len: u64) -> DataFile {
    let file = DataFile::create_new(dir.join(name), mode).unwrap();
    file.allocate(len).unwrap();
    file
}

/// Buffers of `sizes` bytes, each filled from its own seed.
fn buffers(sizes: &[usize], generation: u64) -> Vec<AlignedBuf> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut buf = AlignedBuf::new(len);
            common::fill_block(&mut buf, i as u64, generation);
            buf
        })
        .collect()
}

fn vectored(file: FileId, offset: u64, bufs: Vec<AlignedBuf>, tag: u64) -> VectoredWrite {
    VectoredWrite {
        file,
        offset,
        bufs,
        class: IoClass::DbWrite,
        instance: 4,
        tag,
    }
}

fn wait_all(backend: &mut dyn IoBackend) -> Vec<IoCompletion> {
    let mut done = Vec::new();
    while backend.in_flight() > 0 {
        backend.wait(1, &mut done).unwrap();
    }
    done
}

#[test]
fn vectored_write_lands_back_to_back_as_one_counted_io() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [BLOCK, 2 * BLOCK, BLOCK, 8 * BLOCK];
    let total: usize = sizes.iter().sum();
    for mode in common::modes(dir.path()) {
        for mut backend in common::backends(4) {
            let label = format!("{} {mode:?}", backend.name());
            let file = new_file(
                dir.path(),
                &format!("v-{}-{mode:?}", backend.name()),
                mode,
                64 * BLOCK as u64,
            );
            let id = backend.register(&file).unwrap();
            let bufs = buffers(&sizes, 1);
            let expected: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let offset = 3 * BLOCK as u64;
            let mut req = vectored(id, offset, bufs, 77);
            assert_eq!(req.len(), total);
            backend.submit_vectored(&mut req).unwrap();
            assert!(
                req.bufs.is_empty(),
                "{label}: the buffers moved into the backend"
            );
            assert_eq!(backend.in_flight(), 1);
            let done = wait_all(backend.as_mut());
            assert_eq!(done.len(), 1, "{label}");
            let c = &done[0];
            assert_eq!(
                (c.tag, c.op, c.offset),
                (77, IoOp::Write, offset),
                "{label}"
            );
            assert_eq!(*c.result.as_ref().unwrap(), total, "{label}");
            assert!(c.buf.is_empty(), "{label}");
            // The buffers come back in order, unchanged.
            let lens: Vec<usize> = c.bufs.iter().map(|b| b.len()).collect();
            assert_eq!(lens, sizes, "{label}");
            let returned: Vec<u8> = c.bufs.iter().flat_map(|b| b.iter().copied()).collect();
            assert!(returned == expected, "{label}");
            // On disk: the concatenation at the offset, nothing around it touched.
            let mut back = AlignedBuf::new(64 * BLOCK);
            common::pread(file.path(), &mut back, 0);
            let at = offset as usize;
            assert!(
                back[at..at + total] == expected[..],
                "{label}: bytes on disk"
            );
            assert!(
                back[..at].iter().all(|&b| b == 0),
                "{label}: before untouched"
            );
            assert!(
                back[at + total..].iter().all(|&b| b == 0),
                "{label}: after untouched"
            );
            // One I/O of the total length, timed once.
            let s = backend.stats().get(4, IoClass::DbWrite).unwrap();
            assert_eq!((s.ops, s.bytes, s.errors), (1, total as u64, 0), "{label}");
            assert_eq!(s.latency.count(), 1, "{label}");
        }
    }
}

#[test]
fn vectored_and_plain_requests_share_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    for mut backend in common::backends(8) {
        let label = backend.name();
        let file = new_file(
            dir.path(),
            &format!("mix-{label}"),
            IoMode::Buffered,
            256 * BLOCK as u64,
        );
        let id = backend.register(&file).unwrap();
        let mut expected = vec![0u8; 256 * BLOCK];
        // Four vectored writes of 4 one-block buffers and four plain writes, interleaved,
        // to disjoint ranges, all in flight together.
        for i in 0..4u64 {
            let bufs = buffers(&[BLOCK; 4], 10 + i);
            let at = (i as usize) * 8 * BLOCK;
            for (k, b) in bufs.iter().enumerate() {
                expected[at + k * BLOCK..at + (k + 1) * BLOCK].copy_from_slice(b);
            }
            backend
                .submit_vectored(&mut vectored(id, at as u64, bufs, i))
                .unwrap();
            let mut buf = AlignedBuf::new(2 * BLOCK);
            common::fill_block(&mut buf, 100 + i, 3);
            let plain_at = 128 * BLOCK + (i as usize) * 2 * BLOCK;
            expected[plain_at..plain_at + 2 * BLOCK].copy_from_slice(&buf);
            backend
                .submit(IoRequest {
                    file: id,
                    op: IoOp::Write,
                    offset: plain_at as u64,
                    buf,
                    len: 2 * BLOCK,
                    class: IoClass::DbWrite,
                    instance: 4,
                    tag: 100 + i,
                })
                .unwrap();
        }
        assert_eq!(backend.in_flight(), 8);
        let done = wait_all(backend.as_mut());
        assert_eq!(done.len(), 8, "{label}");
        for c in &done {
            let vectored = c.tag < 100;
            assert_eq!(c.bufs.len(), if vectored { 4 } else { 0 }, "{label}");
            assert_eq!(c.buf.is_empty(), vectored, "{label}");
            let len = if vectored { 4 * BLOCK } else { 2 * BLOCK };
            assert_eq!(*c.result.as_ref().unwrap(), len, "{label}");
        }
        let mut back = vec![0u8; 256 * BLOCK];
        common::pread(file.path(), &mut back, 0);
        assert!(back == expected, "{label}: bytes on disk");
        let s = backend.stats().get(4, IoClass::DbWrite).unwrap();
        assert_eq!(
            (s.ops, s.bytes),
            (8, 4 * (4 + 2) * BLOCK as u64),
            "{label}: one I/O per request"
        );
    }
}

#[test]
fn a_refused_vectored_write_keeps_its_buffers() {
    let dir = tempfile::tempdir().unwrap();
    for mut backend in common::backends(1) {
        let label = backend.name();
        let file = new_file(
            dir.path(),
            &format!("val-{label}"),
            IoMode::Buffered,
            16 * BLOCK as u64,
        );
        let id = backend.register(&file).unwrap();

        let mut none = vectored(id, 0, Vec::new(), 0);
        let err = backend.submit_vectored(&mut none).unwrap_err();
        assert!(
            matches!(err, IoError::BadBufferCount { count: 0, .. }),
            "{label}: {err}"
        );
        let mut too_many = vectored(
            id,
            0,
            (0..=MAX_WRITE_BUFFERS)
                .map(|_| AlignedBuf::new(0))
                .collect(),
            0,
        );
        let err = backend.submit_vectored(&mut too_many).unwrap_err();
        assert!(
            matches!(err, IoError::BadBufferCount { count, .. } if count == MAX_WRITE_BUFFERS + 1),
            "{label}: {err}"
        );
        assert_eq!(too_many.bufs.len(), MAX_WRITE_BUFFERS + 1);

        let mut unknown = vectored(FileId(9), 0, buffers(&[BLOCK, BLOCK], 1), 0);
        let err = backend.submit_vectored(&mut unknown).unwrap_err();
        assert!(matches!(err, IoError::UnknownFile(9)), "{label}: {err}");
        assert_eq!(unknown.bufs.len(), 2, "{label}: the caller keeps its data");
        let mut far = vectored(id, u64::MAX, buffers(&[BLOCK], 1), 0);
        assert!(matches!(
            backend.submit_vectored(&mut far).unwrap_err(),
            IoError::BadOffset { .. }
        ));
        assert_eq!(far.bufs.len(), 1);
        assert_eq!(backend.in_flight(), 0);

        // Depth 1: a second write is refused while the first is queued, and keeps its
        // buffers; submitted after the first is reaped, it goes through.
        let mut first = vectored(id, 0, buffers(&[BLOCK, BLOCK], 2), 1);
        backend.submit_vectored(&mut first).unwrap();
        let mut second = vectored(id, 2 * BLOCK as u64, buffers(&[BLOCK, BLOCK], 3), 2);
        let err = backend.submit_vectored(&mut second).unwrap_err();
        assert!(
            matches!(err, IoError::QueueFull { depth: 1 }),
            "{label}: {err}"
        );
        assert_eq!(second.bufs.len(), 2);
        let expected: Vec<u8> = second.bufs.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(wait_all(backend.as_mut()).len(), 1);
        backend.submit_vectored(&mut second).unwrap();
        let done = wait_all(backend.as_mut());
        assert_eq!(*done[0].result.as_ref().unwrap(), 2 * BLOCK);
        let mut back = vec![0u8; 2 * BLOCK];
        common::pread(file.path(), &mut back, 2 * BLOCK as u64);
        assert!(back == expected, "{label}");
        // Refused writes were never counted.
        let s = backend.stats().get(4, IoClass::DbWrite).unwrap();
        assert_eq!((s.ops, s.errors), (2, 0), "{label}");
    }
}

#[test]
fn a_failed_vectored_write_is_one_counted_error_with_its_buffers_back() {
    // Writing to a file opened read-only fails (EBADF) in the kernel, not at submission.
    let dir = tempfile::tempdir().unwrap();
    for mut backend in common::backends(2) {
        let label = backend.name();
        let path = dir.path().join(format!("ro-{label}"));
        new_file(
            dir.path(),
            &format!("ro-{label}"),
            IoMode::Buffered,
            4 * BLOCK as u64,
        );
        let file = DataFile::open(&path, IoMode::Buffered, edbstress_io::Access::ReadOnly).unwrap();
        let id = backend.register(&file).unwrap();
        backend
            .submit_vectored(&mut vectored(id, 0, buffers(&[BLOCK, 2 * BLOCK], 5), 3))
            .unwrap();
        let done = wait_all(backend.as_mut());
        assert_eq!(done.len(), 1);
        assert!(done[0].result.is_err(), "{label}");
        assert_eq!(done[0].bufs.len(), 2, "{label}: buffers given back");
        let s = backend.stats().get(4, IoClass::DbWrite).unwrap();
        assert_eq!(
            (s.ops, s.bytes, s.errors),
            (0, 0, 1),
            "{label}: one failed I/O"
        );
    }
}
