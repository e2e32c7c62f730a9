//! The printed and editable solution document: the contents carry the pages the
//! sections start on in solution.pdf, the title page a human date, the appendices the
//! runs' test logs, the deployment's claims are held against the runs, and pandoc
//! (when installed) writes solution.odt and solution.docx.

use super::*;

/// solution.toml of `write_solution` with the deployment the vendor describes: a
/// title claiming 5,000 mailboxes, six database volumes for one database, database
/// LUNs smaller than the database, a revision, an author and a layout.
fn write_claims(root: &Path) -> PathBuf {
    let solution = write_solution(root);
    let text = fs::read_to_string(&solution)
        .unwrap()
        .replace(
            "name = \"Test Array 100\"",
            "name = \"Test Array 100 — 5,000 mailbox solution\"\nauthor = \"Jo Tester, Engineer\"\nrevisions = [{ date = \"July 2026\", description = \"Initial release\" }]",
        )
        .replace(
            "raid = \"RAID-1\"",
            "raid = \"RAID-1\"\ndatabase_volumes = \"6 × 2 TB\"\ndatabase_lun_size = \"1 MB\"\nraw_capacity = \"100 GB\"\nformatted_capacity = \"50 GB\"\nstorage_cache = \"Dual controllers, 16 GB each\"\ndags = 1\nservers_per_dag = 2\n[[deployment.layout]]\nserver = \"Server 1\"\nstorage = \"Array 1\"\nvolume = \"Volume 1\"\ndatabase = \"DB1\"\nrole = \"active (copy 1)\"",
        );
    fs::write(&solution, text).unwrap();
    solution
}

/// The text of a PDF, pages separated by form feeds; None (said loudly) without
/// pdftotext.
fn pdf_pages(pdf: &Path) -> Option<Vec<String>> {
    match Command::new("pdftotext")
        .arg("-layout")
        .arg(pdf)
        .arg("-")
        .output()
    {
        Ok(out) if out.status.success() => Some(
            String::from_utf8_lossy(&out.stdout)
                .split('\u{c}')
                .map(str::to_string)
                .collect(),
        ),
        _ => {
            eprintln!(
                "\n!!! SKIPPED: pdftotext (poppler-utils) is not installed; the page numbers were not checked\n"
            );
            None
        }
    }
}

#[test]
fn the_document_numbers_its_contents_checks_claims_and_includes_test_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let solution = write_claims(root);
    let campaign = root.join("campaign");
    let out = edbstress(
        &[
            "esrp",
            "run",
            "--config",
            solution.to_str().unwrap(),
            "--rehearsal",
            "--campaign",
            campaign.to_str().unwrap(),
        ],
        root,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = root.join("doc");
    let out = edbstress(
        &[
            "esrp",
            "document",
            campaign.to_str().unwrap(),
            "--solution",
            solution.to_str().unwrap(),
            "--output",
            doc.to_str().unwrap(),
        ],
        root,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = stdout(&out);
    for claim in [
        "the title says 5000 mailboxes",
        "claims 6 database volumes",
        "the run's largest database",
        "which does not fit",
    ] {
        assert!(said.contains(claim), "{claim} not in:\n{said}");
    }

    let html = fs::read_to_string(doc.join("solution.html")).unwrap();
    // A human date on the title page, never a raw RFC 3339 stamp.
    let today = chrono::Local::now().format("%-d %B %Y").to_string();
    let title = &html[html.find("class=\"title-page\"").unwrap()..];
    let title = &title[..title.find("</section>").unwrap()];
    assert!(title.contains(&today), "{today} not in {title}");
    assert!(title.contains("Jo Tester, Engineer") && title.contains("Initial release"));
    let raw = chrono::Local::now().format("%Y-%m-%dT").to_string();
    assert!(!title.contains(&raw), "a raw timestamp in {title}");
    for section in [
        "5. Exchange DAG Architecture",
        "7.2 Primary Storage Hardware",
        "Dual controllers, 16 GB each",
        "7.4 Primary Storage Disk Configuration",
        "11.1 Reliability",
        "12.2 Transaction Log Recovery/Replay Performance",
        "IOPS includes",
    ] {
        assert!(html.contains(section), "{section} not in solution.html");
    }
    // The layout as a figure: the server's box with its active copy (a filled marker).
    let dag = &html[html.find("id=\"dag-architecture\"").unwrap()
        ..html.find("id=\"customer-profile\"").unwrap()];
    let figure = &dag[dag
        .find("<figure class=\"topology\"><svg")
        .expect("a layout figure")..];
    assert!(figure.contains(">Server 1</text>") && figure.contains(">Array 1</text>"));
    assert!(figure.contains("DB1 · Volume 1") && figure.contains("fill=\"#2B506E\" stroke"));
    // Every appendix run ends with its test.log.
    let stress_log = fs::read_to_string(step_run(&campaign, "01-Stress").join("test.log")).unwrap();
    let first = stress_log.lines().next().unwrap();
    let appendix_a =
        &html[html.find("id=\"appendix-a\"").unwrap()..html.find("id=\"appendix-b\"").unwrap()];
    assert!(
        appendix_a.contains("<h3>Test Log</h3>"),
        "no test log in Appendix A"
    );
    assert!(
        appendix_a.contains(&edbstress_report::text::escape(first)),
        "{first} not in Appendix A"
    );
    // Paths break after a separator only.
    assert!(html.contains("/<wbr>"), "paths carry break opportunities");
    assert!(!html.contains("word-break:break-all"));

    let Some(pages) = pdf_pages(&doc.join("solution.pdf")) else {
        return;
    };
    // The contents line of each section ends with the page its heading is on.
    let contents = pages
        .iter()
        .position(|p| p.contains("Contents"))
        .expect("a contents page");
    let mut checked = 0;
    for heading in [
        "1. Overview",
        "11. Test Result Summary",
        "Appendix D: Soft Recovery Testing",
    ] {
        let line = pages[contents]
            .lines()
            .chain(pages.get(contents + 1).map_or("", String::as_str).lines())
            .find(|l| l.trim_start().starts_with(heading))
            .unwrap_or_else(|| panic!("{heading} not in the contents"));
        let number: usize = line
            .split_whitespace()
            .last()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no page number in {line:?}"));
        let found = pages
            .iter()
            .enumerate()
            .skip(contents + 1)
            .find(|(_, p)| p.lines().any(|l| l.trim_start().starts_with(heading)))
            .map(|(k, _)| k + 1)
            .unwrap_or_else(|| panic!("{heading} not printed after the contents"));
        assert_eq!(number, found, "{heading}: contents say {number}");
        checked += 1;
    }
    assert_eq!(checked, 3);
}

#[test]
fn pandoc_writes_an_editable_document_or_the_command_says_why_not() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let solution = write_claims(root);
    let campaign = root.join("campaign");
    let out = edbstress(
        &[
            "esrp",
            "run",
            "--config",
            solution.to_str().unwrap(),
            "--rehearsal",
            "--campaign",
            campaign.to_str().unwrap(),
        ],
        root,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = root.join("doc");
    let document = |pandoc: Option<&str>| {
        let mut c = command(root);
        c.args([
            "esrp",
            "document",
            campaign.to_str().unwrap(),
            "--solution",
            solution.to_str().unwrap(),
            "--output",
            doc.to_str().unwrap(),
        ]);
        if let Some(p) = pandoc {
            c.env("EDBSTRESS_PANDOC", p);
        }
        c.output().unwrap()
    };
    // Without pandoc: the other files are written and the reason is given.
    let out = document(Some("/nonexistent/pandoc"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(doc.join("solution.html").exists());
    assert!(!doc.join("solution.docx").exists());
    assert!(
        text(&out).contains("apt-get install pandoc"),
        "{}",
        text(&out)
    );
    if Command::new("pandoc").arg("--version").output().is_err() {
        eprintln!(
            "\n!!! SKIPPED: pandoc is not installed; solution.odt and solution.docx were not checked\n"
        );
        return;
    }
    let out = document(None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for ext in ["odt", "docx"] {
        let path = doc.join(format!("solution.{ext}"));
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(bytes.starts_with(b"PK"), "{ext} is a zip package");
        // The layout figure travels as an SVG image (its name is in the zip directory).
        assert!(
            bytes.windows(4).any(|w| w == b".svg"),
            "no figure in solution.{ext}"
        );
        // Read back as a word processor would: the sections and the runs' numbers.
        let plain = Command::new("pandoc")
            .args(["--to", "plain"])
            .arg(&path)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&plain.stdout);
        for section in [
            "Targeted Customer Profile",
            "Primary Storage Hardware",
            "Test Result Summary",
            "Appendix E: Database Checksum",
        ] {
            assert!(t.contains(section), "{section} not in solution.{ext}");
        }
        // The word processor makes its own contents: the PDF's page numbers are left out.
        assert_eq!(
            t.matches("Overview").count(),
            1,
            "solution.{ext}: one Overview"
        );
        let perf = run_results(&step_run(&campaign, "02-Performance"));
        assert!(
            t.contains(&format!("{:.3}", perf.achieved_transactional_iops)),
            "the Performance run's IOPS in solution.{ext}"
        );
    }
}
