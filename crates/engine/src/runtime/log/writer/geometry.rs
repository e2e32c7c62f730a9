//! Addresses of segments and the file geometry of the generations a writer writes.

use edbstress_format::Generation;
use edbstress_format::log::{LogPosition, SegmentLen};

/// A logical segment: generation and index within its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SegAddr {
    pub(super) generation: Generation,
    pub(super) index: u16,
}

impl SegAddr {
    pub(super) fn at(self, offset: u16) -> LogPosition {
        LogPosition {
            generation: self.generation,
            segment: self.index,
            offset,
        }
    }
}

/// File geometry of the generations this writer writes: the one it opened in keeps
/// the length in its header, new ones get the configured length; all have the
/// segment length of the one it opened in.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub(super) first_generation: Generation,
    pub(super) first_segments: u32,
    pub(super) segments: u32,
    pub(super) seg_len: SegmentLen,
}

impl Geometry {
    pub(super) fn segments_in(&self, generation: Generation) -> u32 {
        if generation == self.first_generation {
            self.first_segments
        } else {
            self.segments
        }
    }

    pub(super) fn is_last_slot(&self, addr: SegAddr) -> bool {
        u32::from(addr.index) + 1 >= self.segments_in(addr.generation)
    }

    /// The segment after `addr`: the next slot, or slot 1 of the next generation.
    pub(super) fn next(&self, addr: SegAddr) -> Option<SegAddr> {
        if self.is_last_slot(addr) {
            Some(SegAddr {
                generation: addr.generation.checked_add(1)?,
                index: 1,
            })
        } else {
            Some(SegAddr {
                generation: addr.generation,
                index: addr.index + 1,
            })
        }
    }

    /// Log bytes (whole segments, headers included) from `older` to `newer`.
    pub(super) fn bytes_between(&self, older: LogPosition, newer: LogPosition) -> u64 {
        if newer <= older {
            return 0;
        }
        let seg = self.seg_len.bytes() as u64;
        let linear = |segment: u16, offset: u16| u64::from(segment) * seg + u64::from(offset);
        if older.generation == newer.generation {
            return linear(newer.segment, newer.offset)
                .saturating_sub(linear(older.segment, older.offset));
        }
        let data_len = |generation: Generation| u64::from(self.segments_in(generation)) * seg;
        // Rest of the older generation, whole generations between (slot 0 is the file
        // header), start of the newer one.
        let mut total =
            data_len(older.generation).saturating_sub(linear(older.segment, older.offset));
        let between = u64::from(newer.generation.since(older.generation) - 1);
        total += between * u64::from(self.segments.saturating_sub(1)) * seg;
        let first = self.first_generation;
        if first > older.generation && first < newer.generation {
            // Counted above with the configured length.
            total = (total + data_len(first)).saturating_sub(u64::from(self.segments) * seg);
        }
        total + linear(newer.segment, newer.offset).saturating_sub(seg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(generation: u32, segment: u16, offset: u16) -> LogPosition {
        LogPosition {
            generation: Generation::new(generation),
            segment,
            offset,
        }
    }

    #[test]
    fn log_geometry_counts_bytes_across_generations() {
        // Generation 3 is a 1 MiB file (256 segments), later ones 16 segments.
        let g = Geometry {
            first_generation: Generation::new(3),
            first_segments: 256,
            segments: 16,
            seg_len: SegmentLen::Page4096,
        };
        let seg = SegmentLen::Page4096.bytes() as u64;
        assert_eq!(g.bytes_between(pos(3, 1, 32), pos(3, 1, 100)), 68);
        assert_eq!(g.bytes_between(pos(3, 2, 32), pos(3, 1, 32)), 0);
        assert_eq!(g.bytes_between(pos(3, 1, 32), pos(3, 3, 32)), 2 * seg);
        // To the end of generation 3 (255 data segments from slot 1), then slot 1 of 4.
        assert_eq!(g.bytes_between(pos(3, 1, 0), pos(4, 1, 0)), 255 * seg);
        // Whole generations in between hold 15 data segments each.
        assert_eq!(g.bytes_between(pos(4, 1, 0), pos(7, 1, 0)), 3 * 15 * seg);
        assert_eq!(
            g.bytes_between(pos(2, 15, 0), pos(5, 1, 0)),
            seg + 255 * seg + 15 * seg
        );
        assert_eq!(
            g.next(SegAddr {
                generation: Generation::new(3),
                index: 255
            }),
            Some(SegAddr {
                generation: Generation::new(4),
                index: 1
            })
        );
        assert!(g.is_last_slot(SegAddr {
            generation: Generation::new(4),
            index: 15
        }));
    }
}
