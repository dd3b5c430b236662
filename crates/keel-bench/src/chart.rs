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

const WIDTH: f64 = 620.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;

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

/// The chart as one `<svg class="chart">` element.
pub fn line_chart(chart: &LineChart<'_>) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_max = nice_ceil(
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(chart.markers.iter().map(|m| m.x))
            .fold(0.0, f64::max),
    );
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
    for i in 0..=5 {
        let x = x_max * f64::from(i) / 5.0;
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
    for (i, m) in chart.markers.iter().enumerate() {
        svg.push_str(&marker_svg(m, i, x_at(m.x)));
    }
    svg.push_str("</svg>");
    svg
}

/// Marker `i` as a dashed vertical line at pixel `px` with its label near
/// the top, on one of three rows so that close markers' labels do not
/// overprint, and to the line's left in the right third of the plot so
/// that it stays inside the chart.
fn marker_svg(m: &Marker, i: usize, px: f64) -> String {
    let plot_w = WIDTH - LEFT - RIGHT;
    let (tx, anchor) = if px > LEFT + plot_w * 2.0 / 3.0 {
        (px - 4.0, "end")
    } else {
        (px + 4.0, "start")
    };
    let ty = TOP + 12.0 + 13.0 * (i % 3) as f64;
    format!(
        r##"<g class="marker"><title>{label}</title><line x1="{px:.1}" x2="{px:.1}" y1="{TOP}" y2="{:.1}" stroke="#444444" stroke-width="1.2" stroke-dasharray="5 3"/><text x="{tx:.1}" y="{ty:.1}" text-anchor="{anchor}" class="marker">{label}</text></g>"##,
        HEIGHT - BOTTOM,
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
                x: 9.0,
                label: "device -> a<b".into(),
            },
        ];
        let svg = line_chart(&LineChart {
            title: "t",
            x_label: "time (s)",
            y_label: "tps",
            log_y: false,
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
}
