//! The solution document against its evidence: a document states only what the
//! campaign's runs show, and vendor Markdown stays inert.

use super::*;

/// Copies the directory tree `from` to `to` (run directories, campaign.json).
fn copy_tree(from: &Path, to: &Path) {
    let out = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp -a: {}", text(&out));
}

/// Edits a campaign's campaign.json.
fn edit_state(campaign: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let mut s = state(campaign);
    edit(&mut s);
    fs::write(
        campaign.join("campaign.json"),
        serde_json::to_vec_pretty(&s).unwrap(),
    )
    .unwrap();
}

/// `esrp document` of `campaign` with `solution` into `root/name`: its output, its
/// Markdown and the findings it printed.
fn document_of(
    root: &Path,
    campaign: &Path,
    solution: &Path,
    name: &str,
) -> (std::process::Output, String, Vec<String>) {
    let doc = root.join(name);
    let out = command(root)
        .args(document_args(campaign, solution, &doc))
        .output()
        .unwrap();
    let md = fs::read_to_string(doc.join("solution.md")).unwrap_or_default();
    let findings = stdout(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("  - ").map(str::to_string))
        .collect();
    (out, md, findings)
}

#[track_caller]
fn assert_finding(findings: &[String], part: &str) {
    assert!(
        findings.iter().any(|f| f.contains(part)),
        "no finding with {part:?} in {findings:#?}"
    );
}

/// The runs Appendix `letter` of the Markdown lists.
fn appendix(md: &str, letter: char) -> String {
    let start = md
        .find(&format!("## Appendix {letter}: "))
        .unwrap_or_else(|| panic!("no Appendix {letter} in\n{md}"));
    let rest = &md[start + 4..];
    rest[..rest.find("## ").unwrap_or(rest.len())].to_string()
}

/// One real rehearsal campaign, then its evidence tampered with as a careless operator
/// or an attacker would: the document states only what the runs show. Every step
/// directory deleted or `"steps": []` (with the rehearsal mark taken off): no "meets the
/// rules"; a second server listed without runs; solution.toml's profile edited after
/// the campaign; a Stress run placed in the Performance step and another campaign's run
/// in the Stress step; a state file of an older version without an id.
#[test]
fn a_document_states_only_what_the_campaigns_runs_show() {
    let site = Site::new();
    let root = &site.root;
    let solution = write_solution(root);
    let campaign = root.join("campaign");
    let out = command(root)
        .args(rehearsal_args(&solution, &campaign))
        .output()
        .unwrap();
    assert_exit(&out, 0, "the rehearsal campaign");
    let s = state(&campaign);
    let id = s["id"]
        .as_str()
        .expect("campaign.json records the campaign's id");
    let uuid = id.strip_prefix("campaign-").expect("campaign-<uuid>");
    assert_eq!(uuid.len(), 36, "{id}");
    let host = s["hosts"][0].as_str().unwrap().to_string();
    let steps = [
        "01-Stress",
        "02-Performance",
        "03-DatabaseBackup",
        "04-SoftRecovery",
    ];
    for step in steps {
        let r = run_results(&step_run(&campaign, step));
        assert_eq!(r.campaign_id.as_deref(), Some(id), "{step}");
    }
    // As run: the rehearsal and the small databases (32 MiB where the profile holds
    // 10,000 MiB, one finding per Stress and Performance run) are the only findings;
    // every run is counted.
    let (out, md, findings) = document_of(root, &campaign, &solution, "doc");
    assert_exit(&out, 1, "a rehearsal");
    rehearsal_and_sizing_only(&findings, 2);
    assert!(
        appendix(&md, 'B').contains(&format!("Server {host}: Pass")),
        "{md}"
    );

    // Every step directory deleted; then `"steps": []`.
    let gone = root.join("gone");
    copy_tree(&campaign, &gone);
    for step in steps {
        fs::remove_dir_all(gone.join(step)).unwrap();
    }
    edit_state(&gone, |s| s["rehearsal"] = false.into());
    let (out, _, findings) = document_of(root, &gone, &solution, "doc-gone");
    assert_exit(&out, 1, "a campaign without runs");
    assert!(!stdout(&out).contains("meets the ESRP test rules"));
    for test in ["Stress", "Performance", "DatabaseBackup", "SoftRecovery"] {
        assert_finding(&findings, &format!("{host}: no {test} run was found"));
    }
    edit_state(&gone, |s| s["steps"] = serde_json::json!([]));
    let (out, _, findings) = document_of(root, &gone, &solution, "doc-nosteps");
    assert_exit(&out, 1, "a campaign of no steps");
    assert_finding(&findings, "campaign.json lists no Stress step");

    // A second server in campaign.json and solution.toml, without runs.
    let two = root.join("two");
    copy_tree(&campaign, &two);
    edit_state(&two, |s| s["hosts"] = serde_json::json!([host, "mbx2"]));
    let two_servers = root.join("two.toml");
    fs::write(
        &two_servers,
        fs::read_to_string(&solution)
            .unwrap()
            .replace("servers = 1", "servers = 2")
            .replace("mailboxes = 100", "mailboxes = 200"),
    )
    .unwrap();
    let (out, _, findings) = document_of(root, &two, &two_servers, "doc-two");
    assert_exit(&out, 1, "a server without runs");
    for test in ["Stress", "Performance", "DatabaseBackup", "SoftRecovery"] {
        assert_finding(&findings, &format!("mbx2: no {test} run was found"));
    }

    // solution.toml's profile edited after the campaign.
    let edited = root.join("edited.toml");
    fs::write(
        &edited,
        fs::read_to_string(&solution)
            .unwrap()
            .replace("mailboxes = 100", "mailboxes = 100000")
            .replace("iops_per_mailbox = 0.4", "iops_per_mailbox = 2")
            .replace("copies = 1", "copies = 3"),
    )
    .unwrap();
    let (out, md, findings) = document_of(root, &campaign, &edited, "doc-edited");
    assert_exit(&out, 1, "an edited profile");
    assert_finding(&findings, "claims 100000 mailboxes; the runs ran 100");
    assert_finding(&findings, "claims 2 IOPS per mailbox; the runs ran 0.4");
    assert_finding(&findings, "claims 3 database copies; the runs ran 1");
    assert!(md.contains("| Number of mailboxes | 100 |"), "{md}");
    assert!(md.contains("mailbox environment of 100 mailboxes"), "{md}");
    let html = fs::read_to_string(root.join("doc-edited/solution.html")).unwrap();
    let title = &html[html.find("class=\"title-page\"").unwrap()..];
    let title = &title[..title.find("</section>").unwrap()];
    assert!(
        title.contains(
            "100 mailboxes with a 100 MB quota and 0.4 IOPS per mailbox, kept in 1 database copies"
        ),
        "{title}"
    );
    assert!(!title.contains("100000"), "{title}");

    // A Stress run in the Performance step; another campaign's run in the Stress step.
    let swapped = root.join("swapped");
    copy_tree(&campaign, &swapped);
    let perf = step_run(&swapped, "02-Performance");
    fs::remove_dir_all(&perf).unwrap();
    let stress = step_run(&swapped, "01-Stress");
    let moved = swapped
        .join("02-Performance")
        .join(stress.file_name().unwrap());
    copy_tree(&stress, &moved);
    let foreign = swapped.join("01-Stress/Stress_2099_01_01_00_00_00");
    copy_tree(&stress, &foreign);
    let mut r: serde_json::Value =
        serde_json::from_slice(&fs::read(foreign.join("results.json")).unwrap()).unwrap();
    r["campaign_id"] = "campaign-another".into();
    r["run_id"] = "another-run".into();
    fs::write(
        foreign.join("results.json"),
        serde_json::to_vec(&r).unwrap(),
    )
    .unwrap();
    let (out, md, findings) = document_of(root, &swapped, &solution, "doc-swapped");
    assert_exit(&out, 1, "runs out of place");
    assert_finding(&findings, "it is a Stress run in the Performance step");
    assert_finding(&findings, &format!("{host}: no Performance run was found"));
    assert_finding(
        &findings,
        "it was started for campaign campaign-another, not this campaign",
    );
    assert!(!appendix(&md, 'B').contains("Server "), "{md}");
    assert!(
        appendix(&md, 'A').contains(&stress.file_name().unwrap().to_string_lossy().to_string())
    );

    // A state file of an older version: no id.
    let old = root.join("old");
    copy_tree(&campaign, &old);
    edit_state(&old, |s| {
        s.as_object_mut().unwrap().remove("id");
    });
    let (out, _, findings) = document_of(root, &old, &solution, "doc-old");
    assert_exit(&out, 1, "no campaign id");
    assert_finding(&findings, "campaign.json has no campaign id");
    site.sentinel.assert_untouched();
}

/// Vendor Markdown in solution.toml with script links and images (remote, through a
/// real HTTP listener on 127.0.0.1, and a local file): the HTML keeps only http(s)
/// and mailto links and no image, and Chromium printing the PDF fetches nothing.
#[test]
fn vendor_markdown_is_inert_and_printing_fetches_nothing() {
    let site = Site::new();
    let root = &site.root;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = {
        let (requests, done) = (requests.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        use std::io::{Read, Write};
                        stream.set_nonblocking(false).unwrap();
                        stream
                            .set_read_timeout(Some(Duration::from_secs(2)))
                            .unwrap();
                        let mut buf = [0u8; 2048];
                        let n = stream.read(&mut buf).unwrap_or(0);
                        requests
                            .lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                        let _ = stream.write_all(
                            b"HTTP/1.0 200 OK\r\nContent-Type: image/png\r\nContent-Length: 0\r\n\r\n",
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
    };
    let solution = write_solution(root);
    let secret = root.join("secret.png");
    fs::write(&secret, b"\x89PNG not really").unwrap();
    let markdown = format!(
        "[js](javascript:alert(1)) [vb](vbscript:msgbox) \
         [data](data:text/html;base64,PHNjcmlwdD4=) \
         ![pixel](http://127.0.0.1:{port}/track.png) ![local](file://{}) \
         [site](https://example.com/) [mail](mailto:esrp@example.com)",
        secret.display()
    );
    let toml = fs::read_to_string(&solution).unwrap().replace(
        "description = \"One server on a test array.\"",
        &format!("description = '''{markdown}'''"),
    );
    fs::write(&solution, toml).unwrap();
    // A campaign that ran nothing yet: the document is written (with its findings).
    let campaign = root.join("campaign");
    fs::create_dir(&campaign).unwrap();
    fs::write(
        campaign.join("campaign.json"),
        serde_json::to_vec_pretty(&serde_json::json!({
            "version": 1,
            "id": "campaign-00000000-0000-4000-8000-000000000000",
            "solution": "Test Array 100",
            "rehearsal": false,
            "created_at": "2026-01-01T00:00:00+00:00",
            "hosts": ["mbx1"],
            "steps": []
        }))
        .unwrap(),
    )
    .unwrap();
    let Some(chromium) = chromium_or_skip("the solution document's PDF") else {
        return;
    };
    let doc = root.join("doc");
    let out = command(root)
        .env("EDBSTRESS_CHROMIUM", &chromium)
        .args(document_args(&campaign, &solution, &doc))
        .output()
        .unwrap();
    assert!(doc.join("solution.pdf").is_file(), "{}", text(&out));
    // Give a late request the time to arrive before looking.
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap();
    let seen = requests.lock().unwrap().clone();
    assert!(
        seen.is_empty(),
        "Chromium fetched while printing: {seen:#?}"
    );
    let html = fs::read_to_string(doc.join("solution.html")).unwrap();
    for live in [
        "href=\"javascript:",
        "href=\"vbscript:",
        "href=\"data:",
        "href=\"file:",
        "<img",
    ] {
        assert!(!html.contains(live), "{live} in solution.html");
    }
    assert!(html.contains("href=\"https://example.com/\""));
    assert!(html.contains("href=\"mailto:esrp@example.com\""));
    assert!(html.contains("Content-Security-Policy"));
    assert_exit(&out, 1, "a campaign without runs");
    site.sentinel.assert_untouched();
}

/// The findings are the rehearsal and, for each of `runs` Stress and Performance runs,
/// its databases smaller than the profile's (the tests' 32 MiB databases).
fn rehearsal_and_sizing_only(findings: &[String], runs: usize) {
    let (sizing, others): (Vec<_>, Vec<_>) = findings
        .iter()
        .partition(|f| f.contains("the databases are smaller than the profile"));
    assert_eq!(sizing.len(), runs, "{findings:#?}");
    assert_eq!(others.len(), 1, "{findings:#?}");
    assert_finding(findings, "rehearsal");
}
