//! The solution data layout as a figure (the ESRP documents' "Figure 1" topology): each
//! mailbox server as a box listing its database copies, active ones filled and passive
//! ones hollow, joined by lines to the storage that holds them. Inline SVG, like the
//! report's charts: no image to load (the document's Content-Security-Policy loads
//! none), and prints in black and white (filled or hollow says the role; the layout
//! table beside it has the words).

use std::fmt::Write;

use super::info::LayoutRow;
use crate::text::escape;

/// Figure width in CSS pixels (the document's text column).
const WIDTH: f64 = 680.0;
/// Servers side by side before the figure starts a new row of them.
const PER_ROW: usize = 4;
/// Servers drawn; the layout table lists every one.
const MAX_SERVERS: usize = 16;
/// Copies listed in a server's box before "+N more".
const MAX_COPIES: usize = 8;
const LINE: f64 = 14.0;
const GAP: f64 = 16.0;

/// One server and its copies, in the layout's order.
struct ServerBox<'a> {
    name: &'a str,
    copies: Vec<&'a LayoutRow>,
}

/// The layout figure, or None for an empty layout.
pub fn layout_figure(layout: &[LayoutRow]) -> Option<String> {
    if layout.is_empty() {
        return None;
    }
    let mut servers: Vec<ServerBox<'_>> = Vec::new();
    let mut storages: Vec<&str> = Vec::new();
    for row in layout {
        match servers.iter_mut().find(|s| s.name == row.server) {
            Some(s) => s.copies.push(row),
            None => servers.push(ServerBox {
                name: &row.server,
                copies: vec![row],
            }),
        }
        if !storages.contains(&row.storage.as_str()) {
            storages.push(&row.storage);
        }
    }
    let hidden = servers.len().saturating_sub(MAX_SERVERS);
    servers.truncate(MAX_SERVERS);

    let cols = servers.len().min(PER_ROW);
    let box_w = (WIDTH - GAP * (cols as f64 + 1.0)) / cols as f64;
    let box_h = |s: &ServerBox<'_>| 26.0 + LINE * (s.copies.len().min(MAX_COPIES + 1)) as f64 + 6.0;
    let mut rows_h: Vec<f64> = Vec::new();
    for chunk in servers.chunks(PER_ROW) {
        rows_h.push(chunk.iter().map(box_h).fold(0.0, f64::max));
    }
    let servers_h: f64 = rows_h.iter().sum::<f64>() + GAP * rows_h.len() as f64;
    let storage_top = GAP + servers_h + 36.0;
    let scols = storages.len().min(PER_ROW);
    let sbox_w = (WIDTH - GAP * (scols as f64 + 1.0)) / scols as f64;
    let srows = storages.len().div_ceil(PER_ROW);
    let sbox_h = 34.0;
    let height = storage_top + srows as f64 * (sbox_h + GAP) + if hidden > 0 { LINE } else { 0.0 };

    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"topology\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\" role=\"img\" aria-label=\"Solution data layout: {} servers, {} storage\" font-family=\"sans-serif\" font-size=\"11\">",
        servers.len() + hidden,
        storages.len()
    );
    let storage_at = |i: usize| {
        let (r, c) = (i / PER_ROW, i % PER_ROW);
        (
            GAP + c as f64 * (sbox_w + GAP),
            storage_top + r as f64 * (sbox_h + GAP),
        )
    };
    // Lines first, so the boxes cover their ends.
    let mut y = GAP;
    let mut boxes = Vec::new();
    for (r, chunk) in servers.chunks(PER_ROW).enumerate() {
        for (c, s) in chunk.iter().enumerate() {
            let x = GAP + c as f64 * (box_w + GAP);
            boxes.push((x, y, s));
            let mut used: Vec<usize> = Vec::new();
            for copy in &s.copies {
                let i = storages
                    .iter()
                    .position(|&n| n == copy.storage)
                    .unwrap_or(0);
                if !used.contains(&i) {
                    used.push(i);
                }
            }
            for i in used {
                let (sx, sy) = storage_at(i);
                let _ = write!(
                    o,
                    "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{sy:.1}\" stroke=\"#7a8a99\" stroke-width=\"1.2\"/>",
                    x + box_w / 2.0,
                    y + box_h(s),
                    sx + sbox_w / 2.0
                );
            }
        }
        y += rows_h[r] + GAP;
    }
    for (x, y, s) in boxes {
        server_box(&mut o, x, y, box_w, box_h(s), s);
    }
    for (i, name) in storages.iter().enumerate() {
        let (x, y) = storage_at(i);
        let _ = write!(
            o,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{sbox_w:.1}\" height=\"{sbox_h}\" rx=\"3\" fill=\"#e8eef3\" stroke=\"#2B506E\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            x + sbox_w / 2.0,
            y + 21.0,
            escape(&fit(name, sbox_w))
        );
    }
    if hidden > 0 {
        let _ = write!(
            o,
            "<text x=\"{GAP}\" y=\"{:.1}\">… and {hidden} more servers (Table: Solution data layout)</text>",
            height - 4.0
        );
    }
    o.push_str("</svg>");
    Some(o)
}

/// A server's box: its name, then one line per copy with a filled (active) or hollow
/// (passive) marker.
fn server_box(o: &mut String, x: f64, y: f64, w: f64, h: f64, s: &ServerBox<'_>) {
    let _ = write!(
        o,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" rx=\"3\" fill=\"#ffffff\" stroke=\"#2B506E\" stroke-width=\"1.5\"/><text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\">{}</text>",
        x + 8.0,
        y + 17.0,
        escape(&fit(s.name, w - 16.0))
    );
    for (k, copy) in s.copies.iter().take(MAX_COPIES).enumerate() {
        let ly = y + 26.0 + LINE * k as f64;
        let active = copy.role.trim().to_lowercase().starts_with("active");
        let _ = write!(
            o,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\" stroke=\"#2B506E\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x + 12.0,
            ly + 6.0,
            if active { "#2B506E" } else { "#ffffff" },
            x + 21.0,
            ly + 10.0,
            escape(&fit(
                &format!("{} · {}", copy.database, copy.volume),
                w - 29.0
            ))
        );
    }
    if s.copies.len() > MAX_COPIES {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-style=\"italic\">+{} more</text>",
            x + 21.0,
            y + 26.0 + LINE * MAX_COPIES as f64 + 10.0,
            s.copies.len() - MAX_COPIES
        );
    }
}

/// `text` cut with an ellipsis to what fits `width` pixels at 11 px (about 6 px a
/// character in a sans-serif face).
fn fit(text: &str, width: f64) -> String {
    let max = ((width / 6.0).floor() as usize).max(4);
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, storage: &str, volume: &str, database: &str, role: &str) -> LayoutRow {
        LayoutRow {
            server: server.into(),
            storage: storage.into(),
            volume: volume.into(),
            database: database.into(),
            role: role.into(),
        }
    }

    #[test]
    fn each_server_lists_its_copies_with_filled_actives_and_lines_to_its_storage() {
        let layout = vec![
            row("mbx1", "Array 1", "Vol 1", "DB1", "active"),
            row("mbx1", "Array 1", "Vol 2", "DB2", "passive"),
            row("mbx2", "Array 2", "Vol 1", "DB2", "active"),
            row("mbx2", "Array 2", "Vol 2", "DB1", "passive (copy 2)"),
            row("mbx3", "Array 1", "Vol 3", "DB<3>", "active"),
        ];
        let svg = layout_figure(&layout).expect("a figure");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        // Three servers each use one storage: three lines; two storage boxes plus
        // three server boxes.
        assert_eq!(svg.matches("<line ").count(), 3);
        assert_eq!(svg.matches("<rect ").count(), 5);
        assert_eq!(
            svg.matches("fill=\"#2B506E\" stroke").count(),
            3,
            "three active copies"
        );
        assert_eq!(svg.matches("<circle ").count(), 5);
        assert!(svg.contains("DB&lt;3&gt;"), "names are escaped: {svg}");
        assert!(
            svg.contains("DB1 · Vol 2"),
            "copies name their volume: {svg}"
        );
        assert!(layout_figure(&[]).is_none());
    }

    #[test]
    fn a_large_layout_is_bounded_and_says_what_it_left_out() {
        let layout: Vec<LayoutRow> = (0..20)
            .flat_map(|s| {
                (0..10).map(move |d| {
                    row(
                        &format!("server{s:02}"),
                        "Array 1",
                        "Vol",
                        &format!("DB{d}"),
                        if d == 0 { "active" } else { "passive" },
                    )
                })
            })
            .collect();
        let svg = layout_figure(&layout).expect("a figure");
        assert!(svg.contains("… and 4 more servers"));
        assert_eq!(svg.matches("+2 more").count(), MAX_SERVERS);
        assert!(!svg.contains("server16"));
        assert!(svg.contains("Solution data layout: 20 servers, 1 storage"));
    }

    #[test]
    fn long_names_are_cut_to_their_box() {
        assert_eq!(fit("short", 100.0), "short");
        let cut = fit(&"x".repeat(100), 60.0);
        assert_eq!(cut.chars().count(), 10);
        assert!(cut.ends_with('…'));
    }
}
