//! `classic`: InnoDB 8.0's adaptive flushing, restated from the project's
//! design notes (see docs/flushing.md) and InnoDB's `buf0flu.cc` / `log0chkp.cc` (learned from, not copied).
//!
//! Once a second (a *full round*) the coordinator asks for:
//! - LRU flushing in every instance until `lru_scan_depth` frames are free
//!   (not limited by `io_capacity` — seed 5's surprise);
//! - flush-list flushing of `n` pages, with
//!   `n = (io_capacity × max(pct_for_dirty, pct_for_lsn) / 100
//!        + avg_page_rate + pages_for_lsn) / 3`, capped at `io_capacity_max`.
//!
//! `pct_for_dirty` and `pct_for_lsn` follow InnoDB's formulas, including
//! their integer truncations; `avg_page_rate` and `lsn_avg_rate` are
//! refreshed every `flushing_avg_loops` loops (or seconds; a loop counts at
//! most once a second, sync rounds included) as
//! `(new + old) / 2`. Past the sync mark (or when a writer already waits in
//! the free check) the round is a *sync* round: every page below
//! `current − max_modified_age_sync + 3 × lsn_avg_rate` is flushed, with
//! `flush_sync` back to back and up to 2 × `io_capacity_max` pages a round.
//! A round without redo activity since the last one flushes `io_capacity`
//! pages (InnoDB's idle flushing). A round that a thread short of free
//! frames wakes up before the second is over does LRU flushing only.

use std::time::Duration;

use super::{Decision, FlushMode, FlushPolicy, FlushTargets, InstanceTarget, Snapshot};
use crate::config::{FlushPolicyName, Options};
use crate::flush::batch::FlushKind;
use crate::flush::neighbors::NeighborMode;
use crate::page::Lsn;

/// InnoDB's `buf_flush_lsn_scan_factor`.
const LSN_SCAN_FACTOR: u64 = 3;
/// InnoDB's `BUF_LRU_MIN_LEN`: LRU flushing leaves at least this many pages
/// (or half a small instance) on the LRU list.
const LRU_MIN_LEN: usize = 256;
/// A full round is due every second.
const ROUND: Duration = Duration::from_secs(1);

/// The classic policy's knobs, taken from the options.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassicConfig {
    /// `io_capacity`.
    pub io_capacity: u64,
    /// `io_capacity_max` (already resolved: never 0).
    pub io_capacity_max: u64,
    /// `max_dirty_pages_pct`.
    pub max_dirty_pages_pct: f64,
    /// `max_dirty_pages_pct_lwm`.
    pub max_dirty_pages_pct_lwm: f64,
    /// `adaptive_flushing`.
    pub adaptive_flushing: bool,
    /// `adaptive_flushing_lwm` (percent of the log capacity).
    pub adaptive_flushing_lwm: f64,
    /// `flushing_avg_loops` (rounds, and seconds).
    pub flushing_avg_loops: u64,
    /// `lru_scan_depth`.
    pub lru_scan_depth: usize,
    /// `flush_sync`.
    pub flush_sync: bool,
}

impl ClassicConfig {
    /// The knobs from the options.
    pub fn from_options(o: &Options) -> ClassicConfig {
        ClassicConfig {
            io_capacity: o.io_capacity,
            io_capacity_max: o.effective_io_capacity_max(),
            max_dirty_pages_pct: o.max_dirty_pages_pct,
            max_dirty_pages_pct_lwm: o.max_dirty_pages_pct_lwm,
            adaptive_flushing: o.adaptive_flushing,
            adaptive_flushing_lwm: o.adaptive_flushing_lwm,
            flushing_avg_loops: o.flushing_avg_loops,
            lru_scan_depth: o.lru_scan_depth,
            flush_sync: o.flush_sync,
        }
    }

    /// InnoDB's `PCT_IO(p)`: `p` percent of `io_capacity`, truncated.
    fn pct_io(&self, pct: u64) -> u64 {
        (self.io_capacity as f64 * pct as f64 / 100.0) as u64
    }
}

/// InnoDB's `af_get_pct_for_dirty`: the percentage of `io_capacity` to
/// flush for the share of dirty pages.
pub fn pct_for_dirty(cfg: &ClassicConfig, dirty_pct: f64) -> u64 {
    if dirty_pct <= 0.0 {
        return 0;
    }
    if cfg.max_dirty_pages_pct_lwm == 0.0 {
        if dirty_pct >= cfg.max_dirty_pages_pct {
            return 100;
        }
    } else if dirty_pct >= cfg.max_dirty_pages_pct_lwm {
        return (dirty_pct * 100.0 / (cfg.max_dirty_pages_pct + 1.0)) as u64;
    }
    0
}

/// InnoDB's `af_get_pct_for_lsn`: the percentage of `io_capacity` to flush
/// for an age of `age` bytes, with `capacity` the log capacity and
/// `async_mark` the `max_modified_age_async`.
pub fn pct_for_lsn(cfg: &ClassicConfig, age: u64, capacity: u64, async_mark: u64) -> u64 {
    let lwm = (cfg.adaptive_flushing_lwm * capacity as f64 / 100.0) as u64;
    if age < lwm || async_mark == 0 {
        return 0;
    }
    if age < async_mark && !cfg.adaptive_flushing {
        return 0;
    }
    let f = (age as u128 * 100 / async_mark as u128) as f64;
    // Integer division of the capacities, as InnoDB does.
    let ratio = (cfg.io_capacity_max / cfg.io_capacity.max(1)) as f64;
    (ratio * (f * f.sqrt()) / 7.5) as u64
}

/// InnoDB's adaptive flushing (see the module doc).
#[derive(Debug)]
pub struct Classic {
    cfg: ClassicConfig,
    /// Averages and the window they are computed over.
    avg_page_rate: u64,
    lsn_avg_rate: u64,
    prev_lsn: Lsn,
    prev_time: Duration,
    prev_list_pages: u64,
    iterations: u64,
    /// When the averaging loop last counted (at most once a second).
    last_loop: Option<Duration>,
    /// When the last full round was decided (None before the first).
    last_full: Option<Duration>,
    /// LSN at the last full round (activity check).
    last_round_lsn: Lsn,
    /// The last full round's decision, repeated by LRU-only rounds.
    last_decision: Decision,
}

impl Classic {
    /// A policy with these knobs and no history.
    pub fn new(cfg: ClassicConfig) -> Classic {
        Classic {
            cfg,
            avg_page_rate: 0,
            lsn_avg_rate: 0,
            prev_lsn: 0,
            prev_time: Duration::ZERO,
            prev_list_pages: 0,
            iterations: 0,
            last_loop: None,
            last_full: None,
            last_round_lsn: 0,
            last_decision: Decision::default(),
        }
    }

    /// LRU targets: every instance keeps `lru_scan_depth` frames free.
    fn lru_targets(&self, s: &Snapshot) -> Vec<InstanceTarget> {
        s.instances
            .iter()
            .map(|i| {
                let keep = LRU_MIN_LEN.min(i.total / 2);
                let want = self.cfg.lru_scan_depth.min(i.total.saturating_sub(keep));
                InstanceTarget {
                    lru_want_free: if i.free < want { want } else { 0 },
                    lru_scan: self.cfg.lru_scan_depth,
                    ..InstanceTarget::default()
                }
            })
            .collect()
    }

    /// Refresh the averages every `flushing_avg_loops` loops or seconds; a
    /// loop counts at most once a second.
    fn update_averages(&mut self, s: &Snapshot) {
        if self
            .last_loop
            .is_some_and(|t| s.now.saturating_sub(t) < ROUND)
        {
            return;
        }
        self.last_loop = Some(s.now);
        self.iterations += 1;
        let elapsed = s.now.saturating_sub(self.prev_time).as_secs_f64();
        if self.iterations >= self.cfg.flushing_avg_loops
            || elapsed >= self.cfg.flushing_avg_loops as f64
        {
            let t = elapsed.max(1.0);
            let pages = s.list_pages_flushed.saturating_sub(self.prev_list_pages);
            self.avg_page_rate = ((pages as f64 / t) as u64 + self.avg_page_rate) / 2;
            let lsn_rate = (s.current_lsn.saturating_sub(self.prev_lsn) as f64 / t) as u64;
            self.lsn_avg_rate = (self.lsn_avg_rate + lsn_rate) / 2;
            self.prev_lsn = s.current_lsn;
            self.prev_time = s.now;
            self.prev_list_pages = s.list_pages_flushed;
            self.iterations = 0;
        }
    }

    /// The adaptive recommendation: pages per instance and the figures.
    fn recommend(&self, s: &Snapshot, age: u64) -> (Vec<usize>, Decision) {
        let dirty_pct = s.dirty_pct();
        let pfd = pct_for_dirty(&self.cfg, dirty_pct);
        let pfl = pct_for_lsn(&self.cfg, age, s.log_capacity, s.max_modified_age_async);
        let pct_total = pfd.max(pfl);
        let oldest = s.oldest_modification().unwrap_or(s.current_lsn);
        let target = oldest.saturating_add(self.lsn_avg_rate * LSN_SCAN_FACTOR);
        let per_inst: Vec<u64> = s
            .instances
            .iter()
            .map(|i| i.oldest_lsns.partition_point(|&l| l <= target) as u64)
            .collect();
        let sum_for_lsn = (per_inst.iter().sum::<u64>() / LSN_SCAN_FACTOR).max(1);
        let pages_for_lsn = sum_for_lsn.min(2 * self.cfg.io_capacity_max);
        let n = ((self.cfg.pct_io(pct_total) + self.avg_page_rate + pages_for_lsn) / 3)
            .min(self.cfg.io_capacity_max);
        let k = s.instances.len().max(1) as u64;
        let shares = per_inst
            .iter()
            .map(|&p| {
                if pfl > 30 {
                    // Far into the log: follow the age distribution.
                    ((p / LSN_SCAN_FACTOR + 1) * n / sum_for_lsn + 1) as usize
                } else {
                    (n / k) as usize
                }
            })
            .collect();
        let mode = if age >= s.max_modified_age_async {
            FlushMode::Async
        } else {
            FlushMode::Adaptive
        };
        let reason = format!(
            "{}: age {} ({:.0}% of async mark) -> pct_for_lsn {pfl}; dirty {dirty_pct:.1}% -> pct_for_dirty {pfd}; \
             n = ({} + avg_page_rate {} + pages_for_lsn {pages_for_lsn}) / 3 = {n}{}",
            mode.as_str(),
            age,
            100.0 * age as f64 / s.max_modified_age_async.max(1) as f64,
            self.cfg.pct_io(pct_total),
            self.avg_page_rate,
            if n == self.cfg.io_capacity_max {
                " (capped at io_capacity_max)"
            } else {
                ""
            },
        );
        let d = Decision {
            mode,
            n_requested: n,
            n_by_age: sum_for_lsn,
            avg_page_rate: self.avg_page_rate as f64,
            lsn_avg_rate: self.lsn_avg_rate as f64,
            pct_for_dirty: pfd as f64,
            pct_for_lsn: pfl as f64,
            reason,
            steady: None,
        };
        (shares, d)
    }

    /// The sync round: flush everything below the sync target.
    fn sync_round(&self, s: &Snapshot, age: u64, mut targets: Vec<InstanceTarget>) -> FlushTargets {
        // InnoDB's checkpointer asks for flushing up to current − sync mark,
        // and the request adds 3 × lsn_avg_rate "not to get old". Writers
        // already waiting in the free check need their reservations to fit
        // under the free-check limit too.
        let keep = s
            .max_modified_age_sync
            .min(s.free_check_limit.saturating_sub(s.redo_reserved));
        let up_to = s.current_lsn.saturating_sub(keep);
        let limit = up_to.saturating_add(self.lsn_avg_rate * LSN_SCAN_FACTOR);
        let k = s.instances.len().max(1);
        let (budget, sleep) = if self.cfg.flush_sync {
            (2 * self.cfg.io_capacity_max as usize, Duration::ZERO)
        } else {
            (self.cfg.io_capacity_max as usize, ROUND)
        };
        let per = budget.div_ceil(k);
        for t in &mut targets {
            t.list_pages = per;
            t.list_lsn_limit = limit;
            t.list_kind = FlushKind::Sync;
        }
        let why = if age > s.max_modified_age_sync {
            format!("age {age} past the sync mark {}", s.max_modified_age_sync)
        } else {
            format!(
                "age {age} under the sync mark {}, but {} writer(s) stopped in the free check \
                 need room for {} reserved bytes",
                s.max_modified_age_sync, s.free_check_waiters, s.redo_reserved
            )
        };
        let reason = format!(
            "sync: {why}; flushing every page older than LSN {limit}, up to {budget} pages this round{}",
            if self.cfg.flush_sync {
                ", rounds back to back (flush_sync)"
            } else {
                ", one round a second (flush_sync off)"
            }
        );
        FlushTargets {
            instances: targets,
            sleep,
            full_round: true,
            writer_limit: None,
            io_depth: None,
            checkpoint_each_batch: false,
            merge_instances: false,
            merged_batch: None,
            round_budget: None,
            eager_lru: false,
            neighbors_in_batch_size: false,
            neighbors: NeighborMode::Off,
            gap_pages: 0,
            oldest_latch_wait: Duration::ZERO,
            decision: Decision {
                mode: FlushMode::Sync,
                n_requested: budget as u64,
                n_by_age: budget as u64,
                avg_page_rate: self.avg_page_rate as f64,
                lsn_avg_rate: self.lsn_avg_rate as f64,
                reason,
                ..Decision::default()
            },
        }
    }
}

impl FlushPolicy for Classic {
    fn decide(&mut self, s: &Snapshot) -> FlushTargets {
        let t = self.decide_round(s);
        if t.full_round {
            self.last_decision = t.decision.clone();
        }
        t
    }

    fn name(&self) -> FlushPolicyName {
        FlushPolicyName::Classic
    }

    /// New knobs apply from the next round; the averages measured so far
    /// are kept (as InnoDB keeps them across `SET GLOBAL`). A shorter
    /// `flushing_avg_loops` refreshes them at the next round past it.
    fn retune(&mut self, opts: &Options) {
        self.cfg = ClassicConfig::from_options(opts);
    }
}

impl Classic {
    fn decide_round(&mut self, s: &Snapshot) -> FlushTargets {
        let mut targets = self.lru_targets(s);
        let oldest = s.oldest_modification().unwrap_or(s.current_lsn);
        let age = s.current_lsn.saturating_sub(oldest);
        // Sync flushing: the checkpointer's request, served at once.
        if age > s.max_modified_age_sync || s.free_check_waiters > 0 {
            // The averages keep moving while sync rounds run back to back,
            // at most one loop a second (InnoDB's coordinator falls back to
            // its recommendation whenever a second passes).
            self.update_averages(s);
            self.last_full = Some(s.now);
            self.last_round_lsn = s.current_lsn;
            return self.sync_round(s, age, targets);
        }
        if let Some(last) = self.last_full {
            let since = s.now.saturating_sub(last);
            if since < ROUND {
                // Woken early (a thread is short of free frames): LRU
                // only; the last full round's decision still stands.
                return FlushTargets {
                    instances: targets,
                    sleep: ROUND - since,
                    full_round: false,
                    writer_limit: None,
                    io_depth: None,
                    checkpoint_each_batch: false,
                    merge_instances: false,
                    merged_batch: None,
                    round_budget: None,
                    eager_lru: false,
                    neighbors_in_batch_size: false,
                    neighbors: NeighborMode::Off,
                    gap_pages: 0,
                    oldest_latch_wait: Duration::ZERO,
                    decision: self.last_decision.clone(),
                };
            }
        }
        let first = self.last_full.is_none();
        let active = s.current_lsn != self.last_round_lsn;
        self.last_full = Some(s.now);
        self.last_round_lsn = s.current_lsn;
        if first {
            // First time around: only remember where we are (as InnoDB does).
            self.prev_lsn = s.current_lsn;
            self.prev_time = s.now;
            self.prev_list_pages = s.list_pages_flushed;
            return FlushTargets {
                instances: targets,
                sleep: ROUND,
                full_round: true,
                writer_limit: None,
                io_depth: None,
                checkpoint_each_batch: false,
                merge_instances: false,
                merged_batch: None,
                round_budget: None,
                eager_lru: false,
                neighbors_in_batch_size: false,
                neighbors: NeighborMode::Off,
                gap_pages: 0,
                oldest_latch_wait: Duration::ZERO,
                decision: Decision {
                    reason: "first round: measuring".into(),
                    ..Decision::default()
                },
            };
        }
        if !active {
            // No redo since the last round: idle flushing at io_capacity.
            let k = s.instances.len().max(1) as u64;
            let n = self.cfg.io_capacity;
            let dirty = s.dirty();
            for t in &mut targets {
                t.list_pages = n.div_ceil(k) as usize;
                t.list_kind = FlushKind::Background;
            }
            return FlushTargets {
                instances: targets,
                sleep: ROUND,
                full_round: true,
                writer_limit: None,
                io_depth: None,
                checkpoint_each_batch: false,
                merge_instances: false,
                merged_batch: None,
                round_budget: None,
                eager_lru: false,
                neighbors_in_batch_size: false,
                neighbors: NeighborMode::Off,
                gap_pages: 0,
                oldest_latch_wait: Duration::ZERO,
                decision: Decision {
                    mode: FlushMode::Idle,
                    n_requested: if dirty > 0 { n } else { 0 },
                    avg_page_rate: self.avg_page_rate as f64,
                    lsn_avg_rate: self.lsn_avg_rate as f64,
                    reason: format!(
                        "idle: no redo since the last round; background flushing of up to \
                         io_capacity = {n} pages ({dirty} dirty)"
                    ),
                    ..Decision::default()
                },
            };
        }
        self.update_averages(s);
        let (shares, decision) = self.recommend(s, age);
        for (t, n) in targets.iter_mut().zip(shares) {
            t.list_pages = n;
            t.list_kind = FlushKind::Adaptive;
        }
        FlushTargets {
            instances: targets,
            sleep: ROUND,
            full_round: true,
            writer_limit: None,
            io_depth: None,
            checkpoint_each_batch: false,
            merge_instances: false,
            merged_batch: None,
            round_budget: None,
            eager_lru: false,
            neighbors_in_batch_size: false,
            neighbors: NeighborMode::Off,
            gap_pages: 0,
            oldest_latch_wait: Duration::ZERO,
            decision,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::flush::policy::InstanceSnapshot;

    fn cfg() -> ClassicConfig {
        ClassicConfig::from_options(&Options::default())
    }

    /// Log capacity 100 MB with the engine's marks: free-check limit 80 MB,
    /// async 70 MB, sync 75 MB.
    fn snap(now_s: u64, lsn: u64, oldest: Option<u64>, dirty: usize) -> Snapshot {
        let oldest_lsns = match oldest {
            Some(o) => (0..dirty as u64).map(|k| o + k * 1000).collect(),
            None => vec![],
        };
        Snapshot {
            now: Duration::from_secs(now_s),
            current_lsn: lsn,
            checkpoint_lsn: oldest.unwrap_or(lsn),
            flushed_lsn: lsn,
            log_capacity: 100_000_000,
            free_check_limit: 80_000_000,
            max_modified_age_async: 70_000_000,
            max_modified_age_sync: 75_000_000,
            flush_list_sample: 100_000,
            instances: vec![InstanceSnapshot {
                total: 10_000,
                free: 2_000,
                lru_len: 8_000,
                dirty,
                oldest_modification: oldest,
                oldest_lsns,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn pct_for_lsn_pins_innodb_formula() {
        let c = cfg(); // io_capacity 200, max 2000: ratio 10
        let cap = 100_000_000;
        let async_mark = 70_000_000;
        // 50 % of the async mark: 10 × 50 × √50 / 7.5 = 471.4
        assert_eq!(pct_for_lsn(&c, async_mark / 2, cap, async_mark), 471);
        // 95 %: 10 × 95 × √95 / 7.5 = 1234.6
        assert_eq!(
            pct_for_lsn(&c, async_mark / 100 * 95, cap, async_mark),
            1234
        );
        // Below adaptive_flushing_lwm (10 % of capacity): nothing.
        assert_eq!(pct_for_lsn(&c, 9_999_999, cap, async_mark), 0);
        // Adaptive flushing off: nothing below the async mark, the formula past it.
        let off = ClassicConfig {
            adaptive_flushing: false,
            ..cfg()
        };
        assert_eq!(pct_for_lsn(&off, async_mark / 2, cap, async_mark), 0);
        assert_eq!(pct_for_lsn(&off, async_mark, cap, async_mark), 1333);
        // The capacities' ratio is an integer division: 2000 / 300 = 6.
        let c3 = ClassicConfig {
            io_capacity: 300,
            ..cfg()
        };
        assert_eq!(pct_for_lsn(&c3, async_mark / 2, cap, async_mark), 282);
    }

    #[test]
    fn pct_for_dirty_pins_innodb_formula() {
        let c = cfg(); // lwm 10, max 90
        assert_eq!(pct_for_dirty(&c, 0.0), 0);
        assert_eq!(pct_for_dirty(&c, 5.0), 0);
        assert_eq!(pct_for_dirty(&c, 10.0), 10); // 1000 / 91
        assert_eq!(pct_for_dirty(&c, 95.0), 104); // 9500 / 91
        let no_lwm = ClassicConfig {
            max_dirty_pages_pct_lwm: 0.0,
            ..cfg()
        };
        assert_eq!(pct_for_dirty(&no_lwm, 5.0), 0);
        assert_eq!(pct_for_dirty(&no_lwm, 89.9), 0);
        assert_eq!(pct_for_dirty(&no_lwm, 95.0), 100);
    }

    #[test]
    fn first_round_measures_then_recommends() {
        let mut p = Classic::new(cfg());
        let t = p.decide(&snap(0, 1_000_000, Some(500_000), 100));
        assert!(t.instances.iter().all(|i| i.list_pages == 0));
        assert_eq!(t.sleep, ROUND);
        // One second later, age = 35 MB (50 % of the async mark), 1000
        // dirty pages of 10 000 (10 %): pct_for_lsn 471, pct_for_dirty 10.
        let mut s = snap(1, 36_000_000, Some(1_000_000), 1000);
        s.list_pages_flushed = 0;
        let t = p.decide(&s);
        let d = &t.decision;
        assert_eq!(d.mode, FlushMode::Adaptive);
        assert_eq!(d.pct_for_lsn, 471.0);
        assert_eq!(d.pct_for_dirty, 10.0);
        // Averages are still 0 (30 loops not reached): pages_for_lsn counts
        // the pages at the oldest LSN only: 1 / 3 → 0 → at least 1.
        // n = (200 × 4.71 + 0 + 1) / 3 = (942 + 1) / 3 = 314
        assert_eq!(d.n_requested, 314);
        assert_eq!(d.n_by_age, 1);
        // pct_for_lsn > 30: shares follow the age distribution: (0/3+1)×314/1+1
        assert_eq!(t.instances[0].list_pages, 315);
        assert_eq!(t.instances[0].list_kind, FlushKind::Adaptive);
        assert_eq!(t.instances[0].list_lsn_limit, Lsn::MAX);
    }

    #[test]
    fn averages_move_every_flushing_avg_loops() {
        let mut p = Classic::new(ClassicConfig {
            flushing_avg_loops: 2,
            ..cfg()
        });
        p.decide(&snap(0, 0, Some(0), 10));
        let mut s = snap(1, 10_000_000, Some(0), 10);
        s.list_pages_flushed = 300;
        p.decide(&s);
        assert_eq!(p.lsn_avg_rate, 0, "one loop is not enough");
        let mut s = snap(2, 20_000_000, Some(0), 10);
        s.list_pages_flushed = 600;
        p.decide(&s);
        // Over 2 s: 300 pages/s and 10 MB/s, averaged with 0.
        assert_eq!(p.avg_page_rate, 150);
        assert_eq!(p.lsn_avg_rate, 5_000_000);
    }

    #[test]
    fn back_to_back_sync_rounds_count_one_averaging_loop_a_second() {
        let mut p = Classic::new(ClassicConfig {
            flushing_avg_loops: 2,
            ..cfg()
        });
        p.decide(&snap(0, 1, Some(1), 10));
        // Past the sync mark: rounds 100 ms apart.
        for ms in [1000, 1100, 1200, 1300] {
            let mut s = snap(0, 80_000_001, Some(1), 10);
            s.now = Duration::from_millis(ms);
            assert_eq!(p.decide(&s).decision.mode, FlushMode::Sync);
        }
        assert_eq!(p.lsn_avg_rate, 0, "four rounds in one second are one loop");
        let mut s = snap(2, 80_000_001, Some(1), 10);
        s.now = Duration::from_millis(2000);
        p.decide(&s);
        // Second loop, 2 s after the window opened: 40 MB/s averaged with 0.
        assert_eq!(p.lsn_avg_rate, 20_000_000);
    }

    #[test]
    fn n_is_capped_at_io_capacity_max() {
        let mut p = Classic::new(cfg());
        p.decide(&snap(0, 1, Some(1), 10));
        // Age 95 % of the async mark: pct 1234 → PCT_IO 2468; pages_for_lsn
        // at least 1: n = (2468 + 0 + 1) / 3 = 823.
        let s = snap(1, 66_500_001, Some(1), 10);
        let d = p.decide(&s).decision;
        assert_eq!(d.mode, FlushMode::Adaptive);
        assert_eq!(d.n_requested, 823);
        let mut small = Classic::new(ClassicConfig {
            io_capacity: 200,
            io_capacity_max: 400,
            ..cfg()
        });
        // Every one of 3000 dirty pages is "old" for a huge redo rate:
        // pages_for_lsn = min(3000 / 3, 2 × 400) = 800; pct_for_lsn
        // 2 × 95 × √95 / 7.5 = 246, PCT_IO 492: (492 + 800) / 3 = 430 → 400.
        small.lsn_avg_rate = 1 << 40;
        small.decide(&snap(0, 1, Some(1), 3000));
        let d = small.decide(&snap(1, 66_500_001, Some(1), 3000)).decision;
        assert_eq!(d.pct_for_lsn, 246.0);
        assert_eq!(d.n_by_age, 1000);
        assert_eq!(d.n_requested, 400);
        assert!(d.reason.contains("capped"), "{}", d.reason);
    }

    #[test]
    fn retuning_applies_the_new_knobs_and_keeps_the_averages() {
        let mut p = Classic::new(cfg());
        p.lsn_avg_rate = 1 << 40;
        p.decide(&snap(0, 1, Some(1), 3000));
        let (avg_pages, avg_lsn) = (p.avg_page_rate, p.lsn_avg_rate);
        let mut o = Options {
            io_capacity: 200,
            io_capacity_max: 400,
            ..Options::default()
        };
        o.flush_policy = FlushPolicyName::Classic;
        p.retune(&o);
        assert_eq!((p.avg_page_rate, p.lsn_avg_rate), (avg_pages, avg_lsn));
        assert_eq!(p.cfg, ClassicConfig::from_options(&o));
        // The same round as in `n_is_capped_at_io_capacity_max`, now capped
        // at the new io_capacity_max.
        let d = p.decide(&snap(1, 66_500_001, Some(1), 3000)).decision;
        assert_eq!(d.n_requested, 400);
        assert!(d.reason.contains("capped"), "{}", d.reason);
    }

    #[test]
    fn past_the_sync_mark_rounds_go_back_to_back() {
        let mut p = Classic::new(cfg());
        p.decide(&snap(0, 1, Some(1), 10));
        let s = snap(1, 76_000_001, Some(1), 10);
        let t = p.decide(&s);
        assert_eq!(t.decision.mode, FlushMode::Sync);
        assert_eq!(t.sleep, Duration::ZERO);
        let i = &t.instances[0];
        assert_eq!(i.list_kind, FlushKind::Sync);
        assert_eq!(i.list_pages, 4000); // 2 × io_capacity_max
                                        // Up to current − sync mark (+ 3 × lsn_avg_rate, 0 here).
        assert_eq!(i.list_lsn_limit, 76_000_001 - 75_000_000);
        // Without flush_sync: io_capacity_max, once a second.
        let mut q = Classic::new(ClassicConfig {
            flush_sync: false,
            ..cfg()
        });
        let t = q.decide(&s);
        assert_eq!(t.sleep, ROUND);
        assert_eq!(t.instances[0].list_pages, 2000);
    }

    #[test]
    fn waiting_writers_force_a_sync_round_that_makes_room() {
        let mut p = Classic::new(cfg());
        // Age 74 MB: under the sync mark, but writers wait because 10 MB
        // are reserved against the 80 MB free-check limit.
        let mut s = snap(0, 74_000_001, Some(1), 10);
        s.free_check_waiters = 3;
        s.redo_reserved = 10_000_000;
        let t = p.decide(&s);
        assert_eq!(t.decision.mode, FlushMode::Sync);
        // Room for them: the age must drop to 80 − 10 = 70 MB.
        assert_eq!(t.instances[0].list_lsn_limit, 4_000_001);
    }

    #[test]
    fn idle_rounds_flush_io_capacity_and_early_wakes_do_lru_only() {
        let mut p = Classic::new(cfg());
        p.decide(&snap(0, 5_000, Some(1), 10));
        let t = p.decide(&snap(1, 5_000, Some(1), 10));
        assert_eq!(t.decision.mode, FlushMode::Idle);
        assert_eq!(t.instances[0].list_pages, 200);
        assert_eq!(t.instances[0].list_kind, FlushKind::Background);
        // 300 ms later a thread short of frames wakes the coordinator.
        let mut s = snap(1, 6_000, Some(1), 10);
        s.now = Duration::from_millis(1300);
        s.instances[0].free = 10;
        let t = p.decide(&s);
        assert!(!t.full_round);
        assert_eq!(
            t.decision.mode,
            FlushMode::Idle,
            "the last full round's mode"
        );
        assert_eq!(t.instances[0].list_pages, 0);
        assert_eq!(t.instances[0].lru_want_free, 1024);
        assert_eq!(t.sleep, Duration::from_millis(700));
    }

    #[test]
    fn lru_flushing_keeps_lru_scan_depth_free_but_not_the_whole_pool() {
        let p = Classic::new(cfg());
        let mut s = snap(0, 1, None, 0);
        s.instances[0].free = 100;
        assert_eq!(p.lru_targets(&s)[0].lru_want_free, 1024);
        s.instances[0].free = 1024;
        assert_eq!(p.lru_targets(&s)[0].lru_want_free, 0);
        // A 600-frame instance keeps its 256 minimum on the LRU list.
        s.instances[0].total = 600;
        s.instances[0].free = 0;
        assert_eq!(p.lru_targets(&s)[0].lru_want_free, 344);
    }

    #[test]
    fn shares_split_evenly_below_pct_for_lsn_30() {
        let mut p = Classic::new(cfg());
        let two = |mut s: Snapshot| {
            s.instances[0].lru_len = 10_000;
            s.instances[0].free = 0;
            s.instances.push(s.instances[0].clone());
            s
        };
        p.decide(&two(snap(0, 1, Some(1), 10)));
        // Age 5 MB, below adaptive_flushing_lwm: pct_for_lsn 0. Dirty 50 %:
        // pct_for_dirty 5000 / 91 = 54, PCT_IO 108; pages_for_lsn 2 / 3 → 1.
        // n = (108 + 0 + 1) / 3 = 36, split evenly: 18 each.
        let t = p.decide(&two(snap(1, 5_000_001, Some(1), 5_000)));
        assert_eq!(t.decision.pct_for_lsn, 0.0);
        assert_eq!(t.decision.pct_for_dirty, 54.0);
        assert_eq!(t.decision.n_requested, 36);
        assert_eq!(t.instances[0].list_pages, 18);
        assert_eq!(t.instances[1].list_pages, 18);
    }

    #[test]
    fn shares_follow_the_age_distribution_past_pct_for_lsn_30() {
        let mut p = Classic::new(cfg());
        let two = |mut s: Snapshot| {
            let mut other = s.instances[0].clone();
            // The second instance holds 3 old pages, the first 30.
            other.oldest_lsns.truncate(3);
            other.dirty = 3;
            s.instances.push(other);
            s
        };
        p.lsn_avg_rate = 10_000; // target = oldest + 30 000: 31 pages of the first
        p.decide(&two(snap(0, 1, Some(1), 40)));
        let t = p.decide(&two(snap(1, 35_000_001, Some(1), 40)));
        let d = &t.decision;
        assert_eq!(d.pct_for_lsn, 471.0);
        // by age: (31 + 3) / 3 = 11; n = (942 + 0 + 11) / 3 = 317
        assert_eq!(d.n_by_age, 11);
        assert_eq!(d.n_requested, 317);
        // (31/3 + 1) × 317 / 11 + 1 = 318; (3/3 + 1) × 317 / 11 + 1 = 58
        assert_eq!(t.instances[0].list_pages, 318);
        assert_eq!(t.instances[1].list_pages, 58);
    }
}
