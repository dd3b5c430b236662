//! Text outputs: the per-interval line, the JSON file and the CSV file.

use std::fmt::Write as _;
use std::path::Path;

use super::{DeviceChange, HoldView, Interval, OltpError, OltpReport, OptionChange};

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The line of one interval: most of sysbench's interval line (`thds`,
/// `tps`, `qps`, `lat(ms,95%)`, `err/s`, with one decimal, without
/// sysbench's r/w/o split and `reconn/s`), then the engine's flushing
/// state: checkpoint age and its marks as % of the log capacity,
/// the flushing mode at the interval's end, dirty and free pages as % of
/// the pool, pages flushed per second by kind (adaptive, background, LRU,
/// sync, single page, neighbors), and the throttle's mean delay per
/// transaction. Under `steady` the marks are its setpoint S and hard level
/// H, and the writers' pauses follow: how many, p99 and longest (as
/// histogram bucket bounds). Then the history list length at the
/// interval's end (committed transactions not purged yet); last, the bytes
/// written per transaction: Keel's redo, doublewrite and data counters,
/// and the disk's (every process's writes to the block device holding the
/// data directory; `n/a` on tmpfs).
///
/// An interval without Keel's metrics (another engine: no log capacity, no
/// pool) has the sysbench part and the bytes written per second to the
/// disk holding the data directory (`disk n/a` where there is none).
pub fn interval_line(threads: usize, iv: &Interval, warmup: bool) -> String {
    let t = time_label(iv.t_s);
    let per_s = |n: u64| n as f64 / iv.interval_s.max(1e-9);
    let per_txn = |n: u64| n as f64 / iv.transactions.max(1) as f64;
    if iv.log_capacity == 0 && iv.total_pages == 0 {
        return format!(
            "[ {t} ]{} thds: {threads} tps: {:.1} qps: {:.1} lat(ms,95%): {:.1} err/s: {:.1} \
             | disk {}",
            if warmup { " (warmup)" } else { "" },
            iv.tps,
            iv.qps,
            iv.lat_p95_ms,
            per_s(iv.errors),
            iv.device_bytes.map_or_else(
                || "n/a".to_string(),
                |b| format!("{:.1} MiB/s", per_s(b) / f64::from(1u32 << 20))
            ),
        );
    }
    let f = &iv.pages_flushed;
    let steady = iv.setpoint > 0;
    let (m1, m2) = if steady {
        (("S", iv.setpoint), ("H", iv.hard))
    } else {
        (("async", iv.async_mark), ("sync", iv.sync_mark))
    };
    let pauses = if steady {
        format!(
            " | pauses {} p99 {:.0} max {:.0} ms",
            iv.writer_pauses, iv.pause_p99_ms, iv.pause_max_ms
        )
    } else {
        String::new()
    };
    format!(
        "[ {t} ]{} thds: {threads} tps: {:.1} qps: {:.1} lat(ms,95%): {:.1} err/s: {:.1} \
         | ckpt age {:.0}% ({} {:.0}%, {} {:.0}%) mode {} dirty {:.0}% free {:.1}% \
         | flushed/s adapt {:.0} bg {:.0} lru {:.0} sync {:.0} single {:.0} nbr {:.0} \
         | throttle {:.1} ms{pauses} | history {} | B/txn redo {:.0} dw {:.0} data {:.0} disk {}",
        if warmup { " (warmup)" } else { "" },
        iv.tps,
        iv.qps,
        iv.lat_p95_ms,
        per_s(iv.errors),
        pct(iv.checkpoint_age, iv.log_capacity),
        m1.0,
        pct(m1.1, iv.log_capacity),
        m2.0,
        pct(m2.1, iv.log_capacity),
        if iv.flush_mode.is_empty() {
            "-"
        } else {
            iv.flush_mode.as_str()
        },
        pct(iv.dirty_pages, iv.total_pages),
        pct(iv.free_pages, iv.total_pages),
        per_s(f.adaptive),
        per_s(f.background),
        per_s(f.lru),
        per_s(f.sync),
        per_s(f.single),
        per_s(f.neighbors),
        iv.throttle_delay_ms / iv.transactions.max(1) as f64,
        iv.history_len,
        per_txn(iv.log_bytes),
        per_txn(iv.dblwr_bytes),
        per_txn(iv.data_bytes),
        iv.device_bytes
            .map_or_else(|| "n/a".to_string(), |b| format!("{:.0}", per_txn(b))),
    )
}

/// Seconds as the lines show them: whole when within 0.05 s of a whole
/// number, else to a tenth.
fn time_label(t_s: f64) -> String {
    if (t_s - t_s.round()).abs() < 0.05 {
        format!("{t_s:.0}s")
    } else {
        format!("{t_s:.1}s")
    }
}

/// The line printed when a device change is applied, between the interval
/// lines: `[ 60s ] device -> iops=250`, at the time it was applied (its
/// scheduled time if it was not).
pub fn device_change_line(change: &DeviceChange) -> String {
    let t = time_label(change.applied_at_s.unwrap_or(change.at_s));
    format!("[ {t} ] device -> {}", change.spec)
}

/// The line printed when an option change is applied, between the
/// interval lines: `[ 60s ] set flush_policy = steady`, at the time it was
/// applied (its scheduled time if it was not).
pub fn option_change_line(change: &OptionChange) -> String {
    let t = time_label(change.applied_at_s.unwrap_or(change.at_s));
    format!("[ {t} ] set {} = {}", change.key, change.value)
}

/// The line printed when a held view (`--hold-view`) opens or is
/// released, between the interval lines: `[ 30s ] view opened
/// (REPEATABLE-READ, held for 120 s)`, `[ 150s ] view released (held
/// 120.0 s)`. The view's state says which: released once
/// `released_at_s` is set.
pub fn view_line(view: &HoldView) -> String {
    match (view.opened_at_s, view.released_at_s) {
        (Some(opened), Some(released)) => format!(
            "[ {} ] view released{} (held {:.1} s); purge can catch up",
            time_label(released),
            if view.until_end {
                " at the end of the run"
            } else {
                ""
            },
            released - opened
        ),
        (opened, _) => format!(
            "[ {} ] view opened (REPEATABLE-READ, held for {} s or until the run ends); \
             writers go on, the history list grows",
            time_label(opened.unwrap_or(view.at_s)),
            view.for_s
        ),
    }
}

/// Write the report as pretty JSON.
pub fn write_json(report: &OltpReport, path: &Path) -> Result<(), OltpError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| OltpError::Data(format!("cannot encode the JSON report: {e}")))?;
    std::fs::write(path, text + "\n")
        .map_err(OltpError::io(format!("cannot write {}", path.display())))
}

/// The CSV columns, in order. Columns added later go at the end, so a
/// reader of older files finds every old column where it was
/// (`flushed_list` = `flushed_adaptive` + `flushed_background`).
const CSV_HEADER: &str = "label,t_s,interval_s,transactions,queries,tps,qps,lat_p95_ms,lat_max_ms,\
errors,checkpoint_age,log_capacity,async_mark,sync_mark,dirty_pages,free_pages,total_pages,\
flushed_list,flushed_lru,flushed_sync,flushed_single,flushed_neighbors,os_data_reads,\
os_data_writes,log_bytes,sync_flush_waits,sync_flush_wait_ms,throttle_delay_ms,pages_written,\
flushed_adaptive,flushed_background,flush_mode,free_check_waits,free_check_wait_ms,\
history_len,undo_records_purged,undo_pages_purged,undo_pages_in_pool,undo_pages_written,\
data_bytes,dblwr_bytes,other_bytes,engine_bytes,device_bytes";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every interval of every run as CSV, one row each, the run's label first.
pub fn csv_text(report: &OltpReport) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for run in &report.runs {
        let label = csv_field(&run.label);
        for i in &run.intervals {
            let f = &i.pages_flushed;
            let _ = writeln!(
                out,
                "{label},{:.3},{:.3},{},{},{:.2},{:.2},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{}",
                i.t_s, i.interval_s, i.transactions, i.queries, i.tps, i.qps, i.lat_p95_ms,
                i.lat_max_ms, i.errors, i.checkpoint_age, i.log_capacity, i.async_mark,
                i.sync_mark, i.dirty_pages, i.free_pages, i.total_pages, f.list, f.lru, f.sync,
                f.single, f.neighbors, i.os_data_reads, i.os_data_writes, i.log_bytes,
                i.sync_flush_waits, i.sync_flush_wait_ms, i.throttle_delay_ms, i.pages_written,
                f.adaptive, f.background, i.flush_mode, i.free_check_waits, i.free_check_wait_ms,
                i.history_len, i.undo_records_purged, i.undo_pages_purged, i.undo_pages_in_pool,
                i.undo_pages_written, i.data_bytes, i.dblwr_bytes, i.other_bytes, i.engine_bytes,
                // Empty where not measured (no block device), not 0.
                i.device_bytes.map_or_else(String::new, |b| b.to_string())
            );
        }
    }
    out
}

/// Write [`csv_text`] to `path`.
pub fn write_csv(report: &OltpReport, path: &Path) -> Result<(), OltpError> {
    std::fs::write(path, csv_text(report))
        .map_err(OltpError::io(format!("cannot write {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oltp::PagesFlushed;

    #[test]
    fn interval_line_has_sysbench_fields_and_engine_state() {
        let iv = Interval {
            t_s: 12.0,
            interval_s: 1.0,
            transactions: 812,
            queries: 16240,
            tps: 812.0,
            qps: 16240.3,
            lat_p95_ms: 14.2,
            checkpoint_age: 71,
            log_capacity: 100,
            async_mark: 88,
            sync_mark: 94,
            dirty_pages: 23,
            free_pages: 12,
            total_pages: 1000,
            pages_flushed: PagesFlushed {
                list: 610,
                adaptive: 600,
                background: 10,
                lru: 40,
                neighbors: 7,
                ..PagesFlushed::default()
            },
            flush_mode: "adaptive".into(),
            ..Interval::default()
        };
        let line = interval_line(8, &iv, false);
        assert_eq!(
            line,
            "[ 12s ] thds: 8 tps: 812.0 qps: 16240.3 lat(ms,95%): 14.2 err/s: 0.0 \
             | ckpt age 71% (async 88%, sync 94%) mode adaptive dirty 2% free 1.2% \
             | flushed/s adapt 600 bg 10 lru 40 sync 0 single 0 nbr 7 | throttle 0.0 ms \
             | history 0 | B/txn redo 0 dw 0 data 0 disk n/a"
        );
        // steady: its setpoint and hard level, and the writers' pauses.
        let iv = Interval {
            setpoint: 77,
            hard: 87,
            writer_pauses: 120,
            throttle_delay_ms: 406.0,
            transactions: 812,
            pause_p99_ms: 20.0,
            pause_max_ms: 50.0,
            history_len: 4321,
            log_bytes: 812 * 600,
            dblwr_bytes: 812 * 4096,
            data_bytes: 812 * 4096,
            device_bytes: Some(812 * 9000),
            ..iv
        };
        let line = interval_line(8, &iv, false);
        assert!(
            line.contains("| ckpt age 71% (S 77%, H 87%) mode adaptive")
                && line.contains("| throttle 0.5 ms | pauses 120 p99 20 max 50 ms | history 4321")
                && line.ends_with("| B/txn redo 600 dw 4096 data 4096 disk 9000"),
            "{line}"
        );
    }

    /// The README's example line is one this code prints, and its hard
    /// level is one `steady` can have: `H` is at most 0.99 of the
    /// free-check limit, which is 0.92 of the log capacity, so at most
    /// 91 % of the capacity (docs/for-innodb-users.md, "steady").
    #[test]
    fn the_readme_example_line_is_one_this_code_prints() {
        let readme = include_str!("../../../../README.md");
        let example = readme
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("[ 12s ] thds: 8 "))
            .unwrap_or_else(|| panic!("the README has no example interval line"));
        let iv = Interval {
            t_s: 12.0,
            interval_s: 1.0,
            transactions: 812,
            tps: 812.0,
            qps: 16240.3,
            lat_p95_ms: 14.2,
            checkpoint_age: 71,
            log_capacity: 100,
            setpoint: 77,
            hard: 87,
            dirty_pages: 230,
            free_pages: 12,
            total_pages: 1000,
            pages_flushed: PagesFlushed {
                adaptive: 600,
                background: 10,
                lru: 40,
                ..PagesFlushed::default()
            },
            flush_mode: "adaptive".into(),
            throttle_delay_ms: 406.0,
            writer_pauses: 120,
            pause_p99_ms: 20.0,
            pause_max_ms: 50.0,
            history_len: 4321,
            log_bytes: 812 * 2650,
            dblwr_bytes: 812 * 29500,
            data_bytes: 812 * 29500,
            device_bytes: Some(812 * 62000),
            ..Interval::default()
        };
        assert_eq!(example, interval_line(8, &iv, false));
        let hard: u32 = example
            .split("H ")
            .nth(1)
            .and_then(|r| r.split('%').next())
            .and_then(|h| h.parse().ok())
            .unwrap_or_else(|| panic!("no hard level in {example}"));
        assert!(
            hard <= 91,
            "H {hard}% is more than steady allows: {example}"
        );
    }

    #[test]
    fn option_change_line_shows_when_it_was_applied() {
        let mut c: OptionChange = "1m:flush_policy=steady"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(option_change_line(&c), "[ 60s ] set flush_policy = steady");
        c.applied_at_s = Some(60.8);
        assert_eq!(
            option_change_line(&c),
            "[ 60.8s ] set flush_policy = steady"
        );
    }

    #[test]
    fn view_line_shows_when_the_view_opened_and_was_released() {
        let mut v: HoldView = "30s:2m".parse().unwrap_or_else(|e| panic!("{e}"));
        v.opened_at_s = Some(30.02);
        assert_eq!(
            view_line(&v),
            "[ 30s ] view opened (REPEATABLE-READ, held for 120 s or until the run ends); \
             writers go on, the history list grows"
        );
        v.released_at_s = Some(150.04);
        assert_eq!(
            view_line(&v),
            "[ 150s ] view released (held 120.0 s); purge can catch up"
        );
        v.released_at_s = Some(100.5);
        v.until_end = true;
        assert_eq!(
            view_line(&v),
            "[ 100.5s ] view released at the end of the run (held 70.5 s); purge can catch up"
        );
    }

    #[test]
    fn device_change_line_shows_when_it_was_applied() {
        let mut c: DeviceChange = "60s:iops=250".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(device_change_line(&c), "[ 60s ] device -> iops=250");
        c.applied_at_s = Some(60.03);
        assert_eq!(device_change_line(&c), "[ 60s ] device -> iops=250");
        c.applied_at_s = Some(1.52);
        assert_eq!(device_change_line(&c), "[ 1.5s ] device -> iops=250");
    }

    #[test]
    fn csv_rows_have_as_many_fields_as_the_header() {
        let iv = Interval {
            t_s: 1.0,
            interval_s: 1.0,
            flush_mode: "sync".into(),
            pages_flushed: PagesFlushed {
                list: 5,
                adaptive: 3,
                background: 2,
                ..PagesFlushed::default()
            },
            ..Interval::default()
        };
        let report = OltpReport {
            version: 1,
            preset: None,
            preset_settings: None,
            prepare_sets: Vec::new(),
            runs: vec![crate::oltp::RunResult {
                label: "a,b".into(),
                engine: "keel".into(),
                options: serde_json::Map::new(),
                io_capacity_max: 2000,
                isolation: String::new(),
                workload: crate::oltp::OltpParams::default(),
                summary: crate::oltp::Summary::default(),
                intervals: vec![iv],
                device_changes: Vec::new(),
                option_changes: Vec::new(),
                hold_view: None,
                status: String::new(),
            }],
        };
        let text = csv_text(&report);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let row = lines.next().unwrap_or_default();
        assert!(row.starts_with("\"a,b\","), "{row}");
        let fields: Vec<&str> = row["\"a,b\",".len()..].split(',').collect();
        assert_eq!(fields.len() + 1, header.len(), "{row}");
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or(usize::MAX) - 1;
        assert_eq!(fields[col("flushed_list")], "5");
        assert_eq!(fields[col("flushed_adaptive")], "3");
        assert_eq!(fields[col("flushed_background")], "2");
        assert_eq!(fields[col("flush_mode")], "sync");
    }
}
