//! Unit tests of the chart primitives: axes, ticks, legends, series.

use super::*;

#[test]
fn nice_steps_are_1_2_5() {
    assert_eq!(nice_step(0.7), 1.0);
    assert_eq!(nice_step(1.5), 2.0);
    assert_eq!(nice_step(3.0), 5.0);
    assert_eq!(nice_step(7.0), 10.0);
    assert_eq!(nice_step(130.0), 200.0);
}

#[test]
fn labels_pick_a_fitting_unit() {
    assert_eq!(millis_label(0.005), "5µs");
    assert_eq!(millis_label(0.25), "250µs");
    assert_eq!(millis_label(2.0), "2ms");
    assert_eq!(millis_label(20.0), "20ms");
    assert_eq!(millis_label(1500.0), "1.5s");
    assert_eq!(elapsed_label(30.0, 10.0, 60.0), "30s");
    assert_eq!(elapsed_label(3600.0, 600.0, 3600.0), "60min");
    assert_eq!(elapsed_label(90.0, 30.0, 3600.0), "1.5min");
    assert_eq!(short_number(2500.0, 500.0), "2500");
    assert_eq!(short_number(25000.0, 5000.0), "25k");
    assert_eq!(short_number(0.25, 0.05), "0.25");
}

#[test]
fn histogram_markers_are_named_in_the_legend_not_over_the_bars() {
    let mut c = Chart::new(
        "Database read latency histogram",
        Axis::log("ms", Ticks::Millis),
        Axis::linear("reads", Ticks::Number),
    );
    c.bars = vec![
        Bar {
            x0: 0.1,
            x1: 1.0,
            y: 50.0,
        },
        Bar {
            x0: 1.0,
            x1: 10.0,
            y: 80.0,
        },
    ];
    c.v_lines.push(RefLine {
        label: "p99 4.2 ms".into(),
        value: 4.2,
        kind: 2,
    });
    let svg = c.to_svg();
    assert!(!svg.contains("class=\"marker-label\""), "{svg}");
    assert_eq!(
        svg.matches("p99 4.2 ms").count(),
        1,
        "once, in the legend: {svg}"
    );
    // Without bars the label stays beside its line.
    c.bars.clear();
    c.series
        .push(Series::line("x", 0, vec![(1.0, 1.0), (5.0, 2.0)]));
    assert!(c.to_svg().contains("class=\"marker-label\""));
}

#[test]
fn a_line_chart_draws_points_thresholds_and_legend() {
    let mut c = Chart::new(
        "Database read latency <total>",
        Axis::linear("elapsed", Ticks::Elapsed),
        Axis::log("ms", Ticks::Millis),
    );
    c.series.push(Series::line(
        "average",
        0,
        vec![(1.0, 0.5), (2.0, 0.7), (3.0, 0.6)],
    ));
    c.h_lines.push(RefLine {
        label: "average limit 20 ms".into(),
        value: 20.0,
        kind: 0,
    });
    c.h_lines.push(RefLine {
        label: "maximum limit 100 ms".into(),
        value: 100.0,
        kind: 1,
    });
    let svg = c.to_svg();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("&lt;total&gt;"));
    assert_eq!(svg.matches("<polyline").count(), 1);
    assert_eq!(svg.matches("class=\"threshold\"").count(), 2);
    assert!(svg.contains(">average limit 20 ms</text>"));
    // Same input, same bytes.
    assert_eq!(svg, c.to_svg());
}

#[test]
fn gaps_split_lines_and_empty_charts_say_so() {
    let mut c = Chart::new(
        "t",
        Axis::linear("x", Ticks::Number),
        Axis::linear("y", Ticks::Number),
    );
    assert!(c.to_svg().contains("no data"));
    c.series.push(Series {
        name: "s".into(),
        points: vec![
            (1.0, Some(1.0)),
            (2.0, Some(2.0)),
            (3.0, None),
            (4.0, Some(1.0)),
            (5.0, Some(3.0)),
        ],
        style: 1,
        draw: Draw::Line,
        hollow: false,
    });
    assert_eq!(c.to_svg().matches("<polyline").count(), 2);
}

#[test]
fn a_time_axis_writes_every_tick_in_one_unit() {
    // Five minutes of samples: 0s … 300s, once labelled "0s, 100s, 3.3min, 5min".
    let mut c = Chart::new(
        "IOPS",
        Axis::linear("elapsed", Ticks::Elapsed),
        Axis::linear("IOPS", Ticks::Number),
    );
    c.series.push(Series::line(
        "db reads",
        0,
        (0..=30).map(|i| (f64::from(i) * 10.0, 100.0)).collect(),
    ));
    let svg = c.to_svg();
    let labels: Vec<&str> = svg
        .split("text-anchor=\"middle\">")
        .skip(1)
        .filter_map(|t| t.split('<').next())
        .filter(|t| t.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    assert!(labels.len() >= 4, "{labels:?}");
    assert!(labels.iter().all(|l| l.ends_with("min")), "{labels:?}");
    assert!(
        labels.contains(&"0min") && labels.contains(&"5min"),
        "{labels:?}"
    );
}

#[test]
fn series_five_apart_have_markers_of_their_own() {
    let mut filled = String::new();
    marker(&mut filled, 1, 10.0, 10.0, "#000", false);
    let mut other = String::new();
    marker(&mut other, 6, 10.0, 10.0, "#000", false);
    assert!(filled.contains("fill=\"#000\""), "{filled}");
    assert!(other.contains("fill=\"#fff\""), "slot 6 is hollow: {other}");
}
