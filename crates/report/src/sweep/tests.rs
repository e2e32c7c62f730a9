use super::best::{measured_number, recommend};
use super::*;

fn figures(iops: f64, p99: f64, pass: bool) -> PointFigures {
    PointFigures {
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        aborted: false,
        transactional_iops: iops,
        db_read: ClassFigures {
            per_sec: iops * 0.6,
            mb_per_sec: 1.0,
            avg_ms: 2.0,
            p99_ms: p99,
        },
        db_write: ClassFigures::default(),
        log_write: ClassFigures::default(),
        db_read_avg_limit_ms: Some(20.0),
        log_write_avg_limit_ms: Some(10.0),
        failed: Vec::new(),
    }
}

/// Three points of one storage axis; each run: (point, repeat, iops, p99, pass).
fn sweep(runs: &[(usize, u32, f64, f64, bool)]) -> SweepResults {
    SweepResults {
        schema_version: SWEEP_SCHEMA_VERSION,
        kind: SWEEP_KIND.into(),
        tool: ToolInfo {
            name: "edbstress".into(),
            version: "0".into(),
        },
        name: "t".into(),
        config_text: String::new(),
        axes: vec![SweepAxis {
            name: "compression".into(),
            kind: "storage".into(),
            values: vec!["none".into(), "lzo".into(), "zstd".into()],
        }],
        x_axis: "compression".into(),
        repeats: 2,
        order: "as-written".into(),
        seed: 1,
        databases: "fresh".into(),
        measure_name: Some("Compression ratio".into()),
        started_at: String::new(),
        updated_at: String::new(),
        state: "complete".into(),
        stop_reason: None,
        points: ["none", "lzo", "zstd"]
            .iter()
            .enumerate()
            .map(|(i, v)| SweepPoint {
                id: format!("p{:02}", i + 1),
                values: vec![v.to_string()],
            })
            .collect(),
        runs: runs
            .iter()
            .map(|&(point, repeat, iops, p99, pass)| PointRun {
                point,
                repeat,
                status: "done".into(),
                dir: format!("points/p{:02}-r{repeat}", point + 1),
                run_dir: Some(format!("points/p{:02}-r{repeat}/Performance_x", point + 1)),
                figures: Some(figures(iops, p99, pass)),
                measured: Some("1.5".into()),
                error: None,
            })
            .collect(),
    }
}

#[test]
fn the_best_point_is_the_highest_passing_iops() {
    let s = sweep(&[
        (0, 1, 100.0, 5.0, true),
        (1, 1, 300.0, 5.0, false),
        (2, 1, 200.0, 5.0, true),
    ]);
    let r = recommend(&s);
    assert_eq!(
        r.best.as_ref().unwrap().point,
        2,
        "the failing point is left out"
    );
    assert_eq!(r.runner_up.as_ref().unwrap().point, 0);
    assert_eq!(r.points, (3, 2));
}

#[test]
fn a_tie_within_one_percent_goes_to_the_lower_p99_read_latency() {
    let s = sweep(&[
        (0, 1, 1000.0, 9.0, true),
        (1, 1, 995.0, 3.0, true),
        (2, 1, 500.0, 1.0, true),
    ]);
    let r = recommend(&s);
    assert_eq!(r.best.unwrap().point, 1);
    assert_eq!(r.runner_up.unwrap().point, 0);
}

#[test]
fn the_gap_is_weighed_against_the_spread_between_repeats() {
    let close = sweep(&[
        (0, 1, 100.0, 5.0, true),
        (0, 2, 140.0, 5.0, true),
        (1, 1, 115.0, 5.0, true),
        (1, 2, 135.0, 5.0, true),
    ]);
    let text = recommend(&close).describe(&close).join(" ");
    assert!(text.contains("within the spread"), "{text}");
    let apart = sweep(&[
        (0, 1, 100.0, 5.0, true),
        (0, 2, 102.0, 5.0, true),
        (1, 1, 200.0, 5.0, true),
        (1, 2, 204.0, 5.0, true),
    ]);
    let text = recommend(&apart).describe(&apart).join(" ");
    assert!(text.contains("larger than the spread"), "{text}");
    assert!(text.contains("compression=lzo"), "{text}");
}

#[test]
fn a_repeat_failing_makes_its_point_fail() {
    let s = sweep(&[(0, 1, 100.0, 5.0, true), (0, 2, 400.0, 5.0, false)]);
    let r = recommend(&s);
    assert!(r.best.is_none());
    let text = r.describe(&s).join(" ");
    assert!(text.contains("No point passed"), "{text}");
    assert!(text.contains("250.0 at compression=none"), "{text}");
}

#[test]
fn the_csv_has_one_row_per_run_with_the_axis_values() {
    let s = sweep(&[(0, 1, 100.0, 5.0, true), (2, 2, 200.0, 4.0, true)]);
    let csv = table::render_csv(&s);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("point,repeat,run_order,compression,status,verdict"));
    assert!(lines[0].contains(",compression_ratio,run_dir"));
    assert!(
        lines[2].starts_with("p03,2,2,zstd,done,Pass,,200.00,"),
        "{}",
        lines[2]
    );
}

#[test]
fn a_failed_run_says_which_criteria_it_failed() {
    let mut s = sweep(&[(0, 1, 100.0, 5.0, true), (1, 1, 90.0, 40.0, false)]);
    let why = "Database read average latency 25.1 ms exceeds 20 ms";
    s.runs[1].figures.as_mut().unwrap().failed = vec![why.into()];
    let html = page::render(&s);
    assert!(html.contains(&format!("Fail: {why}")), "{html}");
    let csv = table::render_csv(&s);
    let row = csv.lines().nth(2).unwrap();
    assert!(row.contains(&format!(",Fail,{why},")), "{row}");
}

#[test]
fn the_page_draws_the_parameter_on_the_x_axis() {
    let s = sweep(&[(0, 1, 100.0, 5.0, true), (1, 1, 200.0, 4.0, true)]);
    let html = page::render(&s);
    assert!(html.contains("Database read latency by compression — average"));
    assert!(
        html.contains(">lzo</text>"),
        "category labels on the x axis"
    );
    assert!(html.contains("average limit 20 ms"));
    // Latency on a log axis: the 20 ms limit does not flatten the points under it.
    assert!(html.contains("average latency (ms, log scale)"), "{html}");
    assert!(html.contains("points/p02-r1/Performance_x/report.html"));
    assert!(html.contains("Best: compression=lzo"));
}

#[test]
fn sweep_json_reads_back_and_is_told_apart() {
    let s = sweep(&[(0, 1, 100.0, 5.0, true)]);
    let bytes = serde_json::to_vec(&s).unwrap();
    assert_eq!(read_sweep(&bytes).unwrap(), s);
    assert!(read_sweep(b"{\"kind\":\"aggregate\"}").is_err());
}

#[test]
fn measured_output_becomes_a_number_when_it_holds_one() {
    assert_eq!(measured_number("1.62"), Some(1.62));
    assert_eq!(measured_number("ratio: 1.62x"), Some(1.62));
    assert_eq!(measured_number("n/a"), None);
}
