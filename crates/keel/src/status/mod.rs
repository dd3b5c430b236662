//! The engine status report, Keel's `SHOW ENGINE INNODB STATUS`
//! ([`Db::status`](crate::Db::status)): a [`Status`] holds the figures of
//! each section in typed fields for programs, and its `Display` is the
//! text for people. Sections, in order: SEMAPHORES (waits on latches and
//! mutexes), LOG (positions, the checkpoint age against each mark), BUFFER
//! POOL AND MEMORY, FLUSHING (the policy, its mode and why its last round
//! flushed what it flushed, pages flushed by kind), LATEST DETECTED
//! DEADLOCK (when one was), TRANSACTIONS (the history list, purge and the
//! oldest read view; every transaction under way, what it waits for and
//! who holds it).
//!
//! Taking a report reads the metrics (relaxed atomics), the flushing
//! policy's last decision, the read views, and the transactions under way
//! (the registry's leaf mutexes and the lock manager's wait-for graph, one
//! at a time, each for a copy: see the module doc of `txn::active`).
//! Nothing is held while the text is made, and no reader or writer waits
//! for a report beyond those copies.
//!
//! Rates per second need two instants: [`Status::with_rates`] adds them
//! from an earlier snapshot of the metrics, and [`StatusSource`] (behind
//! the metrics endpoint's `/status`) gives each report the rates since the
//! one before, as InnoDB's per-second averages since the last printout.

mod flushing;
mod sections;
mod transactions;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Instant;

pub use flushing::{ClassicFigures, FlushingStatus, PagesByKind, SteadyStatus};
pub use sections::{
    BufferPoolStatus, CompressionStatus, LogMark, LogStatus, PoolRates, Semaphores, WaitEvent,
    WAIT_EVENTS,
};
pub use transactions::{PurgeRates, TransactionsStatus, MAX_LISTED_TXNS};

use crate::config::Options;
use crate::engine::DoublewriteStatus;
use crate::flush::Decision;
use crate::txn::{Deadlock, HistoryStatus, TrxSys, TxnStatus};

/// A metric by name (0 when absent).
type Get<'a> = &'a dyn Fn(&str) -> u64;
/// A metric's growth per second by name.
type Rate<'a> = &'a dyn Fn(&str) -> f64;

const MIB: f64 = (1u64 << 20) as f64;

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn section(f: &mut fmt::Formatter<'_>, title: &str) -> fmt::Result {
    let rule = "-".repeat(title.len());
    write!(f, "{rule}\n{title}\n{rule}\n")
}

/// The engine status report: [`Db::status`](crate::Db::status). Print it
/// (`Display`) for the text, or read its fields.
#[derive(Clone, Debug)]
pub struct Status {
    /// The database directory (shown in the title).
    pub dir: PathBuf,
    /// The options in effect.
    pub options: Options,
    /// Every metric, by name ([`Metrics::snapshot`](crate::Metrics::snapshot)).
    pub metrics: BTreeMap<&'static str, u64>,
    /// When it was taken.
    pub taken: Instant,
    /// The span the rates per second cover, in seconds (`None`: no rates;
    /// see [`Status::with_rates`]).
    pub rates_over_s: Option<f64>,
    /// SEMAPHORES.
    pub semaphores: Semaphores,
    /// LOG.
    pub log: LogStatus,
    /// BUFFER POOL AND MEMORY.
    pub buffer_pool: BufferPoolStatus,
    /// FLUSHING.
    pub flushing: FlushingStatus,
    /// LATEST DETECTED DEADLOCK, since the database was opened.
    pub latest_deadlock: Option<Deadlock>,
    /// TRANSACTIONS.
    pub transactions: TransactionsStatus,
}

/// What a report is made of; [`Status::from_parts`] is a pure function of
/// it, so the layout can be tested on hand-made figures.
pub(crate) struct Parts {
    pub dir: PathBuf,
    pub options: Options,
    pub metrics: BTreeMap<&'static str, u64>,
    pub decision: Decision,
    pub history: HistoryStatus,
    /// The mode in effect and why; the options' mode alone where absent.
    pub doublewrite: Option<DoublewriteStatus>,
    pub transactions: Vec<TxnStatus>,
    pub latest_deadlock: Option<Deadlock>,
}

impl Status {
    /// The status of the transaction system `trx` (and its engine) of the
    /// database in `dir`, now.
    pub(crate) fn collect(trx: &TrxSys, dir: PathBuf) -> Status {
        let e = &trx.engine;
        Status::from_parts(Parts {
            dir,
            options: e.live.current(),
            metrics: e.metrics.snapshot(),
            decision: e.wb.last_decision.lock().clone(),
            history: trx.history(),
            doublewrite: Some(e.doublewrite.clone()),
            transactions: trx.transactions(),
            latest_deadlock: trx.latest_deadlock(),
        })
    }

    pub(crate) fn from_parts(p: Parts) -> Status {
        let m = &p.metrics;
        let g = |n: &str| m.get(n).copied().unwrap_or(0);
        let doublewrite = p.doublewrite.unwrap_or_else(|| DoublewriteStatus {
            mode: p.options.doublewrite,
            detail: String::new(),
        });
        Status {
            semaphores: Semaphores::new(&g),
            log: LogStatus::new(&p.options, &g),
            buffer_pool: BufferPoolStatus::new(&g, doublewrite, &p.options),
            flushing: FlushingStatus::new(&g, p.decision),
            transactions: TransactionsStatus::new(&g, &p.history, p.transactions),
            latest_deadlock: p.latest_deadlock,
            dir: p.dir,
            options: p.options,
            metrics: p.metrics,
            taken: Instant::now(),
            rates_over_s: None,
        }
    }

    /// This report with rates per second over the `over_s` seconds since
    /// `earlier` (the metrics then, e.g. an earlier report's
    /// [`Status::metrics`]): pages read, created, written and flushed by
    /// kind, purge and undo. A counter that went down counts as 0.
    pub fn with_rates(mut self, earlier: &BTreeMap<&'static str, u64>, over_s: f64) -> Status {
        let secs = over_s.max(1e-9);
        let m = &self.metrics;
        let g = |n: &str| m.get(n).copied().unwrap_or(0);
        let rate =
            |n: &str| g(n).saturating_sub(earlier.get(n).copied().unwrap_or(0)) as f64 / secs;
        self.buffer_pool.set_rates(&rate);
        self.flushing.set_rates(&rate);
        self.transactions.set_rates(&rate);
        self.semaphores.set_rates(&rate, secs);
        self.rates_over_s = Some(over_s);
        self
    }

    /// This report with rates per second since `earlier` was taken.
    pub fn with_rates_since(self, earlier: &Status) -> Status {
        let secs = self
            .taken
            .saturating_duration_since(earlier.taken)
            .as_secs_f64();
        self.with_rates(&earlier.metrics, secs)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "=====================================\nKEEL ENGINE STATUS ({})\n\
             =====================================\n",
            self.dir.display()
        )?;
        let over = self.rates_over_s;
        self.semaphores.write(f, over)?;
        self.log.write(f)?;
        self.buffer_pool.write(f, over)?;
        self.flushing.write(f, &self.options, over)?;
        if let Some(d) = &self.latest_deadlock {
            transactions::write_deadlock(f, d)?;
        }
        self.transactions.write(f, &self.options, over)?;
        f.write_str("----------------------------\nEND OF KEEL ENGINE STATUS\n")
    }
}

/// Reads a database's status without keeping it open
/// ([`Db::status_source`](crate::Db::status_source)): for a metrics
/// endpoint or a monitor that may outlive the database. Each report has
/// the rates per second since the one before from this source (or since
/// the source was made).
pub struct StatusSource {
    trx: Weak<TrxSys>,
    dir: PathBuf,
    last: parking_lot::Mutex<(BTreeMap<&'static str, u64>, Instant)>,
}

impl fmt::Debug for StatusSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusSource")
            .field("dir", &self.dir)
            .finish()
    }
}

impl StatusSource {
    pub(crate) fn new(trx: &Arc<TrxSys>, dir: PathBuf) -> StatusSource {
        StatusSource {
            last: parking_lot::Mutex::new((trx.engine.metrics.snapshot(), Instant::now())),
            trx: Arc::downgrade(trx),
            dir,
        }
    }

    /// The status now, with rates since the previous call (or since this
    /// source was made); `None` once the database is gone (its last handle
    /// dropped).
    pub fn status(&self) -> Option<Status> {
        let trx = self.trx.upgrade()?;
        let s = Status::collect(&trx, self.dir.clone());
        drop(trx);
        let mut last = self.last.lock();
        let secs = s.taken.saturating_duration_since(last.1).as_secs_f64();
        let s = s.with_rates(&last.0, secs);
        *last = (s.metrics.clone(), s.taken);
        Some(s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
