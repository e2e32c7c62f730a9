//! `bound_allocator_footprint` keeps large blocks mmapped. Its own test binary with one
//! test: malloc's thresholds and free lists are process-wide, and other tests running
//! at the same time would leave large free blocks that malloc reuses before mmapping.

/// Whether glibc served the block at `ptr` by mmap: the IS_MMAPPED bit (0x2) of the
/// chunk's size word, just before the user pointer.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn mmapped(ptr: *const u64) -> bool {
    // SAFETY: `ptr` is a live glibc malloc block, which is always preceded by its
    // chunk's size word (a usize); reading it does not change anything.
    let size_word = unsafe { ptr.cast::<usize>().sub(1).read() };
    size_word & 2 != 0
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn large_blocks_stay_mmapped_after_a_large_free() {
    if ["MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        return; // the user's settings win; nothing of ours to check
    }
    edbstress_io::bound_allocator_footprint();
    // Freeing a large mmapped block raises glibc's dynamic threshold to its size.
    drop(std::hint::black_box(vec![1u8; 8 << 20]));
    // 200 KB, like a latency histogram's counters.
    let counters = std::hint::black_box(vec![0u64; 25_000]);
    assert!(
        mmapped(counters.as_ptr()),
        "a 200 KB block came from a malloc heap (it would stay resident once freed)"
    );
}
