//! `edbstress config`: write a configuration template, or show the configuration a run
//! would use.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use edbstress_workload::config::config_template;

use crate::common::{CommandError, write_new_template};
use crate::run_args::RunArgs;

/// Arguments of `edbstress config`.
#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Write a commented configuration file with every key, what it means and its default.
    Init {
        /// File to create; an existing file is never overwritten.
        #[arg(value_name = "FILE", default_value = "edbstress.toml")]
        file: PathBuf,
    },
    /// Print the configuration a run with these options would use, as TOML.
    #[command(allow_negative_numbers = true)]
    Show(Box<RunArgs>),
}

/// Runs `edbstress config`.
pub fn run(args: ConfigArgs) -> Result<ExitCode, CommandError> {
    match args.command {
        ConfigCommand::Init { file } => init(&file),
        ConfigCommand::Show(run_args) => {
            out!("{}", run_args.resolve()?.to_toml());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init(path: &Path) -> Result<ExitCode, CommandError> {
    write_new_template(
        path,
        &config_template(),
        "edbstress config init my-run.toml",
    )?;
    outln!(
        "wrote {}; edit it, check it with `edbstress config show --config {0}`",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
