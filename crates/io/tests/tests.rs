//! The io crate's integration tests, one binary (one link instead of one per file), each
//! file a module of `suite`. Two keep a binary of their own because what they test is
//! process-wide: `allocator` (glibc malloc's thresholds) and `vectored_power_cut`
//! (arming the power-cut simulation journals every write of the process).

mod suite {
    mod backends;
    mod common;
    mod fallback;
    mod files;
    mod page_buffers;
    mod pool;
    mod stats;
    mod tasks;
    mod vectored;
}
