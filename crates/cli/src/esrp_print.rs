//! Printing the solution document: headless Chromium prints solution.html to
//! solution.pdf twice (the first print tells, through `pdftotext`, on which page each
//! section starts; the second carries those numbers in the contents), pandoc writes the
//! editable ODT and DOCX, and the inputs only the system has (test logs, the PCI and
//! USB ID databases) are read here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edbstress_report::solution::vendors::{PCI_IDS_PATHS, USB_IDS_PATHS};
use edbstress_report::solution::{SolutionDocument, VendorNames, html, pages};
use edbstress_report::{read_test_log, write_atomically};

/// The first ID database found of `paths`, read lossily (usb.ids has had Latin-1).
fn first_readable(paths: &[&str]) -> Option<String> {
    paths
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The system's PCI and USB vendor names (empty tables when the databases are absent:
/// the document then shows the ids with a note).
pub fn vendor_names() -> VendorNames {
    let pci = first_readable(&PCI_IDS_PATHS);
    let usb = first_readable(&USB_IDS_PATHS);
    VendorNames::parse(pci.as_deref(), usb.as_deref())
}

/// Every counted run's test.log, by run directory.
pub fn test_logs(doc: &SolutionDocument) -> BTreeMap<String, Vec<String>> {
    doc.campaigns
        .iter()
        .flat_map(|c| c.steps.values().flatten())
        .filter_map(|r| {
            read_test_log(Path::new(&r.source))
                .ok()
                .flatten()
                .map(|lines| (r.source.clone(), lines))
        })
        .collect()
}

/// Prints `html` to `pdf`, reads back where each section starts, renders the page
/// again with those numbers in the contents and prints it again. Ok carries a note for
/// the "Wrote" line when the contents could not be numbered.
pub fn print_numbered(
    doc: &mut SolutionDocument,
    html: &Path,
    pdf: &Path,
) -> Result<String, String> {
    print_pdf(html, pdf)?;
    let text = match pdf_text(pdf) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("The contents of solution.pdf have no page numbers: {why}");
            return Ok(" (contents without page numbers)".into());
        }
    };
    doc.pages = pages::find_pages(&text, &html::contents_headings(doc));
    write_atomically(html, html::render(doc).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", html.display()))?;
    print_pdf(html, pdf)?;
    Ok(String::new())
}

/// The text of `pdf`, pages separated by form feeds (`pdftotext -layout`).
fn pdf_text(pdf: &Path) -> Result<String, String> {
    let out = Command::new("pdftotext")
        .arg("-layout")
        .arg(pdf)
        .arg("-")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "pdftotext could not be started ({e}); install poppler-utils \
                 (`apt-get install poppler-utils`) and run `edbstress esrp document` again"
            )
        })?;
    if !out.status.success() {
        return Err(format!("pdftotext failed on {}", pdf.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// solution.odt and solution.docx from the editable page through pandoc: each written
/// path, or why it was not.
pub fn editable_formats(doc: &SolutionDocument, out: &Path) -> Vec<Result<PathBuf, String>> {
    let html = out.join(".edbstress-editable.html");
    if let Err(e) = write_atomically(&html, html::render_editable(doc).as_bytes()) {
        return vec![Err(format!("cannot write {}: {e}", html.display()))];
    }
    let results = pandoc_formats(&html, out);
    let _ = std::fs::remove_file(&html);
    results
}

fn pandoc_formats(html: &Path, out: &Path) -> Vec<Result<PathBuf, String>> {
    let pandoc = std::env::var_os("EDBSTRESS_PANDOC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("pandoc"));
    let mut results = Vec::new();
    for ext in ["odt", "docx"] {
        let target = out.join(format!("solution.{ext}"));
        let tmp = out.join(format!(".edbstress-solution.{ext}.tmp"));
        let status = Command::new(&pandoc)
            .args(["--from", "html", "--to", ext, "--output"])
            .arg(&tmp)
            .arg(html)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(s) if s.success() => results.push(
                std::fs::rename(&tmp, &target)
                    .map(|()| target.clone())
                    .map_err(|e| format!("cannot rename to {}: {e}", target.display())),
            ),
            Ok(s) => {
                let _ = std::fs::remove_file(&tmp);
                results.push(Err(format!(
                    "solution.{ext} was not written: pandoc failed ({s})"
                )));
            }
            Err(e) => {
                results.push(Err(format!(
                    "solution.odt and solution.docx (editable in a word processor) were not \
                     written: pandoc could not be started ({e}); install it (`apt-get install \
                     pandoc`) and run `edbstress esrp document` again"
                )));
                break;
            }
        }
    }
    results
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
