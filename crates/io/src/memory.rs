//! Process-wide allocator settings that keep the resident set close to what a run
//! really holds (docs/performance.md, "max RSS"): the memory goal of a run is its
//! database cache + 10 % + 64 MiB, and glibc's defaults spend several MiB of it on
//! nothing.
//!
//! - glibc raises its mmap threshold to the size of the largest mmapped block freed
//!   (up to 32 MiB). After that, the ~200 KB counter arrays of the
//!   [`crate::LatencyHistogram`]s that statistics snapshots create and drop (hdrhistogram
//!   writes every counter when it creates one) come from the heap, where freed blocks
//!   stay resident in malloc's free lists and fragment it, instead of being mmapped and
//!   handed back to the kernel when dropped. Pinning the threshold at its default
//!   (128 KiB) keeps such blocks mmapped.
//! - glibc opens up to 8 arenas per core for threads that allocate at the same time;
//!   each keeps its own free memory. Small allocations are served from per-thread
//!   caches anyway, so one arena per core (at least 2) costs no measurable CPU here.
//!
//! Measured (2 GiB database, 64 MiB cache, 16 sessions, 40 s, comparable I/O rates):
//! max RSS 113.5 MiB with glibc's defaults, 105.4 MiB with both settings.
//!
//! Tested in `tests/allocator.rs` (its own process: malloc's state is process-wide).

/// Applies the settings above, unless the user set glibc's own knobs
/// (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`, `GLIBC_TUNABLES`), which win. Call it
/// once, first thing in `main`. Does nothing on other C libraries.
pub fn bound_allocator_footprint() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let user_set = [
            "MALLOC_ARENA_MAX",
            "MALLOC_MMAP_THRESHOLD_",
            "GLIBC_TUNABLES",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        if user_set {
            return;
        }
        let arenas = std::thread::available_parallelism()
            .map_or(2, |n| n.get())
            .clamp(2, 64) as libc::c_int;
        // SAFETY: mallopt only changes glibc malloc's tunables (under its own lock);
        // the values are in range (128 KiB is glibc's default threshold) and no
        // memory is passed.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
