//! Write-back's state and its entry points: what the page cleaners, a
//! thread short of frames, a checkpoint and shutdown ask for. The batch
//! writer itself is in [`super::batch`].
//!
//! # Waking the cleaners
//! `wakeup` is a counter under a mutex with a condvar. A thread short of
//! frames, or a writer stopped in the free check, bumps it and notifies;
//! the coordinator reads it at the start of a round and sleeps only if it
//! has not moved since, so a wake-up during a round is never lost. Nobody
//! holds a page latch or the log mutex while bumping it.
//!
//! # Failures
//! A failed cleaner round is counted with its message; writers waiting for
//! the cleaners (in the free check) compare the count with what they saw
//! when they began to wait and give up with that message instead of
//! waiting for their timeout (as a passing `LogOverloaded` when the
//! failure may pass: a full disk, or page writes held for retry).
//!
//! Page writes that failed after their doublewrite copy are held and
//! retried by whoever flushes next (`batch::held`); a sharp checkpoint
//! ([`WriteBack::flush_below`]) retries them first and fails with their
//! error rather than wait for pages that cannot be written.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::batch::{FlushKind, HeldWrites};
use super::doublewrite::Doublewrite;
use super::neighbors::NeighborMode;
use super::policy::Decision;
use crate::buffer::{BufferPool, FrameWriter};
use crate::config::FlushNeighbors;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::space::Tablespace;

/// The write-ahead rule's hook: before a page whose newest change ended at
/// `lsn` is written, the redo log must be durable up to `lsn`.
pub trait Wal: Send + Sync {
    /// Make the log durable up to `lsn`.
    fn flush_up_to(&self, lsn: Lsn) -> Result<()>;
    /// The end of the durable log: the batch writer refuses to write a page
    /// whose page LSN lies beyond it.
    fn flushed_lsn(&self) -> Lsn;
}

/// How batches are written, from the options.
#[derive(Clone, Copy, Debug)]
pub struct WriteConfig {
    /// Threads that write one batch in parallel (one stream per data file
    /// at most).
    pub write_io_threads: usize,
    /// Neighbor flushing: 0 = none, 1 = the contiguous dirty run around a
    /// written page, 2 = every dirty page of its area, `auto` = as the
    /// policy chooses (single-page flushes never write neighbors).
    pub flush_neighbors: FlushNeighbors,
}

/// Write-back: the data files' writer side, the doublewrite areas, the
/// write-ahead hook, and the state the page cleaners share with writers.
pub struct WriteBack {
    pub(crate) space: Arc<Tablespace>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) wal: Arc<dyn Wal>,
    /// Doublewrite areas, when `doublewrite` is on.
    pub(crate) dblwr: Option<Doublewrite>,
    pub(crate) cfg: WriteConfig,
    /// Bumped and signalled when a thread wants free frames or room in the
    /// log (module doc).
    pub(crate) wakeup: (Mutex<u64>, Condvar),
    /// The policy's last decision, for the status report.
    pub(crate) last_decision: Mutex<Decision>,
    /// Page writes a batch keeps in flight at once, as the policy last
    /// asked (0: `write_io_threads`, one stream per data file at most).
    io_depth: AtomicUsize,
    /// A depth that overrides the policy's (0: none); see
    /// [`WriteBack::pin_io_depth`].
    pinned_depth: AtomicUsize,
    /// Wake the cleaners whenever a thread finds the free list empty (the
    /// policy keeps free frames ahead of demand; `classic` does not).
    eager_lru: std::sync::atomic::AtomicBool,
    /// A batch's neighbors count against its size (see
    /// `FlushTargets::neighbors_in_batch_size`).
    pub(crate) neighbors_in_batch_size: std::sync::atomic::AtomicBool,
    /// Microseconds a flush-list batch's first claim may wait for a latch
    /// (see `FlushTargets::oldest_latch_wait`).
    oldest_latch_wait_us: AtomicU64,
    /// `flush_neighbors` now, as [`FlushNeighbors::code`] (starts as
    /// `cfg.flush_neighbors`; changed by `Db::set_option`, read once per
    /// batch).
    flush_neighbors: std::sync::atomic::AtomicU8,
    /// The mode the policy chose for `auto`, as `NeighborMode::as_option`
    /// (set by the cleaners' coordinator every round, read once per batch).
    chosen_neighbors: std::sync::atomic::AtomicU8,
    /// Most clean pages a batch writes to fill one gap between two dirty
    /// runs (0: none; see `FlushTargets::gap_pages`).
    gap_pages: std::sync::atomic::AtomicU32,
    /// Cleaner failures so far, and the last one's message and whether it
    /// may pass ([`Error::may_pass`]).
    failures: (AtomicU64, Mutex<(String, bool)>),
    /// Chunks whose in-place writes failed, held for retry (see
    /// `batch::held`).
    pub(crate) held: HeldWrites,
}

impl WriteBack {
    /// Write-back for `space` with the given log hook and doublewrite areas.
    pub(crate) fn new(
        space: Arc<Tablespace>,
        metrics: Arc<Metrics>,
        wal: Arc<dyn Wal>,
        dblwr: Option<Doublewrite>,
        cfg: WriteConfig,
    ) -> WriteBack {
        WriteBack {
            space,
            metrics,
            wal,
            dblwr,
            cfg,
            wakeup: (Mutex::new(0), Condvar::new()),
            last_decision: Mutex::new(Decision::default()),
            io_depth: AtomicUsize::new(0),
            pinned_depth: AtomicUsize::new(0),
            eager_lru: std::sync::atomic::AtomicBool::new(false),
            neighbors_in_batch_size: std::sync::atomic::AtomicBool::new(false),
            oldest_latch_wait_us: AtomicU64::new(0),
            flush_neighbors: std::sync::atomic::AtomicU8::new(cfg.flush_neighbors.code()),
            chosen_neighbors: std::sync::atomic::AtomicU8::new(0),
            gap_pages: std::sync::atomic::AtomicU32::new(0),
            failures: Default::default(),
            held: HeldWrites::default(),
        }
    }

    /// Keep up to `depth` page writes in flight per batch (`None`: the
    /// `write_io_threads` option, one stream per data file at most).
    pub(crate) fn set_io_depth(&self, depth: Option<usize>) {
        self.io_depth.store(depth.unwrap_or(0), Ordering::Relaxed);
    }

    /// Keep exactly `depth` page writes in flight per batch whatever the
    /// policy sets, until called with `None` (measuring the flusher at a
    /// given queue depth: `Engine::flush_at_depth`).
    pub(crate) fn pin_io_depth(&self, depth: Option<usize>) {
        self.pinned_depth
            .store(depth.map_or(0, |d| d.max(1)), Ordering::Relaxed);
    }

    /// Whether a batch's neighbors count against its size.
    pub(crate) fn set_neighbors_in_batch_size(&self, on: bool) {
        self.neighbors_in_batch_size.store(on, Ordering::Relaxed);
    }

    /// Most clean pages a batch writes to fill one gap between two dirty
    /// runs (`FlushTargets::gap_pages`), for batches started from now on.
    pub(crate) fn set_gap_pages(&self, pages: u32) {
        self.gap_pages.store(pages, Ordering::Relaxed);
    }

    /// See [`WriteBack::set_gap_pages`].
    pub(crate) fn gap_pages(&self) -> u32 {
        self.gap_pages.load(Ordering::Relaxed)
    }

    /// How long a flush-list batch's first claim may wait for a latch.
    pub(crate) fn set_oldest_latch_wait(&self, wait: Duration) {
        self.oldest_latch_wait_us
            .store(wait.as_micros() as u64, Ordering::Relaxed);
    }

    /// See [`WriteBack::set_oldest_latch_wait`].
    pub(crate) fn oldest_latch_wait(&self) -> Duration {
        Duration::from_micros(self.oldest_latch_wait_us.load(Ordering::Relaxed))
    }

    /// Whether an empty free list wakes the cleaners at once.
    pub(crate) fn set_eager_lru(&self, eager: bool) {
        self.eager_lru.store(eager, Ordering::Relaxed);
    }

    /// Write streams for a batch over `runs` runs, and whether they may
    /// share a file (a policy's queue depth) or go one file each.
    pub(crate) fn streams(&self) -> (usize, bool) {
        let pinned = self.pinned_depth.load(Ordering::Relaxed);
        if pinned > 0 {
            return (pinned, true);
        }
        match self.io_depth.load(Ordering::Relaxed) {
            0 => (self.cfg.write_io_threads.min(self.space.n_files()), false),
            d => (d, true),
        }
    }

    /// The `flush_neighbors` option now: batches started from here on
    /// follow `mode`, batches under way finish as they began.
    pub(crate) fn set_flush_neighbors(&self, mode: FlushNeighbors) {
        self.flush_neighbors.store(mode.code(), Ordering::Relaxed);
    }

    /// The mode the policy chose for `flush_neighbors = auto`
    /// (`FlushTargets::neighbors`).
    pub(crate) fn set_chosen_neighbors(&self, mode: NeighborMode) {
        self.chosen_neighbors
            .store(mode.as_option(), Ordering::Relaxed);
    }

    /// The neighbor mode batches follow now: the option's, or under `auto`
    /// the policy's choice.
    pub(crate) fn flush_neighbors(&self) -> NeighborMode {
        match FlushNeighbors::from_code(self.flush_neighbors.load(Ordering::Relaxed)) {
            FlushNeighbors::Fixed(m) => m,
            FlushNeighbors::Auto => {
                NeighborMode::from_option(self.chosen_neighbors.load(Ordering::Relaxed))
            }
        }
    }

    /// Wake the page cleaners.
    pub fn wake_cleaners(&self) {
        let (m, c) = &self.wakeup;
        *m.lock() += 1;
        c.notify_all();
    }

    /// Record that a page cleaner failed to flush or checkpoint (`what`
    /// says which) with `err`.
    pub(crate) fn note_failure(&self, what: &str, err: &Error) {
        *self.failures.1.lock() = (format!("{what} failed: {err}"), err.may_pass());
        self.failures.0.fetch_add(1, Ordering::AcqRel);
    }

    /// Cleaner failures so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.0.load(Ordering::Acquire)
    }

    /// The last cleaner failure's message, and whether it may pass (a full
    /// disk, which space freed elsewhere can mend, or page writes held for
    /// retry, which end when the device takes writes again).
    pub(crate) fn last_failure(&self) -> (String, bool) {
        self.failures.1.lock().clone()
    }

    /// LRU batch flush of one instance: scan up to `depth` frames from the
    /// tail, move clean unfixed ones to the free list and write the dirty
    /// ones (at most `write_max`) until `want_free` frames are free, then
    /// free every page written (unless fixed or changed meanwhile), as
    /// InnoDB's LRU flush evicts what it writes. Returns (pages written,
    /// pages evicted).
    ///
    /// The dirty pages met before the clean ones reached `want_free` are
    /// written all the same; freed only up to `want_free`, as they were
    /// until 2026-11-29, the rest stayed at the tail, clean, where they
    /// were changed again before they left and written a second time. On
    /// the embedded OLTP shape with a 24 MiB pool that was 2.26 pages a
    /// transaction against 2.03 with every written page freed, for as
    /// many page reads (4.2 a transaction; `lru-scan-depth` and
    /// `disaster-55` unchanged, one run each).
    pub fn lru_flush(
        &self,
        pool: &BufferPool,
        inst: usize,
        depth: usize,
        want_free: usize,
        write_max: usize,
    ) -> Result<(usize, usize)> {
        let (mut evicted, dirty) = pool.lru_free_clean(inst, depth, want_free, write_max);
        let written = self.flush_frames(pool, inst, &dirty, FlushKind::Lru)?;
        if written > 0 {
            evicted += pool.free_if_clean(inst, &dirty);
        }
        Metrics::add(
            &self.metrics.buffer_LRU_batch_evict_total_pages,
            evicted as u64,
        );
        Ok((written, evicted))
    }

    /// Write up to `max` pages from the oldest end of instance `inst`'s
    /// flush list whose oldest modification is below `lsn_limit`.
    pub fn flush_list_batch(
        &self,
        pool: &BufferPool,
        inst: usize,
        max: usize,
        lsn_limit: Lsn,
        kind: FlushKind,
    ) -> Result<usize> {
        self.flush_list_batch_counted(pool, inst, max, lsn_limit, kind)
            .map(|(pages, _)| pages)
    }

    /// As [`flush_list_batch`](WriteBack::flush_list_batch), and also how
    /// many of the pages written were neighbors: `(pages, neighbors)`.
    pub fn flush_list_batch_counted(
        &self,
        pool: &BufferPool,
        inst: usize,
        max: usize,
        lsn_limit: Lsn,
        kind: FlushKind,
    ) -> Result<(usize, usize)> {
        let fids = pool.flush_list_oldest(inst, max, lsn_limit);
        self.flush_frames_counted(pool, inst, &fids, kind)
    }

    /// Write every page whose oldest change is below `lsn_limit`, then sync
    /// the data files: a sharp checkpoint up to an LSN taken by the caller
    /// (shutdown passes the end of the log). Pages changed after the call
    /// began are not waited for, so concurrent writers cannot keep it
    /// going forever; pages latched exclusively by a user thread are
    /// retried (for at most about 100 s before giving up with an error).
    /// Page writes held for retry are retried at once, every round, and
    /// one that fails again ends the call with its error: such a page
    /// cannot be written until the device takes writes again.
    pub fn flush_below(&self, pool: &BufferPool, lsn_limit: Lsn) -> Result<()> {
        const ROUNDS: usize = 100_000;
        let mut idle_rounds = 0;
        for _ in 0..ROUNDS {
            self.retry_held(pool, true)?;
            let mut left = false;
            let mut wrote = 0;
            for i in 0..pool.n_instances() {
                wrote += self.flush_list_batch(pool, i, 4096, lsn_limit, FlushKind::All)?;
                left |= !pool.flush_list_oldest(i, 1, lsn_limit).is_empty();
            }
            if !left {
                return self.space.sync();
            }
            if wrote > 0 {
                idle_rounds = 0;
                continue;
            }
            // What is left is held by user threads for the moment: let
            // them finish (briefly at first, then a millisecond a round).
            idle_rounds += 1;
            std::thread::sleep(std::time::Duration::from_micros(if idle_rounds < 100 {
                10
            } else {
                1000
            }));
        }
        Err(Error::LogOverloaded(format!(
            "pages changed before LSN {lsn_limit} stayed latched by other threads for {ROUNDS} flush rounds"
        )))
    }
}

impl FrameWriter for WriteBack {
    fn write_victim(&self, pool: &BufferPool, inst: usize, fid: u32) -> Result<bool> {
        if self.flush_frames(pool, inst, &[fid], FlushKind::Single)? > 0 {
            return Ok(true);
        }
        // Not written because its write is held for retry: it will not be
        // clean soon, so the thread hears why now (see `batch::held`).
        match self.held_error(inst, fid) {
            Some(e) => Err(e),
            None => Ok(false),
        }
    }

    fn frames_wanted(&self) {
        self.wake_cleaners();
    }

    fn free_list_empty(&self) {
        if self.eager_lru.load(Ordering::Relaxed) {
            self.wake_cleaners();
        }
    }
}
