//! Charts as inline SVG text: line charts (time series, curves), histograms on a log
//! axis, horizontal bar charts. No script and no external resource, so a report opens
//! offline and prints.
//!
//! Every series differs by dash pattern and marker shape as well as by colour, and
//! reference lines carry their label next to them, so a chart printed in black and
//! white still reads. Output is a pure function of the input: the same data gives the
//! same bytes (a re-rendered report equals the original).

use std::fmt::Write;

use crate::text::escape;

mod band;
mod frame;

pub use band::Band;
use frame::Frame;

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values.
    Linear,
    /// Decades evenly spaced (values ≤ 0 are left out).
    Log,
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticks {
    /// Plain numbers: 0, 250, 1.5k.
    Number,
    /// Milliseconds, written with the unit that fits: 5µs, 0.2ms, 1.5s.
    Millis,
    /// Elapsed seconds, written as s, min or h.
    Elapsed,
    /// Percent: 0%, 25%.
    Percent,
}

/// One axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Axis title with its unit: "database read latency (ms, log scale)".
    pub label: String,
    /// Mapping.
    pub scale: Scale,
    /// Tick labels.
    pub ticks: Ticks,
    /// Lowest value shown (default: from the data; 0 for linear axes of non-negative data).
    pub min: Option<f64>,
    /// Highest value shown (default: from the data and the reference lines).
    pub max: Option<f64>,
    /// Category names: when set, the axis is categorical (value `i` is category `i`,
    /// evenly spaced, labelled with its name), e.g. the values of a sweep's parameter.
    pub labels: Vec<String>,
}

impl Axis {
    /// A linear axis starting at zero.
    pub fn linear(label: impl Into<String>, ticks: Ticks) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            ticks,
            min: None,
            max: None,
            labels: Vec::new(),
        }
    }

    /// A categorical axis: values 0, 1, 2 … labelled with `labels`.
    pub fn categories(label: impl Into<String>, labels: Vec<String>) -> Axis {
        let n = labels.len().max(1) as f64;
        Axis {
            min: Some(-0.5),
            max: Some(n - 0.5),
            labels,
            ..Axis::linear(label, Ticks::Number)
        }
    }

    /// The text of the tick at `v` on an axis with tick `step` reaching `hi`.
    fn tick_text(&self, v: f64, step: f64, hi: f64) -> String {
        if self.labels.is_empty() {
            tick_label(v, self.ticks, step, hi)
        } else {
            let i = v.round().max(0.0) as usize;
            self.labels.get(i).cloned().unwrap_or_default()
        }
    }

    /// A logarithmic axis.
    pub fn log(label: impl Into<String>, ticks: Ticks) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Log,
            ticks,
            min: None,
            max: None,
            labels: Vec::new(),
        }
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// A line with markers on some points.
    Line,
    /// Markers only (scatter).
    Markers,
}

/// One data series.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points in x order; a `None` y breaks the line (no data there).
    pub points: Vec<(f64, Option<f64>)>,
    /// Style slot: series with the same slot look the same (0, 1, 2 …).
    pub style: usize,
    /// Line or scatter.
    pub draw: Draw,
    /// Hollow markers (e.g. failed steps), filled otherwise.
    pub hollow: bool,
}

impl Series {
    /// A line series from complete points.
    pub fn line(name: impl Into<String>, style: usize, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points: points.into_iter().map(|(x, y)| (x, Some(y))).collect(),
            style,
            draw: Draw::Line,
            hollow: false,
        }
    }
}

/// A reference line across the plot (a threshold, a target, a percentile).
#[derive(Clone, Debug)]
pub struct RefLine {
    /// Label drawn by the line and in the legend: "average limit 20 ms".
    pub label: String,
    /// Where.
    pub value: f64,
    /// 0: the stricter (average) limit, 1: the looser (maximum) limit, 2: a neutral
    /// marker (target, percentile).
    pub kind: usize,
}

/// One histogram bar between two x values.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    /// Left edge.
    pub x0: f64,
    /// Right edge.
    pub x1: f64,
    /// Height.
    pub y: f64,
}

/// A chart in a plot frame: series, bars, horizontal and vertical reference lines.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// Data series.
    pub series: Vec<Series>,
    /// Histogram bars (drawn under the series).
    pub bars: Vec<Bar>,
    /// Bands (drawn under the series).
    pub bands: Vec<Band>,
    /// Legend text of the bars.
    pub bars_label: Option<String>,
    /// Horizontal reference lines (y values).
    pub h_lines: Vec<RefLine>,
    /// Vertical reference lines (x values).
    pub v_lines: Vec<RefLine>,
    /// Width in SVG units (the chart scales to its container).
    pub width: f64,
    /// Height of the plot area in SVG units.
    pub plot_height: f64,
}

/// Colours of the series slots (Okabe–Ito, readable by colour-blind readers).
const COLORS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000", "#7F7F7F",
];
/// Dash patterns of the series slots, so lines differ in black and white.
const DASHES: [&str; 8] = ["", "7 3", "2 2", "9 3 2 3", "4 4", "1 3", "12 3", "6 2 2 2"];
/// Reference line styles: (colour, dash).
const REF_STYLES: [(&str, &str); 3] = [
    ("#B8860B", "8 4"),
    ("#B00020", "3 3"),
    ("#444444", "10 3 2 3"),
];

const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const TITLE_HEIGHT: f64 = 28.0;
const AXIS_HEIGHT: f64 = 46.0;
const LEGEND_ROW: f64 = 20.0;
const CHAR_WIDTH: f64 = 6.6;

impl Chart {
    /// An empty chart.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            bars: Vec::new(),
            bands: Vec::new(),
            bars_label: None,
            h_lines: Vec::new(),
            v_lines: Vec::new(),
            width: 900.0,
            plot_height: 240.0,
        }
    }

    /// Whether there is anything to plot.
    pub fn has_data(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.points.iter().any(|p| p.1.is_some()))
            || self.bars.iter().any(|b| b.y > 0.0)
    }

    fn x_values(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(|p| p.1.is_some()).map(|p| p.0))
            .collect();
        v.extend(self.bars.iter().flat_map(|b| [b.x0, b.x1]));
        v.extend(self.bands.iter().flat_map(|b| b.points.iter().map(|p| p.0)));
        v.extend(self.v_lines.iter().map(|l| l.value));
        v
    }

    fn y_values(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|p| p.1))
            .collect();
        v.extend(self.bars.iter().map(|b| b.y));
        v.extend(
            self.bands
                .iter()
                .flat_map(|b| b.points.iter().flat_map(|p| [p.1, p.2])),
        );
        v.extend(self.h_lines.iter().map(|l| l.value));
        v
    }

    /// The chart as an `<svg>` element.
    pub fn to_svg(&self) -> String {
        let legend = self.legend_items();
        let legend_rows = layout_legend(&legend, self.width - MARGIN_LEFT - MARGIN_RIGHT);
        let rows = legend_rows.last().map_or(0, |r| r.0 + 1);
        let plot_top = TITLE_HEIGHT;
        let plot_bottom = plot_top + self.plot_height;
        let height = plot_bottom + AXIS_HEIGHT + rows as f64 * LEGEND_ROW + 6.0;
        let left = MARGIN_LEFT;
        let right = self.width - MARGIN_RIGHT;
        let mut o = String::new();
        let _ = write!(
            o,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{t}\" font-family=\"sans-serif\" font-size=\"12\">",
            w = num(self.width),
            h = num(height),
            t = escape(&self.title)
        );
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
            num(left),
            escape(&self.title)
        );
        let _ = write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#888\"/>",
            num(left),
            num(plot_top),
            num(right - left),
            num(self.plot_height)
        );
        if !self.has_data() {
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#666\">no data: nothing of this kind happened in the measured period</text></svg>",
                num((left + right) / 2.0),
                num(plot_top + self.plot_height / 2.0)
            );
            return o;
        }
        let xs = Mapping::new(&self.x, &self.x_values(), left, right, false);
        let ys = Mapping::new(&self.y, &self.y_values(), plot_bottom, plot_top, true);
        let frame = Frame {
            left,
            right,
            top: plot_top,
            bottom: plot_bottom,
        };
        self.draw_axes(&mut o, &frame, &xs, &ys);
        self.draw_bars(&mut o, &frame, &xs, &ys);
        for b in &self.bands {
            band::draw_band(&mut o, b, &xs, &ys);
        }
        // Series.
        for s in &self.series {
            draw_series(&mut o, s, &xs, &ys);
        }
        // Reference lines last, so they stay visible over the data.
        self.draw_reference_lines(&mut o, &frame, &xs, &ys);
        // Legend.
        let legend_top = plot_bottom + AXIS_HEIGHT;
        for ((row, x), item) in legend_rows.iter().zip(&legend) {
            let y = legend_top + *row as f64 * LEGEND_ROW + 8.0;
            let x = left + x;
            draw_legend_key(&mut o, item, x, y);
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                num(x + 34.0),
                num(y + 4.0),
                escape(item.text())
            );
        }
        o.push_str("</svg>");
        o
    }

    fn legend_items(&self) -> Vec<LegendItem<'_>> {
        let mut items = Vec::new();
        if let Some(label) = &self.bars_label {
            items.push(LegendItem::Bars(label));
        }
        items.extend(self.bands.iter().map(LegendItem::Band));
        items.extend(self.series.iter().map(LegendItem::Series));
        items.extend(
            self.h_lines
                .iter()
                .chain(&self.v_lines)
                .map(LegendItem::Ref),
        );
        items
    }
}

enum LegendItem<'a> {
    Band(&'a Band),
    Series(&'a Series),
    Ref(&'a RefLine),
    Bars(&'a str),
}

impl LegendItem<'_> {
    fn text(&self) -> &str {
        match self {
            LegendItem::Band(b) => &b.name,
            LegendItem::Series(s) => &s.name,
            LegendItem::Ref(l) => &l.label,
            LegendItem::Bars(t) => t,
        }
    }
}

/// (row, x offset) of each legend item, wrapping at `width`.
fn layout_legend(items: &[LegendItem<'_>], width: f64) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let (mut row, mut x) = (0usize, 0.0f64);
    for item in items {
        let w = 34.0 + item.text().chars().count() as f64 * CHAR_WIDTH + 18.0;
        if x > 0.0 && x + w > width {
            row += 1;
            x = 0.0;
        }
        out.push((row, x));
        x += w;
    }
    out
}

fn draw_legend_key(o: &mut String, item: &LegendItem<'_>, x: f64, y: f64) {
    match item {
        LegendItem::Series(s) => {
            let (color, dash) = series_style(s.style);
            if s.draw == Draw::Line {
                let _ = write!(
                    o,
                    "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>",
                    num(x),
                    num(x + 28.0),
                    y = num(y)
                );
            }
            marker(o, s.style, x + 14.0, y, color, s.hollow);
        }
        LegendItem::Ref(l) => {
            let (color, dash) = REF_STYLES[l.kind.min(2)];
            let _ = write!(
                o,
                "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>",
                num(x),
                num(x + 28.0),
                y = num(y)
            );
        }
        LegendItem::Band(b) => {
            let _ = write!(
                o,
                "<rect x=\"{}\" y=\"{}\" width=\"28\" height=\"10\" fill=\"{}\" fill-opacity=\"0.22\"/>",
                num(x),
                num(y - 5.0),
                band::band_color(b.style)
            );
        }
        LegendItem::Bars(_) => {
            let _ = write!(
                o,
                "<rect x=\"{}\" y=\"{}\" width=\"28\" height=\"10\" fill=\"#9DBCD4\" stroke=\"#2B506E\"/>",
                num(x),
                num(y - 5.0)
            );
        }
    }
}

fn series_style(slot: usize) -> (&'static str, &'static str) {
    (COLORS[slot % COLORS.len()], DASHES[slot % DASHES.len()])
}

fn draw_series(o: &mut String, s: &Series, xs: &Mapping, ys: &Mapping) {
    let (color, dash) = series_style(s.style);
    let visible: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|&(x, y)| {
            let y = y?;
            (xs.contains(x) && ys.contains(y)).then(|| (xs.map(x), ys.map(y)))
        })
        .collect();
    if s.draw == Draw::Line {
        // One polyline per run of consecutive points with data.
        let mut run: Vec<String> = Vec::new();
        let flush = |run: &mut Vec<String>, o: &mut String| {
            if run.len() > 1 {
                let _ = write!(
                    o,
                    "<polyline class=\"series\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\" stroke-linejoin=\"round\" points=\"{}\"/>",
                    run.join(" ")
                );
            }
            run.clear();
        };
        for &(x, y) in &s.points {
            match y {
                Some(y) if xs.contains(x) && ys.contains(y) => {
                    run.push(format!("{},{}", num(xs.map(x)), num(ys.map(y))));
                }
                _ => flush(&mut run, o),
            }
        }
        flush(&mut run, o);
    }
    // Markers on every point when few, else on a regular subset (shape tells series
    // apart in black and white).
    let every = if s.draw == Draw::Markers {
        1
    } else {
        visible.len().div_ceil(24).max(1)
    };
    let offset = s.style % every;
    for (i, &(x, y)) in visible.iter().enumerate() {
        if i % every == offset || visible.len() == 1 {
            marker(o, s.style, x, y, color, s.hollow);
        }
    }
}

/// A marker of the series slot `slot`: five shapes, filled for slots 0–4 and hollow
/// for 5–9 (so up to ten series never share one), or hollow when asked.
fn marker(o: &mut String, slot: usize, x: f64, y: f64, color: &str, hollow: bool) {
    let hollow = hollow || (slot / 5) % 2 == 1;
    let fill = if hollow { "#fff" } else { color };
    let attrs = format!("fill=\"{fill}\" stroke=\"{color}\" stroke-width=\"1.5\"");
    let _ = match slot % 5 {
        0 => write!(
            o,
            "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" {attrs}/>",
            num(x),
            num(y)
        ),
        1 => write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"7\" height=\"7\" {attrs}/>",
            num(x - 3.5),
            num(y - 3.5)
        ),
        2 => write!(
            o,
            "<path d=\"M{} {}l4 7h-8z\" {attrs}/>",
            num(x),
            num(y - 4.5)
        ),
        3 => write!(
            o,
            "<path d=\"M{} {}l4.5 4.5l-4.5 4.5l-4.5 -4.5z\" {attrs}/>",
            num(x),
            num(y - 4.5)
        ),
        _ => write!(
            o,
            "<path d=\"M{} {}l8 8m0 -8l-8 8\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
            num(x - 4.0),
            num(y - 4.0)
        ),
    };
}

/// Value → pixel along one axis.
struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
    /// Linear axes: the tick step.
    step: f64,
}

impl Mapping {
    /// `headroom`: leave space above the highest value (value axes), not for the time
    /// axis, which ends with the data.
    fn new(axis: &Axis, values: &[f64], p0: f64, p1: f64, headroom: bool) -> Mapping {
        match axis.scale {
            Scale::Linear => {
                let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
                let dmin = finite.iter().copied().fold(f64::INFINITY, f64::min);
                let dmax = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let (dmin, dmax) = if finite.is_empty() {
                    (0.0, 1.0)
                } else {
                    (dmin, dmax)
                };
                let lo = axis.min.unwrap_or(if dmin >= 0.0 { 0.0 } else { dmin });
                let mut hi = axis.max.unwrap_or(dmax);
                if hi <= lo {
                    hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                }
                let step = if !axis.labels.is_empty() {
                    1.0
                } else if axis.ticks == Ticks::Elapsed {
                    // Whole steps of the axis's one unit (1min, not 100s on a 5min axis).
                    let (unit, _) = elapsed_unit(hi);
                    nice_step((hi - lo) / 6.0 / unit) * unit
                } else {
                    nice_step((hi - lo) / 6.0)
                };
                let lo = if axis.min.is_some() {
                    lo
                } else {
                    (lo / step).floor() * step
                };
                let hi = if axis.max.is_some() {
                    hi
                } else if headroom {
                    // So the highest point is not on the frame.
                    ((hi + step * 0.05) / step).ceil() * step
                } else {
                    hi
                };
                Mapping {
                    scale: Scale::Linear,
                    lo,
                    hi,
                    p0,
                    p1,
                    step,
                }
            }
            Scale::Log => {
                let positive: Vec<f64> = values
                    .iter()
                    .copied()
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .collect();
                let dmin = positive.iter().copied().fold(f64::INFINITY, f64::min);
                let dmax = positive.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let (dmin, dmax) = if positive.is_empty() {
                    (1.0, 10.0)
                } else {
                    (dmin, dmax)
                };
                // A margin of half a step of 1-2-5 on each side, so a limit line or the
                // highest point is never drawn on the frame.
                let pad = if headroom { 1.5 } else { 1.0 };
                let mut lo = axis.min.unwrap_or(dmin / pad);
                let mut hi = axis.max.unwrap_or(dmax * pad);
                if hi <= lo {
                    hi = lo * 10.0;
                }
                if (hi / lo).log10() < 1.0 {
                    let widen = (10.0 / (hi / lo)).sqrt();
                    lo /= widen;
                    hi *= widen;
                }
                Mapping {
                    scale: Scale::Log,
                    lo,
                    hi,
                    p0,
                    p1,
                    step: 0.0,
                }
            }
        }
    }

    fn contains(&self, v: f64) -> bool {
        let eps = (self.hi - self.lo).abs() * 1e-9;
        v.is_finite()
            && v >= self.lo - eps
            && v <= self.hi + eps
            && (self.scale == Scale::Linear || v > 0.0)
    }

    fn map(&self, v: f64) -> f64 {
        let t = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()),
        };
        self.p0 + t * (self.p1 - self.p0)
    }

    /// Tick values and whether each is labelled (major).
    fn ticks(&self) -> Vec<(f64, bool)> {
        let mut out = Vec::new();
        match self.scale {
            Scale::Linear => {
                let first = (self.lo / self.step).ceil() as i64;
                let last = (self.hi / self.step + 1e-9).floor() as i64;
                for k in first..=last {
                    out.push((k as f64 * self.step, true));
                }
            }
            Scale::Log => {
                let decades = (self.hi / self.lo).log10();
                let first = self.lo.log10().floor() as i32;
                let last = self.hi.log10().ceil() as i32;
                for e in first..=last {
                    let base = 10f64.powi(e);
                    for m in 1..10 {
                        let v = base * f64::from(m);
                        if !self.contains(v) {
                            continue;
                        }
                        // Few decades: also label 2 and 5, so the axis has enough labels.
                        let major = m == 1 || (decades < 2.5 && (m == 2 || m == 5));
                        out.push((v, major));
                    }
                }
            }
        }
        out
    }
}

/// 1, 2 or 5 × 10^k at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let base = 10f64.powf(raw.log10().floor());
    let m = raw / base;
    let nice = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * base
}

/// A tick label on an axis with tick `step` reaching `hi`.
fn tick_label(v: f64, ticks: Ticks, step: f64, hi: f64) -> String {
    match ticks {
        Ticks::Number => short_number(v, step),
        Ticks::Percent => format!("{}%", short_number(v, step)),
        Ticks::Millis => millis_label(v),
        Ticks::Elapsed => elapsed_label(v, step, hi),
    }
}

fn short_number(v: f64, step: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6, 2))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3, 1))
    } else if step >= 1.0 || step == 0.0 && a >= 1.0 {
        trim(v, 0)
    } else {
        let digits = if step > 0.0 {
            (-step.log10().floor()) as usize
        } else {
            (-a.log10().floor()).max(0.0) as usize
        };
        trim(v, digits.min(6))
    }
}

fn trim(v: f64, digits: usize) -> String {
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// "5µs", "0.2ms", "20ms", "1.5s".
pub fn millis_label(ms: f64) -> String {
    if ms < 1e-3 {
        format!("{}ns", trim(ms * 1e6, 0))
    } else if ms < 1.0 {
        let us = ms * 1e3;
        format!("{}µs", trim(us, if us < 10.0 { 1 } else { 0 }))
    } else if ms < 1000.0 {
        format!("{}ms", trim(ms, if ms < 10.0 { 1 } else { 0 }))
    } else {
        format!("{}s", trim(ms / 1000.0, 1))
    }
}

/// The one unit of an elapsed-time axis reaching `hi` seconds: (seconds, suffix).
fn elapsed_unit(hi: f64) -> (f64, &'static str) {
    if hi < 120.0 {
        (1.0, "s")
    } else if hi < 7200.0 {
        (60.0, "min")
    } else {
        (3600.0, "h")
    }
}

/// `s` seconds in the unit of an axis reaching `hi` with tick `step`: every tick of an
/// axis has the same unit ("0min, 1min, 5min", never "100s, 3.3min").
fn elapsed_label(s: f64, step: f64, hi: f64) -> String {
    let (unit, suffix) = elapsed_unit(hi);
    let digits = if step / unit >= 1.0 { 0 } else { 1 };
    format!("{}{suffix}", trim(s / unit, digits))
}

/// A coordinate with at most 1 decimal (small, deterministic output).
fn num(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// One row of a horizontal bar chart.
#[derive(Clone, Debug)]
pub struct BarRow {
    /// Label left of the bars.
    pub label: String,
    /// Values, one bar per column (drawn as a group).
    pub values: Vec<f64>,
    /// Text after each bar.
    pub texts: Vec<String>,
}

/// Horizontal grouped bars: rows of labelled values with a shared 0..max scale, e.g.
/// the share of I/Os and of bytes of each request size.
pub fn hbar_chart(title: &str, columns: &[&str], rows: &[BarRow], max: f64) -> String {
    let label_w = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0) as f64
        * CHAR_WIDTH
        + 16.0;
    let width = 900.0;
    let bar_h = 12.0;
    let group_h = columns.len() as f64 * (bar_h + 2.0) + 10.0;
    let top = TITLE_HEIGHT + LEGEND_ROW;
    let height = top + rows.len() as f64 * group_h + 8.0;
    let bar_w = width - label_w - 170.0;
    let max = if max > 0.0 { max } else { 1.0 };
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{t}\" font-family=\"sans-serif\" font-size=\"12\">",
        w = num(width),
        h = num(height),
        t = escape(title)
    );
    let _ = write!(
        o,
        "<text x=\"4\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
        escape(title)
    );
    // Legend: fill patterns differ (solid, light), so columns read in black and white.
    let fills = ["#2B506E", "#9DBCD4", "#E69F00"];
    let mut lx = label_w;
    for (i, c) in columns.iter().enumerate() {
        let _ = write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{}\" stroke=\"#2B506E\"/><text x=\"{}\" y=\"{}\">{}</text>",
            num(lx),
            num(TITLE_HEIGHT + 2.0),
            fills[i % fills.len()],
            num(lx + 20.0),
            num(TITLE_HEIGHT + 11.0),
            escape(c)
        );
        lx += 40.0 + c.chars().count() as f64 * CHAR_WIDTH;
    }
    for (r, row) in rows.iter().enumerate() {
        let gy = top + r as f64 * group_h;
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            num(label_w - 8.0),
            num(gy + group_h / 2.0),
            escape(&row.label)
        );
        for (i, v) in row.values.iter().enumerate() {
            let y = gy + i as f64 * (bar_h + 2.0);
            let w = (v / max).clamp(0.0, 1.0) * bar_w;
            let _ = write!(
                o,
                "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#2B506E\" stroke-width=\"0.8\"/>",
                num(label_w),
                num(y),
                num(w.max(0.5)),
                num(bar_h),
                fills[i % fills.len()]
            );
            if let Some(t) = row.texts.get(i) {
                let _ = write!(
                    o,
                    "<text x=\"{}\" y=\"{}\">{}</text>",
                    num(label_w + w + 6.0),
                    num(y + bar_h - 2.0),
                    escape(t)
                );
            }
        }
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests;
