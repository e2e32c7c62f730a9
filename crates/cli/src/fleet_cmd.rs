//! `edbstress fleet`: one command on several hosts through OpenSSH — `run` (the same
//! test on every host, started together, collected and aggregated), `prepare`,
//! `checksum` and `clean`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use edbstress_report::Verdict;
use edbstress_solution::fleet::{self, FleetEvent, FleetFile, FleetHost, FleetOptions};
use edbstress_solution::ssh::Ssh;
use edbstress_workload::units::parse_duration;
use indicatif::{ProgressBar, ProgressStyle};

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
    #[arg(long = "host", value_name = "DEST[,key=value…]")]
    hosts: Vec<String>,
    /// A configuration file: its `[fleet]` table gives the hosts (and ssh settings,
    /// mailboxes, lead time) unless given here, and `fleet run` ships it to every host
    /// as the run's `--config`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Total mailboxes, split equally over the hosts without mailboxes=….
    #[arg(long)]
    mailboxes: Option<u64>,
    /// The edbstress binary on the hosts [default: edbstress].
    #[arg(long, value_name = "PATH")]
    remote_edbstress: Option<String>,
    /// An ssh configuration file (`ssh -F`) instead of ~/.ssh/config.
    #[arg(long, value_name = "FILE")]
    ssh_config: Option<PathBuf>,
    /// An ssh option (`ssh -o KEY=VALUE`); repeatable.
    #[arg(long = "ssh-option", value_name = "KEY=VALUE")]
    ssh_options: Vec<String>,
    /// The most ssh sessions opening or working at once, in every phase (a host's run
    /// counts until it started there) [default: 10, sshd's MaxStartups threshold].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    max_ssh_sessions: Option<u16>,
    /// Options of the edbstress command on every host.
    #[arg(last = true, value_name = "OPTIONS")]
    args: Vec<String>,
}

#[derive(Args, Debug)]
struct FleetRunArgs {
    #[command(flatten)]
    common: FleetCommonArgs,
    /// Time from starting the hosts to the start of measurement: enough for every host
    /// to attach its databases, warm its caches and auto-tune [default: from the run's
    /// settings: 1m + the cache at 8 MiB/s + the longest auto-tuning, at least 2m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    lead_time: Option<Duration>,
    /// Largest clock difference accepted between a host and this machine [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    max_clock_offset: Option<Duration>,
    /// Time a host's run gets past the lead time and its duration to end: a host still
    /// running then is named lost and the others are collected; also the longest wait
    /// (at most 2m) for the runs to stop after Ctrl-C [default: 15m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    grace: Option<Duration>,
    /// The fleet directory (the aggregate, and hosts/NAME/ with each run directory): new,
    /// or empty [default: edbstress-results/Fleet_TIME].
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

/// The fleet from the flags, then the `[fleet]` table of `--config` for what they
/// leave out.
fn options(common: &FleetCommonArgs) -> Result<(FleetOptions, FleetFile), CommandError> {
    let file = match &common.config {
        Some(path) => FleetFile::load(path)
            .map_err(|e| CommandError::Usage(e.to_string()))?
            .unwrap_or_default(),
        None => FleetFile::default(),
    };
    let hosts = if common.hosts.is_empty() {
        file.fleet_hosts()
    } else {
        common
            .hosts
            .iter()
            .map(|h| FleetHost::parse(h))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CommandError::Usage(e.to_string()))?
    };
    if hosts.is_empty() {
        return Err(CommandError::Usage(
            "no host: give --host DEST for each host, or [[fleet.hosts]] entries in the --config file"
                .into(),
        ));
    }
    let max_ssh_sessions = match (common.max_ssh_sessions, file.max_ssh_sessions) {
        (Some(n), _) => usize::from(n),
        (None, Some(0)) => {
            return Err(CommandError::Usage(
                "[fleet] max_ssh_sessions is 0: give at least 1".into(),
            ));
        }
        (None, Some(n)) => n,
        (None, None) => fleet::DEFAULT_MAX_SSH_SESSIONS,
    };
    let mut ssh_options = file.ssh_options.clone();
    ssh_options.extend(common.ssh_options.iter().cloned());
    let options = FleetOptions {
        hosts,
        ssh: Ssh {
            config: common
                .ssh_config
                .clone()
                .or_else(|| file.ssh_config.clone()),
            options: ssh_options,
            program: None,
            sockets: None,
        },
        remote_edbstress: common
            .remote_edbstress
            .clone()
            .or_else(|| file.remote_edbstress.clone())
            .unwrap_or_else(|| "edbstress".into()),
        run_args: common.args.clone(),
        mailboxes: common.mailboxes.or(file.mailboxes),
        lead_time: Duration::from_secs(120),
        max_clock_offset: Duration::from_secs(1),
        grace: fleet::DEFAULT_GRACE,
        output: PathBuf::new(),
        config_file: None,
        campaign_id: None,
        max_ssh_sessions,
    };
    Ok((options, file))
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
    let (mut options, file) = options(&a.common)?;
    let from_file = |v: &Option<String>, key: &str| {
        FleetFile::duration(v, key).map_err(|e| CommandError::Usage(e.to_string()))
    };
    options.lead_time = match a.lead_time {
        Some(d) => d,
        None => from_file(&file.lead_time, "lead_time")?.unwrap_or_else(|| {
            fleet::default_lead_time(&options.run_args, a.common.config.as_deref())
        }),
    };
    options.max_clock_offset = match a.max_clock_offset {
        Some(d) => d,
        None => {
            from_file(&file.max_clock_offset, "max_clock_offset")?.unwrap_or(Duration::from_secs(1))
        }
    };
    options.grace = a.grace.unwrap_or(fleet::DEFAULT_GRACE);
    options.config_file = a.common.config.clone();
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
                eprintln!(
                    "quitting without collecting: every ssh session is ended; runs that did \
                     not stop may go on there (stop them there)"
                );
                edbstress_solution::process_group::kill_all();
                std::process::exit(130);
            }
        })
        .map_err(|e| CommandError::Usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    }
    let progress = ProgressLines::new(std::io::stderr().is_terminal());
    let events = |e: FleetEvent<'_>| match e {
        FleetEvent::Fleet(id) => {
            progress.say(format!("fleet {id}"));
            progress.say(format!(
                "every host's detail goes to {}",
                options.output.join(fleet::FLEET_LOG).display()
            ));
        }
        FleetEvent::Progress(p) => progress.count(p),
        FleetEvent::Started(at) => progress.say(format!(
            "every host started; measurement starts at {}",
            chrono::DateTime::<chrono::Local>::from(at).format("%Y-%m-%d %H:%M:%S%.3f %:z")
        )),
        FleetEvent::Stopping => progress.say(
            "stopping every host cleanly, then collecting what finished (Ctrl-C again to quit \
             without collecting)"
                .into(),
        ),
        FleetEvent::Checked(_) | FleetEvent::Line(..) | FleetEvent::Ended(..) => {}
    };
    let outcome =
        fleet::run(&options, &stop, &events).map_err(|e| CommandError::Usage(e.to_string()))?;
    progress.done();
    crate::aggregate_cmd::print_summary(&outcome.aggregate, &outcome.dir);
    let lost: Vec<&str> = outcome
        .aggregate
        .hosts
        .iter()
        .filter(|h| h.incomplete.is_some())
        .map(|h| h.host.as_str())
        .collect();
    if !lost.is_empty() {
        outln!(
            "  {} of {} hosts lost or without results (why above and in {}): {}",
            lost.len(),
            outcome.aggregate.hosts.len(),
            fleet::FLEET_LOG,
            lost.join(", ")
        );
    }
    outln!("  fleet id: {}", outcome.fleet_id);
    let o = &outcome.overhead;
    outln!(
        "  fleet overhead: preflight {:.1} s, start {:.1} s, lead time {:.0} s, wait past the \
         duration {:.1} s, collect {:.1} s, aggregate {:.1} s ({} hosts, at most {} ssh \
         sessions at once)",
        o.preflight,
        o.start,
        o.lead,
        o.wait_past_end,
        o.collect,
        o.aggregate,
        options.hosts.len(),
        options.max_ssh_sessions
    );
    Ok(if stop.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else if outcome.aggregate.overall_result == Verdict::Pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The fleet's progress on standard error: one line per phase. On a terminal the
/// current phase's counts update in place; otherwise a phase's counts are printed at
/// most every [`ProgressLines::EVERY`] and when it finishes.
struct ProgressLines {
    bar: Option<ProgressBar>,
    /// The phase, time and text of the counts printed last (without a terminal).
    last: Mutex<Option<(fleet::Phase, Instant, String)>>,
}

impl ProgressLines {
    const EVERY: Duration = Duration::from_secs(10);

    fn new(terminal: bool) -> ProgressLines {
        let bar = terminal.then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        ProgressLines {
            bar,
            last: Mutex::new(None),
        }
    }

    fn say(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn count(&self, p: &fleet::Progress) {
        if let Some(bar) = &self.bar {
            if p.finished {
                bar.println(p.to_string());
                bar.set_message(String::new());
            } else {
                bar.set_message(p.to_string());
            }
            return;
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let text = p.to_string();
        // A phase's first counts when there are any (measuring: how many run), then at
        // most one line per EVERY, and its last (unless just printed).
        let due = match &*last {
            Some((phase, _, said)) if *phase == p.phase && p.finished => *said != text,
            Some((phase, at, _)) if *phase == p.phase => at.elapsed() >= Self::EVERY,
            _ => p.finished || p.phase == fleet::Phase::Measure || p.done + p.failed > 0,
        };
        if due {
            eprintln!("{text}");
            *last = Some((p.phase, Instant::now(), text));
        }
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn exec(a: FleetCommonArgs, subcommand: &str) -> Result<ExitCode, CommandError> {
    let (options, _) = options(&a)?;
    let answers =
        fleet::exec(&options, subcommand).map_err(|e| CommandError::Usage(e.to_string()))?;
    let mut worst = 0;
    for answer in &answers {
        let code = answer.code.unwrap_or(2);
        worst = worst.max(code);
        outln!("== {} (exit {code})", answer.host);
        out!("{}", answer.stdout);
        for line in answer.stderr.lines() {
            outln!("   {line}");
        }
    }
    Ok(ExitCode::from(
        u8::try_from(worst.clamp(0, 255)).unwrap_or(2),
    ))
}
