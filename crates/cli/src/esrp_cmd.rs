//! `edbstress esrp`: the ESRP-style campaign and its document — `init` (a commented
//! solution.toml), `run` (the campaign, resumable) and `document` (solution.html,
//! solution.pdf through headless Chromium, solution.md).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use edbstress_report::solution::{SolutionDocument, check, html, markdown};
use edbstress_report::write_atomically;
use edbstress_solution::esrp::{
    self, CampaignEnd, CampaignOptions, SOLUTION_TEMPLATE, SolutionFile, load_campaign,
};

use crate::common::{CommandError, write_new_template};

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
    let doc = SolutionDocument {
        info: solution.info,
        campaigns,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        written_at: chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
    };
    let out = a.output.unwrap_or_else(|| a.campaigns[0].join("document"));
    prepare_output(&out)?;
    let page = html::render(&doc);
    let md = markdown::render(&doc);
    let need = (page.len() + md.len()) as u64 * 4;
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
    outln!("Wrote {}", html_path.display());
    outln!("Wrote {}", out.join("solution.md").display());
    match print_pdf(&html_path, &out.join("solution.pdf")) {
        Ok(()) => outln!("Wrote {}", out.join("solution.pdf").display()),
        Err(why) => eprintln!("solution.pdf was not written: {why}"),
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
        for name in ["solution.html", "solution.pdf", "solution.md"] {
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

/// Headless Chromium: `EDBSTRESS_CHROMIUM`, else the usual names on PATH.
fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("EDBSTRESS_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

/// Chromium options that keep it off the network while it prints.
const OFFLINE_CHROMIUM: [&str; 6] = [
    "--proxy-server=socks5://255.255.255.255:9",
    "--proxy-bypass-list=<-loopback>",
    "--disable-background-networking",
    "--dns-prefetch-disable",
    "--no-pings",
    "--disable-component-update",
];

/// Prints `html` to `pdf` with headless Chromium (a temporary name, then renamed).
fn print_pdf(html: &Path, pdf: &Path) -> Result<(), String> {
    let chromium = find_chromium().ok_or(
        "no Chromium was found (looked for chromium, chromium-browser, google-chrome on PATH \
         and EDBSTRESS_CHROMIUM); install it (e.g. `apt-get install chromium`) and run \
         `edbstress esrp document` again, or print solution.html from a browser",
    )?;
    let dir = pdf.parent().unwrap_or(Path::new("."));
    let profile = tempfile::Builder::new()
        .prefix(".edbstress-chromium-")
        .tempdir_in(dir)
        .map_err(|e| format!("cannot create a Chromium profile directory: {e}"))?;
    let tmp = dir.join(".edbstress-solution.pdf.tmp");
    let html = std::fs::canonicalize(html).map_err(|e| e.to_string())?;
    let page = url::Url::from_file_path(&html)
        .map_err(|()| format!("{} cannot be named as a file URL", html.display()))?;
    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--no-pdf-header-footer",
        ])
        // Printing loads nothing from the network: the page's Content-Security-Policy
        // allows only inline styles and data: images, and every request that would
        // still be made goes to a proxy that does not exist (loopback included).
        .args(OFFLINE_CHROMIUM)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--print-to-pdf={}", tmp.display()))
        .arg(page.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", chromium.display()))?;
    let started = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&tmp);
            return Err("Chromium did not finish printing within 3 minutes".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ok = std::fs::read(&tmp).is_ok_and(|b| b.starts_with(b"%PDF"));
    if !ok {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{} printed no PDF", chromium.display()));
    }
    std::fs::rename(&tmp, pdf).map_err(|e| format!("cannot rename to {}: {e}", pdf.display()))
}
