//! `keel bench oltp --preset showdown`: the seed presets one after another,
//! each run under both flushing policies on identical data
//! (`--vary flush_policy=classic,steady`), and a verdict on every `steady`
//! run. This module holds what the showdown runs, the criteria, the
//! verdicts computed from the runs' figures ([`Summary`] and the
//! intervals), and the summary page (`index.html`) and `showdown.json`;
//! the command line only orchestrates.
//!
//! Every `steady` run must be stable:
//! - no interval under 50 % of the run's median tps;
//! - no sync-flush (free-check) wait: no writer ever stopped at the
//!   free-check limit;
//! - no transaction over 1 s;
//! - p99.9 latency at most 10 × the median (p50).
//!
//! And against `classic`: every steady run writes at most as many pages
//! per transaction as the lowest of the classic runs with the same
//! settings but the knobs steady ignores (`io_capacity`,
//! `io_capacity_max`: the best hand-tuned classic of the preset's sweep);
//! on `disaster-55` steady's tps avg must be at least 1.5 × classic's
//! (the classic run with the same settings); on `waves-80-sweep` and
//! `waves-80-x4` at least the best classic run's of the sweep.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::chart::escape;

use super::presets::{
    Preset, DISASTER_55, LRU_SCAN_DEPTH, NEIGHBORS, WAVES_80, WAVES_80_SWEEP, WAVES_80_X4,
};
use super::report::STYLE;
use super::summary::stalls;
use super::{OltpError, OltpReport, RunResult};

/// The name given to `--preset`.
pub const SHOWDOWN_NAME: &str = "showdown";

/// The presets the showdown runs, in order. `waves-80-fix` is not among
/// them: its classic run is the sweep's `io_capacity_max=4000` run (with
/// 50 s instead of 150 s).
pub const SHOWDOWN_PRESETS: [&Preset; 6] = [
    &DISASTER_55,
    &NEIGHBORS,
    &WAVES_80,
    &WAVES_80_SWEEP,
    &WAVES_80_X4,
    &LRU_SCAN_DEPTH,
];

/// The `--vary` axis added to every preset unless the command line gives
/// `flush_policy` itself.
pub const SHOWDOWN_VARY: &str = "flush_policy=classic,steady";

/// Measured seconds of the showdown as defined: each preset's `time` ×
/// its runs × 2 policies (checked against the presets by a test).
pub const SHOWDOWN_RUN_SECONDS: u64 = 2000;

/// One line for `--preset list` and `--help`.
pub const SHOWDOWN_ABOUT: &str = "disaster-55, neighbors, waves-80, waves-80-sweep, \
    waves-80-x4 and lru-scan-depth one after another, each with --vary \
    flush_policy=classic,steady on its own data, and a pass/fail verdict on every steady run \
    (report DIR/index.html, DIR/showdown.json): 2,000 s of runs, about 34 min (about 37 with \
    loading the tables); waves-80-fix is covered by the sweep (its classic run is the sweep's \
    io_capacity_max=4000 run, 50 s instead of 150 s)";

/// A steady run's intervals must all reach this share of its median tps.
pub const MIN_SHARE_OF_MEDIAN: f64 = 0.5;
/// A steady run's longest transaction must be under this (ms).
pub const MAX_LATENCY_MS: f64 = 1000.0;
/// A steady run's p99.9 latency must be at most this multiple of its p50.
pub const MAX_P999_OVER_P50: f64 = 10.0;
/// On `disaster-55`, steady's tps avg must be at least this multiple of
/// classic's.
pub const DISASTER_MIN_TPS_RATIO: f64 = 1.5;

/// What a preset's steady runs are compared with, beyond the stability
/// criteria.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Comparison {
    /// Nothing more.
    None,
    /// tps avg at least this multiple of the classic run with the same
    /// settings (but the policy).
    TpsRatioToClassic(f64),
    /// tps avg at least the best classic run's.
    AtLeastBestClassic,
}

fn comparison(preset: &str) -> Comparison {
    if preset == DISASTER_55.name {
        Comparison::TpsRatioToClassic(DISASTER_MIN_TPS_RATIO)
    } else if preset == WAVES_80_SWEEP.name || preset == WAVES_80_X4.name {
        Comparison::AtLeastBestClassic
    } else {
        Comparison::None
    }
}

/// The criteria in words, for the page, the text and the JSON.
pub fn criteria() -> Vec<String> {
    vec![
        format!(
            "every steady run: no interval under {:.0} % of the run's median tps",
            MIN_SHARE_OF_MEDIAN * 100.0
        ),
        "every steady run: no sync-flush (free-check) wait".to_string(),
        format!(
            "every steady run: longest transaction under {:.0} ms",
            MAX_LATENCY_MS
        ),
        format!("every steady run: p99.9 latency at most {MAX_P999_OVER_P50:.0} × p50"),
        format!(
            "{}: steady's tps avg at least {DISASTER_MIN_TPS_RATIO} × classic's",
            DISASTER_55.name
        ),
        format!(
            "{} and {}: steady's tps avg at least the best classic run's",
            WAVES_80_SWEEP.name, WAVES_80_X4.name
        ),
        format!(
            "every steady run: pages written per transaction at most the lowest of the classic \
             runs with the same settings but {} (the knobs steady ignores)",
            IGNORED_BY_STEADY.join(" and ")
        ),
    ]
}

/// One run's figures as the summary page shows them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRow {
    /// The run's label (its `--vary` values).
    pub label: String,
    /// Its flushing policy.
    pub policy: String,
    /// Transactions per measured second.
    pub tps_avg: f64,
    /// Median of the per-interval tps.
    pub tps_median: f64,
    /// Intervals under 50 % of the median tps.
    pub intervals_below_half_median: u64,
    /// Intervals measured.
    pub intervals: usize,
    /// Writers that waited for a sync flush (stopped at the free-check
    /// limit).
    pub sync_flush_waits: u64,
    /// Milliseconds they waited in all.
    pub sync_flush_wait_ms: f64,
    /// Longest transaction, ms.
    pub max_latency_ms: f64,
    /// Median transaction latency, ms.
    pub p50_ms: f64,
    /// 99.9th percentile of transaction latency, ms.
    pub p999_ms: f64,
    /// p99.9 / p50 (absent when p50 is 0).
    pub p999_over_p50: Option<f64>,
    /// Pages written per transaction.
    pub pages_written_per_txn: f64,
}

/// The flushing policy a run used, as its options name it.
fn policy(run: &RunResult) -> &str {
    run.options
        .get("flush_policy")
        .and_then(|v| v.as_str())
        .unwrap_or("?")
}

fn is_policy(run: &RunResult, name: &str) -> bool {
    policy(run) == name
}

impl RunRow {
    /// The row of `run`, from its summary and intervals.
    pub fn of(run: &RunResult) -> RunRow {
        let s = &run.summary;
        let l = &s.latency_ms;
        let (below, _) = stalls(&run.intervals, s.tps_median * MIN_SHARE_OF_MEDIAN);
        RunRow {
            label: run.label.clone(),
            policy: policy(run).to_string(),
            tps_avg: s.tps_avg,
            tps_median: s.tps_median,
            intervals_below_half_median: below,
            intervals: run.intervals.len(),
            sync_flush_waits: s.sync_flush_waits,
            sync_flush_wait_ms: s.sync_flush_wait_ms_total,
            max_latency_ms: l.max,
            p50_ms: l.p50,
            p999_ms: l.p999,
            p999_over_p50: (l.p50 > 0.0).then(|| l.p999 / l.p50),
            pages_written_per_txn: s.pages_written_per_txn,
        }
    }
}

/// One criterion applied to one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// What is required.
    pub criterion: String,
    /// What the run did.
    pub value: String,
    /// Whether it meets the criterion.
    pub pass: bool,
}

/// The verdict on one steady run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunVerdict {
    /// The run's label.
    pub label: String,
    /// Every check passed.
    pub pass: bool,
    /// The checks, stability criteria first, then the comparisons with
    /// classic.
    pub checks: Vec<Check>,
}

/// The verdict on one preset: its runs and the verdict on each steady run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PresetVerdict {
    /// The preset's name.
    pub preset: String,
    /// Its one-line description.
    pub about: String,
    /// Its report, relative to the showdown's report directory.
    pub report: String,
    /// Every run, in the order they ran.
    pub runs: Vec<RunRow>,
    /// The verdict on each steady run.
    pub steady: Vec<RunVerdict>,
    /// What could not be judged, and why.
    pub notes: Vec<String>,
    /// There is a steady run and every steady run passed.
    pub pass: bool,
}

/// The showdown's result: `showdown.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShowdownReport {
    /// Format version of this JSON (1).
    pub version: u32,
    /// The criteria, in words.
    pub criteria: Vec<String>,
    /// The presets run so far, in order.
    pub presets: Vec<PresetVerdict>,
    /// The presets not run yet (the page is rewritten after each preset).
    pub pending: Vec<String>,
    /// Every preset ran and passed.
    pub pass: bool,
}

impl ShowdownReport {
    /// The result of the presets judged so far, `pending` still to run.
    pub fn new(presets: Vec<PresetVerdict>, pending: Vec<String>) -> ShowdownReport {
        let pass = pending.is_empty() && !presets.is_empty() && presets.iter().all(|p| p.pass);
        ShowdownReport {
            version: 1,
            criteria: criteria(),
            presets,
            pending,
            pass,
        }
    }
}

fn check(criterion: impl Into<String>, value: impl Into<String>, pass: bool) -> Check {
    Check {
        criterion: criterion.into(),
        value: value.into(),
        pass,
    }
}

/// The stability checks of one run.
fn stability_checks(row: &RunRow) -> Vec<Check> {
    let share = MIN_SHARE_OF_MEDIAN * 100.0;
    let below = if row.intervals == 0 || row.tps_median <= 0.0 {
        check(
            format!("no interval under {share:.0} % of the median tps"),
            format!(
                "no throughput to judge ({} intervals, median {:.1} tps)",
                row.intervals, row.tps_median
            ),
            false,
        )
    } else {
        check(
            format!("no interval under {share:.0} % of the median tps"),
            format!(
                "{} of {} intervals under {:.1} tps (median {:.1})",
                row.intervals_below_half_median,
                row.intervals,
                row.tps_median * MIN_SHARE_OF_MEDIAN,
                row.tps_median
            ),
            row.intervals_below_half_median == 0,
        )
    };
    vec![
        below,
        check(
            "no sync-flush (free-check) wait",
            format!(
                "{} waits ({:.1} ms)",
                row.sync_flush_waits, row.sync_flush_wait_ms
            ),
            row.sync_flush_waits == 0,
        ),
        check(
            format!("longest transaction under {MAX_LATENCY_MS:.0} ms"),
            format!("{:.1} ms", row.max_latency_ms),
            row.max_latency_ms < MAX_LATENCY_MS,
        ),
        check(
            format!("p99.9 at most {MAX_P999_OVER_P50:.0} × p50"),
            match row.p999_over_p50 {
                Some(r) => format!("{:.2} / {:.2} ms = {r:.1} ×", row.p999_ms, row.p50_ms),
                None => "no latency to judge (p50 is 0)".to_string(),
            },
            row.p999_over_p50.is_some_and(|r| r <= MAX_P999_OVER_P50),
        ),
    ]
}

/// Whether runs `a` and `b` have the same workload and the same options
/// but `flush_policy` and the keys in `but`.
fn same_settings_but(a: &RunResult, b: &RunResult, but: &[&str]) -> bool {
    let others = |r: &RunResult| {
        let mut o = r.options.clone();
        o.remove("flush_policy");
        for k in but {
            o.remove(*k);
        }
        o
    };
    a.workload == b.workload && others(a) == others(b)
}

/// The classic run with the same workload and options as `steady` but
/// the policy; failing that, the only classic run.
fn counterpart<'a>(steady: &RunResult, runs: &'a [RunResult]) -> Option<&'a RunResult> {
    let classic: Vec<&RunResult> = runs.iter().filter(|r| is_policy(r, "classic")).collect();
    classic
        .iter()
        .copied()
        .find(|c| same_settings_but(c, steady, &[]))
        .or_else(|| (classic.len() == 1).then(|| classic[0]))
}

/// The options `steady` ignores: the classic runs that differ from a
/// steady run only in these are its hand-tuned counterparts.
pub const IGNORED_BY_STEADY: [&str; 2] = ["io_capacity", "io_capacity_max"];

/// The classic runs with the same workload and options as `steady` but
/// the policy and the knobs steady ignores ([`IGNORED_BY_STEADY`]): the
/// preset's sweep of hand-tuned settings.
fn hand_tuned<'a>(steady: &RunResult, runs: &'a [RunResult]) -> Vec<&'a RunResult> {
    runs.iter()
        .filter(|r| is_policy(r, "classic"))
        .filter(|c| same_settings_but(c, steady, &IGNORED_BY_STEADY))
        .collect()
}

/// The classic run with the highest tps avg.
fn best_classic(runs: &[RunResult]) -> Option<&RunResult> {
    runs.iter()
        .filter(|r| is_policy(r, "classic"))
        .max_by(|a, b| a.summary.tps_avg.total_cmp(&b.summary.tps_avg))
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2} ×"))
}

/// Judge one preset's runs. `report` is the link to its report (relative
/// to the showdown's page); `preset` its name (the report's own name wins
/// when it has one).
pub fn judge(preset: &str, report_link: &str, report: &OltpReport) -> PresetVerdict {
    let name = report.preset.clone().unwrap_or_else(|| preset.to_string());
    let about = report
        .preset_settings
        .as_ref()
        .map(|s| s.about.clone())
        .unwrap_or_default();
    let runs: Vec<RunRow> = report.runs.iter().map(RunRow::of).collect();
    let mut notes = Vec::new();
    let mut steady = Vec::new();
    let cmp = comparison(&name);
    let best = best_classic(&report.runs);
    for (run, row) in report.runs.iter().zip(&runs) {
        if !is_policy(run, "steady") {
            continue;
        }
        let mut checks = stability_checks(row);
        match cmp {
            Comparison::None => {}
            Comparison::TpsRatioToClassic(min) => match counterpart(run, &report.runs) {
                Some(c) => {
                    let r = ratio(run.summary.tps_avg, c.summary.tps_avg);
                    checks.push(check(
                        format!("tps avg at least {min} × classic's"),
                        format!(
                            "{:.1} vs {:.1} ({}) = {}",
                            run.summary.tps_avg,
                            c.summary.tps_avg,
                            c.label,
                            ratio_text(r)
                        ),
                        // Classic at 0 tps: any steady throughput is better.
                        r.map_or(run.summary.tps_avg > 0.0, |r| r >= min),
                    ));
                }
                None => notes.push(format!(
                    "{}: no classic run to compare with (the tps ratio was not judged)",
                    run.label
                )),
            },
            Comparison::AtLeastBestClassic => match best {
                Some(b) => {
                    let (s, c) = (&run.summary, &b.summary);
                    checks.push(check(
                        "tps avg at least the best classic run's",
                        format!(
                            "{:.1} vs {:.1} ({}) = {}",
                            s.tps_avg,
                            c.tps_avg,
                            b.label,
                            ratio_text(ratio(s.tps_avg, c.tps_avg))
                        ),
                        s.tps_avg >= c.tps_avg && s.tps_avg > 0.0,
                    ));
                }
                None => notes.push(format!(
                    "{}: no classic run to compare with (the tps against the best classic run \
                     was not judged)",
                    run.label
                )),
            },
        }
        // Pages per transaction: at most the lowest of the sweep.
        let lowest = hand_tuned(run, &report.runs).into_iter().min_by(|a, b| {
            a.summary
                .pages_written_per_txn
                .total_cmp(&b.summary.pages_written_per_txn)
        });
        match lowest {
            Some(c) => {
                let (s, c_pages) = (&run.summary, c.summary.pages_written_per_txn);
                checks.push(check(
                    "pages written per transaction at most the lowest classic run's",
                    format!(
                        "{:.2} vs {:.2} ({}) = {}",
                        s.pages_written_per_txn,
                        c_pages,
                        c.label,
                        ratio_text(ratio(s.pages_written_per_txn, c_pages))
                    ),
                    s.pages_written_per_txn <= c_pages,
                ));
            }
            None => notes.push(format!(
                "{}: no classic run with the same settings (pages per transaction were not \
                 judged)",
                run.label
            )),
        }
        steady.push(RunVerdict {
            label: run.label.clone(),
            pass: checks.iter().all(|c| c.pass),
            checks,
        });
    }
    if steady.is_empty() {
        notes.push("no steady run: nothing to judge (the preset does not pass)".to_string());
    }
    if cmp == Comparison::AtLeastBestClassic && steady.len() > 1 {
        notes.push(
            "steady ignores io_capacity_max: its runs of the sweep are repeats of one setting \
             (their spread is the run-to-run noise)"
                .to_string(),
        );
    }
    PresetVerdict {
        pass: !steady.is_empty() && steady.iter().all(|v| v.pass),
        preset: name,
        about,
        report: report_link.to_string(),
        runs,
        steady,
        notes,
    }
}

/// `path` with `-PRESET` inserted before its extension:
/// `runs.json` → `runs-disaster-55.json`, `out` → `out-disaster-55`.
pub fn preset_file(path: &Path, preset: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{preset}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{preset}"),
    };
    path.with_file_name(name)
}

fn verdict_word(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}

/// The verdicts as text, for the end of the command's output.
pub fn showdown_text(s: &ShowdownReport) -> String {
    let mut out = String::from("\nshowdown: classic against steady\n");
    for p in &s.presets {
        let _ = writeln!(out, "{} {}", verdict_word(p.pass), p.preset);
        for v in &p.steady {
            let _ = writeln!(out, "  {} steady run {}", verdict_word(v.pass), v.label);
            for c in &v.checks {
                let _ = writeln!(
                    out,
                    "    {} {}: {}",
                    verdict_word(c.pass),
                    c.criterion,
                    c.value
                );
            }
        }
        for n in &p.notes {
            let _ = writeln!(out, "  note: {n}");
        }
    }
    if !s.pending.is_empty() {
        let _ = writeln!(out, "not run: {}", s.pending.join(", "));
    }
    let failed: Vec<&str> = s
        .presets
        .iter()
        .filter(|p| !p.pass)
        .map(|p| p.preset.as_str())
        .collect();
    let _ = writeln!(
        out,
        "showdown {}: {} of {} presets passed{}",
        verdict_word(s.pass),
        s.presets.len() - failed.len(),
        s.presets.len() + s.pending.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" (failed: {})", failed.join(", "))
        }
    );
    out
}

fn verdict_html(pass: bool) -> String {
    let (class, word) = if pass {
        ("pass", "PASS")
    } else {
        ("fail", "FAIL")
    };
    format!("<span class=\"{class}\">{word}</span>")
}

fn runs_table(runs: &[RunRow]) -> String {
    let mut t = String::from(
        "<table><tr><th>run</th><th>policy</th><th>tps avg</th><th>tps median</th>\
         <th>intervals &lt; 50 % of median</th><th>free-check / sync-flush waits</th>\
         <th>max latency (ms)</th><th>p50 (ms)</th><th>p99.9 (ms)</th><th>p99.9 / p50</th>\
         <th>pages written/txn</th></tr>",
    );
    for r in runs {
        let _ = write!(
            t,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{:.1}</td><td>{:.1}</td><td>{} of {}</td>\
             <td>{} ({:.1} ms)</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td>\
             <td>{:.2}</td></tr>",
            escape(&r.label),
            escape(&r.policy),
            r.tps_avg,
            r.tps_median,
            r.intervals_below_half_median,
            r.intervals,
            r.sync_flush_waits,
            r.sync_flush_wait_ms,
            r.max_latency_ms,
            r.p50_ms,
            r.p999_ms,
            r.p999_over_p50
                .map_or_else(|| "-".to_string(), |x| format!("{x:.1}")),
            r.pages_written_per_txn,
        );
    }
    t.push_str("</table>");
    t
}

fn verdicts_table(verdicts: &[RunVerdict]) -> String {
    let mut t = String::from(
        "<table><tr><th>steady run</th><th>criterion</th><th>value</th><th>result</th></tr>",
    );
    for v in verdicts {
        for c in &v.checks {
            let _ = write!(
                t,
                "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td></tr>",
                escape(&v.label),
                escape(&c.criterion),
                escape(&c.value),
                verdict_html(c.pass)
            );
        }
        let _ = write!(
            t,
            "<tr class=\"total\"><td>{}</td><td class=\"l\" colspan=\"2\">every check</td>\
             <td>{}</td></tr>",
            escape(&v.label),
            verdict_html(v.pass)
        );
    }
    t.push_str("</table>");
    t
}

/// The summary page: the overall verdict, the criteria, then per preset
/// its runs, the verdict on each steady run and a link to its report. One
/// self-contained page, no script.
pub fn render_showdown_html(s: &ShowdownReport) -> String {
    let mut body = String::new();
    let passed = s.presets.iter().filter(|p| p.pass).count();
    let _ = write!(
        body,
        "<p class=\"overall\">Showdown: {} &mdash; {passed} of {} presets passed{}.</p>",
        verdict_html(s.pass),
        s.presets.len() + s.pending.len(),
        if s.pending.is_empty() {
            String::new()
        } else {
            format!(", not run yet: {}", escape(&s.pending.join(", ")))
        }
    );
    body.push_str(
        "<div class=\"preset\"><p>Each preset ran once per flushing policy on identical data \
         (<code>--vary flush_policy=classic,steady</code>, with the preset's own axes). \
         <code>waves-80-fix</code> is covered by <code>waves-80-sweep</code>: its classic run \
         is the sweep's <code>io_capacity_max=4000</code> run (50 s instead of 150 s). \
         The criteria:</p><ul>",
    );
    for c in &s.criteria {
        let _ = write!(body, "<li>{}</li>", escape(c));
    }
    body.push_str("</ul></div><ul>");
    for p in &s.presets {
        let _ = write!(
            body,
            "<li><a href=\"#{0}\">{0}</a>: {1}</li>",
            escape(&p.preset),
            verdict_html(p.pass)
        );
    }
    body.push_str("</ul>");
    for p in &s.presets {
        let _ = write!(
            body,
            "<h2 id=\"{0}\">{0}: {1}</h2><p>{2}. Full report: <a href=\"{3}\">{3}</a>.</p>\
             <h3>Runs</h3>{4}<h3>Verdict on each steady run</h3>",
            escape(&p.preset),
            verdict_html(p.pass),
            escape(&p.about),
            escape(&p.report),
            runs_table(&p.runs),
        );
        if !p.steady.is_empty() {
            body.push_str(&verdicts_table(&p.steady));
        }
        if !p.notes.is_empty() {
            body.push_str("<ul>");
            for n in &p.notes {
                let _ = write!(body, "<li>{}</li>", escape(n));
            }
            body.push_str("</ul>");
        }
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>keel bench oltp: showdown</title><style>{STYLE}{SHOWDOWN_STYLE}</style></head>\
         <body><h1>keel bench oltp: showdown, classic against steady</h1>{body}</body></html>\n"
    )
}

const SHOWDOWN_STYLE: &str = ".pass{color:#1a7f37;font-weight:bold}\
.fail{color:#c62828;font-weight:bold}.overall{font-size:1.2em}tr.total td{background:#f6f6f6}\
h3{font-size:1em}td.l{text-align:left}";

/// Write `index.html` and `showdown.json` in `dir` (created if needed);
/// returns their paths.
pub fn write_showdown(s: &ShowdownReport, dir: &Path) -> Result<(PathBuf, PathBuf), OltpError> {
    std::fs::create_dir_all(dir)
        .map_err(OltpError::io(format!("cannot create {}", dir.display())))?;
    let page = dir.join("index.html");
    std::fs::write(&page, render_showdown_html(s))
        .map_err(OltpError::io(format!("cannot write {}", page.display())))?;
    let json = dir.join("showdown.json");
    let text = serde_json::to_string_pretty(s)
        .map_err(|e| OltpError::Data(format!("cannot encode {}: {e}", json.display())))?;
    std::fs::write(&json, text + "\n")
        .map_err(OltpError::io(format!("cannot write {}", json.display())))?;
    Ok((page, json))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::oltp::{Interval, LatencyMs, OltpParams, Summary, PRESETS};

    /// A run under `policy` with these per-interval tps, waits, latency
    /// (p50, p99.9, max) and tps avg.
    fn run(label: &str, policy: &str, tps: &[f64], waits: u64, lat: (f64, f64, f64)) -> RunResult {
        let intervals: Vec<Interval> = tps
            .iter()
            .enumerate()
            .map(|(i, &t)| Interval {
                t_s: i as f64 + 1.0,
                interval_s: 1.0,
                tps: t,
                transactions: t as u64,
                ..Interval::default()
            })
            .collect();
        let mut sorted = tps.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mut options = serde_json::Map::new();
        options.insert("flush_policy".into(), policy.into());
        options.insert("io_capacity".into(), 100.into());
        RunResult {
            label: label.to_string(),
            engine: "keel".into(),
            options,
            io_capacity_max: 200,
            isolation: String::new(),
            workload: OltpParams::default(),
            summary: Summary {
                time_s: tps.len() as f64,
                tps_avg: tps.iter().sum::<f64>() / tps.len().max(1) as f64,
                tps_median: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
                sync_flush_waits: waits,
                sync_flush_wait_ms_total: waits as f64 * 10.0,
                latency_ms: LatencyMs {
                    p50: lat.0,
                    p999: lat.1,
                    max: lat.2,
                    ..LatencyMs::default()
                },
                pages_written_per_txn: 1.5,
                ..Summary::default()
            },
            intervals,
            device_changes: Vec::new(),
            option_changes: Vec::new(),
            hold_view: None,
            status: String::new(),
        }
    }

    fn report(preset: &str, runs: Vec<RunResult>) -> OltpReport {
        OltpReport {
            version: 1,
            preset: Some(preset.to_string()),
            preset_settings: None,
            prepare_sets: Vec::new(),
            runs,
        }
    }

    const GOOD_LAT: (f64, f64, f64) = (10.0, 50.0, 200.0);
    const FLAT: [f64; 4] = [500.0, 510.0, 490.0, 505.0];

    fn steady_checks(r: RunResult) -> Vec<Check> {
        let v = judge(
            "neighbors",
            "neighbors/index.html",
            &report("neighbors", vec![r]),
        );
        assert_eq!(v.steady.len(), 1);
        v.steady[0].checks.clone()
    }

    #[test]
    fn a_stable_steady_run_passes_every_criterion() {
        let checks = steady_checks(run("steady", "steady", &FLAT, 0, GOOD_LAT));
        assert_eq!(checks.len(), 4);
        assert!(checks.iter().all(|c| c.pass), "{checks:?}");
    }

    #[test]
    fn each_stability_criterion_fails_on_its_own() {
        // One interval under half the median (249 < 250).
        let c = steady_checks(run(
            "s",
            "steady",
            &[500.0, 500.0, 249.0, 500.0],
            0,
            GOOD_LAT,
        ));
        assert_eq!(
            c.iter().map(|c| c.pass).collect::<Vec<_>>(),
            [false, true, true, true]
        );
        assert!(c[0].value.starts_with("1 of 4 intervals"), "{}", c[0].value);
        // Exactly half the median is not under it.
        let c = steady_checks(run(
            "s",
            "steady",
            &[500.0, 500.0, 250.0, 500.0],
            0,
            GOOD_LAT,
        ));
        assert!(c[0].pass, "{c:?}");
        // One sync-flush wait.
        let c = steady_checks(run("s", "steady", &FLAT, 1, GOOD_LAT));
        assert_eq!(
            c.iter().map(|c| c.pass).collect::<Vec<_>>(),
            [true, false, true, true]
        );
        // A transaction of 1 s (under 1 s is required).
        let c = steady_checks(run("s", "steady", &FLAT, 0, (10.0, 50.0, 1000.0)));
        assert_eq!(
            c.iter().map(|c| c.pass).collect::<Vec<_>>(),
            [true, true, false, true]
        );
        let c = steady_checks(run("s", "steady", &FLAT, 0, (10.0, 50.0, 999.9)));
        assert!(c[2].pass, "{c:?}");
        // p99.9 over 10 × p50; exactly 10 × passes.
        let c = steady_checks(run("s", "steady", &FLAT, 0, (10.0, 100.1, 200.0)));
        assert_eq!(
            c.iter().map(|c| c.pass).collect::<Vec<_>>(),
            [true, true, true, false]
        );
        let c = steady_checks(run("s", "steady", &FLAT, 0, (10.0, 100.0, 200.0)));
        assert!(c[3].pass, "{c:?}");
        // No transactions at all: nothing passes the throughput and
        // latency-ratio checks.
        let c = steady_checks(run("s", "steady", &[0.0, 0.0], 0, (0.0, 0.0, 0.0)));
        assert!(!c[0].pass && !c[3].pass, "{c:?}");
    }

    #[test]
    fn only_steady_runs_are_judged_and_a_preset_passes_when_all_do() {
        let v = judge(
            "neighbors",
            "neighbors/index.html",
            &report(
                "neighbors",
                vec![
                    // Classic stalls: shown, not judged.
                    run(
                        "c",
                        "classic",
                        &[500.0, 0.0, 500.0],
                        900,
                        (15.0, 3000.0, 3100.0),
                    ),
                    run("s1", "steady", &FLAT, 0, GOOD_LAT),
                    run("s2", "steady", &FLAT, 0, GOOD_LAT),
                ],
            ),
        );
        assert_eq!(v.runs.len(), 3);
        assert_eq!(v.runs[0].intervals_below_half_median, 1);
        assert_eq!(v.runs[0].p999_over_p50, Some(200.0));
        assert_eq!(v.steady.len(), 2);
        assert!(v.pass);
        // One failing steady run fails the preset.
        let v = judge(
            "neighbors",
            "x",
            &report(
                "neighbors",
                vec![
                    run("s1", "steady", &FLAT, 0, GOOD_LAT),
                    run("s2", "steady", &FLAT, 3, GOOD_LAT),
                ],
            ),
        );
        assert!(!v.pass && v.steady[0].pass && !v.steady[1].pass);
        // No steady run: nothing to judge, no pass.
        let v = judge(
            "waves-80",
            "x",
            &report("waves-80", vec![run("c", "classic", &FLAT, 0, GOOD_LAT)]),
        );
        assert!(!v.pass && v.steady.is_empty() && !v.notes.is_empty());
    }

    #[test]
    fn disaster_55_needs_steady_at_1_5_times_classic() {
        let classic = run(
            "flush_policy=classic",
            "classic",
            &[200.0; 4],
            500,
            GOOD_LAT,
        );
        let judge55 = |steady_tps: f64| {
            let v = judge(
                "disaster-55",
                "disaster-55/index.html",
                &report(
                    "disaster-55",
                    vec![
                        classic.clone(),
                        run(
                            "flush_policy=steady",
                            "steady",
                            &[steady_tps; 4],
                            0,
                            GOOD_LAT,
                        ),
                    ],
                ),
            );
            v.steady[0]
                .checks
                .iter()
                .find(|c| c.criterion.contains("× classic"))
                .cloned()
                .unwrap()
        };
        let c = judge55(300.0);
        assert!(c.pass && c.criterion.contains("1.5 × classic"), "{c:?}");
        assert!(c.value.contains("1.50 ×"), "{c:?}");
        assert!(!judge55(299.0).pass);
        // The counterpart is the classic run with the same other settings.
        let mut other = run("c2", "classic", &[1000.0; 4], 0, GOOD_LAT);
        other.options.insert("io_capacity".into(), 400.into());
        let v = judge(
            "disaster-55",
            "x",
            &report(
                "disaster-55",
                vec![
                    other,
                    classic.clone(),
                    run("s", "steady", &[400.0; 4], 0, GOOD_LAT),
                ],
            ),
        );
        assert!(v.pass, "{v:?}");
        // No classic run: the ratio is not judged, and said so.
        let v = judge(
            "disaster-55",
            "x",
            &report(
                "disaster-55",
                vec![run("s", "steady", &[400.0; 4], 0, GOOD_LAT)],
            ),
        );
        assert_eq!(v.steady[0].checks.len(), 4);
        assert!(v.notes.iter().any(|n| n.contains("no classic run")));
    }

    #[test]
    fn the_sweep_compares_steady_with_its_best_classic_run() {
        // The fastest classic run is not the one with the fewest pages per
        // transaction: steady must match each.
        let classic = |label: &str, tps: f64, pages: f64| {
            let mut r = run(label, "classic", &[tps; 4], 0, GOOD_LAT);
            r.options.insert(
                "io_capacity_max".into(),
                label[2..6].parse::<u64>().unwrap().into(),
            );
            r.summary.pages_written_per_txn = pages;
            r
        };
        let sweep = |steady_tps: f64, steady_pages: f64| {
            let steady = |label: &str| {
                let mut r = run(label, "steady", &[steady_tps; 4], 0, GOOD_LAT);
                r.summary.pages_written_per_txn = steady_pages;
                r
            };
            judge(
                "waves-80-sweep",
                "waves-80-sweep/index.html",
                &report(
                    "waves-80-sweep",
                    vec![
                        classic("m=2000 classic", 2600.0, 1.4),
                        steady("m=2000 steady"),
                        classic("m=4000 classic", 2800.0, 1.6),
                        steady("m=4000 steady"),
                    ],
                ),
            )
        };
        let v = sweep(2800.0, 1.4);
        assert!(v.pass, "{v:?}");
        let [.., tps, pages] = &v.steady[0].checks[..] else {
            panic!("{v:?}")
        };
        assert!(tps.value.contains("(m=4000 classic)"), "{tps:?}");
        assert!(pages.criterion.starts_with("pages written per transaction"));
        assert!(
            pages.pass && pages.value.contains("(m=2000 classic)"),
            "{pages:?}"
        );
        assert!(v.notes.iter().any(|n| n.contains("repeats")));
        let v = sweep(2700.0, 1.4);
        assert!(!v.pass && v.steady.iter().all(|s| !s.pass));
        assert!(v.steady[0].checks[..4].iter().all(|c| c.pass));
        // Faster than the fastest classic run, with fewer page writes per
        // transaction than it, but more than the sweep's lowest: it fails.
        let v = sweep(2900.0, 1.5);
        assert!(!v.pass, "{v:?}");
        let pages = v.steady[0].checks.last().unwrap();
        assert!(
            !pages.pass && pages.value.contains("1.50 vs 1.40 (m=2000 classic)"),
            "{pages:?}"
        );
    }

    #[test]
    fn the_page_the_text_and_the_json_name_every_preset_and_verdict() {
        let good = judge(
            "disaster-55",
            "disaster-55/index.html",
            &report(
                "disaster-55",
                vec![
                    run("flush_policy=classic", "classic", &[100.0; 3], 9, GOOD_LAT),
                    run("flush_policy=steady", "steady", &[300.0; 3], 0, GOOD_LAT),
                ],
            ),
        );
        let bad = judge(
            "lru-scan-depth",
            "lru-scan-depth/index.html",
            &report(
                "lru-scan-depth",
                vec![run("flush_policy=steady", "steady", &FLAT, 2, GOOD_LAT)],
            ),
        );
        let s = ShowdownReport::new(vec![good, bad], vec!["waves-80".into()]);
        assert!(!s.pass);
        let page = render_showdown_html(&s);
        assert!(
            page.contains("<a href=\"disaster-55/index.html\">"),
            "{page}"
        );
        assert!(page.contains("lru-scan-depth") && page.contains("waves-80"));
        assert!(page.contains("class=\"pass\"") && page.contains("class=\"fail\""));
        let text = showdown_text(&s);
        assert!(text.contains("PASS disaster-55") && text.contains("FAIL lru-scan-depth"));
        assert!(
            text.contains("showdown FAIL: 1 of 3 presets passed"),
            "{text}"
        );
        let dir = tempfile::tempdir().unwrap();
        let (page, json) = write_showdown(&s, dir.path()).unwrap();
        assert!(page.exists());
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        assert_eq!(v["presets"][1]["preset"], "lru-scan-depth");
        assert_eq!(v["presets"][1]["steady"][0]["checks"][1]["pass"], false);
        assert_eq!(v["pass"], false);
    }

    #[test]
    fn preset_files_get_the_name_before_the_extension() {
        let f = |p: &str| preset_file(Path::new(p), "disaster-55");
        assert_eq!(f("runs.json"), Path::new("runs-disaster-55.json"));
        assert_eq!(f("out/runs.csv"), Path::new("out/runs-disaster-55.csv"));
        assert_eq!(f("runs"), Path::new("runs-disaster-55"));
        assert_eq!(f("a.b.json"), Path::new("a.b-disaster-55.json"));
    }

    #[test]
    fn the_about_text_states_the_presets_run_time() {
        let mut total = 0.0;
        for p in SHOWDOWN_PRESETS {
            assert!(PRESETS.contains(&p), "{}", p.name);
            assert!(SHOWDOWN_ABOUT.contains(p.name), "{}", p.name);
            let mut params = OltpParams::default();
            p.apply_workload(&mut params).unwrap();
            let runs: usize = p
                .vary_axes(&[])
                .unwrap()
                .iter()
                .map(|a| a.values.len())
                .product();
            total += params.time_s * runs as f64 * 2.0;
        }
        assert_eq!(total, SHOWDOWN_RUN_SECONDS as f64);
        assert!(SHOWDOWN_ABOUT.contains("2,000 s"), "{SHOWDOWN_ABOUT}");
        assert!(!SHOWDOWN_ABOUT.contains('\n'));
        assert!(SHOWDOWN_ABOUT.contains("waves-80-fix"));
        let list = crate::oltp::presets_text();
        assert!(
            list.lines()
                .any(|l| l.trim_start().starts_with("showdown ") && l.contains(SHOWDOWN_ABOUT)),
            "{list}"
        );
    }
}
