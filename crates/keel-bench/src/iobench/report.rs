//! The HTML report: for each mode, IOPS and MiB/s against the number of
//! workers, one line per (method, block size, files) — the seeds' graphs —
//! then, with `flush` and `wrnd` both measured, `flush ÷ wrnd` against the
//! queue depth, then every figure in a table. One self-contained page: inline SVG and
//! CSS, no script, no network.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::chart::{compact, escape, nice_ceil};

use super::{
    flush_ratio_table, format_bs, format_size, table_header, CaseResult, IobenchError,
    IobenchReport, Method, Mode,
};

const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];
const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;

/// Write the report as `index.html` in `dir` (created if needed); returns
/// the page's path.
pub fn write_html_report(report: &IobenchReport, dir: &Path) -> Result<PathBuf, IobenchError> {
    std::fs::create_dir_all(dir)
        .map_err(IobenchError::io(format!("cannot create {}", dir.display())))?;
    let path = dir.join("index.html");
    std::fs::write(&path, render_html(report))
        .map_err(IobenchError::io(format!("cannot write {}", path.display())))?;
    Ok(path)
}

/// One line of a chart.
struct Series {
    label: String,
    color: &'static str,
    dash: &'static str,
    /// (workers, case) sorted by workers.
    points: Vec<(usize, CaseResult)>,
}

fn dash(method: Method) -> &'static str {
    match method {
        Method::Direct => "",
        Method::Fsync => "7 4",
        Method::Dsync => "2 3",
    }
}

/// The lines of one mode's charts, one per (method, bs, files).
fn series_of(cases: &[&CaseResult]) -> Vec<Series> {
    let mut groups: BTreeMap<(Method, usize, usize), Vec<(usize, CaseResult)>> = BTreeMap::new();
    for c in cases {
        groups
            .entry((c.method, c.bs, c.files))
            .or_default()
            .push((c.threads, (*c).clone()));
    }
    // One colour per (bs, files), so a method's lines compare at a glance.
    let mut shapes: Vec<(usize, usize)> = groups.keys().map(|k| (k.1, k.2)).collect();
    shapes.sort_unstable();
    shapes.dedup();
    groups
        .into_iter()
        .map(|((method, bs, files), mut points)| {
            points.sort_by_key(|p| p.0);
            let colour = shapes.iter().position(|&s| s == (bs, files)).unwrap_or(0);
            Series {
                label: format!("{method} {} {files} file{}", format_bs(bs), plural(files)),
                color: PALETTE[colour % PALETTE.len()],
                dash: dash(method),
                points,
            }
        })
        .collect()
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// One chart: `value` of every series against the workers in `xs`.
fn chart_svg(
    title: &str,
    xs: &[usize],
    series: &[Series],
    value: fn(&CaseResult) -> f64,
) -> String {
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x_at = |threads: usize| {
        let i = xs.iter().position(|&x| x == threads).unwrap_or(0);
        match xs.len() {
            0 | 1 => LEFT + plot_w / 2.0,
            n => LEFT + plot_w * i as f64 / (n - 1) as f64,
        }
    };
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| value(&p.1)))
        .fold(0.0, f64::max);
    let y_max = nice_ceil(max);
    let y_at = |v: f64| TOP + plot_h * (1.0 - v / y_max);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{t}</title><text x="{cx}" y="18" class="title">{t}</text>"#,
        t = escape(title),
        cx = WIDTH / 2.0
    );
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let y = y_at(v);
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="ytick">{}</text>"#,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            compact(v)
        );
    }
    for &x in xs {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{}" class="xtick">{x}</text>"#,
            x_at(x),
            TOP + plot_h + 18.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{}" class="axis">workers (concurrent requests)</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0
    );
    for s in series {
        svg.push_str(&series_svg(s, &x_at, &y_at, value));
    }
    svg.push_str("</svg>");
    svg
}

fn series_svg(
    s: &Series,
    x_at: &dyn Fn(usize) -> f64,
    y_at: &dyn Fn(f64) -> f64,
    value: fn(&CaseResult) -> f64,
) -> String {
    let points: Vec<String> = s
        .points
        .iter()
        .map(|(t, c)| format!("{:.1},{:.1}", x_at(*t), y_at(value(c))))
        .collect();
    let mut out = format!(
        r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}"/>"#,
        points.join(" "),
        s.color,
        s.dash
    );
    for (t, c) in &s.points {
        let _ = write!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{}"><title>{}, {t} workers: {} IOPS, {:.1} MiB/s, p99 {:.3} ms</title></circle>"#,
            x_at(*t),
            y_at(value(c)),
            s.color,
            escape(&s.label),
            compact(c.iops),
            c.mib_s,
            c.lat_ms.p99
        );
    }
    out
}

fn legend_html(series: &[Series]) -> String {
    crate::chart::legend_entries_html(series.iter().map(|s| (s.label.as_str(), s.color, s.dash)))
}

fn mode_section(mode: Mode, cases: &[&CaseResult], xs: &[usize]) -> String {
    let series = series_of(cases);
    let read_pct = cases.first().map_or(0, |c| c.read_pct);
    let doublewrite = cases
        .iter()
        .any(|c| c.flush.as_ref().is_some_and(|f| f.doublewrite));
    let title = match mode {
        Mode::Rwrnd => format!("{mode} ({read_pct} % reads)"),
        Mode::Flush => format!(
            "{mode} (the engine's flusher, doublewrite {})",
            if doublewrite { "on" } else { "off" }
        ),
        _ => mode.to_string(),
    };
    format!(
        r#"<section><h2>{t}</h2><div class="charts">{}{}</div>{}</section>"#,
        chart_svg(&format!("{title}: IOPS"), xs, &series, |c| c.iops),
        chart_svg(&format!("{title}: MiB/s"), xs, &series, |c| c.mib_s),
        legend_html(&series),
        t = escape(&title)
    )
}

fn machine_html(report: &IobenchReport) -> String {
    let m = &report.machine;
    let ram = m
        .ram_bytes
        .map_or_else(|| "unknown".to_owned(), format_size);
    let device = m.block_device.as_deref().unwrap_or("none");
    format!(
        "<p>{} — kernel {}, {} CPUs, {} RAM. Files in <code>{}</code> ({}, block device {}, \
         logical block {} B), {} per case; device model: {}.</p>",
        escape(&m.hostname),
        escape(&m.kernel),
        m.cpus,
        ram,
        escape(&m.dir),
        escape(&m.filesystem),
        escape(device),
        m.logical_block_bytes,
        format_size(m.file_size_bytes),
        escape(&m.device_model)
    )
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
.charts{display:flex;flex-wrap:wrap;gap:1em}svg .grid{stroke:#ddd}\
svg text{font-size:12px;fill:#333}svg .title{font-size:14px;font-weight:bold;text-anchor:middle}\
svg .ytick{text-anchor:end}svg .xtick,svg .axis{text-anchor:middle}\
.legend{list-style:none;padding:0;columns:3}.legend li{margin:2px 0}\
pre{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}";

/// `flush ÷ wrnd` against the queue depth, one line per (method, bs,
/// files), and the ratios as a table; empty without ratios.
fn ratio_section(report: &IobenchReport, xs: &[usize]) -> String {
    let Some(table) = flush_ratio_table(&report.flush_vs_wrnd) else {
        return String::new();
    };
    let cases: Vec<&CaseResult> = report
        .cases
        .iter()
        .filter(|c| c.flush.as_ref().is_some_and(|f| f.vs_wrnd.is_some()))
        .collect();
    let series = series_of(&cases);
    format!(
        "<section><h2>flush ÷ wrnd</h2><p>The engine's page writes per second (<code>flush</code>) \
         divided by the device's random-write IOPS (<code>wrnd</code>) at the same queue depth, \
         block size, files, method and device model (the <code>steady</code> policy aims at 0.9 \
         or more).</p><div class=\"charts\">{}</div>{}<pre>{}</pre></section>",
        chart_svg("flush ÷ wrnd", xs, &series, |c| {
            c.flush.as_ref().and_then(|f| f.vs_wrnd).unwrap_or(0.0)
        }),
        legend_html(&series),
        escape(&table)
    )
}

/// The report as one self-contained HTML page.
pub fn render_html(report: &IobenchReport) -> String {
    let mut xs: Vec<usize> = report.cases.iter().map(|c| c.threads).collect();
    xs.sort_unstable();
    xs.dedup();
    let mut modes: Vec<Mode> = report.cases.iter().map(|c| c.mode).collect();
    modes.sort_unstable();
    modes.dedup();
    let mut page = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>keel iobench</title><style>{STYLE}</style></head><body>\
         <h1>keel iobench: device characterization</h1>{}",
        machine_html(report)
    );
    page.push_str(
        "<p>Solid lines: direct (O_DIRECT); dashed: fsync (write then sync per write); \
         dotted: dsync (O_DSYNC). Hover a point for its figures.</p>",
    );
    for mode in modes {
        let cases: Vec<&CaseResult> = report.cases.iter().filter(|c| c.mode == mode).collect();
        page.push_str(&mode_section(mode, &cases, &xs));
    }
    page.push_str(&ratio_section(report, &xs));
    let rows: Vec<String> = report.cases.iter().map(super::table_row).collect();
    let _ = write!(
        page,
        "<h2>All cases</h2><pre>{}\n{}</pre></body></html>\n",
        escape(&table_header()),
        escape(&rows.join("\n"))
    );
    page
}
