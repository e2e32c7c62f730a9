//! The tests users run: Performance, Stress, DatabaseBackup and SoftRecovery, with
//! Jetstress's rules. It owns the run configuration and the version profiles, the
//! transaction generator (operation mix, lazy commits), the open- and closed-loop
//! schedulers, the background activities of a run (background database maintenance,
//! log replication readers), counter sampling (engine, I/O, host), the pass/fail
//! criteria, auto-tuning, and the run directory with its test log.
//!
//! It drives the engine through its public API (`Instance`, `prepare`, `recover`,
//! `verify`) and never encodes pages or log records itself; it builds the results model
//! of `edbstress-report` and leaves presentation to it; it never prints (the CLI shows
//! progress from the events it reports).

pub mod config;
pub mod profile;
pub mod transaction;
pub mod units;
