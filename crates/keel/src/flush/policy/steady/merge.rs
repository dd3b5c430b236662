//! Whether the device rewards long writes: `steady`'s choice of neighbor
//! mode under `flush_neighbors = auto`.
//!
//! # Why
//! A disk or volume limited in operations per second (a cloud volume's
//! IOPS, a kernel throttle, a spindle's seeks) charges a write of a run of
//! pages almost what it charges one page. There, writing the contiguous
//! run of dirty pages around each page the flusher picks (InnoDB's
//! `flush_neighbors = 1`) gives it several pages for one operation: on
//! this project's test machine throttled to 300 write IOPS, `steady` made
//! 1,319 transactions a second with contiguous neighbors against 834
//! without, and 3,432 against 1,859 at 1,000 IOPS (`docs/flushing.md`).
//! A device limited in bytes (or fast at any size, like NVMe) charges by
//! the page, and the neighbors are pages written early, many of them to
//! be dirtied and written again: on a model limited to 10 MiB/s the same
//! neighbors halved `steady`'s median second. So the mode follows what the
//! device is measured to charge.
//!
//! # The measure
//! Every write is taken to cost the device `a + b·n` for `n` pages: `a` per
//! operation, `b` per page. Two kinds of writes give two points of that
//! line without any probe:
//! - the in-place writes: busy time (time with a data-file write in
//!   flight) per write call, and pages per call (one, or a run);
//! - the doublewrite copies begun with no in-place write in flight: time
//!   per area write (its sync not included: the in-place writes are
//!   timed without theirs), and pages per area (up to
//!   `doublewrite_pages`, written in one call).
//!
//! The in-place point is measured at the flusher's queue depth, so on a
//! device that serves writes in parallel its busy time per call is
//! shorter than one write's latency, while the doublewrite point is one
//! write alone: both errors make `a` look smaller, never larger, so the
//! measure only errs towards writing pages alone, the mode that was the
//! default before it. An area write begun while in-place writes are in
//! flight (every chunk of a batch but the first: the pipeline copies
//! chunk *k + 1* while chunk *k* is written) is queued behind them and
//! would be timed with their wait, a third error of that sign and the
//! largest: on the test machine's disk throttled to 1,000 write IOPS such
//! writes took 25-28 ms for 128 pages in the first windows, against
//! about 1 ms per in-place write, the cost read 3.4-4.1 pages, and runs
//! were chosen only after 12-14 s in three runs of six. Those writes are
//! not timed (`dblwr_alone_*`; the gauge of writes in flight is read as
//! the area write begins, so an in-place write another cleaner starts
//! just after still slips in now and then). Timed alone, the same area
//! write took 1 to 2.5 ms and the first window read 69 to 1,019 pages in
//! three runs of three, and runs were chosen at once. The ratio `a / b`,
//! what one operation costs in pages, decides: contiguous runs from
//! [`RUNS_ON`] up, pages alone again under [`RUNS_OFF`] (the gap between
//! them keeps a ratio near a threshold from switching the mode at every
//! window), and the mode follows the median of the last [`MEDIAN_OF`]
//! windows.
//!
//! The first window is shorter and needs one area write timed alone
//! ([`FIRST_WINDOW`], [`FIRST_MIN_AREA_WRITES`]): until it closes pages go
//! alone, which on a device charging by the operation wastes most of
//! what it can do in a cold start.
//!
//! Without page images in doublewrite areas (`doublewrite = detect_only`,
//! `atomic` or `off`), before both kinds of writes have been seen often
//! enough in a window ([`MIN_AREA_WRITES`], [`MIN_DATA_WRITES`]), and in a
//! window where the device was mostly idle ([`BUSY_SHARE`]: a device with
//! spare capacity hides what a write costs, and neighbors cannot help a
//! flusher it keeps up with), nothing is measured and the mode stays where
//! it is (pages alone at the start).

use std::time::Duration;

use crate::flush::neighbors::NeighborMode;
use crate::flush::policy::Snapshot;

/// Write cost in pages at or over which `steady` writes contiguous runs.
/// Measured with pages alone on this project's 2-core test machine: 20 in
/// the first window on its disk throttled by the kernel to 300 write IOPS,
/// 3.3 to 19 at 1,000 (the throttle's slices make windows swing), where the
/// runs raised `steady`'s throughput by 55 % and 85 %; 22 on the
/// `hdd-raid10` model, where they raised it by 73 %; 3.4 to 4.2 on the
/// `sata-ssd` model (with the device under half busy, so those windows no
/// longer count), where they wrote 15 % more pages per transaction for the
/// same throughput; 3 on a model limited to 10 MiB/s, where they halved
/// the median second.
pub const RUNS_ON: f64 = 8.0;
/// Write cost in pages under which it goes back to pages alone. With runs
/// written in place the measure reads higher (a run's latency is less
/// hidden by the queue depth than a page's): `sata-ssd` measured 9 to 18
/// with runs on.
pub const RUNS_OFF: f64 = 4.0;
/// Shortest window over which the two kinds of writes are measured.
pub const WINDOW: Duration = Duration::from_secs(2);
/// Fewest doublewrite area writes timed alone a window needs to count.
/// Only a call's first chunk is timed alone, and while pages go alone at
/// the start a disk throttled to 300 write IOPS makes about one such
/// write a second: with 8 the first window took 7 s to close, and the
/// flusher wrote one page a write all that time (writers held to about
/// 600 tps from the 4th second to the 7th, three runs of three), where
/// with every area write counted it chose runs after 3.4 s. Timed alone, a
/// write reads what the device charges for it, so a few do.
pub const MIN_AREA_WRITES: u64 = 3;
/// Fewest in-place write calls a window needs to count.
pub const MIN_DATA_WRITES: u64 = 64;
/// Shortest first window, until which the flusher writes pages alone
/// whatever the device charges. With [`WINDOW`] and
/// [`MIN_AREA_WRITES`] the first window closed with the third batch of
/// the start (about one area write timed alone per batch of 256 pages),
/// 2.3 s in on the test machine's disk throttled to 300 write IOPS, where
/// those batches went at one page a write: some 700 of the device's
/// operations for 770 pages, where the runs chosen then carried four or
/// five pages each. A first reading that errs is corrected by the next
/// windows (the mode follows their median).
pub const FIRST_WINDOW: Duration = Duration::from_millis(500);
/// Fewest area writes timed alone the first window needs: one, the first
/// batch's first chunk (see [`FIRST_WINDOW`]).
pub const FIRST_MIN_AREA_WRITES: u64 = 1;
/// The share of a window's time with an in-place write in flight under
/// which the window does not count: a kernel throttle with spare capacity
/// serves writes from saved-up credit (35 µs a write at 1,000 write IOPS,
/// where a busy window measured 660-1,030 µs) and the window read 4, which
/// held the runs off for four more seconds.
pub const BUSY_SHARE: f64 = 0.5;
/// The mode follows the median of this many last windows' costs. One
/// window alone misleads now and then: the kernel throttle's 100 ms slices
/// make a 2 MiB doublewrite copy take anything from under 1 ms to 30 ms
/// at 1,000 write IOPS (it goes out as several requests, each one
/// operation), and single windows there read from 3.3 to over 1,000.
pub const MEDIAN_OF: usize = 5;

/// What one write costs beyond the pages it carries, in pages, from two
/// points of the line `t = a + b·n`: `(p1, t1)` (pages and time per
/// in-place write) and `(pn, tn)` (per doublewrite area write). `None`
/// when the points are too close in size to tell `a` from `b`; infinite
/// when a longer write took no longer per call (all the cost is `a`);
/// zero when the line passes under the origin (all the cost is per page).
pub fn write_cost_pages(p1: f64, t1: f64, pn: f64, tn: f64) -> Option<f64> {
    let valid = |x: f64| x.is_finite() && x > 0.0;
    if !(valid(p1) && valid(t1) && valid(pn) && valid(tn)) || pn < 2.0 * p1 {
        return None;
    }
    let b = (tn - t1) / (pn - p1);
    if b <= 0.0 {
        return Some(f64::INFINITY);
    }
    let a = t1 - b * p1;
    Some((a / b).max(0.0))
}

/// Counters at the start of a window.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mark {
    at: Duration,
    pages: u64,
    writes: u64,
    busy_us: u64,
    area_writes: u64,
    area_pages: u64,
    area_us: u64,
}

impl Mark {
    fn of(s: &Snapshot) -> Mark {
        Mark {
            at: s.now,
            // Every page a write carries, gap fillers included.
            pages: s.pages_written + s.gap_pages_written,
            writes: s.data_writes,
            busy_us: s.data_write_busy_us,
            area_writes: s.dblwr_alone_writes,
            area_pages: s.dblwr_alone_pages,
            area_us: s.dblwr_alone_write_us,
        }
    }
}

/// The measure and the mode it chose (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteMerging {
    mark: Option<Mark>,
    /// The last windows' write costs in pages, oldest first (at most
    /// [`MEDIAN_OF`]).
    costs: std::collections::VecDeque<f64>,
    runs: bool,
}

impl WriteMerging {
    /// Fold in a snapshot; a window that has lasted [`WINDOW`] and seen
    /// enough writes of both kinds is measured and closed, one that has
    /// not goes on.
    pub fn update(&mut self, s: &Snapshot) {
        let m = *self.mark.get_or_insert_with(|| Mark::of(s));
        // Until the first window counts, pages go alone whatever the
        // device charges: that one closes sooner ([`FIRST_WINDOW`]).
        let (window, min_area) = if self.costs.is_empty() {
            (FIRST_WINDOW, FIRST_MIN_AREA_WRITES)
        } else {
            (WINDOW, MIN_AREA_WRITES)
        };
        if s.now.saturating_sub(m.at) < window {
            return;
        }
        let writes = s.data_writes.saturating_sub(m.writes);
        let area_writes = s.dblwr_alone_writes.saturating_sub(m.area_writes);
        if writes < MIN_DATA_WRITES || area_writes < min_area {
            return;
        }
        let per = |x: u64, n: u64| x as f64 / n as f64;
        let busy_us = s.data_write_busy_us.saturating_sub(m.busy_us);
        let p1 = per(
            (s.pages_written + s.gap_pages_written).saturating_sub(m.pages),
            writes,
        );
        let t1 = per(busy_us, writes);
        let pn = per(
            s.dblwr_alone_pages.saturating_sub(m.area_pages),
            area_writes,
        );
        let tn = per(
            s.dblwr_alone_write_us.saturating_sub(m.area_us),
            area_writes,
        );
        self.mark = Some(Mark::of(s));
        // A device mostly idle in the window served its writes from spare
        // capacity: what they cost shows only while it is busy (and only
        // then do neighbors matter).
        let wall_us = s.now.saturating_sub(m.at).as_micros() as f64;
        if (busy_us as f64) < BUSY_SHARE * wall_us {
            return;
        }
        let Some(cost) = write_cost_pages(p1, t1, pn, tn) else {
            return;
        };
        log::debug!(
            "steady: a write costs {cost:.1} pages more than it carries \
             (in place {p1:.1} pages in {t1:.0} us, doublewrite {pn:.1} in {tn:.0} us)"
        );
        if self.costs.len() == MEDIAN_OF {
            self.costs.pop_front();
        }
        self.costs.push_back(cost);
        let cost = self.cost();
        if cost >= RUNS_ON {
            self.runs = true;
        } else if cost < RUNS_OFF {
            self.runs = false;
        }
    }

    /// The mode chosen.
    pub fn mode(&self) -> NeighborMode {
        if self.runs {
            NeighborMode::Contiguous
        } else {
            NeighborMode::Off
        }
    }

    /// The write cost in pages the mode follows: the median of the last
    /// windows' (of an even count, the mean of the middle two; 0 until
    /// measured).
    pub fn cost(&self) -> f64 {
        let mut c: Vec<f64> = self.costs.iter().copied().collect();
        c.sort_by(f64::total_cmp);
        let n = c.len();
        match n {
            0 => 0.0,
            _ if n % 2 == 1 => c[n / 2],
            _ => (c[n / 2 - 1] + c[n / 2]) / 2.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device charging `a` µs per write and `b` µs per page: the in-place
    /// writes carry `p1` pages each, the doublewrite areas `pn`.
    fn cost_on(a: f64, b: f64, p1: f64, pn: f64) -> f64 {
        write_cost_pages(p1, a + b * p1, pn, a + b * pn).expect("measurable")
    }

    #[test]
    fn the_cost_is_what_one_operation_costs_in_pages() {
        // 300 write IOPS, pages almost free: one write costs hundreds.
        assert!(cost_on(3333.0, 5.0, 1.0, 128.0) > 600.0);
        // Same with runs of 3 pages in place (the mode once chosen).
        assert!(cost_on(3333.0, 5.0, 3.0, 128.0) > 600.0);
        // Exact where the line is exact.
        assert!((cost_on(400.0, 100.0, 1.0, 64.0) - 4.0).abs() < 1e-9);
        // Limited in bytes: the cost is the pages.
        assert!(cost_on(0.0, 1600.0, 1.0, 128.0) < 1e-9);
        // A longer write no slower per call: all the cost per operation.
        assert_eq!(
            write_cost_pages(1.0, 500.0, 128.0, 400.0),
            Some(f64::INFINITY)
        );
        // A line under the origin (parallel in-place writes look cheap).
        assert_eq!(write_cost_pages(1.0, 10.0, 128.0, 4400.0), Some(0.0));
    }

    #[test]
    fn points_too_close_or_empty_measure_nothing() {
        assert_eq!(write_cost_pages(1.0, 100.0, 1.5, 120.0), None);
        assert_eq!(write_cost_pages(0.0, 100.0, 128.0, 120.0), None);
        assert_eq!(write_cost_pages(1.0, f64::NAN, 128.0, 120.0), None);
        assert_eq!(write_cost_pages(1.0, 100.0, 128.0, 0.0), None);
    }

    /// Snapshots of a device charging `a` + `b`·pages µs per write, with
    /// `per_s` in-place writes of `p1` pages and `areas_per_s` area
    /// writes of `pn` pages a second, from `from` for `secs` seconds.
    fn run(
        m: &mut WriteMerging,
        s: &mut Snapshot,
        (a, b): (f64, f64),
        (per_s, p1): (u64, u64),
        (areas_per_s, pn): (u64, u64),
        secs: u64,
    ) {
        for _ in 0..secs * 10 {
            s.now += Duration::from_millis(100);
            s.data_writes += per_s / 10;
            s.pages_written += per_s / 10 * p1;
            s.data_write_busy_us += ((a + b * p1 as f64) * (per_s / 10) as f64) as u64;
            s.dblwr_alone_writes += areas_per_s / 10;
            s.dblwr_alone_pages += areas_per_s / 10 * pn;
            s.dblwr_alone_write_us += ((a + b * pn as f64) * (areas_per_s / 10) as f64) as u64;
            m.update(s);
        }
    }

    #[test]
    fn runs_start_on_a_device_limited_in_operations_and_stop_when_it_charges_by_the_byte() {
        let mut m = WriteMerging::default();
        let mut s = Snapshot::default();
        assert_eq!(m.mode(), NeighborMode::Off);
        // 300 IOPS: 3.3 ms a write, 20 µs a page.
        run(&mut m, &mut s, (3333.0, 20.0), (280, 1), (20, 128), 3);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        assert!(m.cost() > 100.0, "{}", m.cost());
        // Runs of three pages in place keep it on.
        run(&mut m, &mut s, (3333.0, 20.0), (280, 3), (20, 128), 4);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        // Between the thresholds: no change.
        run(&mut m, &mut s, (600.0, 100.0), (800, 1), (20, 128), 4);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        // Windows served from saved-up credit, the device mostly idle, do
        // not count.
        run(&mut m, &mut s, (100.0, 20.0), (280, 3), (20, 128), 2);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        // The disk now charges by the byte (10 MiB/s: 1.6 ms a page): the
        // mode follows once most of the last windows say so.
        run(&mut m, &mut s, (200.0, 1600.0), (300, 1), (10, 128), 4);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        run(&mut m, &mut s, (200.0, 1600.0), (300, 1), (10, 128), 4);
        assert_eq!(m.mode(), NeighborMode::Off);
        assert!(m.cost() < RUNS_OFF);
    }

    /// A tick of 300 write IOPS with pages alone (28 writes of 3.35 ms),
    /// and one doublewrite area of 128 pages timed alone if `area`.
    fn tick_at_300_iops(s: &mut Snapshot, area: bool) {
        s.now += Duration::from_millis(100);
        s.data_writes += 28;
        s.pages_written += 28;
        s.data_write_busy_us += 28 * 3_353;
        if area {
            s.dblwr_alone_writes += 1;
            s.dblwr_alone_pages += 128;
            s.dblwr_alone_write_us += 3_333 + 20 * 128;
        }
    }

    #[test]
    fn the_first_window_closes_with_the_first_batch() {
        let mut m = WriteMerging::default();
        let mut s = Snapshot::default();
        m.update(&s);
        // The start's first batch: 256 pages alone, its first chunk's area
        // write timed alone as it ends, 0.8 s in. The first window closes
        // then, not with the third batch.
        for t in 1..=8 {
            assert_eq!(m.mode(), NeighborMode::Off, "tick {t}");
            tick_at_300_iops(&mut s, t == 8);
            m.update(&s);
        }
        assert_eq!(m.mode(), NeighborMode::Contiguous);
        assert_eq!(m.costs.len(), 1);
        // Later windows need `WINDOW` and `MIN_AREA_WRITES`: two area
        // writes in 3 s close none...
        for t in 1..=30 {
            tick_at_300_iops(&mut s, t % 15 == 0);
            m.update(&s);
        }
        assert_eq!(m.costs.len(), 1);
        // ... and the third does.
        tick_at_300_iops(&mut s, true);
        m.update(&s);
        assert_eq!(m.costs.len(), 2);
    }

    #[test]
    fn a_first_window_shorter_than_half_a_second_does_not_count() {
        let mut m = WriteMerging::default();
        let mut s = Snapshot::default();
        m.update(&s);
        // An area write in the first tick: the window still waits for
        // `FIRST_WINDOW`.
        for t in 1..=4 {
            tick_at_300_iops(&mut s, t == 1);
            m.update(&s);
        }
        assert!(m.costs.is_empty());
        tick_at_300_iops(&mut s, false);
        m.update(&s);
        assert_eq!(m.costs.len(), 1);
    }

    #[test]
    fn too_few_writes_of_either_kind_keep_the_mode() {
        let mut m = WriteMerging::default();
        let mut s = Snapshot::default();
        // No doublewrite areas (doublewrite = atomic): nothing measured.
        run(&mut m, &mut s, (3333.0, 20.0), (300, 1), (0, 0), 10);
        assert_eq!((m.mode(), m.cost()), (NeighborMode::Off, 0.0));
        // Too few in-place writes for a window (30 a second on a device
        // serving 25): it goes on past its 2 s until it has enough.
        let mut m = WriteMerging::default();
        run(&mut m, &mut s, (40_000.0, 20.0), (30, 1), (10, 128), 2);
        assert_eq!((m.mode(), m.cost()), (NeighborMode::Off, 0.0));
        run(&mut m, &mut s, (40_000.0, 20.0), (30, 1), (10, 128), 1);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
    }

    #[test]
    fn a_device_mostly_idle_measures_nothing() {
        let mut m = WriteMerging::default();
        let mut s = Snapshot::default();
        // 300 IOPS, but in-place writes in flight a tenth of the time.
        run(&mut m, &mut s, (3333.0, 20.0), (30, 1), (20, 128), 10);
        assert_eq!((m.mode(), m.cost()), (NeighborMode::Off, 0.0));
        // Busy: measured (from the first window wholly busy on).
        run(&mut m, &mut s, (3333.0, 20.0), (280, 1), (20, 128), 4);
        assert_eq!(m.mode(), NeighborMode::Contiguous);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let mut m = WriteMerging::default();
        m.costs.extend([3.0, 100.0, 9.0, 1.0]);
        assert_eq!(m.cost(), 6.0);
        m.costs.push_back(50.0);
        assert_eq!(m.cost(), 9.0);
    }
}
