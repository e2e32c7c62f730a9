//! `edbstress report` and `edbstress compare` on the run directory of a real short
//! run, and its report rendered by headless Chromium.
//!
//! One run serves every check (a run takes a few seconds). Chromium must be installed
//! (`apt-get install chromium`; `.ci/run` installs it); `EDBSTRESS_SKIP_CHROMIUM=1`
//! skips that part loudly. `EDBSTRESS_REPORT_PNG=FILE` keeps the screenshot to look at.

use crate::suite::common;
#[path = "../../../workload/tests/suite/common/mod.rs"]
mod workload_common;

use common::chromium::{chromium_or_skip, decode_png, near, screenshot};
use common::{stderr, stdout};

use std::path::Path;
use std::process::Output;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use edbstress_report::{RunResults, TestType, Verdict};
use edbstress_workload::runner::run;

/// `edbstress` with `args` (absolute paths) in the current directory.
fn edbstress(args: &[&str]) -> Output {
    common::edbstress(args, Path::new("."))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn report_compare_and_chromium_on_a_real_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = workload_common::small_config(tmp.path(), TestType::Performance);
    config.database_size = 32 << 20;
    // A closed-loop (throughput) run: its cache warms in about a second.
    config.duration = Duration::from_secs(3);
    let outcome = run(&config, &AtomicBool::new(false), &|_| {}).unwrap();
    let dir = outcome.dir.clone();
    re_rendering_reproduces_every_file(&dir);
    bad_input_is_refused_and_foreign_files_are_kept(&dir, tmp.path());
    compare_shows_the_differences_of_two_runs(&dir, tmp.path());
    the_regression_gate_exits_1_beyond_its_limits_and_0_within(&dir, tmp.path());
    chromium_renders_the_verdict_and_the_charts(&dir, &outcome.results, tmp.path());
}

fn re_rendering_reproduces_every_file(dir: &Path) {
    for (format, file) in [
        ("html", "report.html"),
        ("md", "summary.md"),
        ("junit", "junit.xml"),
        ("json", "results.json"),
    ] {
        let before = std::fs::read(dir.join(file)).unwrap();
        let o = edbstress(&["report", s(dir), "--format", format]);
        assert!(o.status.success(), "{format}: {}", stderr(&o));
        assert!(stderr(&o).contains(file));
        let after = std::fs::read(dir.join(file)).unwrap();
        assert!(before == after, "re-rendered {file} differs from the run's");
        let o = edbstress(&["report", s(dir), "--format", format, "--output", "-"]);
        assert!(o.status.success());
        assert!(o.stdout == before, "{file} on standard output differs");
    }
}

fn bad_input_is_refused_and_foreign_files_are_kept(dir: &Path, tmp: &Path) {
    let empty = tmp.join("not-a-run");
    std::fs::create_dir(&empty).unwrap();
    let o = edbstress(&["report", s(&empty)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("has no results.json"), "{}", stderr(&o));

    let future = tmp.join("future-run");
    std::fs::create_dir(&future).unwrap();
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    std::fs::write(
        future.join("results.json"),
        json.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1),
    )
    .unwrap();
    let o = edbstress(&["report", s(&future)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("schema_version 99"), "{}", stderr(&o));
    assert!(!future.join("report.html").exists());

    let notes = tmp.join("notes.html");
    std::fs::write(&notes, "<html>my notes</html>").unwrap();
    let o = edbstress(&["report", s(dir), "--output", s(&notes)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not written by edbstress"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "<html>my notes</html>"
    );
}

fn compare_shows_the_differences_of_two_runs(dir: &Path, tmp: &Path) {
    // The second run: the first with 1.5× the transactional IOPS and twice the
    // database read rate, so the expected differences are exact.
    let after = tmp.join("after");
    std::fs::create_dir(&after).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let iops = v["achieved_transactional_iops"].as_f64().unwrap();
    v["achieved_transactional_iops"] = (iops * 1.5).into();
    let reads = v["totals"]["io"]["db_read"]["per_sec"].as_f64().unwrap();
    assert!(reads > 0.0);
    v["totals"]["io"]["db_read"]["per_sec"] = (reads * 2.0).into();
    std::fs::write(after.join("results.json"), serde_json::to_vec(&v).unwrap()).unwrap();

    let html = tmp.join("comparison.html");
    let o = edbstress(&["compare", s(dir), s(&after), "--html", s(&html)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains(&format!("A: {}", dir.display())), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{text}"))
            .to_string()
    };
    assert!(
        line("Achieved transactional IOPS").ends_with("(+50.0 %)"),
        "{text}"
    );
    assert!(line("Database Reads/sec").ends_with("(+100.0 %)"), "{text}");
    assert!(line("Log Writes/sec").ends_with("(0.0 %)"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("(+50.0 %)"));
    assert!(
        page.matches("<polyline").count() >= 4,
        "overlaid series drawn"
    );
    // Our own comparison file may be replaced; the second run alone is not enough.
    let o = edbstress(&["compare", s(dir), s(&after), "--html", s(&html)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = edbstress(&["compare", s(dir)]);
    assert_eq!(o.status.code(), Some(2));
}

/// A copy of the run directory `dir`'s results.json under `tmp/name`, edited by `edit`.
fn edited_copy(
    dir: &Path,
    tmp: &Path,
    name: &str,
    edit: impl Fn(&mut serde_json::Value),
) -> std::path::PathBuf {
    let copy = tmp.join(name);
    std::fs::create_dir(&copy).unwrap();
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(copy.join("results.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    copy
}

/// The gate's line of `metric` in `compare`'s output.
fn gate_line(text: &str, metric: &str) -> String {
    text.lines()
        .find(|l| {
            let l = l.trim_start();
            (l.starts_with("ok ") || l.starts_with("REGRESSION ")) && l.contains(metric)
        })
        .unwrap_or_else(|| panic!("no gate line for {metric}:\n{text}"))
        .to_string()
}

fn the_regression_gate_exits_1_beyond_its_limits_and_0_within(dir: &Path, tmp: &Path) {
    // The baseline: the real run with every limit set to what it measured, so that it
    // passes (a few seconds on a shared machine may fail the stall limit; the gate's
    // verdict check needs a passing baseline).
    let base = edited_copy(dir, tmp, "gate-base", |v| {
        for c in v["criteria"].as_array_mut().unwrap() {
            c["threshold"] = c["measured"].clone();
            c["not_measured"] = false.into();
            c["passed"] = true.into();
        }
        v["failed_criteria"] = serde_json::json!([]);
        v["overall_result"] = "Pass".into();
        v["aborted"] = false.into();
    });
    let measured = |v: &serde_json::Value, class: &str, key: &str| {
        v["totals"]["io"][class][key].as_f64().unwrap()
    };
    let base_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.join("results.json")).unwrap()).unwrap();
    assert!(measured(&base_json, "db_read", "p99_ms") > 0.0);
    assert!(measured(&base_json, "log_write", "per_sec") > 0.0);
    let gate = |args: &[&str]| {
        let mut all = vec!["compare"];
        all.extend_from_slice(args);
        edbstress(&all)
    };

    // The run against itself: every check within every limit.
    let o = gate(&[
        s(&base),
        s(&base),
        "--max-iops-drop",
        "5",
        "--max-p99-rise",
        "10",
        "--max-avg-latency-rise",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("Regression gate: B against A"), "{text}");
    assert!(text.contains("none over its limit"), "{text}");
    assert!(
        gate_line(&text, "Log Writes p99 latency")
            .trim_start()
            .starts_with("ok")
    );

    // After a "firmware change": database read p99 doubled, log writes 20 % slower in
    // rate, everything else as before.
    let after = edited_copy(&base, tmp, "gate-after", |v| {
        let p99 = v["totals"]["io"]["db_read"]["p99_ms"].as_f64().unwrap();
        v["totals"]["io"]["db_read"]["p99_ms"] = (p99 * 2.0).into();
        let rate = v["totals"]["io"]["log_write"]["per_sec"].as_f64().unwrap();
        v["totals"]["io"]["log_write"]["per_sec"] = (rate * 0.8).into();
    });
    let o = gate(&[s(&base), s(&after), "--max-p99-rise", "50"]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    let line = gate_line(&text, "Database Reads p99 latency");
    assert!(line.trim_start().starts_with("REGRESSION"), "{line}");
    assert!(line.contains("+100.0 % (limit +50.0 %)"), "{line}");
    assert!(
        gate_line(&text, "Log Writes p99 latency")
            .trim_start()
            .starts_with("ok")
    );
    assert!(text.contains("Regression: 1 of "), "{text}");

    // A limit for database reads alone that the doubling is within.
    let o = gate(&[
        s(&base),
        s(&after),
        "--max-p99-rise",
        "50",
        "--max-p99-rise",
        "db_read=150",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    // A floor above the new p99: fast enough not to count.
    let p99 = measured(&base_json, "db_read", "p99_ms") * 2.0;
    let floor = format!("{}", p99 + 1.0);
    let o = gate(&[
        s(&base),
        s(&after),
        "--max-p99-rise",
        "50",
        "--latency-floor",
        &floor,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("ms floor"), "{}", stdout(&o));

    // The rate drop: over a 10 % limit for every class, within a 25 % one for log writes.
    let o = gate(&[s(&base), s(&after), "--max-iops-drop", "10"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let line = gate_line(&stdout(&o), "Log Writes/sec");
    assert!(
        line.contains("-20.0 % (limit -10.0 %)") && line.contains("REGRESSION"),
        "{line}"
    );
    let o = gate(&[
        s(&base),
        s(&after),
        "--max-iops-drop",
        "10",
        "--max-iops-drop",
        "log_write=25",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    // Judging only database reads leaves the log writes out.
    let o = gate(&[
        s(&base),
        s(&after),
        "--max-iops-drop",
        "10",
        "--class",
        "db_read",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let gate_part = stdout(&o)
        .split("Regression gate:")
        .nth(1)
        .unwrap()
        .to_string();
    assert!(gate_part.contains("Database Reads/sec"), "{gate_part}");
    assert!(!gate_part.contains("Log Writes"), "{gate_part}");

    // A run that stopped early where the baseline passed fails the gate whatever the limits.
    let stopped = edited_copy(&base, tmp, "gate-stopped", |v| v["aborted"] = true.into());
    let o = gate(&[s(&base), s(&stopped), "--max-iops-drop", "100"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let line = gate_line(&stdout(&o), "Overall Test Result");
    assert!(line.contains("Pass -> Fail (stopped early)"), "{line}");
    assert!(line.trim_start().starts_with("REGRESSION"), "{line}");

    // Usage errors: exit code 2 with the fix named.
    for (args, says) in [
        (vec!["--max-p99-rise", "lots"], "not a percentage"),
        (vec!["--max-p99-rise", "disk_read=5"], "not an I/O class"),
        (vec!["--max-iops-drop", "-5"], "not a percentage"),
        (vec!["--class", "db_read"], "needs a limit"),
    ] {
        let mut all = vec![s(&base), s(&after)];
        all.extend(args);
        let o = gate(&all);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{all:?}: {}", stderr(&o));
    }
}

fn chromium_renders_the_verdict_and_the_charts(dir: &Path, results: &RunResults, tmp: &Path) {
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // The charts carry the run's data: one point per sampling interval on the
    // transactional IOPS line, and the thresholds drawn.
    let intervals = results
        .samples
        .iter()
        .map(|s| s.interval)
        .max()
        .unwrap_or(0) as usize;
    assert!(intervals >= 2, "a 3 s run at 1 s intervals has intervals");
    assert!(html.matches("<svg class=\"chart\"").count() >= 6);
    let iops_chart = html
        .split("<svg")
        .find(|c| c.contains("I/O per second over the run"))
        .expect("IOPS chart");
    let line = iops_chart.split("points=\"").nth(1).unwrap();
    let points = line[..line.find('"').unwrap()].split(' ').count();
    assert_eq!(points, intervals, "one IOPS point per interval");
    let read_chart = html
        .split("<svg")
        .find(|c| c.contains("Database Reads latency over the run"))
        .expect("database read latency chart");
    assert!(read_chart.contains("average limit 20 ms"));
    assert!(read_chart.contains("maximum limit 100 ms"));

    let Some(chromium) = chromium_or_skip("the report") else {
        return;
    };
    let png_path = tmp.join("report.png");
    screenshot(&chromium, &dir.join("report.html"), &png_path, 1280, 9000);
    assert!(png_path.is_file(), "chromium wrote no screenshot");
    if let Some(keep) = std::env::var_os("EDBSTRESS_REPORT_PNG") {
        std::fs::copy(&png_path, keep).unwrap();
    }
    let (w, h, pixels) = decode_png(&png_path);
    assert_eq!((w, h), (1280, 9000));
    let non_white = pixels
        .iter()
        .filter(|p| !near(**p, [255, 255, 255], 8))
        .count();
    assert!(
        non_white > pixels.len() / 50,
        "the page looks blank: {non_white} of {} pixels are not white",
        pixels.len()
    );
    // The verdict banner: PASS green or FAIL red, near the top.
    const GREEN: [u8; 3] = [0x1E, 0x7B, 0x34];
    const RED: [u8; 3] = [0xB3, 0x26, 0x1E];
    let (want, other) = match results.overall_result {
        Verdict::Pass => (GREEN, RED),
        Verdict::Fail => (RED, GREEN),
    };
    let top = &pixels[..(w * 400) as usize];
    let verdict = top.iter().filter(|p| near(**p, want, 24)).count();
    let wrong = top.iter().filter(|p| near(**p, other, 24)).count();
    assert!(
        verdict > 50_000,
        "verdict banner colour not found ({verdict} pixels) for {:?}",
        results.overall_result
    );
    assert!(
        wrong < 500,
        "the other verdict's colour appears at the top ({wrong} pixels)"
    );
    // The charts were drawn: their series colour (blue, #0072B2) below the top.
    let blue = pixels[(w * 400) as usize..]
        .iter()
        .filter(|p| near(**p, [0x00, 0x72, 0xB2], 30))
        .count();
    assert!(blue > 500, "chart lines not drawn ({blue} blue pixels)");
}
