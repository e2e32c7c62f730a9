//! `edbstress esrp`: a rehearsal campaign on one small database, interrupted with
//! SIGINT during its Performance step and run again (the Stress step is kept, the
//! Performance step redone), then its document: the summary tables carry the runs'
//! own numbers from results.json, the rehearsal is marked, the HTML renders in
//! headless Chromium and the PDF holds every section.

use crate::suite::common;
mod document_evidence;
mod document_print;
use common::chromium::{chromium_or_skip, decode_png, dump_dom, screenshot};
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edbstress_io::IoClass;
use edbstress_report::{RunResults, read_results};

/// A solution file for a tiny rehearsal: one database of 32 MiB, 3-second Stress and
/// Performance, 4 logs to replay, loose latency limits, and a growth budget that ends
/// the Stress step's auto-tuning at its first step (tuning is not what these test).
fn write_solution(root: &Path) -> PathBuf {
    fs::create_dir_all(root.join("db")).unwrap();
    fs::create_dir_all(root.join("logs")).unwrap();
    write_loose_limits(root);
    fs::write(
        root.join("features.md"),
        "- Mirrored write cache\n- Snapshots every hour\n",
    )
    .unwrap();
    let text = format!(
        r#"[solution]
name = "Test Array 100"
vendor = "Example Storage"
contact = "esrp@example.invalid"
features = "features.md"
description = "One server on a test array."
best_practices = "Keep logs apart from databases."
backup_strategy = "Snapshots."
conclusion = "The rehearsal ran."
[profile]
mailboxes = 100
iops_per_mailbox = 0.4
mailbox_quota = "100MB"
servers = 1
databases_per_server = 1
copies = 1
version = "exchange2013"
[deployment]
storage_model = "Test Array 100"
raid = "RAID-1"
[campaign]
db_paths = ["{db}"]
log_paths = ["{logs}"]
run_config = "margin.toml"
run_options = ["--database-size", "32MiB", "--cache-max", "8MiB", "--cache-min", "4MiB", "--sample-interval", "1s", "--buffered", "--auto-tune-growth", "1MiB"]
[campaign.rehearsal]
stress = "3s"
performance = "3s"
logs_to_replay = 4
"#,
        db = root.join("db").display(),
        logs = root.join("logs").display()
    );
    let path = root.join("solution.toml");
    fs::write(&path, text).unwrap();
    path
}

/// `esrp run` of the rehearsal campaign `solution` into `campaign`.
fn rehearsal_args(solution: &Path, campaign: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["esrp", "run", "--config"].map(String::from).to_vec();
    args.push(solution.display().to_string());
    args.extend(["--rehearsal".into(), "--campaign".into()]);
    args.push(campaign.display().to_string());
    args
}

/// `esrp document` of `campaign` with `solution`, written into `doc`.
fn document_args(campaign: &Path, solution: &Path, doc: &Path) -> Vec<String> {
    [
        "esrp",
        "document",
        &campaign.display().to_string(),
        "--solution",
        &solution.display().to_string(),
        "--output",
        &doc.display().to_string(),
    ]
    .map(String::from)
    .to_vec()
}

fn state(campaign: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(campaign.join("campaign.json")).unwrap()).unwrap()
}

fn step_run(campaign: &Path, step: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = fs::read_dir(campaign.join(step))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 1, "{step} holds one run directory: {dirs:?}");
    dirs.pop().unwrap()
}

fn run_results(dir: &Path) -> RunResults {
    read_results(&fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// The value cell of the Markdown row whose cells include `name`, for `server`'s table
/// (rows follow "Server NAME:").
fn md_value(md: &str, after: &str, name: &str) -> String {
    let start = md
        .find(after)
        .unwrap_or_else(|| panic!("{after} not in:\n{md}"));
    let line = md[start..]
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no row {name} after {after}"));
    line.trim_matches('|')
        .split('|')
        .map(str::trim)
        .next_back()
        .unwrap()
        .to_string()
}

/// The first attempt of the campaign, stopped with SIGINT once its Performance run is
/// under way: the Stress step is done, the Performance step running. Returns the
/// Stress run's directory and its results.json.
fn interrupt_during_performance(
    root: &Path,
    args: &[String],
    campaign: &Path,
) -> (PathBuf, Vec<u8>) {
    // First attempt: stopped with SIGINT once the Performance run is under way.
    let mut child = command(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            Instant::now() < deadline,
            "the Performance step never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the campaign ended before it was interrupted: {}",
            text(&child.wait_with_output().unwrap())
        );
        let perf = campaign.join("02-Performance");
        let running = perf.is_dir()
            && fs::read_dir(&perf)
                .unwrap()
                .flatten()
                .any(|e| e.path().join("test.log").is_file());
        if running {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 130, "an interrupted campaign");
    let s = state(campaign);
    assert_eq!(s["rehearsal"], true);
    assert_eq!(s["steps"][0]["test"], "stress");
    assert_eq!(s["steps"][0]["status"], "done", "{s:#}");
    assert_eq!(s["steps"][1]["status"], "running", "{s:#}");
    assert_eq!(s["steps"][2]["status"], "pending", "{s:#}");
    let stress_run = step_run(campaign, "01-Stress");
    let stress_bytes = fs::read(stress_run.join("results.json")).unwrap();
    (stress_run, stress_bytes)
}

/// The second attempt: the Stress step is kept untouched, the Performance step redone,
/// the interrupted attempt kept aside. Returns the campaign's state.
fn resume_keeps_stress_and_redoes_performance(
    root: &Path,
    args: &[String],
    campaign: &Path,
    (stress_run, stress_bytes): (&Path, &[u8]),
) -> serde_json::Value {
    // Second attempt: the Stress step is kept, the Performance step redone.
    let out = command(root).args(args).output().unwrap();
    assert_exit(&out, 0, "the resumed campaign (every step passes)");
    let s = state(campaign);
    for (i, step) in s["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(step["status"], "done", "step {i}: {s:#}");
        assert_eq!(step["verdict"], "Pass", "step {i}: {s:#}");
    }
    assert_eq!(s["steps"][0]["attempts"], 1, "Stress ran once");
    assert_eq!(s["steps"][1]["attempts"], 2, "Performance was redone");
    assert_eq!(step_run(campaign, "01-Stress"), stress_run);
    assert_eq!(
        fs::read(stress_run.join("results.json")).unwrap(),
        stress_bytes,
        "the finished Stress run was not touched"
    );
    let kept = campaign.join("interrupted/02-Performance-attempt1");
    assert!(kept.is_dir(), "the interrupted attempt is kept");
    let log = fs::read_to_string(campaign.join("campaign.log")).unwrap();
    assert!(
        log.contains("Step Stress is done (Pass); keeping it"),
        "{log}"
    );
    assert!(log.contains("Step Performance was interrupted"), "{log}");
    s
}

/// The campaign's four runs, as the document must quote them.
struct Runs {
    stress: RunResults,
    perf: RunResults,
    backup: RunResults,
    recovery: RunResults,
}

/// The runs of the campaign: Stress verifies, Performance does not, the rehearsal's
/// lengths and log count, and a clean kernel log for every one.
fn the_runs_of_the_campaign(campaign: &Path, stress_run: &Path, s: &serde_json::Value) -> Runs {
    // The runs, as the document must quote them.
    let stress = run_results(stress_run);
    assert!(stress.verification.is_some(), "Stress verifies checksums");
    let perf = run_results(&step_run(campaign, "02-Performance"));
    assert!(
        perf.verification.is_none(),
        "Performance leaves it to Stress"
    );
    assert!(
        (perf.measured_seconds - 3.0).abs() < 1.5,
        "rehearsal length"
    );
    let backup = run_results(&step_run(campaign, "03-DatabaseBackup"));
    let recovery = run_results(&step_run(campaign, "04-SoftRecovery"));
    assert_eq!(
        s["steps"][3]["logs_to_replay"], 4,
        "the rehearsal's log count"
    );
    assert!(
        recovery.instances[0]
            .logs_generated
            .is_some_and(|n| (4..=6).contains(&n)),
        "about 4 logs: {:?}",
        recovery.instances[0].logs_generated
    );
    for r in [&stress, &perf, &backup, &recovery] {
        let k = r
            .kernel_log
            .as_ref()
            .expect("every run watches the kernel log");
        assert!(k.events.is_empty(), "{k:?}");
    }
    Runs {
        stress,
        perf,
        backup,
        recovery,
    }
}

/// `esrp document` of the campaign into `root/doc`: its tables carry the runs' own
/// numbers. Returns the document's directory, Markdown and HTML.
fn the_document_quotes_the_runs(
    root: &Path,
    campaign: &Path,
    solution: &Path,
    runs: &Runs,
) -> (PathBuf, String, String) {
    // The document.
    let doc = root.join("doc");
    let out = command(root)
        .args(document_args(campaign, solution, &doc))
        .output()
        .unwrap();
    assert_exit(&out, 1, "a rehearsal's document does not meet the rules");
    assert!(text(&out).contains("rehearsal"), "{}", text(&out));
    let md = fs::read_to_string(doc.join("solution.md")).unwrap();
    let html = fs::read_to_string(doc.join("solution.html")).unwrap();
    let io = |r: &RunResults, c: IoClass| r.totals.io.get(&c).cloned().unwrap_or_default();
    let Runs {
        perf,
        backup,
        recovery,
        ..
    } = runs;
    let host = &perf.host.hostname;
    let table = format!("Server {host}:");
    for (name, value) in [
        (
            "Database Disks Transfers/sec",
            perf.achieved_transactional_iops,
        ),
        (
            "Database Disks Reads/sec",
            io(perf, IoClass::DbRead).per_sec,
        ),
        (
            "Average Database Disk Read Latency (ms)",
            io(perf, IoClass::DbRead).avg_latency_ms,
        ),
        (
            "Average Database Disk Write Latency (ms)",
            io(perf, IoClass::DbWrite).avg_latency_ms,
        ),
        ("Log Disks Writes/sec", io(perf, IoClass::LogWrite).per_sec),
        (
            "Average Log Disk Write Latency (ms)",
            io(perf, IoClass::LogWrite).avg_latency_ms,
        ),
    ] {
        assert!(value > 0.0, "{name} was measured");
        assert_eq!(md_value(&md, &table, name), format!("{value:.3}"), "{name}");
        assert!(html.contains(&format!("{value:.3}")), "{name} in the HTML");
    }
    let backup_total = backup.totals.mb_per_sec.expect("backup MB/s");
    let backup_db = backup.instances[0].mb_per_sec.expect("per database");
    let per_log = recovery.totals.seconds_per_log.expect("seconds per log");
    let backup_row = md
        .lines()
        .find(|l| l.starts_with(&format!("| {host} |")) && l.matches('|').count() == 4)
        .unwrap_or_else(|| panic!("no backup row in\n{md}"));
    assert!(
        backup_row.contains(&format!("{backup_db:.3}")),
        "{backup_row}"
    );
    assert!(
        backup_row.contains(&format!("{backup_total:.3}")),
        "{backup_row}"
    );
    let recovery_row = md
        .lines()
        .find(|l| l.starts_with(&format!("| {host} |")) && l.matches('|').count() == 3)
        .unwrap_or_else(|| panic!("no recovery row in\n{md}"));
    assert!(
        recovery_row.contains(&format!("{per_log:.3}")),
        "{recovery_row}"
    );
    for t in [&md, &html] {
        assert!(t.contains(&format!("{backup_total:.3}")));
        assert!(t.contains(&format!("{per_log:.3}")));
    }
    (doc, md, html)
}

/// The rehearsal is marked before every section of the Markdown, on every printed page
/// of the HTML (the page margin) and in its title page and findings; the reliability
/// paragraph comes from the runs.
fn the_document_marks_the_rehearsal(md: &str, html: &str, runs: &Runs) {
    // of the HTML (the page margin) and in its title page and findings.
    let mark = "REHEARSAL — shortened runs: not a result under the ESRP test rules";
    let sections = md.lines().filter(|l| l.starts_with("## ")).count();
    assert!(sections >= 16, "{sections} sections");
    assert!(md.matches(mark).count() >= sections - 1, "{md}");
    assert!(html.contains("@top-center{content:\"REHEARSAL"));
    assert!(html.contains("does not meet the ESRP test rules"));
    assert!(html.contains("this is a rehearsal campaign"));
    // The reliability paragraph comes from the runs: the kernel log, the checksums.
    let pages: u64 = runs
        .stress
        .verification
        .as_ref()
        .unwrap()
        .databases
        .iter()
        .map(|d| d.pages_seen)
        .sum();
    assert!(md.contains(&format!("read {pages} database pages")), "{md}");
    assert!(
        md.contains("it reported no error, reset or timeout"),
        "{md}"
    );
    assert!(
        md.contains("- Mirrored write cache"),
        "features.md was read"
    );
}

/// What a person sees: the HTML rendered by headless Chromium, and the PDF.
fn the_rendered_document_and_pdf_hold_every_section(root: &Path, doc: &Path) {
    let Some(chromium) = chromium_or_skip("the solution document") else {
        return;
    };
    let dom = dump_dom(&chromium, &doc.join("solution.html"), &root.join("profile"));
    for heading in [
        "Targeted Customer Profile",
        "Simulated Exchange Configuration",
        "Test Result Summary",
        "Individual Server Metrics",
        "Database Backup/Recovery Performance",
        "Appendix A: Stress Testing",
        "Appendix E: Database Checksum",
        "Checksum Statistics - All",
    ] {
        assert!(dom.contains(heading), "{heading} not in the rendered page");
    }
    let png = root.join("solution.png");
    screenshot(&chromium, &doc.join("solution.html"), &png, 1000, 1400);
    let (w, h, pixels) = decode_png(&png);
    assert_eq!((w, h), (1000, 1400));
    let dark = pixels.iter().filter(|p| p.iter().all(|c| *c < 100)).count();
    assert!(
        dark > 2000,
        "the title page shows text ({dark} dark pixels)"
    );
    let pdf = fs::read(doc.join("solution.pdf")).expect("solution.pdf with Chromium present");
    assert!(pdf.starts_with(b"%PDF"));
    match Command::new("pdftotext")
        .arg(doc.join("solution.pdf"))
        .arg("-")
        .output()
    {
        Ok(out) if out.status.success() => {
            let t = String::from_utf8_lossy(&out.stdout);
            for section in [
                "Overview",
                "Disclaimer",
                "Features",
                "Solution Description",
                "Targeted Customer Profile",
                "Tested Deployment",
                "Best Practices",
                "Backup Strategy",
                "Contact",
                "Test Result Summary",
                "Conclusion",
                "Appendix A",
                "Appendix B",
                "Appendix C",
                "Appendix D",
                "Appendix E",
            ] {
                assert!(t.contains(section), "{section} not in solution.pdf");
            }
            assert!(t.contains("REHEARSAL"));
        }
        _ => eprintln!(
            "\n!!! SKIPPED: pdftotext (poppler-utils) is not installed; the PDF's text was not checked\n"
        ),
    }
}

#[test]
fn a_rehearsal_campaign_resumes_after_an_interruption_and_documents_its_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let solution = write_solution(root);
    let campaign = root.join("campaign");
    let args = rehearsal_args(&solution, &campaign);
    let started = Instant::now();
    let (stress_run, stress_bytes) = interrupt_during_performance(root, &args, &campaign);
    let s = resume_keeps_stress_and_redoes_performance(
        root,
        &args,
        &campaign,
        (&stress_run, &stress_bytes),
    );
    eprintln!(
        "campaign with one interruption: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let runs = the_runs_of_the_campaign(&campaign, &stress_run, &s);
    let (doc, md, html) = the_document_quotes_the_runs(root, &campaign, &solution, &runs);
    the_document_marks_the_rehearsal(&md, &html, &runs);
    the_rendered_document_and_pdf_hold_every_section(root, &doc);
}

#[test]
fn a_document_refuses_what_is_not_a_campaign_and_files_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let solution = write_solution(root);
    fs::create_dir_all(root.join("notacampaign")).unwrap();
    let out = edbstress(
        &[
            "esrp",
            "document",
            root.join("notacampaign").to_str().unwrap(),
            "--solution",
            solution.to_str().unwrap(),
        ],
        root,
    );
    assert_exit(&out, 2, "no campaign.json");
    assert!(
        text(&out).contains("is not a campaign directory"),
        "{}",
        text(&out)
    );

    // A campaign directory that exists with someone else's files is not taken over.
    fs::create_dir_all(root.join("busy")).unwrap();
    fs::write(root.join("busy/notes.txt"), "mine").unwrap();
    let out = edbstress(
        &[
            "esrp",
            "run",
            "--config",
            solution.to_str().unwrap(),
            "--campaign",
            root.join("busy").to_str().unwrap(),
        ],
        root,
    );
    assert_exit(&out, 2, "a non-empty directory");
    assert!(
        text(&out).contains("is not a campaign directory"),
        "{}",
        text(&out)
    );
    assert_eq!(
        fs::read_to_string(root.join("busy/notes.txt")).unwrap(),
        "mine"
    );

    // init writes a template that loads, and never overwrites.
    let out = edbstress(&["esrp", "init", "s.toml"], root);
    assert_exit(&out, 0, "init");
    let out = edbstress(&["esrp", "init", "s.toml"], root);
    assert_exit(&out, 2, "init over an existing file");
    assert!(text(&out).contains("already exists"));
}

/// Whether process `pid` holds a file whose name ends with `suffix` open.
fn holds_open(pid: u32, suffix: &str) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .any(|target| target.to_string_lossy().ends_with(suffix))
}

#[test]
fn a_campaign_killed_with_its_run_recovers_the_databases_and_finishes_when_run_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let sentinel = Sentinel::new(root);
    let solution = write_solution(root);
    // A Stress step long enough to be killed in the middle of it.
    let text_of = fs::read_to_string(&solution).unwrap();
    fs::write(
        &solution,
        text_of.replace("stress = \"3s\"", "stress = \"30s\""),
    )
    .unwrap();
    let campaign = root.join("campaign");
    let args = rehearsal_args(&solution, &campaign);
    let mut esrp = command(root)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed (with its run) once the Stress run has its database open and its log
    // started: the database is left as a crash leaves it, not shut down cleanly.
    let deadline = Instant::now() + Duration::from_secs(120);
    let run_pid = loop {
        assert!(
            Instant::now() < deadline,
            "the Stress run never opened its database"
        );
        assert!(
            esrp.try_wait().unwrap().is_none(),
            "the campaign ended early"
        );
        let pid = fs::read(campaign.join("campaign.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|s| s["steps"][0]["pid"].as_u64())
            .map(|p| p as u32)
            .filter(|p| *p != esrp.id());
        let logged = root.join("logs/edbstress001/E00.chk").is_file();
        if let Some(pid) = pid.filter(|p| logged && holds_open(*p, "edbstress001.edb")) {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_secs(2));
    for pid in [esrp.id(), run_pid] {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    esrp.wait().unwrap();
    let gone = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{run_pid}/fd")).exists() && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(state(&campaign)["steps"][0]["status"], "running");

    // The same command again: it recovers what the kill left and finishes.
    let out = command(root).args(&args).output().unwrap();
    assert_exit(&out, 0, "the campaign run again after a kill");
    let s = state(&campaign);
    for (i, step) in s["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(step["status"], "done", "step {i}: {s:#}");
        assert_eq!(step["verdict"], "Pass", "step {i}: {s:#}");
    }
    assert_eq!(s["steps"][0]["attempts"], 2, "Stress was redone");
    let log = fs::read_to_string(campaign.join("campaign.log")).unwrap();
    assert!(log.contains("Step Stress was interrupted"), "{log}");
    assert!(
        log.contains("recovery of the databases the interrupted step left: done"),
        "{log}"
    );
    let recover_log = campaign.join("interrupted/01-Stress-attempt1/recover.log");
    let recovered = fs::read_to_string(&recover_log)
        .unwrap_or_else(|e| panic!("{}: {e}", recover_log.display()));
    assert!(recovered.contains("edbstress001"), "{recovered}");
    assert!(
        !recovered.contains("nothing to recover"),
        "the kill left the database to recover: {recovered}"
    );
    sentinel.assert_untouched();
}

/// With a `[fleet]` table the campaign runs every step on every host at once through
/// `edbstress fleet` (two "hosts" on loopback through a real sshd), and the document
/// shows each server and the aggregate across them.
#[test]
fn a_campaign_of_two_servers_runs_each_step_on_both_and_documents_the_aggregate() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let addresses = ["127.0.0.5", "127.0.0.6"];
    let Some(sshd) = common::sshd::Sshd::start(&root.join("sshd"), &addresses) else {
        return;
    };
    let solution = write_solution(root);
    let mut toml = fs::read_to_string(&solution)
        .unwrap()
        .replace("servers = 1", "servers = 2")
        .replace("mailboxes = 100", "mailboxes = 200");
    // The lead time covers each host's process start and database open on a machine
    // that may be busy with other builds (8 s was once 0.1 s short at load average 8).
    // One clock on loopback: an offset measured there is the load's round-trip
    // asymmetry (over a second at load average 20), not a clock difference.
    toml.push_str(&format!(
        "[fleet]\nlead_time = \"20s\"\nmax_clock_offset = \"30s\"\nssh_config = \"{}\"\nremote_edbstress = \"{}\"\n",
        sshd.client_config.display(),
        binary().display()
    ));
    for (i, address) in addresses.iter().enumerate() {
        let h = common::hosts::LoopbackHost::new(root, address, &format!("mbx{}", i + 1));
        h.create_dirs();
        toml.push_str(&h.toml());
    }
    fs::write(&solution, toml).unwrap();
    let campaign = root.join("campaign");
    let started = Instant::now();
    let out = command(root)
        .args(rehearsal_args(&solution, &campaign))
        .output()
        .unwrap();
    assert_exit(&out, 0, "a two-server rehearsal campaign");
    eprintln!(
        "two-server campaign: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let s = state(&campaign);
    assert_eq!(s["hosts"], serde_json::json!(["mbx1", "mbx2"]));
    for step in [
        "01-Stress",
        "02-Performance",
        "03-DatabaseBackup",
        "04-SoftRecovery",
    ] {
        for host in ["mbx1", "mbx2"] {
            let run = step_run(&campaign.join(step).join("hosts"), host);
            let r = run_results(&run);
            assert_eq!(
                r.overall_result,
                edbstress_report::Verdict::Pass,
                "{step} {host}"
            );
            if step == "02-Performance" {
                assert_eq!(r.parameters.mailboxes, Some(100), "the mailboxes are split");
            }
        }
    }
    let doc = root.join("doc");
    let out = command(root)
        .args(document_args(&campaign, &solution, &doc))
        .output()
        .unwrap();
    assert_exit(&out, 1, "a rehearsal");
    let md = fs::read_to_string(doc.join("solution.md")).unwrap();
    assert!(
        md.contains("Server mbx1:") && md.contains("Server mbx2:"),
        "{md}"
    );
    assert!(
        md.contains("Aggregate Performance across all servers"),
        "{md}"
    );
    let perf = |h: &str| {
        run_results(&step_run(&campaign.join("02-Performance/hosts"), h))
            .achieved_transactional_iops
    };
    let sum = perf("mbx1") + perf("mbx2");
    let aggregate = md_value(
        &md,
        "### 11.4 Aggregate Performance Across All Servers",
        "Database Disks Transfers/sec",
    );
    assert!(
        (aggregate.parse::<f64>().unwrap() - sum).abs() < 0.002,
        "{aggregate} vs {sum}"
    );
    let said = text(&out);
    let found: Vec<&str> = said.lines().filter(|l| l.contains("  - ")).collect();
    // The rehearsal, and the small databases of each server's Stress and Performance
    // runs (32 MiB where the profile holds 10,000 MiB).
    let (sizing, others): (Vec<&str>, Vec<&str>) = found
        .iter()
        .partition(|l| l.contains("the databases are smaller than the profile"));
    assert_eq!(sizing.len(), 4, "{found:?}");
    assert_eq!(
        others.len(),
        1,
        "only the rehearsal besides sizing: {found:?}"
    );
}
