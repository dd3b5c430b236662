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
//! round that found less than a batch, to purge in batches); stopping
//! wakes it. Writers never wait for purge: a history that grows (a view held
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

struct Shared {
    stop: AtomicBool,
    wake: Condvar,
    lock: Mutex<()>,
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
        for rseg in (me..N_RSEGS).step_by(n) {
            let mut on_record = |rec: &OwnedUndo| purge_record(sys, rec);
            match sys.undo.purge(e, rseg, limit, BATCH, &mut on_record) {
                Ok(step) => {
                    done += step.records;
                    Metrics::add(&e.metrics.purge_undo_records, step.records);
                }
                Err(err) => {
                    failed = true;
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
        if (done as usize) < BATCH || failed {
            let mut g = shared.lock.lock();
            if !shared.stop.load(Ordering::Acquire) {
                let wait = if failed { IDLE_WAIT * 50 } else { IDLE_WAIT };
                shared.wake.wait_for(&mut g, wait);
            }
        }
    }
}

/// Purge one undo record: remove the delete mark its commit left, if the
/// row still carries it (module doc).
fn purge_record(sys: &TrxSys, rec: &OwnedUndo) -> Result<()> {
    if !rec.del_mark {
        return Ok(());
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
