//! How many writes refilling the available pool the page writer keeps in flight.
//!
//! Refilling the pool from 1 % to 2 % free in one burst (~20 frames, most dirty, all
//! submitted at once) makes the sessions' page reads queue behind the burst's writes
//! at the device. The writer instead submits pool writes only as fast as the pool is
//! consumed: by Little's law the writes it needs in flight are the frames taken during
//! one write's life (consumption rate × write latency) times the share of chosen frames
//! that are dirty (clean ones are evicted without a write). Both come from the cache's
//! own counters, measured as the run goes, not from a constant tuned to one machine.
//! When sessions wait for a frame the cap is the full depth: pacing never starves them.

/// Smoothing of the measurements (weight of a new sample).
const SAMPLE_WEIGHT: f64 = 1.0 / 8.0;

/// The page writer's measurements of consumption and its pacing cap.
#[derive(Debug)]
pub(super) struct Pacing {
    /// Frames taken from the pool during one pool write's life (from planning it to
    /// accounting for its completion), smoothed.
    takes_per_write: f64,
    /// Share of the frames chosen for eviction that were dirty, smoothed.
    dirty_share: f64,
}

impl Pacing {
    /// Starts as if one frame were taken per write's life, every chosen frame dirty (a
    /// cap of 3 writes), until writes are measured: a burst of consumption at the start
    /// either waits for a frame (full depth) or is measured within a few writes.
    pub(super) fn new() -> Pacing {
        Pacing {
            takes_per_write: 1.0,
            dirty_share: 1.0,
        }
    }

    /// A pool write ended: `taken` frames were taken while it was in flight.
    pub(super) fn write_ended(&mut self, taken: u64) {
        self.takes_per_write += (taken as f64 - self.takes_per_write) * SAMPLE_WEIGHT;
    }

    /// An eviction scan chose `dirty` dirty frames (to be written) and `clean` clean
    /// ones (evicted at once).
    pub(super) fn chose(&mut self, dirty: usize, clean: usize) {
        let chosen = dirty + clean;
        if chosen > 0 {
            let share = dirty as f64 / chosen as f64;
            self.dirty_share += (share - self.dirty_share) * SAMPLE_WEIGHT;
        }
    }

    /// Free frames the pool should hold ahead of demand: what sessions take during two
    /// pool writes' lives (the writer's turnaround from a cold dirty page to a free
    /// frame, with one life's margin for bursts and its own wake-up).
    pub(super) fn reserve(&self) -> usize {
        (self.takes_per_write.max(0.0) * 2.0).ceil().min(1e9) as usize
    }

    /// Pool writes the writer may have in flight now.
    pub(super) fn cap(&self, depth: usize, sessions_waiting: bool, below_start: bool) -> usize {
        paced_cap(
            self.takes_per_write,
            self.dirty_share,
            depth,
            sessions_waiting,
            below_start,
        )
    }
}

/// The cap: a quarter above what consumption needs, plus one, doubled while the pool is
/// below its start threshold (the writer is behind), the full `depth` while sessions
/// wait for a frame; between 1 and `depth`.
pub(super) fn paced_cap(
    takes_per_write: f64,
    dirty_share: f64,
    depth: usize,
    sessions_waiting: bool,
    below_start: bool,
) -> usize {
    if sessions_waiting {
        return depth;
    }
    let needed = (takes_per_write * dirty_share).max(0.0);
    let mut cap = (needed * 1.25).ceil().min(depth as f64) as usize + 1;
    if below_start {
        cap *= 2;
    }
    cap.clamp(1, depth.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_follows_consumption_and_opens_fully_for_waiting_sessions() {
        // Little's law: 8 frames taken per write's life, half of them dirty: 4 writes
        // needed, 5 with the margin, 6 with the extra one.
        assert_eq!(paced_cap(8.0, 0.5, 32, false, false), 6);
        // Nothing consumed: one write at a time.
        assert_eq!(paced_cap(0.0, 1.0, 32, false, false), 1);
        // Behind: doubled.
        assert_eq!(paced_cap(8.0, 0.5, 32, false, true), 12);
        // Sessions waiting: everything the backend takes.
        assert_eq!(paced_cap(0.0, 0.0, 32, true, false), 32);
        // Never above the depth.
        assert_eq!(paced_cap(1e9, 1.0, 32, false, true), 32);
        assert_eq!(paced_cap(f64::NAN, 1.0, 4, false, false), 1);
    }

    #[test]
    fn measurements_converge_to_the_samples() {
        let mut pacing = Pacing::new();
        assert_eq!(
            pacing.cap(32, false, false),
            3,
            "one frame per write until measured"
        );
        for _ in 0..100 {
            pacing.write_ended(2);
            pacing.chose(1, 3);
        }
        // 2 frames per write's life, a quarter dirty: 0.5 → ceil(0.625) + 1 = 2.
        assert_eq!(pacing.cap(32, false, false), 2);
        assert_eq!(pacing.cap(32, true, false), 32);
    }
}
