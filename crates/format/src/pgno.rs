//! [`Pgno`]: the number of a database page, and the arithmetic between page numbers,
//! file offsets and file lengths.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::PageSize;

/// The number of a data page in a database file.
///
/// Page numbers start at 1: file slot 0 holds the database header and slot 1 its
/// shadow copy, so page `n` is at offset `(n + 1) × page size`. On disk (the page
/// header's field at offset 64, log records, the database header) a page number is a
/// little-endian `u32`, and in JSON a plain number; this type owns that encoding and
/// the offset arithmetic, so that page numbers are not mixed up with frame indexes,
/// counts or byte offsets.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Pgno(u32);

impl Pgno {
    /// Page 0: never a data page (its number would be the header's slot); links and
    /// empty slots use it for "no page", as on disk.
    pub const NONE: Pgno = Pgno(0);

    /// Page 1, the first data page (the root of the mailbox table).
    pub const FIRST: Pgno = Pgno(1);

    /// The page numbered `n`.
    pub const fn new(n: u32) -> Pgno {
        Pgno(n)
    }

    /// The number as stored on disk.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// File offset of the page: `(pgno + 1) × page_size`, in 64 bits (never overflows).
    pub const fn offset(self, page_size: PageSize) -> u64 {
        (self.0 as u64 + 1) * page_size.bytes() as u64
    }

    /// The page at file offset `offset`, if the offset is the start of a data page.
    pub fn at_offset(offset: u64, page_size: PageSize) -> Option<Pgno> {
        let size = page_size.bytes() as u64;
        if offset % size != 0 || offset < 2 * size {
            return None;
        }
        u32::try_from(offset / size - 1).ok().map(Pgno)
    }

    /// The page `n` pages after this one, if it has a number.
    pub fn checked_add(self, n: u32) -> Option<Pgno> {
        self.0.checked_add(n).map(Pgno)
    }

    /// The next page, if it has a number.
    pub fn next(self) -> Option<Pgno> {
        self.checked_add(1)
    }

    /// Pages from `earlier` up to (not including) this one; 0 if `earlier` is not before.
    pub const fn pages_since(self, earlier: Pgno) -> u32 {
        self.0.saturating_sub(earlier.0)
    }

    /// The little-endian encoding stored on disk.
    pub const fn to_le_bytes(self) -> [u8; 4] {
        self.0.to_le_bytes()
    }

    /// Decodes the little-endian encoding stored on disk.
    pub const fn from_le_bytes(bytes: [u8; 4]) -> Pgno {
        Pgno(u32::from_le_bytes(bytes))
    }
}

impl From<u32> for Pgno {
    fn from(n: u32) -> Pgno {
        Pgno(n)
    }
}

impl From<Pgno> for u32 {
    fn from(pgno: Pgno) -> u32 {
        pgno.0
    }
}

/// The page `n` pages after this one (overflow is a bug: it panics in debug builds, as
/// `u32` arithmetic does).
impl std::ops::Add<u32> for Pgno {
    type Output = Pgno;

    fn add(self, n: u32) -> Pgno {
        Pgno(self.0 + n)
    }
}

impl std::ops::AddAssign<u32> for Pgno {
    fn add_assign(&mut self, n: u32) {
        self.0 += n;
    }
}

/// The page `n` pages before this one (underflow is a bug, as with `u32`).
impl std::ops::Sub<u32> for Pgno {
    type Output = Pgno;

    fn sub(self, n: u32) -> Pgno {
        Pgno(self.0 - n)
    }
}

impl std::ops::SubAssign<u32> for Pgno {
    fn sub_assign(&mut self, n: u32) {
        self.0 -= n;
    }
}

impl PartialEq<u32> for Pgno {
    fn eq(&self, other: &u32) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Pgno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_skip_the_two_header_slots_and_round_trip() {
        assert_eq!(Pgno::new(1).offset(PageSize::K32), 65536);
        assert_eq!(
            Pgno::new(u32::MAX).offset(PageSize::K32),
            (1u64 << 32) * 32768
        );
        for n in [1, 2, 77, u32::MAX] {
            let p = Pgno::new(n);
            assert_eq!(
                Pgno::at_offset(p.offset(PageSize::K8), PageSize::K8),
                Some(p)
            );
            assert_eq!(Pgno::from_le_bytes(p.to_le_bytes()), p);
        }
        assert_eq!(Pgno::at_offset(8192, PageSize::K8), None);
        assert_eq!(Pgno::at_offset(16385, PageSize::K8), None);
        assert_eq!(Pgno::new(9).pages_since(Pgno::new(4)), 5);
        assert_eq!(Pgno::new(u32::MAX).next(), None);
        assert_eq!(Pgno::new(7).to_string(), "7");
    }
}
