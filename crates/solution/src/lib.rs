//! The solution level: what the ESRP documents are about — several servers tested at
//! once and their results taken together. This crate drives runs; it owns
//!
//! - [`ssh`]: reaching other hosts through the system's OpenSSH client (BatchMode, the
//!   user's keys and `~/.ssh/config`, or a config file given): no daemon and no wire
//!   protocol of our own; [`control_master`]: one shared connection per host of a
//!   fleet (OpenSSH multiplexing), ended with the fleet;
//! - [`fleet`]: `edbstress fleet run` — checks every host (edbstress there in the same
//!   version, paths, free space, clock offset), splits the mailbox target, starts the
//!   same test on every host with one `--start-at`, follows each host's progress, stops
//!   them all cleanly on request, copies every run directory back and aggregates them
//!   (`edbstress_report::aggregate`), naming hosts that dropped out;
//! - [`esrp`]: `edbstress esrp run` — the ESRP campaign (Stress with checksums,
//!   Performance, DatabaseBackup, SoftRecovery) as ordinary runs, locally or through
//!   the fleet, with a state file to resume after an interruption; solution.toml; and
//!   reading a campaign back for its document (`edbstress_report::solution`).
//! - [`process_group`]: the child processes these start, each in its own process
//!   group, ended with everything it started (deadlines, Ctrl-C, quitting at once);
//! - [`sweep`]: `edbstress sweep` — an ordinary `edbstress run` (a child process) at
//!   every point of a grid of run settings and storage parameters, the user's setup,
//!   teardown and measure commands around each; resume, Ctrl-C, the plan's order. Its
//!   results files are pure functions of `edbstress_report::sweep`.
//!
//! It must not run transactions, touch databases or judge results itself: each host
//! (and each sweep point) runs an ordinary `edbstress run`, and aggregation and the
//! documents are pure functions of the report crate over the results it collects.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod control_master;
pub mod esrp;
pub mod fleet;
pub mod process_group;
mod run_dir;
pub mod ssh;
pub mod sweep;
