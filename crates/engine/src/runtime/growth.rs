//! A limit on how much database files may grow, shared by the instances given it: each
//! file extension takes its bytes from it first, and one that would pass it is refused
//! ([`GrowthLimitReached`]) before anything is written. What the limit is for (a budget
//! of free space, a tuning search) is the caller's business.

use std::path::PathBuf;

use parking_lot::Mutex;

/// Bytes the database files sharing it may still grow by; unlimited until
/// [`GrowthAllowance::limit`] sets a limit.
#[derive(Debug, Default)]
pub struct GrowthAllowance {
    /// Bytes left, None: no limit.
    left: Mutex<Option<u64>>,
}

impl GrowthAllowance {
    /// An allowance without a limit.
    pub fn new() -> GrowthAllowance {
        GrowthAllowance::default()
    }

    /// From now on the files may grow by `bytes` more in total; None lifts the limit.
    pub fn limit(&self, bytes: Option<u64>) {
        *self.left.lock() = bytes;
    }

    /// Bytes left (None: no limit).
    pub fn left(&self) -> Option<u64> {
        *self.left.lock()
    }

    /// Takes the most of `wanted` bytes that fits, and at least `needed`: the bytes
    /// taken, or the bytes left when even `needed` does not fit.
    pub(crate) fn take(&self, wanted: u64, needed: u64) -> Result<u64, u64> {
        let mut left = self.left.lock();
        let Some(l) = left.as_mut() else {
            return Ok(wanted);
        };
        if *l < needed {
            return Err(*l);
        }
        let taken = wanted.min(*l).max(needed);
        *l -= taken;
        Ok(taken)
    }

    /// Gives back bytes taken for an extension that failed.
    pub(crate) fn give_back(&self, bytes: u64) {
        if let Some(l) = self.left.lock().as_mut() {
            *l = l.saturating_add(bytes);
        }
    }
}

/// A database file would have grown past its [`GrowthAllowance`]: nothing was written,
/// and the operation that needed the pages did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "growing {} by {} would pass the database growth limit ({} left)",
    file.display(),
    edbstress_io::ByteSize(*needed).approx(),
    edbstress_io::ByteSize(*left).approx()
)]
pub struct GrowthLimitReached {
    /// The database file.
    pub file: PathBuf,
    /// Bytes the extension needed at least.
    pub needed: u64,
    /// Bytes the allowance had left.
    pub left: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_fits_down_to_what_is_needed_then_refuses() {
        let a = GrowthAllowance::new();
        assert_eq!(a.take(10 << 20, 1 << 20), Ok(10 << 20), "no limit");
        a.limit(Some(3 << 20));
        assert_eq!(a.take(2 << 20, 1 << 20), Ok(2 << 20));
        assert_eq!(
            a.take(2 << 20, 512 << 10),
            Ok(1 << 20),
            "shrunk to what is left"
        );
        assert_eq!(a.take(2 << 20, 1), Err(0));
        a.give_back(1 << 20);
        assert_eq!(a.left(), Some(1 << 20));
        a.limit(None);
        assert_eq!(a.left(), None);
    }
}
