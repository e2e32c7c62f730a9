//! `edbstress run`: the main job. Resolves the configuration, runs the test through the
//! workload crate, shows live progress on a terminal (a progress line a minute in the
//! test log and on standard error otherwise), and prints the verdict, the main figures
//! and where the report is.
//!
//! Ctrl-C (or SIGTERM) asks the run to stop: sessions finish their transaction, the
//! instances shut down cleanly and the result files are written, marked aborted. A
//! second Ctrl-C exits at once.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use clap::Args;
use edbstress_io::IoClass;
use edbstress_report::{RunResults, Verdict};
use edbstress_workload::RunError;
use edbstress_workload::live::LiveCounters;
use edbstress_workload::live::LiveStatus;
use edbstress_workload::runner::{INTERRUPTED, RunEvent, RunOutcome, run as run_test};
use indicatif::ProgressBar;

use crate::common::CommandError;
use crate::metrics_server::MetricsServer;
use crate::run_args::RunArgs;

/// Arguments of `edbstress run`.
#[derive(Args, Debug)]
pub struct RunCmdArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Print the results (results.json) on standard output instead of the summary.
    #[arg(long)]
    json: bool,
    /// Start the measured period at this moment (RFC 3339, e.g. 2026-11-25T14:00:00Z,
    /// or +90s from now): the run prepares and warms up first, then keeps the load
    /// running until then, so several hosts measure together. A host not ready in time
    /// fails, saying how late it was.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    start_at: Option<SystemTime>,
    /// The host name the results record [default: the system's] (for aggregating runs
    /// of several hosts).
    #[arg(long, value_name = "NAME")]
    host_name: Option<String>,
    /// The fleet this run belongs to, recorded in results.json (`fleet run` sets it, so
    /// it collects only its own hosts' runs).
    #[arg(long, value_name = "ID", value_parser = parse_evidence_id)]
    fleet_id: Option<String>,
    /// The ESRP campaign this run belongs to, recorded in results.json (`esrp run` sets
    /// it, so the solution document counts only the campaign's runs).
    #[arg(long, value_name = "ID", value_parser = parse_evidence_id)]
    campaign_id: Option<String>,
    /// Serve live counters at http://ADDR/metrics while the run goes, in the
    /// OpenMetrics text format for Prometheus (e.g. 127.0.0.1:9464; port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
}

/// Checks a fleet or campaign id: 1 to 64 characters of letters, digits, '-' and '_'
/// (the ids `fleet run` and `esrp run` make are `fleet-UUID` and `campaign-UUID`).
fn parse_evidence_id(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "'{s}' is not an id: use 1 to 64 letters, digits, '-' or '_' (fleet run and esrp \
             run set this themselves)"
        ))
    }
}

/// The latest start time accepted, from now.
const MAX_START_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses `--start-at`: RFC 3339, or `+DURATION` from now; not in the past, at most a
/// week ahead.
fn parse_start_at(s: &str) -> Result<SystemTime, String> {
    let now = SystemTime::now();
    let at = if let Some(rel) = s.strip_prefix('+') {
        let d = edbstress_workload::units::parse_duration(rel).map_err(|e| e.to_string())?;
        now.checked_add(d).ok_or("that is too far ahead")?
    } else {
        let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| {
            format!("'{s}' is not a time: {e}; give RFC 3339 (2026-11-25T14:00:00Z) or +90s")
        })?;
        SystemTime::from(t)
    };
    match at.duration_since(now) {
        Err(_) => Err(format!("'{s}' is in the past; give a time ahead (or +90s)")),
        Ok(d) if d > MAX_START_DELAY => Err(format!(
            "'{s}' is more than 7 days ahead; give a nearer time"
        )),
        Ok(_) => Ok(at),
    }
}

/// How often a run without a terminal logs its progress, unless
/// [`PROGRESS_INTERVAL_ENV`] says otherwise.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(60);

/// The environment variable that sets the progress interval of runs without a terminal
/// (`30s`, `5m`; `off` for none): tests and jobs that want more or fewer lines.
pub const PROGRESS_INTERVAL_ENV: &str = "EDBSTRESS_PROGRESS_INTERVAL";

/// The progress-line interval: none on a terminal (the live status line shows
/// progress there), else a minute or what [`PROGRESS_INTERVAL_ENV`] gives.
fn progress_interval(terminal: bool) -> Result<Option<Duration>, CommandError> {
    if terminal {
        return Ok(None);
    }
    let Some(value) = std::env::var_os(PROGRESS_INTERVAL_ENV) else {
        return Ok(Some(PROGRESS_INTERVAL));
    };
    let value = value.to_string_lossy();
    if value.trim() == "off" {
        return Ok(None);
    }
    match edbstress_workload::units::parse_duration(&value) {
        Ok(d) if !d.is_zero() => Ok(Some(d)),
        Ok(_) => Err(CommandError::Usage(format!(
            "{PROGRESS_INTERVAL_ENV}={value}: give a duration above zero (e.g. 30s or 5m), or off"
        ))),
        Err(e) => Err(CommandError::Usage(format!(
            "{PROGRESS_INTERVAL_ENV}: {e}, or off"
        ))),
    }
}

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells do).
const EXIT_INTERRUPTED: u8 = 130;

/// Runs the test.
pub fn run(args: RunCmdArgs) -> Result<ExitCode, CommandError> {
    let mut config = args.run.resolve()?;
    config.start_at = args.start_at;
    config.host_name = args.host_name.clone();
    config.fleet_id = args.fleet_id.clone();
    config.campaign_id = args.campaign_id.clone();
    let live = LiveCounters::new();
    let metrics = match &args.metrics_listen {
        Some(addr) => {
            let server = MetricsServer::start(addr, live.clone())?;
            eprintln!("live counters: http://{}/metrics", server.addr());
            Some(server)
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    install_interrupt_handler(stop.clone())?;
    let terminal = std::io::stderr().is_terminal();
    config.progress_interval = progress_interval(terminal)?;
    let bar = if terminal {
        let bar = ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    };
    let events = |event: RunEvent<'_>| match event {
        RunEvent::Log(line) => {
            if terminal {
                bar.println(line);
            } else {
                eprintln!("{line}");
            }
        }
        RunEvent::Prepare(p) => {
            bar.set_message(format!(
                "preparing database {:03}: {} / {}",
                p.instance,
                edbstress_io::ByteSize(p.bytes_done).approx(),
                edbstress_io::ByteSize(p.bytes_total).approx()
            ));
        }
        RunEvent::Live(status) => {
            live.update_status(status);
            bar.set_message(live_line(status));
        }
        RunEvent::Counters(counters) => live.update_counters(counters),
        RunEvent::Progress(what, done, total) => {
            let pct = if total > 0 {
                100.0 * done as f64 / total as f64
            } else {
                0.0
            };
            bar.set_message(format!("{what}: {pct:.0} %"));
        }
    };
    let outcome = run_test(&config, &stop, &events).map_err(|e| match e {
        // Damaged databases fail the run (results.json says Fail); they are no usage error.
        RunError::Damaged(msg) => CommandError::Integrity(msg),
        // It names the key `results_dir`; the flag that sets it goes beside it.
        e @ RunError::RunDir(_) => CommandError::Usage(crate::flags::with_flags(&e.to_string())),
        e => CommandError::Usage(e.to_string()),
    })?;
    bar.finish_and_clear();
    drop(metrics);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&outcome.results)?);
    } else {
        print_summary(&outcome);
    }
    Ok(exit_code(&outcome.results))
}

/// 0 pass, 1 fail, 130 interrupted.
fn exit_code(r: &RunResults) -> ExitCode {
    if r.aborted && r.abort_reason.as_deref().is_some_and(|w| w == INTERRUPTED) {
        ExitCode::from(EXIT_INTERRUPTED)
    } else if r.overall_result == Verdict::Pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn install_interrupt_handler(stop: Arc<AtomicBool>) -> Result<(), CommandError> {
    let presses = AtomicU32::new(0);
    ctrlc::set_handler(move || {
        use std::io::Write;
        // The flag first, and no panic when standard error is gone (a fleet's run whose
        // ssh session died): eprintln! would panic on the closed pipe and the run would
        // never stop.
        if presses.fetch_add(1, Ordering::SeqCst) == 0 {
            stop.store(true, Ordering::SeqCst);
            let _ = writeln!(
                std::io::stderr(),
                "\nstopping: finishing transactions, shutting the databases down cleanly and writing the results (Ctrl-C again to quit at once)"
            );
        } else {
            let _ = writeln!(
                std::io::stderr(),
                "quitting without shutting down; databases will need `edbstress recover`"
            );
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    })
    .map_err(|e| CommandError::Usage(format!("cannot install the Ctrl-C handler: {e}")))
}

fn live_line(s: &LiveStatus) -> String {
    let mut out = format!(
        "{} ({} sessions) {:.0}s",
        s.phase.name(),
        s.sessions,
        s.elapsed.as_secs_f64()
    );
    if let Some(r) = s.remaining {
        out.push_str(&format!(" / {:.0}s left", r.as_secs_f64()));
    }
    out.push_str(&format!(" | {:.0} txn/s", s.txn_per_sec));
    if let Some(rate) = s.offered_rate {
        out.push_str(&format!(" (offered {rate:.0})"));
    }
    for (class, per_sec, ms) in &s.classes {
        if *per_sec > 0.0 {
            out.push_str(&format!(" | {} {per_sec:.0}/s {ms:.1}ms", short(*class)));
        }
    }
    out.push_str(&format!(" | cache {:.0}%", s.cache_fill_pct));
    if let Some((rate, eta)) = s.warmup {
        match eta {
            Some(eta) => out.push_str(&format!(" (+{rate:.1}%/s, ~{}s to 90%)", eta.as_secs())),
            None => out.push_str(" (not growing)"),
        }
    }
    out
}

fn short(class: IoClass) -> &'static str {
    match class {
        IoClass::DbRead => "db rd",
        IoClass::DbWrite => "db wr",
        IoClass::LogWrite => "log wr",
        IoClass::BdmRead => "bdm",
        IoClass::ReplicationRead => "repl",
        other => other.name(),
    }
}

fn print_summary(outcome: &RunOutcome) {
    let r = &outcome.results;
    outln!();
    outln!("{} test: {}", r.test_type.label(), r.overall_result.label());
    if let Some(why) = &r.abort_reason {
        outln!("  aborted: {why}");
    }
    if let Some(t) = &r.autotune {
        let failed = t.steps.iter().filter(|s| !s.passed).count();
        outln!(
            "  auto-tune chose {} sessions ({} step(s), {failed} not passed; the report's Auto-Tuning section says why)",
            t.chosen_threads,
            t.steps.len()
        );
        if let Some(why) = &t.why_chosen {
            outln!("    {why}");
        }
    }
    if r.test_type.is_transactional() {
        outln!("  pacing: {}", edbstress_report::text::pacing_text(r));
        // exchange2007 counts the database volumes' transfers, as Jetstress 2007 did.
        let what = if r.achieved_iops_basis.is_some() {
            "achieved I/O per second (database volume transfers)"
        } else {
            "achieved transactional IOPS"
        };
        match r.target_transactional_iops {
            Some(t) => outln!(
                "  {what}: {:.1} (target {t:.1}, headroom {:+.1} %)",
                r.achieved_transactional_iops,
                r.headroom_pct.unwrap_or(0.0)
            ),
            None => outln!(
                "  {what}: {:.1} (throughput run, no target)",
                r.achieved_transactional_iops
            ),
        }
        if let Some(t) = &r.totals.transactions {
            outln!(
                "  transactions: {:.1}/s, latency avg {:.1} ms, p99 {:.1} ms{}",
                t.per_sec,
                t.latency.avg_ms,
                t.latency.p99_ms,
                if r.parameters.open_loop {
                    " (from intended start)"
                } else {
                    ""
                }
            );
        }
    }
    outln!(
        "  {:<24} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "I/O class",
        "per sec",
        "avg KiB",
        "avg ms",
        "p99 ms",
        "max ms"
    );
    // The engine's bookkeeping (growth, headers, flushes, log creation, the checkpoint
    // file) after the measured classes, under a heading of its own.
    for bookkeeping in [false, true] {
        let mut heading = bookkeeping;
        for (class, s) in &r.totals.io {
            if s.count == 0 || class.is_bookkeeping() != bookkeeping {
                continue;
            }
            if std::mem::take(&mut heading) {
                outln!("  engine bookkeeping (not transactional I/O):");
            }
            outln!(
                "  {:<24} {:>10.1} {:>10.1} {:>10.2} {:>10.2} {:>10.2}",
                class.label(),
                s.per_sec,
                s.avg_bytes / 1024.0,
                s.avg_latency_ms,
                s.p99_ms,
                s.max_ms
            );
        }
    }
    if let Some(mb) = r.totals.mb_per_sec {
        outln!("  total throughput: {mb:.1} MiB/s");
    }
    if let Some(s) = r.totals.seconds_per_log {
        outln!("  average time to replay one log file: {s:.3} s");
    }
    if let Some(v) = &r.verification {
        outln!(
            "  checksum verification after the run: {}",
            if v.passed { "clean" } else { "FAILED" }
        );
    }
    for s in &r.sampling_stalls {
        outln!("  {}", s.describe());
    }
    for c in &r.failed_criteria {
        outln!("  FAILED: {}", c.describe());
    }
    if let Some(note) = edbstress_report::text::tuning_window_note(r) {
        outln!("  {note}");
    }
    let in_dir = |name: &str| outcome.dir.join(name).display().to_string();
    outln!(
        "  report: {}",
        in_dir(edbstress_report::run_files::REPORT_HTML)
    );
    outln!(
        "  results: {}",
        in_dir(edbstress_report::run_files::RESULTS_JSON)
    );
}
