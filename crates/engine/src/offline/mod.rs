//! The offline tools: they work on closed databases and log directories, each holding
//! the database lock for the whole operation.
//!
//! - [`prepare`] (with [`bulkload`]): checks the instance paths and creates the
//!   databases, bottom-up ([`view_layout`]: the view index's order), and their initial
//!   log directories;
//! - [`recovery`]: soft recovery — replays the log from the checkpoint;
//! - [`verify`]: the checksum scan of databases and logs (with repair);
//! - [`check`]: the deep consistency check of the three trees;
//! - [`fault`]: the seeded fault injector (damage that the checks must detect).

pub(crate) mod bulkload;
pub(crate) mod check;
pub mod fault;
pub(crate) mod prepare;
pub(crate) mod recovery;
pub(crate) mod verify;
pub(crate) mod view_layout;
