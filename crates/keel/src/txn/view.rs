//! Read views: which commits a snapshot sees, and the registry of open
//! views that tells purge how much history must be kept.
//!
//! # Commit numbers
//!
//! A commit's number is the LSN of its commit record (`trx_no` in every
//! version it writes). The log hands them out in order under its mutex and
//! keeps the set of commits in flight: logged, not yet applied to every
//! page. A commit leaves that set only when its last row is in place
//! (`CommitTicket::finish`, after the last operation).
//!
//! # What a view sees
//!
//! A view is made from `Log::commit_snapshot`, read under the log's
//! mutex: the log's end `low` and the commits in flight `active`. It sees
//! commit `c` iff `c < low` and `c` is not in `active` (and always sees
//! `trx_no` 0, bulk-loaded rows). A commit in flight when the view was made
//! stays invisible to it even after it finishes, and every commit logged
//! later starts at or past `low`. So a view sees a commit only once all of
//! its rows were in place, and then sees all of them: no read, at any
//! level, sees part of a commit, in one table or across tables. This is
//! InnoDB's `ReadView` (`m_low_limit_id`, `m_ids`), with commit numbers in
//! place of transaction ids because Keel's transactions write nothing
//! before they commit.
//!
//! # What purge may remove
//!
//! Every commit below a view's `min` (the smallest of `active` and `low`)
//! is seen by it. Purge may drop the version that commit `c` replaced once
//! every view open now or later sees `c`: `c` below the *purge limit*, the
//! smallest `min` of the open views, of the commits in flight, and of the
//! log's end. Opening a view registers it holding the registry's mutex
//! across the log snapshot, and the purge limit is computed holding the
//! same mutex: so a view is either counted in the limit, or was made after
//! it, when every commit below the limit had finished and was below the
//! log's end (its `min` is then at least the limit). A reader follows a
//! version chain only past versions its view does not see, whose commits
//! are at or above its `min`, so never into purged undo.
//!
//! The registry's mutex is held only to copy the snapshot and to insert or
//! remove one entry: nothing waits while holding it. Lock order: registry,
//! then the log's mutex.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::metrics::Metrics;
use crate::redo::Log;

use super::ViewInfo;

/// One snapshot: the commits it sees. Dropping the last handle closes it.
pub(crate) struct ReadView {
    low: u64,
    /// Commits in flight when the view was made, ascending.
    active: Vec<u64>,
    /// Every commit below this is seen.
    min: u64,
    id: u64,
    views: Arc<Views>,
}

impl ReadView {
    /// Every commit below this is seen by this view.
    pub(crate) fn min(&self) -> u64 {
        self.min
    }

    /// Whether this view sees the version written by commit `trx_no`.
    pub(crate) fn sees(&self, trx_no: u64) -> bool {
        trx_no < self.min || (trx_no < self.low && self.active.binary_search(&trx_no).is_err())
    }
}

impl Drop for ReadView {
    fn drop(&mut self) {
        self.views.close(self.id);
    }
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadView")
            .field("low", &self.low)
            .field("active", &self.active)
            .finish()
    }
}

struct Open {
    min: u64,
    txn_id: u64,
    opened: Instant,
    thread: Option<String>,
}

/// The open views (InnoDB's `MVCC` view list).
pub(crate) struct Views {
    open: Mutex<HashMap<u64, Open>>,
    next_id: AtomicU64,
    log: Arc<Log>,
    metrics: Arc<Metrics>,
}

impl Views {
    pub(crate) fn new(log: Arc<Log>, metrics: Arc<Metrics>) -> Views {
        Views {
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            log,
            metrics,
        }
    }

    /// Open a view for transaction `txn_id` (0 for a read outside one).
    pub(crate) fn open(self: &Arc<Self>, txn_id: u64) -> Arc<ReadView> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Taken before the mutex: only the log snapshot and the entry need
        // it (module doc), and every transaction opens a view.
        let opened = Instant::now();
        let thread = std::thread::current().name().map(str::to_string);
        let mut open = self.open.lock();
        let (low, active) = self.log.commit_snapshot();
        let min = active.first().copied().unwrap_or(low).min(low);
        open.insert(
            id,
            Open {
                min,
                txn_id,
                opened,
                thread,
            },
        );
        Metrics::set(&self.metrics.trx_read_views_open, open.len() as u64);
        drop(open);
        Arc::new(ReadView {
            low,
            active,
            min,
            id,
            views: self.clone(),
        })
    }

    fn close(&self, id: u64) {
        let mut open = self.open.lock();
        open.remove(&id);
        Metrics::set(&self.metrics.trx_read_views_open, open.len() as u64);
    }

    /// Commits below this are seen by every view open now or opened later
    /// (module doc).
    pub(crate) fn purge_limit(&self) -> u64 {
        let open = self.open.lock();
        let (low, active) = self.log.commit_snapshot();
        let oldest_commit = active.first().copied().unwrap_or(low).min(low);
        open.values().map(|v| v.min).fold(oldest_commit, u64::min)
    }

    /// Views open now.
    pub(crate) fn count(&self) -> u64 {
        self.open.lock().len() as u64
    }

    /// The view that holds purge back (the smallest `min`, the oldest among
    /// equals), if any is open.
    pub(crate) fn oldest(&self) -> Option<ViewInfo> {
        let open = self.open.lock();
        open.values()
            .min_by_key(|v| (v.min, v.opened))
            .map(|v| ViewInfo {
                txn_id: v.txn_id,
                age_ms: u64::try_from(v.opened.elapsed().as_millis()).unwrap_or(u64::MAX),
                thread: v.thread.clone(),
            })
    }
}
