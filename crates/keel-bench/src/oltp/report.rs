//! The HTML report: the scenario preset (if any), every run's summary in
//! one table, then charts that overlay the runs against time — throughput,
//! p95 latency, checkpoint age against its marks (classic: async and sync;
//! steady: F, S and H), the flushing mode, pages flushed by kind (against
//! `io_capacity_max`), dirty and free pages, throttle delay, the writers'
//! pauses (p99 and longest), and the device's write bandwidth as `steady`
//! estimates it against what was written; each `--device-change` is a
//! labelled vertical line on every chart. One self-contained page: inline
//! SVG and CSS, no script.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::chart::{escape, legend_html, line_chart, LineChart, Marker, Series, DASHES, PALETTE};

use super::merge::{below_average, measured};
use super::{Engine, Interval, OltpError, OltpReport, PresetSettings, RunResult};

/// Titles of the charts, in page order (the report check counts them).
pub const CHART_TITLES: [&str; 9] = [
    "Throughput",
    "Latency, 95th percentile",
    "Checkpoint age and its marks",
    "Flushing mode at the end of each interval",
    "Pages flushed per second, by kind",
    "Dirty and free pages",
    "Throttle delay",
    "Writer pauses per interval (steady)",
    "Write bandwidth: estimated and achieved (steady)",
];

const MIB: f64 = (1u64 << 20) as f64;

fn color(run: usize) -> &'static str {
    PALETTE[run % PALETTE.len()]
}

/// One series per run of `value` against time.
fn per_run(
    runs: &[RunResult],
    dash: &'static str,
    suffix: &str,
    value: fn(&Interval) -> f64,
) -> Vec<Series> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| Series {
            label: format!("{}{suffix}", r.label),
            color: color(i),
            dash,
            points: r.intervals.iter().map(|iv| (iv.t_s, value(iv))).collect(),
        })
        .collect()
}

fn per_s(n: u64, iv: &Interval) -> f64 {
    n as f64 / iv.interval_s.max(1e-9)
}

/// The device changes of every run as chart markers, at their scheduled
/// times: every run of a plan has the same schedule, so each shows once.
fn device_markers(runs: &[RunResult]) -> Vec<Marker> {
    let mut out: Vec<Marker> = Vec::new();
    for c in runs.iter().flat_map(|r| &r.device_changes) {
        let m = Marker {
            x: c.at_s,
            label: format!("device -> {}", c.spec),
        };
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

fn chart(title: &str, y_label: &str, log_y: bool, series: &[Series], markers: &[Marker]) -> String {
    format!(
        r#"<figure>{}{}</figure>"#,
        line_chart(&LineChart {
            title,
            x_label: "time since the measurement started (s)",
            y_label,
            log_y,
            series,
            markers,
        }),
        legend_html(series)
    )
}

/// Whether `run` ran `steady` (its levels are published).
fn is_steady(run: &RunResult) -> bool {
    run.intervals.iter().any(|i| i.setpoint > 0)
}

/// One series of `value` against time for `run` (the `r`th).
fn series_of(
    r: usize,
    run: &RunResult,
    dash: &'static str,
    suffix: &str,
    value: fn(&Interval) -> f64,
) -> Series {
    Series {
        label: format!("{}{suffix}", run.label),
        color: color(r),
        dash,
        points: run.intervals.iter().map(|iv| (iv.t_s, value(iv))).collect(),
    }
}

/// Each run's checkpoint age and the marks of its policy: classic's async
/// and sync marks, or steady's freerun F, setpoint S and hard level H.
fn checkpoint_series(runs: &[RunResult]) -> Vec<Series> {
    type Mark = (&'static str, fn(&Interval) -> f64);
    let classic: [Mark; 2] = [
        (": async mark", |i| i.async_mark as f64 / MIB),
        (": sync mark", |i| i.sync_mark as f64 / MIB),
    ];
    let steady: [Mark; 3] = [
        (": F (freerun)", |i| i.freerun as f64 / MIB),
        (": S (setpoint)", |i| i.setpoint as f64 / MIB),
        (": H (hard level)", |i| i.hard as f64 / MIB),
    ];
    let mut s = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        s.push(series_of(r, run, DASHES[0], ": checkpoint age", |i| {
            i.checkpoint_age as f64 / MIB
        }));
        let marks: &[Mark] = if is_steady(run) { &steady } else { &classic };
        for (k, (name, value)) in marks.iter().enumerate() {
            s.push(series_of(r, run, DASHES[1 + k % 2], name, *value));
        }
        s.push(series_of(r, run, DASHES[3], ": log capacity", |i| {
            i.log_capacity as f64 / MIB
        }));
    }
    s
}

/// Writer pauses per interval of the steady runs: p99 (solid) and the
/// longest (dashed), as histogram bucket bounds.
fn pause_series(runs: &[RunResult]) -> Vec<Series> {
    let mut s = Vec::new();
    for (r, run) in runs.iter().enumerate().filter(|(_, r)| is_steady(r)) {
        s.push(series_of(r, run, DASHES[0], ": pause p99", |i| {
            i.pause_p99_ms
        }));
        s.push(series_of(r, run, DASHES[1], ": longest pause", |i| {
            i.pause_max_ms
        }));
    }
    s
}

/// Device write bandwidth of the steady runs: the busy-time estimate, the
/// flusher's capacity with a backlog, and the pages actually written.
fn bandwidth_series(runs: &[RunResult]) -> Vec<Series> {
    let mut s = Vec::new();
    for (r, run) in runs.iter().enumerate().filter(|(_, r)| is_steady(r)) {
        s.push(series_of(
            r,
            run,
            DASHES[1],
            ": estimated (busy time)",
            |i| i.bw_estimate as f64,
        ));
        s.push(series_of(r, run, DASHES[2], ": flusher capacity", |i| {
            i.flusher_capacity as f64
        }));
        s.push(series_of(r, run, DASHES[0], ": achieved", |i| {
            per_s(i.pages_written, i)
        }));
    }
    s
}

/// The flushing mode as a level: 0 idle, 1 adaptive, 2 async, 3 sync.
fn mode_level(i: &Interval) -> f64 {
    match i.flush_mode.as_str() {
        "adaptive" => 1.0,
        "async" => 2.0,
        "sync" => 3.0,
        _ => 0.0,
    }
}

/// Pages flushed: colour by kind, dash by run; then each classic run's
/// `io_capacity_max` as a grey line (flush-list flushing outside sync mode
/// stays under it; LRU flushing does not).
fn flushed_series(runs: &[RunResult]) -> Vec<Series> {
    type Kind = (&'static str, fn(&Interval) -> f64);
    let kinds: [Kind; 6] = [
        ("adaptive", |i| per_s(i.pages_flushed.adaptive, i)),
        ("background", |i| per_s(i.pages_flushed.background, i)),
        ("LRU", |i| per_s(i.pages_flushed.lru, i)),
        ("sync", |i| per_s(i.pages_flushed.sync, i)),
        ("single page", |i| per_s(i.pages_flushed.single, i)),
        ("neighbors", |i| per_s(i.pages_flushed.neighbors, i)),
    ];
    let mut out = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let dash = DASHES[r % DASHES.len()];
        for (k, (name, value)) in kinds.iter().enumerate() {
            out.push(Series {
                label: format!("{}: {name}", run.label),
                color: PALETTE[k],
                dash,
                points: run.intervals.iter().map(|iv| (iv.t_s, value(iv))).collect(),
            });
        }
        if is_steady(run) {
            // steady has no io_capacity_max to stay under.
            continue;
        }
        let cap = run.io_capacity_max as f64;
        out.push(Series {
            label: format!("{}: io_capacity_max ({})", run.label, run.io_capacity_max),
            color: "#999999",
            dash,
            points: run.intervals.iter().map(|iv| (iv.t_s, cap)).collect(),
        });
    }
    out
}

fn charts_html(runs: &[RunResult]) -> String {
    let mut pages = per_run(runs, DASHES[0], ": dirty", |i| i.dirty_pages as f64);
    pages.extend(per_run(runs, DASHES[1], ": free", |i| i.free_pages as f64));
    let [t0, t1, t2, t3, t4, t5, t6, t7, t8] = CHART_TITLES;
    let m = &device_markers(runs);
    [
        chart(
            t0,
            "transactions/s",
            false,
            &per_run(runs, "", "", |i| i.tps),
            m,
        ),
        chart(
            t1,
            "latency (ms)",
            true,
            &per_run(runs, "", "", |i| i.lat_p95_ms),
            m,
        ),
        chart(t2, "redo (MiB)", false, &checkpoint_series(runs), m),
        chart(
            t3,
            "0 idle, 1 adaptive, 2 async, 3 sync",
            false,
            &per_run(runs, "", "", mode_level),
            m,
        ),
        chart(t4, "pages/s", false, &flushed_series(runs), m),
        chart(t5, "buffer pool pages", false, &pages, m),
        chart(
            t6,
            "delay (ms per s)",
            false,
            &per_run(runs, "", "", |i| {
                i.throttle_delay_ms / i.interval_s.max(1e-9)
            }),
            m,
        ),
        chart(
            t7,
            "pause (ms, bucket bound)",
            false,
            &pause_series(runs),
            m,
        ),
        chart(t8, "pages/s", false, &bandwidth_series(runs), m),
    ]
    .concat()
}

fn summary_table(runs: &[RunResult]) -> String {
    let mut t = String::from(
        "<table><tr><th>run</th><th>engine</th><th>tps avg</th><th>median</th><th>min</th><th>p01</th><th>cv</th>\
         <th>stall intervals</th><th>longest stall (s)</th><th>s &lt;50% avg</th><th>s &lt;10% avg</th>\
         <th>lat avg (ms)</th><th>p95</th>\
         <th>p99</th><th>p99.9</th><th>max</th><th>transactions</th><th>errors</th>\
         <th>pages written/txn</th><th>redo bytes/txn</th><th>sync flush waits</th>\
         <th>sync wait (ms)</th><th>throttle (ms)</th><th>bytes written/txn</th>\
         <th>peak RSS (MiB)</th></tr>",
    );
    for r in runs {
        let s = &r.summary;
        let l = &s.latency_ms;
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.3}</td>\
             <td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>\
             <td>{:.2}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.0}</td><td>{}</td>\
             <td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.label),
            escape(&r.engine),
            s.tps_avg,
            s.tps_median,
            s.tps_min,
            s.tps_p01,
            s.cv,
            s.stall_intervals,
            s.longest_stall_s,
            below_average(r, 0.5),
            below_average(r, 0.1),
            l.avg,
            l.p95,
            l.p99,
            l.p999,
            l.max,
            s.transactions,
            s.errors,
            s.pages_written_per_txn,
            s.log_bytes_per_txn,
            s.sync_flush_waits,
            s.sync_flush_wait_ms_total,
            s.throttle_delay_ms_total,
            measured(r, "bytes_written_per_txn", format!("{:.0}", s.bytes_written_per_txn)),
            measured(r, "peak_rss_bytes", format!("{:.0}", s.peak_rss_bytes as f64 / MIB)),
        );
    }
    t.push_str("</table>");
    for r in runs.iter().filter(|r| !r.summary.not_measured.is_empty()) {
        let _ = write!(
            t,
            "<p class=\"note\">{} ({}) does not measure, so shows 0 or n/a for: {}.</p>",
            escape(&r.label),
            escape(&r.engine),
            escape(&r.summary.not_measured.join(", "))
        );
    }
    t
}

fn settings_html(runs: &[RunResult]) -> String {
    let mut out = String::new();
    for r in runs {
        let workload = serde_json::to_string_pretty(&r.workload).unwrap_or_default();
        let options = serde_json::to_string_pretty(&r.options).unwrap_or_default();
        let _ = write!(
            out,
            "<details><summary>{}: workload and engine options</summary><pre>{}\n{}</pre></details>",
            escape(&r.label),
            escape(&workload),
            escape(&options)
        );
    }
    out
}

/// The pages' style sheet (the showdown's summary page shares it).
pub(crate) const STYLE: &str = "body{font-family:sans-serif;margin:1.5em;color:#222}\
.charts{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0}svg .grid{stroke:#ddd}\
svg text{font-size:12px;fill:#333}svg .title{font-size:14px;font-weight:bold;text-anchor:middle}\
svg .ytick{text-anchor:end}svg .xtick,svg .axis{text-anchor:middle}svg text.marker{font-size:11px;fill:#444;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.legend{list-style:none;padding:0;margin:0;max-width:620px;columns:2;font-size:12px}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
td:first-child{text-align:left}.preset{background:#f3f7fb;padding:0 1em;max-width:60em}pre{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}";

/// The flushing policies the runs used, as the engine names them (another
/// engine than Keel by its name: it has no flushing policy of Keel's).
fn policies(runs: &[RunResult]) -> String {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        let name = match r.options.get("flush_policy").and_then(|v| v.as_str()) {
            Some(p) => p.to_string(),
            None if r.engine != Engine::Keel.name() => format!("{}'s own", r.engine),
            None => "?".to_string(),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

fn pairs_text(m: &serde_json::Map<String, serde_json::Value>) -> String {
    m.iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => format!("{k}={s}"),
            None => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The preset paragraph: which seed, what it sets, what to look at.
fn preset_html(p: &PresetSettings) -> String {
    let mut out = format!(
        "<div class=\"preset\"><p><b>Preset <code>{}</code></b>: seed {}, &ldquo;{}&rdquo;. {}.</p>\
         <p><b>The seed's figure:</b> {}.</p><p><b>Look at:</b> {}.</p><ul>\
         <li>workload: <code>{}</code></li><li>engine options: <code>{}</code></li>",
        escape(&p.name),
        p.seed,
        escape(&p.seed_title),
        escape(&p.about),
        escape(&p.figure),
        escape(&p.look_at),
        escape(&pairs_text(&p.workload)),
        escape(&pairs_text(&p.options)),
    );
    if !p.vary.is_empty() {
        let _ = write!(
            out,
            "<li>vary: <code>{}</code></li>",
            escape(&p.vary.join(" "))
        );
    }
    if !p.prepare.is_empty() {
        let _ = write!(
            out,
            "<li>prepared with: <code>{}</code> (then reopened with the options above)</li>",
            escape(&pairs_text(&p.prepare))
        );
    }
    if p.overridden.is_empty() {
        out.push_str("<li>nothing overridden on the command line</li>");
    } else {
        let _ = write!(
            out,
            "<li><b>given on the command line (over the preset):</b> <code>{}</code> \
             (the runs' settings below are what ran)</li>",
            escape(&p.overridden.join(", "))
        );
    }
    out.push_str("</ul></div>");
    out
}

/// The device changes, as a paragraph (empty without any).
fn device_changes_html(runs: &[RunResult]) -> String {
    let markers = device_markers(runs);
    if markers.is_empty() {
        return String::new();
    }
    let items: Vec<String> = markers
        .iter()
        .map(|m| format!("at {} s: <code>{}</code>", m.x, escape(&m.label)))
        .collect();
    format!(
        "<p><b>Device changes</b> during the measurement (dashed vertical lines on the \
         charts): {}.</p>",
        items.join("; ")
    )
}

/// The report as one self-contained HTML page.
pub fn render_html(report: &OltpReport) -> String {
    let first = report.runs.first();
    let workload = first.map_or_else(String::new, |r| r.workload.workload.to_string());
    let policy = policies(&report.runs);
    let (title_preset, preset) = match &report.preset_settings {
        Some(p) => (format!(", preset {}", escape(&p.name)), preset_html(p)),
        None => (String::new(), String::new()),
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>keel bench oltp</title><style>{STYLE}</style></head><body>\
         <h1>keel bench oltp: {} ({} run{}){title_preset}</h1>{preset}\
         <p>Each interval's counts are per second; gauges (checkpoint age, mode, pages) are read \
         at the interval's end. A stall interval has under 10 % of the run's median tps; \
         the seconds under 50 % and 10 % of the run's average tps are counted too (a run that \
         stands still more than half the time has a median of 0). \
         Flush policy: {}{}.</p>{}\
         <h2>Summary</h2>{}<h2>Charts</h2><div class=\"charts\">{}</div>\
         <h2>Settings</h2>{}</body></html>\n",
        escape(&workload),
        report.runs.len(),
        if report.runs.len() == 1 { "" } else { "s" },
        escape(&policy),
        if policy == "classic" {
            " (InnoDB 8.0's adaptive flushing; it never throttles writers, so the throttle \
             line reads 0)"
        } else {
            ""
        },
        device_changes_html(&report.runs),
        summary_table(&report.runs),
        charts_html(&report.runs),
        settings_html(&report.runs),
    )
}

/// Write the report as `index.html` in `dir` (created if needed); returns
/// the page's path.
pub fn write_html_report(report: &OltpReport, dir: &Path) -> Result<PathBuf, OltpError> {
    std::fs::create_dir_all(dir)
        .map_err(OltpError::io(format!("cannot create {}", dir.display())))?;
    let path = dir.join("index.html");
    std::fs::write(&path, render_html(report))
        .map_err(OltpError::io(format!("cannot write {}", path.display())))?;
    Ok(path)
}
