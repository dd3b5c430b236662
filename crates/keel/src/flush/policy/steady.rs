//! `steady`: Keel's flushing policy. No I/O-capacity knob: it measures the
//! device while it writes, holds the checkpoint age near a setpoint just
//! under the limit (so that each page write combines as many changes as
//! possible), and slows writers smoothly, in proportion to how far the age
//! is above the setpoint, long before they would stop at the free-check
//! limit (Linux's dirty-page throttling, applied to redo).
//!
//! # Levels, on the checkpoint-age axis
//! With `L` the free-check limit (where the engine stops writers):
//! - `H = L − reserve`, the hard level, where the writers' allowed rate
//!   reaches zero; `reserve` covers what writers can log before the
//!   curve stops them: a quarter tick of the peak redo rate plus the
//!   redo writers hold reserved, at least a tick of the peak rate up to
//!   5 % of `L` and at least 1 % of `L` (see [`levels`]);
//! - `F = 0.6 L`, below which writers run free (unless a lump is late:
//!   [`lump_ceiling`]);
//! - `S = max((F + H) / 2, H − band)`, the setpoint, with the band half a
//!   second of the peak redo rate, at least 5 % of `L` (see [`band`]): at
//!   the middle of `F..H` for a log holding a few seconds of redo, close
//!   under `H` for one holding tens of seconds; lifted towards `H` while
//!   the flusher keeps up with room to spare (see [`lifted_setpoint`]).
//!
//! # Every tick (100 ms)
//! - **Estimates** (each a metric): the redo rate and its decaying peak; the
//!   device's write bandwidth in pages per second of *busy* time (time with
//!   a write in flight), updated only when the device was kept busy, so an
//!   idle spell is not taken for a slow device (its first writes excepted,
//!   see [`Device::update`]); the write latency's base
//!   and the queue depth, raised one step while latency stays near its base
//!   and the flusher falls behind, and halved on a spike (undone two ticks
//!   later if halving did not halve the latency: a slower device, not our
//!   own queue); ρ, the redo bytes the checkpoint retires per
//!   page written back; and the flusher's *capacity*, the pages per second
//!   of wall time it achieves while it leaves more than 16 pages below its
//!   target at every round (a batch also waits for its doublewrite copy,
//!   its syncs and the checkpoint, so this is lower than the device's
//!   busy-time bandwidth, which the flusher never sustains alone).
//! - **Flusher**: the target LSN is `current + log_rate × tick − S`, plus a
//!   proportional catch-up of half the distance above `S`: every page whose
//!   oldest change is below it is written, at the device's pace (the queue
//!   depth is the only limit), and the checkpoint advances after every batch.
//!   A round takes at most two ticks' worth of the capacity (before the
//!   device is measured, [`UNMEASURED_ROUND_PAGES`] per instance), so that
//!   the controller still decides every tick or so when the backlog is
//!   large.
//!   Pages lying denser in the log than the flusher can write them (at a
//!   cold start, the hot set's first changes) are written earlier, by
//!   their deadlines: see [`deadline_target`]. While the device is the
//!   bottleneck, a round writes at least one whole batch: see
//!   [`full_batch_target`].
//! - **LRU**: each instance keeps free frames for a tick (100 ms) of the
//!   recent allocation rate (fast attack, slow decay; at most an eighth of
//!   the instance): frames kept free cache nothing, and the cleaners
//!   decide every tick and are woken by an empty free list. See
//!   [`LRU_LOOKAHEAD_S`].
//! - **Writers** (`WriterLimit`, carried out by `flush::pacer` where
//!   writers hold no latch, each at the age it sees): below `F`, no limit
//!   (but see the lump ceiling below); above it the allowed redo
//!   rate is `base_rate × pos`, with `pos = clamp(1 + x/2 + x³/2, 0, 2)`,
//!   `x = (S − age)/(H − S)` (gentle near `S`, steep near `H`), and
//!   `base_rate` following `capacity × ρ` (times a gain while the
//!   capacity is unproven: [`CAPACITY_PROBE_GAIN`]; ρ at least 3/4 of what the
//!   sample of oldest pages shows ahead, [`forward_rho`]; at least what
//!   the band from `S` to the deadline level absorbs while the flusher
//!   writes a lump, [`headroom_rate`]; before any capacity is measured
//!   with a backlog, `bw × ρ`; before anything, none below `S`), the rate
//!   the flusher can retire, with damped steps; below `S` the allowed rate
//!   is never under `(S − age)` per [`APPROACH`], so writers close in on
//!   `S` at an exponential pace. While some page would be late even at
//!   the flusher's pace (a lump, at a cold start on a log holding many
//!   seconds of redo), the allowed rate below `S`, free run included, is
//!   at most [`lump_ceiling`] (never under the base rate), so that
//!   writers do not pile up a lump the flusher cannot retire in time.
//!   Every error here must be on the generous
//!   side: too high a base rate lets the age climb towards `H`, where the
//!   curve stops writers anyway; too low a one starves writers, who then
//!   dirty too little for the flusher to measure anything better (the
//!   approach floor prevents that below `S`, and at `S` the flusher has a
//!   backlog, so the capacity it measures corrects the base). Until the
//!   capacity is proven the flusher writes from `F` on, unless it has
//!   kept up there for a second ([`KEPT_UP`]: pages to write at every
//!   round, and all of them written): a device that never falls behind
//!   never shows its capacity, and the age must still rise to `S`.
//!
//! Everything here is a pure function of the snapshots seen so far: the
//! simulation test drives this very code in simulated time.

use std::time::Duration;

use super::{
    Decision, FlushMode, FlushPolicy, FlushTargets, InstanceSnapshot, InstanceTarget, Snapshot,
    SteadyFigures, WriterLimit, LIST_BATCH, MERGED_BATCH,
};
use crate::config::FlushPolicyName;
use crate::flush::batch::FlushKind;
use crate::flush::neighbors::NeighborMode;
use crate::page::Lsn;

/// The control period.
pub const TICK: Duration = Duration::from_millis(100);
/// Time constant of the writers' approach to the setpoint from below (see
/// `WriterLimit::rate_at`): with a tick, writers crossing `F` faster than
/// the flusher could retire ran free to `S`, overshot to `H`, and were then
/// held near zero for seconds while the flusher caught up.
pub const APPROACH: Duration = Duration::from_secs(1);
/// `F` as a share of the free-check limit.
const FREERUN: f64 = 0.6;
/// The reserve below the free-check limit is at least a tick of the peak
/// redo rate, capped at this share of the limit (see [`levels`]).
const MIN_RESERVE: f64 = 0.05;
/// The reserve below the free-check limit is at least this share of it,
/// whatever the rate (see [`levels`]).
const MIN_RESERVE_SHARE: f64 = 0.01;
/// Decay per tick of the peak of redo reserved by writers (see
/// [`levels`]): about seven seconds (70 ticks) to halve.
const RESERVED_DECAY: f64 = 0.99;
/// Ticks of the peak redo rate the reserve covers. Writers evaluate the
/// curve at every transaction and go one by one, each when the pacer's
/// clock reaches its place in line (`flush::pacer`), so near `H`, where
/// the allowed rate is almost nothing, what can still carry the age past
/// it is the transactions already let go and the pacer's banked credit,
/// at most `pacer::MAX_BURST` of the rate allowed *there*. A whole tick
/// of the peak rate (as when all waiting writers went together at one
/// due instant) took 41 % of the limit on `neighbors` on `sata-ssd` (a
/// 4 MiB log logged at 15 MB/s), leaving a band of 5 % from `S` to `H`.
const RESERVE_TICKS: f64 = 0.25;
/// Ticks of the peak redo rate the band from `S` to `H` holds (see
/// [`band`]).
const BAND_TICKS: f64 = 5.0;
/// The band from `S` to `H`: at least this share of the free-check limit.
const MIN_BAND: f64 = 0.05;
/// The band holds this many times the flusher's longest recent spell
/// without retiring anything (see [`band`]).
const STALL_MARGIN: f64 = 1.5;
/// Decay per tick of that spell's peak: about six seconds (60 ticks) to
/// halve, so a slow sync widens the band for a few seconds after it.
const STALL_DECAY: f64 = 0.9885;
/// Share of the distance above the setpoint the flusher adds to its target
/// each tick (the proportional catch-up).
const CATCH_UP: f64 = 0.5;
/// Most page writes kept in flight.
pub const MAX_DEPTH: usize = 64;
/// Depth at or under which the write latency counts as the device's own
/// (see [`Device`]).
pub const BASE_PROBE_DEPTH: usize = 2;
/// Busy ticks between two probes of the base latency. Each probe costs the
/// flusher, LRU writes included, most of its speed for two ticks; at 100,
/// `neighbors` on `hdd-raid10` lost half its throughput for a second at
/// every probe, every 18 s or so. A due probe also waits until the
/// checkpoint age is under the setpoint ([`Device::headroom`]): the one
/// second of the showdown's `neighbors` ("none") run under half its
/// median, at 300, was where the first probe fell due (the age at `H`,
/// the flusher writing a third of its usual pages).
pub const PROBE_TICKS: u32 = 300;
/// Ticks a probe lasts.
const PROBE_LEN: u32 = 2;
/// Ticks after a probe during which the depth comes down by one a tick at
/// most, whatever the latency. On `hdd-raid10` (Keel's device model) a
/// write at a depth of 2 waits less than one at the depth the flusher had
/// settled at, so every probe lowered the base, the latency at the
/// resumed depth looked like a spike against it, and the depth was halved
/// tick after tick: with `neighbors` ("none") the flusher's throughput
/// and the writers' with it fell to half for a second every 18 s or so
/// (at every probe), the only seconds under half the median. Brought down
/// one step at a time, the depth settles where the new base puts it
/// without the collapse (which alone did not end the dips: see
/// [`PROBE_TICKS`]).
const PROBE_SETTLE: u32 = 20;
/// Latency, in bases, under which the depth grows by one a tick.
const DEPTH_RAISE: f64 = 1.3;
/// Latency, in bases, over which the depth shrinks by a quarter a tick.
const DEPTH_EASE: f64 = 2.0;
/// Latency, in bases, over which the depth is halved.
const DEPTH_CUT: f64 = 3.0;
/// Share of the latency before a cut at or over which the latency after
/// it says the queue was not ours (see [`Device`]). A cut of our own
/// queue comes at a depth over three times what the device serves at once
/// (the latency over [`DEPTH_CUT`] × the base), and halving it halves the
/// latency: 0.5. A device that became slower was written at 1.3 to 2 ×
/// its parallelism (the depth grows while the latency is under
/// [`DEPTH_RAISE`] × the base and eases only over [`DEPTH_EASE`] ×), so
/// halving leaves 0.5 to 0.77 of the latency: from over about 1.54 × the
/// first cut stands (half the writes did queue) and the next, from the
/// parallelism or under, leaves all of it and is undone. The threshold
/// sits between; the property test
/// `a_cut_is_undone_for_a_slower_device_and_stands_for_our_own_queue`
/// checks both sides for parallelisms of 2 to 32.
const CUT_KEPT_LATENCY: f64 = 0.65;
/// The linear share of the throttle curve (see [`pos_ratio`]).
const LINEAR: f64 = 0.5;
/// Shortest span over which the flusher's capacity is measured.
const CAPACITY_WINDOW: Duration = Duration::from_millis(300);
/// How long a capacity measured with a backlog stands as proven. Past
/// that, the flusher has kept up with all it was asked, so the capacity
/// is only a lower bound, and writers are allowed [`CAPACITY_PROBE_GAIN`]
/// times the rate it can retire (see [`Steady::decide`]).
const CAPACITY_PROVEN_FOR: Duration = Duration::from_secs(2);
/// The writers' base rate over what a capacity not proven lately can
/// retire. A capacity measured low (at a cold start, with the pool still
/// being read in) held writers to it, so the flusher was never asked for
/// more and never showed more: it was raised only by the noise, and on
/// `neighbors` on `sata-ssd` took 25 s to double, the first two seconds
/// under half the run's median tps. With the gain, writers log a little
/// more than the flusher retires, the age climbs over `S`, the catch-up
/// asks the flusher for more, and it either writes it (the capacity is
/// raised) or falls behind (the capacity is proven): TCP BBR's probe for
/// bandwidth. At the capacity's true value the age settles where the
/// curve takes the gain back (`pos` = 0.8, about a third of the way from
/// `S` to `H`) until the backlog proves it.
const CAPACITY_PROBE_GAIN: f64 = 1.25;
/// The gain before the capacity was ever proven (TCP's slow start): the
/// first measurements come from rounds still capped for an unmeasured
/// device, and at 1.25 the writers took three seconds to reach their
/// rate on `neighbors` on `sata-ssd` (the first second under half the
/// median). Above the setpoint the curve takes the gain back (`pos` = 0.5
/// about 60 % of the way from `S` to `H`).
const CAPACITY_START_GAIN: f64 = 2.0;
/// A window with a backlog throughout that achieved less than this share
/// of the capacity replaces it outright (see [`Steady::estimate`]).
const CAPACITY_DROP: f64 = 0.5;
/// A measurement with a backlog proves the capacity only if it achieved
/// at most this many times the capacity already measured.
const CAPACITY_PROVEN_SLACK: f64 = 1.1;
/// The share of a tick spent in the cleaners' round at which the flusher
/// counts as behind (see [`Steady::estimate`]).
const FLUSHER_BUSY: f64 = 0.9;
/// The share of the allowed redo rate at which writers count as held by
/// the curve (see [`Steady::estimate`]).
const WRITERS_HELD: f64 = 0.8;
/// How long the flusher must keep up at F (pages to write at every round,
/// all written but a few: [`BEHIND_SLACK`]) before it holds S without a
/// measured capacity.
const KEPT_UP: Duration = Duration::from_secs(1);
/// A round's flush-list work, in ticks of the flusher's capacity.
const ROUND_TICKS: f64 = 2.0;
/// Fewest flush-list pages a round may take per instance.
const ROUND_MIN_PAGES: usize = 64;
/// Most flush-list pages a round takes per instance before the device's
/// speed is known. Uncapped, the first round on `disaster-55` wrote all
/// 1 100 pages older than F (with their neighbors) in one go: over a second
/// with no estimate, so writers had no base rate and stalled near S until
/// it ended. A round this size lasts about 0.2 s even on `hdd-raid10`, and
/// the device is measured at the next tick.
const UNMEASURED_ROUND_PAGES: usize = 256;
/// How far ahead the flusher looks for pages it must start on early (see
/// [`deadline_target`]). Until 2026-11-30 it looked 2 s ahead, which
/// covers a log holding a second or two of redo (every seed preset) but
/// not one holding seven (seed 4 at 30 × scale): there the flusher began
/// on the cold start's lump only when the age passed `F`, five seconds in,
/// with the device idle until then.
const DEADLINE_HORIZON: Duration = Duration::from_secs(30);
/// The share of the device's busy-time bandwidth the deadlines count on
/// while the flusher's capacity is unmeasured: a batch also waits for its
/// doublewrite copy, its syncs and the checkpoint, and shares the device
/// with LRU flushing and neighbors.
const DEADLINE_BW_SHARE: f64 = 0.5;
/// The share of the ρ ahead (see [`forward_rho`]) the writers' base rate
/// counts on at least.
const FORWARD_RHO_SHARE: f64 = 0.75;
/// The horizons over which [`headroom_rate`] checks that writers stay
/// under the deadline level, doubling from the first to the last.
const HEADROOM_HORIZONS: (Duration, Duration) =
    (Duration::from_millis(250), Duration::from_secs(32));
/// The share of the band from `S` to `H` one flush-list batch may retire
/// (see [`list_batch`]) while the device charges a write by its pages.
const BATCH_BAND_SHARE: f64 = 0.5;
/// The same while it charges a write by the operation: four bands (see
/// [`batch_bounds`]).
const BATCH_BAND_SHARE_PER_OP: f64 = 4.0;
/// Fewest pages in a flush-list batch.
const MIN_LIST_BATCH: usize = 16;
/// How long a flush-list batch waits for its oldest page's latch (see
/// `buffer::claim`, "The oldest page"): a user thread holds a page latched
/// exclusively for microseconds, so this is seldom waited in full.
const OLDEST_LATCH_WAIT: Duration = Duration::from_millis(10);
/// Free frames an instance keeps, in seconds of allocation (at most an
/// eighth of the instance, see `Steady::lru_want`). Frames kept free are
/// frames not caching pages, and out of memory every page they do not
/// cache is read again and, dirty, written again: fewer frames free means
/// fewer page reads and fewer page writes a transaction.
///
/// The cleaners decide every tick (100 ms), and a thread that finds the
/// free list empty wakes them at once, so a tick of allocations is what
/// the list must hold while they write; a thread that finds it empty
/// meanwhile takes a clean page from the LRU tail itself, or, if the
/// tail is dirty, writes one (a single-page flush).
///
/// History, each measured on one machine, alternated:
/// - half a second, at most a quarter of the instance (until
///   2026-11-29): the free list held a quarter of the 32 MiB pool on
///   `disaster-55` and `lru-scan-depth`, and `steady` wrote 1.81-1.83 and
///   3.65 pages a transaction where `classic` wrote 1.64 and 3.46;
/// - a fifth of a second and an eighth (2026-11-29, two runs each):
///   1.70-1.71 and 3.30-3.32 pages, 35 % fewer page reads;
/// - a tick (2026-11-30, one run each against a fifth): with
///   `flush_neighbors` 1 or 2 the free list had still held 8-11 % of the
///   pool on average (144-233 of 2,048 frames): more frames free, more
///   page reads, a higher allocation rate, and so more frames wanted.
///   With a tick it holds 8-22 frames; page reads a transaction fell from
///   0.83-1.07 to 0.68-0.74 (`classic`: 0.67-0.72) and pages written from
///   1.45-1.48 to 1.31-1.37 (`neighbors` with 2 and 1, `disaster-55`;
///   `classic` 1.37-1.53). User threads then write 0.02-0.10 pages a
///   transaction themselves; p99.9 was lower in every pair (230-297 ms
///   against 256-301) and the longest transaction 350-468 ms against
///   386-510 (two showdowns and the runs above). `lru-scan-depth` (the
///   free list at its floor either way) and the embedded OLTP shape on a
///   24 MiB pool (at the eighth either way) did not change.
///
/// The eighth is a trade-off, measured and not yet understood: where it
/// binds on the embedded OLTP shape (24 MiB pool, about 9,000 allocations
/// a second, not device-bound), a quarter wrote 1.75-1.79 pages a
/// transaction against 1.89-1.95 (2026-11-29, two alternated rounds),
/// while on `lru-scan-depth` it wrote 3.65 against 3.31-3.34.
const LRU_LOOKAHEAD_S: f64 = TICK.as_secs_f64();
/// How far the setpoint may rise towards `H` while the flusher has room
/// to spare (see [`lifted_setpoint`]): to this share of the way from `F`
/// to `H` (from half of it). 0.75 until cuts of the queue depth were
/// checked ([`Device`]): with 0.85 the simulations then failed with some
/// seeds (the age past `H` when the device slowed under the lifted
/// setpoint, the depth cut to 1); with the check they pass with seeds
/// 1-48. On `waves-80-fix` held to 6,000 tps the age rode at 0.82 of the
/// log instead of 0.78-0.80 and the pages written per transaction fell
/// from 0.313-0.314 to 0.302-0.303 (three alternated runs each,
/// 2026-12-01), with no pause and no free-check wait. 0.85 until later
/// that day. On a log holding a second or two of redo (the presets'
/// 4 MiB at full speed) the tick under `H` bounds the top whatever the
/// share; on one holding several seconds (`waves-80-x4`, 2 × 64 MiB) the
/// share does: 0.85 left 7 MB above `S`, three ticks of its redo, and
/// 0.95 leaves 2.4 MB, about one, as the tick under `H` does on small
/// logs. The simulations take a device falling to a quarter under such a
/// band with the age at `H` for a tick or two at most: one tick on a log
/// holding under three seconds of redo, where the tick under `H` binds,
/// and a tick and a half on one holding eight, where the share does
/// (`a_setpoint_lifted_by_its_share_comes_down_when_the_device_falls_behind`).
/// On `waves-80-x4` the age rode at 0.87-0.88 of the log instead of
/// 0.83-0.85, and the pages per transaction fell from 0.278-0.289
/// (median 0.285) to 0.271-0.282 (0.278), twelve runs of each, with no
/// free-check wait and no pause over 50 ms; the simulations pass with
/// seeds 1-48 (2026-12-01).
const LIFTED_SHARE: f64 = 0.95;
/// Time the setpoint takes to rise from `(F + H)/2` to its highest while
/// the flusher has room to spare.
const LIFT_TIME: Duration = Duration::from_secs(10);
/// The lift lost in a tick in which the flusher fell behind or held the
/// writers: four such ticks take the setpoint back to `(F + H)/2`.
const LIFT_DROP: f64 = 0.25;
/// What the flusher may leave unwritten of what it was asked, as a share
/// of what it wrote (plus a batch), without counting as fallen behind for
/// the lift and for keeping up ([`KEPT_UP`]).
const BEHIND_SLACK: f64 = 1.1;
/// The share of a tick spent in the cleaners' round, or of the device's
/// busy-time speed written, under which the flusher has room to spare.
const FLUSHER_EASY: f64 = 0.5;

/// An exponentially weighted moving average.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ewma {
    value: Option<f64>,
}

impl Ewma {
    /// Fold in `x` with weight `alpha` (the first sample is taken whole).
    pub fn update(&mut self, x: f64, alpha: f64) -> f64 {
        let v = match self.value {
            None => x,
            Some(v) => v + alpha * (x - v),
        };
        self.value = Some(v);
        v
    }

    /// The average, if any sample was seen.
    pub fn get(&self) -> Option<f64> {
        self.value
    }
}

/// A peak that decays by `decay` per tick unless renewed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Peak {
    value: f64,
}

impl Peak {
    /// Renew with `x` after `ticks` ticks of decay at `decay` per tick.
    pub fn update(&mut self, x: f64, ticks: f64, decay: f64) -> f64 {
        self.value = x.max(self.value * decay.powf(ticks));
        self.value
    }

    /// The current peak.
    pub fn get(&self) -> f64 {
        self.value
    }
}

/// The device's write speed over its busy time, its latency, and the queue
/// depth the flusher uses (see the module doc).
///
/// The depth follows the write latency against its *base*, the latency of
/// a write that queues behind none of ours: one more write in flight each
/// tick while latency stays under [`DEPTH_RAISE`] × the base, a quarter
/// fewer above [`DEPTH_EASE`] ×, half as many on a spike over
/// [`DEPTH_CUT`] ×. So the depth settles where the device's own queue
/// starts to grow, a little over its parallelism, and a page read or a
/// log write arriving behind the flusher waits for a few writes, not for
/// dozens.
///
/// The base is the lowest latency seen, and it only falls, except where
/// it is measured: at a depth of [`BASE_PROBE_DEPTH`] or less the writes
/// hardly queue behind each other, so their latency is the device's own.
/// Every [`PROBE_TICKS`] busy ticks the flusher drops to that depth for
/// [`PROBE_LEN`] ticks and takes the base afresh, then resumes its depth
/// (TCP BBR's periodic round-trip probe): a device that became slower for
/// good gets a new base within seconds, and a base measured while our own
/// writes queued (after the device became faster) does not let the depth
/// ratchet up. (A base allowed to drift up at any depth followed the queue
/// it measured: the depth ran to the maximum, 64 writes queued on a disk
/// serving 8, and every page read and log write waited behind them.)
///
/// A cut is checked: the latency over [`DEPTH_CUT`] × the base is either
/// our own queue (the depth grew past what the device serves at once) or
/// a device that became slower, and only halving tells which. Writes that
/// queue behind each other wait about half as long at half the depth; a
/// device that became slower makes them wait as long at any depth under
/// its parallelism. So the tick after a cut is skipped (it still carries
/// writes issued at the old depth, as a probe's first tick does: a batch
/// keeps the streams it began with), and the next one decides: a latency
/// still at [`CUT_KEPT_LATENCY`] or more of the latency that caused the
/// cut undoes it, and that latency, measured at half the depth, becomes
/// the base. Without the check a device four times slower was cut tick
/// after tick against the old base (15, 7, 3, 1 writes in flight within
/// the second, the simulation of hours): the flusher wrote a quarter of
/// what the slower device could, for the second or two the base took to
/// rise at a depth of 1 or 2, and with the setpoint lifted high the age
/// went past `H`. A queue of our own shows the other way (its latency
/// halves), and the cut stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// Pages per second of busy time.
    pub bw: Ewma,
    /// The write latency of a write queued behind none of ours.
    pub lat_base_us: Option<f64>,
    /// Recent latency per write call.
    pub lat_us: Ewma,
    /// Page writes kept in flight.
    pub depth: usize,
    /// Busy ticks since the base was last probed.
    since_probe: u32,
    /// While probing: the depth to resume and the probe ticks left.
    probe: Option<(usize, u32)>,
    /// Ticks left in which the depth comes down one step at most.
    settle: u32,
    /// A cut being checked: the depth before it, the tick latency that
    /// caused it, and whether the tick after it has passed.
    cut: Option<(usize, f64, bool)>,
    /// Whether a probe may start now (the owner says so: a probe slows
    /// the flusher for two ticks, so it waits for the checkpoint age to
    /// have room under the setpoint).
    pub headroom: bool,
    /// Whether the flusher is behind (the owner says so: it has more to
    /// write than it wrote, or writers are held to what it retires): the
    /// depth is raised only then. Writes in flight are carried out by as
    /// many threads; on `waves-80` (`sata-ssd`, the flusher keeping up,
    /// writers never paused) the depth, raised while the latency held,
    /// went from 6 to 64 in ten seconds, with four instances, and
    /// throughput fell from 5,400 to 4,000 tps for the rest of the run.
    /// More writes in flight help only a flusher that is behind.
    pub backlog: bool,
}

impl Default for Device {
    fn default() -> Self {
        Device {
            bw: Ewma::default(),
            lat_base_us: None,
            lat_us: Ewma::default(),
            depth: 4,
            since_probe: 0,
            probe: None,
            settle: 0,
            cut: None,
            headroom: true,
            backlog: true,
        }
    }
}

impl Device {
    /// Take `lat`, measured where our writes hardly queue, as the base and
    /// as the recent latency (after a probe, or a cut undone).
    fn rebase(&mut self, lat: f64) {
        self.lat_base_us = Some(lat);
        self.lat_us = Ewma::default();
        self.lat_us.update(lat, 1.0);
    }

    /// Fold in a tick of `dt` seconds in which `pages` pages were written in
    /// `writes` calls taking `write_us` in all, with the device busy for
    /// `busy_us`.
    pub fn update(&mut self, dt: f64, pages: u64, writes: u64, write_us: u64, busy_us: u64) {
        let busy_s = busy_us as f64 / 1e6;
        // Only a device kept busy for a good part of the tick shows its
        // speed; an idle or lightly used one shows only how little we asked.
        // But the first writes are taken whatever the share: until the
        // device is measured writers get no base rate, and a fast device
        // writes a first round in a fraction of a tick (on `sata-ssd`, 256
        // pages in 13 ms: writers crawled for the first 0.8 s of every
        // run). A lightly used device shows less than its speed, never
        // more: that first figure errs on the safe side, and the busy
        // ticks that follow correct it.
        let first = self.bw.get().is_none() && busy_s > 0.0;
        if pages == 0 || writes == 0 || (busy_s < 0.2 * dt && !first) {
            return;
        }
        self.bw.update(pages as f64 / busy_s, 0.3);
        let lat = write_us as f64 / writes as f64;
        if let Some((resume, left)) = self.probe {
            // The first probe tick may still carry writes issued at the
            // old depth: the base is taken from the last.
            if left > 1 {
                self.probe = Some((resume, left - 1));
            } else {
                self.probe = None;
                self.rebase(lat);
                self.depth = resume;
                self.since_probe = 0;
                self.settle = PROBE_SETTLE;
            }
            return;
        }
        if let Some((before, cause, skipped)) = self.cut {
            if !skipped {
                self.cut = Some((before, cause, true));
                self.lat_us.update(lat, 0.5);
                return;
            }
            self.cut = None;
            if lat >= CUT_KEPT_LATENCY * cause {
                // Not our queue: the device is slower.
                self.depth = before;
                self.rebase(lat);
                self.since_probe += 2;
                return;
            }
        }
        let now = self.lat_us.update(lat, 0.5);
        let base = match self.lat_base_us {
            None => now,
            // Our writes hardly queue: the base may rise, 10 % a tick.
            Some(b) if self.depth <= BASE_PROBE_DEPTH => (b * 1.1).min(now),
            Some(b) => b.min(now),
        };
        self.lat_base_us = Some(base);
        // Just after a probe, the depth comes down one step a tick at
        // most (see PROBE_SETTLE).
        let settling = self.settle > 0;
        self.settle = self.settle.saturating_sub(1);
        if now > DEPTH_CUT * base && !settling {
            if self.depth > 1 {
                self.cut = Some((self.depth, lat, false));
            }
            self.depth = (self.depth / 2).max(1);
        } else if now > DEPTH_EASE * base {
            let step = if settling { 1 } else { self.depth.div_ceil(4) };
            self.depth = self.depth.saturating_sub(step).max(1);
        } else if now < DEPTH_RAISE * base && self.backlog {
            self.depth = (self.depth + 1).min(MAX_DEPTH);
        }
        self.since_probe += 1;
        if self.since_probe >= PROBE_TICKS
            && self.depth > BASE_PROBE_DEPTH
            && self.headroom
            && self.cut.is_none()
        {
            self.probe = Some((self.depth, PROBE_LEN));
            self.depth = BASE_PROBE_DEPTH;
        }
    }
}

/// The levels on the age axis for free-check limit `limit`, peak redo
/// rate `peak` (bytes/s), the flusher's longest recent stall `stall` (s,
/// see [`band`]) and the recent peak of redo reserved by writers, `held`
/// (bytes; the true peak between ticks and one more of the largest single
/// request, `Admission::take_reserved_peak`, not a sample): (F, S, H).
///
/// The reserve from `H` to `L` is what writers may still log once the
/// curve has stopped letting new ones go: a quarter tick of the peak rate
/// ([`RESERVE_TICKS`]) plus what admitted writers hold reserved, which
/// counts against `L` in the free check (`engine::admission`) before it
/// is logged. Both scale with the redo rate and the writers, not with the
/// log: with a floor of 5 % of `L` the reserve of seed 4 at 30 × scale (a
/// limit of about 470 MiB) was 23 MiB, where a quarter tick of its
/// 57 MB/s is 1.4 MB, and the age rode at 0.90 of `L` with `classic` at
/// the limit (issue 30). The floor is now a tick of the peak rate, at
/// most 5 % of `L` ([`MIN_RESERVE`]) and at least 1 %
/// ([`MIN_RESERVE_SHARE`]): what the flusher, deciding once a tick, may
/// fail to retire when the device falls under a lifted setpoint (with a
/// floor of a quarter tick the simulation of a device falling to a
/// quarter of its speed let writers reach `L`).
pub fn levels(limit: u64, peak: f64, stall: f64, held: f64) -> (u64, u64, u64) {
    let limit_f = limit as f64;
    let tick = TICK.as_secs_f64() * peak;
    let floor = (MIN_RESERVE * limit_f)
        .min(tick)
        .max(MIN_RESERVE_SHARE * limit_f);
    let reserve = (RESERVE_TICKS * tick + held).max(floor);
    let hard = (limit_f - reserve).max(0.5 * limit_f);
    let freerun = (FREERUN * limit_f).min(0.8 * hard);
    let setpoint = ((freerun + hard) / 2.0).max(hard - band(limit, peak, stall));
    (freerun as u64, setpoint as u64, hard as u64)
}

/// The band from `S` to `H` the redo rate needs: the peak redo rate
/// `peak` over [`BAND_TICKS`] ticks or over [`STALL_MARGIN`] × `stall`
/// seconds, the flusher's longest recent spell without retiring anything
/// (see [`Steady::estimate`]), whichever is longer; at least [`MIN_BAND`]
/// of the free-check limit `limit`. [`levels`] puts `S` that far under
/// `H`, or halfway from `F` to `H` if that is higher (a log holding a few
/// seconds of redo).
///
/// What the band holds: the curve takes the writers' rate from the base
/// rate at `S` to nothing at `H`, so the age cannot pass `H` by more than
/// the reserve, however narrow the band; the band sets how hard writers
/// are slowed while the flusher retires less than the base rate says.
/// With writers at rate `r` and nothing retired, the age closes in on `H`
/// with a time constant of about `band / r` (the curve's linear half), so
/// a band of half a second of redo turns a stall of the flusher for a
/// tick or two (a slow data-file sync, a doublewrite flush, a capacity
/// measured a few ticks late after the device slowed down) into a dip of
/// writers to about two thirds of their rate, not a stop. It also holds
/// the checkpoint's sawtooth: a flush-list batch retires at most half of
/// it ([`BATCH_BAND_SHARE`]; up to four bands on a device that charges by
/// the operation, see [`batch_bounds`]). None of that grows with the log:
/// a band sized as a share of the log (`S` halfway from `F` to `H`) held the age
/// at 0.71 of a 512 MiB log on seed 4 scaled 30 ×, with tens of seconds of
/// redo between `S` and `H`, where each page write could have combined
/// more changes.
///
/// Half a second is not enough where one batch takes longer: on a disk
/// throttled to a few hundred writes a second a batch's doublewrite sync,
/// page writes and data-file sync can take a second or more, and the
/// checkpoint stands still meanwhile. The band then holds that spell,
/// with a margin, so that writers are slowed through it, not stopped.
pub fn band(limit: u64, peak: f64, stall: f64) -> f64 {
    let secs = (BAND_TICKS * TICK.as_secs_f64()).max(STALL_MARGIN * stall);
    (secs * peak).max(MIN_BAND * limit as f64)
}

/// The setpoint lifted by `lift` (0 to 1) from `(F + H)/2` towards
/// `F + 0.95 (H − F)` ([`LIFTED_SHARE`]), but never to within a tick of
/// `peak` (the peak redo rate) of `H`.
///
/// Each page write combines more changes the older the page is let grow,
/// and at `(F + H)/2` steady wrote 0.94 pages per transaction on
/// `waves-80-sweep` where `classic`, riding the free-check limit with
/// `io_capacity_max` = 2000, wrote 0.91. The band from `S` to `H` is
/// there for when the flusher falls behind: a device that slows down, a
/// lump of old pages. A flusher that keeps up with room to spare (idle
/// half the time or more, or writing under half of what the device
/// writes in its busy time: `Steady::room_to_spare`) can hold the age
/// higher, and `Steady` lifts the setpoint while it does ([`LIFT_TIME`]
/// to the top), and lowers it within a few ticks of falling behind (a
/// batch or more left unwritten, or writers held: [`LIFT_DROP`]). The
/// band left above the lifted setpoint still holds a tick of the peak
/// redo rate: what the flusher, deciding once a tick, may have to absorb;
/// a device that falls to a quarter at once under a lifted setpoint takes
/// the age to `H` for a few ticks (the simulation measures it).
///
/// Why the lift waits for room to spare: with the device the bottleneck
/// the curve holds writers to what the flusher retires at every tick (the
/// equilibrium, which counts as "held"), so the setpoint stays unlifted
/// there. Where the log holds tens of seconds of redo that costs nothing:
/// `S` is half a second of redo under `H` anyway ([`band`]). Where it
/// holds a second or two, lifting while busy was tried (issue 30: the
/// setpoint rising while the age stayed under the highest setpoint, down
/// when it came within a tenth of `F..H` of `H`): on `disaster-55` at 16,
/// 24 and 48 threads it cost 5-17 % of the throughput and wrote as many
/// pages per transaction (2.04, 2.03, 2.06; with `flush_neighbors` 2 most
/// writes are neighbors, which the age hardly changes), and in the
/// simulation a device falling to a quarter reached `H`. Tried again on
/// the present code (the lift rising whenever the flusher has not fallen
/// behind; the simulations then pass): without neighbors it saved 4-5 %
/// of the page writes at about the same throughput, still more than
/// `classic` writes riding the limit; with `flush_neighbors` 2 it cost a
/// fifth of the throughput, wrote more pages, and seconds fell under half
/// the median (docs/flushing.md, "Lifting while busy, measured again").
pub fn lifted_setpoint(freerun: u64, setpoint: u64, hard: u64, peak: f64, lift: f64) -> u64 {
    let top = freerun as f64 + LIFTED_SHARE * hard.saturating_sub(freerun) as f64;
    let top = top.min(hard as f64 - peak * TICK.as_secs_f64());
    let lifted = setpoint as f64 + lift.clamp(0.0, 1.0) * (top - setpoint as f64);
    (lifted as u64).max(setpoint)
}

/// The flush target set by deadlines: each page must be written before the
/// age of its oldest change reaches `due_at` (halfway from S to H, where
/// the curve holds writers to about 70 % of the base rate). With the log
/// growing at `log_rate`, the `i`-th oldest page (oldest change `lᵢ`) is
/// due in `(lᵢ + due_at − current) / log_rate` seconds, and written oldest
/// first at `pages_per_s` it is done in `(i + 1) / pages_per_s`: the target
/// is past the newest page due within [`DEADLINE_HORIZON`] that would be
/// late if writing started now (earliest deadline first: every older page
/// must go before it). Pages spread in the log as thinly as the flusher
/// retires them are never late while the age is under `due_at`, so this
/// adds to the setpoint's target only when pages lie denser in the log
/// than the flusher can keep pace with (at a cold start, the hot set's
/// first changes), or when the age is already past `due_at`.
///
/// `oldest` is the snapshot's sample merged ([`merged_oldest`]). With
/// `pages_per_s` unknown (nothing written yet), every page due within the
/// horizon counts as late: a first round of them measures the device.
pub fn deadline_target(
    s: &Snapshot,
    oldest: &[Lsn],
    due_at: u64,
    log_rate: f64,
    pages_per_s: Option<f64>,
) -> Lsn {
    if log_rate <= 0.0 {
        return 0;
    }
    let due = |l: Lsn| (l + due_at).saturating_sub(s.current_lsn) as f64 / log_rate;
    let horizon = DEADLINE_HORIZON.as_secs_f64();
    let Some(pages_per_s) = pages_per_s.filter(|&p| p > 0.0) else {
        let oldest = s.oldest_modification();
        return match oldest {
            Some(l) if due(l) <= horizon => {
                (s.current_lsn + (horizon * log_rate) as u64).saturating_sub(due_at)
            }
            _ => 0,
        };
    };
    let mut target = 0;
    for (i, &l) in oldest.iter().enumerate() {
        let due = due(l);
        if due > horizon {
            break;
        }
        if (i + 1) as f64 / pages_per_s >= due {
            target = l + 1;
        }
    }
    target
}

/// The most writers may log per second below the setpoint while pages
/// lie denser in the log than the flusher can write them by their
/// deadlines (a lump, [`deadline_target`]): the rate that keeps the age
/// under the deadline level `due_at` over every horizon of
/// [`headroom_rate`], starting from the present `age` rather than from
/// `S`, if the flusher writes the oldest pages at `list_pps`.
///
/// Without it, writers run free up to `F` and close in on `S` at the
/// approach pace whatever lies in the log. At a cold start on a log
/// holding several seconds of redo (seed 4 at 30 × the preset's scale on
/// 16 cores: a 512 MiB log, 31,000 tps in the free run) they changed
/// 148,000 clean pages in five seconds, the first second's 84,000 of them
/// within a ninth of the log; at `S` the flusher (13,500 pages/s) still
/// had most of them to write, the checkpoint crawled, and writers were
/// held to 8,100-9,900 tps for five seconds against a median of 18,157.
/// Held under this ceiling from the moment the lump is seen, writers
/// slow down while the age is still low and the band is unspent, and the
/// lump stops growing. Nothing is late at a steady state (pages spread as
/// thinly as the flusher retires them), so there is no ceiling then.
pub fn lump_ceiling(
    oldest: &[Lsn],
    all_to: Option<Lsn>,
    list_pps: f64,
    age: u64,
    due_at: u64,
    rho: f64,
) -> f64 {
    headroom_rate(oldest, all_to, list_pps, due_at.saturating_sub(age), rho)
        .unwrap_or(f64::INFINITY)
}

/// The instances' samples of oldest modifications merged in LSN order, up
/// to where every truncated sample still covers its instance (past that,
/// some instance's pages are missing).
pub fn merged_oldest(s: &Snapshot) -> Vec<Lsn> {
    let covered = s
        .instances
        .iter()
        .filter(|i| i.oldest_lsns.len() >= s.flush_list_sample && i.dirty > i.oldest_lsns.len())
        .filter_map(|i| i.oldest_lsns.last().copied())
        .min()
        .unwrap_or(Lsn::MAX);
    let mut lsns: Vec<Lsn> = s
        .instances
        .iter()
        .flat_map(|i| i.oldest_lsns.iter().copied())
        .filter(|&l| l <= covered)
        .collect();
    lsns.sort_unstable();
    lsns
}

/// ρ looking ahead: the log bytes the checkpoint would retire per page if
/// the `pages` oldest pages of `oldest` ([`merged_oldest`]) were written,
/// oldest first (`None` if it holds fewer than two pages).
pub fn forward_rho(oldest: &[Lsn], pages: usize) -> Option<f64> {
    let k = pages.min(oldest.len().checked_sub(1)?);
    (k > 0).then(|| (oldest[k] - oldest[0]) as f64 / k as f64)
}

/// The redo rate writers may keep up, starting at `S`, without the age
/// passing `S + band` over any horizon from a quarter second to 32 s
/// ([`HEADROOM_HORIZONS`]), if the flusher writes the oldest pages of
/// `oldest` ([`merged_oldest`]) at `list_pps` pages a second: the least,
/// over those horizons `T`, of `(band + R(T)) / T`, where `R(T)` is what
/// writing `list_pps × T` pages retires. Past the sample, pages are
/// counted at `rho_beyond` bytes each, or at the sample's average if that
/// is more; `all_to` is the current LSN if the sample holds every dirty
/// page (writing them all retires the log up to it), `None` if it is
/// truncated.
///
/// `capacity × ρ` is the rate at a steady state, where the oldest pages
/// lie as densely in the log as any. Just after a lump of pages changed
/// close together in the log (at a cold start, the free run to `F`
/// changes every page of the pool in a few seconds, the first ones a few
/// hundred bytes of log apart), the flusher retires far less than that
/// for a few seconds, and writers held to what it retires crawled (on
/// `waves-80` on `hdd-raid10`, 550-700 tps for four seconds against a
/// median of 1,280) while the band between `S` and `H`, there to absorb
/// such a lump, stayed unused. At a steady state this is the retire rate
/// plus `band / 32 s`, which changes nothing.
pub fn headroom_rate(
    oldest: &[Lsn],
    all_to: Option<Lsn>,
    list_pps: f64,
    band: u64,
    rho_beyond: f64,
) -> Option<f64> {
    let (&first, &last) = (oldest.first()?, oldest.last()?);
    if oldest.len() < 2 || list_pps <= 0.0 {
        return None;
    }
    let n = oldest.len();
    let end = all_to.unwrap_or(last).max(last);
    let rho_beyond = rho_beyond.max((end - first) as f64 / n as f64);
    let retired = |pages: f64| -> f64 {
        let k = pages as usize;
        if k < n {
            (oldest[k] - first) as f64
        } else {
            (end - first) as f64 + (pages - n as f64) * rho_beyond
        }
    };
    let (mut t, longest) = (
        HEADROOM_HORIZONS.0.as_secs_f64(),
        HEADROOM_HORIZONS.1.as_secs_f64(),
    );
    let mut rate = f64::INFINITY;
    while t <= longest {
        rate = rate.min((band as f64 + retired(list_pps * t)) / t);
        t *= 2.0;
    }
    Some(rate)
}

/// The target that makes a round write at least `batch` pages, the
/// oldest of `oldest` ([`merged_oldest`]), when `target` has some below it
/// and fewer than that: the LSN just past the `batch`-th oldest page (the
/// whole sample if it is shorter); `target` itself otherwise.
///
/// Used while the device is the bottleneck. Every batch pays the same
/// fixed costs whatever its size: a log sync for the write-ahead rule, a
/// doublewrite copy and its sync, a sync of each data file written, and a
/// checkpoint (a write and a sync of the log). On a disk that does a few
/// hundred operations a second each costs as much as a page write. Rounds
/// sized by what came due since the last one shrink to what a short round
/// lets come due: on a disk throttled to 300 write IOPS (`read_write` 8 ×
/// 200,000 rows, 8 threads, 2 × 32 MiB log) they fell to about 50 pages,
/// four or five a second, each with the fixed costs of a whole batch, and
/// the flusher got 230 pages a second through where it had got 256 with
/// full batches. Writing the next-oldest pages a little early costs little
/// combining: a batch is at most half the band from `S` to `H`
/// ([`list_batch`]), a small part of the age.
pub fn full_batch_target(oldest: &[Lsn], target: Lsn, batch: usize) -> Lsn {
    let due = oldest.partition_point(|&l| l < target);
    if due == 0 || due >= batch {
        return target;
    }
    // 1 <= due < batch, and the sample holds at least `due` pages.
    let last = oldest[batch.min(oldest.len()) - 1];
    target.max(last.saturating_add(1))
}

/// The share of the band from `S` to `H` one flush-list batch may retire,
/// and the most pages a merged batch writes, by what the device was
/// measured to charge ([`merge::WriteMerging`]).
///
/// Every batch pays the same fixed costs whatever its size (see
/// [`full_batch_target`]): on the test machine's disk throttled to 300
/// write IOPS, with the data in four files, about ten operations a batch
/// besides its pages (a log sync, a doublewrite copy per 128 pages and its
/// sync, a sync and an inode write per data file, a checkpoint), where a
/// batch of half the band carried about 180 pages in some 40 writes. Where
/// a write costs the device at least [`merge::RUNS_ON`] pages, as there,
/// a batch retires up to four bands ([`BATCH_BAND_SHARE_PER_OP`]) and
/// merged batches go up to [`MERGED_BATCH`]. With the whole band (until
/// 2026-12-03): 60 s runs of the shape of `scripts/compare.sh`, three
/// rounds, 2,204 → 2,314 transactions a second (batches of 180 → 320
/// pages, data-file syncs 20 → 14 a second). Since the setpoint and its
/// band moved (the band is now about 4 % of the log there), a band's
/// batch was back to 200-270 pages, about five batches a second, with a
/// small one between them as often as not; a block trace counted some 80
/// of the throttle's 300 operations a second in the batches' fixed costs.
/// The same runs made 2,155 → 2,287 tps with two bands (one sitting), and
/// 2,237 → 2,298 from two bands to four (the next; bounded by
/// [`MERGED_BATCH`] first), 2,100-2,240 over seconds 31-60 against
/// 1,970-2,020 before, with no more seconds under half the median; at
/// 1,000 write IOPS and on `disaster-55` (`hdd-raid10`) the same within
/// the noise. The larger tooth it makes in the age costs nothing there: a
/// batch takes a second, writers are paced through it. Where a write is
/// charged by its pages, a batch longer than half the band saves little
/// and its tooth makes writers' pauses come in lumps (see
/// [`list_batch`]): those devices keep half the band and [`LIST_BATCH`].
pub fn batch_bounds(mode: NeighborMode) -> (f64, usize) {
    match mode {
        NeighborMode::Contiguous => (BATCH_BAND_SHARE_PER_OP, MERGED_BATCH),
        _ => (BATCH_BAND_SHARE, LIST_BATCH),
    }
}

/// Pages per flush-list batch, per instance: as many of the oldest pages
/// of `oldest` ([`merged_oldest`]) as lie within `span` bytes of log of the
/// first, shared by `instances` (between [`MIN_LIST_BATCH`] and
/// [`LIST_BATCH`]). The checkpoint moves after every batch, so the age is a
/// sawtooth: it climbs as writers log and drops by what a batch retired.
/// With a small log on a fast device (`neighbors` on `sata-ssd`: the band
/// from `S` to `H` was 0.2 MB, a batch of 256 pages retired 0.5 MB) every
/// batch took the age from `H`, where the curve holds writers, to below
/// `F`, where they run free: the pauses came in lumps of a whole batch's
/// time, and a few transactions took them all (p50 1.3 ms, p99.9 167 ms).
/// A batch bounded to half the band keeps the teeth small. (A quarter
/// cost `disaster-55` on `hdd-raid10` a tenth of its throughput: every
/// batch pays a doublewrite sync, a data-file sync and a checkpoint.)
pub fn list_batch(oldest: &[Lsn], span: u64, instances: usize) -> usize {
    let Some(&first) = oldest.first() else {
        return LIST_BATCH;
    };
    let within = oldest.partition_point(|&l| l - first <= span);
    if within >= oldest.len() {
        // The whole sample lies within the span: nothing to bound.
        return LIST_BATCH;
    }
    (within / instances.max(1)).clamp(MIN_LIST_BATCH, LIST_BATCH)
}

/// The throttle curve: 2 at or below `F`, 1 at `S`, 0 at `H` and above:
/// `1 + x/2 + x³/2` with `x = (S − age)/(H − S)`. The cubic half makes it
/// steep near `H`; the linear half makes it pull back to `S` from a small
/// excess too (a pure cubic is so flat near `S` that, in the simulation, an
/// age 4 % of `L` above it took 20 s to drain; with the linear half the
/// excess drains with a time constant of `(H − S) / (2 × retire rate)`).
pub fn pos_ratio(age: u64, setpoint: u64, hard: u64) -> f64 {
    let span = (hard as f64 - setpoint as f64).max(1.0);
    let x = (setpoint as f64 - age as f64) / span;
    (1.0 + LINEAR * x + (1.0 - LINEAR) * x * x * x).clamp(0.0, 2.0)
}

/// Counters of the previous snapshot.
#[derive(Clone, Copy, Debug)]
struct Last {
    now: Duration,
    lsn: Lsn,
    checkpoint: Lsn,
    pages_written: u64,
    writes: u64,
    write_us: u64,
    busy_us: u64,
    flusher_busy_us: u64,
    frames_taken: u64,
    list_pages: u64,
    neighbor_pages: u64,
}

impl Last {
    fn of(s: &Snapshot) -> Last {
        Last {
            now: s.now,
            lsn: s.current_lsn,
            checkpoint: s.checkpoint_lsn,
            pages_written: s.pages_written,
            writes: s.data_writes,
            write_us: s.data_write_us,
            busy_us: s.data_write_busy_us,
            flusher_busy_us: s.flusher_busy_us,
            frames_taken: s.frames_taken,
            list_pages: s.list_pages_flushed,
            neighbor_pages: s.neighbor_pages_flushed,
        }
    }
}

/// Keel's controller (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Steady {
    last: Option<Last>,
    log_rate: Ewma,
    log_peak: Peak,
    device: Device,
    rho: Ewma,
    /// Pages per second of wall time the flusher achieves when it has
    /// more to write than it can.
    capacity: Ewma,
    /// The capacity's measuring window: since when, pages written before
    /// it, and whether the flusher had a backlog at every round in it.
    window: Option<(Duration, u64, bool)>,
    /// Pages below the last target (uncapped), over all instances.
    last_below: usize,
    /// Time, before any capacity is measured, that the flusher has had
    /// pages to write at every round and written them all (reset by a
    /// backlog): it keeps up, so it may hold S without a measured capacity.
    kept_up_for: Duration,
    base_rate: Ewma,
    /// The share of the pages written that were flush-list pages, not
    /// their neighbors nor LRU writes.
    list_share: Ewma,
    alloc_rate: Peak,
    /// The setpoint of the last decision.
    last_setpoint: Option<u64>,
    /// When the capacity was last measured with a backlog at every round.
    proven_at: Option<Duration>,
    /// The redo rate the last decision allowed writers at the age it saw
    /// (`None`: free).
    last_allowed: Option<f64>,
    /// How far the setpoint is lifted, 0 to 1 (see [`lifted_setpoint`]).
    lift: f64,
    /// Seconds since the checkpoint last moved while the flusher had
    /// pages to write.
    unretired_for: f64,
    /// The longest such spell lately, in seconds (see [`band`]).
    stall: Peak,
    /// The most redo reserved by writers lately, in bytes (see [`levels`]).
    reserved: Peak,
    /// The device is the bottleneck: the flusher had a backlog in the last
    /// tick and the device had no room to spare (see
    /// [`full_batch_target`]).
    device_bound: bool,
    /// Whether writes of runs pay on this device, for `flush_neighbors =
    /// auto` (see [`merge`]).
    merging: merge::WriteMerging,
}

impl Steady {
    /// A controller with no history.
    pub fn new() -> Steady {
        Steady::default()
    }

    fn estimate(&mut self, s: &Snapshot) {
        self.merging.update(s);
        let Some(last) = self.last.replace(Last::of(s)) else {
            return;
        };
        let dt = s.now.saturating_sub(last.now).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let ticks = dt / TICK.as_secs_f64();
        let rate = s.current_lsn.saturating_sub(last.lsn) as f64 / dt;
        self.log_rate.update(rate, 0.3);
        self.log_peak.update(rate, ticks, 0.98);
        // A probe slows LRU writes too: it waits until the age is under
        // the setpoint and every instance has the free frames it wants
        // (on `lru-scan-depth` on `hdd-raid10`, with the free lists empty,
        // a probe cut LRU writes by a third and the second it fell in to
        // half the median tps).
        let n = s.instances.len();
        self.device.headroom = self
            .last_setpoint
            .is_none_or(|sp| s.current_lsn.saturating_sub(s.checkpoint_lsn) < sp)
            && s.instances.iter().all(|i| i.free >= self.lru_want(i, n));
        // The flusher is behind when it left more than a batch below its
        // target, or when it spent (nearly) the whole tick in its round: a
        // small pool on a fast device holds fewer dirty pages than a tick
        // writes, so the first alone never showed a backlog there, the
        // capacity stayed unmeasured and writers were held to the busy-time
        // bandwidth, many times what the flusher retires (`neighbors` on
        // `sata-ssd`: the age at `H` for the whole run).
        let flushed = s.pages_written.saturating_sub(last.pages_written) as f64;
        let flusher_busy = s.flusher_busy_us.saturating_sub(last.flusher_busy_us) as f64 / 1e6;
        // Left behind: more than a batch unwritten. The few pages a round
        // passes over because a user thread held them are no backlog:
        // counted as one, three such ticks in a row made a window "with a
        // backlog throughout" that achieved only what was asked, and the
        // rule for a device that slowed down cut the capacity to it
        // (`waves-80-sweep`: 8,078 to 2,674 pages/s with the busy-time
        // bandwidth at 11,270, one or two pages short in each tick; the
        // writers' base rate fell with it, they were held, and the lift
        // was lost for 10 s).
        let left_behind = self.last_below as f64 > flushed + MIN_LIST_BATCH as f64;
        let backlog = left_behind || flusher_busy >= FLUSHER_BUSY * dt;
        // Writers logging (nearly) all they were allowed are held by what
        // the flusher retires: it is behind them, even with no backlog of
        // its own (at the equilibrium the curve holds it in).
        let held = self
            .last_allowed
            .is_some_and(|allowed| rate >= WRITERS_HELD * allowed);
        self.device.backlog = backlog || held;
        // Fell behind, for the lift and for keeping up: a batch or more
        // left unwritten, not the few pages a round passes over because a
        // user thread held them. With `left_behind` a page or two short
        // every few ticks took the lift back to nothing, so it never rose,
        // and kept a flusher that keeps up from counting as such for 20 s
        // (the age held at F meanwhile, below a setpoint it could hold).
        let fell_behind = self.last_below as f64 > BEHIND_SLACK * flushed + MIN_LIST_BATCH as f64;
        // The setpoint rises while the flusher keeps up with room to spare
        // and comes down within a few ticks of falling behind (see
        // `lifted_setpoint`).
        if fell_behind || held {
            self.lift = (self.lift - LIFT_DROP * ticks).max(0.0);
        } else if flusher_busy < FLUSHER_EASY * dt || self.room_to_spare(flushed, dt) {
            self.lift = (self.lift + dt / LIFT_TIME.as_secs_f64()).min(1.0);
        }
        self.device.update(
            dt,
            s.pages_written.saturating_sub(last.pages_written),
            s.data_writes.saturating_sub(last.writes),
            s.data_write_us.saturating_sub(last.write_us),
            s.data_write_busy_us.saturating_sub(last.busy_us),
        );
        self.device_bound = backlog && !self.room_to_spare(flushed, dt);
        // Every page written back lets the checkpoint move on, whichever
        // flush wrote it, so ρ is per page written (as `bw` is).
        let retired = s.checkpoint_lsn.saturating_sub(last.checkpoint) as f64;
        // The flusher's spells without retiring anything while it had
        // pages to write: the band must hold the redo of the longest.
        if retired > 0.0 || self.last_below == 0 {
            self.unretired_for = 0.0;
        } else {
            self.unretired_for += dt;
        }
        self.stall.update(self.unretired_for, ticks, STALL_DECAY);
        self.reserved.update(
            s.redo_reserved_peak.max(s.redo_reserved) as f64,
            ticks,
            RESERVED_DECAY,
        );
        if retired > 0.0 && flushed > 0.0 {
            self.rho.update(retired / flushed, 0.2);
        }
        if flushed > 0.0 {
            let list = s.list_pages_flushed.saturating_sub(last.list_pages);
            let neighbors = s.neighbor_pages_flushed.saturating_sub(last.neighbor_pages);
            let own = list.saturating_sub(neighbors) as f64;
            self.list_share.update((own / flushed).min(1.0), 0.2);
        }
        // Capacity: measured over windows of at least CAPACITY_WINDOW
        // (batches complete in lumps, and rounds come early when writers
        // wake the cleaners), in which the flusher had more below its
        // target than it wrote at every round; otherwise what it wrote is
        // only a lower bound.
        // Kept up: wrote (nearly) all it was asked at every round, however
        // long that took (a busy flusher that keeps up has not fallen
        // behind).
        if fell_behind {
            self.kept_up_for = Duration::ZERO;
        } else if self.last_below > 0 {
            self.kept_up_for += s.now.saturating_sub(last.now);
        }
        let (since, pages0, all_backlog) =
            self.window
                .get_or_insert((last.now, last.pages_written, true));
        *all_backlog &= backlog;
        let span = s.now.saturating_sub(*since);
        if span >= CAPACITY_WINDOW {
            let achieved = s.pages_written.saturating_sub(*pages0) as f64 / span.as_secs_f64();
            // Without a backlog, what was written is what was asked: it
            // may raise a measured capacity, never stand for one (writers
            // held to it would ask for less and less).
            let before = self.capacity.get();
            let raise = before.is_some_and(|c| achieved > c);
            // With a backlog throughout and less than half the capacity
            // achieved, the device has slowed down: the measurement
            // replaces the old figure at once rather than halve the gap
            // every window (TCP's multiplicative decrease). A capacity
            // measured on a disk before it was throttled from 13,000 to
            // 1,000 writes a second took 6 s to come down, writers allowed
            // the old rate into the hard level all that time.
            let slowed = *all_backlog && before.is_some_and(|c| achieved < CAPACITY_DROP * c);
            if slowed {
                self.capacity.update(achieved, 1.0);
            } else if *all_backlog || raise {
                self.capacity.update(achieved, 0.5);
            }
            // Proven: a backlog throughout, and no more achieved than the
            // capacity already said (a first measurement, or one well
            // over the last, says the flusher was still speeding up).
            if *all_backlog && before.is_some_and(|c| achieved <= CAPACITY_PROVEN_SLACK * c) {
                self.proven_at = Some(s.now);
            }
            self.window = Some((s.now, s.pages_written, true));
        }
        let alloc = s.frames_taken.saturating_sub(last.frames_taken) as f64 / dt;
        // Fast attack, slow decay (about 10 % a second).
        self.alloc_rate.update(alloc, ticks, 0.99);
    }

    /// Whether the flusher, having written `flushed` pages in `dt`
    /// seconds, wrote under [`FLUSHER_EASY`] of the device's busy-time
    /// speed: the device sat idle half the time or more. This is the
    /// headroom whatever the flusher's shape: a merged round writes every
    /// instance's batches one after another in the coordinator, which is
    /// then busy for most of a tick (its doublewrite copy, syncs and
    /// checkpoint wait on latency, not on the device's speed) where four
    /// cleaners writing side by side were each busy for a quarter of it
    /// (issue 30: on `waves-80-sweep` merging the lists kept the setpoint
    /// at 0.71 of the log, where it had been lifted to 0.77-0.79, and the
    /// pages per transaction rose from 0.86 to 0.92-1.01). The flusher's
    /// capacity is no measure of it: it is measured while the flusher is
    /// busy, which a merged round always is.
    fn room_to_spare(&self, flushed: f64, dt: f64) -> bool {
        self.device
            .bw
            .get()
            .is_some_and(|bw| flushed < FLUSHER_EASY * bw * dt)
    }

    /// ρ, or a first guess from the snapshot: the age spread over the
    /// dirty pages.
    fn rho(&self, s: &Snapshot) -> f64 {
        self.rho.get().unwrap_or_else(|| {
            let age = s
                .current_lsn
                .saturating_sub(s.oldest_modification().unwrap_or(s.current_lsn));
            (age as f64 / s.dirty().max(1) as f64).max(1.0)
        })
    }
}

impl FlushPolicy for Steady {
    fn name(&self) -> FlushPolicyName {
        FlushPolicyName::Steady
    }

    fn decide(&mut self, s: &Snapshot) -> FlushTargets {
        self.estimate(s);
        let log_rate = self.log_rate.get().unwrap_or(0.0);
        let peak = self.log_peak.get();
        let (freerun, setpoint, hard) = levels(
            s.free_check_limit,
            peak,
            self.stall.get(),
            self.reserved.get(),
        );
        let setpoint = lifted_setpoint(freerun, setpoint, hard, peak, self.lift);
        self.last_setpoint = Some(setpoint);
        let age = s.current_lsn.saturating_sub(s.checkpoint_lsn);
        // The flusher's target: the setpoint a tick ahead, and half the way
        // back from above it.
        let ahead = (log_rate * TICK.as_secs_f64()) as u64;
        let over = age.saturating_sub(setpoint) as f64;
        let keep = (setpoint as f64 - CATCH_UP * over).max(0.0) as u64;
        // Until its capacity has been proven, the flusher writes what is
        // older than F as soon as the age passes F, so that the capacity is
        // known (and writers held to it) before the age reaches S; unless
        // it has kept up there for a while (a fast device never gets a
        // backlog at F, so its capacity is never measured, and the age
        // would stay at F for good: more page writes for the same work).
        // Measured is not enough: a first figure comes from rounds still
        // capped for an unmeasured device, and on `disaster-55` in open
        // loop (`--rate 360`) one of 602 pages/s (850 later) sent the
        // flusher to wait for S with a lump of pages that it then retired
        // slower than writers logged: writers were paced for three
        // seconds, and the latency from the due time reached a second.
        let keep = if self.proven_at.is_none() && self.kept_up_for < KEPT_UP && age > freerun {
            keep.min(freerun)
        } else {
            keep
        };
        // Writers hold or wait for `redo_reserved` bytes, each let in only
        // while `age + reserved ≤ L` (`engine::admission`): the age comes
        // down to `L − reserved` whatever the setpoint says, or one large
        // reservation (a bulk load's step on 64 KiB pages with a 1 MiB log
        // needs more than `L − F`) waits for good with the flusher idle.
        // Reservations already granted never ask for more than the age is.
        let keep = keep.min(s.free_check_limit.saturating_sub(s.redo_reserved));
        let target = (s.current_lsn + ahead).saturating_sub(keep);
        let bw = self.device.bw.get();
        let capacity = self.capacity.get().filter(|&c| c > 0.0);
        // ρ as measured looks back: just after a lump of pages changed
        // close together in the log (at a cold start, the hot set's first
        // changes) it is a fraction of what the next pages will retire,
        // and writers held to it crawled at a third of their rate with the
        // age under S and the flusher idle. The sample shows what lies
        // ahead; it is discounted because neighbors and LRU writes retire
        // nothing (at a steady state the measured ρ is the larger).
        // The sample merged once, for both looks ahead below.
        let oldest = merged_oldest(s);
        let rho = match capacity.or(bw) {
            Some(pps) => {
                let ahead = forward_rho(&oldest, pps as usize).unwrap_or(0.0);
                self.rho(s).max(FORWARD_RHO_SHARE * ahead)
            }
            None => self.rho(s),
        };
        // A lump of pages dirtied close together in the log (at a cold
        // start, the hot set's first changes) takes longer to write than
        // the log takes to carry them past S: such pages are written when
        // their deadline says so (see `deadline_target`), even below F.
        let pace = capacity.or(bw.map(|b| b * DEADLINE_BW_SHARE));
        let due_at = setpoint + (hard.saturating_sub(setpoint)) / 2;
        let deadline = deadline_target(s, &oldest, due_at, log_rate, pace);
        // Some page would be late even if the flusher wrote the oldest
        // ones at its pace from now on: writers are held under the ceiling
        // below (`lump_ceiling`), so that the lump stops growing.
        let late = deadline > target;
        let target = target.max(deadline);
        let (band_share, merged_cap) = batch_bounds(self.merging.mode());
        let span = (hard.saturating_sub(setpoint) as f64 * band_share) as u64;
        let batch = list_batch(&oldest, span, s.instances.len());
        let target = if self.device_bound {
            // The merged batch: every instance's, as the cleaners sum them.
            let merged = (batch * s.instances.len().max(1)).min(merged_cap);
            full_batch_target(&oldest, target, merged)
        } else {
            target
        };
        let (instances, below) = self.instance_targets(s, target, capacity.or(bw), batch);
        self.last_below = below;
        let requested: usize = instances.iter().map(|t| t.list_pages).sum();
        // Writers: free below F, then the curve around the rate the flusher
        // can retire.
        // ... and, just after a lump, what the band from S to the deadline
        // level can absorb while the flusher writes it (`headroom_rate`).
        let all_to = (oldest.len() >= s.dirty()).then_some(s.current_lsn);
        let retire = match capacity {
            Some(c) => {
                let lump = self.list_share.get().and_then(|share| {
                    headroom_rate(&oldest, all_to, c * share, due_at - setpoint, rho)
                });
                Some((c * rho * self.capacity_gain(s.now)).max(lump.unwrap_or(0.0)))
            }
            None => bw.map(|b| b * rho),
        };
        let base = match retire {
            // The rate the flusher can retire, measured: the curve holds
            // writers to it from F on (below S, `WriterLimit::rate_at`
            // still lets them close in on S at an exponential pace, so a
            // low estimate cannot starve them: at S the flusher then has
            // a backlog, and the capacity it measures corrects the base).
            Some(r) => self.base_rate.update(r, 0.2),
            // Nothing measured yet, below S: no base; writers close in on
            // S at the approach pace while the flusher, writing from F on,
            // measures the device.
            None if age <= setpoint => 0.0,
            // Nothing measured and above S: a rate that cannot take the
            // age from the setpoint to the hard level within a tick.
            None => self
                .base_rate
                .get()
                .unwrap_or(hard.saturating_sub(setpoint) as f64 / TICK.as_secs_f64()),
        };
        let pos = pos_ratio(age, setpoint, hard);
        let ceiling = match pace {
            Some(pps) if late => {
                let list_pps = pps * self.list_share.get().unwrap_or(1.0);
                lump_ceiling(&oldest, all_to, list_pps, age, due_at, rho)
            }
            _ => f64::INFINITY,
        };
        let limit = WriterLimit {
            base_rate: base,
            freerun,
            setpoint,
            hard,
            lump_ceiling: ceiling,
        };
        let writer_log_rate = limit.rate_at(age);
        self.last_allowed = writer_log_rate;
        let figures = SteadyFigures {
            freerun,
            setpoint,
            hard,
            pos_ratio: if age > freerun { pos } else { 2.0 },
            base_rate: base,
            log_rate,
            log_rate_peak: peak,
            bw: bw.unwrap_or(0.0),
            capacity: capacity.unwrap_or(0.0),
            queue_depth: self.device.depth,
            rho,
            stall_spell: self.stall.get(),
            write_cost_pages: self.merging.cost(),
            lump_ceiling: ceiling,
        };
        let reason = reason(
            age,
            s.free_check_limit,
            &figures,
            requested,
            target,
            writer_log_rate,
            self.lift,
        );
        FlushTargets {
            instances,
            sleep: TICK,
            full_round: true,
            writer_limit: Some(limit),
            decision: Decision {
                mode: if requested > 0 {
                    FlushMode::Adaptive
                } else {
                    FlushMode::Idle
                },
                n_requested: requested as u64,
                n_by_age: requested as u64,
                avg_page_rate: bw.unwrap_or(0.0),
                lsn_avg_rate: log_rate,
                reason,
                steady: Some(figures),
                ..Decision::default()
            },
            io_depth: Some(self.device.depth),
            checkpoint_each_batch: true,
            merge_instances: true,
            merged_batch: Some(merged_cap),
            round_budget: Some(TICK.mul_f64(ROUND_TICKS)),
            eager_lru: true,
            neighbors_in_batch_size: true,
            neighbors: self.merging.mode(),
            // Gaps are filled only with the age at the setpoint or above:
            // under it (a cold start's run-up) the flusher's extra speed
            // let the lump ceiling admit more writers, whose pages came
            // back as a deeper trough when the age reached the top (at
            // 300 write IOPS, 5 seconds under half the median against 1,
            // medians of 9 runs; `docs/flushing.md`, "Gaps filled: what
            // they bought").
            gap_pages: match self.merging.mode() {
                NeighborMode::Off => 0,
                _ if age < setpoint => 0,
                _ => crate::flush::neighbors::gap_bound(self.merging.cost()),
            },
            oldest_latch_wait: OLDEST_LATCH_WAIT,
        }
    }
}

impl Steady {
    /// The gain on the rate a measured capacity can retire: 1 while the
    /// capacity is proven (see [`CAPACITY_PROVEN_FOR`]), else
    /// [`CAPACITY_PROBE_GAIN`].
    fn capacity_gain(&self, now: Duration) -> f64 {
        match self.proven_at {
            Some(t) if now.saturating_sub(t) < CAPACITY_PROVEN_FOR => 1.0,
            Some(_) => CAPACITY_PROBE_GAIN,
            None => CAPACITY_START_GAIN,
        }
    }

    /// The free frames instance `i` (of `instances`) keeps: a tick of the
    /// recent allocation rate ([`LRU_LOOKAHEAD_S`]), at least 8, at most an
    /// eighth of it.
    fn lru_want(&self, i: &InstanceSnapshot, instances: usize) -> usize {
        let alloc = self.alloc_rate.get() / instances.max(1) as f64;
        ((alloc * LRU_LOOKAHEAD_S) as usize).clamp(8, (i.total / 8).max(8))
    }

    /// Per instance: the flush-list pages below `target` (counted in the
    /// snapshot's sample of oldest modifications; a full sample means "at
    /// least this many"), at most [`ROUND_TICKS`] of `pages_per_s` (the
    /// capacity, shared by the instances; [`UNMEASURED_ROUND_PAGES`] while
    /// it is unknown), in batches of `batch` pages, and the free frames to
    /// keep. Also the pages below `target` in all, before that cap.
    fn instance_targets(
        &self,
        s: &Snapshot,
        target: Lsn,
        pages_per_s: Option<f64>,
        batch: usize,
    ) -> (Vec<InstanceTarget>, usize) {
        let n = s.instances.len().max(1) as f64;
        let cap = pages_per_s.map_or(UNMEASURED_ROUND_PAGES, |r| {
            ((r * ROUND_TICKS * TICK.as_secs_f64() / n) as usize).max(ROUND_MIN_PAGES)
        });
        // A whole batch per round while the device is the bottleneck (see
        // `full_batch_target`), whatever two ticks of the capacity are.
        let cap = if self.device_bound {
            cap.max(batch)
        } else {
            cap
        };
        let mut all_below = 0;
        let targets = s
            .instances
            .iter()
            .map(|i| {
                let below = i.oldest_lsns.iter().take_while(|&&l| l < target).count();
                let below = if below == i.oldest_lsns.len() && below == s.flush_list_sample {
                    i.dirty
                } else {
                    below
                };
                all_below += below;
                let list_pages = below.min(cap);
                let want = self.lru_want(i, s.instances.len());
                InstanceTarget {
                    lru_want_free: if i.free < want { want } else { 0 },
                    lru_scan: (4 * want).min(i.total),
                    // A round's LRU writes are bounded like its flush-list
                    // writes: with a dirty tail, all the dirty pages met
                    // in the scan made one batch (a whole small pool's
                    // worth), and on `hdd-raid10` the round then lasted
                    // over a second, with no flush-list batch and no
                    // checkpoint meanwhile.
                    lru_write_max: want.min(cap),
                    list_pages,
                    list_lsn_limit: target,
                    list_kind: FlushKind::Adaptive,
                    list_batch: batch,
                }
            })
            .collect();
        (targets, all_below)
    }
}

/// The status report's line: what `steady` is doing now, for a DBA.
fn reason(
    age: u64,
    limit: u64,
    f: &SteadyFigures,
    requested: usize,
    target: Lsn,
    writer_rate: Option<f64>,
    lift: f64,
) -> String {
    let pct = |x: u64| 100.0 * x as f64 / limit.max(1) as f64;
    // Said only when it shows as at least 1 % ("raised 0%" says nothing).
    let raised = (100.0 * lift).round();
    let lifted = if raised >= 1.0 {
        format!(", raised {raised:.0}% of the way to its highest while the flusher keeps up")
    } else {
        String::new()
    };
    let writers = match writer_rate {
        None => "writers run free".to_string(),
        Some(r) if f.lump_ceiling.is_finite() && age < f.setpoint && r >= f.lump_ceiling => {
            format!(
                "writers held to {:.1} MB/s of redo, the lump ceiling (pages lie denser in the \
             log than the flusher can write them by their deadlines)",
                r / 1e6
            )
        }
        Some(r) => format!(
            "writers held to {:.1} MB/s of redo (position {:.2} on the curve)",
            r / 1e6,
            f.pos_ratio
        ),
    };
    format!(
        "steady: age {:.0}% of the limit (setpoint {:.0}%{lifted}, writers slowed above {:.0}%, \
         stopped at {:.0}%); flushing {requested} pages older than LSN {target} at the \
         device's {:.0} pages/s with {} writes in flight; {writers}",
        pct(age),
        pct(f.setpoint),
        pct(f.freerun),
        pct(f.hard),
        f.bw,
        f.queue_depth
    )
}

#[path = "steady/merge.rs"]
pub mod merge;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "steady/tests.rs"]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "steady/sim.rs"]
mod sim;
