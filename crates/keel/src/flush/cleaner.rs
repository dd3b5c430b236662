//! Page-cleaner threads, organised as InnoDB 8.0 organises them: cleaner 0
//! is the coordinator. Each round it takes a [`Snapshot`], asks the policy
//! for [`FlushTargets`], hands the round to every cleaner (cleaner `c`
//! serves the instances `i` with `i % page_cleaners == c`, so instances are
//! flushed in parallel — the seeds show sequential instance flushing leaving
//! the globally oldest page unflushed), does its own share, waits for the
//! slowest cleaner (the barrier), then flushes the log and checkpoints, and
//! sleeps until the next round is due. Writers short of free frames or of
//! log space wake it early; the policy decides what such a round does.
//!
//! Within an instance a round does LRU flushing first, then its share of
//! flush-list flushing, in batches of at most [`LIST_BATCH`] pages (fewer
//! if the policy asks: `InstanceTarget::list_batch`). A policy that
//! checkpoints after every flush-list batch gets its LRU writes in batches
//! of the same size, one before each flush-list batch, so that the
//! checkpoint keeps moving while LRU flushing runs (and the rest in one
//! batch once no flush-list batch is left).
//!
//! # Merged flush lists
//!
//! A policy that checkpoints after every batch keeps its batches small
//! (the age drops by what a batch retires, and the teeth of that sawtooth
//! must stay within the band it holds: `steady::list_batch`). Split per
//! instance, each small batch paid its own doublewrite write and sync,
//! data-file sync and checkpoint: on a disk throttled to 1,000 write IOPS
//! with 8 instances, `steady`'s batches held 16 pages and it made 0.78× the
//! transactions of `classic`, whose batches held 60. With
//! `FlushTargets::merge_instances` (which `steady` asks for) the
//! coordinator alone writes the
//! flush-list share of every instance, as one list: each batch takes the
//! oldest pages of the whole pool (each instance's list is ordered; the
//! batch merges their heads), however they fall across instances, writes
//! them as one batch (`WriteBack::flush_lists_counted`) and checkpoints
//! once. The same pages as before retire the same log, for a fraction of
//! the fixed costs, and the globally oldest page is always in the first
//! batch, which is what moves the checkpoint. The serving cleaners flush
//! the LRU of their instances meanwhile, in one go; the coordinator does
//! its own instances' LRU in chunks between its batches. A merged batch
//! holds at most [`LIST_BATCH`] pages, as a cleaner's batch did. A round
//! starts no batch after its first once it has lasted
//! `FlushTargets::round_budget` (two ticks under `steady`): a round sized by a capacity measured before the
//! device slowed down (a disk throttled from 13,000 to 1,000 writes a
//! second between the load and the run) asked for 2,600 pages, and the
//! coordinator wrote for seconds while nobody decided anything, writers
//! running on the old capacity into the hard level.
//!
//! A batch's checkpoint is written on a thread of its own while the next
//! batch is prepared and written (in the coordinator itself when no thread
//! can be had), and joined before the next checkpoint
//! starts (and before the share ends), so there is one at a time, and the
//! round's barrier and tick come after it. The checkpoint takes no claim
//! or latch: it reads the oldest modification, syncs the data files and
//! writes its record under the engine's checkpoint mutex, which nothing in
//! a batch takes. Its failure is noted and ends the share's flush-list
//! work, as a failed batch does; a panic in it is raised again in the
//! coordinator, whose own catch then handles it (see "A cleaner that
//! panics").
//!
//! Nothing new is waited for: the coordinator holds no lock while it
//! writes, and the barrier waits for the serving cleaners' LRU shares as
//! it did for their whole shares.
//!
//! # A cleaner that panics
//!
//! A panic in a cleaner is a bug, but the cleaners have duties nobody else
//! has: the coordinator makes commits at `flush_log_at_trx_commit` 0 and 2
//! durable about once a second, and every writer waiting for log space
//! waits for the checkpoint the cleaners move. A cleaner thread that died
//! left those commits unsynced and those writers timing out, over and over.
//! So each cleaner catches a panic at the edge of its round, logs it at
//! error level, counts it (`buffer_flush_cleaner_panics`) and goes on after
//! a pause (100 ms, doubling with each panic, at most 5 s; a stop ends it):
//! the coordinator with a fresh policy built from the options in effect
//! (the old one may have been left half-updated), a serving cleaner with
//! the next round. A serving cleaner counts the share it panicked in as
//! done first, so the coordinator's barrier never waits for it; a
//! coordinator that panicked mid-round may see its next barrier end early
//! once (a share of the old round counted towards the new). What the
//! panicking thread held is released by the unwinding, which is why the
//! catch asserts unwind safety: latches and mutexes are guards (and
//! `parking_lot`'s, which a panic does not poison), a batch's page claims
//! give themselves up unwritten (`buffer::claim`; else no flusher could
//! write those pages again, nor the checkpoint pass them:
//! `a_panic_in_a_batch_leaves_no_page_claimed`), and its doublewrite area
//! goes back to the free ones. At the [`MAX_PANICS`]th panic the engine
//! refuses writes (`CleanerHost::cleaners_failed`): new writes, and the
//! writers waiting for log space at their next look, get an error quoting
//! the panic, and a restart recovers. The cleaners keep running after
//! that, so that the log is still flushed and closing still finishes.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::policy::{
    FlushPolicy, FlushTargets, InstanceSnapshot, Snapshot, WriterLimit, LIST_BATCH, MERGED_BATCH,
};
use super::writeback::WriteBack;
use crate::buffer::BufferPool;
use crate::config::Options;
use crate::metrics::Metrics;
use crate::page::Lsn;

/// The redo log's state as the policy sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogView {
    /// Current LSN.
    pub current_lsn: Lsn,
    /// Last checkpoint.
    pub checkpoint_lsn: Lsn,
    /// End of the durable log.
    pub flushed_lsn: Lsn,
    /// Usable capacity in bytes.
    pub capacity: u64,
    /// Free-check limit (bytes of age).
    pub free_check_limit: u64,
    /// InnoDB's async mark.
    pub max_modified_age_async: u64,
    /// InnoDB's sync mark.
    pub max_modified_age_sync: u64,
    /// Bytes reserved by admitted writers plus bytes waiting writers need.
    pub redo_reserved: u64,
    /// The most bytes writers held reserved at once since the last view
    /// (at least `redo_reserved`), plus what waiting writers need: taking
    /// it starts the next span, so only the coordinator's snapshot, once a
    /// tick, reads it.
    pub redo_reserved_peak: u64,
    /// Writers waiting in the free check.
    pub free_check_waiters: usize,
}

/// What a cleaner needs from the engine.
pub trait CleanerHost: Send + Sync + 'static {
    /// The buffer pool to flush.
    fn pool(&self) -> &BufferPool;
    /// Write-back: batches, doublewrite, wake-ups, failures.
    fn write_back(&self) -> &WriteBack;
    /// The redo log's state.
    fn log_view(&self) -> LogView;
    /// How many flush-list entries per instance the snapshot samples.
    fn flush_list_sample(&self) -> usize;
    /// Engine work done by the coordinator after each round: the once-a-
    /// second log flush and the checkpoint. `urgent` (after a sync round)
    /// makes the log durable first so the checkpoint can move at once.
    fn tick(&self, urgent: bool) -> crate::error::Result<()>;
    /// The writers' redo rate limit the policy decided (`None`: none).
    fn set_writer_limit(&self, limit: Option<WriterLimit>);
    /// Move the checkpoint as far as the pages written allow (after each
    /// batch, when the policy asks for it).
    fn checkpoint(&self) -> crate::error::Result<()>;
    /// A flushing policy as the options in effect ask: the coordinator's
    /// after a panic (module doc).
    fn fresh_policy(&self) -> Box<dyn FlushPolicy>;
    /// The cleaners panicked [`MAX_PANICS`] times: refuse writes, saying
    /// `why` (module doc).
    fn cleaners_failed(&self, why: &str);
}

/// Panics caught in the cleaners after which the engine refuses writes.
pub const MAX_PANICS: u64 = 3;
/// The pause after a cleaner's first panic (doubled for each later one).
const RESTART_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause after a panic.
const MAX_RESTART_PAUSE: Duration = Duration::from_secs(5);

struct Round {
    seq: u64,
    targets: Arc<FlushTargets>,
    pending: usize,
}

struct Shared {
    stop: AtomicBool,
    round: Mutex<Round>,
    start: Condvar,
    done: Condvar,
    /// Changes to the policy not yet taken by the coordinator, in the
    /// order they were made ([`Cleaners::update_policy`]).
    updates: Mutex<Vec<PolicyUpdate>>,
    /// Panics caught in any cleaner so far.
    panics: AtomicU64,
}

/// A change of the flushing policy while the cleaners run
/// (`Db::set_option`).
pub enum PolicyUpdate {
    /// Follow this policy from the next round on (`flush_policy` changed).
    /// What the old one measured is dropped with it.
    Replace(Box<dyn FlushPolicy>),
    /// The policy's knobs changed: the current policy takes them
    /// ([`FlushPolicy::retune`]) and keeps its history.
    Retune(Options),
}

/// The running cleaner threads.
pub struct Cleaners {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Cleaners {
    /// Start `n` cleaners; the first one coordinates with `policy`.
    pub fn start<H: CleanerHost>(
        host: Arc<H>,
        n: usize,
        policy: Box<dyn FlushPolicy>,
    ) -> std::io::Result<Cleaners> {
        let n = n.max(1);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            round: Mutex::new(Round {
                seq: 0,
                targets: Arc::new(FlushTargets::default()),
                pending: 0,
            }),
            start: Condvar::new(),
            done: Condvar::new(),
            updates: Mutex::new(Vec::new()),
            panics: AtomicU64::new(0),
        });
        let started = Instant::now();
        let mut threads = Vec::with_capacity(n);
        let mut policy = Some(policy);
        for c in 0..n {
            let host = host.clone();
            let sh = shared.clone();
            let b = std::thread::Builder::new().name(format!("keel-cleaner-{c}"));
            let t = if c == 0 {
                let p = policy.take().expect("one coordinator");
                b.spawn(move || coordinate(&*host, n, p, &sh, started))?
            } else {
                b.spawn(move || serve(&*host, c, n, &sh))?
            };
            threads.push(t);
        }
        Ok(Cleaners { shared, threads })
    }

    /// Hand `update` to the coordinator, which applies it (and any made
    /// before it, in order) at the start of its next round, and wake it so
    /// that the round starts now rather than when its sleep ends. Returns
    /// at once: a round under way finishes under the policy it began with.
    pub fn update_policy(&self, update: PolicyUpdate, wb: &WriteBack) {
        self.shared.updates.lock().push(update);
        wb.wake_cleaners();
    }

    /// Stop and join every cleaner.
    pub fn stop(&mut self, wb: &WriteBack) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _g = self.shared.round.lock();
            self.shared.start.notify_all();
            self.shared.done.notify_all();
        }
        wb.wake_cleaners();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Take a snapshot of the whole engine.
pub fn snapshot<H: CleanerHost + ?Sized>(host: &H, started: Instant) -> Snapshot {
    let pool = host.pool();
    let sample = host.flush_list_sample();
    let instances = pool
        .instances
        .iter()
        .map(|i| {
            let (free, lru_len, dirty, oldest, oldest_lsns) = i.state(sample);
            InstanceSnapshot {
                total: i.frames.len(),
                free,
                lru_len,
                dirty,
                oldest_modification: oldest,
                oldest_lsns,
            }
        })
        .collect();
    let log = host.log_view();
    let m = &pool.metrics;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    // The doublewrite's writes show what a long write costs only where
    // they carry the pages' images: under `detect_only` an area write is
    // its header alone, however many pages it lists.
    let images = host
        .write_back()
        .dblwr
        .as_ref()
        .is_some_and(|d| d.page_images());
    let area = |c: &std::sync::atomic::AtomicU64| if images { get(c) } else { 0 };
    Snapshot {
        now: started.elapsed(),
        current_lsn: log.current_lsn,
        checkpoint_lsn: log.checkpoint_lsn,
        flushed_lsn: log.flushed_lsn,
        log_capacity: log.capacity,
        free_check_limit: log.free_check_limit,
        max_modified_age_async: log.max_modified_age_async,
        max_modified_age_sync: log.max_modified_age_sync,
        redo_reserved: log.redo_reserved,
        redo_reserved_peak: log.redo_reserved_peak,
        free_check_waiters: log.free_check_waiters,
        list_pages_flushed: get(&m.buffer_flush_adaptive_total_pages)
            + get(&m.buffer_flush_background_total_pages)
            + get(&m.buffer_flush_sync_total_pages),
        lru_pages_flushed: get(&m.buffer_LRU_batch_flush_total_pages)
            + get(&m.buffer_LRU_single_flush_total_pages),
        neighbor_pages_flushed: get(&m.buffer_flush_neighbor_total_pages),
        free_frame_misses: get(&m.buffer_LRU_single_flush_num_scan)
            + get(&m.buffer_LRU_get_free_waits),
        pages_written: get(&m.buffer_pages_written),
        gap_pages_written: get(&m.buffer_flush_gap_pages),
        data_writes: get(&m.os_data_writes),
        data_write_us: get(&m.os_data_write_us_total),
        data_write_busy_us: get(&m.os_data_write_busy_us_total),
        dblwr_alone_writes: area(&m.dblwr_alone_writes),
        dblwr_alone_pages: area(&m.dblwr_alone_pages),
        dblwr_alone_write_us: area(&m.dblwr_alone_write_us_total),
        // Kept by the coordinator, which sets it.
        flusher_busy_us: 0,
        frames_taken: get(&m.buffer_pool_frames_taken),
        flush_list_sample: sample,
        instances,
    }
}

fn publish(m: &Metrics, t: &FlushTargets) {
    let d = &t.decision;
    let zero = super::policy::SteadyFigures::default();
    // A policy without steady's figures (classic, or after a switch away
    // from steady) publishes them as zeros rather than leave the last ones.
    if let Some(f) = d.steady.as_ref().or(t.full_round.then_some(&zero)) {
        Metrics::set(&m.steady_setpoint, f.setpoint);
        Metrics::set(&m.steady_freerun, f.freerun);
        Metrics::set(&m.steady_hard_limit, f.hard);
        Metrics::set(&m.steady_pos_ratio, (f.pos_ratio * 1000.0).round() as u64);
        Metrics::set(&m.steady_base_rate, f.base_rate.round() as u64);
        Metrics::set(&m.log_redo_rate, f.log_rate.round() as u64);
        Metrics::set(&m.log_redo_rate_peak, f.log_rate_peak.round() as u64);
        Metrics::set(&m.device_write_bw_estimate, f.bw.round() as u64);
        Metrics::set(&m.steady_flusher_capacity, f.capacity.round() as u64);
        Metrics::set(&m.device_write_queue_depth, f.queue_depth as u64);
        Metrics::set(&m.log_bytes_per_page_flushed, f.rho.round() as u64);
        Metrics::set(
            &m.steady_stall_spell_ms,
            (f.stall_spell * 1000.0).round() as u64,
        );
        Metrics::set(
            &m.steady_write_cost_pages_x1000,
            (f.write_cost_pages.min(1e9) * 1000.0).round() as u64,
        );
    }
    if t.full_round {
        Metrics::set(&m.buffer_flush_mode, d.mode.code());
        Metrics::set(&m.buffer_flush_n_to_flush_requested, d.n_requested);
        Metrics::set(&m.buffer_flush_n_to_flush_by_age, d.n_by_age);
        Metrics::set(
            &m.buffer_flush_avg_page_rate,
            d.avg_page_rate.round() as u64,
        );
        Metrics::set(&m.buffer_flush_lsn_avg_rate, d.lsn_avg_rate.round() as u64);
        Metrics::set(
            &m.buffer_flush_pct_for_dirty,
            d.pct_for_dirty.round() as u64,
        );
        Metrics::set(&m.buffer_flush_pct_for_lsn, d.pct_for_lsn.round() as u64);
    }
}

/// The coordinator's thread: its rounds until stopped, started again
/// with a fresh policy after a panic (module doc).
fn coordinate<H: CleanerHost + ?Sized>(
    host: &H,
    n: usize,
    mut policy: Box<dyn FlushPolicy>,
    sh: &Shared,
    started: Instant,
) {
    loop {
        let rounds = catch_unwind(AssertUnwindSafe(|| {
            coordinate_rounds(host, n, &mut policy, sh, started)
        }));
        let Err(panic) = rounds else {
            return;
        };
        survive_panic(host, sh, 0, &*panic);
        policy = host.fresh_policy();
    }
}

/// After a panic in cleaner `me`: log and count it, refuse writes at the
/// [`MAX_PANICS`]th, and pause before the cleaner goes on (module doc).
fn survive_panic<H: CleanerHost + ?Sized>(
    host: &H,
    sh: &Shared,
    me: usize,
    panic: &(dyn Any + Send),
) {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    let n = sh.panics.fetch_add(1, Ordering::AcqRel) + 1;
    log::error!(
        "page cleaner {me} panicked: {what}; it goes on (panic {n}; at {MAX_PANICS} the \
         engine refuses writes)"
    );
    // Refused before counted: whoever sees the count sees the refusal.
    if n >= MAX_PANICS {
        host.cleaners_failed(&format!(
            "the page cleaners panicked {n} times, the last (cleaner {me}): {what}"
        ));
    }
    Metrics::add(&host.pool().metrics.buffer_flush_cleaner_panics, 1);
    let pause = RESTART_PAUSE
        .saturating_mul(1 << (n - 1).min(6))
        .min(MAX_RESTART_PAUSE);
    let until = Instant::now() + pause;
    // Slices, so that a stop waits 10 ms at most.
    while !sh.stop.load(Ordering::Acquire) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn coordinate_rounds<H: CleanerHost + ?Sized>(
    host: &H,
    n: usize,
    policy: &mut Box<dyn FlushPolicy>,
    sh: &Shared,
    started: Instant,
) {
    let pool = host.pool();
    let wb = host.write_back();
    let mut backoff = Duration::ZERO;
    // Time spent in rounds so far (the policy's `flusher_busy_us`).
    let mut busy = Duration::ZERO;
    while !sh.stop.load(Ordering::Acquire) {
        let wakeups = *wb.wakeup.0.lock();
        // Taken alone and released before the round: whoever pushes an
        // update holds nothing the round needs (see `update_policy`).
        let updates = std::mem::take(&mut *sh.updates.lock());
        for u in updates {
            match u {
                PolicyUpdate::Replace(p) => {
                    log::info!(
                        "flush policy {} -> {}",
                        policy.name().as_str(),
                        p.name().as_str()
                    );
                    *policy = p;
                }
                PolicyUpdate::Retune(opts) => policy.retune(&opts),
            }
        }
        let round_start = Instant::now();
        let snap = Snapshot {
            flusher_busy_us: busy.as_micros() as u64,
            ..snapshot(host, started)
        };
        let targets = Arc::new(policy.decide(&snap));
        publish(&pool.metrics, &targets);
        host.set_writer_limit(targets.writer_limit);
        wb.set_io_depth(targets.io_depth);
        wb.set_eager_lru(targets.eager_lru);
        wb.set_neighbors_in_batch_size(targets.neighbors_in_batch_size);
        wb.set_chosen_neighbors(targets.neighbors);
        wb.set_gap_pages(targets.gap_pages);
        Metrics::set(
            &pool.metrics.buffer_flush_neighbors_mode,
            u64::from(wb.flush_neighbors().as_option()),
        );
        wb.set_oldest_latch_wait(targets.oldest_latch_wait);
        if targets.full_round {
            *wb.last_decision.lock() = targets.decision.clone();
        }
        Metrics::add(&pool.metrics.buffer_flush_cleaner_rounds, 1);
        if n > 1 {
            let mut r = sh.round.lock();
            r.seq += 1;
            r.targets = targets.clone();
            r.pending = n - 1;
            sh.start.notify_all();
        }
        let written_before = pool.metrics.buffer_pages_written.load(Ordering::Relaxed);
        // Writes held after a failure are retried here even in a round
        // that writes nothing else, so that they resume by themselves.
        let mut failed = false;
        if let Err(e) = wb.retry_held(pool, false) {
            log::error!("page cleaner coordinator: {e}");
            wb.note_failure("retry of held page writes", &e);
            failed = true;
        }
        failed |= do_share(host, 0, n, &targets);
        if n > 1 {
            // The barrier: the next round starts after the slowest cleaner.
            let mut r = sh.round.lock();
            while r.pending > 0 && !sh.stop.load(Ordering::Acquire) {
                sh.done.wait_for(&mut r, Duration::from_millis(100));
            }
        }
        let wrote = pool.metrics.buffer_pages_written.load(Ordering::Relaxed) != written_before;
        let urgent = targets.decision.mode == super::FlushMode::Sync;
        if let Err(e) = host.tick(urgent) {
            log::error!("page cleaner coordinator: log flush or checkpoint failed: {e}");
            wb.note_failure("log flush or checkpoint", &e);
            failed = true;
        }
        let took = round_start.elapsed();
        busy += took;
        Metrics::set(&pool.metrics.buffer_flush_round_us, took.as_micros() as u64);
        // After an I/O error, retry with a growing pause rather than spin.
        backoff = if failed {
            (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
        } else {
            Duration::ZERO
        };
        // Rounds that find nothing to write (say, the checkpoint waits for a
        // commit still being applied) pause briefly rather than spin, even
        // when writers keep waking the coordinator.
        if !wrote && !sh.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let sleep = targets.sleep.saturating_sub(took).max(backoff);
        let (m, c) = &wb.wakeup;
        let mut g = m.lock();
        // A wake-up that came during the round counts: do not sleep then.
        if !sh.stop.load(Ordering::Acquire) && *g == wakeups && !sleep.is_zero() {
            c.wait_for(&mut g, sleep);
        }
    }
}

fn serve<H: CleanerHost + ?Sized>(host: &H, me: usize, n: usize, sh: &Shared) {
    let mut seen = 0;
    loop {
        let targets = {
            let mut r = sh.round.lock();
            while r.seq == seen && !sh.stop.load(Ordering::Acquire) {
                sh.start.wait(&mut r);
            }
            if sh.stop.load(Ordering::Acquire) {
                return;
            }
            seen = r.seq;
            r.targets.clone()
        };
        let share = catch_unwind(AssertUnwindSafe(|| do_share(host, me, n, &targets)));
        // Done even after a panic, so that the barrier does not wait for it.
        {
            let mut r = sh.round.lock();
            r.pending = r.pending.saturating_sub(1);
            sh.done.notify_all();
        }
        if let Err(panic) = share {
            survive_panic(host, sh, me, &*panic);
        }
    }
}

/// Carry out the targets of the instances cleaner `me` serves; true if an
/// I/O error occurred (logged here).
pub(super) fn do_share<H: CleanerHost + ?Sized>(
    host: &H,
    me: usize,
    n: usize,
    targets: &FlushTargets,
) -> bool {
    if targets.merge_instances {
        return do_share_merged(host, me, n, targets);
    }
    let (pool, wb) = (host.pool(), host.write_back());
    let mut failed = false;
    for (i, t) in targets.instances.iter().enumerate() {
        if i % n != me {
            continue;
        }
        // With a checkpoint after every flush-list batch, LRU writes go in
        // batches of the same size between them: written all first, a
        // round's LRU share (up to two ticks of the flusher's capacity)
        // kept the checkpoint still for a fifth of a second, and on a
        // small log the age ran from the setpoint to the hard level,
        // where every writer waits (see `steady::list_batch`). With no
        // flush-list work left, the rest goes in one batch: split into
        // small batches for nothing, LRU flushing fell behind on
        // `lru-scan-depth` and user threads wrote 3,800 pages a second
        // themselves.
        let batch = t.list_batch.clamp(1, LIST_BATCH);
        let lru_chunk = if targets.checkpoint_each_batch {
            batch
        } else {
            usize::MAX
        };
        // LRU flushing runs at least once when frames are wanted (with a
        // write budget of 0 it only evicts clean pages).
        let mut lru_on = t.lru_want_free > 0;
        let mut lru_left = t.lru_write_max;
        let mut left = t.list_pages;
        while lru_on || left > 0 {
            if lru_on {
                // In one go once no flush-list batch is left to go between.
                let chunk = if left > 0 {
                    lru_left.min(lru_chunk)
                } else {
                    lru_left
                };
                match wb.lru_flush(pool, i, t.lru_scan, t.lru_want_free, chunk) {
                    Ok((w, _)) => {
                        lru_left -= w.min(lru_left);
                        // Fewer than asked: enough frames are free, or the
                        // scan met no more dirty pages.
                        lru_on = w == chunk && lru_left > 0;
                    }
                    Err(e) => {
                        log::error!("page cleaner {me}: LRU flush of instance {i} failed: {e}");
                        wb.note_failure(&format!("LRU flush of instance {i}"), &e);
                        failed = true;
                        lru_on = false;
                    }
                }
            }
            if left == 0 {
                continue;
            }
            let wrote = wb.flush_list_batch_counted(
                pool,
                i,
                left.min(batch),
                t.list_lsn_limit,
                t.list_kind,
            );
            match wrote {
                Ok((0, _)) => left = 0,
                Ok((w, neighbors)) => {
                    // A policy that counts neighbors in a batch's size
                    // (`steady`) asked for `list_pages` pages of the list
                    // itself: counting their neighbors against it, a
                    // round with "area" neighbors wrote half the pages
                    // below its target, and the age stayed at `H` with
                    // the flusher idle two thirds of the time (`neighbors`
                    // on `sata-ssd`). InnoDB's count (`classic`) includes
                    // them.
                    let w = if targets.neighbors_in_batch_size {
                        w - neighbors
                    } else {
                        w
                    };
                    left = left.saturating_sub(w.max(1));
                    if targets.checkpoint_each_batch {
                        if let Err(e) = host.checkpoint() {
                            log::error!("page cleaner {me}: checkpoint failed: {e}");
                            wb.note_failure("checkpoint", &e);
                            failed = true;
                            left = 0;
                        }
                    }
                }
                Err(e) => {
                    log::error!("page cleaner {me}: flush-list batch of instance {i} failed: {e}");
                    wb.note_failure(&format!("flush-list batch of instance {i}"), &e);
                    failed = true;
                    left = 0;
                }
            }
        }
    }
    failed
}

/// The pages of one merged flush-list batch: up to `max` of the oldest
/// pages of the whole pool below each instance's limit (at most `caps[i]`
/// from instance `i`), as `(instance, frames)` lists, the instance holding
/// the oldest page first.
pub(crate) fn merged_batch(
    pool: &BufferPool,
    targets: &FlushTargets,
    caps: &[usize],
    max: usize,
) -> Vec<(usize, Vec<u32>)> {
    let mut all: Vec<(Lsn, usize, u32)> = Vec::new();
    for (i, t) in targets.instances.iter().enumerate() {
        let cap = caps[i].min(max);
        if cap == 0 {
            continue;
        }
        all.extend(
            pool.flush_list_oldest_keyed(i, cap, t.list_lsn_limit)
                .into_iter()
                .map(|(lsn, fid)| (lsn, i, fid)),
        );
    }
    all.sort_unstable();
    all.truncate(max);
    let mut lists: Vec<(usize, Vec<u32>)> = Vec::new();
    for (_, i, fid) in all {
        match lists.iter_mut().find(|(j, _)| *j == i) {
            Some((_, fids)) => fids.push(fid),
            None => lists.push((i, vec![fid])),
        }
    }
    lists
}

// A merged batch is claimed as one group, with one log sync for all of it
// (`batch::CLAIM_GROUP`).
const _: () = assert!(super::batch::CLAIM_GROUP >= MERGED_BATCH);

/// [`do_share`] for a policy that merges the flush lists
/// (`FlushTargets::merge_instances`; module doc, "Merged flush lists"):
/// every cleaner flushes the LRU of the instances it serves, and the
/// coordinator alone writes the flush-list share of all instances, the
/// oldest pages of the pool first, one batch (and one checkpoint) at a
/// time, with a chunk of its own instances' LRU writes before each. A
/// batch's checkpoint is written while the next batch is prepared and
/// written, and waited for before the next checkpoint starts.
fn do_share_merged<H: CleanerHost + ?Sized>(
    host: &H,
    me: usize,
    n: usize,
    targets: &FlushTargets,
) -> bool {
    let (pool, wb) = (host.pool(), host.write_back());
    let mut failed = false;
    let mut lru_left: Vec<(usize, usize)> = Vec::new();
    for (i, t) in targets.instances.iter().enumerate() {
        if i % n == me && t.lru_want_free > 0 {
            lru_left.push((i, t.lru_write_max));
        }
    }
    let mut caps: Vec<usize> = if me == 0 {
        targets.instances.iter().map(|t| t.list_pages).collect()
    } else {
        Vec::new()
    };
    // The instances' batches together, at most the merged batch the
    // policy asked for (`FlushTargets::merged_batch`): the pages of one
    // batch are written before its checkpoint can move, so a merged batch
    // bounds how far one checkpoint moves, as a cleaner's batch did.
    let batch: usize = targets
        .instances
        .iter()
        .map(|t| t.list_batch.clamp(1, LIST_BATCH))
        .sum::<usize>()
        .min(
            targets
                .merged_batch
                .unwrap_or(LIST_BATCH)
                .clamp(1, MERGED_BATCH),
        );
    let started = Instant::now();
    let mut list_on = caps.iter().any(|&c| c > 0);
    // A checkpoint failure is noted where it is joined, and ends the
    // flush-list work (as a failed batch does).
    let ended = |r: crate::error::Result<()>| -> bool {
        r.map_err(|e| {
            log::error!("page cleaner {me}: checkpoint failed: {e}");
            wb.note_failure("checkpoint", &e);
        })
        .is_ok()
    };
    let joined = |h: std::thread::ScopedJoinHandle<'_, crate::error::Result<()>>| -> bool {
        // A panic is re-raised here, so that the cleaner's own catch sees it.
        ended(
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    };
    std::thread::scope(|s| {
        let mut checkpoint = None;
        let mut batches = 0usize;
        while list_on || !lru_left.is_empty() {
            // LRU first: a chunk of a batch's size per instance between
            // flush-list batches (see `do_share`), all of it once none is
            // left to go between.
            lru_left.retain_mut(|(i, left)| {
                let t = &targets.instances[*i];
                let chunk = if list_on && targets.checkpoint_each_batch {
                    (*left).min(t.list_batch.clamp(1, LIST_BATCH))
                } else {
                    *left
                };
                match wb.lru_flush(pool, *i, t.lru_scan, t.lru_want_free, chunk) {
                    Ok((w, _)) => {
                        *left -= w.min(*left);
                        w == chunk && *left > 0
                    }
                    Err(e) => {
                        log::error!("page cleaner {me}: LRU flush of instance {i} failed: {e}");
                        wb.note_failure(&format!("LRU flush of instance {i}"), &e);
                        failed = true;
                        false
                    }
                }
            });
            if !list_on {
                continue;
            }
            // The round's time is up: what is left waits for the next
            // round, decided on fresh measurements (after one batch at
            // least, so that every round moves the checkpoint).
            if batches > 0 && targets.round_budget.is_some_and(|b| started.elapsed() >= b) {
                list_on = false;
                continue;
            }
            let lists = merged_batch(pool, targets, &caps, batch);
            if lists.is_empty() {
                list_on = false;
                continue;
            }
            for (i, fids) in &lists {
                caps[*i] = caps[*i].saturating_sub(fids.len());
            }
            let borrowed: Vec<(usize, &[u32])> =
                lists.iter().map(|(i, f)| (*i, f.as_slice())).collect();
            let kind = targets.instances[lists[0].0].list_kind;
            match wb.flush_lists_counted(pool, &borrowed, kind) {
                Ok((0, _)) => list_on = false,
                Ok(_) => {
                    batches += 1;
                    list_on = caps.iter().any(|&c| c > 0);
                    if targets.checkpoint_each_batch {
                        // One checkpoint at a time: the one before this
                        // batch ends first.
                        if let Some(h) = checkpoint.take() {
                            if !joined(h) {
                                failed = true;
                                list_on = false;
                                continue;
                            }
                        }
                        // A thread that cannot be had (the process out
                        // of threads or memory) is no reason to fail the
                        // round: the checkpoint is written here instead.
                        let spawned = std::thread::Builder::new()
                            .name("keel-checkpoint".into())
                            .spawn_scoped(s, || host.checkpoint());
                        match spawned {
                            Ok(h) => checkpoint = Some(h),
                            Err(e) => {
                                log::warn!(
                                    "page cleaner {me}: no thread for the checkpoint ({e}); \
                                     writing it in the cleaner"
                                );
                                if !ended(host.checkpoint()) {
                                    failed = true;
                                    list_on = false;
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    log::error!("page cleaner {me}: merged flush-list batch failed: {e}");
                    wb.note_failure("flush-list batch", &e);
                    failed = true;
                    list_on = false;
                }
            }
        }
        if let Some(h) = checkpoint.take() {
            failed |= !joined(h);
        }
    });
    failed
}
