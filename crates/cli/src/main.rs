//! `edbstress`: the command line. It parses arguments, resolves a run's configuration
//! (mapping configuration keys to its flags in error messages), calls the workload
//! crate for tests (the solution crate for fleets and sweeps) and the engine directly for the offline commands (`prepare`,
//! `checksum`, `recover`, `check`, `clean`, `inject`), the report crate for `report`,
//! `compare` and `aggregate`, shows progress and prints results. It holds no storage
//! logic of its own.
//!
//! Exit codes: 0 success / clean, 1 an integrity problem was found (or a test failed),
//! 2 a usage, configuration or environment error.

#![forbid(unsafe_code)]

#[macro_use]
mod stdout;
mod aggregate_cmd;
mod check_cmd;
mod checksum_cmd;
mod clean_cmd;
mod common;
mod completions_cmd;
mod config_cmd;
mod durability_probe_cmd;
mod esrp_cmd;
mod esrp_print;
mod flags;
mod fleet_cmd;
mod inject_cmd;
mod man_cmd;
mod man_sections;
mod metrics_server;
mod prepare_cmd;
mod recover_cmd;
mod report_cmd;
mod run_args;
mod run_cmd;
mod storage_probe_cmd;
mod sweep_cmd;
mod units;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::common::CommandError;

/// What `edbstress --help` opens with: what the tool does for the person validating
/// storage.
const ABOUT: &str =
    "Validate storage for Exchange-style mailbox databases on Linux (a Jetstress for Linux)";

/// The longer description of `edbstress --help`.
const LONG_ABOUT: &str = "\
Validate storage for Exchange-style mailbox databases on Linux (a Jetstress for Linux).

edbstress answers: will this storage carry N mailboxes at this I/O profile, within
Exchange's latency rules, without losing or corrupting data? It creates real
databases (B+trees with ESE-style page checksums and a write-ahead log), drives real
transactions at the target rate (Exchange 2007/2010/2013 profiles) with background
maintenance and log replication, judges the result by Jetstress's pass/fail rules
(database read and log write latencies, page fault stalls), verifies every checksum
afterwards, and writes a report. It also runs the DatabaseBackup and SoftRecovery
tests, verifies databases offline and replays their logs after a crash.

Exit codes: 0 pass or clean, 1 fail or damaged data, 2 usage or configuration error,
130 stopped with Ctrl-C.";

/// Examples shown after the commands.
const EXAMPLES: &str = "\
Examples:
  # a one-minute Performance test in ./edbstress-data, to see the tool work
  edbstress run --quick

  # validate storage for 5,000 mailboxes at 0.12 IOPS each, 2048 MB quotas, 6 databases
  # with 2 copies, databases on two mount points and logs on a third (2 hours)
  edbstress run --mailboxes 5000 --iops-per-mailbox 0.12 --mailbox-quota 2048MB \\
      --databases 6 --copies 2 --db-path /mnt/db1 --db-path /mnt/db2 --log-path /mnt/log1

  # verify every page and log segment offline (like eseutil /k)
  edbstress checksum --db-path /mnt/db1 --db-path /mnt/db2 --log-path /mnt/log1

  # replay the logs of databases that were not shut down cleanly (soft recovery)
  edbstress recover --db-path /mnt/db1 --log-path /mnt/log1

`edbstress help <command>` describes each command; `edbstress config init site.toml`
writes a commented configuration file.";

/// The command line of `edbstress`.
#[derive(Parser, Debug)]
#[command(
    name = "edbstress",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// More log output (-v info, -vv debug); also RUST_LOG.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a test (Performance by default) and write its run directory and verdict.
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Run(Box<run_cmd::RunCmdArgs>),
    /// Create database files filled with bulk-loaded B+trees of mailbox records.
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Prepare(prepare_cmd::PrepareArgs),
    /// Verify every page of databases and every segment of logs, offline (like eseutil /k).
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Checksum(checksum_cmd::ChecksumArgs),
    /// Replay the logs of instances that were not shut down cleanly (soft recovery).
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Recover(recover_cmd::RecoverArgs),
    /// Deep consistency check of the B+trees of offline databases.
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Check(check_cmd::CheckArgs),
    /// Remove edbstress databases, their logs and (with --results-dir) run directories;
    /// nothing without edbstress's signature.
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Clean(clean_cmd::CleanArgs),
    /// Write a configuration template, or show the configuration a run would use.
    // Negative numbers reach the value parsers, which say what range is allowed.
    #[command(allow_negative_numbers = true)]
    Config(config_cmd::ConfigArgs),
    /// Render a run directory's report again, or in another format (md, json, junit).
    Report(report_cmd::ReportArgs),
    /// Compare runs side by side (differences against the first), optionally as HTML;
    /// with --max-iops-drop, --max-p99-rise or --max-avg-latency-rise, a regression
    /// gate for CI (exit code 1 when a run is worse than the first beyond the limits).
    Compare(report_cmd::CompareArgs),
    /// Merge the run directories of one test on several hosts into one result (the
    /// ESRP Individual and Aggregate Server Performance tables, exact percentiles).
    Aggregate(aggregate_cmd::AggregateArgs),
    /// Run a test (or prepare, checksum, clean) on several hosts at once over OpenSSH,
    /// started together, collected and aggregated.
    Fleet(fleet_cmd::FleetArgs),
    /// The ESRP-style campaign (Stress, Performance, DatabaseBackup, SoftRecovery on
    /// every server, resumable) and the solution document written from its results.
    Esrp(esrp_cmd::EsrpArgs),
    /// Run a grid of storage and workload settings (a run at every point, the storage
    /// re-configured between points by your commands) and chart the results against
    /// the parameter; `sweep init` writes a commented sweep file.
    Sweep(sweep_cmd::SweepArgs),
    /// Measure what the storage under a path can do (random, sequential and log I/O).
    Probe(storage_probe_cmd::StorageProbeArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(completions_cmd::CompletionsArgs),
    /// Print the manual page, or write every page into a directory (--output DIR).
    Man(man_cmd::ManArgs),
    /// Run durable-commit sessions printing every acknowledged commit (crash testing).
    #[command(hide = true)]
    DurabilityProbe(durability_probe_cmd::DurabilityProbeArgs),
    /// Inject faults into edbstress's own files and print what was done (testing).
    #[command(hide = true)]
    Inject(inject_cmd::InjectArgs),
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
        // Colour codes only for a person at a terminal, never into a redirected file.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn main() -> ExitCode {
    // Before any thread allocates: keeps max RSS within the memory goal.
    edbstress_io::bound_allocator_footprint();
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(*args),
        Command::Prepare(args) => prepare_cmd::run(args),
        Command::Checksum(args) => checksum_cmd::run(args),
        Command::Recover(args) => recover_cmd::run(args),
        Command::Check(args) => check_cmd::run(args),
        Command::Config(args) => config_cmd::run(args),
        Command::Clean(args) => clean_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Compare(args) => report_cmd::compare(args),
        Command::Aggregate(args) => aggregate_cmd::run(args),
        Command::Fleet(args) => fleet_cmd::run(args),
        Command::Esrp(args) => esrp_cmd::run(args),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Probe(args) => storage_probe_cmd::run(args),
        Command::Completions(args) => completions_cmd::run(args, Cli::command()),
        Command::Man(args) => man_cmd::run(args, Cli::command()),
        Command::DurabilityProbe(args) => durability_probe_cmd::run(args),
        Command::Inject(args) => inject_cmd::run(args),
    };
    match result {
        Ok(_) if stdout::failure() => ExitCode::from(2),
        Ok(code) => code,
        Err(CommandError::Usage(msg)) => {
            eprintln!("error: {}", bounded_message(&msg));
            ExitCode::from(2)
        }
        Err(CommandError::Integrity(msg)) => {
            eprintln!("error: {}", bounded_message(&msg));
            ExitCode::from(1)
        }
    }
}

/// A last guard for messages that quote input: each line at most a few thousand
/// characters (the parsers already quote at most a short excerpt).
fn bounded_message(msg: &str) -> String {
    const MAX: usize = 4000;
    msg.lines()
        .map(|line| match line.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
