//! The runtime engine: what runs while an instance is open and sessions commit
//! transactions against it.
//!
//! - [`instance`]: an open database — its cache, its log, transactions, growth, clean
//!   shutdown and crash simulation; the entry point of everything below;
//! - [`btree`]: search, insert, delete, replace and splits over cached pages, recording
//!   a redo record (and an undo copy) for every change;
//! - [`redo`]: page-level redo operations, applied by the same code at commit and in
//!   recovery;
//! - [`cache`]: the page cache (frames, LRU-2, the page writer, the write-ahead rule);
//! - [`log`]: the transaction log writer and reader;
//! - [`schema`], [`content`]: the data model (mailbox table, long values) and the bytes
//!   of page payloads;
//! - [`session_wait`]: what sessions wait on, as threads or as tasks;
//! - [`growth`]: a limit on database file growth shared by instances;
//! - [`lock`], [`dirlock`]: the database lock and the log-directory claim that keep two
//!   processes off the same files.

pub(crate) mod btree;
pub(crate) mod cache;
pub(crate) mod content;
pub(crate) mod dirlock;
pub(crate) mod growth;
pub(crate) mod instance;
pub(crate) mod lock;
pub mod log;
pub(crate) mod redo;
pub(crate) mod schema;
pub(crate) mod session_wait;
