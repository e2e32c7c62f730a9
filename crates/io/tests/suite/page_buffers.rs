//! Page-sized buffers (4–32 KiB) come from huge-page chunks, are zeroed whenever handed
//! out, and go through io_uring as registered (fixed) buffers; other sizes come from the
//! heap and go as plain requests. On real files, through a real ring.

use super::common;

use edbstress_io::{
    AlignedBuf, DataFile, IoBackend, IoClass, IoOp, IoRequest, IoUringBackend, VectoredWrite,
};

const PAGE: usize = 32 << 10;
const HUGE_PAGE: usize = 2 << 20;

/// The `VmFlags` and start address of the mapping holding `addr`, from /proc/self/smaps.
fn mapping_of(addr: usize) -> Option<(usize, String)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut current: Option<usize> = None;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-')
            && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        {
            current = (lo <= addr && addr < hi).then_some(lo);
            continue;
        }
        if let (Some(start), Some(flags)) = (current, line.strip_prefix("VmFlags:")) {
            return Some((start, flags.trim().to_string()));
        }
    }
    None
}

#[test]
fn page_buffers_are_zeroed_aligned_and_apart_and_reused_zeroed() {
    for size in [4096, 8192, 16384, PAGE] {
        let mut bufs: Vec<AlignedBuf> = (0..300).map(|_| AlignedBuf::new(size)).collect();
        let mut starts: Vec<usize> = bufs.iter().map(|b| b.as_ptr() as usize).collect();
        starts.sort_unstable();
        for pair in starts.windows(2) {
            assert!(pair[1] - pair[0] >= size, "{size}-byte buffers overlap");
        }
        for buf in &mut bufs {
            assert_eq!(buf.as_ptr() as usize % 4096, 0);
            assert_eq!((buf.len(), buf.capacity()), (size, size));
            assert!(
                buf.iter().all(|&b| b == 0),
                "a new {size}-byte buffer is not zero"
            );
            buf.fill(0xA5);
        }
        drop(bufs);
        // The buffers just given back are handed out again, and must come back zeroed.
        let again: Vec<AlignedBuf> = (0..300).map(|_| AlignedBuf::new(size)).collect();
        let reused = again
            .iter()
            .filter(|b| starts.binary_search(&(b.as_ptr() as usize)).is_ok())
            .count();
        assert!(reused > 0, "no {size}-byte buffer given back was reused");
        for buf in &again {
            assert!(
                buf.iter().all(|&b| b == 0),
                "a reused {size}-byte buffer is not zero"
            );
        }
    }
}

#[test]
fn page_buffers_live_in_huge_page_advised_chunks() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("SKIPPED: this kernel has no transparent huge pages; chunks use 4 KiB pages");
        return;
    }
    let page = AlignedBuf::new(PAGE);
    let (start, flags) = mapping_of(page.as_ptr() as usize).expect("the buffer's mapping");
    assert!(
        flags.split_whitespace().any(|f| f == "hg"),
        "a page buffer's mapping is not advised for huge pages: VmFlags {flags}"
    );
    assert_eq!(start % HUGE_PAGE, 0, "a chunk is not aligned to 2 MiB");
    // Other sizes are the heap's.
    let big = AlignedBuf::new(1 << 20);
    let (_, flags) = mapping_of(big.as_ptr() as usize).expect("the buffer's mapping");
    assert!(
        !flags.split_whitespace().any(|f| f == "hg"),
        "VmFlags {flags}"
    );
}

#[test]
fn page_buffers_go_through_io_uring_as_fixed_buffers() {
    let mut ring = match IoUringBackend::new(8) {
        Ok(ring) => ring,
        Err(e) => {
            eprintln!("SKIPPED: io_uring is unavailable here: {e}");
            return;
        }
    };
    if ring.fixed_buffer_chunks().is_none() {
        eprintln!("SKIPPED: the kernel gave the ring no buffer table (Linux 5.19 needed)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for mode in common::modes(dir.path()) {
        let file = DataFile::create_new(dir.path().join(format!("{mode:?}")), mode).unwrap();
        file.allocate(4 << 20).unwrap();
        let id = ring.register(&file).unwrap();
        let request = |op, offset, buf: AlignedBuf, tag| IoRequest {
            file: id,
            op,
            offset,
            len: buf.len(),
            buf,
            class: IoClass::DbWrite,
            instance: 0,
            tag,
        };
        let mut done = Vec::new();
        // Pages by plain and durable writes, one by a one-buffer vectored write, and a
        // 1 MiB heap buffer (a plain write).
        for (tag, op) in [(0u64, IoOp::Write), (1, IoOp::WriteSync)] {
            let mut page = AlignedBuf::new(PAGE);
            common::fill_block(&mut page, tag, 3);
            ring.submit(request(op, tag * PAGE as u64, page, tag))
                .unwrap();
        }
        let mut page = AlignedBuf::new(PAGE);
        common::fill_block(&mut page, 2, 3);
        ring.submit_vectored(&mut VectoredWrite {
            file: id,
            offset: 2 * PAGE as u64,
            bufs: vec![page],
            class: IoClass::DbWrite,
            instance: 0,
            tag: 2,
        })
        .unwrap();
        let mut big = AlignedBuf::new(1 << 20);
        common::fill_block(&mut big, 9, 3);
        ring.submit(request(IoOp::Write, 1 << 20, big, 9)).unwrap();
        while ring.in_flight() > 0 {
            ring.wait(1, &mut done).unwrap();
        }
        for c in done.drain(..) {
            assert!(c.result.is_ok(), "{mode:?} write {}: {:?}", c.tag, c.result);
        }
        assert!(
            ring.fixed_buffer_chunks().unwrap() >= 1,
            "no chunk was registered"
        );

        // Read back into page buffers (fixed reads) and a heap buffer.
        for tag in 0..3u64 {
            let read = request(IoOp::Read, tag * PAGE as u64, AlignedBuf::new(PAGE), tag);
            ring.submit(read).unwrap();
        }
        ring.submit(request(IoOp::Read, 1 << 20, AlignedBuf::new(1 << 20), 9))
            .unwrap();
        while ring.in_flight() > 0 {
            ring.wait(1, &mut done).unwrap();
        }
        assert_eq!(done.len(), 4);
        for c in done.drain(..) {
            let mut expected = vec![0u8; c.buf.len()];
            common::fill_block(&mut expected, c.tag, 3);
            assert_eq!(
                c.result.as_ref().ok(),
                Some(&c.buf.len()),
                "{mode:?} read {}",
                c.tag
            );
            assert!(
                c.buf[..] == expected[..],
                "{mode:?}: read {} differs",
                c.tag
            );
        }
        // And independently of the ring.
        let mut check = AlignedBuf::new(PAGE);
        let mut expected = vec![0u8; PAGE];
        for tag in 0..3u64 {
            common::pread(file.path(), &mut check, tag * PAGE as u64);
            common::fill_block(&mut expected, tag, 3);
            assert!(
                check[..] == expected[..],
                "{mode:?}: page {tag} on disk differs"
            );
        }
        ring.unregister(id).unwrap();
    }
}
