//! Handing the log to the OS, and making it durable: two steps under two
//! different locks, so that a thread which needs its bytes only written
//! (a commit at `flush_log_at_trx_commit` 2, an appender emptying a full
//! buffer) never waits for an fdatasync in progress. InnoDB 8.0 splits its
//! log writer from its log flusher for the same reason.
//!
//! # Writing: the `write` mutex
//!
//! [`Log::write_up_to`] first writes. Under the `write` mutex the holder
//! takes the whole buffer from the `state` mutex, writes it at its place in
//! the circular files and only then raises `written`: every byte below
//! `written` has been handed to the OS (its `pwrite` returned). Whoever
//! holds it writes everything appended so far, so the threads that wanted
//! it meanwhile usually find their bytes written when it is released.
//! The buffer is taken by swapping it with a spare kept under the `write`
//! mutex (empty, with the capacity of an earlier write), so `state` is held
//! for a swap, and an append under `state` copies into room that is
//! usually there already instead of growing a buffer from nothing: an
//! appender waits on `state` for other appenders' copies, nothing longer.
//!
//! *Waiting for `write`*: nobody queues on the mutex. A thread whose bytes
//! are not written tries to take it; if it is held, the thread parks until
//! its holder is done, then looks again: its bytes written, it returns; if
//! not (it appended after the holder took the buffer), it tries to take the
//! mutex itself, and one of the threads woken so writes for all of them.
//! Queued on the mutex, as they were until 2026-11-29, the threads were
//! handed it one at a time, each only to find its bytes written and pass it
//! on: with many more threads than cores each hand-over waited for the next
//! thread to be scheduled, and at 256 threads on 2 cores three quarters of
//! the times a thread went to sleep it was there (13,453 of 17,801 in 2 s).
//! A condvar does no better: its waiters wake into its mutex one by one,
//! and the next holder waits behind them (12,897 such sleeps in 2 s).
//!
//! So the waiters park on an address of the log's own (that of `written`,
//! with `parking_lot_core`, the primitive parking_lot's locks are built
//! on) and wake without taking any lock. The holder, when done, releases
//! the mutex and then unparks every thread parked there (a guard does this
//! however the write ends, a panic included). No wakeup is lost: a thread
//! parks only if, under the parking lot's queue lock for that address, its
//! bytes are still not written and the mutex is still held; the holder
//! releases the mutex before it takes that queue lock to unpark, so either
//! the thread saw the mutex free and does not park (it looks again and may
//! take it), or it was queued before the unpark.
//!
//! The waiter holds at most what its caller holds: a committer its row
//! locks, an appender nothing (it appended first), a page cleaner the
//! claims of its flush batch, the checkpointer the checkpoint mutex. The
//! holder needs none of these: it takes only the `state` mutex for a
//! moment, writes, and never syncs or waits for log space (the module doc
//! of `redo`). A failed write (or a write-out that finds a reservation
//! broken) poisons the log before the mutex is released, and so does a
//! panic while it is held: the taken buffer exists nowhere else, so every
//! later writer must refuse rather than leave a hole. A waiter woken by a
//! failed write finds its bytes not written, takes the mutex and meets the
//! poison.
//!
//! Failpoint `log.write.taken` holds a writer after it took the buffer and
//! before its `pwrite`, holding `write`.
//!
//! # Syncing: one round at a time
//!
//! A sync *round* makes the log durable up to its *target*: `written` read
//! after the round's leader wrote out the buffer, just before its first
//! fdatasync. Every byte below the target was written before that
//! fdatasync started, so the round covers it; a byte written after the
//! target was read is never counted by it, whatever the OS happened to do
//! with it (the "covered by a sync that started after the write completed"
//! rule of `space`). Rounds run one at a time, each from the previous
//! round's target (`flushed`) to its own, and fdatasync only the files that
//! hold LSNs in `[flushed, target)`: an LSN's file is a function of the
//! LSN, and everything below `flushed` is durable already. A file written
//! during a round receives bytes at or above that round's target, so the
//! next round syncs it again.
//!
//! A thread that needs LSN `l` durable writes it first, then, under the
//! `sync` mutex:
//! - `flushed ≥ l`: it is done (group commit: a round covered it);
//! - no round is running: it *leads* the next one, marking it running and
//!   then releasing the mutex;
//! - a round is running: it *joins* it (counted in `joined`) and waits on
//!   `round_ended`. If that round covered `l` it is done when it ends; if
//!   not (`l` was written after the target was read), one of the threads
//!   woken leads the next round, whose target includes `l`. So a thread
//!   waits for the round in progress and at most one more.
//!
//! # Group commit: the leader gathers, then writes out everything
//!
//! Left alone, the first committer back after a round would sync alone,
//! and those arriving a few microseconds later would wait for it and then
//! sync together: groups alternating between 1 and the rest, about twice
//! the rounds needed. So a leader does two things before it reads its
//! target:
//!
//! 1. *Gathering*. It expects as many threads to need a sync as did during
//!    the last round (`demand`: that round's leader and every thread that
//!    joined it, covered or not). If fewer have joined, it waits on
//!    `gathered`, releasing the `sync` mutex, until they have or until its
//!    window ends: a tenth of the moving average of a round's fdatasyncs,
//!    at most [`MAX_GATHER`], none when that is under [`MIN_GATHER`] (so a
//!    lone committer, with a demand of 1, never waits, nor does anyone on a
//!    log whose syncs cost nothing). The thread whose joining makes the
//!    count notifies it. A leader that waits
//!    for nobody loses at most a tenth of a round (plus the timer's
//!    slack, some tens of microseconds), once: the next demand counts only
//!    who came. Threads that join while it gathers have
//!    written their bytes before joining, so the round covers them.
//! 2. *Writing out everything appended*, not only what its own caller
//!    needed, under the `write` mutex like any write. A thread that
//!    appended before this point but had not written yet (its commit was
//!    between its append and its write, or queued for the `write` mutex)
//!    is covered by this round instead of the next, and finds its bytes
//!    written when it gets there.
//!
//! *Waiting for a round*: the waiter holds what its caller holds (row
//! locks, a flush batch's claims, the checkpoint mutex; never the `write`
//! or `state` mutex), and the `sync` mutex only while it looks at the
//! state (the condvar releases it). The leader needs none of them: it
//! holds no lock of the log while it gathers (the condvar releases `sync`),
//! takes only `write` and `state` to write out, holds no lock while it
//! syncs, and takes `sync` to publish the round's end. It wakes every
//! waiter when the round ends, whether it succeeded, failed or panicked (a
//! guard ends an abandoned round), so the wait lasts as long as a bounded
//! gathering, a write-out and the fdatasyncs in progress, and one more
//! round; there is no timeout on the fdatasyncs, because a commit at
//! `flush_log_at_trx_commit` 1 may not return before its bytes are durable,
//! and a device that never answers an fdatasync holds the leader too.
//! *Waiting to gather*: the leader holds only its caller's locks; its
//! waker is a joining thread, and the deadline bounds the wait if none
//! comes.
//!
//! *What a failure leaves*: a failed write-out poisons the log (as every
//! failed write does, above) and a failed fdatasync poisons it too, before
//! the round ends; `flushed` stays where it was. Waiters wake, find their
//! LSN not durable and the log poisoned, and return the error: no thread
//! gets `Ok` for an LSN that round was meant to cover. The kernel may have
//! dropped the failed pages (USENIX ATC '20), so nothing is retried; a
//! restart recovers what the earlier rounds made durable.
//!
//! Failpoint `log.round.lead` (`crate::failpoint`) holds a leader after it
//! gathered and before it writes out: what is appended meanwhile is covered
//! by its round.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::format::LOG_FILE_HDR;
use super::{Log, BUFFER_WRITE_THRESHOLD};
use crate::error::{Error, Result};
use crate::io::Device;
use crate::metrics::{Metrics, WaitTimer};
use crate::page::Lsn;

/// A leader gathers for at most this fraction of a round's fdatasyncs
/// (their moving average): a leader that waits for nobody costs at most
/// that much more latency, once.
const GATHER_FRACTION: u64 = 10;
/// ... and never longer than this, whatever the device.
const MAX_GATHER: Duration = Duration::from_millis(1);
/// A window shorter than this is not worth a timed wait.
const MIN_GATHER: Duration = Duration::from_micros(2);

/// The sync rounds' state, under `Log::sync`.
#[derive(Default)]
pub(super) struct SyncState {
    /// A round is in progress: its leader is gathering, writing out or
    /// syncing.
    running: bool,
    /// The leader of the round in progress waits on `Log::gathered` until
    /// `joined` reaches `expect` (or its window ends).
    gathering: bool,
    expect: usize,
    /// Threads that began waiting since the round in progress started.
    joined: usize,
    /// Threads waiting for the round in progress to end.
    waiting: usize,
    /// `1 + joined` of the last round, counted when it ended: how many
    /// threads needed the log durable during one round. The next leader
    /// expects as many, itself included.
    demand: usize,
    /// Moving average of a round's fdatasyncs, in microseconds.
    sync_us: u64,
    /// Tests: the gathering window, instead of one derived from `sync_us`.
    #[cfg(test)]
    window_for_test: Option<Duration>,
}

/// One log file's fdatasyncs, numbered as they begin: `begun` is raised
/// just before each one starts, `done` to its number once it ended well.
/// A write that returned before `begun` was read as `m` is covered by any
/// sync numbered past `m`: that sync's number was taken after the read
/// (the counter only grows, and every access is `SeqCst`, one order for
/// them all), so its fdatasync began after the write had returned. It
/// serves what no round accounts for: a checkpoint's slot (`Log::
/// write_checkpoint`).
#[derive(Debug, Default)]
pub(super) struct FileSyncs {
    begun: AtomicU64,
    done: AtomicU64,
}

impl FileSyncs {
    /// fdatasync `dev`, numbered.
    pub(super) fn sync(&self, dev: &dyn Device) -> io::Result<()> {
        let n = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
        dev.sync()?;
        self.done.fetch_max(n, Ordering::SeqCst);
        Ok(())
    }

    /// The syncs begun so far: the mark of a write that has returned.
    pub(super) fn begun(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// Whether a sync begun after `mark` was taken has ended well.
    pub(super) fn covers(&self, mark: u64) -> bool {
        self.done.load(Ordering::SeqCst) > mark
    }
}

impl SyncState {
    /// How long the next leader may wait for its followers.
    fn gather_window(&self) -> Duration {
        #[cfg(test)]
        if let Some(w) = self.window_for_test {
            return w;
        }
        Duration::from_micros(self.sync_us / GATHER_FRACTION).min(MAX_GATHER)
    }
}

impl Log {
    /// Make the log reach at least `lsn`: written to the OS, and durable if
    /// `sync` (see the module doc). A write never waits for a sync in
    /// progress; a sync waits only for the round in progress and the one
    /// after it.
    pub fn write_up_to(&self, lsn: Lsn, sync: bool) -> Result<()> {
        self.write_out(lsn)?;
        if sync {
            self.sync_up_to(lsn)?;
        }
        Ok(())
    }

    /// Write the buffer to the OS if `lsn` is not written yet: write it
    /// if no write-out is under way, else wait for the one under way and
    /// look again (module doc, "Waiting for `write`").
    fn write_out(&self, lsn: Lsn) -> Result<()> {
        // Counted once, at the first wait; timed until the bytes are
        // written or the mutex is ours (not through our own write).
        let mut waited: Option<WaitTimer> = None;
        let stop = |waited: Option<WaitTimer>| {
            if let Some(w) = waited {
                w.stop(&self.metrics.wait_log_write_mutex_ns);
            }
        };
        loop {
            if self.written.load(Ordering::Acquire) >= lsn {
                stop(waited);
                return Ok(());
            }
            if let Some(taken) = self.write.try_lock() {
                stop(waited);
                let mut turn = WriteTurn {
                    log: self,
                    taken: Some(taken),
                };
                return turn.write(lsn);
            }
            if waited.is_none() {
                waited = Some(WaitTimer::start(&self.metrics.wait_log_write_mutex));
            }
            self.park_while_writing(lsn);
        }
    }

    /// Park until the write-out in progress is done, unless `lsn` is
    /// written or no write-out is in progress by the time the parking
    /// lot's queue is locked (module doc, "Waiting for `write`").
    fn park_while_writing(&self, lsn: Lsn) {
        let key = &self.written as *const _ as usize;
        let validate = || {
            // `is_locked` is a load of the mutex's word: it does not enter
            // the parking lot.
            let park = self.written.load(Ordering::Acquire) < lsn && self.write.is_locked();
            #[cfg(test)]
            if park {
                self.write_waiting.fetch_add(1, Ordering::Relaxed);
            }
            park
        };
        #[allow(unsafe_code)]
        // SAFETY: the key is the address of this log's `written`, which no
        // other primitive parks on; `validate` only loads atomics (and
        // counts, in tests), and neither panics nor calls into the parking
        // lot.
        let parked = unsafe {
            parking_lot_core::park(
                key,
                validate,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            )
        };
        #[cfg(test)]
        if parked.is_unparked() {
            self.write_waiting.fetch_sub(1, Ordering::Relaxed);
        }
        #[cfg(not(test))]
        let _ = parked;
    }

    /// Write `data`, just taken from the buffer, at `[start, end)`.
    fn write_taken(&self, start: Lsn, end: Lsn, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        // From here the buffer's bytes exist nowhere else: any failure must
        // poison, or later writes would leave a hole behind (module doc).
        let unfreed = end.saturating_sub(self.checkpoint_lsn());
        if unfreed > self.capacity {
            let e = Error::LogOverloaded(format!(
                "writing redo up to LSN {end} would overwrite log the checkpoint at {} has not \
                 freed ({unfreed} bytes for a log of {}): a reservation was broken",
                self.checkpoint_lsn(),
                self.capacity
            ));
            self.poisoned.set(e.to_string());
            return Err(e);
        }
        if let Err(e) = self.write_at_lsn(start, data) {
            self.poisoned.set(format!("a redo log write failed: {e}"));
            return Err(e);
        }
        // Raised only once the bytes are written: a round that reads it
        // begins after they reached the OS.
        self.written.store(end, Ordering::Release);
        Metrics::add(&self.metrics.log_writes, 1);
        Metrics::add(&self.metrics.log_bytes_written, data.len() as u64);
        Ok(())
    }

    /// Make everything written so far up to `lsn` durable: return when a
    /// round whose target covers `lsn` has ended (module doc).
    fn sync_up_to(&self, lsn: Lsn) -> Result<()> {
        if self.flushed_lsn() >= lsn {
            return Ok(());
        }
        let started = Instant::now();
        let r = self.wait_or_run_round(lsn);
        Metrics::add(&self.metrics.log_sync_waits, 1);
        Metrics::add(
            &self.metrics.log_sync_wait_us_total,
            started.elapsed().as_micros() as u64,
        );
        r
    }

    /// The slow path of [`Log::sync_up_to`]: wait for the round in progress,
    /// or lead the next one.
    fn wait_or_run_round(&self, lsn: Lsn) -> Result<()> {
        let mut st = self.sync.lock();
        loop {
            if self.flushed_lsn() >= lsn {
                return Ok(());
            }
            self.poisoned.check()?;
            if !st.running {
                break;
            }
            st.waiting += 1;
            st.joined += 1;
            if st.gathering && st.joined >= st.expect {
                self.gathered.notify_one();
            }
            self.round_ended.wait(&mut st);
            st.waiting -= 1;
        }
        // `flushed` changes only when a round ends, under this mutex: it
        // stays `from` until this round ends.
        let from = self.flushed_lsn();
        st.running = true;
        st.joined = 0;
        drop(st);
        let round = Round {
            log: self,
            ended: false,
        };
        round.run(from)
    }

    /// Tests: let every leader gather for `window` (module doc), instead of
    /// a fraction of the measured fdatasync time.
    #[cfg(test)]
    pub(crate) fn set_gather_window_for_test(&self, window: Duration) {
        self.sync.lock().window_for_test = Some(window);
    }

    /// Position of `lsn`: file, offset in it, bytes left in its data area.
    pub(super) fn locate(&self, lsn: Lsn) -> (usize, u64, u64) {
        let pos = lsn % self.capacity;
        let file = (pos / self.area) as usize;
        let off = pos % self.area;
        (file, LOG_FILE_HDR + off, self.area - off)
    }

    fn write_at_lsn(&self, mut lsn: Lsn, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let (f, off, room) = self.locate(lsn);
            let n = (room as usize).min(data.len());
            let (dev, path) = &self.files[f];
            dev.write_at(&data[..n], off)
                .map_err(|e| Error::io(path, "write", e))?;
            data = &data[n..];
            lsn += n as u64;
        }
        Ok(())
    }

    /// Threads waiting for the sync round in progress.
    #[cfg(test)]
    pub(crate) fn sync_waiters(&self) -> usize {
        self.sync.lock().waiting
    }
}

/// This thread's hold of the `write` mutex. Dropped, however the write
/// ended, it releases the mutex and then wakes every thread parked for it
/// (module doc); dropped by a panic, it poisons the log first.
struct WriteTurn<'a> {
    log: &'a Log,
    taken: Option<parking_lot::MutexGuard<'a, Vec<u8>>>,
}

impl WriteTurn<'_> {
    /// Write out the buffer, unless `lsn` was written while this thread
    /// took the mutex.
    fn write(&mut self, lsn: Lsn) -> Result<()> {
        let log = self.log;
        let Some(taken) = self.taken.as_mut() else {
            return Ok(());
        };
        if log.written.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        log.poisoned.check()?;
        let (start, end) = {
            let mut st = log.lock_state();
            // The buffer goes out and the spare (empty, with the capacity
            // of an earlier write) takes its place, so appends do not grow
            // a buffer from nothing under the mutex.
            std::mem::swap(&mut st.buf, &mut **taken);
            let start = st.buf_lsn;
            st.buf_lsn = st.lsn;
            (start, st.lsn)
        };
        log.failpoints.hit("log.write.taken");
        let r = log.write_taken(start, end, taken);
        taken.clear();
        if taken.capacity() > BUFFER_WRITE_THRESHOLD {
            **taken = Vec::new();
        }
        r
    }
}

impl Drop for WriteTurn<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The buffer may have been taken and not written: a later
            // write would leave a hole behind it.
            self.log
                .poisoned
                .set("a redo log write was abandoned by a panic");
        }
        let log = self.log;
        drop(self.taken.take());
        #[allow(unsafe_code)]
        // SAFETY: the key is the address of this log's `written`, which
        // only `park_while_writing` parks on.
        unsafe {
            parking_lot_core::unpark_all(
                &log.written as *const _ as usize,
                parking_lot_core::DEFAULT_UNPARK_TOKEN,
            );
        }
    }
}

/// The round this thread leads; ending it, however that happens, wakes the
/// waiters (module doc).
struct Round<'a> {
    log: &'a Log,
    ended: bool,
}

impl Round<'_> {
    /// Gather the followers, write out everything appended, sync the files
    /// holding `[from, target)` and end the round.
    fn run(mut self, from: Lsn) -> Result<()> {
        let log = self.log;
        self.gather();
        log.failpoints.hit("log.round.lead");
        // Everything appended until now, not only what its own caller
        // needed: a thread that appended before this point but had not
        // written yet is covered too, instead of waiting for the next round.
        let r = log.write_out(log.lsn()).and_then(|()| log.poisoned.check());
        if let Err(e) = r {
            // Poisoned already (by the write-out, or by whoever poisoned the
            // log while this round gathered).
            self.end(None, None);
            return Err(e);
        }
        // Every byte below `written` now was written before the first
        // fdatasync below starts.
        let target = log.written.load(Ordering::Acquire);
        if target <= from {
            // Nothing written since the last round: the caller's LSN lies
            // beyond the end of the log.
            self.end(None, None);
            return Ok(());
        }
        let started = Instant::now();
        for f in files_between(from, target, log.area, log.files.len()) {
            let (dev, path) = &log.files[f];
            if let Err(e) = log.file_syncs[f].sync(&**dev) {
                let e = Error::io(path, "sync", e);
                // Poisoned before the waiters wake: none of them may take
                // the round's end for success.
                log.poisoned.set(format!("a redo log sync failed: {e}"));
                self.end(None, None);
                return Err(e);
            }
        }
        Metrics::add(&log.metrics.os_log_fsyncs, 1);
        self.end(Some(target), Some(started.elapsed()));
        Ok(())
    }

    /// Wait, within the window, until as many threads joined this round as
    /// the demand of the last one says will come (module doc).
    fn gather(&self) {
        let log = self.log;
        let mut st = log.sync.lock();
        let expect = st.demand.saturating_sub(1);
        let window = st.gather_window();
        if st.joined >= expect || window < MIN_GATHER {
            return;
        }
        let started = Instant::now();
        let deadline = started + window;
        st.gathering = true;
        st.expect = expect;
        while st.joined < expect && !log.poisoned.is_set() {
            if log.gathered.wait_until(&mut st, deadline).timed_out() {
                break;
            }
        }
        st.gathering = false;
        drop(st);
        Metrics::add(&log.metrics.log_sync_gathers, 1);
        Metrics::add(
            &log.metrics.log_sync_gather_us_total,
            started.elapsed().as_micros() as u64,
        );
    }

    /// End the round: raise `flushed` to `synced` if it succeeded, note its
    /// demand and fdatasync time, and wake every waiter.
    fn end(&mut self, synced: Option<Lsn>, took: Option<Duration>) {
        let log = self.log;
        let mut st = log.sync.lock();
        if let Some(target) = synced {
            // The target read before the fdatasyncs began, never `written`
            // now: bytes written while they ran are not covered.
            log.flushed.store(target, Ordering::Release);
            Metrics::set(&log.metrics.log_lsn_last_flush, target);
        }
        if let Some(took) = took {
            let us = took.as_micros() as u64;
            st.sync_us = if st.sync_us == 0 {
                us
            } else {
                (st.sync_us * 7 + us) / 8
            };
        }
        st.demand = 1 + st.joined;
        st.running = false;
        self.ended = true;
        log.round_ended.notify_all();
    }
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // Only a panic gets here (inside a device's sync, say): whether
            // the files were synced is unknown, so nothing may count as
            // durable.
            self.log
                .poisoned
                .set("a redo log sync round was abandoned by a panic");
            self.end(None, None);
        }
    }
}

/// The files holding LSNs in `[from, to)`, in LSN order, each once: LSN `l`
/// lives in file `(l / area) mod n` (the data areas are concatenated).
fn files_between(from: Lsn, to: Lsn, area: u64, n: usize) -> impl Iterator<Item = usize> {
    let n = n as u64;
    let (first, count) = if to > from {
        let first = from / area;
        (first, ((to - 1) / area - first + 1).min(n))
    } else {
        (0, 0)
    };
    (0..count).map(move |i| ((first + i) % n) as usize)
}

#[cfg(test)]
mod tests;
