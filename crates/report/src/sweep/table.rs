//! `sweep.csv`: one row per point and repeat, in run order — the axis values, then the
//! main figures, the verdict, the measured column and the run directory.

use super::{ClassFigures, SweepResults};

/// The figure columns after the axes, per I/O class.
const CLASS_COLUMNS: [&str; 4] = ["iops", "mb_s", "avg_ms", "p99_ms"];

/// The header row.
pub fn header(s: &SweepResults) -> Vec<String> {
    let mut h = vec!["point".to_string(), "repeat".into(), "run_order".into()];
    h.extend(s.axes.iter().map(|a| a.name.clone()));
    h.extend([
        "status".into(),
        "verdict".into(),
        "failed_criteria".into(),
        "transactional_iops".into(),
    ]);
    for class in ["db_read", "db_write", "log_write"] {
        h.extend(CLASS_COLUMNS.iter().map(|c| format!("{class}_{c}")));
    }
    h.push(measure_column(s));
    h.push("run_dir".into());
    h
}

/// The measured column's name: the measure's name in lower case with `_` for other
/// characters, "measured" without one.
pub fn measure_column(s: &SweepResults) -> String {
    match &s.measure_name {
        Some(n) if !n.trim().is_empty() => n
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .collect(),
        _ => "measured".into(),
    }
}

fn class_cells(c: &ClassFigures) -> [String; 4] {
    [
        format!("{:.2}", c.per_sec),
        format!("{:.3}", c.mb_per_sec),
        format!("{:.3}", c.avg_ms),
        format!("{:.3}", c.p99_ms),
    ]
}

/// The rows (without the header), in run order.
pub fn rows(s: &SweepResults) -> Vec<Vec<String>> {
    s.runs
        .iter()
        .enumerate()
        .map(|(order, r)| {
            let point = s.points.get(r.point);
            let mut row = vec![
                point.map(|p| p.id.clone()).unwrap_or_default(),
                r.repeat.to_string(),
                (order + 1).to_string(),
            ];
            for i in 0..s.axes.len() {
                row.push(
                    point
                        .and_then(|p| p.values.get(i))
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            row.push(r.status.clone());
            match &r.figures {
                Some(f) => {
                    row.push(f.verdict.label().to_string());
                    row.push(f.failed.join("; "));
                    row.push(format!("{:.2}", f.transactional_iops));
                    for c in [&f.db_read, &f.db_write, &f.log_write] {
                        row.extend(class_cells(c));
                    }
                }
                None => row.extend(std::iter::repeat_n(String::new(), 3 + 12)),
            }
            row.push(r.measured.clone().unwrap_or_default());
            row.push(r.run_dir.clone().unwrap_or_default());
            row
        })
        .collect()
}

/// `sweep.csv`.
pub fn render_csv(s: &SweepResults) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail; a record is never malformed (fixed width).
    let _ = w.write_record(header(s));
    for row in rows(s) {
        let _ = w.write_record(row);
    }
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}
