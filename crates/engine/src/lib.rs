//! The edbstress storage engine. It owns everything that gives the tool's I/O its
//! meaning: the data model (mailbox table and long-value B+trees), page content, the
//! bottom-up bulk load that creates databases, the database header pair and the
//! initial log directory, and offline verification of databases and logs.
//!
//! It decides *what* is read and written and in which order; bytes on disk are
//! encoded by `edbstress-format` and moved by `edbstress-io`. It must not parse
//! command lines, print, or decide pass/fail policy for a test run — it returns
//! structured reports for the workload and CLI layers to judge and present.

pub mod btree;
pub mod bulkload;
pub mod cache;
pub mod check;
pub mod content;
pub mod dbfile;
pub mod dirlock;
pub mod error;
pub mod fault;
pub mod instance;
pub mod layout;
pub mod lock;
pub mod log;
pub mod prepare;
pub mod recovery;
pub mod redo;
pub mod schema;
pub mod verify;
