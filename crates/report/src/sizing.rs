//! Whether a mailbox-profile run's databases hold what its profile says: Jetstress
//! sizes them from the profile (`DatabaseSizing=Profile`: mailboxes × quota over the
//! databases), and the ESRP documents print that size. A run given a smaller database
//! touches less data than the profile's mailboxes would: more of it fits in the cache
//! and the storage's caches, so its latencies are not the profile's. The run's output,
//! its report and the solution document all say so with [`ProfileSizing::warning`].

use crate::model::SystemParameters;
use crate::text::{mb, quota_mb};

/// A mailbox-profile run's database size against its profile's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfileSizing {
    /// Mailboxes of the run.
    pub mailboxes: u64,
    /// Quota of each, MB of 2^20 bytes.
    pub quota_mb: u64,
    /// Databases of the run.
    pub databases: u32,
    /// Bytes each database holds by the profile (mailboxes × quota / databases).
    pub profile_bytes: u64,
    /// Bytes each database was given.
    pub database_bytes: u64,
}

impl ProfileSizing {
    /// The sizing of a mailbox-profile run (None for a throughput run, or one whose
    /// quota was not recorded).
    pub fn of(p: &SystemParameters) -> Option<ProfileSizing> {
        let mailboxes = p.mailboxes?;
        let quota_mb = p.mailbox_quota_mb?;
        let databases = p.databases.max(1);
        let total = (u128::from(mailboxes) * u128::from(quota_mb)) << 20;
        let profile_bytes = u64::try_from(total / u128::from(databases)).unwrap_or(u64::MAX);
        Some(ProfileSizing {
            mailboxes,
            quota_mb,
            databases,
            profile_bytes,
            database_bytes: p.database_bytes,
        })
    }

    /// Whether the databases are smaller than the profile's by more than the rounding
    /// of a derived size (to whole GiB, or whole MiB below 64 GiB): 1 %, at least 1 MiB.
    pub fn short(&self) -> bool {
        let slack = (self.profile_bytes / 100).max(1 << 20);
        self.database_bytes.saturating_add(slack) < self.profile_bytes
    }

    /// The warning of a run whose databases are smaller than its profile's, naming
    /// both sizes, the share of the profile tested and the fix; None when they are not.
    pub fn warning(&self) -> Option<String> {
        if !self.short() {
            return None;
        }
        let pct = self.database_bytes as f64 * 100.0 / self.profile_bytes.max(1) as f64;
        Some(format!(
            "the databases are smaller than the profile: {} each, where {} mailboxes with a \
             {} quota over {} database(s) hold {} each (Jetstress sizes them so); the test \
             touches {:.1} % of the profile's data, more of it fits in caches, so its \
             latencies do not stand for the profile. Size the databases from the profile \
             (leave database_size and capacity_pct unset) for a representative test",
            mb(self.database_bytes),
            self.mailboxes,
            quota_mb(self.quota_mb),
            self.databases,
            mb(self.profile_bytes),
            pct
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(mailboxes: u64, databases: u32, database_bytes: u64) -> ProfileSizing {
        let gib = 1u64 << 30;
        let total = mailboxes * 2 * gib;
        ProfileSizing {
            mailboxes,
            quota_mb: 2048,
            databases,
            profile_bytes: total / u64::from(databases),
            database_bytes,
        }
    }

    #[test]
    fn a_database_smaller_than_the_profile_is_named_with_both_sizes() {
        let w = sizing(500, 1, 2 << 30).warning().unwrap();
        assert!(w.contains("2048.0 MiB each"), "{w}");
        assert!(w.contains("500 mailboxes with a 2048 MB quota"), "{w}");
        assert!(w.contains("1000.0 GiB each"), "{w}");
        assert!(w.contains("0.2 %"), "{w}");
    }

    #[test]
    fn the_profile_size_rounded_down_to_a_gib_is_not_short() {
        // 5000 × 2048 MB / 6 = 1706666.7 MiB; the run's derived size is 1666 GiB.
        let s = sizing(5000, 6, 1666 << 30);
        assert!(!s.short(), "{s:?}");
        assert!(sizing(5000, 6, 1600 << 30).short());
        // Larger than the profile is a harder test, not an unrepresentative one.
        assert!(sizing(1, 1, 4 << 30).warning().is_none());
    }
}
