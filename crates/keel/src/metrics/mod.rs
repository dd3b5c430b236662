//! The metrics registry: named atomic counters and gauges, readable as
//! name → value. Names are InnoDB's where the concept is InnoDB's.
//!
//! Counters only grow; gauges are levels kept up to date by the code that
//! changes them. Both are plain `AtomicU64`s so updating one costs one
//! relaxed atomic add on the hot path, but for the counters of every page
//! access and every mini-transaction ([`Striped`], below) and for gauges
//! that are read where their value lives when the registry is read
//! ([`ReadThrough`]: the redo log's end and checkpoint age).
//!
//! # Counters of every page access are striped
//! An atomic add is a write to the counter's cache line: one counter that
//! every thread adds to on every page access moves its line from core to
//! core on nearly every add on a machine with many cores, and the threads
//! queue for that line whatever else they share. Such a counter is a
//! [`Striped`] one: [`STRIPES`] cells on cache lines of their own, each
//! thread adding to the cell it was given when it first counted, and a read
//! summing them (InnoDB's `ib_counter_t`, for `buffer_pool_read_requests`
//! among others, does the same with slots by CPU). So is `mtr_commits`,
//! added to by every mini-transaction (ten or so a transaction), and a
//! counter that is usually added nothing (pages allocated or freed by a
//! mini-transaction) is not added to then. A read is not a
//! snapshot: adds made while it sums may be in it or not, as for any
//! metric read while the engine runs; each is in every read that starts
//! after it returned.
//!
//! # Commit latency and a benchmark's latency
//!
//! [`Metrics::trx_commit_latency`] is the engine's side of a commit: every
//! wait a committing caller sees, the `steady` writer pause and the
//! `classic` free-check stop alike, so the two policies' percentiles
//! compare fairly. `keel bench oltp` measures the caller's side: wall
//! time around each whole transaction, from its start (or, with
//! `--rate`, from the moment it was due, so a backlog counts) to the
//! return of its commit, retries included. For the same transaction the
//! benchmark's figure is the larger: it adds the reads, the row-lock
//! waits of a `Txn`'s statements, the client's own work and any queueing
//! before the start. A benchmark's latency well above the commit
//! latency points there, not at flushing.

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Take a lock: `fast` (a `try_lock`) first, and if the lock was held by
/// another thread, `slow` as a wait event counted in `waits`, its
/// nanoseconds added to `waited_ns` (`try_lock` first costs what `lock`'s
/// own fast path costs).
fn counted<G>(
    fast: impl FnOnce() -> Option<G>,
    slow: impl FnOnce() -> G,
    waits: &AtomicU64,
    waited_ns: &AtomicU64,
) -> G {
    match fast() {
        Some(g) => g,
        None => timed_wait(waits, waited_ns, slow),
    }
}

/// Lock `m`, counting a wait in `waits` and `waited_ns` ([`counted`]).
pub(crate) fn lock_counted<'a, T>(
    m: &'a parking_lot::Mutex<T>,
    waits: &AtomicU64,
    waited_ns: &AtomicU64,
) -> parking_lot::MutexGuard<'a, T> {
    counted(|| m.try_lock(), || m.lock(), waits, waited_ns)
}

/// [`lock_counted`] for the shared side of a `parking_lot::RwLock`.
pub(crate) fn read_counted<'a, T>(
    l: &'a parking_lot::RwLock<T>,
    waits: &AtomicU64,
    waited_ns: &AtomicU64,
) -> parking_lot::RwLockReadGuard<'a, T> {
    counted(|| l.try_read(), || l.read(), waits, waited_ns)
}

/// [`lock_counted`] for the exclusive side of a `parking_lot::RwLock`.
pub(crate) fn write_counted<'a, T>(
    l: &'a parking_lot::RwLock<T>,
    waits: &AtomicU64,
    waited_ns: &AtomicU64,
) -> parking_lot::RwLockWriteGuard<'a, T> {
    counted(|| l.try_write(), || l.write(), waits, waited_ns)
}

/// Run `wait`, the slow path of a latch or mutex already found held,
/// as one wait event: counted in `waits`, its nanoseconds added to
/// `waited_ns` ([`WaitTimer`]).
pub(crate) fn timed_wait<T>(
    waits: &AtomicU64,
    waited_ns: &AtomicU64,
    wait: impl FnOnce() -> T,
) -> T {
    let timer = WaitTimer::start(waits);
    let got = wait();
    timer.stop(waited_ns);
    got
}

/// A wait event in progress: counted when it starts, timed until it
/// stops. Only the slow path of a latch or mutex takes one (the clock is
/// read twice, tens of nanoseconds, against a wait that may park the
/// thread), as performance_schema times its wait events.
pub(crate) struct WaitTimer(std::time::Instant);

impl WaitTimer {
    /// Start a wait: the clock is read before the wait is counted, so
    /// whoever sees the count sees a wait already being timed.
    pub(crate) fn start(waits: &AtomicU64) -> WaitTimer {
        let t = WaitTimer(std::time::Instant::now());
        waits.fetch_add(1, Ordering::Relaxed);
        t
    }

    /// End the wait, adding its nanoseconds to `waited_ns`.
    pub(crate) fn stop(self, waited_ns: &AtomicU64) {
        let ns = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        waited_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Cells of a [`Striped`] counter (a power of two).
pub(crate) const STRIPES: usize = 16;

/// A value on cache lines of its own (128 bytes: x86 prefetches lines in
/// pairs), so that writing it never moves a neighbour's line.
#[repr(align(128))]
#[derive(Default, Debug)]
pub(crate) struct CacheAligned<T>(pub T);

impl<T> std::ops::Deref for CacheAligned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A counter added to by every thread on every page access: one cell per
/// stripe, read as their sum (module doc).
#[derive(Default, Debug)]
pub struct Striped([CacheAligned<AtomicU64>; STRIPES]);

impl Striped {
    /// Add `n` in this thread's cell.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0[stripe()].fetch_add(n, Ordering::Relaxed);
    }

    /// The sum of the cells. `Ordering` as for an atomic's `load`, so the
    /// registry reads every metric alike.
    pub fn load(&self, order: Ordering) -> u64 {
        self.0
            .iter()
            .fold(0u64, |acc, c| acc.wrapping_add(c.load(order)))
    }
}

/// A gauge whose value lives with the part of the engine that moves it,
/// read from there when the registry is read instead of set at every move.
/// The redo log's end moves with every append (ten or so a transaction,
/// from every thread): setting a gauge there wrote a cache line every
/// thread writes, and, set after the append's mutex was released, could
/// leave an older end last. Reads as 0 until bound.
#[derive(Default)]
pub struct ReadThrough(parking_lot::RwLock<Option<ReadFn>>);

type ReadFn = Box<dyn Fn() -> u64 + Send + Sync>;

impl ReadThrough {
    /// The value, read now. `Ordering` as for an atomic's `load`, so the
    /// registry reads every metric alike (the source picks its own).
    pub fn load(&self, _order: Ordering) -> u64 {
        self.0.read().as_ref().map_or(0, |f| f())
    }

    /// Read the gauge from `f` from now on (the latest binding wins).
    pub(crate) fn bind(&self, f: impl Fn() -> u64 + Send + Sync + 'static) {
        *self.0.write() = Some(Box::new(f));
    }
}

impl std::fmt::Debug for ReadThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.load(Ordering::Relaxed))
    }
}

/// This thread's stripe: given in turn as threads first count, so that up
/// to [`STRIPES`] threads never share a cell.
pub(crate) fn stripe() -> usize {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) & (STRIPES - 1);
    }
    // A thread tearing down its locals still counts, in the first cell.
    STRIPE.try_with(|s| *s).unwrap_or(0)
}

/// A registry field's type: an `AtomicU64` unless the field names another.
macro_rules! metric_ty {
    () => {
        AtomicU64
    };
    ($t:ty) => {
        $t
    };
}

macro_rules! registry {
    ($( $(#[doc = $doc:literal])* $name:ident $(: $ty:ty)? ),* $(,)?) => {
        /// Every counter and gauge of one engine, and the commit latency
        /// histogram.
        #[derive(Default, Debug)]
        pub struct Metrics {
            $( $(#[doc = $doc])* pub $name: metric_ty!($($ty)?), )*
            /// Commit latency: for each transaction that committed
            /// writes, every wait its caller saw on the way to the
            /// commit, whichever flushing policy imposed it. That is
            /// the call that commits, from entry to return — for a
            /// `Txn`, `Txn::commit`; for `Table::put`/`Table::delete`,
            /// the whole call, its row-lock wait included — with the
            /// free-check wait for log space (where `classic` stops
            /// writers), the log-space waits of its operations, applying
            /// and the wait until the log is as durable as
            /// `flush_log_at_trx_commit` asks; plus, for a `Txn`, the
            /// writer pause (`steady`) it took at its first write
            /// statement, which is where a transaction is paced (before
            /// its first row lock, holding none) and not at commit. Not
            /// in it: a `Txn`'s row-lock waits and reads, the caller's
            /// own time between statements, and commits that failed.
            /// See the module doc for how it relates to a benchmark's
            /// transaction latency.
            pub trx_commit_latency: Histogram,
        }

        impl Metrics {
            /// Every metric's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Every metric's description (its doc comment), in the order
            /// of [`Metrics::NAMES`]. A gauge's starts with `Gauge`; every
            /// other metric is a counter.
            pub const HELP: &'static [&'static str] = &[$(concat!($($doc),*)),*];

            /// Every metric as name → current value.
            pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
                let mut m = BTreeMap::new();
                $( m.insert(stringify!($name), self.$name.load(Ordering::Relaxed)); )*
                m
            }

            /// One metric by name.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $( stringify!($name) => Some(self.$name.load(Ordering::Relaxed)), )*
                    _ => None,
                }
            }
        }
    };
}

registry! {
    /// Gauge: frames in the buffer pool.
    buffer_pool_pages_total,
    /// Gauge: frames holding a page.
    buffer_pool_pages_data,
    /// Gauge: frames holding a page with unwritten changes.
    buffer_pool_pages_dirty,
    /// Gauge: frames on the free lists.
    buffer_pool_pages_free,
    /// Page reads from the data files into the pool (misses).
    buffer_pool_reads,
    /// Frames taken for a page (a read or a new page): the allocation rate
    /// LRU flushing must keep up with.
    buffer_pool_frames_taken,
    /// Page requests served by the pool (hits and misses).
    buffer_pool_read_requests: Striped,
    /// Pages written to the data files, by any flush.
    buffer_pages_written,
    /// Pages written by LRU batch flushing (page cleaners).
    buffer_LRU_batch_flush_total_pages,
    /// Pages evicted (clean) by LRU batch flushing.
    buffer_LRU_batch_evict_total_pages,
    /// Pages written by flush-list flushing when no adaptive flushing was
    /// due: idle flushing, `max_dirty_pages_pct`, shutdown.
    buffer_flush_background_total_pages,
    /// Pages written by adaptive (checkpoint-age driven) flush-list flushing.
    buffer_flush_adaptive_total_pages,
    /// Extra pages written because they neighbored a flushed page.
    buffer_flush_neighbor_total_pages,
    /// Clean pages written to fill a short gap between two runs of dirty
    /// pages, so that one write carries both (not in
    /// `buffer_pages_written`: they retire no change).
    buffer_flush_gap_pages,
    /// Dirty pages a flusher passed over because a user thread held them
    /// latched exclusively (claims never wait for a latch): a hot oldest
    /// page passed over keeps the checkpoint where it is.
    buffer_flush_latched_skips,
    /// Gauge: pages the last cleaner round asked for (flush lists, all instances).
    buffer_flush_n_to_flush_requested,
    /// Gauge: of those, pages asked for to keep up with the checkpoint age.
    buffer_flush_n_to_flush_by_age,
    /// Gauge: averaged flush-list page write rate (pages/s) the policy uses.
    buffer_flush_avg_page_rate,
    /// Gauge: averaged redo generation rate (bytes/s) the policy uses.
    buffer_flush_lsn_avg_rate,
    /// Gauge: the classic policy's percentage of io_capacity for dirtiness.
    buffer_flush_pct_for_dirty,
    /// Gauge: the classic policy's percentage of io_capacity for age.
    buffer_flush_pct_for_lsn,
    /// Gauge: flushing mode of the last round: 0 idle, 1 adaptive, 2 async, 3 sync.
    buffer_flush_mode,
    /// Gauge: microseconds the last cleaner round took.
    buffer_flush_round_us,
    /// Writer pauses imposed by the flushing policy, in microseconds (Keel's
    /// own; the classic policy never pauses writers).
    buffer_flush_throttle_delay_us_total,
    /// Times a user thread found no free frame and started a single-page flush scan.
    buffer_LRU_single_flush_num_scan,
    /// Pages written by user threads' single-page flushes.
    buffer_LRU_single_flush_total_pages,
    /// Times a user thread had to wait because every frame was fixed.
    buffer_LRU_get_free_waits,
    /// Clean pages evicted by user threads to get a free frame.
    buffer_LRU_search_evict_total_pages,
    /// Read system calls on the data files.
    os_data_reads,
    /// Write system calls on the data files.
    os_data_writes,
    /// Syncs of the data files.
    os_data_fsyncs,
    /// Microseconds data-file writes took, summed over every write call.
    os_data_write_us_total,
    /// Microseconds during which at least one data-file write was in
    /// flight: the device's busy time, over which its speed is measured.
    os_data_write_busy_us_total,
    /// Bytes read from the data files.
    os_data_read_bytes,
    /// Bytes written to the data files.
    os_data_written_bytes,
    /// Pages written to the data files as compressed images
    /// (`page_compression`; MariaDB's `Innodb_num_pages_page_compressed`).
    num_pages_page_compressed,
    /// Compressed page images read and decoded
    /// (`Innodb_num_pages_page_decompressed`).
    num_pages_page_decompressed,
    /// Bytes of page writes that compression saved: a page's size less its
    /// stored image's, summed (`Innodb_page_compression_saved`).
    page_compression_saved,
    /// Page-cleaner rounds run.
    buffer_flush_cleaner_rounds,
    /// Page-cleaner panics caught (each cleaner restarted; see
    /// `flush::cleaner`, "A cleaner that panics").
    buffer_flush_cleaner_panics,
    /// Batches written by page cleaners and shutdown.
    buffer_flush_batches,
    /// Gauge: pages LRU batches have claimed for writing and not yet
    /// written or given back (InnoDB's "Pending writes: LRU").
    buffer_pending_writes_lru,
    /// Gauge: the same for flush-list batches: adaptive, background, sync,
    /// checkpoint and shutdown flushing ("Pending writes: flush list").
    buffer_pending_writes_flush_list,
    /// Gauge: the same for single pages written by user threads to free a
    /// frame ("Pending writes: single page").
    buffer_pending_writes_single_page,
    /// Gauge: pages whose in-place write failed after their doublewrite
    /// copy was made, held (dirty, their copies kept) until a retry writes
    /// them: non-zero while the data device refuses writes.
    buffer_flush_held_pages,
    /// Retries of held page writes (each a chunk's in-place writes and a
    /// data-file sync), failed or not.
    buffer_flush_held_retries,
    /// Gauge: current LSN (end of the newest mini-transaction).
    log_lsn_current: ReadThrough,
    /// Gauge: end of the log that is written and synced.
    log_lsn_last_flush,
    /// Gauge: LSN of the last checkpoint.
    log_lsn_last_checkpoint,
    /// Gauge: current LSN minus last checkpoint LSN.
    log_lsn_checkpoint_age: ReadThrough,
    /// Gauge: checkpoint age above which the classic cleaner flushes asynchronously.
    log_max_modified_age_async,
    /// Gauge: checkpoint age above which flushing is synchronous.
    log_max_modified_age_sync,
    /// Gauge: checkpoint age (plus reserved redo) past which writers stop
    /// in the free check.
    log_free_check_limit,
    /// Gauge: usable bytes of the circular redo log.
    log_capacity,
    /// Redo log write calls.
    log_writes,
    /// Bytes written to the redo log.
    log_bytes_written,
    /// Bytes of padding written to the log (Keel writes none).
    log_padded,
    /// Redo log sync rounds: each fdatasyncs only the log files written
    /// since the previous round, and makes durable everything written
    /// before it began (a checkpoint's own sync of its slot is not counted).
    os_log_fsyncs,
    /// Times a thread that needed the log durable (a commit at
    /// `flush_log_at_trx_commit` 1, a page write, a checkpoint) did not find
    /// it so and waited: ran a sync round itself or waited for one.
    log_sync_waits,
    /// Microseconds those threads spent waiting (or syncing).
    log_sync_wait_us_total,
    /// Sync rounds whose leader waited for the threads it expected to
    /// join before writing out and syncing (group commit's gathering).
    log_sync_gathers,
    /// Microseconds those leaders spent waiting for them.
    log_sync_gather_us_total,
    /// Checkpoints written.
    log_checkpoints,
    /// Of those, checkpoints whose slot a redo sync round made durable
    /// (the end of the log was in the slot's file, file 0): no sync of
    /// their own.
    log_checkpoints_in_round,
    /// Times the records of commits in flight were copied to the end of the
    /// log so the checkpoint could pass them.
    log_relocations,
    /// Bytes those copies took.
    log_relocated_bytes,
    /// Operations of logged commits retried after a retryable error (no
    /// free frame, a full disk, a log-space wait that timed out).
    trx_apply_retries,
    /// Mini-transactions that logged more than the estimate their thread
    /// reserved and took the rest without waiting (see
    /// `engine::admission`, "Estimates").
    log_estimate_top_ups,
    /// Operations whose mini-transaction found no room for that and ran
    /// again once their whole bound was reserved.
    log_estimate_retries,
    /// Writers that had to wait for a sync flush because the log was full.
    buffer_flush_sync_waits,
    /// Writers that found the checkpoint age past the free-check limit and waited.
    log_free_check_waits,
    /// Microseconds writers spent waiting in the free check.
    log_free_check_wait_us_total,
    /// Microseconds writers spent waiting for sync flushes.
    buffer_flush_sync_wait_us_total,
    /// Gauge: longest single sync-flush wait in microseconds.
    buffer_flush_sync_wait_us_max,
    /// Writer pauses for the policy's redo rate limit (`steady`), each at
    /// most 100 ms; their time is `buffer_flush_throttle_delay_us_total`.
    writer_pauses,
    /// Gauge: longest single writer pause in microseconds.
    writer_pause_us_max,
    /// Writer pauses of at most 1 ms (a cumulative histogram bucket, as
    /// Prometheus counts them; the other buckets likewise).
    writer_pause_le_1ms,
    /// Writer pauses of at most 2 ms.
    writer_pause_le_2ms,
    /// Writer pauses of at most 5 ms.
    writer_pause_le_5ms,
    /// Writer pauses of at most 10 ms.
    writer_pause_le_10ms,
    /// Writer pauses of at most 20 ms.
    writer_pause_le_20ms,
    /// Writer pauses of at most 50 ms.
    writer_pause_le_50ms,
    /// Writer pauses of at most 100 ms.
    writer_pause_le_100ms,
    /// Gauge (`steady`): checkpoint age the controller holds, in bytes.
    steady_setpoint,
    /// Gauge (`steady`): checkpoint age below which writers run free.
    steady_freerun,
    /// Gauge (`steady`): checkpoint age at which writers' allowed rate
    /// reaches zero (the free-check limit lies above it).
    steady_hard_limit,
    /// Gauge (`steady`): the throttle curve's position ratio, per mille
    /// (2000 below the freerun level, 1000 at the setpoint, 0 at the hard
    /// limit).
    steady_pos_ratio,
    /// Gauge (`steady`): the redo rate the flusher can retire, bytes/s,
    /// which the writers' allowed rate follows.
    steady_base_rate,
    /// Gauge (`steady`): redo rate in bytes/s (short average).
    log_redo_rate,
    /// Gauge (`steady`): the redo rate's decaying peak in bytes/s.
    log_redo_rate_peak,
    /// Gauge (`steady`): estimated device write bandwidth, pages/s over its
    /// busy time.
    device_write_bw_estimate,
    /// Gauge (`steady`): pages per second of wall time the flusher achieves
    /// while it has more to write than it can (below the busy-time
    /// bandwidth: a batch also waits for doublewrite, syncs, checkpoint).
    steady_flusher_capacity,
    /// Gauge (`steady`): page writes the flusher keeps in flight.
    device_write_queue_depth,
    /// Gauge (`steady`): redo bytes the checkpoint retires per page flushed.
    log_bytes_per_page_flushed,
    /// Gauge (`steady`): the longest recent spell, in milliseconds, in which
    /// the flusher had pages to write and the checkpoint did not move (a
    /// peak that halves in about six seconds); the band from the setpoint
    /// to the hard level holds 1.5 × its redo.
    steady_stall_spell_ms,
    /// Gauge (`steady`): what one write costs the device beyond the pages
    /// it carries, in pages, times 1000 (from the doublewrite's long
    /// writes against the in-place ones; 0 until measured): `steady`
    /// writes contiguous neighbors under `flush_neighbors = auto` while it
    /// is high (see `flush::policy::steady::merge`).
    steady_write_cost_pages_x1000,
    /// Gauge: the neighbor mode flush batches follow now (0 none, 1
    /// contiguous run, 2 whole area): the `flush_neighbors` option, or
    /// the policy's choice where it is `auto`.
    buffer_flush_neighbors_mode,
    /// Pages written by sync flushing.
    buffer_flush_sync_total_pages,
    /// Batches written and synced to a doublewrite area.
    dblwr_writes,
    /// Pages written through doublewrite areas: with their images under
    /// `doublewrite = on`, listed in the area header alone under
    /// `detect_only`.
    dblwr_pages_written,
    /// Microseconds doublewrite area writes took (their syncs not
    /// included).
    dblwr_write_us_total,
    /// Doublewrite area writes begun while no in-place data write was in
    /// flight: the ones `steady`'s write cost times (an area write queued
    /// behind in-place writes would be timed with their wait; see
    /// `flush::policy::steady::merge`).
    dblwr_alone_writes,
    /// Pages those writes carried.
    dblwr_alone_pages,
    /// Microseconds those writes took, their syncs not included.
    dblwr_alone_write_us_total,
    /// Bytes written to the doublewrite files (page copies and area
    /// headers, and the files' own headers when they are formatted;
    /// headers alone under `detect_only`, nothing under `atomic` and
    /// `off`): with `os_data_written_bytes`, `log_bytes_written` and
    /// `os_other_written_bytes`, every byte Keel writes to its files.
    dblwr_written_bytes,
    /// Bytes Keel writes to its files that are neither redo records
    /// (`log_bytes_written`), data pages (`os_data_written_bytes`) nor
    /// doublewrite areas (`dblwr_written_bytes`): the redo log's
    /// checkpoint slots (one 4 KiB block per checkpoint) and the headers of
    /// the redo and data files, written when a database is created. Each
    /// counts the bytes handed to the file's write call, once it succeeded.
    os_other_written_bytes,
    /// Of the pages written by flush batches, undo pages and the undo
    /// directory (InnoDB counts undo pages in `buffer_pages_written`
    /// only; its `buffer_flush_*` counters break writes down the same way).
    buffer_flush_undo_pages_written,
    /// Gauge: bytes of redo the last recovery replayed (from the
    /// checkpoint to the end of the valid log).
    recovery_redo_bytes,
    /// Gauge: redo record groups applied by the last recovery.
    recovery_groups_applied,
    /// Gauge: page records applied by the last recovery.
    recovery_page_records_applied,
    /// Gauge: distinct pages touched by the last recovery.
    recovery_pages_touched,
    /// Gauge: pages the last recovery's read-ahead threads read from disk
    /// (the rest of the pages touched were read by the applying thread,
    /// created, or already in the pool).
    recovery_pages_read_ahead,
    /// Gauge: committed transactions whose write sets the last recovery
    /// re-applied.
    recovery_txns_reapplied,
    /// Gauge: transactions cut short by the crash (logged keys only, their
    /// "applied" marker not durable) that the last recovery rolled back.
    recovery_txns_rolled_back,
    /// Gauge: torn pages repaired from the doublewrite area by the last
    /// recovery.
    recovery_torn_pages_repaired,
    /// Gauge: milliseconds the last recovery took.
    recovery_time_ms,
    /// Mini-transactions committed (striped: ten or so a transaction).
    mtr_commits: Striped,
    /// Pages allocated from the tablespace.
    space_pages_allocated,
    /// Pages returned to the tablespace's free list.
    space_pages_freed,
    /// Undo pages purge freed, or emptied for reuse when the page was its
    /// rollback segment's last (InnoDB's `purge_undo_log_pages`).
    purge_undo_log_pages,
    /// Gauge: records of undo that are the first of their commit in their
    /// rollback segment and not yet purged (InnoDB's history list length,
    /// `trx_rseg_history_len`).
    trx_rseg_history_len,
    /// Transactions committed (including one-row `Table::put`/`delete`).
    trx_commits,
    /// Transactions rolled back (explicitly, on drop, or as deadlock victims).
    trx_rollbacks,
    /// Wait event: a page latch (shared or exclusive) that was held
    /// against the thread asking for it, so that it waited (InnoDB's
    /// `wait/synch/sxlock/innodb/buf_block_lock`; the time in
    /// `wait_page_latch_ns`).
    wait_page_latch,
    /// Nanoseconds threads waited for page latches held against them
    /// (`wait_page_latch`'s waits; performance_schema's `SUM_TIMER_WAIT`).
    wait_page_latch_ns,
    /// Wait event: a row-lock-table shard's mutex found held (the lock
    /// manager is sharded by key hash: `txn::lock`), a short wait, not a
    /// row-lock wait (`lock_row_lock_waits`).
    wait_lock_sys_mutex,
    /// Nanoseconds threads waited for row-lock-table shard mutexes
    /// (`wait_lock_sys_mutex`'s waits).
    wait_lock_sys_mutex_ns,
    /// Wait event: an undo append found every rollback segment's append
    /// mutex held and waited for its own (it takes any free one).
    wait_rseg_mutex,
    /// Nanoseconds undo appends waited for a rollback segment's append
    /// mutex (`wait_rseg_mutex`'s waits).
    wait_rseg_mutex_ns,
    /// Wait event: the redo log's write mutex found held: a commit waited
    /// for another thread's write of the log buffer to the OS (most such
    /// waits end with the other's write covering it: group writing).
    wait_log_write_mutex,
    /// Nanoseconds commits waited for another thread's write of the log
    /// buffer (`wait_log_write_mutex`'s waits, until their own bytes were
    /// written or the mutex was theirs).
    wait_log_write_mutex_ns,
    /// Wait event: the redo log's append mutex (`state`: the log buffer,
    /// the end LSN, the commits in flight) found held. Every
    /// mini-transaction, commit record and read view takes it (InnoDB
    /// 5.7's `log_sys_mutex`; 8.0 reserves log space without one).
    wait_log_append_mutex,
    /// Nanoseconds threads waited for the log's append mutex
    /// (`wait_log_append_mutex`'s waits).
    wait_log_append_mutex_ns,
    /// Wait event: a buffer-pool instance's list mutex (its LRU and free
    /// lists) found held (InnoDB's `buf_pool_LRU_list_mutex` and
    /// `buf_pool_free_list_mutex`).
    wait_buf_pool_mutex,
    /// Nanoseconds threads waited for buffer-pool list mutexes
    /// (`wait_buf_pool_mutex`'s waits).
    wait_buf_pool_mutex_ns,
    /// Wait event: a buffer-pool instance's flush-list mutex found held,
    /// by a thread dirtying a clean page or a flusher (InnoDB's
    /// `flush_list_mutex`).
    wait_flush_list_mutex,
    /// Nanoseconds threads waited for flush-list mutexes
    /// (`wait_flush_list_mutex`'s waits).
    wait_flush_list_mutex_ns,
    /// Wait event: a page-hash shard's latch found held against the
    /// lookup (InnoDB's `hash_table_locks`); a page read into the pool or
    /// evicted holds its shard exclusively.
    wait_page_hash_latch,
    /// Nanoseconds threads waited for page-hash shard latches
    /// (`wait_page_hash_latch`'s waits).
    wait_page_hash_latch_ns,
    /// Wait event: the read views' mutex found held, by a transaction
    /// opening or closing its view, or purge reading its limit (InnoDB's
    /// `trx_sys_mutex`, which guards its view list).
    wait_trx_sys_mutex,
    /// Nanoseconds threads waited for the read views' mutex
    /// (`wait_trx_sys_mutex`'s waits).
    wait_trx_sys_mutex_ns,
    /// Row-lock requests that had to wait.
    lock_row_lock_waits,
    /// Milliseconds spent waiting for row locks.
    lock_row_lock_time_ms,
    /// Deadlocks detected (each rolls back one transaction).
    lock_deadlocks,
    /// Row-lock waits that ended in `LockWaitTimeout`.
    lock_timeouts,
    /// Delete-marked records purge removed from the trees once no read
    /// view could see them (InnoDB's `purge_del_mark_records`).
    purge_del_mark_records,
    /// Undo records purge processed.
    purge_undo_records,
    /// Overflow chains written: large values, one chain each (`lob`).
    lob_chains_written,
    /// Overflow pages written for large values.
    lob_pages_written,
    /// Overflow chains freed: by purge (the version holding one is gone),
    /// by a drop, truncate or failed bulk load, or at open for a commit a
    /// crash cut short.
    lob_chains_freed,
    /// Gauge: read views open now (snapshots of running reads and
    /// transactions).
    trx_read_views_open,
    /// Gauge: milliseconds the oldest open read view has been open (0 with
    /// none), updated by the purge coordinator about every 100 ms.
    trx_oldest_view_age_ms,
    /// Undo records written (one per row a commit changes).
    trx_undo_records,
    /// Of those, the records that keep their version as a delta of the
    /// version that replaced it (an update that changed a few bytes).
    trx_undo_delta_records,
    /// Older row versions rebuilt from undo records for a read view.
    trx_versions_rebuilt,
}

/// Upper bounds of the writer-pause histogram buckets, in microseconds.
pub const PAUSE_BUCKETS_US: [u64; 7] = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000];

/// The writer-pause histogram's cumulative buckets from the metrics `get`
/// returns by name (`writer_pause_le_1ms`, ...): (upper bound in µs,
/// pauses at most that long).
pub fn pause_buckets(get: &dyn Fn(&str) -> u64) -> Vec<(u64, u64)> {
    PAUSE_BUCKETS_US
        .iter()
        .map(|&le| (le, get(&format!("writer_pause_le_{}ms", le / 1000))))
        .collect()
}

/// The smallest bucket bound at or under which a share `q` of `total`
/// pauses fall, from cumulative `buckets` ([`pause_buckets`]); `None`: no
/// pause, or more than the largest bound.
pub fn pause_quantile(buckets: &[(u64, u64)], total: u64, q: f64) -> Option<u64> {
    if total == 0 {
        return None;
    }
    let need = (q * total as f64).ceil() as u64;
    buckets
        .iter()
        .find(|&&(_, count)| count >= need)
        .map(|&(le, _)| le)
}

/// Upper bounds of the commit latency histogram's buckets, in
/// microseconds (the last, unbounded bucket is implied).
pub const COMMIT_BUCKETS_US: [u64; 14] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 5_000_000,
];

/// A latency histogram with fixed buckets ([`COMMIT_BUCKETS_US`]): one
/// relaxed atomic add per bucket, sum and count for each observation.
/// Buckets count observations in their own range only; a reader makes
/// them cumulative ([`Histogram::cumulative`]).
#[derive(Default, Debug)]
pub struct Histogram {
    /// Observations in each bucket's range (above the previous bound, at
    /// most this one); the last is everything above the last bound.
    buckets: [AtomicU64; COMMIT_BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Count one observation of `us` microseconds.
    pub fn record(&self, us: u64) {
        let i = COMMIT_BUCKETS_US.partition_point(|&le| le < us);
        Metrics::add(&self.buckets[i], 1);
        Metrics::add(&self.sum_us, us);
        Metrics::add(&self.count, 1);
    }

    /// (upper bound in µs, observations at or below it) for each bound of
    /// [`COMMIT_BUCKETS_US`], then the sum of all observations in µs and
    /// their count (the `+Inf` bucket). Read without a lock, so a reader
    /// racing writers may see the count a little ahead of the buckets; the
    /// buckets are made monotonic and never exceed the count.
    pub fn cumulative(&self) -> (Vec<(u64, u64)>, u64, u64) {
        let count = self.count.load(Ordering::Relaxed);
        let sum = self.sum_us.load(Ordering::Relaxed);
        let mut acc = 0u64;
        let buckets = COMMIT_BUCKETS_US
            .iter()
            .zip(&self.buckets)
            .map(|(&le, b)| {
                acc = acc.saturating_add(b.load(Ordering::Relaxed));
                (le, acc.min(count))
            })
            .collect();
        (buckets, sum, count)
    }
}

/// Whether the metric is a gauge (a level) rather than a counter (a
/// running total): its description says so.
pub fn is_gauge(name: &str) -> bool {
    Metrics::NAMES
        .iter()
        .position(|n| *n == name)
        .is_some_and(|i| Metrics::HELP[i].trim_start().starts_with("Gauge"))
}

impl Metrics {
    /// Count one writer pause of `us` microseconds in the histogram.
    pub fn record_pause(&self, us: u64) {
        Metrics::add(&self.writer_pauses, 1);
        Metrics::add(&self.buffer_flush_throttle_delay_us_total, us);
        self.writer_pause_us_max.fetch_max(us, Ordering::Relaxed);
        let buckets = [
            &self.writer_pause_le_1ms,
            &self.writer_pause_le_2ms,
            &self.writer_pause_le_5ms,
            &self.writer_pause_le_10ms,
            &self.writer_pause_le_20ms,
            &self.writer_pause_le_50ms,
            &self.writer_pause_le_100ms,
        ];
        for (b, &le) in buckets.iter().zip(&PAUSE_BUCKETS_US) {
            if us <= le {
                Metrics::add(b, 1);
            }
        }
    }

    /// Add to a counter.
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    /// Subtract from a gauge.
    #[inline]
    pub fn sub(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Ordering::Relaxed);
    }
    /// Set a gauge.
    #[inline]
    pub fn set(c: &AtomicU64, n: u64) {
        c.store(n, Ordering::Relaxed);
    }
}

mod prometheus;
pub use prometheus::{prometheus_name, PROMETHEUS_CONTENT_TYPE};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A striped counter loses no add: threads adding at once, more threads
    /// than cells, sum to exactly what they added, through the registry as
    /// through the counter; its cells lie on lines of their own.
    #[test]
    fn a_striped_counter_sums_every_threads_adds() {
        let m = Metrics::default();
        std::thread::scope(|s| {
            for t in 0..(2 * STRIPES as u64 + 3) {
                let m = &m;
                s.spawn(move || {
                    for _ in 0..1000 {
                        m.buffer_pool_read_requests.add(t + 1);
                    }
                });
            }
        });
        let n = 2 * STRIPES as u64 + 3;
        let want = 1000 * n * (n + 1) / 2;
        assert_eq!(m.buffer_pool_read_requests.load(Ordering::Relaxed), want);
        assert_eq!(m.get("buffer_pool_read_requests"), Some(want));
        assert_eq!(m.snapshot()["buffer_pool_read_requests"], want);
        let cells = &m.buffer_pool_read_requests.0;
        for w in cells.windows(2) {
            let (a, b) = (
                &*w[0] as *const AtomicU64 as usize,
                &*w[1] as *const AtomicU64 as usize,
            );
            assert!(b - a >= 128 && a.is_multiple_of(128));
        }
    }

    /// A wait is counted when, and only when, the mutex was held: one
    /// thread holds it until the other has asked for it. The wait is timed
    /// from before it is counted, so it lasted at least as long as the
    /// holder kept the mutex after seeing the count.
    #[test]
    fn lock_counted_counts_and_times_only_the_waits() {
        let m = parking_lot::Mutex::new(0u32);
        let (waits, waited) = (AtomicU64::new(0), AtomicU64::new(0));
        drop(lock_counted(&m, &waits, &waited));
        assert_eq!(waits.load(Ordering::Relaxed), 0);
        assert_eq!(waited.load(Ordering::Relaxed), 0);
        let held = m.lock();
        std::thread::scope(|s| {
            let t = s.spawn(|| *lock_counted(&m, &waits, &waited) += 1);
            while waits.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            t.join().unwrap();
        });
        assert_eq!(waits.load(Ordering::Relaxed), 1);
        assert!(waited.load(Ordering::Relaxed) >= 20_000_000);
        assert_eq!(*m.lock(), 1);
    }

    #[test]
    fn read_and_write_counted_count_only_the_waits_each_side_meets() {
        let l = parking_lot::RwLock::new(0u32);
        let (waits, waited) = (AtomicU64::new(0), AtomicU64::new(0));
        {
            // Readers share: a second reader does not wait.
            let _a = read_counted(&l, &waits, &waited);
            let _b = read_counted(&l, &waits, &waited);
        }
        drop(write_counted(&l, &waits, &waited));
        assert_eq!(waits.load(Ordering::Relaxed), 0);
        assert_eq!(waited.load(Ordering::Relaxed), 0);
        // A reader waits for a writer, and a writer for a reader.
        let held = l.write();
        std::thread::scope(|s| {
            let t = s.spawn(|| *read_counted(&l, &waits, &waited));
            while waits.load(Ordering::Relaxed) == 0 {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            assert_eq!(t.join().unwrap(), 0);
        });
        let held = l.read();
        std::thread::scope(|s| {
            let t = s.spawn(|| *write_counted(&l, &waits, &waited) += 1);
            while waits.load(Ordering::Relaxed) == 1 {
                std::thread::yield_now();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(held);
            t.join().unwrap();
        });
        assert_eq!(waits.load(Ordering::Relaxed), 2);
        assert!(waited.load(Ordering::Relaxed) >= 40_000_000);
        assert_eq!(*l.read(), 1);
    }

    #[test]
    fn names_and_values() {
        let m = Metrics::default();
        Metrics::add(&m.os_data_writes, 3);
        assert_eq!(m.get("os_data_writes"), Some(3));
        assert_eq!(m.get("nope"), None);
        let s = m.snapshot();
        assert_eq!(s.len(), Metrics::NAMES.len());
        assert!(s.contains_key("buffer_LRU_batch_flush_total_pages"));
        assert_eq!(Metrics::HELP.len(), Metrics::NAMES.len());
        assert!(is_gauge("log_lsn_checkpoint_age"));
        assert!(is_gauge("recovery_time_ms"));
        assert!(!is_gauge("os_data_writes"));
        assert!(!is_gauge("nope"));
    }

    #[test]
    fn the_histogram_counts_each_observation_once_and_reads_cumulative() {
        let h = Histogram::default();
        for us in [50, 100, 101, 3_000, 10_000_000] {
            h.record(us);
        }
        let (b, sum, count) = h.cumulative();
        assert_eq!((sum, count), (10_003_251, 5));
        assert_eq!(b[0], (100, 2)); // 50 and 100: a bound is inclusive
        assert_eq!(b[1], (250, 3));
        assert_eq!(b[5], (5_000, 4));
        assert_eq!(b.last(), Some(&(5_000_000, 4))); // 10 s is above every bound
        assert!(b.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn pause_quantiles_come_from_the_cumulative_buckets() {
        let b = [(1000, 0), (2000, 5), (5000, 10)];
        assert_eq!(pause_quantile(&b, 0, 0.99), None);
        assert_eq!(pause_quantile(&b, 10, 0.5), Some(2000));
        assert_eq!(pause_quantile(&b, 10, 0.99), Some(5000));
        // More pauses than the buckets hold: beyond the largest bound.
        assert_eq!(pause_quantile(&b, 20, 0.99), None);
        let m = Metrics::default();
        m.record_pause(1_500);
        let got = pause_buckets(&|n| m.get(n).unwrap_or(0));
        assert_eq!(got[..3], [(1_000, 0), (2_000, 1), (5_000, 1)]);
    }
}
