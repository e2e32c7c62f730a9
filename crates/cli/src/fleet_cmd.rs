//! `edbstress fleet`: one command on several hosts through OpenSSH — `run` (the same
//! test on every host, started together, collected and aggregated), `prepare`,
//! `checksum` and `clean`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Subcommand};
use edbstress_report::Verdict;
use edbstress_solution::fleet::{self, FleetEvent, FleetHost, FleetOptions};
use edbstress_solution::ssh::Ssh;
use edbstress_workload::units::parse_duration;

use crate::common::CommandError;

/// Arguments of `edbstress fleet`.
#[derive(Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Subcommand, Debug)]
enum FleetCommand {
    /// Run one test on every host at once and aggregate the results. Run options
    /// follow `--`: `edbstress fleet run --host db1 --host db2 -- --duration 2h`.
    Run(FleetRunArgs),
    /// `edbstress prepare` on every host (options after `--`).
    Prepare(FleetCommonArgs),
    /// `edbstress checksum` on every host (options after `--`).
    Checksum(FleetCommonArgs),
    /// `edbstress clean` on every host (options after `--`; give --yes there).
    Clean(FleetCommonArgs),
}

/// Hosts and how to reach them.
#[derive(Args, Debug)]
struct FleetCommonArgs {
    /// A host: `DEST[,name=N,db-path=P,log-path=P,mailboxes=N,results-dir=P]` (DEST as
    /// ssh takes it; keys repeatable for paths). Repeat for each host.
    #[arg(long = "host", value_name = "DEST[,key=value…]", required = true)]
    hosts: Vec<String>,
    /// Total mailboxes, split equally over the hosts without mailboxes=….
    #[arg(long)]
    mailboxes: Option<u64>,
    /// The edbstress binary on the hosts.
    #[arg(long, value_name = "PATH", default_value = "edbstress")]
    remote_edbstress: String,
    /// An ssh configuration file (`ssh -F`) instead of ~/.ssh/config.
    #[arg(long, value_name = "FILE")]
    ssh_config: Option<PathBuf>,
    /// An ssh option (`ssh -o KEY=VALUE`); repeatable.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    ssh_options: Vec<String>,
    /// Options of the edbstress command on every host.
    #[arg(last = true, value_name = "OPTIONS")]
    args: Vec<String>,
}

#[derive(Args, Debug)]
struct FleetRunArgs {
    #[command(flatten)]
    common: FleetCommonArgs,
    /// Time from starting the hosts to the start of measurement: enough for every host
    /// to prepare its databases and warm its caches.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    lead_time: Duration,
    /// Largest clock difference accepted between a host and this machine.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    max_clock_offset: Duration,
    /// The fleet directory (the aggregate, and hosts/NAME/ with each run directory)
    /// [default: edbstress-results/Fleet_TIME].
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

fn options(common: &FleetCommonArgs) -> Result<FleetOptions, CommandError> {
    let hosts = common
        .hosts
        .iter()
        .map(|h| FleetHost::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CommandError::Usage)?;
    Ok(FleetOptions {
        hosts,
        ssh: Ssh {
            config: common.ssh_config.clone(),
            options: common.ssh_options.clone(),
            program: None,
        },
        remote_edbstress: common.remote_edbstress.clone(),
        run_args: common.args.clone(),
        mailboxes: common.mailboxes,
        lead_time: Duration::from_secs(120),
        max_clock_offset: Duration::from_secs(1),
        output: PathBuf::new(),
    })
}

/// Runs `edbstress fleet`.
pub fn run(args: FleetArgs) -> Result<ExitCode, CommandError> {
    match args.command {
        FleetCommand::Run(a) => run_fleet(a),
        FleetCommand::Prepare(a) => exec(a, "prepare"),
        FleetCommand::Checksum(a) => exec(a, "checksum"),
        FleetCommand::Clean(a) => exec(a, "clean"),
    }
}

fn run_fleet(a: FleetRunArgs) -> Result<ExitCode, CommandError> {
    let mut options = options(&a.common)?;
    options.lead_time = a.lead_time;
    options.max_clock_offset = a.max_clock_offset;
    options.output = a.output.unwrap_or_else(|| {
        PathBuf::from("edbstress-results").join(format!(
            "Fleet_{}",
            chrono::Local::now().format("%Y_%m_%d_%H_%M_%S")
        ))
    });
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                eprintln!("quitting; the hosts' runs go on (stop them there)");
                std::process::exit(130);
            }
        })
        .map_err(|e| CommandError::Usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    }
    let events = |e: FleetEvent<'_>| match e {
        FleetEvent::Checked(c) => {
            let free: Vec<String> = c
                .free
                .iter()
                .map(|(p, b)| format!("{} {} free", p.display(), edbstress_io::human_bytes(*b)))
                .collect();
            eprintln!(
                "[{}] {}, clock {:+.3} s, round trip {:.3} s; {}",
                c.name,
                c.version,
                c.clock_offset_s,
                c.round_trip_s,
                free.join(", ")
            );
        }
        FleetEvent::Started(at) => eprintln!(
            "every host started; measurement starts at {}",
            chrono::DateTime::<chrono::Local>::from(at).format("%Y-%m-%d %H:%M:%S%.3f %:z")
        ),
        FleetEvent::Line(host, line) => eprintln!("[{host}] {line}"),
        FleetEvent::Ended(host, how) => eprintln!("[{host}] run {how}"),
        FleetEvent::Stopping => {
            eprintln!("stopping every host cleanly (Ctrl-C again to leave them running)")
        }
    };
    let outcome = fleet::run(&options, &stop, &events).map_err(|e| CommandError::Usage(e.0))?;
    crate::aggregate_cmd::print_summary(&outcome.aggregate, &outcome.dir);
    println!(
        "  fleet overhead: {:.1} s checking the hosts over ssh, {:.0} s lead time, {:.1} s copying the run directories back",
        outcome.check_seconds, outcome.lead_seconds, outcome.copy_seconds
    );
    Ok(if stop.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else if outcome.aggregate.overall_result == Verdict::Pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn exec(a: FleetCommonArgs, subcommand: &str) -> Result<ExitCode, CommandError> {
    let options = options(&a)?;
    let answers = fleet::exec(&options, subcommand).map_err(|e| CommandError::Usage(e.0))?;
    let mut worst = 0;
    for answer in &answers {
        let code = answer.code.unwrap_or(2);
        worst = worst.max(code);
        println!("== {} (exit {code})", answer.host);
        print!("{}", answer.stdout);
        for line in answer.stderr.lines() {
            println!("   {line}");
        }
    }
    Ok(ExitCode::from(
        u8::try_from(worst.clamp(0, 255)).unwrap_or(2),
    ))
}
