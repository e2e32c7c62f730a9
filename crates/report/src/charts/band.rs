//! A band between two values at each x (the spread of several series), drawn as a
//! translucent area under the lines, in the colour of a series slot.

use std::fmt::Write;

use super::{COLORS, Mapping, num};

/// The area between `low` and `high` at each x.
#[derive(Clone, Debug)]
pub struct Band {
    /// Legend text.
    pub name: String,
    /// Colour slot, as a series' style.
    pub style: usize,
    /// (x, low, high) in x order.
    pub points: Vec<(f64, f64, f64)>,
}

pub(super) fn band_color(style: usize) -> &'static str {
    COLORS[style % COLORS.len()]
}

/// The band as one polygon: along the highs left to right, back along the lows. Points
/// outside the axes' ranges (a log axis cannot show 0) are left out.
pub(super) fn draw_band(o: &mut String, band: &Band, xs: &Mapping, ys: &Mapping) {
    let visible: Vec<(f64, f64, f64)> = band
        .points
        .iter()
        .copied()
        .filter(|&(x, lo, hi)| xs.contains(x) && ys.contains(lo) && ys.contains(hi))
        .collect();
    if visible.len() < 2 {
        return;
    }
    let mut points: Vec<String> = visible
        .iter()
        .map(|&(x, _, hi)| format!("{},{}", num(xs.map(x)), num(ys.map(hi))))
        .collect();
    points.extend(
        visible
            .iter()
            .rev()
            .map(|&(x, lo, _)| format!("{},{}", num(xs.map(x)), num(ys.map(lo)))),
    );
    let _ = write!(
        o,
        "<polygon class=\"band\" fill=\"{}\" fill-opacity=\"0.22\" stroke=\"none\" points=\"{}\"/>",
        band_color(band.style),
        points.join(" ")
    );
}
