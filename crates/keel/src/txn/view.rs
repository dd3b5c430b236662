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
//! log's end.
//!
//! The registry of open views is split into [`SHARDS`] shards, each a
//! mutex on a cache line of its own; a thread registers its views in the
//! shard of its stripe (`metrics::stripe`), so that threads opening views
//! at once rarely meet (InnoDB 8.0 splits its `trx_sys` mutex the same
//! way). Opening a view holds its shard's mutex across the log snapshot and
//! the insertion. Purge computes its limit in two steps, holding at most
//! one mutex at a time: first its own log snapshot (the smallest commit in
//! flight, or the log's end), then each shard in turn, locked only to read
//! the smallest `min` it holds. Take a view and the shard it lives in.
//! Either its opening released the shard before purge locked it, and purge
//! counts it; or its opening locked the shard after purge released it, so
//! after purge's snapshot: every commit in flight at the view's snapshot
//! was then either in flight at purge's (at or above the purge snapshot's
//! smallest) or logged later (at or past that snapshot's end), and the
//! log's end only grows, so the view's `min` is at least purge's limit.
//! The two cannot overlap: both hold the shard's mutex. A reader follows a
//! version chain only past versions its view does not see, whose commits
//! are at or above its `min`, so never into purged undo. Tests:
//! `a_view_opening_and_the_purge_limit_exclude_each_other` (purge waits
//! for an opening that holds its shard, and counts the view) and
//! `a_view_opened_after_purge_passed_its_shard_is_above_the_limit`
//! (purge held after every shard is read, a view opened and the commit it
//! must not see finished meanwhile: the limit stays at that commit).
//!
//! Until 2026-11-30 purge held every shard's mutex across its snapshot: a
//! purge thread descheduled there stopped every thread opening or closing
//! a view (with 16 threads on 2 cores, about one thread in sixteen waited
//! there at any time).
//!
//! A shard's mutex is held only to copy the snapshot and to insert or
//! remove one entry, or to read its smallest `min`: nothing waits while
//! holding it. Lock order: the shards in ascending index, then the log's
//! mutex (purge takes the log's mutex holding no shard).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::metrics::{stripe, CacheAligned, Metrics, STRIPES};
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
    /// The registry shard holding its entry.
    shard: usize,
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
        self.views.close(self.id, self.shard);
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

/// Shards of the registry of open views (module doc).
pub(crate) const SHARDS: usize = STRIPES;

type Shard = CacheAligned<Mutex<HashMap<u64, Open>>>;

/// The open views (InnoDB's `MVCC` view list), in shards (module doc).
pub(crate) struct Views {
    shards: Box<[Shard]>,
    next_id: AtomicU64,
    log: Arc<Log>,
    metrics: Arc<Metrics>,
    /// Where a test holds a view's opening (`views.open.snapshot`: its
    /// shard locked, its snapshot taken, its entry not yet inserted).
    failpoints: crate::failpoint::Points,
}

impl Views {
    pub(crate) fn new(log: Arc<Log>, metrics: Arc<Metrics>) -> Views {
        Views {
            shards: (0..SHARDS)
                .map(|_| CacheAligned(Mutex::new(HashMap::new())))
                .collect(),
            next_id: AtomicU64::new(1),
            log,
            metrics,
            failpoints: Default::default(),
        }
    }

    /// Shard `i`, locked; a wait is `wait_trx_sys_mutex`.
    fn lock_shard(&self, i: usize) -> parking_lot::MutexGuard<'_, HashMap<u64, Open>> {
        let m = &self.metrics;
        crate::metrics::lock_counted(
            &self.shards[i],
            &m.wait_trx_sys_mutex,
            &m.wait_trx_sys_mutex_ns,
        )
    }

    /// Every shard, locked in ascending order (the lock order).
    fn lock_all(&self) -> Vec<parking_lot::MutexGuard<'_, HashMap<u64, Open>>> {
        (0..SHARDS).map(|i| self.lock_shard(i)).collect()
    }

    /// Open a view for transaction `txn_id` (0 for a read outside one).
    pub(crate) fn open(self: &Arc<Self>, txn_id: u64) -> Arc<ReadView> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // Taken before the mutex: only the log snapshot and the entry need
        // it (module doc), and every transaction opens a view.
        let opened = Instant::now();
        let thread = std::thread::current().name().map(str::to_string);
        let shard = stripe() % SHARDS;
        let mut open = self.lock_shard(shard);
        let (low, active) = self.log.commit_snapshot();
        let min = active.first().copied().unwrap_or(low).min(low);
        self.failpoints.hit("views.open.snapshot");
        open.insert(
            id,
            Open {
                min,
                txn_id,
                opened,
                thread,
            },
        );
        drop(open);
        // The gauge is the count itself: an add and a sub commute, where
        // two threads setting the counts they computed could leave the
        // older one last.
        Metrics::add(&self.metrics.trx_read_views_open, 1);
        Arc::new(ReadView {
            low,
            active,
            min,
            id,
            shard,
            views: self.clone(),
        })
    }

    fn close(&self, id: u64, shard: usize) {
        self.lock_shard(shard).remove(&id);
        Metrics::sub(&self.metrics.trx_read_views_open, 1);
    }

    /// Commits below this are seen by every view open now or opened later
    /// (module doc: the snapshot first, then one shard at a time).
    pub(crate) fn purge_limit(&self) -> u64 {
        let (low, active) = self.log.commit_snapshot();
        let mut limit = active.first().copied().unwrap_or(low).min(low);
        for i in 0..SHARDS {
            if let Some(m) = self.lock_shard(i).values().map(|v| v.min).min() {
                limit = limit.min(m);
            }
        }
        // Where a test holds purge with every shard read and its limit not
        // yet returned.
        self.failpoints.hit("views.purge.scanned");
        limit
    }

    /// Views open now: the gauge, which every opening adds to and every
    /// closing subtracts from (no shard need be locked to read it).
    pub(crate) fn count(&self) -> u64 {
        self.metrics.trx_read_views_open.load(Ordering::Relaxed)
    }

    /// The view that holds purge back (the smallest `min`, the oldest among
    /// equals), if any is open.
    pub(crate) fn oldest(&self) -> Option<ViewInfo> {
        let all = self.lock_all();
        all.iter()
            .flat_map(|s| s.values())
            .min_by_key(|v| (v.min, v.opened))
            .map(|v| ViewInfo {
                txn_id: v.txn_id,
                age_ms: u64::try_from(v.opened.elapsed().as_millis()).unwrap_or(u64::MAX),
                thread: v.thread.clone(),
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::{FlushMethod, OsFileSystem};

    fn views() -> (tempfile::TempDir, Arc<Log>, Arc<Views>) {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::new(FlushMethod::NoSync);
        let log = Arc::new(Log::create(&fs, dir.path(), 1 << 20, 2, 7, Arc::default()).unwrap());
        let views = Arc::new(Views::new(log.clone(), Arc::default()));
        (dir, log, views)
    }

    /// The race the shards must not open: a view takes its snapshot while
    /// commit `c` is in flight (its `min` is `c`), `c` finishes, and purge
    /// reads its limit before the view is in the registry. Purge would then
    /// drop what `c` replaced, which the view must still read. Held between
    /// its snapshot and its insertion, the opening keeps its shard, and
    /// purge, which locks every shard, waits and then counts the view.
    #[test]
    fn a_view_opening_and_the_purge_limit_exclude_each_other() {
        let (_dir, log, views) = views();
        let c = log.append_commit(Arc::from(&b"record"[..])).unwrap();
        let held = views.failpoints.arm("views.open.snapshot");
        std::thread::scope(|s| {
            let opening = s.spawn(|| views.open(7));
            assert!(held.wait_held(std::time::Duration::from_secs(10)));
            log.append_applied(c).unwrap();
            let purge = s.spawn(|| views.purge_limit());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(
                !purge.is_finished(),
                "purge read its limit past a view being opened"
            );
            held.release();
            let view = opening.join().unwrap();
            assert_eq!(view.min(), c);
            let limit = purge.join().unwrap();
            assert!(
                limit <= view.min(),
                "limit {limit} is past the view's min {}",
                view.min()
            );
            assert_eq!(views.count(), 1);
            drop(view);
            assert_eq!(views.count(), 0);
            assert_eq!(views.purge_limit(), log.lsn());
        });
    }

    /// The race reading the shards one at a time must not open: purge
    /// passes a shard, then a view opens there while commit `c` is in
    /// flight (its `min` is `c`), and `c` finishes before purge returns.
    /// Purge took its snapshot before the shards, with `c` in flight, so
    /// its limit is at most `c`. (Taking the snapshot after the shards
    /// would find `c` finished and return a limit past the view's `min`.)
    #[test]
    fn a_view_opened_after_purge_passed_its_shard_is_above_the_limit() {
        let (_dir, log, views) = views();
        let c = log.append_commit(Arc::from(&b"record"[..])).unwrap();
        let held = views.failpoints.arm("views.purge.scanned");
        std::thread::scope(|s| {
            let purge = s.spawn(|| views.purge_limit());
            assert!(held.wait_held(std::time::Duration::from_secs(10)));
            let view = views.open(7);
            assert_eq!(view.min(), c);
            log.append_applied(c).unwrap();
            held.release();
            let limit = purge.join().unwrap();
            assert!(
                limit <= view.min(),
                "limit {limit} is past the view's min {}",
                view.min()
            );
            drop(view);
        });
        assert_eq!(views.purge_limit(), log.lsn());
    }

    /// Views opened and closed by many threads at once, each in its
    /// thread's shard: the registry holds exactly the views open, the
    /// gauge follows, and the oldest is found whatever shard holds it.
    #[test]
    fn views_of_many_threads_are_counted_and_found_in_every_shard() {
        let (_dir, log, views) = views();
        let c = log.append_commit(Arc::from(&b"record"[..])).unwrap();
        let oldest = views.open(1);
        log.append_applied(c).unwrap();
        let threads = 2 * SHARDS;
        let barrier = std::sync::Barrier::new(threads + 1);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let (views, barrier) = (&views, &barrier);
                    s.spawn(move || {
                        let v = views.open(100 + t as u64);
                        for i in 0..200 {
                            drop(views.open(1000 + i));
                        }
                        barrier.wait();
                        barrier.wait();
                        drop(v);
                    })
                })
                .collect();
            barrier.wait();
            assert_eq!(views.count(), threads as u64 + 1);
            assert_eq!(
                views.metrics.trx_read_views_open.load(Ordering::Relaxed),
                threads as u64 + 1
            );
            assert_eq!(views.oldest().unwrap().txn_id, 1);
            assert_eq!(views.purge_limit(), c);
            barrier.wait();
            for h in hs {
                h.join().unwrap();
            }
        });
        assert_eq!(views.count(), 1);
        drop(oldest);
        assert_eq!(views.count(), 0);
        assert_eq!(views.metrics.trx_read_views_open.load(Ordering::Relaxed), 0);
    }
}
