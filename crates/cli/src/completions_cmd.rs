//! `edbstress completions SHELL`: prints the shell completion script for bash, zsh,
//! fish, elvish or PowerShell (the Debian package installs the bash, zsh and fish ones).

use std::process::ExitCode;

use clap::Args;
use clap_complete::Shell;

use crate::common::CommandError;

/// Arguments of `edbstress completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

/// Writes the completion script of `command` for the shell on standard output.
pub fn run(args: CompletionsArgs, mut command: clap::Command) -> Result<ExitCode, CommandError> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "edbstress", &mut script);
    crate::stdout::write_all(&script);
    Ok(ExitCode::SUCCESS)
}
