//! One report interval: the workers' counts and the engine's metrics,
//! counters as deltas over the interval and gauges at its end.

use std::collections::BTreeMap;

use keel::{pause_buckets, pause_quantile, FlushMode};
use serde::{Deserialize, Serialize};

/// The engine's metrics at one instant.
pub(crate) type Snapshot = BTreeMap<&'static str, u64>;

/// Pages written because they neighbored a flushed page (InnoDB's name;
/// `flush_neighbors` 1 = the contiguous dirty run, 2 = the whole area).
const NEIGHBOR_PAGES: &str = "buffer_flush_neighbor_total_pages";
/// Microseconds writers were delayed by a dirtying throttle. The classic
/// policy never throttles writers (it stops them at the free-check limit
/// instead), so under `classic` this stays 0.
const THROTTLE_DELAY_US: &str = "buffer_flush_throttle_delay_us_total";

/// `write_bytes` of the engine process's `/proc/PID/io` (added to the
/// snapshot by the sampler, not the engine): a raw figure, not the bytes
/// written (see [`crate::sys::process_write_bytes`]).
pub(crate) const PROCESS_WRITE_BYTES: &str = "process_write_bytes";

/// Bytes written to the block device holding the data directory since
/// boot (added by the sampler; absent where there is no block device).
pub(crate) const DEVICE_WRITE_BYTES: &str = "device_write_bytes";

/// The engine's own byte counters, by kind of file (Keel's names; the
/// InnoDB driver maps its status counters onto them).
pub(crate) const LOG_BYTES: &str = "log_bytes_written";
pub(crate) const DATA_BYTES: &str = "os_data_written_bytes";
pub(crate) const DBLWR_BYTES: &str = "dblwr_written_bytes";
pub(crate) const OTHER_BYTES: &str = "os_other_written_bytes";

/// The fields of [`Interval`] and of [`Summary`](super::Summary) that come
/// from Keel's own metrics: 0 (`flush_mode` empty) for an engine that has
/// none of them, which lists them in `Summary::not_measured`. Throughput,
/// latency, errors, the device's bytes written and peak RSS are measured
/// for every engine (the device's where the data directory is on one).
pub const KEEL_METRIC_FIELDS: &[&str] = &[
    "checkpoint_age",
    "log_capacity",
    "async_mark",
    "sync_mark",
    "dirty_pages",
    "free_pages",
    "total_pages",
    "pages_flushed",
    "os_data_reads",
    "os_data_writes",
    "log_bytes",
    "sync_flush_waits",
    "sync_flush_wait_ms",
    "throttle_delay_ms",
    "pages_written",
    "flush_mode",
    "free_check_waits",
    "free_check_wait_ms",
    "freerun",
    "setpoint",
    "hard",
    "writer_pauses",
    "pause_p99_ms",
    "pause_max_ms",
    "bw_estimate",
    "flusher_capacity",
    "queue_depth",
    "base_rate",
    "pages_written_per_txn",
    "log_bytes_per_txn",
    "sync_flush_wait_ms_total",
    "throttle_delay_ms_total",
    "history_len",
    "history_len_max",
    "undo_records_purged",
    "undo_pages_purged",
    "del_marks_purged",
    "undo_pages_in_pool",
    "undo_pages_written",
    "read_views_open",
    "oldest_view_age_ms",
    "undo_records_written",
    "versions_rebuilt",
    "undo_records_purged_total",
    "undo_pages_written_total",
    "data_bytes",
    "dblwr_bytes",
    "other_bytes",
    "engine_bytes",
    "data_bytes_per_txn",
    "dblwr_bytes_per_txn",
    "other_bytes_per_txn",
    "engine_bytes_per_txn",
];

/// Undo pages cached in the buffer pool (`Db::history().undo_pages_in_pool`),
/// added to Keel's metrics snapshot by its driver: it is not a registry
/// metric.
pub(crate) const UNDO_PAGES_IN_POOL: &str = "undo_pages_in_pool";

/// Pages written in one interval, by the kind of flush that wrote them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PagesFlushed {
    /// By the page cleaners from the flush list, for any reason:
    /// `adaptive` + `background` (kept for readers of older files).
    pub list: u64,
    /// Flush-list pages written by adaptive flushing, to keep the
    /// checkpoint age in check (`buffer_flush_adaptive_total_pages`).
    pub adaptive: u64,
    /// Flush-list pages written for any other reason: idle flushing,
    /// `max_dirty_pages_pct`, shutdown (`buffer_flush_background_total_pages`).
    pub background: u64,
    /// By the page cleaners from the LRU tail, to make free pages.
    pub lru: u64,
    /// By sync flushing (the checkpoint age passed the sync mark).
    pub sync: u64,
    /// By writers that found no free page (single-page flushes).
    pub single: u64,
    /// Neighbors of flushed pages, written with them (`flush_neighbors` 1 or 2).
    pub neighbors: u64,
    /// Clean pages written to fill a gap between two dirty runs
    /// (`buffer_flush_gap_pages`; not in `pages_written` nor the kinds
    /// above: they retire nothing).
    pub gap: u64,
}

/// One interval of a run: counts over the interval, gauges at its end,
/// sizes in bytes. Fields a file does not have (an older file, or another
/// engine's run) read as 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Interval {
    /// Seconds since the measurement started, at the interval's end.
    pub t_s: f64,
    /// Length of the interval in seconds.
    pub interval_s: f64,
    /// Transactions committed.
    pub transactions: u64,
    /// Queries run (sysbench's count: reads, writes, BEGIN/COMMIT).
    pub queries: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Queries per second.
    pub qps: f64,
    /// 95th percentile of transaction latency, ms.
    pub lat_p95_ms: f64,
    /// Longest transaction, ms.
    pub lat_max_ms: f64,
    /// Deadlocks and lock-wait timeouts (each retried).
    pub errors: u64,
    /// Redo bytes between the last checkpoint and the current LSN.
    pub checkpoint_age: u64,
    /// Usable bytes of the redo log.
    pub log_capacity: u64,
    /// Checkpoint age at which flushing becomes urgent (async).
    pub async_mark: u64,
    /// Checkpoint age at which writers flush themselves (sync).
    pub sync_mark: u64,
    /// Dirty pages in the buffer pool.
    pub dirty_pages: u64,
    /// Free frames in the buffer pool.
    pub free_pages: u64,
    /// Frames in the buffer pool.
    pub total_pages: u64,
    /// Pages written, by kind of flush.
    pub pages_flushed: PagesFlushed,
    /// Read calls on the data files.
    pub os_data_reads: u64,
    /// Write calls on the data files.
    pub os_data_writes: u64,
    /// Bytes written to the redo log.
    pub log_bytes: u64,
    /// Writers that waited for a sync flush.
    pub sync_flush_waits: u64,
    /// Milliseconds writers waited for sync flushes.
    pub sync_flush_wait_ms: f64,
    /// Milliseconds writers were delayed by a throttle (always 0 under
    /// `classic`, which has none).
    pub throttle_delay_ms: f64,
    /// Pages written to the data files by any flush.
    pub pages_written: u64,
    /// Flushing mode of the page cleaners' last round at the interval's
    /// end: `idle`, `adaptive`, `async` or `sync` (gauge `buffer_flush_mode`).
    pub flush_mode: String,
    /// Writers that stopped at the free-check limit (`log_free_check_waits`).
    pub free_check_waits: u64,
    /// Milliseconds writers spent stopped at the free-check limit.
    pub free_check_wait_ms: f64,
    /// `steady`: checkpoint age below which writers run free (0 under
    /// `classic`).
    pub freerun: u64,
    /// `steady`: the checkpoint age it holds.
    pub setpoint: u64,
    /// `steady`: the age at which writers' allowed rate reaches zero.
    pub hard: u64,
    /// Writer pauses (`steady`'s throttle), each at most 100 ms.
    pub writer_pauses: u64,
    /// The pauses' 99th percentile, as the upper bound of its histogram
    /// bucket (1, 2, 5, 10, 20, 50, 100 ms; 0: no pause).
    pub pause_p99_ms: f64,
    /// The longest pause, likewise as its bucket's upper bound.
    pub pause_max_ms: f64,
    /// `steady`: estimated device write bandwidth, pages/s of busy time.
    pub bw_estimate: u64,
    /// `steady`: pages/s the flusher achieves with a backlog.
    pub flusher_capacity: u64,
    /// `steady`: page writes the flusher keeps in flight.
    pub queue_depth: u64,
    /// `steady`: the redo rate (bytes/s) writers are held to at the
    /// setpoint.
    pub base_rate: u64,
    /// Raw `write_bytes` of the engine process's `/proc/PID/io`. Not the
    /// bytes written, and used for no figure: the kernel charges it by
    /// page-cache folio dirtied, so small synced writes (redo) count a
    /// whole large folio each (see `keel_bench::sys::process_write_bytes`).
    pub process_write_bytes: u64,
    /// Bytes the engine wrote to its data files (Keel:
    /// `os_data_written_bytes`: flush batches, LRU and single-page
    /// flushes, bulk loads, undo pages).
    pub data_bytes: u64,
    /// Bytes the engine wrote to its doublewrite files
    /// (`dblwr_written_bytes`). The redo bytes are `log_bytes`.
    pub dblwr_bytes: u64,
    /// Bytes the engine wrote to its files besides redo records, data
    /// pages and doublewrite areas (`os_other_written_bytes`: checkpoint
    /// slots, file headers).
    pub other_bytes: u64,
    /// Every byte the engine handed its files by its own count:
    /// `log_bytes` + `dblwr_bytes` + `data_bytes` + `other_bytes`.
    pub engine_bytes: u64,
    /// Bytes written to the block device holding the data directory
    /// (sectors written × 512, see `keel_bench::sys::BlockDevice`), by
    /// every process writing to it; `None` where the directory is on no
    /// block device (tmpfs): not measured, not 0.
    pub device_bytes: Option<u64>,
    /// History list length at the interval's end: committed transactions
    /// whose undo is not purged yet (`trx_rseg_history_len`).
    pub history_len: u64,
    /// Undo records purge processed (`purge_undo_records`).
    pub undo_records_purged: u64,
    /// Undo pages purge freed (`purge_undo_log_pages`).
    pub undo_pages_purged: u64,
    /// Delete-marked records purge removed (`purge_del_mark_records`).
    pub del_marks_purged: u64,
    /// Undo pages in the buffer pool at the interval's end
    /// (`Db::history().undo_pages_in_pool`; compare with `total_pages`).
    pub undo_pages_in_pool: u64,
    /// Undo pages written by the page cleaners
    /// (`buffer_flush_undo_pages_written`; compare with `pages_written`).
    pub undo_pages_written: u64,
    /// Read views open at the interval's end (`trx_read_views_open`).
    pub read_views_open: u64,
    /// Age of the oldest open read view at the interval's end, ms
    /// (`trx_oldest_view_age_ms`; 0 with none).
    pub oldest_view_age_ms: u64,
    /// Undo records written (`trx_undo_records`).
    pub undo_records_written: u64,
    /// Older row versions rebuilt for read views (`trx_versions_rebuilt`).
    pub versions_rebuilt: u64,
}

/// What the workers counted in one interval.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub transactions: u64,
    pub queries: u64,
    pub errors: u64,
    pub lat_p95_ms: f64,
    pub lat_max_ms: f64,
}

pub(crate) fn val(s: &Snapshot, name: &str) -> u64 {
    s.get(name).copied().unwrap_or(0)
}

/// The growth of counter `name` from `a` to `b`.
pub(crate) fn delta(a: &Snapshot, b: &Snapshot, name: &str) -> u64 {
    val(b, name).saturating_sub(val(a, name))
}

impl Interval {
    /// The interval ending at `t_s` that lasted `interval_s`, from the
    /// metrics at its start (`a`) and end (`b`).
    pub(crate) fn new(t_s: f64, interval_s: f64, c: Counts, a: &Snapshot, b: &Snapshot) -> Self {
        let secs = interval_s.max(1e-9);
        let adaptive = delta(a, b, "buffer_flush_adaptive_total_pages");
        let pauses = delta(a, b, "writer_pauses");
        let buckets = pause_buckets(&|n| delta(a, b, n));
        let background = delta(a, b, "buffer_flush_background_total_pages");
        Interval {
            t_s,
            interval_s,
            transactions: c.transactions,
            queries: c.queries,
            tps: c.transactions as f64 / secs,
            qps: c.queries as f64 / secs,
            lat_p95_ms: c.lat_p95_ms,
            lat_max_ms: c.lat_max_ms,
            errors: c.errors,
            checkpoint_age: val(b, "log_lsn_checkpoint_age"),
            log_capacity: val(b, "log_capacity"),
            async_mark: val(b, "log_max_modified_age_async"),
            sync_mark: val(b, "log_max_modified_age_sync"),
            dirty_pages: val(b, "buffer_pool_pages_dirty"),
            free_pages: val(b, "buffer_pool_pages_free"),
            total_pages: val(b, "buffer_pool_pages_total"),
            pages_flushed: PagesFlushed {
                list: adaptive + background,
                adaptive,
                background,
                lru: delta(a, b, "buffer_LRU_batch_flush_total_pages"),
                sync: delta(a, b, "buffer_flush_sync_total_pages"),
                single: delta(a, b, "buffer_LRU_single_flush_total_pages"),
                neighbors: delta(a, b, NEIGHBOR_PAGES),
                gap: delta(a, b, "buffer_flush_gap_pages"),
            },
            os_data_reads: delta(a, b, "os_data_reads"),
            os_data_writes: delta(a, b, "os_data_writes"),
            log_bytes: delta(a, b, LOG_BYTES),
            sync_flush_waits: delta(a, b, "buffer_flush_sync_waits"),
            sync_flush_wait_ms: delta(a, b, "buffer_flush_sync_wait_us_total") as f64 / 1000.0,
            throttle_delay_ms: delta(a, b, THROTTLE_DELAY_US) as f64 / 1000.0,
            pages_written: delta(a, b, "buffer_pages_written"),
            flush_mode: FlushMode::from_code(val(b, "buffer_flush_mode"))
                .as_str()
                .to_string(),
            free_check_waits: delta(a, b, "log_free_check_waits"),
            free_check_wait_ms: delta(a, b, "log_free_check_wait_us_total") as f64 / 1000.0,
            freerun: val(b, "steady_freerun"),
            setpoint: val(b, "steady_setpoint"),
            hard: val(b, "steady_hard_limit"),
            writer_pauses: pauses,
            pause_p99_ms: pause_ms(&buckets, pauses, 0.99),
            pause_max_ms: pause_ms(&buckets, pauses, 1.0),
            bw_estimate: val(b, "device_write_bw_estimate"),
            flusher_capacity: val(b, "steady_flusher_capacity"),
            queue_depth: val(b, "device_write_queue_depth"),
            base_rate: val(b, "steady_base_rate"),
            process_write_bytes: delta(a, b, PROCESS_WRITE_BYTES),
            data_bytes: delta(a, b, DATA_BYTES),
            dblwr_bytes: delta(a, b, DBLWR_BYTES),
            other_bytes: delta(a, b, OTHER_BYTES),
            engine_bytes: engine_bytes(a, b),
            device_bytes: device_delta(a, b),
            history_len: val(b, "trx_rseg_history_len"),
            undo_records_purged: delta(a, b, "purge_undo_records"),
            undo_pages_purged: delta(a, b, "purge_undo_log_pages"),
            del_marks_purged: delta(a, b, "purge_del_mark_records"),
            undo_pages_in_pool: val(b, UNDO_PAGES_IN_POOL),
            undo_pages_written: delta(a, b, "buffer_flush_undo_pages_written"),
            read_views_open: val(b, "trx_read_views_open"),
            oldest_view_age_ms: val(b, "trx_oldest_view_age_ms"),
            undo_records_written: delta(a, b, "trx_undo_records"),
            versions_rebuilt: delta(a, b, "trx_versions_rebuilt"),
        }
    }
}

/// The engine's own bytes written from `a` to `b`: redo, doublewrite,
/// data and other files.
pub(crate) fn engine_bytes(a: &Snapshot, b: &Snapshot) -> u64 {
    [LOG_BYTES, DBLWR_BYTES, DATA_BYTES, OTHER_BYTES]
        .iter()
        .map(|n| delta(a, b, n))
        .sum()
}

/// The device's bytes written from `a` to `b`, if both have them.
pub(crate) fn device_delta(a: &Snapshot, b: &Snapshot) -> Option<u64> {
    Some(
        b.get(DEVICE_WRITE_BYTES)?
            .saturating_sub(*a.get(DEVICE_WRITE_BYTES)?),
    )
}

/// The bucket bound (ms) under which a share `q` of `n` pauses fall; the
/// largest bound if the buckets hold fewer (0 without pauses).
fn pause_ms(buckets: &[(u64, u64)], n: u64, q: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let us = pause_quantile(buckets, n, q)
        .unwrap_or(keel::PAUSE_BUCKETS_US[keel::PAUSE_BUCKETS_US.len() - 1]);
    us as f64 / 1000.0
}

/// Throttle delay in ms between two snapshots (0 under `classic`).
pub(crate) fn throttle_delay_ms(a: &Snapshot, b: &Snapshot) -> f64 {
    delta(a, b, THROTTLE_DELAY_US) as f64 / 1000.0
}
