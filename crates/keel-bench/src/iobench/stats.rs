//! What one case measured: each worker's tally (counts and an HDR histogram
//! of latencies), merged into the [`CaseResult`] that the table, the JSON and
//! the charts show.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{Case, Method, Mode};

/// Highest latency the histograms hold exactly (one hour, in ns); longer
/// ones are recorded as this.
const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// The counts of one worker (or, merged, of one case).
#[derive(Debug)]
pub(super) struct Tally {
    /// Latency of every measured operation, in ns (a write's includes its
    /// sync with the `fsync` method).
    pub latency_ns: Histogram<u64>,
    pub reads: u64,
    pub writes: u64,
    /// Failed operations, measured or not.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
}

impl Tally {
    pub fn new() -> Self {
        Self {
            latency_ns: new_histogram(),
            reads: 0,
            writes: 0,
            errors: 0,
            first_error: None,
        }
    }

    /// Add another worker's counts.
    pub fn merge(&mut self, other: &Tally) {
        // Both histograms have the same bounds, so adding cannot fail; if it
        // ever did, the counts below would still be right.
        if let Err(e) = self.latency_ns.add(&other.latency_ns) {
            log::warn!("latency histogram merge failed: {e}");
        }
        self.reads += other.reads;
        self.writes += other.writes;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // Three significant digits from 1 ns to an hour: valid bounds, so this
    // cannot fail; the fallback only keeps the type total.
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
        .or_else(|_| Histogram::new(3))
        .unwrap_or_else(|e| panic!("HDR histogram with constant bounds: {e}"))
}

/// Latency figures of a case, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// The figures of one case: a row of the table and an entry of the JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Access pattern.
    pub mode: Mode,
    /// Bytes per operation.
    pub bs: usize,
    /// Concurrent workers.
    pub threads: usize,
    /// Data files.
    pub files: usize,
    /// Write method.
    pub method: Method,
    /// Share of reads, in percent (100 for read modes, 0 for write modes).
    pub read_pct: u8,
    /// Measured time in seconds (the warm-up excluded).
    pub time_s: f64,
    /// Operations completed per second.
    pub iops: f64,
    /// Mebibytes transferred per second.
    pub mib_s: f64,
    /// Latency of one operation.
    pub lat_ms: LatencyMs,
    /// Reads measured.
    pub reads: u64,
    /// Writes measured.
    pub writes: u64,
    /// Failed operations (warm-up included).
    pub errors: u64,
    /// The first failure, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// `flush` only: what the flusher did. Its `writes` are page writes,
    /// its time the sum of the timed flush calls, its `lat_ms.avg` the mean
    /// data-file write call (the percentiles are not measured: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush: Option<FlushFigures>,
}

/// The figures of a `flush` case beyond IOPS (see `flushcase`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlushFigures {
    /// Page writes kept in flight per batch (the case's `threads`).
    pub depth: usize,
    /// Whether each batch went to the doublewrite area first (and was
    /// synced there) before it was written in place.
    pub doublewrite: bool,
    /// Pages dirtied before each timed flush.
    pub dirty_pages_per_round: usize,
    /// Timed flush calls (warm-up rounds excluded).
    pub rounds: u64,
    /// Write calls on the data files (in place; doublewrite copies not
    /// counted) during the timed calls: a run of contiguous dirty pages is
    /// written with one call, so this can be fewer than the pages.
    pub write_requests: u64,
    /// Write calls per second of timed flushing.
    pub write_requests_per_s: f64,
    /// Write calls in flight on average over the timed flushes (their
    /// summed durations over the timed seconds): the depth the flusher
    /// actually kept, against `depth`.
    pub mean_writes_in_flight: f64,
    /// Share of the timed seconds with at least one data-file write in
    /// flight (the rest: the flusher's own work between writes, its syncs
    /// and the checkpoint).
    pub busy_share: f64,
    /// Pages a page cleaner wrote between a round's dirtying and its timed
    /// flush: neither counted nor timed (pages cleaners write *during* the
    /// call are counted, and their time is the call's).
    pub uncounted_cleaner_pages: u64,
    /// Rows of the table.
    pub table_rows: u64,
    /// Bytes of pages the table and its database hold.
    pub data_bytes: u64,
    /// This case's IOPS divided by those of the `wrnd` case with the same
    /// block size, threads, files and method (same device), if one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_wrnd: Option<f64>,
}

impl CaseResult {
    /// The figures of `case` from its merged tally over `time_s` seconds.
    pub(super) fn new(case: &Case, read_pct: u8, time_s: f64, tally: &Tally) -> Self {
        let ops = tally.reads + tally.writes;
        let iops = ops as f64 / time_s;
        let h = &tally.latency_ns;
        let ms = |ns: u64| ns as f64 / 1e6;
        let lat_ms = if h.is_empty() {
            LatencyMs::default()
        } else {
            LatencyMs {
                avg: h.mean() / 1e6,
                p50: ms(h.value_at_quantile(0.50)),
                p95: ms(h.value_at_quantile(0.95)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
            }
        };
        Self {
            mode: case.mode,
            bs: case.bs,
            threads: case.threads,
            files: case.files,
            method: case.method,
            read_pct,
            time_s,
            iops,
            mib_s: iops * case.bs as f64 / (1u64 << 20) as f64,
            lat_ms,
            reads: tally.reads,
            writes: tally.writes,
            errors: tally.errors,
            first_error: tally.first_error.clone(),
            flush: None,
        }
    }

    /// The case these figures belong to.
    pub fn case(&self) -> Case {
        Case {
            mode: self.mode,
            bs: self.bs,
            threads: self.threads,
            files: self.files,
            method: self.method,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn merged_tallies_give_rates_and_percentiles() {
        let mut a = Tally::new();
        let mut b = Tally::new();
        for i in 1..=100u64 {
            a.latency_ns.record(i * 1_000_000).unwrap();
        }
        a.reads = 100;
        b.writes = 100;
        b.errors = 2;
        b.first_error = Some("boom".into());
        b.latency_ns.record(500_000_000).unwrap();
        a.merge(&b);
        let case = Case {
            mode: Mode::Rwrnd,
            bs: 16384,
            threads: 2,
            files: 1,
            method: Method::Direct,
        };
        let r = CaseResult::new(&case, 50, 2.0, &a);
        assert_eq!(r.iops, 100.0);
        assert_eq!(r.mib_s, 100.0 * 16384.0 / 1048576.0);
        assert!((r.lat_ms.p50 - 51.0).abs() < 0.1, "{:?}", r.lat_ms);
        assert!((r.lat_ms.max - 500.0).abs() < 1.0, "{:?}", r.lat_ms);
        assert_eq!((r.errors, r.first_error.as_deref()), (2, Some("boom")));
        assert_eq!(r.case(), case);
    }
}
