//! The report's layout on hand-made figures ([`Status::from_parts`]), and
//! its rates.

use std::path::Path;

use super::*;
use crate::flush::FlushMode;
use crate::txn::{DeadlockTxn, LockWait, RowLock, TxnState};

/// What the bench's report was made of; [`status_text`] builds the report
/// from it as [`Status::collect`] does from a database.
struct Input<'a> {
    dir: &'a Path,
    options: &'a Options,
    metrics: &'a BTreeMap<&'static str, u64>,
    decision: &'a Decision,
    history: &'a HistoryStatus,
    since: Option<(&'a BTreeMap<&'static str, u64>, f64)>,
    doublewrite: Option<&'a DoublewriteStatus>,
}

fn status_of(s: &Input<'_>, transactions: Vec<TxnStatus>, deadlock: Option<Deadlock>) -> Status {
    let st = Status::from_parts(Parts {
        dir: s.dir.to_path_buf(),
        options: s.options.clone(),
        metrics: s.metrics.clone(),
        decision: s.decision.clone(),
        history: s.history.clone(),
        doublewrite: s.doublewrite.cloned(),
        transactions,
        latest_deadlock: deadlock,
    });
    match s.since {
        Some((before, secs)) => st.with_rates(before, secs),
        None => st,
    }
}

fn status_text(s: &Input<'_>) -> String {
    status_of(s, Vec::new(), None).to_string()
}

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
        ("buffer_flush_gap_pages", 9),
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
        ("log_checkpoints", 40),
        ("log_checkpoints_in_round", 25),
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
    let text = status_text(&Input {
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
    assert!(
        text.contains("40 checkpoints (25 synced by a log sync round)"),
        "{text}"
    );
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
             single page 4, neighbors 55, gap fillers 9"
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
    let atomic = DoublewriteStatus {
        mode: crate::DoublewriteMode::Atomic,
        detail: "device promises untorn writes up to 16 KiB".into(),
    };
    for (given, want) in [
        (
            Some(&atomic),
            "Doublewrite: atomic (device promises untorn writes up to 16 KiB)",
        ),
        (None, "Doublewrite: on"),
    ] {
        let text = pool_text(&Options::default(), &m, given);
        assert_eq!(line(&text, "Doublewrite:"), want);
    }
}

/// The BUFFER POOL section says whether pages are written compressed, and
/// what that saved.
#[test]
fn status_says_what_page_compression_saved() {
    let mut m = BTreeMap::new();
    m.insert("num_pages_page_compressed", 200);
    m.insert("num_pages_page_decompressed", 50);
    m.insert("page_compression_saved", 200 * 8192);
    let mut zstd = Options::default();
    zstd.set("page_compression", "zstd").unwrap();
    let none = Options::default();
    for (options, metrics, want) in [
        (&none, BTreeMap::new(), "Page compression: none"),
        (
            &none,
            m.clone(),
            "Page compression: none; 50 compressed pages read",
        ),
        (
            &zstd,
            m.clone(),
            "Page compression: zstd, 200 pages written compressed, 50.0% of their bytes \
             saved (1.6 MiB); 50 compressed pages read",
        ),
    ] {
        let text = pool_text(options, &metrics, None);
        assert_eq!(line(&text, "Page compression:"), want);
    }
}

/// The report of `metrics` alone: no round, no history, no rates.
fn pool_text(
    options: &Options,
    metrics: &BTreeMap<&'static str, u64>,
    doublewrite: Option<&DoublewriteStatus>,
) -> String {
    status_text(&Input {
        dir: Path::new("x"),
        options,
        metrics,
        decision: &Decision::default(),
        history: &HistoryStatus::default(),
        since: None,
        doublewrite,
    })
}

#[test]
fn status_before_any_round_says_so() {
    let m = BTreeMap::new();
    let mut classic = Options::default();
    classic.set("flush_policy", "classic").unwrap();
    let text = status_text(&Input {
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
    let text = status_text(&Input {
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
        ("buffer_flush_neighbors_mode", 1),
        ("steady_write_cost_pages_x1000", 84_812),
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
    let text = status_text(&Input {
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
    assert!(
        p.ends_with(
            "; flush_neighbors auto: 1 now, a write costs 84.8 pages more than it carries)"
        ),
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
        oldest_view: Some(crate::ViewInfo {
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
    let text = status_text(&Input {
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
    let text = status_text(&Input {
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

fn empty<'a>(m: &'a BTreeMap<&'static str, u64>, o: &'a Options) -> Input<'a> {
    static H: std::sync::OnceLock<(Decision, HistoryStatus)> = std::sync::OnceLock::new();
    let (d, h) = H.get_or_init(Default::default);
    Input {
        dir: Path::new("/data/db"),
        options: o,
        metrics: m,
        decision: d,
        history: h,
        since: None,
        doublewrite: None,
    }
}

fn row(table: &str, key: &[u8]) -> RowLock {
    RowLock {
        table: table.into(),
        key: key.to_vec(),
    }
}

/// Every transaction under way is listed, oldest first, with its age, rows
/// locked and thread; one waiting says for which row and who holds it.
#[test]
fn transactions_list_each_one_under_way_and_what_it_waits_for() {
    let (m, o) = (BTreeMap::new(), Options::default());
    let txns = vec![
        TxnStatus {
            id: 7,
            age_ms: 2_500,
            thread: Some("holder".into()),
            autocommit: false,
            rows_locked: 3,
            state: TxnState::Active,
        },
        TxnStatus {
            id: 9,
            age_ms: 1_200,
            thread: None,
            autocommit: true,
            rows_locked: 0,
            state: TxnState::LockWait(LockWait {
                row: row("accounts", b"alice"),
                holder: 7,
                waited_ms: 1_100,
            }),
        },
        TxnStatus {
            id: 11,
            age_ms: 10,
            thread: Some("w".into()),
            autocommit: false,
            rows_locked: 1,
            state: TxnState::Committing,
        },
    ];
    let s = status_of(&empty(&m, &o), txns, None);
    assert_eq!(s.transactions.active.len(), 3);
    let text = s.to_string();
    let t = text.split("TRANSACTIONS").nth(1).unwrap_or_default();
    assert_eq!(
        line(t, "Transactions under way"),
        "Transactions under way: 3 (1 waiting for a row lock)"
    );
    let list: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("---TRANSACTION") || l.starts_with("------- TRX"))
        .collect();
    assert_eq!(
        list,
        [
            "---TRANSACTION 7, ACTIVE 2.5 s, 3 rows locked, thread holder",
            "---TRANSACTION 9 (Table::put/delete), ACTIVE 1.2 s LOCK WAIT, 0 rows locked, \
             thread unnamed",
            "------- TRX HAS BEEN WAITING 1.1 s FOR THIS LOCK TO BE GRANTED: row \"alice\" of \
             table accounts, held by transaction 7",
            "---TRANSACTION 11, ACTIVE 0.0 s committing, 1 row locked, thread w",
        ]
    );
    assert!(!text.contains("LATEST DETECTED DEADLOCK"), "{text}");
}

#[test]
fn a_long_list_is_cut_and_says_how_many_more() {
    let (m, o) = (BTreeMap::new(), Options::default());
    let txns = (1..=MAX_LISTED_TXNS as u64 + 5)
        .map(|id| TxnStatus {
            id,
            age_ms: 0,
            thread: None,
            autocommit: false,
            rows_locked: 0,
            state: TxnState::Active,
        })
        .collect();
    let text = status_of(&empty(&m, &o), txns, None).to_string();
    assert_eq!(text.matches("---TRANSACTION ").count(), MAX_LISTED_TXNS);
    assert!(
        text.contains("\n... and 5 more transactions, not listed\n"),
        "{text}"
    );
}

/// LATEST DETECTED DEADLOCK comes before TRANSACTIONS: each transaction
/// of the cycle, the row it holds and the one it waits for, the victim.
#[test]
fn the_latest_deadlock_lists_the_cycle_and_the_victim() {
    let (m, o) = (BTreeMap::new(), Options::default());
    let t = |id, key: &[u8], holder| DeadlockTxn {
        id,
        waits_for: row("t", key),
        holder,
        rows_locked: 1,
        age_ms: 300,
        thread: Some(format!("th{id}")),
    };
    let d = Deadlock {
        at: std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_250),
        age_ms: 4_000,
        txns: vec![t(5, b"a", 4), t(4, b"b", 5)],
        victim: 5,
    };
    let text = status_of(&empty(&m, &o), Vec::new(), Some(d)).to_string();
    let (before, after) = text.split_once("LATEST DETECTED DEADLOCK").unwrap();
    assert!(before.contains("FLUSHING") && after.contains("TRANSACTIONS"));
    let lines: Vec<&str> = after
        .lines()
        .skip_while(|l| !l.starts_with("Detected"))
        .take(8)
        .collect();
    assert_eq!(
        lines,
        [
            "Detected 4.0 s ago (Unix time 1700000000.250), a cycle of 2 transactions",
            "*** (1) TRANSACTION 5, ACTIVE 0.3 s, 1 row locked, thread th5",
            "*** (1) HOLDS THE LOCK: row \"b\" of table t",
            "*** (1) WAITING FOR THIS LOCK TO BE GRANTED: row \"a\" of table t, held by \
             transaction 4",
            "*** (2) TRANSACTION 4, ACTIVE 0.3 s, 1 row locked, thread th4",
            "*** (2) HOLDS THE LOCK: row \"a\" of table t",
            "*** (2) WAITING FOR THIS LOCK TO BE GRANTED: row \"b\" of table t, held by \
             transaction 5",
            "*** WE ROLLED BACK TRANSACTION 5",
        ]
    );
}

/// Rates come from two reports' metrics and the time between them.
#[test]
fn rates_since_an_earlier_report() {
    let o = Options::default();
    let mut m = BTreeMap::new();
    m.insert("buffer_pool_reads", 100);
    let earlier = status_of(&empty(&m, &o), Vec::new(), None);
    m.insert("buffer_pool_reads", 300);
    let mut later = status_of(&empty(&m, &o), Vec::new(), None);
    later.taken = earlier.taken + std::time::Duration::from_secs(4);
    let later = later.with_rates_since(&earlier);
    assert_eq!(later.rates_over_s, Some(4.0));
    assert_eq!(later.buffer_pool.per_second.unwrap().reads, 50.0);
    let text = later.to_string();
    assert!(
        line(&text, "50.00 reads/s").ends_with("(over the last 4.0 s)"),
        "{text}"
    );
}

/// SEMAPHORES names every wait event with its count and time since the
/// open, and, with rates, the waits since the earlier report, longest
/// first: what a benchmark reads to see where its threads waited during
/// the run and not during its load.
#[test]
fn semaphores_show_every_wait_event_and_the_recent_ones_longest_first() {
    let o = Options::default();
    let mut m = BTreeMap::new();
    for (_, metric) in WAIT_EVENTS {
        m.insert(metric, 0);
    }
    m.insert("wait_page_latch", 10);
    m.insert("wait_page_latch_ns", 5_000_000);
    m.insert("wait_log_append_mutex", 3);
    m.insert("wait_log_append_mutex_ns", 1_000_000);
    let earlier = status_of(&empty(&m, &o), Vec::new(), None);
    let text = earlier.to_string();
    let waits = line(&text, "Waits (requests");
    assert!(waits.contains("page latches 10, page hash 0,"), "{text}");
    assert!(waits.ends_with("rollback segments 0"), "{text}");
    for (name, _) in WAIT_EVENTS {
        assert!(waits.contains(name), "{name} missing: {text}");
    }
    assert!(
        line(&text, "Time waited").contains("page latches 5.0 ms"),
        "{text}"
    );
    assert!(!text.contains("Waited over the last"), "{text}");
    // Two seconds later: 4 more page-latch waits (1 ms), 2 more log-append
    // waits (3 s: two threads' whole time on average), none elsewhere.
    m.insert("wait_page_latch", 14);
    m.insert("wait_page_latch_ns", 6_000_000);
    m.insert("wait_log_append_mutex", 5);
    m.insert("wait_log_append_mutex_ns", 3_001_000_000);
    let mut later = status_of(&empty(&m, &o), Vec::new(), None);
    later.taken = earlier.taken + std::time::Duration::from_secs(2);
    let later = later.with_rates_since(&earlier);
    let page = &later.semaphores.events[0];
    assert_eq!(
        (page.name, page.waits, page.recent),
        ("page latches", 14, Some((4, 1_000_000)))
    );
    let text = later.to_string();
    assert_eq!(
        line(&text, "Waited over the last"),
        "Waited over the last 2.0 s: log append 3.000 s in 2 waits (1.50 threads), \
         page latches 0.001 s in 4 waits (0.00 threads)"
    );
    // Nothing waited on since: said so.
    let mut again = status_of(&empty(&m, &o), Vec::new(), None);
    again.taken = later.taken + std::time::Duration::from_secs(1);
    let text = again.with_rates_since(&later).to_string();
    assert_eq!(
        line(&text, "Waited over the last"),
        "Waited over the last 1.0 s: no waits"
    );
}
