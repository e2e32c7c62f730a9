//! `edbstress man`: the manual pages, from the same definitions as `--help`. Without
//! `--output` it prints `edbstress(1)`; with `--output DIR` it writes it and one page
//! per command (`edbstress-run.1`, ...) there, for packaging or `MANPATH`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::common::CommandError;

/// Arguments of `edbstress man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory to write every page into (created if missing); pages edbstress wrote
    /// before are replaced, other files are never overwritten.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

/// Prints or writes the manual pages of `command`.
pub fn run(args: ManArgs, command: clap::Command) -> Result<ExitCode, CommandError> {
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let Some(dir) = args.output else {
        let mut out = Vec::new();
        render(&command, &mut out)?;
        crate::stdout::write_all(&out);
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(&dir).map_err(|e| {
        CommandError::Usage(format!(
            "cannot create {} for --output: {e}; give a directory you can write",
            dir.display()
        ))
    })?;
    let mut written = Vec::new();
    write_pages(&command, &dir, &mut written)?;
    for path in &written {
        outln!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `command` and of each visible subcommand, named
/// `edbstress-run.1` and so on.
fn write_pages(
    command: &clap::Command,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), CommandError> {
    // After `build`, clap names subcommands "edbstress-run", as man pages are named.
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name())
        .to_string();
    let mut roff = Vec::new();
    render(command, &mut roff)?;
    let path = dir.join(format!("{name}.1"));
    if let Ok(existing) = std::fs::read(&path) {
        let ours = String::from_utf8_lossy(&existing).contains(&format!(".TH {name} 1"));
        if !ours {
            return Err(CommandError::Usage(format!(
                "{} exists and is not a page edbstress wrote; give an empty --output directory",
                path.display()
            )));
        }
    }
    edbstress_report::write_atomically(&path, &roff)
        .map_err(|e| CommandError::Usage(format!("{e}; give a directory you can write")))?;
    written.push(path);
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, written)?;
    }
    Ok(())
}

fn render(command: &clap::Command, out: &mut Vec<u8>) -> Result<(), CommandError> {
    clap_mangen::Man::new(command.clone())
        .source(format!("edbstress {}", env!("CARGO_PKG_VERSION")))
        .manual("edbstress manual")
        .render(out)
        .map_err(|e| CommandError::Usage(format!("cannot render the manual page: {e}")))
}
