//! Checkpoint depth under load, as ESE keeps it (`dev/ese/src/ese/bf.cxx`,
//! `dev/ese/src/ese/_log/logwrite.cxx` of microsoft/Extensible-Storage-Engine).
//!
//! ESE's checkpoint maintenance (`ErrBFIMaintCheckpointDepthIFlushPagesByIFMP`) flushes
//! every page whose oldest change is behind the preferred checkpoint (newest log
//! position minus the depth). Up to 1.25 × the depth its writes are background I/O;
//! past that each page's write is "urgent", one level per 512 KiB overdue, and the
//! number of urgent writes the disk layer lets through rises with the level up to half
//! the outstanding-I/O limit at level 127 (`IUrgentBFIMaintCheckpointPriority`,
//! `CioOSDiskIFromUrgentLevelSmoothish` in os/osdisk.cxx). Our page writer submits
//! checkpoint writes at its full write depth whenever a page is past the depth, which is
//! ESE's most urgent behaviour from the start, so nothing of that ramp is left to
//! scale up. (ESE also asks for maintenance at once when a page made dirty finds the
//! checkpoint past the depth, `bfcpdmrRequestOB0Movement`; ours looks every 50 ms and
//! after every write it reaps. Waking it from each such commit was tried and left out:
//! it would change when depth writes go out at the open-loop rates bench/fidelity
//! measures, and closed loop held the depth without it.) What ESE adds beyond its writer is a hard stop: past
//! `JET_paramCheckpointTooDeep` log generations (less a margin of
//! `lgenCheckpointTooDeepMin / 2`), updates fail with `JET_errCheckpointDepthTooDeep`.
//! A stress tool must not fail transactions because its own writer fell behind, so
//! here a transaction that takes the depth past [`hard_limit`] waits for the
//! checkpoint to come back within it instead ([`super::PageCache::wait_for_checkpoint`]).

use std::time::Instant;

use crate::error::EngineError;

use super::PageCache;

/// ESE starts pushing checkpoint writes harder at 1.25 × the depth: `cbUrgentCheckpoint
/// = cbCheckpointDepth + cbCheckpointDepth / 4` (bf.cxx, `IUrgentBFIMaintCheckpointPriority`).
const URGENT_QUARTERS: u64 = 5;

/// Log bytes per urgency level past the urgent threshold: `g_cbCheckpointInterval`,
/// 512 KiB (bf.cxx).
const URGENCY_STEP: u64 = 512 << 10;

/// Urgency levels: `qosIODispatchUrgentBackgroundLevelMax`, 127 (the level at which
/// ESE lets the most checkpoint writes through; bf.cxx's note: "we reach our maximum
/// aggressiveness within 63.5 MBs of extra checkpoint depth").
const URGENCY_LEVELS: u64 = 127;

/// The checkpoint depth at which new transactions wait for the checkpoint: where ESE's
/// checkpoint writes reach their greatest urgency, 1.25 × `depth` + 127 × 512 KiB
/// (20 MiB: 88.5 MiB; 100 MiB: 188.5 MiB). Past it ESE's writer can do no more, so
/// only holding the load back keeps the depth bounded. `u64::MAX` (no limit) when the
/// depth itself is unbounded (a held checkpoint).
pub fn hard_limit(depth: u64) -> u64 {
    if depth == u64::MAX {
        return u64::MAX;
    }
    (depth / 4)
        .saturating_mul(URGENT_QUARTERS)
        .saturating_add(URGENCY_STEP * URGENCY_LEVELS)
}

impl<S: Send> PageCache<S> {
    /// Waits until the checkpoint is at most `limit` bytes of log behind the log's
    /// current end (counted in [`super::CacheCounters::checkpoint_waits`]); returns at
    /// once if it is, or after a page writer failure (reported).
    pub fn wait_for_checkpoint(&self, limit: u64) -> Result<(), EngineError> {
        let shared = &*self.shared;
        let mut core = shared.core.lock();
        let mut since: Option<Instant> = None;
        let result = loop {
            if let Err(e) = shared.check(&core) {
                break Err(e);
            }
            let Some(oldest) = core.oldest_dirty() else {
                break Ok(());
            };
            if shared.wal.bytes_between(oldest, shared.wal.current()) <= limit
                || core.stop != super::StopMode::Run
            {
                break Ok(());
            }
            if since.is_none() {
                core.counts.checkpoint_waits += 1;
                since = Some(Instant::now());
            }
            core.checkpoint_waiters += 1;
            shared.writer_wake.notify_one();
            shared.checkpoint_moved.wait(&mut core);
            core.checkpoint_waiters -= 1;
        };
        if let Some(since) = since {
            core.counts.checkpoint_wait_ns += since.elapsed().as_nanos() as u64;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_limit_is_where_ese_urgency_tops_out() {
        const MIB: u64 = 1 << 20;
        assert_eq!(hard_limit(20 * MIB), 25 * MIB + 127 * 512 * 1024);
        assert_eq!(hard_limit(100 * MIB), 125 * MIB + 127 * 512 * 1024);
        assert_eq!(hard_limit(u64::MAX), u64::MAX);
        assert!(hard_limit(0) > 0);
    }
}
