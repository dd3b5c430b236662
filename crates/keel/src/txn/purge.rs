//! Purge: the background threads that remove the history no read view
//! needs any more (InnoDB's purge coordinator and workers).
//!
//! # What purge removes, and why no reader misses it
//!
//! Each round a thread computes the purge limit (`view`'s module doc: every
//! view open now or later sees every commit below it) and, for each of its
//! rollback segments, processes the undo records of commits below the
//! limit, oldest first (`UndoSpace::purge`). For a record whose commit
//! deleted the row, it removes the delete mark from the tree if the row
//! still carries that very version (same commit, still delete-marked),
//! checked under the leaf's exclusive latch: no view can see the row any
//! more, and a later commit that wrote the row again left a newer version,
//! which stays. Then the undo record itself is dropped; pages whose records
//! are all purged are freed. A row whose version every view sees is never
//! followed past, so the undo it points to may go (its roll pointer then
//! names purged undo, as InnoDB's may; `Db::check` checks the pointers a
//! view could still follow).
//!
//! # Threads, waits, failures
//!
//! `purge_threads` threads (at most one per rollback segment, the rest
//! would idle); thread `i` owns the segments `i`, `i + n`, … so no two purge
//! one segment (`UndoSpace::purge` also serialises per segment). A thread
//! holds no latch and no lock between records; it may wait for log space
//! (its budget) holding nothing, as any writer. With nothing to purge it
//! sleeps on a condition variable for up to [`IDLE_WAIT`] (also after a
//! round that found less than a batch, to purge in batches, and when the
//! [`Pacer`] grants nothing yet); stopping wakes it. While writers run,
//! purge works off a backlog at most 1.5 times as fast as they write
//! undo ([`Pacer`]), so catching up never starves them. Writers never wait for purge: a history that grows (a view held
//! open) only costs pages, which the pool evicts and the cleaners write.
//! An error (a full disk, a closing engine) ends the round: nothing is
//! lost, the records stay in the history and are purged by a later round
//! or after the next open. A closed or poisoned engine stops the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::btree::BTree;
use crate::engine::admission::Purpose;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::PageId;
use crate::undo::{OwnedUndo, N_RSEGS};

use super::version::Version;
use super::TrxSys;

/// How long a purge thread that has caught up (its round found less than
/// [`BATCH`] records) sleeps before looking again. Purging each commit
/// as soon as it is below the limit would cost a mini-transaction per
/// page and record round for a handful of records; waiting lets a round
/// find tens of records per page (at 5,000 commits/s, about 100 commits'
/// undo), as InnoDB's purge coordinator sleeps while the history is short.
const IDLE_WAIT: Duration = Duration::from_millis(20);
/// Undo records one call processes before the thread looks at its other
/// segments and the limit again.
const BATCH: usize = 256;

/// With a backlog, purge removes at most this many times the undo records
/// commits write per second (see [`Pacer`]).
const CATCH_UP: f64 = 1.5;
/// Below this many undo records written per second the writers are idle
/// or nearly so, and purge runs unpaced: there is nobody to slow down.
const IDLE_RATE: f64 = 100.0;
/// How often the pacer measures the writers' rate.
const PACE_WINDOW: Duration = Duration::from_millis(50);

/// Paces purge against the writers while it works off a backlog.
///
/// A history that grew while a view was held (an hour of a busy table's
/// undo) is purged once the view ends. Unpaced, purge then takes the
/// threads, latches and page reads of the writers it shares the machine
/// with: each removal of a delete mark reads a leaf long evicted, and in a
/// 10-minute run with a view held for 5 minutes, tps fell to a quarter of
/// its median for two minutes while purge caught up. Purge has no
/// deadline (a longer history only costs pages), so it yields: while the
/// writers write undo records at rate `r` (smoothed over [`PACE_WINDOW`]),
/// purge is granted [`CATCH_UP`]` × r` records per second, so the backlog
/// shrinks at half the writers' own rate and purge's work is at most 1.5
/// times what keeping up costs anyway. Grants left unused accumulate for
/// at most one second. Writers that stop (rate under [`IDLE_RATE`]) leave
/// purge unpaced, so an idle database drains its history at full speed.
/// A pure function of the counters it is given, for tests.
#[derive(Debug)]
struct Pacer {
    /// When `written` was read.
    at: Instant,
    /// Undo records written by commits so far (`trx_undo_records`).
    written: u64,
    /// Smoothed records written per second.
    rate: f64,
    /// Records purge may still process now.
    tokens: f64,
}

impl Pacer {
    fn new(now: Instant, written: u64) -> Pacer {
        Pacer {
            at: now,
            written,
            rate: 0.0,
            tokens: 0.0,
        }
    }

    /// How many of `want` records purge may process now (0: none yet),
    /// given the undo records written so far.
    fn grant(&mut self, now: Instant, written: u64, want: usize) -> usize {
        let dt = now.saturating_duration_since(self.at);
        if dt >= PACE_WINDOW {
            let secs = dt.as_secs_f64();
            let now_rate = written.saturating_sub(self.written) as f64 / secs;
            self.rate = if self.rate == 0.0 {
                now_rate
            } else {
                0.5 * self.rate + 0.5 * now_rate
            };
            let per_s = CATCH_UP * self.rate;
            self.tokens = (self.tokens + per_s * secs).min(per_s.max(BATCH as f64));
            self.at = now;
            self.written = written;
        }
        if self.rate < IDLE_RATE {
            return want;
        }
        let n = (self.tokens.max(0.0) as usize).min(want);
        self.tokens -= n as f64;
        n
    }

    /// Give back the part of a grant that was not used.
    fn unused(&mut self, n: u64) {
        self.tokens += n as f64;
    }
}

struct Shared {
    stop: AtomicBool,
    wake: Condvar,
    lock: Mutex<()>,
    pace: Mutex<Pacer>,
}

/// The running purge threads.
pub(super) struct Purge {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Purge {
    /// Start `n` purge threads (no more than there are rollback segments).
    pub(super) fn start(sys: Arc<TrxSys>, n: usize) -> Result<Purge> {
        let n = n.clamp(1, N_RSEGS);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            wake: Condvar::new(),
            lock: Mutex::new(()),
            pace: Mutex::new(Pacer::new(
                Instant::now(),
                sys.engine.metrics.trx_undo_records.load(Ordering::Relaxed),
            )),
        });
        let mut p = Purge {
            shared,
            threads: Vec::with_capacity(n),
        };
        for i in 0..n {
            let (sys, shared) = (sys.clone(), p.shared.clone());
            let t = std::thread::Builder::new()
                .name(format!("keel-purge-{i}"))
                .spawn(move || run(&sys, &shared, i, n))
                .map_err(|e| Error::io(std::path::Path::new("."), "start purge thread", e));
            match t {
                Ok(t) => p.threads.push(t),
                Err(e) => {
                    p.stop();
                    return Err(e);
                }
            }
        }
        Ok(p)
    }

    /// Stop every thread and wait for it.
    pub(super) fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _g = self.shared.lock.lock();
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                log::error!(
                    "a purge thread panicked; the history it held is purged after the next open"
                );
            }
        }
    }
}

fn run(sys: &TrxSys, shared: &Shared, me: usize, n: usize) {
    let e = &*sys.engine;
    let mut last_error: Option<Instant> = None;
    while !shared.stop.load(Ordering::Acquire) {
        if e.adm.check_writable(Purpose::New).is_err() {
            // Closing, crashed or poisoned: nothing more may be written.
            return;
        }
        let limit = sys.views.purge_limit();
        let mut done = 0u64;
        let mut failed = false;
        let mut paced = false;
        for rseg in (me..N_RSEGS).step_by(n) {
            let written = e.metrics.trx_undo_records.load(Ordering::Relaxed);
            let granted = shared.pace.lock().grant(Instant::now(), written, BATCH);
            if granted == 0 {
                paced = true;
                break;
            }
            let mut on_record = |rec: &OwnedUndo| purge_record(sys, rec);
            match sys.undo.purge(e, rseg, limit, granted, &mut on_record) {
                Ok(step) => {
                    shared
                        .pace
                        .lock()
                        .unused((granted as u64).saturating_sub(step.records));
                    done += step.records;
                    Metrics::add(&e.metrics.purge_undo_records, step.records);
                }
                Err(err) => {
                    failed = true;
                    if e.adm.check_writable(Purpose::New).is_err() {
                        // Closing (or poisoned, reported by whoever caused
                        // it): the records stay for the next open.
                        break;
                    }
                    if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                        log::warn!("purge of rollback segment {rseg} stopped for now: {err}");
                        last_error = Some(Instant::now());
                    }
                    break;
                }
            }
        }
        if me == 0 {
            let age = sys.views.oldest().map_or(0, |v| v.age_ms);
            Metrics::set(&e.metrics.trx_oldest_view_age_ms, age);
        }
        if (done as usize) < BATCH || failed || paced {
            let mut g = shared.lock.lock();
            if !shared.stop.load(Ordering::Acquire) {
                let wait = if failed { IDLE_WAIT * 50 } else { IDLE_WAIT };
                shared.wake.wait_for(&mut g, wait);
            }
        }
    }
}

/// Purge one undo record: free the overflow chain of the version it holds,
/// if that version's value was large (no view can read it any more, and
/// the version owns its chain, whatever became of the table since), and
/// remove the delete mark its commit left, if the row still carries it
/// (module doc). Both are idempotent: a crash before the record is marked
/// purged runs them again (`lob::free_chain` finds the chain gone).
fn purge_record(sys: &TrxSys, rec: &OwnedUndo) -> Result<()> {
    // A delta never keeps a large version (`version::undo_delta`).
    if let Some(old) = rec.old.as_ref().filter(|_| !rec.delta) {
        if let Some(p) = Version::decode(old, rec.root)?.external {
            let e = &*sys.engine;
            e.failpoints.hit("purge.lob");
            crate::lob::free_chain(e, Purpose::New, p)?;
        }
    }
    if !rec.del_mark {
        return Ok(());
    }
    // A table dropped since, or a new table on a reused root page: the
    // row is gone with the tree it was in (`catalog`'s module doc).
    match sys.catalog.created(rec.root) {
        Some(created) if created < rec.commit => {}
        _ => return Ok(()),
    }
    let e = &*sys.engine;
    let tree = BTree::open(PageId::new(e.space_id(), rec.root));
    let budget = e.adm.budget(Purpose::New);
    let commit = rec.commit;
    let root = rec.root;
    // Between deciding to remove the mark and latching its leaf: a commit
    // may write the row again meanwhile (tests of that race).
    e.failpoints.hit("purge.del_mark");
    let is_that_mark = |stored: &[u8]| {
        Version::decode(stored, root).is_ok_and(|v| v.deleted && v.trx_no == commit)
    };
    if tree.delete_if_in(e, &budget, &rec.key, &is_that_mark)? {
        Metrics::add(&e.metrics.purge_del_mark_records, 1);
    }
    Ok(())
}

impl TrxSys {
    /// Remove, now, the delete marks of `tree` that no read view can see,
    /// as purge would later, if the tree holds nothing else (a bulk load
    /// needs an empty tree, and a table emptied by deletes holds their
    /// marks until purge passes). A live row or a mark a view may still see
    /// leaves the tree as it is: the load then refuses a table that is not
    /// empty.
    pub(crate) fn remove_dead_marks(&self, tree: BTree) -> Result<()> {
        let e = &*self.engine;
        let limit = self.views.purge_limit();
        let root = tree.root().page_no;
        let mut dead = Vec::new();
        let all = tree.range(
            e,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            false,
        );
        for row in all {
            let (key, stored) = row?;
            let v = Version::decode(&stored, root)?;
            if !v.deleted || v.trx_no >= limit {
                return Ok(());
            }
            dead.push((key, v.trx_no));
        }
        for (key, commit) in dead {
            let budget = e.adm.budget(Purpose::New);
            let is_that_mark = |stored: &[u8]| {
                Version::decode(stored, root).is_ok_and(|v| v.deleted && v.trx_no == commit)
            };
            if tree.delete_if_in(e, &budget, &key, &is_that_mark)? {
                Metrics::add(&e.metrics.purge_del_mark_records, 1);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn idle_writers_leave_purge_unpaced() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 0);
        assert_eq!(p.grant(t0, 0, BATCH), BATCH);
        // 50 records/s written: under IDLE_RATE.
        assert_eq!(p.grant(t0 + 100 * MS, 5, BATCH), BATCH);
    }

    #[test]
    fn with_writers_running_purge_gets_one_and_a_half_times_their_rate() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 0);
        // Writers write 10,000 undo records/s for 10 s; purge asks for as
        // much as it can get every millisecond. Until the first window has
        // measured them, purge is unpaced (counted apart).
        let mut granted = 0u64;
        let mut before = 0u64;
        for ms in 1..=10_050u64 {
            let n = p.grant(t0 + Duration::from_millis(ms), ms * 10, BATCH) as u64;
            if ms < 50 {
                before += n;
            } else {
                granted += n;
            }
        }
        assert_eq!(before, 49 * BATCH as u64);
        let want = 1.5 * 10_000.0 * 10.0;
        let got = granted as f64;
        assert!(
            (got - want).abs() < 0.02 * want,
            "granted {granted}, expected about {want}"
        );
    }

    #[test]
    fn unused_grants_accumulate_for_one_second_at_most() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0, 0);
        // Writers at 10,000 records/s; purge asks nothing for 5 s.
        for ms in (50..=5_000u64).step_by(50) {
            p.grant(t0 + Duration::from_millis(ms), ms * 10, 0);
        }
        let burst = p.grant(t0 + 5_000 * MS, 50_000, usize::MAX);
        assert!(
            (14_000..=15_000).contains(&burst),
            "burst {burst}: one second at 1.5 × 10,000/s"
        );
        // A grant given back is granted again.
        p.unused(100);
        assert_eq!(p.grant(t0 + 5_001 * MS, 50_010, usize::MAX), 100);
    }
}
