//! `edbstress aggregate` on real runs: three short Performance tests started together
//! with `--start-at` (each its own databases, logs and host name), merged; the totals
//! are checked against each run's results.json, the p99 against the merged histograms
//! recomputed here; refusals (windows that do not overlap, a host twice) exit 2; the
//! report renders in headless Chromium with the verdict and both ESRP tables.

use crate::suite::common;
use common::aggregate_check::{
    fleet_latency_over_time_is_the_hosts_interval_histograms_merged,
    interval_rows_hold_their_rates, totals_are_the_hosts_merged,
};
use common::chromium::{chromium_or_skip, decode_png, dump_dom, near, screenshot};
use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use edbstress_report::{RunResults, read_results};

const HOSTS: [&str; 3] = ["db1", "db2", "db3"];

/// A short open-loop Performance run of `host` under `dir/host`, loose limits (this
/// test is about aggregation, not the machine's latency).
fn run_args(host: &str, start_at: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--config",
        "../margin.toml",
        "--mailboxes",
        "100",
        "--db-path",
        "db",
        "--log-path",
        "logs",
        "--results-dir",
        "results",
        "--host-name",
        host,
    ]
    .iter()
    .chain(SHORT_RUN.iter())
    .map(|s| s.to_string())
    .collect();
    if let Some(at) = start_at {
        args.extend(["--start-at".to_string(), at.to_string()]);
    }
    args
}

fn run_dir(host_dir: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = fs::read_dir(host_dir.join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

fn results(dir: &Path) -> RunResults {
    read_results(&fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// Three runs started together with `--start-at`, each under `root/host`: their run
/// directories and results, after checking each waited for the start time.
fn three_hosts_started_together(root: &Path) -> (Vec<PathBuf>, Vec<RunResults>) {
    // Far enough ahead for three preparations and warm-ups on a busy machine.
    let start_at = "+35s";
    let children: Vec<_> = HOSTS
        .iter()
        .map(|host| {
            let dir = root.join(host);
            fs::create_dir(&dir).unwrap();
            command(&dir)
                .args(run_args(host, Some(start_at)))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (host, child) in HOSTS.iter().zip(children) {
        let out = child.wait_with_output().unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{host}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = fs::read_to_string(run_dir(&root.join(host)).join("test.log")).unwrap();
        assert!(log.contains("for the start time"), "{host}: {log}");
    }
    let dirs: Vec<PathBuf> = HOSTS.iter().map(|h| run_dir(&root.join(h))).collect();
    let runs: Vec<RunResults> = dirs.iter().map(|d| results(d)).collect();
    for (h, r) in HOSTS.iter().zip(&runs) {
        assert_eq!(&r.host.hostname, h);
    }
    (dirs, runs)
}

/// `edbstress aggregate` of the runs into `root/agg`: its totals against the runs'
/// (p99 recomputed from their merged histograms), its window, intervals and files.
/// Returns whether every run passed.
fn aggregate_matches_the_runs(root: &Path, dir_args: &[&str], runs: &[RunResults]) -> bool {
    let out = edbstress(
        &[&["aggregate", "--output", "agg"], dir_args].concat(),
        root,
    );
    let pass = runs
        .iter()
        .all(|r| r.criteria.iter().all(|c| c.passed) && !r.aborted);
    assert_exit(&out, if pass { 0 } else { 1 }, "aggregate");
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(root.join("agg/results.json")).unwrap()).unwrap();
    assert_eq!(agg["kind"], "aggregate");
    assert_eq!(agg["complete"], true);
    // Transactional IOPS summed and p99 of the merged histograms, recomputed here from
    // the three results.json.
    eprintln!("{}", totals_are_the_hosts_merged(&agg, runs));
    // The windows overlapped almost wholly: all started at the same moment.
    let common_window = agg["common_window"]["seconds"].as_f64().unwrap();
    assert!(common_window > 5.0, "common window {common_window} s");
    interval_rows_hold_their_rates(runs);
    fleet_latency_over_time_is_the_hosts_interval_histograms_merged(&agg, runs);

    let html = fs::read_to_string(root.join("agg/report.html")).unwrap();
    for text in [
        "Individual Server Performance",
        "Aggregate Server Performance",
        "db1",
        "db2",
        "db3",
    ] {
        assert!(html.contains(text), "report lacks {text}");
    }
    assert!(root.join("agg/summary.md").is_file());
    let junit = fs::read_to_string(root.join("agg/junit.xml")).unwrap();
    assert_eq!(junit.matches("<testsuite ").count(), 3);
    pass
}

/// The same host twice, a host not ready at its start time, and windows that do not
/// overlap (a later run) are refused.
fn aggregate_refuses_a_host_twice_a_late_host_and_windows_apart(root: &Path, dir_args: &[&str]) {
    // The same host twice, and windows that do not overlap (a later run): exit 2.
    let out = edbstress(&["aggregate", dir_args[0], dir_args[0]], root);
    assert_exit(&out, 2, "a host twice");
    assert!(text(&out).contains("given twice"), "{}", text(&out));
    // A host that cannot be ready at its start time fails, saying how late it was.
    let late = root.join("late");
    fs::create_dir(&late).unwrap();
    let out = command(&late)
        .args(run_args("db4", Some("+1s")))
        .output()
        .unwrap();
    assert_exit(&out, 1, "a run not ready at its start time");
    let said = text(&out);
    assert!(said.contains("not ready at the start time"), "{said}");
    fs::remove_dir_all(late.join("results")).unwrap();
    // Run again (the databases are prepared now) without a start time: its window
    // lies after the others'.
    let out = command(&late).args(run_args("db4", None)).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let late_dir = run_dir(&late);
    let out = edbstress(
        &["aggregate", dir_args[0], late_dir.to_str().unwrap()],
        root,
    );
    assert_exit(&out, 2, "windows apart");
    let said = text(&out);
    assert!(
        said.contains("overlap by") && said.contains("db4:") && said.contains("db1:"),
        "{said}"
    );
}

/// The aggregate report as headless Chromium renders it: its sections, a page that is
/// not blank and the verdict banner's colour.
fn the_rendered_aggregate_report_shows_its_verdict(site: &Site, pass: bool) {
    let root = &site.root;
    // What a person sees.
    if let Some(chromium) = chromium_or_skip("the aggregate report") {
        let page = root.join("agg/report.html");
        let dom = dump_dom(&chromium, &page, &site.path().join("profile"));
        for text in [
            "Overall Test Result",
            "Individual Server Performance",
            "Aggregate Server Performance",
            "Fleet Latency Over Time",
            "Worst latency:",
            "Database Reads 99th percentile latency, whole fleet",
            "Database Disks Transfers/sec",
            "Average Log Disk Write Latency (ms)",
        ] {
            assert!(dom.contains(text), "rendered page lacks {text}");
        }
        let png = site.path().join("aggregate.png");
        screenshot(&chromium, &page, &png, 1280, 3000);
        if let Some(keep) = std::env::var_os("EDBSTRESS_AGGREGATE_PNG") {
            fs::copy(&png, keep).unwrap();
        }
        let (_, _, pixels) = decode_png(&png);
        let non_white = pixels
            .iter()
            .filter(|p| !near(**p, [255, 255, 255], 8))
            .count();
        assert!(non_white > pixels.len() / 50, "the page looks blank");
        let banner = if pass {
            [0x1E, 0x7B, 0x34]
        } else {
            [0xB3, 0x26, 0x1E]
        };
        let top = &pixels[..1280 * 300];
        assert!(
            top.iter().filter(|p| near(**p, banner, 24)).count() > 30_000,
            "verdict banner not visible"
        );
    }
}

#[test]
fn three_hosts_started_together_aggregate_with_exact_percentiles() {
    let site = Site::new();
    let root = &site.root;
    let (dirs, runs) = three_hosts_started_together(root);
    let dir_args: Vec<&str> = dirs.iter().map(|d| d.to_str().unwrap()).collect();
    let pass = aggregate_matches_the_runs(root, &dir_args, &runs);
    aggregate_refuses_a_host_twice_a_late_host_and_windows_apart(root, &dir_args);
    the_rendered_aggregate_report_shows_its_verdict(&site, pass);
    site.sentinel.assert_untouched();
}

/// `results.json` of `from` copied to a new run directory `to`, edited by `edit`, with
/// a run id of its own (a copy edited by hand, as an attacker or a careless operator
/// would make one).
fn edited_copy(from: &Path, to: &Path, run_id: &str, edit: impl Fn(&mut serde_json::Value)) {
    fs::create_dir_all(to).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&fs::read(from.join("results.json")).unwrap()).unwrap();
    v["run_id"] = run_id.into();
    edit(&mut v);
    fs::write(
        to.join("results.json"),
        serde_json::to_vec_pretty(&v).unwrap(),
    )
    .unwrap();
}

/// One real run, then what must not become a solution's evidence: the same run under
/// two names or through a symbolic link, a copy with the same run id, rates that sum
/// to infinity, counts that wrap `u64`; runs of different versions aggregate with a
/// warning naming them; `report` renders an aggregate directory and `compare` refuses
/// one naming the command that reads it.
#[test]
fn one_run_counts_once_and_totals_are_checked() {
    let site = Site::new();
    let root = &site.root;
    let host = root.join("db1");
    fs::create_dir(&host).unwrap();
    let out = command(&host).args(run_args("db1", None)).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let run = run_dir(&host);
    let run_s = run.to_str().unwrap();
    let link = root.join("link");
    std::os::unix::fs::symlink(&run, &link).unwrap();

    // The same directory under two names, directly or through a link.
    for second in [run_s.to_string(), link.to_str().unwrap().to_string()] {
        let out = edbstress(
            &[
                "aggregate",
                &format!("one={run_s}"),
                &format!("two={second}"),
            ],
            root,
        );
        assert_exit(&out, 2, "one run directory given twice");
        assert!(
            text(&out).contains(&format!(
                "the run directory {} is given twice",
                fs::canonicalize(&run).unwrap().display()
            )),
            "{}",
            text(&out)
        );
    }
    // A copy of the run (same run id) under another host name.
    let copy = root.join("copy");
    fs::create_dir(&copy).unwrap();
    fs::copy(run.join("results.json"), copy.join("results.json")).unwrap();
    let out = edbstress(
        &[
            "aggregate",
            &format!("one={run_s}"),
            &format!("two={}", copy.display()),
        ],
        root,
    );
    assert_exit(&out, 2, "a copy of one run");
    let id = results(&run).run_id.expect("a run records its run id");
    assert!(
        text(&out).contains(&format!("run {id} is given twice")),
        "{}",
        text(&out)
    );

    // Rates that add up to infinity, counts that pass u64::MAX.
    for (what, field, edit) in [
        (
            "rates",
            "achieved_transactional_iops",
            (|v: &mut serde_json::Value| v["achieved_transactional_iops"] = 1.7e308.into())
                as fn(&mut serde_json::Value),
        ),
        ("counts", "db_read count", |v: &mut serde_json::Value| {
            v["totals"]["io"]["db_read"]["count"] = (u64::MAX - 1).into()
        }),
    ] {
        let a = root.join(format!("{what}-a"));
        let b = root.join(format!("{what}-b"));
        edited_copy(&run, &a, &format!("{what}-a"), edit);
        edited_copy(&run, &b, &format!("{what}-b"), edit);
        let out = edbstress(
            &[
                "aggregate",
                "--output",
                &format!("agg-{what}"),
                &format!("ha={}", a.display()),
                &format!("hb={}", b.display()),
            ],
            root,
        );
        assert_exit(&out, 2, what);
        let said = text(&out);
        assert!(
            said.contains(field) && said.contains("ha:") && said.contains("hb:"),
            "{what}: {said}"
        );
        assert!(
            !said
                .split(|c: char| !c.is_alphanumeric())
                .any(|w| w == "inf"),
            "{said}"
        );
        assert!(!root.join(format!("agg-{what}")).exists());
    }

    // Runs of two versions: aggregated, with a warning naming both.
    let other = root.join("other-version");
    edited_copy(&run, &other, "other-version", |v| {
        v["tool"]["version"] = "0.0.1-other".into()
    });
    let out = edbstress(
        &[
            "aggregate",
            "--output",
            "agg",
            &format!("one={run_s}"),
            &format!("two={}", other.display()),
        ],
        root,
    );
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let ours = env!("CARGO_PKG_VERSION");
    let said = text(&out);
    assert!(
        said.contains("warning: the runs were made by different edbstress versions")
            && said.contains("0.0.1-other on two")
            && said.contains(&format!("{ours} on one")),
        "{said}"
    );
    let agg: serde_json::Value =
        serde_json::from_slice(&fs::read(root.join("agg/results.json")).unwrap()).unwrap();
    assert!(
        agg["warnings"][0]
            .as_str()
            .is_some_and(|w| w.contains("0.0.1-other"))
    );

    // `report` of the aggregate directory renders it; `compare` names the right command.
    let out = edbstress(&["report", "agg", "--format", "md", "--output", "-"], root);
    assert_exit(&out, 0, "report of an aggregate");
    assert!(stdout(&out).contains("## Aggregate Server Performance"));
    let out = edbstress(&["report", "agg", "--format", "json"], root);
    assert_exit(&out, 0, "the aggregate's results.json rewritten");
    let out = edbstress(&["compare", "agg", run_s], root);
    assert_exit(&out, 2, "compare of an aggregate");
    let said = text(&out);
    assert!(
        said.contains("is an aggregate of 2 servers") && said.contains("edbstress report agg"),
        "{said}"
    );
    assert!(!said.contains("missing field"), "{said}");
    site.sentinel.assert_untouched();
}
