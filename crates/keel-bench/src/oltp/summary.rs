//! A run's summary: throughput and its steadiness, latency, and what the
//! run cost in page writes, redo and waits.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::sample::{
    delta, device_delta, engine_bytes, throttle_delay_ms, Interval, Snapshot, DATA_BYTES,
    DBLWR_BYTES, LOG_BYTES, OTHER_BYTES, PROCESS_WRITE_BYTES,
};

/// An interval whose tps is below this share of the run's median is a stall.
const STALL_SHARE: f64 = 0.10;

/// Transaction latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LatencyMs {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Longest.
    pub max: f64,
}

/// The figures of a whole run (warm-up excluded). Fields a file does not
/// have read as 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Measured seconds.
    pub time_s: f64,
    /// Transactions / measured seconds.
    pub tps_avg: f64,
    /// Median of the per-interval tps.
    pub tps_median: f64,
    /// Lowest per-interval tps.
    pub tps_min: f64,
    /// 1st percentile of the per-interval tps.
    pub tps_p01: f64,
    /// Coefficient of variation (stddev / mean) of the per-interval tps.
    pub cv: f64,
    /// Intervals whose tps is below 10 % of the median.
    pub stall_intervals: u64,
    /// Longest run of consecutive stall intervals, in seconds.
    pub longest_stall_s: f64,
    /// Transaction latency.
    pub latency_ms: LatencyMs,
    /// Transactions committed.
    pub transactions: u64,
    /// Queries run.
    pub queries: u64,
    /// Deadlocks and lock-wait timeouts, each retried.
    pub errors: u64,
    /// Pages written to the data files.
    pub pages_written: u64,
    /// Pages written per transaction.
    pub pages_written_per_txn: f64,
    /// Redo bytes per transaction.
    pub log_bytes_per_txn: f64,
    /// Writers that waited for a sync flush.
    pub sync_flush_waits: u64,
    /// Milliseconds writers waited for sync flushes.
    pub sync_flush_wait_ms_total: f64,
    /// Milliseconds writers were delayed by the throttle (0: no throttle yet).
    pub throttle_delay_ms_total: f64,
    /// Doublewrite bytes per transaction (`dblwr_written_bytes`).
    pub dblwr_bytes_per_txn: f64,
    /// Data-file bytes per transaction (`os_data_written_bytes`).
    pub data_bytes_per_txn: f64,
    /// Other bytes per transaction: checkpoint slots, file headers
    /// (`os_other_written_bytes`).
    pub other_bytes_per_txn: f64,
    /// Every byte the engine wrote per transaction by its own counters:
    /// `log_bytes_per_txn` + `dblwr_bytes_per_txn` + `data_bytes_per_txn`
    /// + `other_bytes_per_txn`.
    pub engine_bytes_per_txn: f64,
    /// Bytes written to the block device holding the data directory per
    /// transaction (every process's writes to it, see `device`); `None`
    /// (JSON `null`) where not measured: the directory is on no block
    /// device (tmpfs), or the counter could not be read.
    pub device_bytes_per_txn: Option<f64>,
    /// The block device `device_bytes_per_txn` counts, as `name (MAJ:MIN,
    /// partition|whole device)`, or why it is not measured.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// Raw `write_bytes` of the engine process's `/proc/PID/io` per
    /// transaction. Not bytes written: the kernel charges a whole
    /// page-cache folio each time a small synced write dirties one (see
    /// `keel_bench::sys::process_write_bytes`), so it over-counts a redo
    /// log many times over. Kept for comparison only; no table shows it.
    pub process_write_bytes_per_txn: f64,
    /// Peak resident set size of the engine's process during the run, in
    /// bytes (0: not known).
    pub peak_rss_bytes: u64,
    /// CPU time (user + system, every thread of the process: workers,
    /// cleaners, purge) per transaction during the run, in microseconds;
    /// `None` (JSON `null`) where not measured (the engine runs in another
    /// process). Less sensitive to a busy machine than tps: the path length.
    #[serde(default)]
    pub cpu_us_per_txn: Option<f64>,
    /// Longest history list length at an interval's end
    /// (`trx_rseg_history_len`).
    pub history_len_max: u64,
    /// Undo records purge processed during the run.
    pub undo_records_purged_total: u64,
    /// Undo pages written during the run (`buffer_flush_undo_pages_written`).
    pub undo_pages_written_total: u64,
    /// Fields of this summary and of the intervals that the engine does
    /// not measure, so read as 0 (empty for Keel, which measures all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<String>,
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl Summary {
    /// The summary of a run from its intervals, its latency histogram (µs)
    /// and the metrics at the start (`a`) and end (`b`) of the measurement.
    pub(crate) fn new(
        intervals: &[Interval],
        lat: &Histogram<u64>,
        time_s: f64,
        a: &Snapshot,
        b: &Snapshot,
    ) -> Summary {
        let transactions: u64 = intervals.iter().map(|i| i.transactions).sum();
        let queries: u64 = intervals.iter().map(|i| i.queries).sum();
        let errors: u64 = intervals.iter().map(|i| i.errors).sum();
        let mut tps: Vec<f64> = intervals.iter().map(|i| i.tps).collect();
        tps.sort_by(f64::total_cmp);
        let mean = tps.iter().sum::<f64>() / tps.len().max(1) as f64;
        let var = tps.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / tps.len().max(1) as f64;
        let median = quantile(&tps, 0.5);
        let (stall_intervals, longest_stall_s) = stalls(intervals, median * STALL_SHARE);
        let per_txn = |n: u64| n as f64 / transactions.max(1) as f64;
        let pages_written = delta(a, b, "buffer_pages_written");
        let log_bytes = delta(a, b, LOG_BYTES);
        let latency_ms = if lat.is_empty() {
            LatencyMs::default()
        } else {
            LatencyMs {
                avg: lat.mean() / 1000.0,
                p50: ms(lat.value_at_quantile(0.5)),
                p95: ms(lat.value_at_quantile(0.95)),
                p99: ms(lat.value_at_quantile(0.99)),
                p999: ms(lat.value_at_quantile(0.999)),
                max: ms(lat.max()),
            }
        };
        Summary {
            time_s,
            tps_avg: transactions as f64 / time_s.max(1e-9),
            tps_median: median,
            tps_min: tps.first().copied().unwrap_or(0.0),
            tps_p01: quantile(&tps, 0.01),
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
            stall_intervals,
            longest_stall_s,
            latency_ms,
            transactions,
            queries,
            errors,
            pages_written,
            pages_written_per_txn: per_txn(pages_written),
            log_bytes_per_txn: per_txn(log_bytes),
            sync_flush_waits: delta(a, b, "buffer_flush_sync_waits"),
            sync_flush_wait_ms_total: delta(a, b, "buffer_flush_sync_wait_us_total") as f64
                / 1000.0,
            throttle_delay_ms_total: throttle_delay_ms(a, b),
            dblwr_bytes_per_txn: per_txn(delta(a, b, DBLWR_BYTES)),
            data_bytes_per_txn: per_txn(delta(a, b, DATA_BYTES)),
            other_bytes_per_txn: per_txn(delta(a, b, OTHER_BYTES)),
            engine_bytes_per_txn: per_txn(engine_bytes(a, b)),
            device_bytes_per_txn: device_delta(a, b).map(per_txn),
            device: String::new(),
            process_write_bytes_per_txn: per_txn(delta(a, b, PROCESS_WRITE_BYTES)),
            peak_rss_bytes: 0,
            cpu_us_per_txn: None,
            history_len_max: intervals.iter().map(|i| i.history_len).max().unwrap_or(0),
            undo_records_purged_total: delta(a, b, "purge_undo_records"),
            undo_pages_written_total: delta(a, b, "buffer_flush_undo_pages_written"),
            not_measured: Vec::new(),
        }
    }
}

/// Number of intervals below `limit` tps and the longest consecutive run
/// of them in seconds.
pub(crate) fn stalls(intervals: &[Interval], limit: f64) -> (u64, f64) {
    let (mut count, mut run, mut longest) = (0, 0.0, 0.0f64);
    for i in intervals {
        if i.tps < limit {
            count += 1;
            run += i.interval_s;
            longest = longest.max(run);
        } else {
            run = 0.0;
        }
    }
    (count, longest)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn iv(tps: f64) -> Interval {
        Interval {
            tps,
            transactions: tps as u64,
            interval_s: 1.0,
            ..Interval::default()
        }
    }

    #[test]
    fn stalls_and_spread_are_counted() {
        let ivs: Vec<Interval> = [100.0, 100.0, 5.0, 0.0, 100.0, 9.0, 100.0]
            .into_iter()
            .map(iv)
            .collect();
        let h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        let s = Summary::new(&ivs, &h, 7.0, &Snapshot::new(), &Snapshot::new());
        assert_eq!(s.tps_median, 100.0);
        assert_eq!(s.tps_min, 0.0);
        assert_eq!(s.stall_intervals, 3);
        assert_eq!(s.longest_stall_s, 2.0);
        assert_eq!(s.transactions, 414);
        assert!(s.cv > 0.5);
        assert_eq!(s.throttle_delay_ms_total, 0.0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod bytes_tests {
    use super::*;

    fn snap(pairs: &[(&'static str, u64)]) -> Snapshot {
        pairs.iter().copied().collect()
    }

    #[test]
    fn bytes_per_transaction_are_split_by_file_and_the_device_is_apart() {
        let ivs = vec![Interval {
            transactions: 100,
            tps: 100.0,
            interval_s: 1.0,
            ..Interval::default()
        }];
        let h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        let a = snap(&[
            (LOG_BYTES, 1_000),
            (DBLWR_BYTES, 0),
            (DATA_BYTES, 4_096),
            (OTHER_BYTES, 0),
            (PROCESS_WRITE_BYTES, 0),
            (super::super::sample::DEVICE_WRITE_BYTES, 1 << 30),
        ]);
        let b = snap(&[
            (LOG_BYTES, 51_000),
            (DBLWR_BYTES, 40_960),
            (DATA_BYTES, 45_056),
            (OTHER_BYTES, 4_096),
            (PROCESS_WRITE_BYTES, 100 << 20),
            (
                super::super::sample::DEVICE_WRITE_BYTES,
                (1 << 30) + 150_000,
            ),
        ]);
        let s = Summary::new(&ivs, &h, 1.0, &a, &b);
        assert_eq!(s.log_bytes_per_txn, 500.0);
        assert_eq!(s.dblwr_bytes_per_txn, 409.6);
        assert_eq!(s.data_bytes_per_txn, 409.6);
        assert_eq!(s.other_bytes_per_txn, 40.96);
        assert!((s.engine_bytes_per_txn - 1360.16).abs() < 1e-9);
        assert_eq!(s.device_bytes_per_txn, Some(1500.0));
        // The raw field is kept apart, whatever it says.
        assert_eq!(s.process_write_bytes_per_txn, 1_048_576.0);
        // No device counter (tmpfs): not measured, which is not 0.
        let mut b2 = b.clone();
        b2.remove(super::super::sample::DEVICE_WRITE_BYTES);
        let s = Summary::new(&ivs, &h, 1.0, &a, &b2);
        assert_eq!(s.device_bytes_per_txn, None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["device_bytes_per_txn"].is_null(), "{json}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod field_tests {
    use super::super::KEEL_METRIC_FIELDS;
    use super::*;

    #[test]
    fn every_field_another_engine_does_not_measure_is_a_field_of_the_json() {
        let iv = serde_json::to_value(Interval::default()).unwrap();
        let s = serde_json::to_value(Summary::default()).unwrap();
        for f in KEEL_METRIC_FIELDS {
            assert!(
                iv.get(f).is_some() || s.get(f).is_some(),
                "`{f}` is neither an interval nor a summary field"
            );
        }
        // What every engine measures is not among them.
        for f in [
            "tps",
            "lat_p95_ms",
            "device_bytes_per_txn",
            "peak_rss_bytes",
        ] {
            assert!(!KEEL_METRIC_FIELDS.contains(&f), "{f}");
        }
    }
}
