//! The edbstress storage engine. It owns everything that gives the tool's I/O its
//! meaning: the data model (a mailbox table and a long-value B+tree of message bodies),
//! page content, transactions over a page cache and a write-ahead log, the bottom-up
//! bulk load that creates databases, the database header pair and the log directory,
//! soft recovery, and offline verification of databases and logs.
//!
//! # Main types and how they work together
//!
//! - [`InstanceLayout`] names the files of one instance (database file, log
//!   directory); [`PreparePlan::check`] checks them against [`PrepareOptions`] and
//!   [`PreparePlan::execute`] creates what is missing (a [`PrepareReport`]), building
//!   each database by bulk load.
//! - [`Instance::open`] (given an [`InstanceConfig`]) takes the [`DatabaseLock`] and the
//!   [`LogDirLock`], opens a [`PageCache`] over the database file and a
//!   [`log::LogWriter`] over the log directory. [`Instance::commit`] runs a list of
//!   [`TxnOp`]s as one transaction: the B+tree changes are applied in the cache under
//!   the instance lock, their redo records are appended to the log, and with
//!   [`Durability::Durable`] the commit waits for the log to reach the disk (group
//!   commit). The cache's page writer writes dirty pages behind the log (write-ahead
//!   rule) and advances the checkpoint; [`Instance::shutdown`] leaves a clean database.
//! - After a crash, [`recover`] replays the log from the checkpoint
//!   ([`RecoveryOptions`] → [`RecoveryReport`], naming lost flushes by page).
//! - Offline checks: [`scan_database`] / [`scan_log_dir`] verify every checksum
//!   (`edbstress checksum`), [`deep_check`] the consistency of the three trees, and
//!   [`fault`] injects the damage they must detect.
//!
//! Sources are grouped the same way: `runtime/` (instance, btree, redo, cache, log,
//! schema, content, locks) and `offline/` (prepare, bulk load, recovery, verify,
//! check, fault), beside the database file helpers and the instance layout they share.
//! The modules are private; what other crates use is re-exported here, with the log
//! ([`log`]) and the fault injector ([`fault`]) as namespaces of their own.
//!
//! # What it must not do
//!
//! It decides *what* is read and written and in which order; bytes on disk are
//! encoded by `edbstress-format` and moved by `edbstress-io` (this crate has no
//! `unsafe`). It must not parse command lines, print, or decide pass/fail policy for a
//! test run — it returns structured reports for the workload and CLI layers to judge
//! and present.

#![forbid(unsafe_code)]
#![warn(missing_docs, unnameable_types)]

mod dbfile;
mod dbheader;
mod error;
mod layout;
mod offline;
mod runtime;

pub use dbfile::sync_dir;
pub use dbheader::{HeaderReadError, check_database_signature, read_header, read_header_from};
pub use edbstress_format::{InstanceId, Pgno};
pub use error::{EngineError, NoSpaceError};
pub use layout::{
    InstanceLayout, db_file_name, discover_databases, discover_log_dirs, parse_db_file_name,
};

// Runtime: an open instance and what it is built of.
pub use runtime::btree::SpaceCounters;
pub use runtime::cache::{CacheConfig, CacheCounters};
/// The page cache on its own, for the engine's tests and benches (feature
/// `test-internals`, which the engine's dev-dependency on itself turns on); not part
/// of the API the other crates use.
#[cfg(feature = "test-internals")]
pub use runtime::cache::{CacheGuard, FrameId, PageCache, WalSync};
pub use runtime::content::{Compressibility, ContentGenerator};
pub use runtime::dirlock::{LogDirLock, ensure_dir_not_held};
pub use runtime::growth::{GrowthAllowance, GrowthLimitReached};
pub use runtime::instance::{
    CommitOutcome, Durability, Instance, InstanceConfig, InstanceCounters, Message, ShutdownReport,
    TxnOp,
};
pub use runtime::lock::{
    DatabaseLock, LOCK_SUFFIX, LockError, LockHolder, LockMode, ensure_not_held,
    is_lock_file_content,
};
pub use runtime::log;
pub use runtime::schema::{InsertKeyOrder, MessageKey, MessageShape, ViewEntryData, ViewKey};

// Offline: creating, recovering, verifying and damaging databases.
pub use offline::bulkload::BulkLoadError;
pub use offline::check::{CheckReport, LeafFill, deep_check};
pub use offline::fault;
pub use offline::prepare::{
    InstanceAction, PrepareError, PrepareOptions, PreparePlan, PrepareProgress, PrepareReport,
};
pub use offline::recovery::{LostFlush, RecoveryOptions, RecoveryReport, recover};
pub use offline::verify::{
    DatabaseScanReport, HeaderStatus, LogProblem, LogScanReport, PageProblem, PageProblemKind,
    ReadChunk, ScanError, ScanOptions, SequentialReadOptions, SequentialReadSummary,
    read_sequentially, scan_database, scan_database_until, scan_log_dir,
};
