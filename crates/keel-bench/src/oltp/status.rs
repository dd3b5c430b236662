//! The engine status report, in the spirit of InnoDB's
//! `SHOW ENGINE INNODB STATUS`: waits on latches and mutexes (InnoDB's
//! SEMAPHORES, counts of the wait events), log positions and the checkpoint age
//! against each of its marks, the buffer pool, flushing (the policy's mode,
//! why its last round flushed what it flushed, the figures behind it, and
//! pages flushed by kind), transactions (InnoDB's TRANSACTIONS section:
//! the history list length, purge's progress and the oldest read view, the
//! one that holds purge back). Printed at the end of every run and on
//! SIGUSR1 during one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use keel::{Db, Decision, FlushPolicyName, HistoryStatus, Options};

/// Everything the report is made of; [`status_text`] is a pure function
/// of it, so the layout can be tested on hand-made figures.
pub struct StatusInput<'a> {
    /// The database directory (shown in the title).
    pub dir: &'a Path,
    /// The engine's options (policy name and knobs).
    pub options: &'a Options,
    /// Every metric now.
    pub metrics: &'a BTreeMap<&'static str, u64>,
    /// The flushing policy's last decision (`Db::flush_decision`).
    pub decision: &'a Decision,
    /// The history list, read views and purge (`Db::history`).
    pub history: &'a HistoryStatus,
    /// Metrics at an earlier instant and the seconds since: adds rates.
    pub since: Option<(&'a BTreeMap<&'static str, u64>, f64)>,
    /// The doublewrite mode in effect and why (`Db::doublewrite`); the
    /// options' mode alone where absent.
    pub doublewrite: Option<&'a keel::DoublewriteStatus>,
}

const MIB: f64 = (1u64 << 20) as f64;

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB)
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn section(out: &mut String, title: &str) {
    let rule = "-".repeat(title.len());
    let _ = write!(out, "{rule}\n{title}\n{rule}\n");
}

/// The status of `db` now. With `since` = (metrics at an earlier instant,
/// seconds elapsed since), rates per second over that span are added.
pub fn status_report(db: &Db, since: Option<(&BTreeMap<&'static str, u64>, f64)>) -> String {
    let metrics = db.metrics().snapshot();
    let decision = db.flush_decision();
    let options = db.options();
    let history = db.history();
    status_text(&StatusInput {
        dir: db.dir(),
        options: &options,
        metrics: &metrics,
        decision: &decision,
        history: &history,
        since,
        doublewrite: Some(db.doublewrite()),
    })
}

/// The report's text for `s`.
pub fn status_text(s: &StatusInput<'_>) -> String {
    let m = s.metrics;
    let g = |n: &str| m.get(n).copied().unwrap_or(0);
    let mut out = format!(
        "=====================================\nKEEL ENGINE STATUS ({})\n\
         =====================================\n",
        s.dir.display()
    );
    section(&mut out, "SEMAPHORES");
    let _ = writeln!(
        out,
        "Waits (requests that found it held): page latches {}, row-lock table mutexes {}, \
         rollback segment mutexes {}, log write mutex {}",
        g("wait_page_latch"),
        g("wait_lock_sys_mutex"),
        g("wait_rseg_mutex"),
        g("wait_log_write_mutex"),
    );
    log_section(&mut out, s.options, &g);
    section(&mut out, "BUFFER POOL AND MEMORY");
    let total = g("buffer_pool_pages_total");
    let _ = write!(
        out,
        "Buffer pool size    {total} pages\nDatabase pages      {}\nModified db pages   {} ({:.1}%)\n\
         Free buffers        {} ({:.1}%)\n\
         Pending writes: LRU {}, flush list {}, single page {}\n\
         Pages read {}, created {}, written {}\n",
        g("buffer_pool_pages_data"),
        g("buffer_pool_pages_dirty"),
        pct(g("buffer_pool_pages_dirty"), total),
        g("buffer_pool_pages_free"),
        pct(g("buffer_pool_pages_free"), total),
        g("buffer_pending_writes_lru"),
        g("buffer_pending_writes_flush_list"),
        g("buffer_pending_writes_single_page"),
        g("buffer_pool_reads"),
        g("space_pages_allocated"),
        g("buffer_pages_written"),
    );
    let _ = match s.doublewrite {
        Some(d) => writeln!(out, "Doublewrite: {d}"),
        None => writeln!(out, "Doublewrite: {}", s.options.doublewrite),
    };
    let rate = |n: &str| {
        s.since.map(|(a, secs)| {
            g(n).saturating_sub(a.get(n).copied().unwrap_or(0)) as f64 / secs.max(1e-9)
        })
    };
    if let Some((_, secs)) = s.since {
        let r = |n: &str| rate(n).unwrap_or(0.0);
        let _ = writeln!(
            out,
            "{:.2} reads/s, {:.2} creates/s, {:.2} writes/s (over the last {secs:.1} s)",
            r("buffer_pool_reads"),
            r("space_pages_allocated"),
            r("buffer_pages_written"),
        );
    }
    let requests = g("buffer_pool_read_requests");
    let _ = writeln!(
        out,
        "Buffer pool hit rate {:.1}% of {requests} page requests",
        100.0 - pct(g("buffer_pool_reads"), requests)
    );
    flushing_section(&mut out, s, &g, &rate);
    transactions_section(&mut out, s, &g, &rate);
    out.push_str("----------------------------\nEND OF KEEL ENGINE STATUS\n");
    out
}

/// TRANSACTIONS, as InnoDB's: the isolation level, the history list
/// length and purge's progress (totals, and rates with `since`), the read
/// views and the oldest one, which holds purge back, by transaction and
/// thread; the undo pages' share of the buffer pool and of the pages
/// written; commits, rollbacks and lock waits.
fn transactions_section(
    out: &mut String,
    s: &StatusInput<'_>,
    g: &dyn Fn(&str) -> u64,
    rate: &dyn Fn(&str) -> Option<f64>,
) {
    section(out, "TRANSACTIONS");
    let h = s.history;
    // The gauge and Db::history() say the same; either may be read first.
    let history_len = h.history_len.max(g("trx_rseg_history_len"));
    let _ = write!(
        out,
        "Isolation level     {} (transaction_isolation; purge_threads {})\n\
         History list length {history_len}\n\
         Purge done          {} undo records, {} undo pages freed, {} delete-marked records \
         removed\n",
        s.options.transaction_isolation,
        s.options.purge_threads,
        h.purged_records.max(g("purge_undo_records")),
        h.purged_pages.max(g("purge_undo_log_pages")),
        h.purged_del_marks.max(g("purge_del_mark_records")),
    );
    if let Some((_, secs)) = s.since {
        let r = |n: &str| rate(n).unwrap_or(0.0);
        let _ = writeln!(
            out,
            "Purge rate          {:.1} undo records/s, {:.1} undo pages/s, {:.1} undo records \
             written/s (over the last {secs:.1} s)",
            r("purge_undo_records"),
            r("purge_undo_log_pages"),
            r("trx_undo_records"),
        );
    }
    let views = h.views_open.max(g("trx_read_views_open"));
    let oldest = match &h.oldest_view {
        Some(v) => format!(
            "oldest read view: {}, open for {:.1} s ({}), holding {history_len} history \
             entries",
            if v.txn_id == 0 {
                "a Table::get or Table::range outside any transaction".to_string()
            } else {
                format!("txn {}", v.txn_id)
            },
            v.age_ms as f64 / 1000.0,
            match &v.thread {
                Some(t) => format!("thread {t}"),
                None => "thread unnamed".to_string(),
            },
        ),
        None => "no read view open".to_string(),
    };
    let _ = writeln!(
        out,
        "Read views          {views} open; {oldest}; {} older versions rebuilt",
        g("trx_versions_rebuilt"),
    );
    let pool = if h.pool_pages > 0 {
        h.pool_pages
    } else {
        g("buffer_pool_pages_total")
    };
    let (undo_written, written) = (
        g("buffer_flush_undo_pages_written"),
        g("buffer_pages_written"),
    );
    let _ = writeln!(
        out,
        "Undo pages          {} in use, {} in the buffer pool ({:.1}% of {pool} pages); \
         {undo_written} written ({:.1}% of {written} pages written)",
        h.undo_pages,
        h.undo_pages_in_pool,
        pct(h.undo_pages_in_pool, pool),
        pct(undo_written, written),
    );
    let _ = writeln!(
        out,
        "{} commits, {} rollbacks, {} row lock waits ({} ms), {} deadlocks, {} lock wait timeouts",
        g("trx_commits"),
        g("trx_rollbacks"),
        g("lock_row_lock_waits"),
        g("lock_row_lock_time_ms"),
        g("lock_deadlocks"),
        g("lock_timeouts"),
    );
}

/// LOG: positions, then the checkpoint age against every mark of the
/// policy in use (classic: async and sync; steady: freerun, setpoint and
/// hard level), in bytes and as a share of each mark, and which marks it
/// has passed.
fn log_section(out: &mut String, o: &Options, g: &dyn Fn(&str) -> u64) {
    section(out, "LOG");
    let (age, cap) = (g("log_lsn_checkpoint_age"), g("log_capacity"));
    let (async_mark, sync_mark) = (
        g("log_max_modified_age_async"),
        g("log_max_modified_age_sync"),
    );
    let limit = g("log_free_check_limit");
    let _ = write!(
        out,
        "Log sequence number {}\nLog flushed up to   {}\nLast checkpoint at  {}\n\
         Checkpoint age      {age} bytes ({}), {:.1}% of the log capacity\n",
        g("log_lsn_current"),
        g("log_lsn_last_flush"),
        g("log_lsn_last_checkpoint"),
        mib(age),
        pct(age, cap),
    );
    let _ = writeln!(
        out,
        "  {:<34} {:>12} {:>10} {:>8} {:>9}",
        "mark", "bytes", "MiB", "% of log", "age/mark"
    );
    let steady = o.flush_policy == FlushPolicyName::Steady;
    let (freerun, setpoint, hard) = (
        g("steady_freerun"),
        g("steady_setpoint"),
        g("steady_hard_limit"),
    );
    let marks: Vec<(&str, u64)> = if steady {
        vec![
            ("freerun F (writers slowed above)", freerun),
            ("setpoint S (steady holds the age)", setpoint),
            ("hard level H (writers held to 0)", hard),
            ("free-check limit (writers stop)", limit),
            ("log capacity", cap),
        ]
    } else {
        vec![
            ("async (max_modified_age_async)", async_mark),
            ("sync (max_modified_age_sync)", sync_mark),
            ("free-check limit (writers stop)", limit),
            ("log capacity", cap),
        ]
    };
    for (name, mark) in marks {
        let _ = writeln!(
            out,
            "  {name:<34} {mark:>12} {:>10.1} {:>7.1}% {:>8.1}%",
            mark as f64 / MIB,
            pct(mark, cap),
            pct(age, mark),
        );
    }
    let state = if steady {
        if setpoint == 0 {
            "unknown (steady has not run a round yet)"
        } else if age >= limit {
            "past the free-check limit: writers stop until the checkpoint advances"
        } else if age >= hard {
            "at the hard level: writers are held until the flusher catches up"
        } else if age > setpoint {
            "above the setpoint: writers slowed, the flusher catching up"
        } else if age > freerun {
            "between the freerun level and the setpoint: writers slowed a little"
        } else {
            "below the freerun level: writers run free"
        }
    } else if sync_mark == 0 {
        "unknown (no marks yet)"
    } else if age >= limit {
        "past the free-check limit: writers stop until the checkpoint advances"
    } else if age >= sync_mark {
        "past the sync mark: sync flushing"
    } else if age >= async_mark {
        "past the async mark: async flushing"
    } else {
        "below the async mark"
    };
    let _ = write!(
        out,
        "Checkpoint age is {state}\n\
         {} log writes, {} bytes written, {} log syncs, {} checkpoints\n",
        g("log_writes"),
        g("log_bytes_written"),
        g("os_log_fsyncs"),
        g("log_checkpoints"),
    );
}

/// FLUSHING: the policy and its knobs, the mode and the reason of the last
/// round, the policy's figures; then [`flushing_pages`].
fn flushing_section(
    out: &mut String,
    s: &StatusInput<'_>,
    g: &dyn Fn(&str) -> u64,
    rate: &dyn Fn(&str) -> Option<f64>,
) {
    section(out, "FLUSHING");
    if s.options.flush_policy == FlushPolicyName::Steady {
        steady_figures(out, s, g);
    } else {
        classic_figures(out, s, g);
    }
    flushing_pages(out, s, g, rate);
}

/// `steady`: what it is doing now in one line, its estimates, the writers'
/// pauses.
fn steady_figures(out: &mut String, s: &StatusInput<'_>, g: &dyn Fn(&str) -> u64) {
    let o = s.options;
    let now = if s.decision.reason.is_empty() {
        "(no round yet)"
    } else {
        s.decision.reason.as_str()
    };
    let pauses = g("writer_pauses");
    let p99 = match pause_quantile(&pause_buckets(g), pauses, 0.99) {
        Some(us) => format!("p99 <= {:.0} ms", us as f64 / 1000.0),
        None => "p99 -".to_string(),
    };
    let _ = write!(
        out,
        "Flush policy        steady (no I/O-capacity knob; ignores {}; flush_neighbors {})\n\
         Now                 {now}\n\
         Estimates           redo {:.2} MiB/s (peak {:.2}); device {} pages/s of busy time, \
         {} writes in flight; {} redo bytes retired per page written\n\
         Writers             allowed {:.2} MiB/s x position {:.2} on the curve\n\
         Writer pauses       {pauses} ({:.1} ms in total, {p99}, longest {:.1} ms)\n",
        o.flush_policy.ignored_options().join(", "),
        o.flush_neighbors,
        g("log_redo_rate") as f64 / MIB,
        g("log_redo_rate_peak") as f64 / MIB,
        g("device_write_bw_estimate"),
        g("device_write_queue_depth"),
        g("log_bytes_per_page_flushed"),
        g("steady_base_rate") as f64 / MIB,
        g("steady_pos_ratio") as f64 / 1000.0,
        g("buffer_flush_throttle_delay_us_total") as f64 / 1000.0,
        g("writer_pause_us_max") as f64 / 1000.0,
    );
}

/// The writer-pause histogram's cumulative buckets: (upper bound in µs,
/// pauses at most that long).
pub fn pause_buckets(g: &dyn Fn(&str) -> u64) -> Vec<(u64, u64)> {
    keel::PAUSE_BUCKETS_US
        .iter()
        .map(|&le| (le, g(&format!("writer_pause_le_{}ms", le / 1000))))
        .collect()
}

/// The smallest bucket bound at or under which a share `q` of `total`
/// pauses fall (None: no pause, or more than the largest bound).
pub fn pause_quantile(buckets: &[(u64, u64)], total: u64, q: f64) -> Option<u64> {
    if total == 0 {
        return None;
    }
    let need = (q * total as f64).ceil() as u64;
    buckets
        .iter()
        .find(|&&(_, count)| count >= need)
        .map(|&(le, _)| le)
}

/// `classic`: its knobs, the mode and the reason of the last round, the
/// figures behind it.
fn classic_figures(out: &mut String, s: &StatusInput<'_>, g: &dyn Fn(&str) -> u64) {
    let o = s.options;
    let d = s.decision;
    let reason = if d.reason.is_empty() {
        "(no round yet)"
    } else {
        d.reason.as_str()
    };
    let _ = write!(
        out,
        "Flush policy        {} (io_capacity {}, io_capacity_max {}, lru_scan_depth {}, \
         flush_neighbors {}, max_dirty_pages_pct {}, lwm {}, adaptive_flushing {}, flush_sync {})\n\
         Mode                {}\n\
         Last round          {reason}\n\
         Last full round     n_to_flush {} pages requested, {} of them by age; \
         pct_for_dirty {}%, pct_for_lsn {}%\n\
         Averages            page rate {} pages/s, redo rate {} bytes/s ({:.2} MiB/s)\n",
        o.flush_policy.as_str(),
        o.io_capacity,
        o.effective_io_capacity_max(),
        o.lru_scan_depth,
        o.flush_neighbors,
        o.max_dirty_pages_pct,
        o.max_dirty_pages_pct_lwm,
        o.adaptive_flushing,
        o.flush_sync,
        d.mode.as_str(),
        g("buffer_flush_n_to_flush_requested"),
        g("buffer_flush_n_to_flush_by_age"),
        g("buffer_flush_pct_for_dirty"),
        g("buffer_flush_pct_for_lsn"),
        g("buffer_flush_avg_page_rate"),
        g("buffer_flush_lsn_avg_rate"),
        g("buffer_flush_lsn_avg_rate") as f64 / MIB,
    );
}

/// The rest of FLUSHING: pages flushed by kind (totals and rates), waits,
/// the throttle, cleaner rounds and doublewrite.
fn flushing_pages(
    out: &mut String,
    s: &StatusInput<'_>,
    g: &dyn Fn(&str) -> u64,
    rate: &dyn Fn(&str) -> Option<f64>,
) {
    let o = s.options;
    let kinds = [
        ("adaptive", "buffer_flush_adaptive_total_pages"),
        ("background", "buffer_flush_background_total_pages"),
        ("LRU", "buffer_LRU_batch_flush_total_pages"),
        ("sync", "buffer_flush_sync_total_pages"),
        ("single page", "buffer_LRU_single_flush_total_pages"),
        ("neighbors", "buffer_flush_neighbor_total_pages"),
    ];
    let totals: Vec<String> = kinds
        .iter()
        .map(|(name, metric)| format!("{name} {}", g(metric)))
        .collect();
    let _ = writeln!(out, "Pages flushed       {}", totals.join(", "));
    if let Some((_, secs)) = s.since {
        let rates: Vec<String> = kinds
            .iter()
            .map(|(name, metric)| format!("{name} {:.1}", rate(metric).unwrap_or(0.0)))
            .collect();
        let _ = writeln!(
            out,
            "Pages flushed/s     {} (over the last {secs:.1} s)",
            rates.join(", ")
        );
    }
    let _ = write!(
        out,
        "Sync flush waits    {} ({:.1} ms in total, longest {:.1} ms)\n\
         Free-check waits    {} ({:.1} ms in total)\n\
         LRU                 {} single-page flush scans, {} free-frame waits\n\
         Throttle delay      {:.1} ms in total{}\n\
         Cleaner rounds {}, batches {}, last round {:.1} ms; doublewrite batches {}, pages {}; \
         data file syncs {}; pages passed over while latched {}\n",
        g("buffer_flush_sync_waits"),
        g("buffer_flush_sync_wait_us_total") as f64 / 1000.0,
        g("buffer_flush_sync_wait_us_max") as f64 / 1000.0,
        g("log_free_check_waits"),
        g("log_free_check_wait_us_total") as f64 / 1000.0,
        g("buffer_LRU_single_flush_num_scan"),
        g("buffer_LRU_get_free_waits"),
        g("buffer_flush_throttle_delay_us_total") as f64 / 1000.0,
        if o.flush_policy.as_str() == "classic" {
            " (classic never throttles writers: it stops them at the free-check limit)"
        } else {
            ""
        },
        g("buffer_flush_cleaner_rounds"),
        g("buffer_flush_batches"),
        g("buffer_flush_round_us") as f64 / 1000.0,
        g("dblwr_writes"),
        g("dblwr_pages_written"),
        g("os_data_fsyncs"),
        g("buffer_flush_latched_skips"),
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use keel::FlushMode;

    fn metrics() -> BTreeMap<&'static str, u64> {
        // A log of 1 MiB (1,048,576 bytes) whose marks are placed as the
        // engine places them for a free-check limit of 960,000 bytes.
        [
            ("log_lsn_current", 5_000_000),
            ("log_lsn_last_flush", 4_990_000),
            ("log_lsn_last_checkpoint", 4_100_000),
            ("log_lsn_checkpoint_age", 900_000),
            ("log_capacity", 1_048_576),
            ("log_max_modified_age_async", 840_000),
            ("log_max_modified_age_sync", 900_000),
            ("log_free_check_limit", 960_000),
            ("buffer_pool_pages_total", 2048),
            ("buffer_pool_pages_dirty", 1024),
            ("buffer_flush_adaptive_total_pages", 700),
            ("buffer_flush_background_total_pages", 30),
            ("buffer_LRU_batch_flush_total_pages", 1178),
            ("buffer_flush_sync_total_pages", 122),
            ("buffer_LRU_single_flush_total_pages", 4),
            ("buffer_flush_neighbor_total_pages", 55),
            ("buffer_flush_n_to_flush_requested", 400),
            ("buffer_flush_n_to_flush_by_age", 350),
            ("buffer_flush_pct_for_dirty", 12),
            ("buffer_flush_pct_for_lsn", 97),
            ("buffer_flush_avg_page_rate", 180),
            ("buffer_flush_lsn_avg_rate", 2_097_152),
            ("buffer_flush_sync_waits", 9),
            ("buffer_flush_sync_wait_us_total", 4_500_000),
            ("buffer_flush_sync_wait_us_max", 800_000),
            ("log_free_check_waits", 7),
            ("log_free_check_wait_us_total", 3_250_000),
            ("buffer_flush_round_us", 2_500),
        ]
        .into_iter()
        .collect()
    }

    fn line<'a>(text: &'a str, start: &str) -> &'a str {
        text.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no line starting with `{start}` in:\n{text}"))
    }

    #[test]
    fn status_shows_mode_reason_marks_figures_and_pages_by_kind() {
        let m = metrics();
        let mut before = m.clone();
        before.insert("buffer_LRU_batch_flush_total_pages", 178);
        let mut o = Options::default();
        o.set("flush_policy", "classic").unwrap();
        o.set("io_capacity_max", "400").unwrap();
        let d = Decision {
            mode: FlushMode::Sync,
            reason: "age 900000 past the sync mark 900000: flush up to lsn 4200000".into(),
            ..Decision::default()
        };
        let text = status_text(&StatusInput {
            dir: Path::new("/data/db"),
            options: &o,
            metrics: &m,
            decision: &d,
            history: &HistoryStatus::default(),
            since: Some((&before, 2.0)),
            doublewrite: None,
        });
        assert!(text.contains("KEEL ENGINE STATUS (/data/db)"), "{text}");
        assert!(
            line(&text, "Checkpoint age ").contains("900000 bytes (0.9 MiB), 85.8% of the log"),
            "{text}"
        );
        // Age against each mark: bytes, share of the log, age as % of the mark.
        let a = line(&text, "async (max_modified_age_async)");
        assert!(a.contains("840000") && a.ends_with("107.1%"), "{a}");
        assert!(line(&text, "sync (max_modified_age_sync)").ends_with("100.0%"));
        let f = line(&text, "free-check limit");
        assert!(f.contains("960000") && f.ends_with("93.8%"), "{f}");
        assert!(line(&text, "log capacity").contains("1048576"));
        assert!(line(&text, "Checkpoint age is").contains("past the sync mark"));
        assert!(line(&text, "Flush policy").starts_with(
            "Flush policy        classic (io_capacity 200, io_capacity_max 400, lru_scan_depth 1024"
        ));
        assert_eq!(line(&text, "Mode "), "Mode                sync");
        assert!(line(&text, "Last round").ends_with("flush up to lsn 4200000"));
        assert_eq!(
            line(&text, "Last full round"),
            "Last full round     n_to_flush 400 pages requested, 350 of them by age; \
             pct_for_dirty 12%, pct_for_lsn 97%"
        );
        assert_eq!(
            line(&text, "Averages"),
            "Averages            page rate 180 pages/s, redo rate 2097152 bytes/s (2.00 MiB/s)"
        );
        assert_eq!(
            line(&text, "Pages flushed  "),
            "Pages flushed       adaptive 700, background 30, LRU 1178, sync 122, \
             single page 4, neighbors 55"
        );
        assert!(
            line(&text, "Pages flushed/s").contains("LRU 500.0,"),
            "{text}"
        );
        assert_eq!(
            line(&text, "Sync flush waits"),
            "Sync flush waits    9 (4500.0 ms in total, longest 800.0 ms)"
        );
        assert_eq!(
            line(&text, "Free-check waits"),
            "Free-check waits    7 (3250.0 ms in total)"
        );
        assert!(line(&text, "Throttle delay").contains("classic never throttles"));
        assert!(line(&text, "Cleaner rounds").contains("last round 2.5 ms"));
    }

    /// The BUFFER POOL section says the doublewrite mode and why: as the
    /// engine reports it, or the option alone without an engine.
    #[test]
    fn status_names_the_doublewrite_mode_in_effect() {
        let m = BTreeMap::new();
        let atomic = keel::DoublewriteStatus {
            mode: keel::DoublewriteMode::Atomic,
            detail: "device promises untorn writes up to 16 KiB".into(),
        };
        for (given, want) in [
            (
                Some(&atomic),
                "Doublewrite: atomic (device promises untorn writes up to 16 KiB)",
            ),
            (None, "Doublewrite: on"),
        ] {
            let text = status_text(&StatusInput {
                dir: Path::new("x"),
                options: &Options::default(),
                metrics: &m,
                decision: &Decision::default(),
                history: &HistoryStatus::default(),
                since: None,
                doublewrite: given,
            });
            assert_eq!(line(&text, "Doublewrite:"), want);
        }
    }

    #[test]
    fn status_before_any_round_says_so() {
        let m = BTreeMap::new();
        let mut classic = Options::default();
        classic.set("flush_policy", "classic").unwrap();
        let text = status_text(&StatusInput {
            dir: Path::new("x"),
            options: &classic,
            metrics: &m,
            decision: &Decision::default(),
            history: &HistoryStatus::default(),
            since: None,
            doublewrite: None,
        });
        assert_eq!(line(&text, "Mode "), "Mode                idle");
        assert_eq!(
            line(&text, "Last round"),
            "Last round          (no round yet)"
        );
        assert!(line(&text, "Checkpoint age is").contains("unknown"));
        assert!(!text.contains("Pages flushed/s"));
        assert!(line(&text, "Flush policy").contains("io_capacity_max 2000"));
        let text = status_text(&StatusInput {
            dir: Path::new("x"),
            options: &Options::default(),
            metrics: &m,
            decision: &Decision::default(),
            history: &HistoryStatus::default(),
            since: None,
            doublewrite: None,
        });
        assert_eq!(line(&text, "Now "), "Now                 (no round yet)");
        assert!(line(&text, "Checkpoint age is").contains("unknown"));
        assert!(line(&text, "Writer pauses").contains("p99 -"));
    }

    #[test]
    fn steady_status_shows_its_levels_estimates_pauses_and_the_knobs_it_ignores() {
        let mut m = metrics();
        for (k, v) in [
            ("steady_freerun", 576_000),
            ("steady_setpoint", 744_000),
            ("steady_hard_limit", 912_000),
            ("steady_pos_ratio", 620),
            ("steady_base_rate", 3_145_728),
            ("log_redo_rate", 2_097_152),
            ("log_redo_rate_peak", 4_194_304),
            ("device_write_bw_estimate", 1450),
            ("device_write_queue_depth", 12),
            ("log_bytes_per_page_flushed", 2200),
            ("writer_pauses", 200),
            ("buffer_flush_throttle_delay_us_total", 640_000),
            ("writer_pause_us_max", 31_000),
            ("writer_pause_le_1ms", 20),
            ("writer_pause_le_2ms", 90),
            ("writer_pause_le_5ms", 150),
            ("writer_pause_le_10ms", 190),
            ("writer_pause_le_20ms", 197),
            ("writer_pause_le_50ms", 200),
            ("writer_pause_le_100ms", 200),
        ] {
            m.insert(k, v);
        }
        let mut o = Options::default();
        // Accepted, and said to be ignored.
        o.set("io_capacity", "5000").unwrap();
        let d = Decision {
            reason: "steady: age 94% of the limit (setpoint 78%, ...)".into(),
            ..Decision::default()
        };
        let text = status_text(&StatusInput {
            dir: Path::new("/data/db"),
            options: &o,
            metrics: &m,
            decision: &d,
            history: &HistoryStatus::default(),
            since: None,
            doublewrite: None,
        });
        let p = line(&text, "Flush policy");
        assert!(
            p.starts_with("Flush policy        steady (no I/O-capacity knob; ignores io_capacity, io_capacity_max")
                && p.contains("lru_scan_depth"),
            "{p}"
        );
        assert!(line(&text, "Now ").ends_with("(setpoint 78%, ...)"));
        let f = line(&text, "setpoint S");
        assert!(f.contains("744000") && f.ends_with("121.0%"), "{f}");
        assert!(line(&text, "hard level H").contains("912000"));
        assert!(!text.contains("max_modified_age_async"), "{text}");
        assert!(
            line(&text, "Checkpoint age is").contains("above the setpoint"),
            "{text}"
        );
        assert_eq!(
            line(&text, "Estimates"),
            "Estimates           redo 2.00 MiB/s (peak 4.00); device 1450 pages/s of busy time, \
             12 writes in flight; 2200 redo bytes retired per page written"
        );
        assert_eq!(
            line(&text, "Writers "),
            "Writers             allowed 3.00 MiB/s x position 0.62 on the curve"
        );
        // 99 % of 200 = 198 pauses: the first bucket holding them is 50 ms.
        assert_eq!(
            line(&text, "Writer pauses"),
            "Writer pauses       200 (640.0 ms in total, p99 <= 50 ms, longest 31.0 ms)"
        );
    }

    #[test]
    fn transactions_show_the_history_purge_and_the_oldest_read_view() {
        let mut m = metrics();
        for (k, v) in [
            ("trx_rseg_history_len", 5120),
            ("purge_undo_records", 90_000),
            ("purge_undo_log_pages", 700),
            ("purge_del_mark_records", 1200),
            ("trx_read_views_open", 3),
            ("trx_undo_records", 100_000),
            ("buffer_flush_undo_pages_written", 30),
            ("buffer_pages_written", 120),
            ("trx_commits", 4000),
        ] {
            m.insert(k, v);
        }
        let mut before = m.clone();
        before.insert("purge_undo_records", 80_000);
        let h = HistoryStatus {
            history_len: 5120,
            undo_pages: 300,
            undo_pages_in_pool: 256,
            pool_pages: 2048,
            views_open: 3,
            oldest_view: Some(keel::ViewInfo {
                txn_id: 4711,
                age_ms: 12_300,
                thread: Some("report-reader".into()),
            }),
            purged_records: 90_000,
            purged_pages: 700,
            purged_del_marks: 1200,
        };
        let mut o = Options::default();
        o.set("transaction_isolation", "read-committed").unwrap();
        let text = status_text(&StatusInput {
            dir: Path::new("/data/db"),
            options: &o,
            metrics: &m,
            decision: &Decision::default(),
            history: &h,
            since: Some((&before, 2.0)),
            doublewrite: None,
        });
        let t = text.split("TRANSACTIONS").nth(1).unwrap_or_default();
        assert_eq!(
            line(t, "Isolation level"),
            "Isolation level     READ-COMMITTED (transaction_isolation; purge_threads 4)"
        );
        assert_eq!(line(t, "History list length"), "History list length 5120");
        assert_eq!(
            line(t, "Purge done"),
            "Purge done          90000 undo records, 700 undo pages freed, 1200 \
             delete-marked records removed"
        );
        assert!(
            line(t, "Purge rate").starts_with("Purge rate          5000.0 undo records/s"),
            "{t}"
        );
        assert_eq!(
            line(t, "Read views"),
            "Read views          3 open; oldest read view: txn 4711, open for 12.3 s \
             (thread report-reader), holding 5120 history entries; 0 older versions rebuilt"
        );
        assert_eq!(
            line(t, "Undo pages"),
            "Undo pages          300 in use, 256 in the buffer pool (12.5% of 2048 pages); \
             30 written (25.0% of 120 pages written)"
        );
        assert!(line(t, "4000 commits").contains("0 deadlocks"), "{t}");

        // Nothing open: said so; no rates without an earlier sample.
        let text = status_text(&StatusInput {
            dir: Path::new("/data/db"),
            options: &Options::default(),
            metrics: &BTreeMap::new(),
            decision: &Decision::default(),
            history: &HistoryStatus::default(),
            since: None,
            doublewrite: None,
        });
        assert!(line(&text, "Read views").contains("0 open; no read view open"));
        assert!(line(&text, "Isolation level").contains("REPEATABLE-READ"));
        assert!(!text.contains("Purge rate"), "{text}");
    }

    #[test]
    fn pause_quantiles_come_from_the_cumulative_buckets() {
        let b = [(1000, 0), (2000, 5), (5000, 10)];
        assert_eq!(pause_quantile(&b, 0, 0.99), None);
        assert_eq!(pause_quantile(&b, 10, 0.5), Some(2000));
        assert_eq!(pause_quantile(&b, 10, 0.99), Some(5000));
        // More pauses than the buckets hold: beyond the largest bound.
        assert_eq!(pause_quantile(&b, 20, 0.99), None);
    }
}
