//! FLUSHING: the policy and its knobs, the mode and reason of its last
//! round, its figures (`classic`'s or `steady`'s), pages flushed by kind,
//! waits, the throttle and the cleaners.

use std::fmt;

use super::{section, Get, Rate, MIB};
use crate::config::{FlushPolicyName, Options};
use crate::flush::Decision;
use crate::metrics::{pause_buckets, pause_quantile};

/// Something counted for each kind of page flushing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PagesByKind<T> {
    /// Flush-list pages written for the checkpoint age.
    pub adaptive: T,
    /// Idle and dirty-percentage flushing, `Db::flush` and `Db::close`.
    pub background: T,
    /// Written from the cold end of the LRU list by the cleaners.
    pub lru: T,
    /// Written in sync flushing (a writer waiting for log space).
    pub sync: T,
    /// Written one at a time by a user thread that found no free frame.
    pub single_page: T,
    /// Neighbors written along with the pages above.
    pub neighbors: T,
    /// Clean pages written to fill a gap between two dirty runs, so that
    /// one write carries both (not among the pages above).
    pub gap_fillers: T,
}

impl<T: Copy> PagesByKind<T> {
    /// (name in the report, value) for each kind, in the report's order.
    pub fn kinds(&self) -> [(&'static str, T); 7] {
        [
            ("adaptive", self.adaptive),
            ("background", self.background),
            ("LRU", self.lru),
            ("sync", self.sync),
            ("single page", self.single_page),
            ("neighbors", self.neighbors),
            ("gap fillers", self.gap_fillers),
        ]
    }
}

const KIND_METRICS: [&str; 7] = [
    "buffer_flush_adaptive_total_pages",
    "buffer_flush_background_total_pages",
    "buffer_LRU_batch_flush_total_pages",
    "buffer_flush_sync_total_pages",
    "buffer_LRU_single_flush_total_pages",
    "buffer_flush_neighbor_total_pages",
    "buffer_flush_gap_pages",
];

fn by_kind<T>(f: impl Fn(&str) -> T) -> PagesByKind<T> {
    let [a, b, l, s, p, n, g] = KIND_METRICS;
    PagesByKind {
        adaptive: f(a),
        background: f(b),
        lru: f(l),
        sync: f(s),
        single_page: f(p),
        neighbors: f(n),
        gap_fillers: f(g),
    }
}

/// `classic`'s figures behind its last full round.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassicFigures {
    /// Pages asked for (`n_to_flush`).
    pub n_to_flush_requested: u64,
    /// Of those, asked for because of the checkpoint age.
    pub n_to_flush_by_age: u64,
    /// Percentage of `io_capacity` asked for by dirtiness.
    pub pct_for_dirty: u64,
    /// Percentage of `io_capacity` asked for by age.
    pub pct_for_lsn: u64,
    /// Averaged page rate, pages per second.
    pub avg_page_rate: u64,
    /// Averaged redo rate, bytes per second.
    pub lsn_avg_rate_bytes: u64,
}

/// `steady`'s estimates and the writers' pauses.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SteadyStatus {
    /// Redo rate, short average, bytes per second.
    pub redo_rate_bytes: u64,
    /// Its decaying peak.
    pub redo_rate_peak_bytes: u64,
    /// Device write bandwidth over its busy time, pages per second.
    pub device_write_pages_per_s: u64,
    /// Page writes kept in flight.
    pub device_write_queue_depth: u64,
    /// Redo bytes the checkpoint retires per page written.
    pub redo_bytes_per_page: u64,
    /// The redo rate the flusher can retire, bytes per second.
    pub base_rate_bytes: u64,
    /// The position on the throttle curve (2 below F, 1 at S, 0 at H).
    pub pos_ratio: f64,
    /// The neighbor mode batches follow now (`flush_neighbors`, or the
    /// policy's choice under `auto`).
    pub neighbors_mode: u64,
    /// What one write costs the device beyond its pages, in pages (0 until
    /// measured).
    pub write_cost_pages: f64,
    /// Writer pauses.
    pub pauses: u64,
    /// Their total, in microseconds.
    pub pause_us_total: u64,
    /// The longest, in microseconds.
    pub pause_us_max: u64,
    /// The histogram bucket bound at or under which 99% of them fall
    /// (`None`: no pause, or beyond the largest bound).
    pub pause_us_p99: Option<u64>,
}

/// `flush_neighbors` under `steady`: the option, and under `auto` the mode
/// chosen and the write cost it was chosen by.
fn steady_neighbors(o: &Options, s: &SteadyStatus) -> String {
    match o.flush_neighbors.fixed() {
        Some(m) => m.as_option().to_string(),
        None if s.write_cost_pages >= 1000.0 => format!(
            "auto: {} now, a write costs over 1000 pages more than it carries",
            s.neighbors_mode
        ),
        None if s.write_cost_pages > 0.0 => format!(
            "auto: {} now, a write costs {:.1} pages more than it carries",
            s.neighbors_mode, s.write_cost_pages
        ),
        None => format!(
            "auto: {} now, write cost not measured yet",
            s.neighbors_mode
        ),
    }
}

/// FLUSHING.
#[derive(Clone, Debug, PartialEq)]
pub struct FlushingStatus {
    /// The policy's last decision: mode, reason, figures.
    pub decision: Decision,
    /// `classic`'s figures (0 under `steady`).
    pub classic: ClassicFigures,
    /// `steady`'s figures (0 under `classic`).
    pub steady: SteadyStatus,
    /// Pages flushed since open, by kind.
    pub pages_flushed: PagesByKind<u64>,
    /// Pages flushed per second, by kind, over
    /// [`Status::rates_over_s`](crate::Status::rates_over_s).
    pub pages_flushed_per_second: Option<PagesByKind<f64>>,
    /// Writers that waited in sync flushing.
    pub sync_flush_waits: u64,
    /// Their total wait, in microseconds.
    pub sync_flush_wait_us_total: u64,
    /// The longest, in microseconds.
    pub sync_flush_wait_us_max: u64,
    /// Writers that waited at the free-check limit.
    pub free_check_waits: u64,
    /// Their total wait, in microseconds.
    pub free_check_wait_us_total: u64,
    /// Single-page flush scans of the LRU list.
    pub lru_single_flush_scans: u64,
    /// Waits for a free frame.
    pub lru_free_frame_waits: u64,
    /// Time writers spent throttled, in microseconds.
    pub throttle_delay_us_total: u64,
    /// Page cleaner rounds.
    pub cleaner_rounds: u64,
    /// Write batches.
    pub batches: u64,
    /// The last round's length, in microseconds.
    pub last_round_us: u64,
    /// Doublewrite batches.
    pub doublewrite_batches: u64,
    /// Pages written through the doublewrite buffer.
    pub doublewrite_pages: u64,
    /// Data file syncs.
    pub data_file_syncs: u64,
    /// Pages passed over because they were latched.
    pub latched_skips: u64,
}

impl FlushingStatus {
    pub(super) fn new(g: Get<'_>, decision: Decision) -> FlushingStatus {
        let pauses = g("writer_pauses");
        FlushingStatus {
            decision,
            classic: ClassicFigures {
                n_to_flush_requested: g("buffer_flush_n_to_flush_requested"),
                n_to_flush_by_age: g("buffer_flush_n_to_flush_by_age"),
                pct_for_dirty: g("buffer_flush_pct_for_dirty"),
                pct_for_lsn: g("buffer_flush_pct_for_lsn"),
                avg_page_rate: g("buffer_flush_avg_page_rate"),
                lsn_avg_rate_bytes: g("buffer_flush_lsn_avg_rate"),
            },
            steady: SteadyStatus {
                redo_rate_bytes: g("log_redo_rate"),
                redo_rate_peak_bytes: g("log_redo_rate_peak"),
                device_write_pages_per_s: g("device_write_bw_estimate"),
                device_write_queue_depth: g("device_write_queue_depth"),
                redo_bytes_per_page: g("log_bytes_per_page_flushed"),
                base_rate_bytes: g("steady_base_rate"),
                pos_ratio: g("steady_pos_ratio") as f64 / 1000.0,
                neighbors_mode: g("buffer_flush_neighbors_mode"),
                write_cost_pages: g("steady_write_cost_pages_x1000") as f64 / 1000.0,
                pauses,
                pause_us_total: g("buffer_flush_throttle_delay_us_total"),
                pause_us_max: g("writer_pause_us_max"),
                pause_us_p99: pause_quantile(&pause_buckets(g), pauses, 0.99),
            },
            pages_flushed: by_kind(g),
            pages_flushed_per_second: None,
            sync_flush_waits: g("buffer_flush_sync_waits"),
            sync_flush_wait_us_total: g("buffer_flush_sync_wait_us_total"),
            sync_flush_wait_us_max: g("buffer_flush_sync_wait_us_max"),
            free_check_waits: g("log_free_check_waits"),
            free_check_wait_us_total: g("log_free_check_wait_us_total"),
            lru_single_flush_scans: g("buffer_LRU_single_flush_num_scan"),
            lru_free_frame_waits: g("buffer_LRU_get_free_waits"),
            throttle_delay_us_total: g("buffer_flush_throttle_delay_us_total"),
            cleaner_rounds: g("buffer_flush_cleaner_rounds"),
            batches: g("buffer_flush_batches"),
            last_round_us: g("buffer_flush_round_us"),
            doublewrite_batches: g("dblwr_writes"),
            doublewrite_pages: g("dblwr_pages_written"),
            data_file_syncs: g("os_data_fsyncs"),
            latched_skips: g("buffer_flush_latched_skips"),
        }
    }

    pub(super) fn set_rates(&mut self, r: Rate<'_>) {
        self.pages_flushed_per_second = Some(by_kind(r));
    }

    pub(super) fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        o: &Options,
        over_s: Option<f64>,
    ) -> fmt::Result {
        section(f, "FLUSHING")?;
        if o.flush_policy == FlushPolicyName::Steady {
            self.write_steady(f, o)?;
        } else {
            self.write_classic(f, o)?;
        }
        self.write_pages(f, o, over_s)
    }

    /// The last round's reason, or that there was none.
    fn reason(&self) -> &str {
        if self.decision.reason.is_empty() {
            "(no round yet)"
        } else {
            &self.decision.reason
        }
    }

    /// `steady`: what it is doing now in one line, its estimates, the
    /// writers' pauses.
    fn write_steady(&self, f: &mut fmt::Formatter<'_>, o: &Options) -> fmt::Result {
        let s = &self.steady;
        let p99 = match s.pause_us_p99 {
            Some(us) => format!("p99 <= {:.0} ms", us as f64 / 1000.0),
            None => "p99 -".to_string(),
        };
        write!(
            f,
            "Flush policy        steady (no I/O-capacity knob; ignores {}; flush_neighbors {})\n\
             Now                 {}\n\
             Estimates           redo {:.2} MiB/s (peak {:.2}); device {} pages/s of busy time, \
             {} writes in flight; {} redo bytes retired per page written\n\
             Writers             allowed {:.2} MiB/s x position {:.2} on the curve\n\
             Writer pauses       {} ({:.1} ms in total, {p99}, longest {:.1} ms)\n",
            o.flush_policy.ignored_options().join(", "),
            steady_neighbors(o, s),
            self.reason(),
            s.redo_rate_bytes as f64 / MIB,
            s.redo_rate_peak_bytes as f64 / MIB,
            s.device_write_pages_per_s,
            s.device_write_queue_depth,
            s.redo_bytes_per_page,
            s.base_rate_bytes as f64 / MIB,
            s.pos_ratio,
            s.pauses,
            s.pause_us_total as f64 / 1000.0,
            s.pause_us_max as f64 / 1000.0,
        )
    }

    /// `classic`: its knobs, the mode and the reason of the last round, the
    /// figures behind it.
    fn write_classic(&self, f: &mut fmt::Formatter<'_>, o: &Options) -> fmt::Result {
        let c = &self.classic;
        write!(
            f,
            "Flush policy        {} (io_capacity {}, io_capacity_max {}, lru_scan_depth {}, \
             flush_neighbors {}, max_dirty_pages_pct {}, lwm {}, adaptive_flushing {}, \
             flush_sync {})\n\
             Mode                {}\n\
             Last round          {}\n\
             Last full round     n_to_flush {} pages requested, {} of them by age; \
             pct_for_dirty {}%, pct_for_lsn {}%\n\
             Averages            page rate {} pages/s, redo rate {} bytes/s ({:.2} MiB/s)\n",
            o.flush_policy.as_str(),
            o.io_capacity,
            o.effective_io_capacity_max(),
            o.lru_scan_depth,
            o.flush_neighbors,
            o.max_dirty_pages_pct,
            o.max_dirty_pages_pct_lwm,
            o.adaptive_flushing,
            o.flush_sync,
            self.decision.mode.as_str(),
            self.reason(),
            c.n_to_flush_requested,
            c.n_to_flush_by_age,
            c.pct_for_dirty,
            c.pct_for_lsn,
            c.avg_page_rate,
            c.lsn_avg_rate_bytes,
            c.lsn_avg_rate_bytes as f64 / MIB,
        )
    }

    /// Pages flushed by kind (totals and rates), waits, the throttle,
    /// cleaner rounds and doublewrite.
    fn write_pages(
        &self,
        f: &mut fmt::Formatter<'_>,
        o: &Options,
        over_s: Option<f64>,
    ) -> fmt::Result {
        let totals: Vec<String> = self
            .pages_flushed
            .kinds()
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        writeln!(f, "Pages flushed       {}", totals.join(", "))?;
        if let (Some(r), Some(secs)) = (&self.pages_flushed_per_second, over_s) {
            let rates: Vec<String> = r
                .kinds()
                .iter()
                .map(|(name, n)| format!("{name} {n:.1}"))
                .collect();
            writeln!(
                f,
                "Pages flushed/s     {} (over the last {secs:.1} s)",
                rates.join(", ")
            )?;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "Sync flush waits    {} ({:.1} ms in total, longest {:.1} ms)\n\
             Free-check waits    {} ({:.1} ms in total)\n\
             LRU                 {} single-page flush scans, {} free-frame waits\n\
             Throttle delay      {:.1} ms in total{}\n\
             Cleaner rounds {}, batches {}, last round {:.1} ms; doublewrite batches {}, \
             pages {}; data file syncs {}; pages passed over while latched {}\n",
            self.sync_flush_waits,
            ms(self.sync_flush_wait_us_total),
            ms(self.sync_flush_wait_us_max),
            self.free_check_waits,
            ms(self.free_check_wait_us_total),
            self.lru_single_flush_scans,
            self.lru_free_frame_waits,
            ms(self.throttle_delay_us_total),
            if o.flush_policy == FlushPolicyName::Classic {
                " (classic never throttles writers: it stops them at the free-check limit)"
            } else {
                ""
            },
            self.cleaner_rounds,
            self.batches,
            ms(self.last_round_us),
            self.doublewrite_batches,
            self.doublewrite_pages,
            self.data_file_syncs,
            self.latched_skips,
        )
    }
}
