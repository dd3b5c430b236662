//! Named points in the engine's own code where a test can hold a thread
//! at the bad moment of a race, the way `io::faulty`'s holds do at an I/O
//! call. Each engine has its own set (`Points`, armed through the hidden
//! `Db::failpoint`), so tests running side by side in one process do not
//! catch each other's threads. Compiled in only for tests and with the
//! `test-util` feature; otherwise `Points` is empty and `hit` does
//! nothing.
//!
//! A point is armed by name and fires once: the first thread of that
//! engine to reach it waits (holding whatever it holds there, by design)
//! until the test calls `Hold::release`, or for at most
//! `HOLD_TIMEOUT`, so that a failed test cannot hang. Armed with
//! `Points::arm_panic` instead, that thread panics there.
//!
//! Points:
//! - `bulk.leaf`: in a bulk load (`btree::bulk`), before the mini-transaction
//!   that writes the next full leaf, holding no latch: the hidden tree is
//!   complete up to the previous leaf and the table still looks empty.
//! - `bulk.publish`: in a bulk load's finish, after its last leaf was
//!   written and before the mini-transaction that publishes the hidden
//!   tree, holding no latch.
//! - `checkpoint.relocated`: in `Engine::checkpoint_locked`, after the
//!   records of the commits in flight were relocated to the end of the log
//!   and before that group is synced.
//! - `commit.between_ops`: in a commit's apply (`txn::commit`), after its
//!   first operation is in place and before its second, holding the row
//!   locks and no latch: readers must see neither row's new version.
//! - `commit.undo_appended`: in a commit's apply, after its undo records
//!   were appended and before the first row pointing to one is written
//!   (recovery appends the records again: two records hold one version).
//! - `undo.appending`: in an undo append (`undo::space`), after it took
//!   an rseg's append mutex and before it latches the tail, holding that
//!   mutex: another appender must go to a free rseg, not wait.
//! - `lob.written`: after each mini-transaction that writes pages of an
//!   overflow chain (`lob`), before the next, holding no latch: the
//!   bundle is in the directory, nothing references it yet.
//! - `lob.trimmed`: after each mini-transaction that frees pages of a
//!   chain after its head, before the next.
//! - `rollback.compensated`: at the open, rolling back a commit a crash cut
//!   short (`txn::commit`), after the compensating commit is applied and
//!   durable and before the rolled back commit's marker is appended.
//! - `purge.lob`: in purge, before it frees the overflow chain of the old
//!   version an undo record holds.
//! - `read.lob`: in a read, after it copied a row pointing to an overflow
//!   chain and before it reads the chain, holding no latch.
//! - `purge.del_mark`: in purge (`txn::purge`), after it chose a delete
//!   mark to remove and before it latches the leaf, holding no latch: a
//!   commit writing the row again meanwhile must keep its new version.
//! - `cleaner.tick`: in the page-cleaner coordinator's round, after the
//!   policy decided and the round's batches were written, before the log
//!   flush and the checkpoint (`CleanerHost::tick`).
//! - `close.cleaners_stopping`: in `Db::close`, after the commits admitted
//!   before it finished (or were given up on), before the page cleaners
//!   stop.
//! - `backup.copying`: in `Db::backup`, once the checkpoint is pinned and
//!   the redo copier runs, before the first page is copied. Held there,
//!   the writers go on and the copier must keep moving the pin.
//! - `backup.redo`: in `Db::backup`'s redo copier, before each read of the
//!   log. Held there, the backup's pin stops the checkpoint, and writers
//!   wait for log space rather than overwrite redo it has not copied.
//! - `commit.waiting`: in `Engine::begin_commit`, when a new commit found
//!   no log space (or the record limit reached) and is about to wait in the
//!   free check, holding no latch and no reservation but counted among the
//!   commits a close waits for (held there, it holds a close up): released,
//!   it waits as a new commit, which a close refuses at once.
//! - `commit.admitted`: in `Engine::begin_commit`, after the commit was
//!   admitted and its log space reserved, before its record is logged.
//! - `writer.pace`: in `Engine::pace_writer`, where a transaction is
//!   paused by the flushing policy (before its first row lock, or a
//!   `Table::put`'s), holding no latch and no row lock: held there, the
//!   writer is paused for as long as the test chooses.
//! - `views.open.snapshot`: in the opening of a read view (`txn::view`),
//!   after its log snapshot and before its entry enters the registry,
//!   holding its registry shard's mutex: purge reading its limit must wait
//!   for it. The registry keeps its own points, armed by its unit tests.
//! - `log.round.lead`: in the redo log's sync round (`redo::writer`), after
//!   its leader took the round and gathered its followers, before it writes
//!   out everything appended and reads the round's target. The leader holds
//!   no log mutex there; threads that need the log durable join the round
//!   and wait. The log keeps its own points (`Log::failpoints`), which
//!   `Db::failpoint` arms for names starting with `log.`.
//! - `log.write.taken`: in a write-out of the redo log (`redo::writer`),
//!   after the writer took the buffer and before its `pwrite`, holding the
//!   log's `write` mutex: threads needing their bytes written wait for it.

#[cfg(any(test, feature = "test-util"))]
pub use imp::*;

/// An engine's failpoints: none can be armed in this build.
#[cfg(not(any(test, feature = "test-util")))]
#[derive(Default)]
pub(crate) struct Points;

#[cfg(not(any(test, feature = "test-util")))]
impl Points {
    /// Mark point `name`: nothing to do in this build.
    #[inline(always)]
    pub(crate) fn hit(&self, _name: &'static str) {}
}

#[cfg(any(test, feature = "test-util"))]
mod imp {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use parking_lot::{Condvar, Mutex};

    /// Longest a thread waits at a point for its release.
    pub const HOLD_TIMEOUT: Duration = Duration::from_secs(60);

    /// An engine's armed points.
    #[derive(Default)]
    pub struct Points {
        armed: Mutex<Vec<(&'static str, Arc<Hold>)>>,
    }

    /// One armed point: whether a thread is held there, and its release.
    #[derive(Default)]
    pub struct Hold {
        /// (a thread reached the point, the test released it)
        state: Mutex<(bool, bool)>,
        changed: Condvar,
        /// The thread that reaches the point panics instead of waiting.
        panics: bool,
    }

    impl Points {
        /// Arm point `name`: the next thread to reach it waits there.
        pub fn arm(&self, name: &'static str) -> Arc<Hold> {
            let h = Arc::new(Hold::default());
            self.armed.lock().push((name, Arc::clone(&h)));
            h
        }

        /// Arm point `name` so that the next thread to reach it panics
        /// (tests of what survives a bug in a thread); the hold tells when
        /// it did.
        pub fn arm_panic(&self, name: &'static str) -> Arc<Hold> {
            let h = Arc::new(Hold {
                panics: true,
                ..Hold::default()
            });
            self.armed.lock().push((name, Arc::clone(&h)));
            h
        }

        /// Mark point `name`: wait here (or panic) if a test armed it
        /// (once per arming, the earliest armed first).
        pub fn hit(&self, name: &'static str) {
            let hold = {
                let mut armed = self.armed.lock();
                let Some(k) = armed.iter().position(|(n, _)| *n == name) else {
                    return;
                };
                armed.remove(k).1
            };
            let deadline = Instant::now() + HOLD_TIMEOUT;
            let mut s = hold.state.lock();
            s.0 = true;
            hold.changed.notify_all();
            if hold.panics {
                drop(s);
                panic!("failpoint `{name}` armed to panic");
            }
            while !s.1 {
                if hold.changed.wait_until(&mut s, deadline).timed_out() {
                    log::error!("failpoint `{name}` was not released within {HOLD_TIMEOUT:?}");
                    return;
                }
            }
        }
    }

    impl Hold {
        /// Wait until a thread is held at the point; false after `timeout`.
        pub fn wait_held(&self, timeout: Duration) -> bool {
            let deadline = Instant::now() + timeout;
            let mut s = self.state.lock();
            while !s.0 {
                if self.changed.wait_until(&mut s, deadline).timed_out() {
                    return s.0;
                }
            }
            true
        }

        /// Let the held thread (or the next one to arrive) go on.
        pub fn release(&self) {
            self.state.lock().1 = true;
            self.changed.notify_all();
        }
    }
}
