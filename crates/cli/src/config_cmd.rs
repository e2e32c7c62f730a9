//! `edbstress config`: write a configuration template, or show the configuration a run
//! would use.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use edbstress_workload::config::config_template;

use crate::common::CommandError;
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
            print!("{}", run_args.resolve()?.to_toml());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn init(path: &Path) -> Result<ExitCode, CommandError> {
    // create_new: refusing an existing file is atomic, not a check that could race.
    let mut file = match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Err(CommandError::Usage(format!(
                "{} already exists and is left as it is; remove it or name another file, e.g. `edbstress config init my-run.toml`",
                path.display()
            )));
        }
        Err(e) => {
            return Err(CommandError::Usage(format!(
                "cannot create {}: {e}",
                path.display()
            )));
        }
    };
    if let Err(e) = file.write_all(config_template().as_bytes()) {
        // The file is ours and incomplete: remove it rather than leave half a template.
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(CommandError::Usage(format!(
            "cannot write {}: {e}",
            path.display()
        )));
    }
    println!(
        "wrote {}; edit it, check it with `edbstress config show --config {0}`",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
