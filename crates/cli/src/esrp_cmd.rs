//! `edbstress esrp`: the ESRP-style campaign and its document — `init` (a commented
//! solution.toml), `run` (the campaign, resumable) and `document` (solution.html,
//! solution.pdf through headless Chromium, solution.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Subcommand};
use edbstress_report::solution::{SolutionDocument, check, html, markdown};
use edbstress_report::write_atomically;
use edbstress_solution::esrp::{
    self, CampaignEnd, CampaignOptions, SOLUTION_TEMPLATE, SolutionFile, load_campaign,
};

use crate::common::{CommandError, write_new_template};
use crate::esrp_print;

/// Marks an output directory whose document files edbstress wrote (and may replace).
const DOCUMENT_MARKER: &str = ".edbstress-document";

/// Arguments of `edbstress esrp`.
#[derive(Args, Debug)]
pub struct EsrpArgs {
    #[command(subcommand)]
    command: EsrpCommand,
}

#[derive(Subcommand, Debug)]
enum EsrpCommand {
    /// Write a commented solution.toml (texts, customer profile, deployment, campaign).
    Init(InitArgs),
    /// Run the campaign: Stress (with checksums), Performance, DatabaseBackup,
    /// SoftRecovery; run it again to resume after an interruption.
    Run(RunArgs),
    /// Write the solution document (HTML, PDF, Markdown) from campaign directories.
    Document(DocumentArgs),
}

#[derive(Args, Debug)]
struct InitArgs {
    /// The file to write [default: solution.toml]; an existing file is left alone.
    path: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The solution file (`edbstress esrp init` writes one).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The campaign directory: created, or resumed when it holds a campaign
    /// [default: edbstress-results/esrp-campaign, or esrp-rehearsal with --rehearsal].
    #[arg(long, value_name = "DIR")]
    campaign: Option<PathBuf>,
    /// Shortened steps ([campaign.rehearsal]) to check the set-up; its document says so
    /// on every page.
    #[arg(long)]
    rehearsal: bool,
}

#[derive(Args, Debug)]
struct DocumentArgs {
    /// Campaign directories (one per server, or one campaign of several servers).
    #[arg(value_name = "CAMPAIGN_DIR", required = true)]
    campaigns: Vec<PathBuf>,
    /// The solution file.
    #[arg(long, value_name = "FILE")]
    solution: PathBuf,
    /// Where to write solution.html, solution.pdf and solution.md
    /// [default: the first campaign's document/].
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
}

/// Runs `edbstress esrp`.
pub fn run(args: EsrpArgs) -> Result<ExitCode, CommandError> {
    match args.command {
        EsrpCommand::Init(a) => init(a),
        EsrpCommand::Run(a) => run_campaign(a),
        EsrpCommand::Document(a) => document(a),
    }
}

fn init(a: InitArgs) -> Result<ExitCode, CommandError> {
    let path = a.path.unwrap_or_else(|| PathBuf::from("solution.toml"));
    write_new_template(
        &path,
        SOLUTION_TEMPLATE,
        "edbstress esrp init my-solution.toml",
    )?;
    outln!(
        "Wrote {}: fill in the texts, the profile, the deployment and the [campaign] paths, \
         then `edbstress esrp run --config {} --rehearsal`.",
        path.display(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn run_campaign(a: RunArgs) -> Result<ExitCode, CommandError> {
    let solution = SolutionFile::load(&a.config).map_err(|e| CommandError::Usage(e.to_string()))?;
    let dir = a.campaign.unwrap_or_else(|| {
        PathBuf::from("edbstress-results").join(if a.rehearsal {
            "esrp-rehearsal"
        } else {
            "esrp-campaign"
        })
    });
    let edbstress = std::env::current_exe().map_err(|e| {
        CommandError::Usage(format!("cannot find the edbstress binary itself: {e}"))
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || {
            if stop.swap(true, Ordering::SeqCst) {
                eprintln!(
                    "quitting now: the step's run is killed; run the campaign again to resume \
                     it (it recovers the databases first)"
                );
                edbstress_solution::process_group::kill_all();
                std::process::exit(130);
            }
        })
        .map_err(|e| CommandError::Usage(format!("cannot install the Ctrl-C handler: {e}")))?;
    }
    let options = CampaignOptions {
        solution,
        dir: dir.clone(),
        rehearsal: a.rehearsal,
        edbstress,
    };
    let log = |line: &str| eprintln!("[esrp] {line}");
    match esrp::run(&options, &stop, &log).map_err(|e| CommandError::Usage(e.0))? {
        CampaignEnd::Finished(state) => {
            for s in &state.steps {
                outln!(
                    "{:<16} {}",
                    s.test.label(),
                    s.verdict.map_or("—", |v| v.label())
                );
            }
            outln!(
                "Campaign directory: {}\nNext: edbstress esrp document {} --solution {}",
                dir.display(),
                dir.display(),
                a.config.display()
            );
            let all_passed = state
                .steps
                .iter()
                .all(|s| s.verdict == Some(edbstress_report::Verdict::Pass));
            Ok(ExitCode::from(if all_passed { 0 } else { 1 }))
        }
        CampaignEnd::Interrupted => {
            eprintln!(
                "The campaign stopped; run the same command again to resume it (finished steps are kept)."
            );
            Ok(ExitCode::from(130))
        }
    }
}

fn document(a: DocumentArgs) -> Result<ExitCode, CommandError> {
    let solution =
        SolutionFile::load(&a.solution).map_err(|e| CommandError::Usage(e.to_string()))?;
    let campaigns = a
        .campaigns
        .iter()
        .map(|d| load_campaign(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CommandError::Usage(e.to_string()))?;
    let mut doc = SolutionDocument {
        info: solution.info,
        campaigns,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        written_at: chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        test_logs: Default::default(),
        vendor_names: esrp_print::vendor_names(),
        pages: Default::default(),
    };
    doc.test_logs = esrp_print::test_logs(&doc);
    let out = a.output.unwrap_or_else(|| a.campaigns[0].join("document"));
    prepare_output(&out)?;
    let page = html::render(&doc);
    let md = markdown::render(&doc);
    let need = (page.len() + md.len()) as u64 * 8;
    if let Ok(free) = edbstress_io::available_space(&out)
        && free < need
    {
        return Err(CommandError::Usage(format!(
            "{} has {free} bytes free; the document needs about {need}; free some space or give another --output",
            out.display()
        )));
    }
    let html_path = out.join("solution.html");
    let write = |p: &Path, bytes: &[u8]| {
        write_atomically(p, bytes)
            .map_err(|e| CommandError::Usage(format!("cannot write {}: {e}", p.display())))
    };
    write(&html_path, page.as_bytes())?;
    write(&out.join("solution.md"), md.as_bytes())?;
    match esrp_print::print_numbered(&mut doc, &html_path, &out.join("solution.pdf")) {
        Ok(note) => {
            outln!("Wrote {}", html_path.display());
            outln!("Wrote {}", out.join("solution.md").display());
            outln!("Wrote {}{note}", out.join("solution.pdf").display());
        }
        Err(why) => {
            outln!("Wrote {}", html_path.display());
            outln!("Wrote {}", out.join("solution.md").display());
            eprintln!("solution.pdf was not written: {why}");
        }
    }
    for line in esrp_print::editable_formats(&doc, &out) {
        match line {
            Ok(path) => outln!("Wrote {}", path.display()),
            Err(why) => eprintln!("{why}"),
        }
    }
    let findings = check(&doc);
    if findings.is_empty() {
        outln!(
            "The campaign meets the ESRP test rules: every step of every campaign ran on each of \
             its {} server(s), each run carries its campaign's id and passed, and the profile \
             the runs ran is the one solution.toml states.",
            doc.campaign_hosts().len()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        outln!(
            "The document is marked as not meeting the ESRP test rules ({} finding(s)):",
            findings.len()
        );
        for f in &findings {
            outln!("  - {}", f.0);
        }
        Ok(ExitCode::from(1))
    }
}

/// Creates the output directory, or checks that the document files in it are ours.
fn prepare_output(out: &Path) -> Result<(), CommandError> {
    let ours = out.join(DOCUMENT_MARKER).exists();
    if !ours {
        for name in [
            "solution.html",
            "solution.pdf",
            "solution.md",
            "solution.odt",
            "solution.docx",
        ] {
            if out.join(name).exists() {
                return Err(CommandError::Usage(format!(
                    "{} exists and was not written by `edbstress esrp document`; it is left \
                     alone: give another --output directory",
                    out.join(name).display()
                )));
            }
        }
    }
    std::fs::create_dir_all(out)
        .map_err(|e| CommandError::Usage(format!("cannot create {}: {e}", out.display())))?;
    if !ours {
        std::fs::write(out.join(DOCUMENT_MARKER), b"edbstress esrp document\n")
            .map_err(|e| CommandError::Usage(format!("cannot write in {}: {e}", out.display())))?;
    }
    Ok(())
}
