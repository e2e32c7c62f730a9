//! `edbstress check`: deep consistency check of the B+trees of offline databases.

use std::process::ExitCode;

use clap::Args;
use edbstress_engine::{CheckReport, deep_check};

use crate::common::{CommandError, TargetArgs, instances_on_disk};

/// Arguments of `edbstress check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    target: TargetArgs,
}

/// Runs `edbstress check`.
pub fn run(args: CheckArgs) -> Result<ExitCode, CommandError> {
    let mut reports: Vec<CheckReport> = Vec::new();
    for layout in instances_on_disk(&args.target.paths)? {
        reports.push(
            deep_check(&layout.db_file, args.target.io.mode()).map_err(CommandError::engine)?,
        );
    }
    let ok = reports.iter().all(CheckReport::is_clean);
    if args.target.json {
        let doc =
            serde_json::json!({ "result": if ok { "pass" } else { "fail" }, "databases": reports });
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!(
            "{:<40} {:>7} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>9}",
            "Database",
            "Pages",
            "Messages",
            "LV chunks",
            "View ents",
            "Depth",
            "LV dep",
            "View dep",
            "Problems"
        );
        for r in &reports {
            outln!(
                "{:<40} {:>7} {:>10} {:>10} {:>10} {:>7} {:>7} {:>7} {:>9}",
                r.path.display(),
                r.pages_visited,
                r.messages,
                r.long_value_chunks,
                r.view_entries,
                r.table_depth,
                r.long_value_depth,
                r.view_index_depth,
                r.problem_count
            );
            for p in &r.problems {
                outln!("  {p}");
            }
        }
        outln!();
        outln!("Result: {}", if ok { "PASS" } else { "FAIL" });
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
