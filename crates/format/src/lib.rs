//! On-disk formats of edbstress, byte for byte: database pages (80-byte header and
//! slotted records), the ESE-style block checksum with single-bit correction and
//! page-number check, the database header with its shadow copy, and log files
//! (segments, record framing, checkpoint).
//!
//! This crate is pure: it encodes and decodes byte slices and never performs I/O,
//! allocates no threads and keeps no global state, so it can be fuzzed and
//! property-tested in isolation. It must not depend on the I/O layer or the engine.
//! `docs/format.md` documents every structure defined here.
//!
//! All integers are little-endian.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bytes;
pub mod checksum;
mod generation;
pub mod header;
mod instance_id;
pub mod log;
pub mod page;
mod pgno;

use std::fmt;

pub use checksum::{
    PageVerdict, block_checksum, compute_page_checksums, repair_page, seal_page, verify_page,
};
pub use generation::Generation;
pub use header::{DatabaseHeader, DbState, HeaderError, HeaderSelection, TreeRoot, select_header};
pub use instance_id::InstanceId;
pub use log::LogPosition;
pub use page::{Page, PageFormatError, PageFull, PageHeader, PageMut, Record};
pub use pgno::Pgno;

/// Length of the header at the start of every database page.
pub const PAGE_HEADER_LEN: usize = 80;

/// A supported database page size.
///
/// The page size also fixes the checksum block layout: pages of 8 KiB or less are a
/// single block, larger pages are four blocks (see [`PageSize::block_len`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum PageSize {
    /// 4096-byte pages (one 4 KiB checksum block).
    K4,
    /// 8192-byte pages (one 8 KiB checksum block).
    K8,
    /// 16384-byte pages (four 4 KiB checksum blocks).
    K16,
    /// 32768-byte pages (four 8 KiB checksum blocks), the default.
    #[default]
    K32,
}

impl PageSize {
    /// Every supported page size, smallest first.
    pub const ALL: [PageSize; 4] = [PageSize::K4, PageSize::K8, PageSize::K16, PageSize::K32];

    /// The page size whose length is `bytes`, if it is one of 4096, 8192, 16384, 32768.
    pub fn from_bytes(bytes: usize) -> Option<PageSize> {
        match bytes {
            4096 => Some(PageSize::K4),
            8192 => Some(PageSize::K8),
            16384 => Some(PageSize::K16),
            32768 => Some(PageSize::K32),
            _ => None,
        }
    }

    /// Length of a page in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PageSize::K4 => 4096,
            PageSize::K8 => 8192,
            PageSize::K16 => 16384,
            PageSize::K32 => 32768,
        }
    }

    /// Length of one checksum block: 4 KiB for 4 and 16 KiB pages, 8 KiB for 8 and 32 KiB.
    pub const fn block_len(self) -> usize {
        match self {
            PageSize::K4 | PageSize::K16 => 4096,
            PageSize::K8 | PageSize::K32 => 8192,
        }
    }

    /// Number of checksum blocks in a page: 1 up to 8 KiB, 4 above.
    pub const fn block_count(self) -> usize {
        match self {
            PageSize::K4 | PageSize::K8 => 1,
            PageSize::K16 | PageSize::K32 => 4,
        }
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} KiB", self.bytes() / 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_geometry() {
        for size in PageSize::ALL {
            assert_eq!(PageSize::from_bytes(size.bytes()), Some(size));
            assert_eq!(size.block_len() * size.block_count(), size.bytes());
        }
        assert_eq!(PageSize::from_bytes(0), None);
        assert_eq!(PageSize::from_bytes(65536), None);
        assert_eq!(PageSize::K16.block_len(), 4096);
        assert_eq!(PageSize::K32.block_len(), 8192);
        assert_eq!(PageSize::K32.to_string(), "32 KiB");
        assert_eq!(PageSize::K4.to_string(), "4 KiB");
    }

    #[test]
    fn page_offsets_skip_the_two_header_slots() {
        assert_eq!(Pgno::new(1).offset(PageSize::K32), 65536);
        assert_eq!(Pgno::new(1).offset(PageSize::K8), 16384);
        assert_eq!(
            Pgno::new(u32::MAX).offset(PageSize::K32),
            (1u64 << 32) * 32768
        );
    }
}
