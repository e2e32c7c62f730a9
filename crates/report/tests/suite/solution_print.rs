//! The solution document as a vendor submits it: the deployment's claims held against
//! the runs (title mailbox count, database volumes, LUN and formatted capacities),
//! headroom from target and achieved IOPS, human dates, device vendors by name from
//! the PCI ID database, contents numbered from the printed pages, paths that break
//! only after a separator, test logs in the appendices.

use super::solution_document::{campaign, document};

use edbstress_report::StorageDevice;
use edbstress_report::solution::pages::{date_span, find_pages, human_date};
use edbstress_report::solution::vendors::VendorNames;
use edbstress_report::solution::{check, html, markdown};
use edbstress_report::text::path_html;

fn findings(doc: &edbstress_report::solution::SolutionDocument) -> Vec<String> {
    check(doc).into_iter().map(|f| f.0).collect()
}

#[test]
fn deployment_claims_that_the_runs_contradict_are_findings() {
    let mut doc = document(campaign(false, &["mbx1"], [86400.0, 7200.0]));
    assert_eq!(findings(&doc), Vec::<String>::new(), "a clean start");
    // Claims that hold: no finding.
    doc.info.name = "Array — 500 mailbox solution".into();
    doc.info.deployment.database_volumes = "2 × 1 TB".into();
    doc.info.deployment.bytes.database_lun = Some(1 << 40);
    doc.info.deployment.bytes.formatted = Some(2 << 40);
    doc.info.deployment.bytes.raw = Some(4 << 40);
    assert_eq!(findings(&doc), Vec::<String>::new());
    // Claims that do not.
    doc.info.name = "Array 5000 — 5,000-User Mailbox Resiliency".into();
    doc.info.deployment.database_volumes = "6 × 2 TB".into();
    doc.info.deployment.database_lun_size = "1 MB".into();
    doc.info.deployment.bytes.database_lun = Some(1 << 20);
    doc.info.deployment.bytes.formatted = Some(10 << 20);
    doc.info.deployment.bytes.raw = Some(1 << 20);
    let found = findings(&doc);
    for claim in [
        "the title says 5000 mailboxes",
        "the runs simulated 500",
        "claims 6 database volumes (\"6 × 2 TB\") per server; the runs tested 2 database(s) per server, so 4 volume(s) carried no database",
        "database LUNs of 1 MB (1.0 MiB); the run's largest database is 65.0 MiB",
        "formatted capacity (10.0 MiB); the run's databases take 130.0 MiB",
        "less raw capacity",
    ] {
        assert!(
            found.iter().any(|f| f.contains(claim)),
            "{claim}: {found:#?}"
        );
    }
    // The devices the databases were on, against the volumes claimed.
    let mut c = campaign(false, &["mbx1"], [86400.0, 7200.0]);
    for runs in c.steps.values_mut() {
        for r in runs {
            let dir = std::path::Path::new(&r.results.instances[0].database_path)
                .parent()
                .unwrap()
                .display()
                .to_string();
            r.results.storage_devices = vec![StorageDevice {
                device: "vdb".into(),
                paths: vec![dir],
                vendor: Some("0x1af4".into()),
                ..Default::default()
            }];
        }
    }
    let mut doc = document(c);
    doc.info.deployment.database_volumes = "2 x 1 TB".into();
    let found = findings(&doc);
    assert!(
        found.iter().any(|f| f
            .contains("claims 2 database volumes; the run's databases were on 1 device(s) (vdb)")),
        "{found:#?}"
    );
    // The vendor id named from a PCI ID database, the hex id with a note without one.
    doc.vendor_names = VendorNames::parse(
        Some("# comment\n1af4  Red Hat, Inc.\n\t1000  Virtio network device\n"),
        None,
    );
    let page = html::render(&doc);
    assert!(page.contains("Red Hat, Inc. (PCI 1af4)"), "vendor named");
    doc.vendor_names = VendorNames::default();
    let page = html::render(&doc);
    assert!(page.contains("0x1af4 (vendor id; no PCI or USB ID database was found"));
}

#[test]
fn headroom_dates_and_the_deployment_tables_are_printed() {
    let mut doc = document(campaign(false, &["mbx1", "mbx2"], [86400.0, 7200.0]));
    doc.info.author = "Jo Tester".into();
    doc.info.deployment.storage_cache = "16 GB mirrored".into();
    doc.info.deployment.dags = Some(1);
    doc.info.deployment.layout = vec![
        edbstress_report::solution::LayoutRow {
            server: "mbx1".into(),
            volume: "V1".into(),
            database: "DB1".into(),
            role: "active (copy 1)".into(),
            ..Default::default()
        },
        edbstress_report::solution::LayoutRow {
            server: "mbx1".into(),
            volume: "V2".into(),
            database: "DB2".into(),
            role: "passive (copy 2)".into(),
            ..Default::default()
        },
    ];
    let perf = &doc.runs(edbstress_report::TestType::Performance)[0].results;
    let (achieved, target) = (
        perf.achieved_transactional_iops,
        perf.target_transactional_iops.unwrap(),
    );
    let page = html::render(&doc);
    let headroom = (2.0 * achieved / (2.0 * target) - 1.0) * 100.0;
    let line = if headroom >= 0.0 {
        format!("IOPS includes {headroom:.1} % headroom")
    } else {
        format!("{:.1} % short of the target", -headroom)
    };
    assert!(page.contains(&line), "{line} not in the page");
    assert!(
        page.contains("25 November 2026"),
        "the written date in words"
    );
    assert!(!page.contains("2026-11-25T07:00:00Z"));
    assert!(page.contains("Jo Tester") && page.contains("16 GB mirrored"));
    assert!(page.contains("mbx1: 1 active and 1 passive"));
    assert!(page.contains("11.4 Aggregate Performance Across All Servers"));
    let md = markdown::render(&doc);
    assert!(md.contains("### 7.2 Primary Storage Hardware"), "{md}");
    assert!(md.contains("## Appendix C: Database Backup Testing"));
    assert_eq!(human_date("2026-11-28T16:51:10+00:00"), "28 November 2026");
    assert_eq!(
        date_span(&["2026-11-27T23:00:00Z", "2026-11-28T01:00:00Z"]).unwrap(),
        "27–28 November 2026"
    );
    assert_eq!(
        date_span(&["2026-11-30T10:00:00Z", "2026-12-01T01:00:00Z"]).unwrap(),
        "30 November – 1 December 2026"
    );
}

#[test]
fn contents_carry_the_pages_found_in_the_printed_text_and_logs_close_the_appendices() {
    let mut doc = document(campaign(false, &["mbx1"], [86400.0, 7200.0]));
    let headings = html::contents_headings(&doc);
    assert_eq!(headings[0].1, "1. Overview");
    // A printed text: title page, contents (every heading with no number yet), then
    // the sections two per page.
    let mut pages = vec!["Storage solution\n".to_string()];
    pages.push(
        headings
            .iter()
            .map(|(_, h)| format!("   {h}\n"))
            .collect::<String>(),
    );
    for pair in headings.chunks(2) {
        pages.push(pair.iter().map(|(_, h)| format!("{h}\ntext\n")).collect());
    }
    let found = find_pages(&pages.join("\u{c}"), &headings);
    assert_eq!(found.len(), headings.len(), "{found:#?}");
    assert_eq!(found["overview"], 3);
    assert_eq!(found["disclaimer"], 3);
    assert_eq!(found["features"], 4);
    assert_eq!(found["appendix-e"], 2 + headings.len().div_ceil(2) as u32);
    doc.pages = found;
    let source = doc.runs(edbstress_report::TestType::Stress)[0]
        .source
        .clone();
    doc.test_logs.insert(
        source,
        vec!["12:00:00 -- Preparing for testing <db>".into()],
    );
    let page = html::render(&doc);
    assert!(
        page.contains("<span class=\"entry\">1. Overview</span><span class=\"page\">3</span>"),
        "numbered contents"
    );
    let a = &page[page.find("id=\"appendix-a\"").unwrap()..page.find("id=\"appendix-b\"").unwrap()];
    assert!(
        a.contains("Preparing for testing &lt;db&gt;"),
        "the escaped test log"
    );
    let b = &page[page.find("id=\"appendix-b\"").unwrap()..page.find("id=\"appendix-c\"").unwrap()];
    assert!(b.contains("test.log was not found in the run directory"));
    // Paths break after a separator, never inside a name.
    assert_eq!(
        path_html("/mnt/db1/edbstress001.edb"),
        "/<wbr>mnt/<wbr>db1/<wbr>edbstress001.edb"
    );
}

#[test]
fn a_run_shorter_than_two_sampling_intervals_shows_one_reading_per_counter() {
    let mut r = super::common::crafted();
    r.test_type = edbstress_report::TestType::SoftRecovery;
    let page = edbstress_report::HtmlReport::page(&r, None);
    assert!(page.contains("samples.csv (4 intervals of 25 s)"));
    assert!(page.contains("<th>Minimum</th>"));
    // One interval: one reading, no minimum or maximum equal to it.
    r.samples.retain(|s| s.interval == 1);
    let page = edbstress_report::HtmlReport::page(&r, None);
    assert!(
        page.contains("samples.csv (1 interval of 25 s)"),
        "one interval"
    );
    let host = &page[page.find("id=\"host-system\"").unwrap()..];
    let host = &host[..host.find("</table>").unwrap()];
    assert!(
        host.contains("<th>Value</th>") && !host.contains("Minimum"),
        "{host}"
    );
    assert!(page.contains("One reading per counter"));
    // None: said so, never "0 intervals".
    r.samples.clear();
    let page = edbstress_report::HtmlReport::page(&r, None);
    assert!(!page.contains("0 intervals"));
    assert!(page.contains("no complete sampling interval: the test ended within its first 25 s"));
}
