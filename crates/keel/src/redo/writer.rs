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
//! `written` has been handed to the OS (its `pwrite` returned). Threads
//! queue on the mutex; whoever gets it writes everything appended so far,
//! so those behind it usually find their bytes written and return at once.
//!
//! *Waiting for `write`*: the waiter holds at most what its caller holds: a
//! committer its row locks, an appender nothing (it appended first), a page
//! cleaner the claims of its flush batch, the checkpointer the checkpoint
//! mutex. The holder needs none of these: it takes only the `state` mutex
//! for a moment, writes, and never syncs or waits for log space (the module
//! doc of `redo`). Its unlock wakes the next waiter. A failed write (or a
//! write-out that finds a reservation broken) poisons the log before the
//! mutex is released: the taken buffer exists nowhere else, so every later
//! writer must refuse rather than leave a hole.
//!
//! # Syncing: one round at a time
//!
//! A sync *round* makes the log durable up to its *target*: `written` read
//! when the round begins. Every byte below the target was written before
//! the round's first fdatasync started, so the round covers it; a byte
//! written while the round runs is never counted by it, whatever the OS
//! happened to do with it (the "covered by a sync that started after the
//! write completed" rule of `space`). Rounds run one at a time, each from
//! the previous round's target (`flushed`) to its own, and fdatasync only
//! the files that hold LSNs in `[flushed, target)`: an LSN's file is a
//! function of the LSN, and everything below `flushed` is durable already.
//! A file written during a round receives bytes at or above that round's
//! target, so the next round syncs it again.
//!
//! A thread that needs LSN `l` durable writes it first, then, under the
//! `sync` mutex:
//! - `flushed ≥ l`: it is done (group commit: a round started after its
//!   write covered it);
//! - no round is running: it runs the next one itself, marking it running
//!   and then releasing the mutex for the fdatasyncs;
//! - a round is running: it waits on `round_ended`. If that round covered
//!   `l` it is done when it ends; if not (`l` was written after the round
//!   began), one of the threads woken starts the next round, whose target
//!   includes `l`. So a thread waits for the round in progress and at most
//!   one more.
//!
//! *Waiting for a round*: the waiter holds what its caller holds (row
//! locks, a flush batch's claims, the checkpoint mutex; never the `write`
//! or `state` mutex), and the `sync` mutex only while it looks at the
//! state (the condvar releases it). The round's thread needs none of them:
//! it holds no lock of the log while it syncs, and takes the `sync` mutex
//! only to publish the round's end. That thread wakes every waiter when the
//! round ends, whether it succeeded, failed or panicked (a guard ends an
//! abandoned round), so the wait lasts as long as the fdatasyncs in
//! progress and one more round; there is no timeout, because a commit at
//! `flush_log_at_trx_commit` 1 may not return before its bytes are durable,
//! and a device that never answers an fdatasync holds the syncing thread
//! too.
//!
//! *What a failure leaves*: a failed fdatasync poisons the log before the
//! round ends, and `flushed` stays where it was. Waiters wake, find their
//! LSN not durable and the log poisoned, and return the error: no thread
//! gets `Ok` for an LSN that round was meant to cover. The kernel may have
//! dropped the failed pages (USENIX ATC '20), so nothing is retried; a
//! restart recovers what the earlier rounds made durable.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::format::LOG_FILE_HDR;
use super::Log;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::Lsn;

/// The sync rounds' state, under `Log::sync`.
#[derive(Default)]
pub(super) struct SyncState {
    /// The target of the round in progress, if one is.
    running: Option<Lsn>,
    /// Threads waiting for the round in progress to end.
    waiting: usize,
}

impl Log {
    /// Make the log reach at least `lsn`: written to the OS, and durable if
    /// `sync` (see the module doc). A write never waits for a sync in
    /// progress; a sync waits only for rounds that started after its bytes
    /// were written, or for the one in progress to end.
    pub fn write_up_to(&self, lsn: Lsn, sync: bool) -> Result<()> {
        self.write_out(lsn)?;
        if sync {
            self.sync_up_to(lsn)?;
        }
        Ok(())
    }

    /// Write the buffer to the OS if `lsn` is not written yet.
    fn write_out(&self, lsn: Lsn) -> Result<()> {
        if self.written.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        let _w = self.write.lock();
        if self.written.load(Ordering::Acquire) >= lsn {
            return Ok(());
        }
        self.poisoned.check()?;
        let (data, start, end) = {
            let mut st = self.state.lock();
            let data = std::mem::take(&mut st.buf);
            let start = st.buf_lsn;
            st.buf_lsn = st.lsn;
            (data, start, st.lsn)
        };
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
        if let Err(e) = self.write_at_lsn(start, &data) {
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
    /// round that began after `lsn` was written has ended (module doc).
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
    /// or run the next one.
    fn wait_or_run_round(&self, lsn: Lsn) -> Result<()> {
        let mut st = self.sync.lock();
        while st.running.is_some() {
            if self.flushed_lsn() >= lsn {
                return Ok(());
            }
            self.poisoned.check()?;
            st.waiting += 1;
            self.round_ended.wait(&mut st);
            st.waiting -= 1;
        }
        let from = self.flushed_lsn();
        if from >= lsn {
            return Ok(());
        }
        self.poisoned.check()?;
        let target = self.written.load(Ordering::Acquire);
        if target <= from {
            // `lsn` lies beyond the end of the log: nothing more to sync.
            return Ok(());
        }
        st.running = Some(target);
        drop(st);
        let round = Round {
            log: self,
            target,
            ended: false,
        };
        round.run(from)
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

/// The round this thread runs; ending it, however that happens, wakes the
/// waiters (module doc).
struct Round<'a> {
    log: &'a Log,
    target: Lsn,
    ended: bool,
}

impl Round<'_> {
    /// Sync the files holding `[from, target)`, then end the round.
    fn run(mut self, from: Lsn) -> Result<()> {
        let log = self.log;
        for f in files_between(from, self.target, log.area, log.files.len()) {
            let (dev, path) = &log.files[f];
            if let Err(e) = dev.sync() {
                let e = Error::io(path, "sync", e);
                // Poisoned before the waiters wake: none of them may take
                // the round's end for success.
                log.poisoned.set(format!("a redo log sync failed: {e}"));
                self.end(false);
                return Err(e);
            }
        }
        Metrics::add(&log.metrics.os_log_fsyncs, 1);
        self.end(true);
        Ok(())
    }

    fn end(&mut self, synced: bool) {
        let log = self.log;
        let mut st = log.sync.lock();
        if synced {
            // The target read when the round began, never `written` now:
            // bytes written while the fdatasyncs ran are not covered.
            log.flushed.store(self.target, Ordering::Release);
            Metrics::set(&log.metrics.log_lsn_last_flush, self.target);
        }
        st.running = None;
        self.ended = true;
        log.round_ended.notify_all();
    }
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // Only a panic inside a device's sync gets here: whether the
            // files were synced is unknown, so nothing may count as durable.
            self.log
                .poisoned
                .set("a redo log sync round was abandoned by a panic");
            self.end(false);
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
