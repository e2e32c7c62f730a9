//! The parts of a chart drawn over its plot area: grid and axes, a histogram's bars,
//! reference lines.

use std::fmt::Write;

use super::{Chart, Mapping, REF_STYLES, num};
use crate::text::escape;

/// The plot area's edges in SVG coordinates.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    pub(super) left: f64,
    pub(super) right: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
}

impl Chart {
    /// Grid lines, tick labels and the axis labels.
    pub(super) fn draw_axes(&self, o: &mut String, frame: &Frame, xs: &Mapping, ys: &Mapping) {
        let Frame {
            left,
            right,
            top: plot_top,
            bottom: plot_bottom,
        } = *frame;
        for (v, major) in ys.ticks() {
            let py = ys.map(v);
            let _ = write!(
                o,
                "<line x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\" stroke=\"{}\"/>",
                num(left),
                num(right),
                if major { "#ccc" } else { "#eee" },
                p = num(py)
            );
            if major {
                let _ = write!(
                    o,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                    num(left - 6.0),
                    num(py + 4.0),
                    escape(&self.y.tick_text(v, ys.step, ys.hi))
                );
            }
        }
        for (v, major) in xs.ticks() {
            let px = xs.map(v);
            let _ = write!(
                o,
                "<line x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\" stroke=\"{}\"/>",
                num(plot_top),
                num(plot_bottom),
                if major { "#ddd" } else { "#f2f2f2" },
                p = num(px)
            );
            if major {
                let _ = write!(
                    o,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    num(px),
                    num(plot_bottom + 16.0),
                    escape(&self.x.tick_text(v, xs.step, xs.hi))
                );
            }
        }
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            num((left + right) / 2.0),
            num(plot_bottom + 34.0),
            escape(&self.x.label)
        );
        let _ = write!(
            o,
            "<text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            num((plot_top + plot_bottom) / 2.0),
            escape(&self.y.label)
        );
    }

    /// The histogram's bars, if any.
    pub(super) fn draw_bars(&self, o: &mut String, frame: &Frame, xs: &Mapping, ys: &Mapping) {
        let plot_bottom = frame.bottom;
        if !self.bars.is_empty() {
            o.push_str(
                "<g class=\"bars\" fill=\"#9DBCD4\" stroke=\"#2B506E\" stroke-width=\"0.8\">",
            );
            for b in &self.bars {
                if b.y <= 0.0 {
                    continue;
                }
                let (x0, x1) = (xs.map(b.x0), xs.map(b.x1));
                let y = ys.map(b.y).min(plot_bottom);
                let _ = write!(
                    o,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                    num(x0),
                    num(y),
                    num((x1 - x0).max(0.5)),
                    num(plot_bottom - y)
                );
            }
            o.push_str("</g>");
        }
    }

    /// The horizontal (thresholds) and vertical (markers) reference lines.
    pub(super) fn draw_reference_lines(
        &self,
        o: &mut String,
        frame: &Frame,
        xs: &Mapping,
        ys: &Mapping,
    ) {
        let Frame {
            left,
            right,
            top: plot_top,
            bottom: plot_bottom,
        } = *frame;
        for l in &self.h_lines {
            if !ys.contains(l.value) {
                continue;
            }
            let (color, dash) = REF_STYLES[l.kind.min(2)];
            let py = num(ys.map(l.value));
            let _ = write!(
                o,
                "<line class=\"threshold\" x1=\"{}\" y1=\"{py}\" x2=\"{}\" y2=\"{py}\" stroke=\"{color}\" stroke-width=\"2.5\" stroke-dasharray=\"{dash}\"/>",
                num(left),
                num(right)
            );
            let _ = write!(
                o,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"{color}\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
                num(right - 4.0),
                num(ys.map(l.value) - 4.0),
                escape(&l.label)
            );
        }
        for l in &self.v_lines {
            if !xs.contains(l.value) {
                continue;
            }
            let (color, dash) = REF_STYLES[l.kind.min(2)];
            let px = xs.map(l.value);
            let _ = write!(
                o,
                "<line x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\" stroke=\"{color}\" stroke-width=\"1.5\" stroke-dasharray=\"{dash}\"/>",
                num(plot_top),
                num(plot_bottom),
                p = num(px)
            );
            // Over bars (a histogram's percentile markers) a label would sit on top of
            // them: the legend names those lines instead.
            if self.bars.is_empty() {
                let _ = write!(
                    o,
                    "<text class=\"marker-label\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"end\" fill=\"{color}\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{}</text>",
                    num(px - 4.0),
                    num(plot_top + 4.0),
                    escape(&l.label)
                );
            }
        }
    }
}
