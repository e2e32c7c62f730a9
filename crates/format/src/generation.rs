//! [`Generation`]: the number of a log file in a database's log stream.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The generation of a log file: the files of a log stream are numbered upwards from 1,
/// one generation per file (`E00` + the generation in 8 hex digits + `.log`).
///
/// On disk (log file and segment headers, log positions, the checkpoint, the database
/// header) a generation is a little-endian `u32`, and in JSON a plain number; the type
/// keeps generations apart from segment indexes, counts and page numbers.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Generation(u32);

impl Generation {
    /// Generation 0: no log file has it; headers and counters use it for "none".
    pub const NONE: Generation = Generation(0);

    /// Generation 1, the first log file of a new log stream.
    pub const FIRST: Generation = Generation(1);

    /// The highest generation a log file name can carry.
    pub const MAX: Generation = Generation(u32::MAX);

    /// The generation numbered `n`.
    pub const fn new(n: u32) -> Generation {
        Generation(n)
    }

    /// The number as stored on disk.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The next generation, if it has a number.
    pub const fn next(self) -> Option<Generation> {
        match self.0.checked_add(1) {
            Some(n) => Some(Generation(n)),
            None => None,
        }
    }

    /// The previous generation, if there is one above [`Generation::NONE`].
    pub const fn prev(self) -> Option<Generation> {
        match self.0 {
            0 | 1 => None,
            n => Some(Generation(n - 1)),
        }
    }

    /// The generation `n` after this one, if it has a number.
    pub const fn checked_add(self, n: u32) -> Option<Generation> {
        match self.0.checked_add(n) {
            Some(n) => Some(Generation(n)),
            None => None,
        }
    }

    /// The generation `n` before this one, if it is not below 0.
    pub const fn checked_sub(self, n: u32) -> Option<Generation> {
        match self.0.checked_sub(n) {
            Some(n) => Some(Generation(n)),
            None => None,
        }
    }

    /// Generations from `earlier` up to (not including) this one; 0 if `earlier` is
    /// not before.
    pub const fn since(self, earlier: Generation) -> u32 {
        self.0.saturating_sub(earlier.0)
    }

    /// The little-endian encoding stored on disk.
    pub const fn to_le_bytes(self) -> [u8; 4] {
        self.0.to_le_bytes()
    }

    /// Decodes the little-endian encoding stored on disk.
    pub const fn from_le_bytes(bytes: [u8; 4]) -> Generation {
        Generation(u32::from_le_bytes(bytes))
    }
}

impl From<u32> for Generation {
    fn from(n: u32) -> Generation {
        Generation(n)
    }
}

impl From<Generation> for u32 {
    fn from(generation: Generation) -> u32 {
        generation.0
    }
}

impl From<Generation> for u64 {
    fn from(generation: Generation) -> u64 {
        u64::from(generation.0)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Hex, as in error messages.
impl fmt::LowerHex for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Hex, as in log file names and log positions.
impl fmt::UpperHex for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::UpperHex::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_without_wrapping_and_encodes_as_the_plain_number() {
        let g = Generation::new(0x1A);
        assert_eq!(g.next(), Some(Generation::new(0x1B)));
        assert_eq!(Generation::MAX.next(), None);
        assert_eq!(g.prev(), Some(Generation::new(0x19)));
        assert_eq!(Generation::FIRST.prev(), None);
        assert_eq!(g.checked_sub(0x1B), None);
        assert_eq!(g.since(Generation::new(0x10)), 10);
        assert_eq!(Generation::new(3).since(g), 0);
        assert_eq!(Generation::from_le_bytes(g.to_le_bytes()), g);
        assert_eq!(g.to_le_bytes(), 0x1Au32.to_le_bytes());
        assert_eq!(format!("{g} {g:08X}"), "26 0000001A");
        assert_eq!(serde_json::to_string(&g).unwrap(), "26");
        assert_eq!(
            serde_json::from_str::<Generation>("7").unwrap(),
            Generation::new(7)
        );
    }
}
