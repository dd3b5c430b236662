//! The policy interface: a [`Snapshot`] of the engine in, [`FlushTargets`]
//! out. InnoDB's adaptive flushing (`classic`) and Keel's controller
//! (`steady`) implement it; everything else (cleaner threads, batching,
//! doublewrite, neighbors, metrics) is shared.

pub mod classic;
pub mod steady;

use std::time::Duration;

use super::batch::FlushKind;
use super::neighbors::NeighborMode;
use crate::config::{FlushPolicyName, Options};
use crate::page::Lsn;

/// State of one buffer-pool instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceSnapshot {
    /// Frames in the instance.
    pub total: usize,
    /// Frames on the free list.
    pub free: usize,
    /// Pages on the LRU list.
    pub lru_len: usize,
    /// Pages on the flush list.
    pub dirty: usize,
    /// Oldest modification on the flush list.
    pub oldest_modification: Option<Lsn>,
    /// Oldest modifications of the first pages of the flush list, oldest
    /// first (at most [`Snapshot::flush_list_sample`] of them): enough for a
    /// policy to count the pages below an LSN.
    pub oldest_lsns: Vec<Lsn>,
}

/// Everything a policy may look at. Counters are totals since the engine
/// started; the policy keeps what it needs to turn them into rates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Time since the engine started (injected, so simulations control it).
    pub now: Duration,
    /// Current LSN.
    pub current_lsn: Lsn,
    /// LSN of the last checkpoint.
    pub checkpoint_lsn: Lsn,
    /// End of the durable redo log.
    pub flushed_lsn: Lsn,
    /// Usable bytes of the redo log.
    pub log_capacity: u64,
    /// Checkpoint age past which writers wait in the free check.
    pub free_check_limit: u64,
    /// InnoDB's `max_modified_age_async` (7/8 of the free-check limit).
    pub max_modified_age_async: u64,
    /// InnoDB's `max_modified_age_sync` (15/16 of the free-check limit).
    pub max_modified_age_sync: u64,
    /// Redo bytes admitted writers have reserved plus what waiting writers
    /// need: the age must drop this far below the free-check limit before
    /// every waiter can go on.
    pub redo_reserved: u64,
    /// The most redo admitted writers held reserved at once since the last
    /// snapshot (at least `redo_reserved`), plus what waiting writers need:
    /// what the reserve under the free-check limit must hold.
    pub redo_reserved_peak: u64,
    /// Writers waiting in the free check right now.
    pub free_check_waiters: usize,
    /// Pages written by flush-list flushing (any kind) since start.
    pub list_pages_flushed: u64,
    /// Pages written by LRU flushing and single-page flushes since start.
    pub lru_pages_flushed: u64,
    /// Pages written because they neighbored a flushed page, since start
    /// (counted in the flush's kind too).
    pub neighbor_pages_flushed: u64,
    /// Times a thread found no free frame since start (single-page flush
    /// scans and free-frame waits).
    pub free_frame_misses: u64,
    /// Pages written back by any flush since start.
    pub pages_written: u64,
    /// Clean pages written to fill gaps since start (not in
    /// `pages_written`).
    pub gap_pages_written: u64,
    /// Data-file write calls since start.
    pub data_writes: u64,
    /// Microseconds those write calls took, summed.
    pub data_write_us: u64,
    /// Microseconds with at least one data-file write in flight.
    pub data_write_busy_us: u64,
    /// Doublewrite area writes with page images since start begun while no
    /// in-place data write was in flight (0 under `detect_only`, whose
    /// areas hold a header alone): the ones timed for `steady::merge`.
    pub dblwr_alone_writes: u64,
    /// Pages those writes carried.
    pub dblwr_alone_pages: u64,
    /// Microseconds those writes took, their syncs not included.
    pub dblwr_alone_write_us: u64,
    /// Microseconds the page cleaners' coordinator spent in rounds (from
    /// the snapshot to the checkpoint, the slowest cleaner included): a
    /// flusher busy all the time is at its capacity.
    pub flusher_busy_us: u64,
    /// Frames taken for pages (reads and new pages) since start.
    pub frames_taken: u64,
    /// How many flush-list entries per instance `oldest_lsns` holds at most.
    pub flush_list_sample: usize,
    /// Per-instance state.
    pub instances: Vec<InstanceSnapshot>,
}

impl Snapshot {
    /// Dirty pages over all instances.
    pub fn dirty(&self) -> usize {
        self.instances.iter().map(|i| i.dirty).sum()
    }

    /// Dirty pages as a percentage of the pages in use or free (InnoDB's
    /// `buf_get_modified_ratio_pct`).
    pub fn dirty_pct(&self) -> f64 {
        let base: usize = self.instances.iter().map(|i| i.lru_len + i.free).sum();
        100.0 * self.dirty() as f64 / base.max(1) as f64
    }

    /// Oldest modification over all instances.
    pub fn oldest_modification(&self) -> Option<Lsn> {
        self.instances
            .iter()
            .filter_map(|i| i.oldest_modification)
            .min()
    }
}

/// What to flush in one instance this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceTarget {
    /// Free frames LRU flushing should produce (0 = no LRU flushing).
    pub lru_want_free: usize,
    /// How deep LRU flushing may scan from the tail.
    pub lru_scan: usize,
    /// Most dirty pages LRU flushing writes this round (`usize::MAX`: all
    /// it meets within `lru_scan`, as InnoDB's LRU flushing does), plus
    /// the rest of the contiguous run it is writing when it gets there
    /// (see [`FlushTargets::neighbors_in_batch_size`]).
    pub lru_write_max: usize,
    /// Pages to write from the oldest end of the flush list.
    pub list_pages: usize,
    /// Only pages whose oldest modification is below this LSN.
    pub list_lsn_limit: Lsn,
    /// Counter the flush-list pages are charged to.
    pub list_kind: FlushKind,
    /// Most pages one flush-list batch writes (at most [`LIST_BATCH`]): a
    /// policy that
    /// checkpoints after every batch sets how far one checkpoint moves.
    pub list_batch: usize,
}

impl Default for InstanceTarget {
    fn default() -> Self {
        InstanceTarget {
            lru_want_free: 0,
            lru_scan: 0,
            lru_write_max: usize::MAX,
            list_pages: 0,
            list_lsn_limit: Lsn::MAX,
            list_kind: FlushKind::Background,
            list_batch: LIST_BATCH,
        }
    }
}

/// The flushing mode a round ran in (the status report's diagnosis).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlushMode {
    /// No activity: background flushing at `io_capacity`.
    #[default]
    Idle,
    /// Checkpoint age below the async mark: adaptive flushing.
    Adaptive,
    /// Age past the async mark (`max_modified_age_async`).
    Async,
    /// Age past the sync mark: sync flushing, writers may stop.
    Sync,
}

impl FlushMode {
    /// The gauge value of `buffer_flush_mode`.
    pub fn code(self) -> u64 {
        self as u64
    }

    /// Inverse of [`FlushMode::code`].
    pub fn from_code(c: u64) -> FlushMode {
        match c {
            1 => FlushMode::Adaptive,
            2 => FlushMode::Async,
            3 => FlushMode::Sync,
            _ => FlushMode::Idle,
        }
    }

    /// Lower-case name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushMode::Idle => "idle",
            FlushMode::Adaptive => "adaptive",
            FlushMode::Async => "async",
            FlushMode::Sync => "sync",
        }
    }
}

/// The figures behind a decision, published as metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Mode of the round.
    pub mode: FlushMode,
    /// Flush-list pages asked for over all instances.
    pub n_requested: u64,
    /// Of those, pages asked for because of the checkpoint age.
    pub n_by_age: u64,
    /// Averaged flush-list page rate (pages/s).
    pub avg_page_rate: f64,
    /// Averaged redo rate (bytes/s).
    pub lsn_avg_rate: f64,
    /// Percentage of io_capacity asked for by dirtiness (classic).
    pub pct_for_dirty: f64,
    /// Percentage of io_capacity asked for by age (classic).
    pub pct_for_lsn: f64,
    /// Why the round flushes what it flushes, in one line.
    pub reason: String,
    /// `steady`'s levels and estimates (None for other policies).
    pub steady: Option<SteadyFigures>,
}

/// What `steady` measured and decided, published as metrics and shown in
/// the status report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SteadyFigures {
    /// Checkpoint age below which writers run free (bytes).
    pub freerun: u64,
    /// The age the controller holds (bytes).
    pub setpoint: u64,
    /// The age at which writers' allowed rate reaches zero (bytes).
    pub hard: u64,
    /// The throttle curve's position ratio (0..=2).
    pub pos_ratio: f64,
    /// The redo rate the flusher can retire (bytes/s).
    pub base_rate: f64,
    /// Redo rate, short average (bytes/s).
    pub log_rate: f64,
    /// Its decaying peak (bytes/s).
    pub log_rate_peak: f64,
    /// Device write bandwidth over its busy time (pages/s).
    pub bw: f64,
    /// Pages per second of wall time the flusher achieves with a backlog.
    pub capacity: f64,
    /// Page writes kept in flight.
    pub queue_depth: usize,
    /// Redo bytes the checkpoint retires per page written back.
    pub rho: f64,
    /// The longest recent spell in which the flusher, with pages to
    /// write, retired nothing (a decaying peak, seconds): the band from
    /// `setpoint` to `hard` holds at least 1.5 × its redo.
    pub stall_spell: f64,
    /// What one write costs the device beyond the pages it carries, in
    /// pages (0 until measured; see `steady::merge`).
    pub write_cost_pages: f64,
    /// The most writers may log per second below the setpoint while a
    /// lump is late (`steady::lump_ceiling`; infinite: no ceiling).
    pub lump_ceiling: f64,
}

/// The writers' redo rate limit as a curve over the checkpoint age:
/// free up to `freerun`, then `base_rate × steady::pos_ratio(age)`, which
/// is `base_rate` at `setpoint` and zero at `hard`; below the setpoint
/// never over `lump_ceiling`. The policy sets it once a round; each writer
/// evaluates it at the age it sees when it is about to commit, so the
/// limit follows the age between rounds (Linux's dirty-page throttling
/// does the same with its position ratio).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WriterLimit {
    /// Redo bytes per second at the setpoint.
    pub base_rate: f64,
    /// Age up to which writers run free (unless `lump_ceiling` is finite).
    pub freerun: u64,
    /// Age held.
    pub setpoint: u64,
    /// Age at which the allowed rate reaches zero.
    pub hard: u64,
    /// The most writers may log per second at any age below the setpoint,
    /// free run included (`f64::INFINITY`: no ceiling). Finite only while
    /// pages lie denser in the log than the flusher can write them by
    /// their deadlines (`steady::lump_ceiling`); never under `base_rate`.
    pub lump_ceiling: f64,
}

impl WriterLimit {
    /// The allowed redo rate at checkpoint age `age` (`None`: no limit).
    /// Below the setpoint, never less than what would close the distance
    /// to it at an exponential pace, with time constant
    /// [`steady::APPROACH`]: a low base rate (say ρ measured while LRU
    /// writes retired little) must not hold writers there, who would then
    /// log nothing and leave nothing to measure; and evaluated at each
    /// writer's age, this fades to nothing at `S`, so writers arriving
    /// fast are slowed on the way rather than all at once at `S`.
    /// Never below 1 byte/s, so a writer at `hard` pauses and re-checks
    /// rather than dividing by zero.
    ///
    /// Below the setpoint the rate is also at most `lump_ceiling`, even
    /// below `freerun`.
    pub fn rate_at(&self, age: u64) -> Option<f64> {
        let ceiling = if age < self.setpoint {
            self.lump_ceiling.max(self.base_rate)
        } else {
            f64::INFINITY
        };
        if age <= self.freerun {
            return ceiling.is_finite().then_some(ceiling.max(1.0));
        }
        let curve = self.base_rate * steady::pos_ratio(age, self.setpoint, self.hard);
        let refill = self.setpoint.saturating_sub(age) as f64 / steady::APPROACH.as_secs_f64();
        Some(curve.max(refill).min(ceiling).max(1.0))
    }
}

/// Most pages one flush-list batch writes (and holds latched while it
/// does); a round's share is written in as many batches as it needs.
pub const LIST_BATCH: usize = 256;

/// Most pages one merged flush-list batch may write
/// ([`FlushTargets::merge_instances`], [`FlushTargets::merged_batch`]).
pub const MERGED_BATCH: usize = 2 * LIST_BATCH;

/// A policy's answer for one round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushTargets {
    /// One target per instance, in instance order.
    pub instances: Vec<InstanceTarget>,
    /// How long after this round started the next one is due (zero: back
    /// to back). A thread short of free frames or of log space wakes the
    /// cleaners earlier; the policy then decides what that round does.
    pub sleep: Duration,
    /// True when this round is a full one (flush lists and rates); false
    /// for an LRU-only round between full rounds.
    pub full_round: bool,
    /// The redo rate writers together may produce until the next round,
    /// as a curve over the checkpoint age that each writer evaluates at the
    /// age it sees (`None`: no limit). Writers pause for it before they
    /// commit, holding no latch (see `flush::pacer`); `classic` never limits
    /// them — it stops them at the free-check limit instead.
    pub writer_limit: Option<WriterLimit>,
    /// The figures behind the decision (after an LRU-only round, the last
    /// full round's).
    pub decision: Decision,
    /// Page writes the batch writer keeps in flight at once (`None`: the
    /// `write_io_threads` option).
    pub io_depth: Option<usize>,
    /// Checkpoint after every flush-list batch instead of once a round.
    pub checkpoint_each_batch: bool,
    /// Write the flush lists of all instances as one list: each batch
    /// takes the oldest pages of the whole pool, from whichever instances
    /// hold them, as one batch with one checkpoint after it, written by
    /// the coordinator alone (the other cleaners do their instances' LRU
    /// flushing). See `flush::cleaner`, "Merged flush lists".
    pub merge_instances: bool,
    /// With `merge_instances`: most pages one merged batch writes, at most
    /// [`MERGED_BATCH`] (`None`: [`LIST_BATCH`]). Every batch pays the same
    /// fixed costs (a log sync, a doublewrite sync, a sync of each data
    /// file written, a checkpoint), so on a device that charges by the
    /// operation a longer batch gets more pages through (see
    /// `steady::batch_bounds`).
    pub merged_batch: Option<usize>,
    /// With `merge_instances`: no flush-list batch starts after the round
    /// has lasted this long (`None`: the round writes all it was asked).
    /// A round sized by a capacity measured before the device slowed
    /// down would otherwise keep the coordinator writing for seconds with
    /// nobody deciding anything (see `flush::cleaner`, "Merged flush
    /// lists").
    pub round_budget: Option<Duration>,
    /// Wake the cleaners as soon as a thread finds the free list empty,
    /// rather than waiting for the next round or for a thread that finds
    /// no page it can evict.
    pub eager_lru: bool,
    /// A batch's neighbors count against its size: it writes at most as
    /// many pages, neighbors included, as it was asked for (otherwise each
    /// requested page may bring a whole area of neighbors, and a batch of
    /// 256 pages became 1,400 writes that kept the checkpoint still for
    /// over a second on `hdd-raid10`), but for the rest of the contiguous
    /// run it is writing when it gets there: a run is one write, and cut
    /// short its rest costs another (less than an area over the size).
    pub neighbors_in_batch_size: bool,
    /// The neighbor mode batches follow where `flush_neighbors = auto`
    /// (a fixed option overrides it). `classic` always says
    /// [`NeighborMode::Off`], InnoDB 8.0's default; `steady` says
    /// [`NeighborMode::Contiguous`] while the device charges a write much
    /// more than the pages it carries (see `steady::merge`).
    pub neighbors: NeighborMode,
    /// Most clean pages a batch writes to fill one gap between two runs of
    /// dirty pages of one extent, so that one write carries both (0: none;
    /// see `flush::batch`, "Gaps"). `classic` never fills (InnoDB does
    /// not); `steady` fills gaps under half what a write costs in pages,
    /// at most `neighbors::MAX_GAP`, while it writes runs.
    pub gap_pages: u32,
    /// How long a flush-list batch's first claim (the list's oldest page,
    /// which holds the checkpoint back) may wait for a user thread's
    /// exclusive latch (zero: it never waits, and a latched page is passed
    /// over). See `buffer::claim`, "The oldest page".
    pub oldest_latch_wait: Duration,
}

/// A flushing policy: a pure function of the snapshot plus its own state.
pub trait FlushPolicy: Send {
    /// Decide this round's targets.
    fn decide(&mut self, snap: &Snapshot) -> FlushTargets;

    /// Which policy this is.
    fn name(&self) -> FlushPolicyName;

    /// Take the run-time options' new values (`Db::set_option`), keeping
    /// what the policy has measured so far. A policy that reads no option
    /// ignores the call.
    fn retune(&mut self, _opts: &Options) {}
}

/// The policy `opts.flush_policy` names, with no history, set up from
/// `opts`.
pub fn from_options(opts: &Options) -> Box<dyn FlushPolicy> {
    match opts.flush_policy {
        FlushPolicyName::Classic => Box::new(classic::Classic::new(
            classic::ClassicConfig::from_options(opts),
        )),
        FlushPolicyName::Steady => Box::new(steady::Steady::new()),
    }
}
