//! The I/O classes every request is attributed to (product spec §5).

use std::fmt;

use serde::{Deserialize, Serialize};

/// What an I/O is for. Results are reported per class, in Jetstress's wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoClass {
    /// Transactional database read (a cache miss).
    DbRead,
    /// Transactional database write (a cache flush).
    DbWrite,
    /// Transaction log write (a commit or a full log buffer).
    LogWrite,
    /// Transaction log read.
    LogRead,
    /// Background database maintenance read (checksum scan during the run).
    BdmRead,
    /// Read of a closed log file by a passive copy's log shipping.
    ReplicationRead,
    /// Sequential database read of a backup test.
    BackupRead,
    /// Read during soft recovery (log replay and page prefetch).
    RecoveryRead,
    /// Write during soft recovery.
    RecoveryWrite,
    /// Read of the offline checksum verification.
    ChecksumRead,
    /// Write extending the database file with formatted empty pages (growth), and the
    /// `fdatasync` that makes them durable before the header counts them.
    DbGrowth,
    /// Write of the database header (each copy written and made durable in turn).
    DbHeader,
    /// `fdatasync` of the database file making completed page writes durable before a
    /// checkpoint is written (the checkpoint barrier).
    DbFlush,
    /// Creation of a log file: the zero-fill of the next generation (`E00tmp.log`) and
    /// its `fdatasync`, and each new generation's header segment.
    LogCreate,
    /// Write of the checkpoint file `E00.chk` (each copy written and made durable).
    LogCheckpoint,
    /// Reopening a log for writing: closing the segment that holds the start and
    /// zeroing the stale slots after it.
    LogReopen,
    /// Read of a database header, a log file's header segment or the checkpoint file to
    /// identify or open it (opening an instance, the offline tools, circular logging's
    /// check of a log before deleting it).
    HeaderRead,
    /// Read of the offline tools: `check`'s page reads, `verify`'s rereads before a
    /// repair, fault injection.
    OfflineRead,
    /// Write or `fdatasync` of the offline tools: prepare's header, a new log directory,
    /// `verify`'s repairs, fault injection.
    OfflineWrite,
    /// Write of a backup test's copy of the database, and its `fdatasync`.
    BackupWrite,
}

impl IoClass {
    /// Number of classes.
    pub const COUNT: usize = 20;

    /// Every class, in `index()` order.
    pub const ALL: [IoClass; IoClass::COUNT] = [
        IoClass::DbRead,
        IoClass::DbWrite,
        IoClass::LogWrite,
        IoClass::LogRead,
        IoClass::BdmRead,
        IoClass::ReplicationRead,
        IoClass::BackupRead,
        IoClass::RecoveryRead,
        IoClass::RecoveryWrite,
        IoClass::ChecksumRead,
        IoClass::DbGrowth,
        IoClass::DbHeader,
        IoClass::DbFlush,
        IoClass::LogCreate,
        IoClass::LogCheckpoint,
        IoClass::LogReopen,
        IoClass::HeaderRead,
        IoClass::OfflineRead,
        IoClass::OfflineWrite,
        IoClass::BackupWrite,
    ];

    /// Dense index 0..20, the position in [`IoClass::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The class at `index`, if any.
    pub const fn from_index(index: usize) -> Option<IoClass> {
        if index < IoClass::COUNT {
            Some(IoClass::ALL[index])
        } else {
            None
        }
    }

    /// Machine name, snake_case: "db_read", "log_write", ... (also the serde name).
    pub const fn name(self) -> &'static str {
        match self {
            IoClass::DbRead => "db_read",
            IoClass::DbWrite => "db_write",
            IoClass::LogWrite => "log_write",
            IoClass::LogRead => "log_read",
            IoClass::BdmRead => "bdm_read",
            IoClass::ReplicationRead => "replication_read",
            IoClass::BackupRead => "backup_read",
            IoClass::RecoveryRead => "recovery_read",
            IoClass::RecoveryWrite => "recovery_write",
            IoClass::ChecksumRead => "checksum_read",
            IoClass::DbGrowth => "db_growth",
            IoClass::DbHeader => "db_header",
            IoClass::DbFlush => "db_flush",
            IoClass::LogCreate => "log_create",
            IoClass::LogCheckpoint => "log_checkpoint",
            IoClass::LogReopen => "log_reopen",
            IoClass::HeaderRead => "header_read",
            IoClass::OfflineRead => "offline_read",
            IoClass::OfflineWrite => "offline_write",
            IoClass::BackupWrite => "backup_write",
        }
    }

    /// Human label in Jetstress's wording: "Database Reads", "Log Writes", ...
    pub const fn label(self) -> &'static str {
        match self {
            IoClass::DbRead => "Database Reads",
            IoClass::DbWrite => "Database Writes",
            IoClass::LogWrite => "Log Writes",
            IoClass::LogRead => "Log Reads",
            IoClass::BdmRead => "BDM Reads",
            IoClass::ReplicationRead => "Log Replication Reads",
            IoClass::BackupRead => "Backup Reads",
            IoClass::RecoveryRead => "Recovery Reads",
            IoClass::RecoveryWrite => "Recovery Writes",
            IoClass::ChecksumRead => "Checksum Reads",
            IoClass::DbGrowth => "Database Growth Writes",
            IoClass::DbHeader => "Database Header Writes",
            IoClass::DbFlush => "Database Flushes",
            IoClass::LogCreate => "Log Creation Writes",
            IoClass::LogCheckpoint => "Checkpoint File Writes",
            IoClass::LogReopen => "Log Reopen Writes",
            IoClass::HeaderRead => "Header Reads",
            IoClass::OfflineRead => "Offline Tool Reads",
            IoClass::OfflineWrite => "Offline Tool Writes",
            IoClass::BackupWrite => "Backup Copy Writes",
        }
    }

    /// Whether the class writes (a flush counts as a write: it makes writes durable).
    pub const fn is_write(self) -> bool {
        matches!(
            self,
            IoClass::DbWrite
                | IoClass::LogWrite
                | IoClass::RecoveryWrite
                | IoClass::DbGrowth
                | IoClass::DbHeader
                | IoClass::DbFlush
                | IoClass::LogCreate
                | IoClass::LogCheckpoint
                | IoClass::LogReopen
                | IoClass::OfflineWrite
                | IoClass::BackupWrite
        )
    }

    /// Whether the class is the engine's bookkeeping (growth, headers, flushes, log file
    /// creation, the checkpoint file, reopening the log, header reads, the offline
    /// tools, backup copies) rather than I/O a Jetstress report has a row for: reports
    /// show these classes apart from the measured ones.
    pub const fn is_bookkeeping(self) -> bool {
        matches!(
            self,
            IoClass::DbGrowth
                | IoClass::DbHeader
                | IoClass::DbFlush
                | IoClass::LogCreate
                | IoClass::LogCheckpoint
                | IoClass::LogReopen
                | IoClass::HeaderRead
                | IoClass::OfflineRead
                | IoClass::OfflineWrite
                | IoClass::BackupWrite
        )
    }

    /// Whether results (results.json, samples, the live counters) list the class. Header
    /// reads, the offline tools' I/O and backup copy writes are timed and counted by
    /// their backends like every request, but results keep to the classes their schema
    /// names.
    pub const fn is_reported(self) -> bool {
        !matches!(
            self,
            IoClass::HeaderRead
                | IoClass::OfflineRead
                | IoClass::OfflineWrite
                | IoClass::BackupWrite
        )
    }
}

impl fmt::Display for IoClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_index_order_with_unique_names() {
        for (i, class) in IoClass::ALL.iter().enumerate() {
            assert_eq!(class.index(), i);
            assert_eq!(IoClass::from_index(i), Some(*class));
        }
        assert_eq!(IoClass::from_index(IoClass::COUNT), None);
        let mut names: Vec<_> = IoClass::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), IoClass::COUNT);
        assert_eq!(IoClass::ReplicationRead.label(), "Log Replication Reads");
        let writes: Vec<_> = IoClass::ALL.into_iter().filter(|c| c.is_write()).collect();
        assert_eq!(
            writes,
            [
                IoClass::DbWrite,
                IoClass::LogWrite,
                IoClass::RecoveryWrite,
                IoClass::DbGrowth,
                IoClass::DbHeader,
                IoClass::DbFlush,
                IoClass::LogCreate,
                IoClass::LogCheckpoint,
                IoClass::LogReopen,
                IoClass::OfflineWrite,
                IoClass::BackupWrite,
            ]
        );
        assert!(IoClass::ALL[..10].iter().all(|c| !c.is_bookkeeping()));
        assert!(IoClass::ALL[10..].iter().all(|c| c.is_bookkeeping()));
        assert!(IoClass::ALL[..16].iter().all(|c| c.is_reported()));
        assert!(IoClass::ALL[16..].iter().all(|c| !c.is_reported()));
    }
}
