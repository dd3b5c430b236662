//! Inline-SVG line charts for the HTML reports: no script, no fonts, no
//! network. Shared by `iobench` and `oltp`.

use std::fmt::Write as _;

/// Line colours, in order.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];
/// Dash patterns, in order (solid first).
pub const DASHES: [&str; 5] = ["", "7 4", "2 3", "10 3 2 3", "1 6"];

/// The chart's size in SVG units: about a page's width at 1280 px, so
/// that, scaled to the page's width (`svg.chart{width:100%}`), its text
/// stays near its nominal size.
const WIDTH: f64 = 1200.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
/// Marker labels: font size (as the style sheets set `text.marker`),
/// distance between rows, and the baseline of the first row.
const MARKER_FONT: f64 = 11.0;
const MARKER_ROW: f64 = 14.0;
const MARKER_TOP: f64 = TOP + 13.0;
/// Space kept between two marker labels on one row.
const MARKER_GAP: f64 = 8.0;

/// The smallest "round" number (1, 2, 2.5, 5 × 10^k) at least `v`.
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|&n| n >= v)
        .unwrap_or(10.0 * base)
}

/// A short label: 12.5k, 2M, 0.25.
pub fn compact(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.4}")
    } else {
        format!("{v:.2}")
    };
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Escape text for HTML and SVG.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Stroke colour.
    pub color: &'static str,
    /// `stroke-dasharray` ("" for solid).
    pub dash: &'static str,
    /// (x, y) points in x order. On a log scale, points with y ≤ 0 break the line.
    pub points: Vec<(f64, f64)>,
}

/// A vertical line across the plot at one x, labelled: an event on a time
/// axis (a device change during a run).
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    /// Where, in x units.
    pub x: f64,
    /// Shown next to the line's top and as its tooltip.
    pub label: String,
}

/// A chart of numeric x against y.
#[derive(Clone, Debug)]
pub struct LineChart<'a> {
    /// Title above the plot.
    pub title: &'a str,
    /// X axis label, with its unit.
    pub x_label: &'a str,
    /// Y axis label, with its unit.
    pub y_label: &'a str,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// Where the x axis ends (e.g. a run's length); `None`: at the next
    /// round number above the data and the markers. The ticks are round
    /// numbers up to it either way.
    pub x_max: Option<f64>,
    /// The lines.
    pub series: &'a [Series],
    /// Vertical lines drawn over the series (none: `&[]`).
    pub markers: &'a [Marker],
}

/// The y mapping: value → pixel, and the tick values.
struct YAxis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl YAxis {
    fn new(chart: &LineChart<'_>) -> YAxis {
        let ys = || {
            chart
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
        };
        if chart.log_y {
            let pos = || ys().filter(|y| *y > 0.0 && y.is_finite());
            let min = pos().fold(f64::INFINITY, f64::min);
            let max = pos().fold(0.0, f64::max);
            let (lo, hi) = if max > 0.0 {
                (
                    min.log10().floor(),
                    max.log10().ceil().max(min.log10().floor() + 1.0),
                )
            } else {
                (0.0, 1.0)
            };
            let ticks = (lo as i32..=hi as i32).map(|e| 10f64.powi(e)).collect();
            YAxis {
                lo,
                hi,
                log: true,
                ticks,
            }
        } else {
            let hi = nice_ceil(ys().filter(|y| y.is_finite()).fold(0.0, f64::max));
            let ticks = (0..=5).map(|i| hi * f64::from(i) / 5.0).collect();
            YAxis {
                lo: 0.0,
                hi,
                log: false,
                ticks,
            }
        }
    }

    /// Pixel of value `v`; `None` if it cannot be drawn (≤ 0 on a log scale).
    fn at(&self, v: f64) -> Option<f64> {
        let plot_h = HEIGHT - TOP - BOTTOM;
        let f = if self.log {
            if v <= 0.0 || !v.is_finite() {
                return None;
            }
            (v.log10() - self.lo) / (self.hi - self.lo)
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        Some(TOP + plot_h * (1.0 - f.clamp(0.0, 1.0)))
    }
}

/// The x axis's ticks: multiples of a round step (1, 2, 2.5, 5 × 10^k),
/// from 0 up to `x_max` and at most 7 of them.
fn x_ticks(x_max: f64) -> Vec<f64> {
    let step = nice_ceil(x_max / 6.0);
    let n = (x_max / step + 1e-9).floor() as u32;
    (0..=n).map(|i| step * f64::from(i)).collect()
}

/// The chart as one `<svg class="chart">` element.
pub fn line_chart(chart: &LineChart<'_>) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_max = match chart.x_max {
        Some(x) if x.is_finite() && x > 0.0 => x,
        _ => nice_ceil(
            chart
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.0))
                .chain(chart.markers.iter().map(|m| m.x))
                .fold(0.0, f64::max),
        ),
    };
    let x_at = |x: f64| LEFT + plot_w * (x / x_max).clamp(0.0, 1.0);
    let y = YAxis::new(chart);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" data-series="{n}"><title>{t}</title><text x="{cx}" y="18" class="title">{t}</text>"#,
        t = escape(chart.title),
        cx = WIDTH / 2.0,
        n = chart.series.len(),
    );
    for &v in &y.ticks {
        let py = y.at(v).unwrap_or(TOP);
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{:.1}" y1="{py:.1}" y2="{py:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="ytick">{}</text>"#,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            compact(v)
        );
    }
    for x in x_ticks(x_max) {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="xtick">{}</text>"#,
            x_at(x),
            TOP + plot_h + 18.0,
            compact(x)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis">{}</text><text transform="translate(16 {:.1}) rotate(-90)" class="axis">{}{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(chart.x_label),
        TOP + plot_h / 2.0,
        escape(chart.y_label),
        if chart.log_y { " (log scale)" } else { "" },
    );
    for s in chart.series {
        svg.push_str(&series_svg(s, &x_at, &y));
    }
    let xs: Vec<f64> = chart.markers.iter().map(|m| x_at(m.x)).collect();
    for (m, place) in chart.markers.iter().zip(marker_places(chart.markers, &xs)) {
        svg.push_str(&marker_svg(m, &place));
    }
    svg.push_str("</svg>");
    svg
}

/// The width of `text` in pixels at `size` px of a sans-serif font, a
/// little generously (DejaVu Sans, Liberation Sans and Helvetica are
/// narrower), so that labels placed apart by it do not touch.
fn text_width(text: &str, size: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'j' | 'l' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.35,
            'f' | 'r' | 't' | '(' | ')' | '[' | ']' | '/' | '-' => 0.45,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 1.0,
            '<' | '>' | '=' | '+' | '~' | '_' => 0.85,
            c if c.is_ascii_uppercase() => 0.8,
            c if c.is_ascii() => 0.65,
            _ => 1.0,
        })
        .sum();
    em * size
}

/// Where a marker's label goes: its anchor point and which end of the
/// text it is.
#[derive(Debug, PartialEq)]
struct MarkerPlace {
    /// The line's x, in pixels.
    px: f64,
    /// The anchor point of the label.
    tx: f64,
    ty: f64,
    /// `start` (the label right of the line) or `end` (left of it).
    anchor: &'static str,
}

/// Places the markers' labels (`xs`: their lines' pixels) near the top
/// of the plot, going from left to right: each right of its line or left
/// of it, inside the plot, on the first row where it keeps clear of the
/// labels already there, so that close markers' labels are staggered
/// rather than overprinted; and, where some row allows it, where no other
/// marker's line crosses it.
fn marker_places(markers: &[Marker], xs: &[f64]) -> Vec<MarkerPlace> {
    let right = WIDTH - RIGHT;
    let max_rows = (((HEIGHT - BOTTOM - 20.0 - MARKER_TOP) / MARKER_ROW).floor() as usize).max(1);
    let n = markers.len().min(xs.len());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    // The labels on each row so far, as (left, right) pixels.
    let mut rows: Vec<Vec<(f64, f64)>> = vec![Vec::new(); max_rows];
    let mut out: Vec<Option<MarkerPlace>> = (0..n).map(|_| None).collect();
    for i in order {
        let px = xs[i];
        let w = text_width(&markers[i].label, MARKER_FONT);
        // Right of the line, or left of it: those that stay in the plot.
        let sides: Vec<(f64, &'static str)> = [(px + 4.0, "start"), (px - 4.0 - w, "end")]
            .into_iter()
            .filter(|&(left, _)| left >= LEFT && left + w <= right)
            .collect();
        let sides = if sides.is_empty() {
            vec![(px + 4.0, "start")]
        } else {
            sides
        };
        let clear = |row: &[(f64, f64)], left: f64| {
            row.iter()
                .all(|&(l, r)| left + w + MARKER_GAP <= l || r + MARKER_GAP <= left)
        };
        let crossed = |left: f64| {
            xs.iter()
                .enumerate()
                .any(|(j, &x)| j != i && x > left - 2.0 && x < left + w + 2.0)
        };
        let pick = |avoid_lines: bool| {
            (0..max_rows).find_map(|r| {
                sides
                    .iter()
                    .find(|&&(left, _)| clear(&rows[r], left) && !(avoid_lines && crossed(left)))
                    .map(|&side| (r, side))
            })
        };
        let (row, (left, anchor)) = pick(true).or_else(|| pick(false)).unwrap_or_else(|| {
            // No room left: the row with the fewest labels.
            let r = (0..max_rows).min_by_key(|&r| rows[r].len()).unwrap_or(0);
            (r, sides[0])
        });
        rows[row].push((left, left + w));
        out[i] = Some(MarkerPlace {
            px,
            tx: if anchor == "start" { left } else { left + w },
            ty: MARKER_TOP + MARKER_ROW * row as f64,
            anchor,
        });
    }
    out.into_iter().flatten().collect()
}

/// A marker as a dashed vertical line with its label where
/// [`marker_places`] put it.
fn marker_svg(m: &Marker, p: &MarkerPlace) -> String {
    format!(
        r##"<g class="marker"><title>{label}</title><line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{:.1}" stroke="#444444" stroke-width="1.2" stroke-dasharray="5 3"/><text x="{:.1}" y="{:.1}" text-anchor="{}" class="marker">{label}</text></g>"##,
        HEIGHT - BOTTOM,
        p.tx,
        p.ty,
        p.anchor,
        px = p.px,
        label = escape(&m.label),
    )
}

/// A series as polylines (one per unbroken stretch).
fn series_svg(s: &Series, x_at: &dyn Fn(f64) -> f64, y: &YAxis) -> String {
    let mut runs: Vec<Vec<String>> = vec![Vec::new()];
    for &(px, py) in &s.points {
        match y.at(py) {
            Some(v) => {
                if let Some(r) = runs.last_mut() {
                    r.push(format!("{:.1},{v:.1}", x_at(px)));
                }
            }
            None => runs.push(Vec::new()),
        }
    }
    let mut out = format!(r#"<g class="series"><title>{}</title>"#, escape(&s.label));
    for r in runs.iter().filter(|r| !r.is_empty()) {
        // A single point still shows: a line needs two.
        let pts = if r.len() == 1 {
            format!("{} {}", r[0], r[0])
        } else {
            r.join(" ")
        };
        let _ = write!(
            out,
            r#"<polyline points="{pts}" fill="none" stroke="{}" stroke-width="1.8" stroke-dasharray="{}" stroke-linecap="round"/>"#,
            s.color, s.dash
        );
    }
    out.push_str("</g>");
    out
}

/// A legend for some series, as an HTML list.
pub fn legend_html(series: &[Series]) -> String {
    legend_entries_html(series.iter().map(|s| (s.label.as_str(), s.color, s.dash)))
}

/// A legend from (label, colour, dash pattern) entries, as an HTML list.
pub fn legend_entries_html<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> String {
    let mut out = String::from(r#"<ul class="legend">"#);
    for (label, color, dash) in entries {
        let _ = write!(
            out,
            r#"<li><svg width="36" height="10"><line x1="0" x2="36" y1="5" y2="5" stroke="{}" stroke-width="2.5" stroke-dasharray="{}"/></svg> {}</li>"#,
            color,
            dash,
            escape(label)
        );
    }
    out.push_str("</ul>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_numbers_and_log_axes() {
        assert_eq!(nice_ceil(0.0), 1.0);
        assert_eq!(nice_ceil(7.0), 10.0);
        assert_eq!(nice_ceil(1800.0), 2000.0);
        assert_eq!(nice_ceil(2100.0), 2500.0);
        assert_eq!(nice_ceil(30_000.0), 50_000.0);
        assert_eq!(compact(12_500.0), "12.5k");
        assert_eq!(compact(2_000_000.0), "2M");
        assert_eq!(compact(0.001), "0.001");
        let s = [Series {
            label: "a<b".into(),
            color: PALETTE[0],
            dash: "",
            points: vec![(0.0, 0.5), (1.0, 0.0), (2.0, 40.0), (3.0, 60.0)],
        }];
        let svg = line_chart(&LineChart {
            title: "t",
            x_label: "time (s)",
            y_label: "ms",
            log_y: true,
            x_max: None,
            series: &s,
            markers: &[],
        });
        // 0 breaks the line on a log scale: two stretches.
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a&lt;b") && svg.contains("(log scale)"));
        assert!(svg.contains(">0.1<") && svg.contains(">100<"));
        assert!(!svg.contains("class=\"marker\""));
    }

    #[test]
    fn markers_are_vertical_lines_at_their_x_with_their_label() {
        let s = [Series {
            label: "tps".into(),
            color: PALETTE[0],
            dash: "",
            points: vec![(0.0, 1.0), (10.0, 2.0)],
        }];
        let markers = [
            Marker {
                x: 2.0,
                label: "device -> iops=250".into(),
            },
            Marker {
                x: 9.9,
                label: "device -> a<b".into(),
            },
        ];
        let svg = line_chart(&LineChart {
            title: "t",
            x_label: "time (s)",
            y_label: "tps",
            log_y: false,
            x_max: None,
            series: &s,
            markers: &markers,
        });
        assert_eq!(svg.matches("<g class=\"marker\">").count(), 2);
        // x from 0 to 10 over the plot's width: 2 s is a fifth of the way.
        let px = LEFT + (WIDTH - LEFT - RIGHT) * 0.2;
        assert!(svg.contains(&format!(r#"x1="{px:.1}" x2="{px:.1}" y1="{TOP}""#)));
        assert!(svg.contains(">device -&gt; iops=250</text>"));
        // Near the right edge the label goes to the line's left.
        assert!(svg.contains(r#"text-anchor="end" class="marker">device -&gt; a&lt;b<"#));
    }

    fn chart_of(points: Vec<(f64, f64)>, x_max: Option<f64>, markers: &[Marker]) -> String {
        let s = [Series {
            label: "tps".into(),
            color: PALETTE[0],
            dash: "",
            points,
        }];
        line_chart(&LineChart {
            title: "t",
            x_label: "time (s)",
            y_label: "tps",
            log_y: false,
            x_max,
            series: &s,
            markers,
        })
    }

    fn xticks(svg: &str) -> Vec<String> {
        svg.split(r#"class="xtick">"#)
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .map(String::from)
            .collect()
    }

    #[test]
    fn an_explicit_x_max_ends_the_axis_with_round_ticks_below_it() {
        let points: Vec<(f64, f64)> = (1..=20).map(|t| (f64::from(t), 5.0)).collect();
        // Without it the axis overshoots to a round number (21 s: 25)...
        let over = chart_of(vec![(1.0, 5.0), (21.0, 5.0)], None, &[]);
        assert_eq!(xticks(&over).last().map(String::as_str), Some("25"));
        let svg = chart_of(points.clone(), Some(23.0), &[]);
        assert_eq!(xticks(&svg), ["0", "5", "10", "15", "20"]);
        // ...with it the last point (20 s of 23) is at 20/23 of the plot.
        let px = LEFT + (WIDTH - LEFT - RIGHT) * 20.0 / 23.0;
        assert!(svg.contains(&format!("{px:.1},")), "{svg}");
        // A 20 s run ends at 20, not 25; a 0.8 s one at 0.8.
        assert_eq!(
            xticks(&chart_of(points, Some(20.0), &[])),
            ["0", "5", "10", "15", "20"]
        );
        assert_eq!(
            xticks(&chart_of(vec![(0.2, 1.0), (0.8, 1.0)], Some(0.8), &[])),
            ["0", "0.2", "0.4", "0.6", "0.8"]
        );
        assert_eq!(x_ticks(300.0).len(), 7);
        assert_eq!(x_ticks(25.0), [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
    }

    #[test]
    fn close_markers_labels_are_staggered_and_stay_inside_the_plot() {
        let m = |x: f64, label: &str| Marker {
            x,
            label: label.into(),
        };
        let markers = [
            m(4.0, "device -> sata-ssd"),
            m(4.2, "device -> nvme"),
            m(4.4, "device -> iops=250"),
            m(8.0, "device -> hdd"),
            m(9.95, "device -> a rather long label"),
        ];
        let xs: Vec<f64> = markers
            .iter()
            .map(|k| LEFT + (WIDTH - LEFT - RIGHT) * k.x / 10.0)
            .collect();
        let places = marker_places(&markers, &xs);
        assert_eq!(places.len(), markers.len());
        // The first of the three close ones goes left of its line, the
        // second right of its, the third a row down; the far one is back
        // on the first row; the last, at the right edge, goes left of its
        // line, a row down, clear of the far one's label.
        let rows: Vec<f64> = places
            .iter()
            .map(|p| (p.ty - MARKER_TOP) / MARKER_ROW)
            .collect();
        assert_eq!(rows, [0.0, 0.0, 1.0, 0.0, 1.0]);
        let anchors: Vec<&str> = places.iter().map(|p| p.anchor).collect();
        assert_eq!(anchors, ["end", "start", "start", "start", "end"]);
        // No two labels on a row overlap; every label is inside the plot.
        let span = |i: usize| {
            let w = text_width(&markers[i].label, MARKER_FONT);
            let p = &places[i];
            if p.anchor == "start" {
                (p.tx, p.tx + w)
            } else {
                (p.tx - w, p.tx)
            }
        };
        for i in 0..markers.len() {
            let (a0, a1) = span(i);
            assert!(a0 >= LEFT && a1 <= WIDTH - RIGHT, "{i}: {a0}..{a1}");
            // Only the middle one of the three close markers' labels has
            // another line through it: there is no room for it elsewhere.
            let crossed = xs.iter().any(|&x| x > a0 && x < a1);
            assert_eq!(crossed, i == 1, "{i}");
            for j in 0..i {
                let (b0, b1) = span(j);
                if places[i].ty == places[j].ty {
                    assert!(a1 <= b0 || b1 <= a0, "{i} and {j} overlap");
                }
            }
        }
        let svg = chart_of(vec![(0.0, 1.0), (10.0, 1.0)], None, &markers);
        assert_eq!(svg.matches("<g class=\"marker\">").count(), markers.len());
    }
}
