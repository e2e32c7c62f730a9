//! `edbstress sweep`: run a grid of storage and workload settings (the solution crate
//! drives it) and print what it recommends; `edbstress sweep init` writes a commented
//! sweep file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Subcommand};
use edbstress_report::sweep::best::{RULE, recommend};
use edbstress_report::sweep::{SWEEP_CSV, SWEEP_HTML};
use edbstress_solution::sweep::{self, SweepOptions, TEMPLATE};

use crate::common::{CommandError, write_new_template};

/// Arguments of `edbstress sweep`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    command: Option<SweepCommand>,
    /// The sweep file (write one with `edbstress sweep init`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The sweep directory; give an earlier sweep's directory (and the same file) to
    /// resume it [default: edbstress-results/Sweep_TIME].
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum SweepCommand {
    /// Write a commented sweep file; an existing file is never overwritten.
    Init {
        /// File to create.
        #[arg(value_name = "FILE", default_value = "sweep.toml")]
        file: PathBuf,
    },
}

/// Runs `edbstress sweep`.
pub fn run(args: SweepArgs) -> Result<ExitCode, CommandError> {
    if let Some(SweepCommand::Init { file }) = &args.command {
        return init(file);
    }
    let Some(config) = args.config else {
        return Err(CommandError::Usage(
            "no sweep file: give --config sweep.toml (`edbstress sweep init` writes one)".into(),
        ));
    };
    let output = args.output.unwrap_or_else(|| {
        PathBuf::from("edbstress-results").join(format!(
            "Sweep_{}",
            chrono::Local::now().format("%Y_%m_%d_%H_%M_%S")
        ))
    });
    let edbstress = std::env::current_exe().map_err(|e| {
        CommandError::Usage(format!(
            "cannot find this edbstress binary to run each point: {e}"
        ))
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "quitting at once: the current point's run and commands are killed; \
                     resume the sweep to redo that point"
                );
                edbstress_solution::process_group::kill_all();
                std::process::exit(130);
            }
            eprintln!(
                "\nstopping: a setup or measure command is ended, the current run writes its \
                 results, the teardown runs and the sweep files are written (Ctrl-C again to \
                 quit at once)"
            );
        })
        .map_err(|e| CommandError::Usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    }
    let options = SweepOptions {
        file: config.clone(),
        output: output.clone(),
        edbstress,
    };
    let resume = format!(
        "edbstress sweep --config {} --output {}",
        config.display(),
        output.display()
    );
    let events = |line: &str| eprintln!("{line}");
    let outcome = sweep::run(&options, &stop, &events).map_err(|e| {
        // Only a sweep that started has points to keep, and the advice is given only
        // when that command would go on from them.
        if sweep::resumable(&config, &output) {
            CommandError::Usage(format!(
                "{}\nthe finished points are kept in {}; fix the cause (in the sweep file if it is \
                 there: a sweep in which no run finished starts again with the fixed file, and \
                 a changed file keeps the finished runs of unchanged points) and resume \
                 with: {resume}",
                e.0,
                output.display()
            ))
        } else {
            CommandError::Usage(e.0)
        }
    })?;
    let s = &outcome.results;
    let done = s.runs.iter().filter(|r| r.status == "done").count();
    outln!();
    outln!(
        "sweep {}: {done} of {} runs finished{}",
        s.name,
        s.runs.len(),
        if outcome.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    outln!("  rule: {RULE}");
    for line in recommend(s).describe(s) {
        outln!("  {line}");
    }
    outln!("  charts: {}", outcome.dir.join(SWEEP_HTML).display());
    outln!("  table:  {}", outcome.dir.join(SWEEP_CSV).display());
    if outcome.interrupted {
        outln!("  resume with: {resume}");
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

fn init(path: &Path) -> Result<ExitCode, CommandError> {
    write_new_template(path, TEMPLATE, "edbstress sweep init my-sweep.toml")?;
    outln!(
        "wrote {}; edit it, then run `edbstress sweep --config {0}`",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
