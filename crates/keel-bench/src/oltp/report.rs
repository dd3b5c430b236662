//! The HTML report: the verdict first (one row per run: stalls against the
//! median tps, the longest and p99.9 latency, pages written per
//! transaction and the writers' pauses, the best of each column marked),
//! then the scenario preset (if any), every run's summary in one table,
//! then full-width charts that overlay the runs against time, up to the
//! runs' length — throughput, p95 latency, checkpoint age against its
//! marks (classic: async and sync; steady: F, S and H; one chart per run
//! when there are several), the flushing mode, pages flushed by kind
//! (against `io_capacity_max`), dirty and free pages, throttle delay, the
//! writers' pauses (p99 and longest), and the device's write bandwidth as
//! `steady` estimates it against what was written, the history list
//! length, purge's progress (undo records and pages purged per second) and
//! undo's share of the buffer pool and of the pages written — each with a
//! sentence on what to look for; each `--device-change` is a labelled vertical line
//! on every chart, as are a `--hold-view`'s opening and release of its
//! read view. One self-contained page: inline SVG and CSS, no script.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::chart::{escape, legend_html, line_chart, LineChart, Marker, Series, DASHES, PALETTE};

use super::merge::{below_average, bytes_text, measured};
use super::summary::stalls;
use super::{Engine, HoldView, Interval, OltpError, OltpReport, PresetSettings, RunResult};

/// Titles of the charts, in page order (the report check counts them).
pub const CHART_TITLES: [&str; 12] = [
    "Throughput",
    "Latency, 95th percentile",
    "Checkpoint age and its marks",
    "Flushing mode at the end of each interval",
    "Pages flushed per second, by kind",
    "Dirty and free pages",
    "Throttle delay",
    "Writer pauses per interval (steady)",
    "Write bandwidth: estimated and achieved (steady)",
    "History list length",
    "Purge: undo records and pages purged per second",
    "Undo pages: share of the buffer pool and of the pages written",
];

/// What to look for in each chart of [`CHART_TITLES`], in the same order:
/// one sentence under it.
const LOOK_FOR: [&str; 12] = [
    "Look for dips toward zero: a flat line is steady throughput; drops that line up with \
     the checkpoint age reaching the sync mark (classic) or the hard level H (steady) on the \
     checkpoint chart are flushing stalls.",
    "Look for spikes: the scale is logarithmic, so each grid line up is ten times the \
     latency, and spikes at the times of throughput dips are transactions that waited for \
     flushing.",
    "Look at the solid checkpoint age against its dashed marks: an age that stays below the \
     async mark (classic) or settles at the setpoint S (steady) is healthy, while an age at \
     the sync mark or at H means writers are stopped or throttled until pages are written \
     (the log-capacity line is the ceiling).",
    "Look for time at 3 (sync), where writers flush pages themselves and throughput \
     stalls; 2 (async) is urgent flushing, 1 (adaptive) and 0 (idle) are normal.",
    "Look at which kind of flushing does the work: adaptive and background flushing is the \
     planned kind, while sync and single-page flushes mean writers ran out of log space or \
     free pages; classic's flush-list flushing stays under its grey io_capacity_max line \
     outside sync mode.",
    "Look for free pages falling to zero, where writers must flush a page to get one, and \
     for dirty pages that keep rising instead of levelling off, a sign that flushing is \
     not keeping up.",
    "Look at how hard writers are held back: the line is milliseconds of throttle delay per \
     second, summed over the writer threads (1000 is one writer paused all the time), and \
     classic never throttles, so it reads 0.",
    "Look at the size of steady's writer pauses, the 99th percentile (solid) and the \
     longest (dashed) of each interval as histogram bucket bounds up to 100 ms: short \
     pauses keep latency smooth even when they are many (classic runs have no lines here).",
    "Look at whether the pages actually written (solid) keep up with steady's estimate of \
     the device (dashed) and the flusher's capacity (dotted): a gap while the checkpoint \
     age climbs means the device is not being used, and the estimate should follow each \
     device change.",
    "Look for a history list that keeps growing instead of levelling off: committed \
     transactions whose old row versions purge cannot remove yet, because a read view that \
     might still need them is open (the status report names the oldest one) or because \
     purge falls behind the writers; a --hold-view run's dashed lines mark when its view \
     opened and was released, and the list should fall back once it is gone.",
    "Look at whether purge keeps pace with the writers: undo records purged per second \
     (solid) near the rate transactions commit changes, and undo pages freed (dashed); a \
     drop to zero while the history list grows means an old read view holds purge back.",
    "Look at how much of the buffer pool undo pages take (solid, % of the pool's pages) and \
     how much of the page writes are undo pages (dashed, % of the pages written): a share \
     that climbs with the history list is undo crowding out table pages.",
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

/// The device and option changes of every run as chart markers, at their
/// scheduled times, and the held view's opening and release
/// (`--hold-view`; the release only when it came before the run's end):
/// every run of a plan has the same schedule, so each shows once; changes
/// due at the same time share one marker.
fn change_markers(runs: &[RunResult]) -> Vec<Marker> {
    let mut out: Vec<Marker> = Vec::new();
    let devices = runs
        .iter()
        .flat_map(|r| &r.device_changes)
        .map(|c| (c.at_s, format!("device -> {}", c.spec)));
    let options = runs
        .iter()
        .flat_map(|r| &r.option_changes)
        .map(|c| (c.at_s, format!("{}={}", c.key, c.value)));
    let views = runs.iter().flat_map(|r| {
        let v = r.hold_view.as_ref();
        let opened = v.map(|v| (v.at_s, "view opened".to_string()));
        let released = v
            .filter(|v| !v.held_until_end(&r.workload))
            .map(|v| (v.release_due_s(), "view released".to_string()));
        opened.into_iter().chain(released)
    });
    for (x, label) in devices.chain(options).chain(views) {
        match out.iter_mut().find(|m| m.x == x) {
            Some(m) if m.label.split("; ").any(|l| l == label) => {}
            Some(m) => {
                m.label.push_str("; ");
                m.label.push_str(&label);
            }
            None => out.push(Marker { x, label }),
        }
    }
    out.sort_by(|a, b| a.x.total_cmp(&b.x));
    out
}

/// What every chart of a report shares: the x axis's end and the
/// markers.
struct Axis<'a> {
    x_max: Option<f64>,
    markers: &'a [Marker],
}

/// A chart as a `<figure>`: the SVG, its legend and, as its caption, what
/// to look for.
fn chart(
    axis: &Axis<'_>,
    title: &str,
    y_label: &str,
    log_y: bool,
    series: &[Series],
    look: &str,
) -> String {
    format!(
        r#"<figure>{}{}<figcaption class="look">{}</figcaption></figure>"#,
        line_chart(&LineChart {
            title,
            x_label: "time since the measurement started (s)",
            y_label,
            log_y,
            x_max: axis.x_max,
            series,
            markers: axis.markers,
        }),
        legend_html(series),
        escape(look),
    )
}

/// The measured length of the longest run in seconds: its summary's
/// measured time or its last interval's end, whichever is later (the
/// configured duration when neither is known); `None` without any.
fn run_length(runs: &[RunResult]) -> Option<f64> {
    let len = runs
        .iter()
        .map(|r| {
            let measured = r
                .intervals
                .iter()
                .map(|i| i.t_s)
                .fold(r.summary.time_s, f64::max);
            if measured > 0.0 {
                measured
            } else {
                r.workload.time_s
            }
        })
        .fold(0.0, f64::max);
    (len.is_finite() && len > 0.0).then_some(len)
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
        // A run that switched policies (`--set-at`) shows both sets: the
        // async and sync marks are the engine's whatever the policy, and
        // steady's levels read 0 while classic ran.
        let switched = run.intervals.iter().any(|i| i.setpoint == 0);
        let marks: Vec<&Mark> = match (is_steady(run), switched) {
            (false, _) => classic.iter().collect(),
            (true, false) => steady.iter().collect(),
            (true, true) => classic.iter().chain(&steady).collect(),
        };
        for (k, (name, value)) in marks.into_iter().enumerate() {
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

/// `part` as a percentage of `whole` (0 when `whole` is 0).
fn share_pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Purge's progress per run: undo records purged per second (solid) and
/// undo pages freed per second (dashed).
fn purge_series(runs: &[RunResult]) -> Vec<Series> {
    let mut s = per_run(runs, DASHES[0], ": undo records purged/s", |i| {
        per_s(i.undo_records_purged, i)
    });
    s.extend(per_run(runs, DASHES[1], ": undo pages purged/s", |i| {
        per_s(i.undo_pages_purged, i)
    }));
    s
}

/// Undo's share per run: of the buffer pool's pages at the interval's end
/// (solid) and of the pages written in the interval (dashed).
fn undo_share_series(runs: &[RunResult]) -> Vec<Series> {
    let mut s = per_run(runs, DASHES[0], ": % of the buffer pool", |i| {
        share_pct(i.undo_pages_in_pool, i.total_pages)
    });
    s.extend(per_run(runs, DASHES[1], ": % of the pages written", |i| {
        share_pct(i.undo_pages_written, i.pages_written)
    }));
    s
}

fn charts_html(runs: &[RunResult]) -> String {
    let mut pages = per_run(runs, DASHES[0], ": dirty", |i| i.dirty_pages as f64);
    pages.extend(per_run(runs, DASHES[1], ": free", |i| i.free_pages as f64));
    let [t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11] = CHART_TITLES;
    let [l0, l1, l2, l3, l4, l5, l6, l7, l8, l9, l10, l11] = LOOK_FOR;
    let markers = change_markers(runs);
    let a = &Axis {
        x_max: run_length(runs),
        markers: &markers,
    };
    // Several runs' checkpoint ages and marks overlaid are unreadable:
    // one chart per run then.
    let checkpoint = if runs.len() > 1 {
        runs.iter()
            .map(|r| {
                let title = format!("{t2}: {}", r.label);
                chart(
                    a,
                    &title,
                    "redo (MiB)",
                    false,
                    &checkpoint_series(std::slice::from_ref(r)),
                    l2,
                )
            })
            .collect()
    } else {
        chart(a, t2, "redo (MiB)", false, &checkpoint_series(runs), l2)
    };
    [
        chart(
            a,
            t0,
            "transactions/s",
            false,
            &per_run(runs, "", "", |i| i.tps),
            l0,
        ),
        chart(
            a,
            t1,
            "latency (ms)",
            true,
            &per_run(runs, "", "", |i| i.lat_p95_ms),
            l1,
        ),
        checkpoint,
        chart(
            a,
            t3,
            "0 idle, 1 adaptive, 2 async, 3 sync",
            false,
            &per_run(runs, "", "", mode_level),
            l3,
        ),
        chart(a, t4, "pages/s", false, &flushed_series(runs), l4),
        chart(a, t5, "buffer pool pages", false, &pages, l5),
        chart(
            a,
            t6,
            "delay (ms per s)",
            false,
            &per_run(runs, "", "", |i| {
                i.throttle_delay_ms / i.interval_s.max(1e-9)
            }),
            l6,
        ),
        chart(
            a,
            t7,
            "pause (ms, bucket bound)",
            false,
            &pause_series(runs),
            l7,
        ),
        chart(a, t8, "pages/s", false, &bandwidth_series(runs), l8),
        chart(
            a,
            t9,
            "transactions not purged",
            false,
            &per_run(runs, "", "", |i| i.history_len as f64),
            l9,
        ),
        chart(a, t10, "per second", false, &purge_series(runs), l10),
        chart(a, t11, "% undo pages", false, &undo_share_series(runs), l11),
    ]
    .concat()
}

/// The tps under which an interval of `run` counts as a dip below `share`
/// of its median tps, and whether that is the average's share instead:
/// when the run stood still at least half the time its median is 0 and
/// nothing would count.
fn dip_limit(run: &RunResult, share: f64) -> (f64, bool) {
    let median = run.summary.tps_median;
    if median > 0.0 {
        (median * share, false)
    } else {
        (run.summary.tps_avg * share, true)
    }
}

/// Intervals of `run` whose tps is below `share` of its median tps (of
/// its average when the median is 0, see [`dip_limit`]; every interval
/// when the run committed nothing at all), and whether it fell back to
/// the average.
fn below_median(run: &RunResult, share: f64) -> (u64, bool) {
    let (limit, fallback) = dip_limit(run, share);
    if limit > 0.0 {
        (stalls(&run.intervals, limit).0, fallback)
    } else {
        (run.intervals.len() as u64, fallback)
    }
}

/// Whether the run's engine measures every one of `fields`.
fn measures(run: &RunResult, fields: &[&str]) -> bool {
    !run.summary
        .not_measured
        .iter()
        .any(|f| fields.contains(&f.as_str()))
}

/// A verdict cell: the value compared (as shown, so that what reads the
/// same ties) and its text; `None` where the engine does not measure it.
type Cell = Option<(f64, String)>;

/// `v` with `decimals` decimals, as text and as the value that text reads.
fn figure(v: f64, decimals: usize) -> (f64, String) {
    let text = format!("{v:.decimals$}");
    (text.parse().unwrap_or(v), text)
}

/// The columns of the verdict: header and one cell per run. Lower is
/// better in each.
fn verdict_columns(runs: &[RunResult]) -> Vec<(&'static str, Vec<Cell>)> {
    let stall = |share: f64| -> Vec<Cell> {
        runs.iter()
            .map(|r| {
                let (n, fallback) = below_median(r, share);
                let of = format!("{n} of {}", r.intervals.len());
                Some((
                    n as f64,
                    if fallback {
                        format!("{of} (vs avg)")
                    } else {
                        of
                    },
                ))
            })
            .collect()
    };
    let each = |f: &dyn Fn(&RunResult) -> Cell| -> Vec<Cell> { runs.iter().map(f).collect() };
    vec![
        ("stall intervals: tps &lt; 50 % of median", stall(0.5)),
        ("tps &lt; 10 % of median", stall(0.1)),
        (
            "max latency (ms)",
            each(&|r| Some(figure(r.summary.latency_ms.max, 1))),
        ),
        (
            "p99.9 latency (ms)",
            each(&|r| Some(figure(r.summary.latency_ms.p999, 1))),
        ),
        (
            "pages written / txn",
            each(&|r| {
                measures(r, &["pages_written_per_txn"])
                    .then(|| figure(r.summary.pages_written_per_txn, 2))
            }),
        ),
        (
            "writer pause (s)",
            each(&|r| measures(r, WRITER_PAUSE_FIELDS).then(|| figure(writer_pause_s(r), 2))),
        ),
    ]
}

/// The figures the writer pause adds up; without any of them it is n/a.
const WRITER_PAUSE_FIELDS: &[&str] = &[
    "throttle_delay_ms_total",
    "sync_flush_wait_ms_total",
    "sync_flush_wait_ms",
];

/// Seconds the writer threads spent paused, summed over the threads: the
/// throttle's pauses (`steady`) and the waits for sync flushes at the
/// free-check limit (either policy). Not counted: waits for the redo
/// log's fsync at commit, which any durable engine has.
fn writer_pause_s(run: &RunResult) -> f64 {
    (run.summary.throttle_delay_ms_total + run.summary.sync_flush_wait_ms_total) / 1000.0
}

/// The verdict: one row per run of the figures that tell a run's
/// steadiness at a glance; with several runs, the lowest of each column
/// (every one, if tied) is bold and ticked, `n/a` never.
fn verdict_html(runs: &[RunResult]) -> String {
    let columns = verdict_columns(runs);
    let compare = runs.len() > 1;
    let best: Vec<Option<f64>> = columns
        .iter()
        .map(|(_, cells)| {
            let measured: Vec<f64> = cells.iter().flatten().map(|c| c.0).collect();
            (compare && measured.len() > 1)
                .then(|| measured.iter().copied().fold(f64::INFINITY, f64::min))
        })
        .collect();
    let mut t = format!(
        "<table class=\"verdict\"><caption>Verdict: lower is better in every column{}</caption><tr><th>run</th>",
        if compare {
            "; the best of each is bold and ticked (&#10003;)"
        } else {
            ""
        }
    );
    for (head, _) in &columns {
        let _ = write!(t, "<th>{head}</th>");
    }
    t.push_str("</tr>");
    for (i, r) in runs.iter().enumerate() {
        let _ = write!(t, "<tr><td>{}</td>", escape(&r.label));
        for ((_, cells), best) in columns.iter().zip(&best) {
            match &cells[i] {
                Some((v, text)) if Some(*v) == *best => {
                    let _ = write!(
                        t,
                        "<td class=\"best\"><b>{}</b> &#10003;</td>",
                        escape(text)
                    );
                }
                Some((_, text)) => {
                    let _ = write!(t, "<td>{}</td>", escape(text));
                }
                None => t.push_str("<td class=\"na\">n/a</td>"),
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t.push_str(
        "<p class=\"note\">Stall intervals are counted against each run's median tps. \
         Writer pause: the seconds writer threads spent paused by the throttle plus waiting for \
         sync flushes, summed over the threads (so it can exceed the run's length).",
    );
    if runs.iter().any(|r| !r.summary.not_measured.is_empty()) {
        t.push_str(" n/a: the run's engine does not measure it.");
    }
    t.push_str("</p>");
    for r in runs.iter().filter(|r| dip_limit(r, 0.5).1) {
        let _ = write!(
            t,
            "<p class=\"note\">{}: its median tps is 0 (it stood still at least half the time), \
             so its stalls are counted against its average tps ({:.1}) instead (vs avg).</p>",
            escape(&r.label),
            r.summary.tps_avg
        );
    }
    t
}

fn summary_table(runs: &[RunResult]) -> String {
    let mut t = String::from(
        "<div class=\"wide\"><table><tr><th>run</th><th>engine</th><th>isolation</th><th>tps avg</th><th>median</th><th>min</th><th>p01</th><th>cv</th>\
         <th>stall intervals</th><th>longest stall (s)</th><th>s &lt;50% avg</th><th>s &lt;10% avg</th>\
         <th>lat avg (ms)</th><th>p95</th>\
         <th>p99</th><th>p99.9</th><th>max</th><th>transactions</th><th>errors</th>\
         <th>pages written/txn</th><th>redo bytes/txn</th><th>sync flush waits</th>\
         <th>sync wait (ms)</th><th>throttle (ms)</th><th>engine bytes/txn</th><th>disk bytes/txn</th>\
         <th>peak RSS (MiB)</th><th>history list max</th><th>undo records purged</th></tr>",
    );
    for r in runs {
        let s = &r.summary;
        let l = &s.latency_ms;
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.3}</td>\
             <td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>\
             <td>{:.2}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.0}</td><td>{}</td>\
             <td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.label),
            escape(&r.engine),
            if r.isolation.is_empty() {
                "?".to_string()
            } else {
                escape(&r.isolation)
            },
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
            measured(r, "engine_bytes_per_txn", format!("{:.0}", s.engine_bytes_per_txn)),
            bytes_text(s.device_bytes_per_txn),
            measured(r, "peak_rss_bytes", format!("{:.0}", s.peak_rss_bytes as f64 / MIB)),
            measured(r, "history_len_max", s.history_len_max.to_string()),
            measured(
                r,
                "undo_records_purged_total",
                s.undo_records_purged_total.to_string()
            ),
        );
    }
    t.push_str("</table></div>");
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

/// Bytes written per transaction, one row per run: the engine's own
/// counters by kind of file (redo, doublewrite, data, other) with a bar
/// of their shares, their total, and the disk's counter beside them.
fn bytes_table(runs: &[RunResult]) -> String {
    const KINDS: [(&str, &str); 4] = [
        ("redo", "#4e79a7"),
        ("doublewrite", "#f28e2b"),
        ("data", "#59a14f"),
        ("other", "#bab0ac"),
    ];
    let widest = runs
        .iter()
        .map(|r| {
            r.summary
                .engine_bytes_per_txn
                .max(r.summary.device_bytes_per_txn.unwrap_or(0.0))
        })
        .fold(0.0, f64::max)
        .max(1.0);
    let mut t = String::from(
        "<div class=\"wide\"><table class=\"bytes\"><tr><th>run</th><th>engine</th>\
         <th><b style=\"color:#4e79a7\">&#9632;</b> redo</th>\
         <th><b style=\"color:#f28e2b\">&#9632;</b> doublewrite</th>\
         <th><b style=\"color:#59a14f\">&#9632;</b> data</th>\
         <th><b style=\"color:#bab0ac\">&#9632;</b> other</th><th>engine total</th>\
         <th>disk</th><th>split (engine total; the line marks the disk's)</th><th>disk counted</th></tr>",
    );
    for r in runs {
        let s = &r.summary;
        let parts = [
            s.log_bytes_per_txn,
            s.dblwr_bytes_per_txn,
            s.data_bytes_per_txn,
            s.other_bytes_per_txn,
        ];
        let engine = !s.not_measured.iter().any(|f| f == "engine_bytes_per_txn");
        let mut bar = String::from("<div class=\"bar\">");
        if engine {
            for ((kind, colour), v) in KINDS.iter().zip(parts) {
                let _ = write!(
                    bar,
                    "<span style=\"width:{:.2}%;background:{colour}\" title=\"{kind}: {v:.0} \
                     bytes/txn\"></span>",
                    v * 100.0 / widest
                );
            }
        }
        if let Some(d) = s.device_bytes_per_txn {
            let _ = write!(
                bar,
                "<i style=\"left:{:.2}%\" title=\"disk: {d:.0} bytes/txn\"></i>",
                (d * 100.0 / widest).min(100.0)
            );
        }
        bar.push_str("</div>");
        let cell = |field: &str, v: f64| measured(r, field, format!("{v:.0}"));
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td class=\"barcell\">{bar}</td><td>{}</td></tr>",
            escape(&r.label),
            escape(&r.engine),
            cell("log_bytes_per_txn", s.log_bytes_per_txn),
            cell("dblwr_bytes_per_txn", s.dblwr_bytes_per_txn),
            cell("data_bytes_per_txn", s.data_bytes_per_txn),
            cell("other_bytes_per_txn", s.other_bytes_per_txn),
            cell("engine_bytes_per_txn", s.engine_bytes_per_txn),
            bytes_text(s.device_bytes_per_txn),
            escape(if s.device.is_empty() { "?" } else { &s.device }),
        );
    }
    t.push_str("</table></div>");
    t.push_str(
        "<p class=\"look\">Redo, doublewrite, data and other (checkpoint slots, file headers) \
         are the engine's own counts of the bytes it handed its files. The disk column is the \
         sectors written to the block device holding the data directory (× 512), by every \
         process writing to it during the run, after the page cache merged what it could; n/a \
         where the directory is on no block device (tmpfs). Neither is the kernel's per-process \
         <code>write_bytes</code>, which charges a whole page-cache folio for each small synced \
         write and so over-counts a redo log many times over.</p>",
    );
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
figure{margin:0 0 1.5em}svg.chart{display:block;width:100%;height:auto}svg .grid{stroke:#ddd}\
svg text{font-size:12px;fill:#333}svg .title{font-size:14px;font-weight:bold;text-anchor:middle}\
svg .ytick{text-anchor:end}svg .xtick,svg .axis{text-anchor:middle}svg text.marker{font-size:11px;fill:#444;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.legend{list-style:none;padding:0;margin:0.3em 0 0;columns:18em;column-gap:2em;font-size:12px}\
.legend li{break-inside:avoid;overflow-wrap:anywhere}\
.look{font-size:13px;color:#444;margin:0.4em 0 0;max-width:75em}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}\
td:first-child,th:first-child{text-align:left}.wide{overflow-x:auto}\
table.verdict{font-size:14px;margin:0.5em 0}table.verdict caption{text-align:left;padding:2px 0;font-size:13px;color:#444}\
table.verdict th{background:#f3f3f3;font-weight:normal}table.verdict td.best{background:#e6f4ea;color:#1a7f37}\
table.verdict td.na{color:#888}\
td.barcell{width:24em}.bar{position:relative;height:12px;width:100%;display:flex}\
.bar span{display:block;height:100%}.bar i{position:absolute;top:-2px;bottom:-2px;width:2px;background:#222}\
.preset{background:#f3f7fb;padding:0 1em;max-width:60em}pre{font-size:12px;background:#f6f6f6;padding:1em;overflow-x:auto}";

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
        "<div class=\"preset\"><p><b>Preset <code>{}</code></b>: seed {}, &ldquo;{}&rdquo;{}. {}.</p>\
         <p><b>The seed's figure:</b> {}.</p><p><b>Look at:</b> {}.</p><ul>\
         <li>workload: <code>{}</code></li><li>engine options: <code>{}</code></li>",
        escape(&p.name),
        p.seed,
        escape(&p.seed_title),
        super::seed(p.seed).map_or_else(String::new, |s| escape(&format!(
            " ({}, {}, {})",
            s.author, s.venue, s.date
        ))),
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

/// The device and option changes and the held view, as a paragraph
/// (empty without any), with the times each run's view was really opened
/// and released.
fn changes_html(runs: &[RunResult]) -> String {
    let markers = change_markers(runs);
    if markers.is_empty() {
        return String::new();
    }
    let items: Vec<String> = markers
        .iter()
        .map(|m| format!("at {} s: <code>{}</code>", m.x, escape(&m.label)))
        .collect();
    let mut out = format!(
        "<p><b>Changes</b> during the measurement (<code>--device-change</code>, \
         <code>--set-at</code>, <code>--hold-view</code>; dashed vertical lines on the charts): \
         {}.</p>",
        items.join("; ")
    );
    for r in runs {
        if let Some(v) = &r.hold_view {
            let _ = write!(
                out,
                "<p>{}: {}</p>",
                escape(&r.label),
                escape(&view_text(v))
            );
        }
    }
    out
}

/// What a run's held view did, in a sentence.
fn view_text(v: &HoldView) -> String {
    let scheduled = format!(
        "a REPEATABLE-READ read view held from {} s for {} s (--hold-view {v})",
        v.at_s, v.for_s
    );
    match (v.opened_at_s, v.released_at_s) {
        (Some(o), Some(r)) => format!(
            "{scheduled}: opened at {o:.2} s, released at {r:.2} s{}; watch the history \
             list grow while it is open and purge catch up after",
            if v.until_end {
                " by the end of the run"
            } else {
                ""
            }
        ),
        (Some(o), None) => format!("{scheduled}: opened at {o:.2} s, release not recorded"),
        _ => format!("{scheduled}: never opened (the run ended first)"),
    }
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
         <h1>keel bench oltp: {} ({} run{}){title_preset}</h1>{}{preset}\
         <p>Each interval's counts are per second; gauges (checkpoint age, mode, pages) are read \
         at the interval's end. A stall interval has under 10 % of the run's median tps; \
         the seconds under 50 % and 10 % of the run's average tps are counted too (a run that \
         stands still more than half the time has a median of 0). \
         Flush policy: {}{}.</p>{}\
         <h2>Summary</h2>{}<h2>Bytes written per transaction</h2>{}\
         <h2>Charts</h2><div class=\"charts\">{}</div>\
         <h2>Settings</h2>{}</body></html>\n",
        escape(&workload),
        report.runs.len(),
        if report.runs.len() == 1 { "" } else { "s" },
        verdict_html(&report.runs),
        escape(&policy),
        if policy == "classic" {
            " (InnoDB 8.0's adaptive flushing; it never throttles writers, so the throttle \
             line reads 0)"
        } else {
            ""
        },
        changes_html(&report.runs),
        summary_table(&report.runs),
        bytes_table(&report.runs),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oltp::{LatencyMs, OltpParams, Summary};

    /// A run with one interval per tps value (1 s each).
    fn run(label: &str, tps: &[f64], summary: Summary) -> RunResult {
        RunResult {
            label: label.into(),
            engine: "keel".into(),
            options: serde_json::Map::new(),
            io_capacity_max: 0,
            isolation: String::new(),
            workload: OltpParams::default(),
            summary,
            intervals: tps
                .iter()
                .enumerate()
                .map(|(i, &tps)| Interval {
                    t_s: (i + 1) as f64,
                    interval_s: 1.0,
                    tps,
                    ..Interval::default()
                })
                .collect(),
            device_changes: Vec::new(),
            option_changes: Vec::new(),
            hold_view: None,
            status: String::new(),
        }
    }

    fn summary(median: f64, avg: f64, max_ms: f64, pages: f64, throttle_ms: f64) -> Summary {
        Summary {
            tps_median: median,
            tps_avg: avg,
            latency_ms: LatencyMs {
                max: max_ms,
                p999: max_ms / 2.0,
                ..LatencyMs::default()
            },
            pages_written_per_txn: pages,
            throttle_delay_ms_total: throttle_ms,
            sync_flush_wait_ms_total: 500.0,
            ..Summary::default()
        }
    }

    /// The verdict's rows after its header, as cell texts with `*` before
    /// the cells marked best.
    fn rows(html: &str) -> Vec<Vec<String>> {
        let table = html.split("</table>").next().unwrap_or_default();
        table
            .split("<tr>")
            .skip(2)
            .map(|row| {
                row.split("<td")
                    .skip(1)
                    .map(|c| {
                        let best = c.starts_with(" class=\"best\"");
                        let text = c.split_once('>').map_or("", |x| x.1);
                        let text = text.split("</td>").next().unwrap_or_default();
                        let text = text.replace("<b>", "").replace("</b> &#10003;", "");
                        if best {
                            format!("*{text}")
                        } else {
                            text
                        }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_verdict_counts_stalls_against_the_median_and_marks_the_best_of_each_column() {
        // a: median 100, 2 intervals under 50, 1 under 10.
        let a = run(
            "a",
            &[100.0, 100.0, 40.0, 5.0, 100.0],
            summary(100.0, 69.0, 80.0, 1.5, 1500.0),
        );
        // b: ties a's max latency, fewer pages; nothing under half.
        let b = run(
            "b",
            &[100.0, 100.0, 90.0, 100.0],
            summary(100.0, 97.5, 80.0, 1.25, 0.0),
        );
        // c: stands still most of the time: median 0, counted against its
        // average (37.5): 3 intervals under 18.75 and under 3.75. Another engine
        // that measures no writes.
        let mut c = run(
            "c",
            &[0.0, 0.0, 0.0, 150.0],
            summary(0.0, 37.5, 900.0, 0.0, 0.0),
        );
        c.summary.not_measured = vec!["pages_written_per_txn".into(), "sync_flush_wait_ms".into()];
        let html = verdict_html(&[a.clone(), b.clone(), c]);
        let r = rows(&html);
        assert_eq!(
            r[0],
            ["a", "2 of 5", "1 of 5", "*80.0", "*40.0", "1.50", "2.00"],
            "{html}"
        );
        assert_eq!(
            r[1],
            ["b", "*0 of 4", "*0 of 4", "*80.0", "*40.0", "*1.25", "*0.50"],
            "{html}"
        );
        // n/a is never best, though 0 would be lowest.
        assert_eq!(
            r[2],
            [
                "c",
                "3 of 4 (vs avg)",
                "3 of 4 (vs avg)",
                "900.0",
                "450.0",
                "n/a",
                "n/a"
            ],
            "{html}"
        );
        assert!(html.contains("c: its median tps is 0"), "{html}");
        assert!(html.contains("n/a: the run's engine does not measure it"));
        // One run: nothing to compare, nothing marked.
        let one = verdict_html(&[a]);
        assert!(!one.contains("best") && !one.contains("&#10003;"), "{one}");
        assert!(!one.contains("median tps is 0"));
        // Every run alike: all tied, all marked.
        let tied = rows(&verdict_html(&[b.clone(), b]));
        for row in &tied {
            assert!(row[1..].iter().all(|c| c.starts_with('*')), "{tied:?}");
        }
    }

    #[test]
    fn a_held_view_is_marked_where_it_opened_and_where_it_was_released() {
        let mut a = run("a", &[10.0; 10], summary(10.0, 10.0, 1.0, 1.0, 0.0));
        a.workload.time_s = 10.0;
        let mut v: HoldView = "2:5".parse().unwrap_or_else(|e| panic!("{e}"));
        v.opened_at_s = Some(2.01);
        v.released_at_s = Some(7.02);
        a.hold_view = Some(v.clone());
        let m = change_markers(&[a.clone(), a.clone()]);
        let got: Vec<(f64, &str)> = m.iter().map(|m| (m.x, m.label.as_str())).collect();
        assert_eq!(got, [(2.0, "view opened"), (7.0, "view released")]);
        let html = changes_html(&[a.clone()]);
        assert!(html.contains("--hold-view 2s:5s"), "{html}");
        assert!(
            html.contains("opened at 2.01 s, released at 7.02 s;"),
            "{html}"
        );
        // Held past the end: no release line at the edge, and the text says so.
        v.for_s = 60.0;
        v.released_at_s = Some(10.03);
        v.until_end = true;
        a.hold_view = Some(v);
        let m = change_markers(std::slice::from_ref(&a));
        assert_eq!(m.len(), 1, "{m:?}");
        let html = changes_html(&[a]);
        assert!(
            html.contains("released at 10.03 s by the end of the run"),
            "{html}"
        );
    }

    #[test]
    fn the_x_axis_ends_at_the_longest_run_and_each_run_gets_its_checkpoint_chart() {
        let mut a = run("a<1>", &[10.0; 20], summary(10.0, 10.0, 1.0, 1.0, 0.0));
        a.summary.time_s = 20.0;
        let b = run("b", &[10.0; 12], Summary::default());
        assert_eq!(run_length(&[a.clone(), b.clone()]), Some(20.0));
        // An old file without the measured time: its last interval.
        a.summary.time_s = 0.0;
        assert_eq!(run_length(&[a.clone()]), Some(20.0));
        // No interval either: the configured duration.
        let mut none = run("n", &[], Summary::default());
        none.workload.time_s = 7.0;
        assert_eq!(run_length(&[none]), Some(7.0));

        let html = charts_html(&[a.clone(), b]);
        assert_eq!(html.matches("<figure>").count(), CHART_TITLES.len() + 1);
        assert!(html.contains("<title>Checkpoint age and its marks: a&lt;1&gt;</title>"));
        assert!(html.contains("<title>Checkpoint age and its marks: b</title>"));
        assert_eq!(
            html.matches("<figcaption class=\"look\">").count(),
            CHART_TITLES.len() + 1
        );
        // The time axis ends at 20, the runs' length, not at 25.
        assert!(html.contains(">20</text>") && !html.contains(">25</text>"));
        let one = charts_html(&[a]);
        assert_eq!(one.matches("<figure>").count(), CHART_TITLES.len());
        assert!(one.contains("<title>Checkpoint age and its marks</title>"));
        for look in LOOK_FOR {
            assert!(one.contains(&escape(look)), "{look}");
        }
    }
}
