//! TRANSACTIONS and LATEST DETECTED DEADLOCK, as InnoDB's: the isolation
//! level, the history list and purge, the read views, undo pages, commit
//! and lock counters, then every transaction under way (id, age, rows
//! locked, state, and for one waiting the row and its holder); and the last
//! deadlock, transaction by transaction.

use std::fmt;

use super::{pct, section, Get, Rate};
use crate::config::Options;
use crate::txn::{Deadlock, HistoryStatus, TxnState, TxnStatus};

/// At most this many transactions are listed (the oldest); the count of
/// the others follows.
pub const MAX_LISTED_TXNS: usize = 100;

/// TRANSACTIONS.
#[derive(Clone, Debug, PartialEq)]
pub struct TransactionsStatus {
    /// The history list, read views and purge.
    pub history: HistoryStatus,
    /// Purge's progress and the undo written, per second, over
    /// [`Status::rates_over_s`](crate::Status::rates_over_s).
    pub purge_per_second: Option<PurgeRates>,
    /// Older row versions rebuilt for read views.
    pub versions_rebuilt: u64,
    /// Undo pages written to the data files.
    pub undo_pages_written: u64,
    /// Pages of every kind written to the data files.
    pub pages_written: u64,
    /// Transactions committed since open.
    pub commits: u64,
    /// Transactions rolled back since open.
    pub rollbacks: u64,
    /// Row lock waits.
    pub row_lock_waits: u64,
    /// Their total, in milliseconds.
    pub row_lock_wait_ms: u64,
    /// Deadlocks detected.
    pub deadlocks: u64,
    /// Lock wait timeouts.
    pub lock_timeouts: u64,
    /// The transactions under way, oldest first.
    pub active: Vec<TxnStatus>,
}

/// Purge and undo rates.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PurgeRates {
    /// Undo records purged per second.
    pub undo_records: f64,
    /// Undo pages freed per second.
    pub undo_pages: f64,
    /// Undo records written per second.
    pub undo_records_written: f64,
}

impl TransactionsStatus {
    pub(super) fn new(g: Get<'_>, h: &HistoryStatus, active: Vec<TxnStatus>) -> Self {
        // The gauges and Db::history() say the same; either may be read
        // first, so the larger (later) figure is shown.
        let history = HistoryStatus {
            history_len: h.history_len.max(g("trx_rseg_history_len")),
            views_open: h.views_open.max(g("trx_read_views_open")),
            purged_records: h.purged_records.max(g("purge_undo_records")),
            purged_pages: h.purged_pages.max(g("purge_undo_log_pages")),
            purged_del_marks: h.purged_del_marks.max(g("purge_del_mark_records")),
            pool_pages: if h.pool_pages > 0 {
                h.pool_pages
            } else {
                g("buffer_pool_pages_total")
            },
            ..h.clone()
        };
        TransactionsStatus {
            history,
            purge_per_second: None,
            versions_rebuilt: g("trx_versions_rebuilt"),
            undo_pages_written: g("buffer_flush_undo_pages_written"),
            pages_written: g("buffer_pages_written"),
            commits: g("trx_commits"),
            rollbacks: g("trx_rollbacks"),
            row_lock_waits: g("lock_row_lock_waits"),
            row_lock_wait_ms: g("lock_row_lock_time_ms"),
            deadlocks: g("lock_deadlocks"),
            lock_timeouts: g("lock_timeouts"),
            active,
        }
    }

    pub(super) fn set_rates(&mut self, r: Rate<'_>) {
        self.purge_per_second = Some(PurgeRates {
            undo_records: r("purge_undo_records"),
            undo_pages: r("purge_undo_log_pages"),
            undo_records_written: r("trx_undo_records"),
        });
    }

    pub(super) fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        o: &Options,
        over_s: Option<f64>,
    ) -> fmt::Result {
        section(f, "TRANSACTIONS")?;
        let h = &self.history;
        write!(
            f,
            "Isolation level     {} (transaction_isolation; purge_threads {})\n\
             History list length {}\n\
             Purge done          {} undo records, {} undo pages freed, {} delete-marked \
             records removed\n",
            o.transaction_isolation,
            o.purge_threads,
            h.history_len,
            h.purged_records,
            h.purged_pages,
            h.purged_del_marks,
        )?;
        if let (Some(r), Some(secs)) = (self.purge_per_second, over_s) {
            writeln!(
                f,
                "Purge rate          {:.1} undo records/s, {:.1} undo pages/s, {:.1} undo \
                 records written/s (over the last {secs:.1} s)",
                r.undo_records, r.undo_pages, r.undo_records_written,
            )?;
        }
        let oldest = match &h.oldest_view {
            Some(v) => format!(
                "oldest read view: {}, open for {:.1} s ({}), holding {} history entries",
                if v.txn_id == 0 {
                    "a Table::get or Table::range outside any transaction".to_string()
                } else {
                    format!("txn {}", v.txn_id)
                },
                v.age_ms as f64 / 1000.0,
                thread(v.thread.as_deref()),
                h.history_len,
            ),
            None => "no read view open".to_string(),
        };
        writeln!(
            f,
            "Read views          {} open; {oldest}; {} older versions rebuilt",
            h.views_open, self.versions_rebuilt,
        )?;
        writeln!(
            f,
            "Undo pages          {} in use, {} in the buffer pool ({:.1}% of {} pages); \
             {} written ({:.1}% of {} pages written)",
            h.undo_pages,
            h.undo_pages_in_pool,
            pct(h.undo_pages_in_pool, h.pool_pages),
            h.pool_pages,
            self.undo_pages_written,
            pct(self.undo_pages_written, self.pages_written),
            self.pages_written,
        )?;
        writeln!(
            f,
            "{} commits, {} rollbacks, {} row lock waits ({} ms), {} deadlocks, {} lock wait \
             timeouts",
            self.commits,
            self.rollbacks,
            self.row_lock_waits,
            self.row_lock_wait_ms,
            self.deadlocks,
            self.lock_timeouts,
        )?;
        self.write_list(f)
    }

    /// The transactions under way, as InnoDB lists them.
    fn write_list(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waiting = self
            .active
            .iter()
            .filter(|t| matches!(t.state, TxnState::LockWait(_)))
            .count();
        writeln!(
            f,
            "Transactions under way: {} ({waiting} waiting for a row lock)",
            self.active.len()
        )?;
        for t in self.active.iter().take(MAX_LISTED_TXNS) {
            let state = match &t.state {
                TxnState::Active => "",
                TxnState::LockWait(_) => " LOCK WAIT",
                TxnState::Committing => " committing",
            };
            writeln!(
                f,
                "---TRANSACTION {}{}, ACTIVE {:.1} s{state}, {}, {}",
                t.id,
                if t.autocommit {
                    " (Table::put/delete)"
                } else {
                    ""
                },
                t.age_ms as f64 / 1000.0,
                rows(t.rows_locked),
                thread(t.thread.as_deref()),
            )?;
            if let TxnState::LockWait(w) = &t.state {
                writeln!(
                    f,
                    "------- TRX HAS BEEN WAITING {:.1} s FOR THIS LOCK TO BE GRANTED: {}, held \
                     by transaction {}",
                    w.waited_ms as f64 / 1000.0,
                    w.row,
                    w.holder,
                )?;
            }
        }
        if self.active.len() > MAX_LISTED_TXNS {
            writeln!(
                f,
                "... and {} more transactions, not listed",
                self.active.len() - MAX_LISTED_TXNS
            )?;
        }
        Ok(())
    }
}

fn rows(n: u64) -> String {
    if n == 1 {
        "1 row locked".to_string()
    } else {
        format!("{n} rows locked")
    }
}

fn thread(name: Option<&str>) -> String {
    match name {
        Some(t) => format!("thread {t}"),
        None => "thread unnamed".to_string(),
    }
}

/// LATEST DETECTED DEADLOCK: each transaction of the cycle, the row it
/// held (the one the transaction before it waited for) and the row it
/// waited for; then the one rolled back.
pub(super) fn write_deadlock(f: &mut fmt::Formatter<'_>, d: &Deadlock) -> fmt::Result {
    section(f, "LATEST DETECTED DEADLOCK")?;
    let epoch =
        d.at.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |t| t.as_secs_f64());
    writeln!(
        f,
        "Detected {:.1} s ago (Unix time {epoch:.3}), a cycle of {} transactions",
        d.age_ms as f64 / 1000.0,
        d.txns.len()
    )?;
    let n = d.txns.len();
    for (i, t) in d.txns.iter().enumerate() {
        let k = i + 1;
        writeln!(
            f,
            "*** ({k}) TRANSACTION {}, ACTIVE {:.1} s, {}, {}",
            t.id,
            t.age_ms as f64 / 1000.0,
            rows(t.rows_locked),
            thread(t.thread.as_deref()),
        )?;
        // The one before it in the cycle waited for a row it held.
        let before = &d.txns[(i + n - 1) % n];
        writeln!(f, "*** ({k}) HOLDS THE LOCK: {}", before.waits_for)?;
        writeln!(
            f,
            "*** ({k}) WAITING FOR THIS LOCK TO BE GRANTED: {}, held by transaction {}",
            t.waits_for, t.holder
        )?;
    }
    writeln!(f, "*** WE ROLLED BACK TRANSACTION {}", d.victim)
}
