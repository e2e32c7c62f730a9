//! [`InstanceId`]: the number of a database instance (its database file, log directory
//! and I/O counters).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The number of a database instance, from 1, as in its file and directory names
/// (`Instance0001`).
///
/// A run has at most a few hundred instances, so 16 bits hold the number; the database
/// header stores it in a little-endian `u32` field, and JSON as a plain number. The I/O
/// layer keys its counters by [`InstanceId::get`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct InstanceId(u16);

impl InstanceId {
    /// The instance numbered `n`.
    pub const fn new(n: u16) -> InstanceId {
        InstanceId(n)
    }

    /// The number, as the I/O layer's counters key it.
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl From<u16> for InstanceId {
    fn from(n: u16) -> InstanceId {
        InstanceId(n)
    }
}

/// A number beyond 16 bits names no instance.
impl TryFrom<u32> for InstanceId {
    type Error = std::num::TryFromIntError;

    fn try_from(n: u32) -> Result<InstanceId, Self::Error> {
        u16::try_from(n).map(InstanceId)
    }
}

impl From<InstanceId> for u16 {
    fn from(id: InstanceId) -> u16 {
        id.0
    }
}

impl From<InstanceId> for u32 {
    fn from(id: InstanceId) -> u32 {
        u32::from(id.0)
    }
}

impl From<InstanceId> for u64 {
    fn from(id: InstanceId) -> u64 {
        u64::from(id.0)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_without_loss_and_refuses_numbers_beyond_16_bits() {
        let id = InstanceId::new(7);
        assert_eq!(id.get(), 7);
        assert_eq!(u32::from(id), 7);
        assert_eq!(u64::from(id), 7);
        assert_eq!(
            InstanceId::try_from(65_535u32),
            Ok(InstanceId::new(u16::MAX))
        );
        assert!(InstanceId::try_from(65_536u32).is_err());
        assert_eq!(id.to_string(), "7");
        assert_eq!(serde_json::to_string(&id).unwrap(), "7");
        assert_eq!(
            serde_json::from_str::<InstanceId>("3").unwrap(),
            InstanceId::new(3)
        );
    }
}
