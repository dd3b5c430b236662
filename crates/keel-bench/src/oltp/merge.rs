//! `keel report`: read the JSON files of several invocations (and of other
//! engines' runs written in Keel's format, such as `keel bench innodb`'s)
//! and merge their runs into one report, so that runs made apart, even on
//! different days or engines, are compared in one HTML page and one table.
//!
//! A merged run keeps its label unless two runs would show the same one;
//! then every run of the merge is named `FILE: label` (the file's name
//! without `.json`), and runs still alike get ` #2`, ` #3` after it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::summary::stalls;
use super::{OltpError, OltpReport, RunResult};

/// The only format version this build reads (and writes).
const VERSION: u32 = 1;

/// Read one JSON report; errors name the file and, for bad JSON, the line.
pub fn read_report(path: &Path) -> Result<OltpReport, OltpError> {
    let text = std::fs::read_to_string(path)
        .map_err(OltpError::io(format!("cannot read {}", path.display())))?;
    let report: OltpReport = serde_json::from_str(&text).map_err(|e| {
        OltpError::Data(format!(
            "{} is not a keel bench oltp JSON report: {e}",
            path.display()
        ))
    })?;
    if report.version != VERSION {
        return Err(OltpError::Data(format!(
            "{} has format version {}; this build reads version {VERSION}",
            path.display(),
            report.version
        )));
    }
    if report.runs.is_empty() {
        return Err(OltpError::Data(format!("{} holds no run", path.display())));
    }
    Ok(report)
}

/// The name a file gives its runs when labels repeat: its file name
/// without `.json`.
fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Merge the runs of `reports` (each with the path it came from) into one
/// report, in the order given. The preset is kept when every file has the
/// same one.
pub fn merge(reports: Vec<(PathBuf, OltpReport)>) -> OltpReport {
    let same_preset = reports.windows(2).all(|w| {
        w[0].1.preset == w[1].1.preset && w[0].1.preset_settings == w[1].1.preset_settings
    });
    let (preset, preset_settings) = match reports.first() {
        Some((_, r)) if same_preset => (r.preset.clone(), r.preset_settings.clone()),
        _ => (None, None),
    };
    let labels: Vec<&str> = reports
        .iter()
        .flat_map(|(_, r)| r.runs.iter().map(|run| run.label.as_str()))
        .collect();
    let repeated = (1..labels.len()).any(|i| labels[..i].contains(&labels[i]));
    let mut runs: Vec<RunResult> = Vec::new();
    for (path, report) in reports {
        let stem = file_stem(&path);
        for mut run in report.runs {
            if repeated {
                run.label = format!("{stem}: {}", run.label);
            }
            let base = run.label.clone();
            let mut n = 1;
            while runs.iter().any(|r| r.label == run.label) {
                n += 1;
                run.label = format!("{base} #{n}");
            }
            runs.push(run);
        }
    }
    OltpReport {
        version: VERSION,
        preset,
        preset_settings,
        prepare_sets: Vec::new(),
        runs,
    }
}

/// The configuration a file's runs repeat: its name without `.json` and
/// without a trailing `-N` (`steady-300-2.json` repeats `steady-300`).
fn repeated_config(path: &Path) -> String {
    let stem = file_stem(path);
    match stem.rsplit_once('-') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            base.to_string()
        }
        _ => stem,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Repetitions as a table: the runs of files named `NAME-1.json`,
/// `NAME-2.json`, ... (and the same run label within them) are one
/// configuration, `NAME`; each line gives the median of its runs' figures
/// and, for the average tps, the lowest and highest.
pub fn repeats_text(files: &[(PathBuf, OltpReport)]) -> String {
    let mut groups: Vec<(String, Vec<&RunResult>)> = Vec::new();
    for (path, report) in files {
        let config = repeated_config(path);
        for run in &report.runs {
            let key = if report.runs.len() == 1 {
                config.clone()
            } else {
                format!("{config}: {}", run.label)
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, runs)) => runs.push(run),
                None => groups.push((key, vec![run])),
            }
        }
    }
    let mut rows = vec![[
        "configuration",
        "runs",
        "tps avg (min-max)",
        "tps min",
        "s <50% avg",
        "s <10% avg",
        "p99 ms",
        "max ms",
        "sync waits",
        "pages/txn",
        "engine B/txn",
        "disk B/txn",
        "peak RSS MiB",
    ]
    .map(String::from)
    .to_vec()];
    for (key, runs) in &groups {
        let Some(first) = runs.first() else {
            continue;
        };
        let m = |f: fn(&RunResult) -> f64| median(runs.iter().map(|r| f(r)).collect());
        let tps: Vec<f64> = runs.iter().map(|r| r.summary.tps_avg).collect();
        let lo = tps.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = tps.iter().copied().fold(0.0, f64::max);
        rows.push(vec![
            key.clone(),
            runs.len().to_string(),
            format!("{:.1} ({lo:.1}-{hi:.1})", median(tps.clone())),
            format!("{:.1}", m(|r| r.summary.tps_min)),
            format!("{:.0}", m(|r| below_average(r, 0.5) as f64)),
            format!("{:.0}", m(|r| below_average(r, 0.1) as f64)),
            format!("{:.1}", m(|r| r.summary.latency_ms.p99)),
            format!("{:.1}", m(|r| r.summary.latency_ms.max)),
            measured(
                first,
                "sync_flush_waits",
                format!("{:.0}", m(|r| r.summary.sync_flush_waits as f64)),
            ),
            measured(
                first,
                "pages_written_per_txn",
                format!("{:.2}", m(|r| r.summary.pages_written_per_txn)),
            ),
            measured(
                first,
                "engine_bytes_per_txn",
                format!("{:.0}", m(|r| r.summary.engine_bytes_per_txn)),
            ),
            bytes_text({
                let v: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.summary.device_bytes_per_txn)
                    .collect();
                (!v.is_empty()).then(|| median(v))
            }),
            measured(
                first,
                "peak_rss_bytes",
                format!(
                    "{:.0}",
                    m(|r| r.summary.peak_rss_bytes as f64 / f64::from(1 << 20))
                ),
            ),
        ]);
    }
    format!(
        "medians over repetitions (files NAME-1.json, NAME-2.json, ... repeat NAME):\n{}",
        table(&rows)
    )
}

/// Rows as aligned columns: the first column left-aligned, the rest right.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| {
                if c == 0 {
                    format!("{v:<w$}")
                } else {
                    format!("{v:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    out
}

/// Intervals of `run` whose tps is below `share` of its average tps. The
/// tables count dips against the average, not the median as the summary's
/// stall intervals do: a run that stalls more than half the time has a
/// median of 0, under which nothing counts as a dip (the seeds' figures,
/// e.g. "30 of 120 seconds below 10 % of average", use the average too).
pub fn below_average(run: &RunResult, share: f64) -> u64 {
    stalls(&run.intervals, run.summary.tps_avg * share).0
}

/// Bytes per transaction of the device's counter, or `n/a` where it was
/// not measured (no block device under the data directory).
pub(crate) fn bytes_text(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |b| format!("{b:.0}"))
}

/// A figure, or `n/a` when the run's engine does not measure `field`.
pub(crate) fn measured(run: &RunResult, field: &str, text: String) -> String {
    if run.summary.not_measured.iter().any(|f| f == field) {
        "n/a".to_string()
    } else {
        text
    }
}

/// The merged runs as a plain-text table, one line per run: engine,
/// throughput and its dips, latency, and what each transaction cost in
/// page writes, bytes written (by the engine's own count, and on the disk
/// holding its data directory) and (for the process) memory. `n/a` marks a
/// figure the engine does not measure.
pub fn summary_text(report: &OltpReport) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let header = [
        "run",
        "engine",
        "isolation",
        "tps avg",
        "tps min",
        "s <50% avg",
        "s <10% avg",
        "p99 ms",
        "max ms",
        "sync waits",
        "pages/txn",
        "engine B/txn",
        "disk B/txn",
        "history max",
        "peak RSS MiB",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in &report.runs {
        let s = &r.summary;
        rows.push(vec![
            r.label.clone(),
            r.engine.clone(),
            if r.isolation.is_empty() {
                "?".to_string()
            } else {
                r.isolation.clone()
            },
            format!("{:.1}", s.tps_avg),
            format!("{:.1}", s.tps_min),
            below_average(r, 0.5).to_string(),
            below_average(r, 0.1).to_string(),
            format!("{:.1}", s.latency_ms.p99),
            format!("{:.1}", s.latency_ms.max),
            measured(r, "sync_flush_waits", s.sync_flush_waits.to_string()),
            measured(
                r,
                "pages_written_per_txn",
                format!("{:.2}", s.pages_written_per_txn),
            ),
            measured(
                r,
                "engine_bytes_per_txn",
                format!("{:.0}", s.engine_bytes_per_txn),
            ),
            bytes_text(s.device_bytes_per_txn),
            measured(r, "history_len_max", s.history_len_max.to_string()),
            measured(
                r,
                "peak_rss_bytes",
                format!("{:.0}", s.peak_rss_bytes as f64 / MIB),
            ),
        ]);
    }
    let mut out = table(&rows);
    let notes: Vec<String> = report
        .runs
        .iter()
        .filter(|r| !r.summary.not_measured.is_empty())
        .map(|r| {
            format!(
                "{} ({}) does not measure: {}",
                r.label,
                r.engine,
                r.summary.not_measured.join(", ")
            )
        })
        .collect();
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::oltp::{Interval, Summary};

    fn run(label: &str, engine: &str) -> RunResult {
        let intervals = [100.0, 40.0, 100.0, 5.0]
            .into_iter()
            .map(|tps| Interval {
                tps,
                interval_s: 1.0,
                ..Interval::default()
            })
            .collect();
        RunResult {
            label: label.into(),
            engine: engine.into(),
            options: serde_json::Map::new(),
            io_capacity_max: 0,
            isolation: String::new(),
            workload: Default::default(),
            summary: Summary {
                tps_median: 100.0,
                stall_intervals: 1,
                ..Summary::default()
            },
            intervals,
            device_changes: Vec::new(),
            option_changes: Vec::new(),
            hold_view: None,
            status: String::new(),
        }
    }

    fn report(runs: Vec<RunResult>) -> OltpReport {
        OltpReport {
            version: 1,
            preset: None,
            preset_settings: None,
            prepare_sets: Vec::new(),
            runs,
        }
    }

    #[test]
    fn repeated_labels_take_the_file_name_and_a_number() {
        let merged = merge(vec![
            (
                "x/innodb-300.json".into(),
                report(vec![run("read_write", "innodb")]),
            ),
            (
                "steady-300.json".into(),
                report(vec![run("read_write", "keel")]),
            ),
            (
                "steady-300.json".into(),
                report(vec![run("read_write", "keel")]),
            ),
        ]);
        let labels: Vec<&str> = merged.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "innodb-300: read_write",
                "steady-300: read_write",
                "steady-300: read_write #2"
            ]
        );
        let distinct = merge(vec![
            (
                "a.json".into(),
                report(vec![run("flush_policy=classic", "keel")]),
            ),
            (
                "b.json".into(),
                report(vec![run("flush_policy=steady", "keel")]),
            ),
        ]);
        assert_eq!(distinct.runs[1].label, "flush_policy=steady");
    }

    #[test]
    fn repetitions_are_grouped_by_file_name_and_give_medians() {
        let file = |name: &str, tps: f64| {
            let mut r = run("read_write", "keel");
            r.summary.tps_avg = tps;
            (PathBuf::from(name), report(vec![r]))
        };
        let text = repeats_text(&[
            file("innodb-300-1.json", 400.0),
            file("steady-300-1.json", 500.0),
            file("innodb-300-2.json", 300.0),
            file("steady-300-2.json", 520.0),
            file("innodb-300-3.json", 444.0),
            file("steady-300-3.json", 510.0),
            file("odd.json", 1.0),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[2].starts_with("innodb-300 ") && lines[2].contains("400.0 (300.0-444.0)"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("steady-300 ") && lines[3].contains("510.0 (500.0-520.0)"),
            "{text}"
        );
        assert!(lines[4].starts_with("odd "), "{text}");
        assert_eq!(median(vec![1.0, 4.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn the_table_marks_what_an_engine_does_not_measure() {
        let mut innodb = run("innodb", "innodb");
        innodb.summary.not_measured = vec!["peak_rss_bytes".into()];
        let text = summary_text(&report(vec![run("keel", "keel"), innodb]));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("run") && lines[0].contains("peak RSS MiB"));
        assert!(lines[1].ends_with(" 0"), "{text}");
        assert!(lines[2].ends_with("n/a"), "{text}");
        assert!(lines[3].contains("does not measure: peak_rss_bytes"));
        // One dip under half the average (40) and one under a tenth (5).
        let mut r = run("a", "keel");
        r.summary.tps_avg = 100.0;
        assert_eq!(below_average(&r, 0.5), 2);
        assert_eq!(below_average(&r, 0.1), 1);
        // More than half the time at 0: the median is 0, the average is not.
        r.intervals.iter_mut().take(3).for_each(|i| i.tps = 0.0);
        r.summary.tps_avg = 1.25;
        assert_eq!(below_average(&r, 0.1), 3);
    }

    #[test]
    fn a_report_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let written = report(vec![run("read_write", "keel")]);
        crate::oltp::write_json(&written, &path).unwrap();
        let read = read_report(&path).unwrap();
        assert_eq!(read.runs[0].summary, written.runs[0].summary);
        assert_eq!(read.runs[0].intervals, written.runs[0].intervals);
        std::fs::write(&path, "{\"version\": 2, \"runs\": []}").unwrap();
        let e = read_report(&path).unwrap_err().to_string();
        assert!(e.contains("r.json") && e.contains("version 2"), "{e}");
        std::fs::write(&path, "not json").unwrap();
        let e = read_report(&path).unwrap_err().to_string();
        assert!(e.contains("is not a keel bench oltp JSON report"), "{e}");
    }
}
