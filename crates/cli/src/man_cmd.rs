//! `edbstress man`: the manual pages, from the same definitions as `--help`. Without
//! `--output` it prints `edbstress(1)`; with `--output DIR` it writes it and one page
//! per command (`edbstress-run.1`, ...) there, for packaging or `MANPATH`. Each page
//! has a synopsis with the options' values, and EXIT STATUS and EXAMPLES sections.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::common::CommandError;
use crate::man_sections;

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

/// clap_mangen's page of `command` with a synopsis that shows the values, and EXIT
/// STATUS and EXAMPLES sections before VERSION (the top page's examples, clap's "EXTRA"
/// section, are our EXAMPLES there).
fn render(command: &clap::Command, out: &mut Vec<u8>) -> Result<(), CommandError> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone())
        .source(format!("edbstress {}", env!("CARGO_PKG_VERSION")))
        .manual("edbstress manual")
        .render(&mut page)
        .map_err(|e| CommandError::Usage(format!("cannot render the manual page: {e}")))?;
    let page = String::from_utf8_lossy(&page);
    let name = command
        .get_display_name()
        .unwrap_or_else(|| command.get_name());
    let mut sections = split_sections(&page);
    let synopsis = man_sections::body(&man_sections::synopsis(command));
    for (heading, text) in &mut sections {
        if heading == "SYNOPSIS" {
            *text = synopsis.clone();
        }
    }
    sections.retain(|(heading, _)| heading != "EXTRA");
    let at = sections
        .iter()
        .position(|(heading, _)| heading == "VERSION")
        .unwrap_or(sections.len());
    sections.insert(
        at,
        (
            "EXIT STATUS".into(),
            man_sections::body(&man_sections::exit_status_and_examples(name)),
        ),
    );
    for (_, text) in sections {
        out.extend_from_slice(text.as_bytes());
    }
    Ok(())
}

/// The page cut before each `.SH`: (heading, text from the `.SH` line on); the title
/// lines before the first section have an empty heading.
fn split_sections(page: &str) -> Vec<(String, String)> {
    let mut sections = vec![(String::new(), String::new())];
    for line in page.split_inclusive('\n') {
        if let Some(heading) = line.strip_prefix(".SH ") {
            sections.push((heading.trim().trim_matches('"').to_string(), String::new()));
        }
        if let Some((_, text)) = sections.last_mut() {
            text.push_str(line);
        }
    }
    sections
}
