//! `edbstress`: the command line. A thin front end: it parses arguments, calls the
//! engine (and, later, the workload and report crates), shows progress and prints
//! results. It holds no storage logic of its own.
//!
//! Exit codes: 0 success / clean, 1 an integrity problem was found (or a test failed),
//! 2 a usage, configuration or environment error.

mod checksum_cmd;
mod common;
mod prepare_cmd;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::common::CommandError;

/// Storage validation for mailbox-database workloads (a Linux-native Jetstress).
#[derive(Parser, Debug)]
#[command(name = "edbstress", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log output (-v info, -vv debug); also RUST_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create database files filled with bulk-loaded B+trees of mailbox records.
    Prepare(prepare_cmd::PrepareArgs),
    /// Verify every page of databases and every segment of logs, offline (like eseutil /k).
    Checksum(checksum_cmd::ChecksumArgs),
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Prepare(args) => prepare_cmd::run(args),
        Command::Checksum(args) => checksum_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(CommandError::Usage(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}
