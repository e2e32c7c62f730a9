//! `edbstress recover`: soft recovery of instances that were not shut down cleanly.

use std::process::ExitCode;

use clap::Args;
use edbstress_engine::InstanceId;
use edbstress_engine::InstanceLayout;
use edbstress_engine::LockMode;
use edbstress_engine::LogDirLock;
use edbstress_engine::{RecoveryOptions, RecoveryReport, recover};

use crate::common::{CommandError, TargetArgs, instances_on_disk};
use crate::units::parse_size;

/// Arguments of `edbstress recover`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// Database cache used for replay, e.g. 256MiB.
    #[arg(long, default_value = "256MiB", value_parser = parse_size, allow_hyphen_values = true)]
    cache: u64,
    #[command(flatten)]
    target: TargetArgs,
}

/// Runs `edbstress recover`.
pub fn run(args: RecoverArgs) -> Result<ExitCode, CommandError> {
    let layouts: Vec<InstanceLayout> = instances_on_disk(&args.target.paths)?;
    let options = RecoveryOptions {
        io_mode: args.target.io.mode(),
        backend: args.target.io.backend,
        cache_bytes: args.cache,
    };
    let mut reports = Vec::new();
    // Damage found while recovering (a damaged or lost log, a log of another
    // database) is the verdict about that instance, not a usage error: the other
    // instances are still recovered, and the command fails with exit code 1.
    let mut refused = Vec::new();
    for layout in &layouts {
        // Its log directory too, whichever database path a process using it was given.
        let _log_lock = LogDirLock::acquire_if_exists(&layout.log_dir, LockMode::Exclusive)?;
        match recover(layout, &options) {
            Ok(report) => reports.push(report),
            Err(e) if e.is_integrity() => refused.push(Refused {
                instance: layout.instance,
                db_file: layout.db_file.display().to_string(),
                log_dir: layout.log_dir.display().to_string(),
                error: e.to_string(),
            }),
            Err(e) => return Err(e.into()),
        }
    }
    let ok = refused.is_empty() && reports.iter().all(RecoveryReport::succeeded);
    if args.target.json {
        let doc = serde_json::json!({
            "result": if ok { "pass" } else { "fail" },
            "instances": reports,
            "refused": refused,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_text(&reports);
        for r in &refused {
            outln!(
                "{:<9} {:<40} RECOVERY REFUSED: {}",
                r.instance,
                r.db_file,
                r.error
            );
        }
        if !refused.is_empty() {
            eprintln!(
                "error: {} instance(s) could not be recovered; the database stays marked as needing recovery",
                refused.len()
            );
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// An instance whose recovery was refused because of what its files hold.
#[derive(serde::Serialize)]
struct Refused {
    instance: InstanceId,
    db_file: String,
    log_dir: String,
    error: String,
}

fn print_text(reports: &[RecoveryReport]) {
    outln!(
        "{:<9} {:<40} {:>11} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8}",
        "Instance",
        "Database",
        "Generations",
        "Records",
        "Redone",
        "Skipped",
        "Committed",
        "Rolled bk",
        "Seconds"
    );
    for r in reports {
        if r.was_clean {
            outln!(
                "{:<9} {:<40} clean shutdown: nothing to recover",
                r.instance,
                r.db_file.display()
            );
            continue;
        }
        outln!(
            "{:<9} {:<40} {:>11} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8.2}",
            r.instance,
            r.db_file.display(),
            r.generations_replayed,
            r.records,
            r.redone,
            r.skipped,
            r.transactions_committed,
            r.transactions_rolled_back,
            r.seconds
        );
        outln!(
            "          replayed log {} .. {}, {} pages read ahead",
            r.start,
            r.end,
            r.pages_prefetched
        );
        if !r.pages_restored.is_empty() {
            let pages: Vec<String> = r.pages_restored.iter().map(ToString::to_string).collect();
            outln!(
                "          {} torn page(s) rebuilt from their logged images: {}",
                pages.len(),
                pages.join(", ")
            );
        }
        if r.pages_rebuilt_whole > 0 {
            outln!(
                "          {} page(s) that verified but were not their logged image rebuilt from it (a checksum cannot prove a page whole)",
                r.pages_rebuilt_whole
            );
        }
        for lost in &r.lost_flushes {
            outln!(
                "          LOST FLUSH: page {} has dbtime {}, the log at {} expects {} — the storage lost an acknowledged write",
                lost.pgno,
                lost.page_dbtime,
                lost.position,
                lost.expected_dbtime
            );
        }
    }
}
