//! The run: client threads loop over transactions, each in a session of
//! its own, while this thread wakes every report interval, samples the
//! workers' counts and the engine's metrics, and hands the interval to the
//! caller. On Keel it also wakes when a `--device-change` falls due and
//! applies it; with `--hold-view` one more thread holds a read view open
//! (see `hold_view`) and the sampler prints when it opens and is released.
//! While a run is in progress SIGUSR1 makes the sampler print
//! Keel's status report to stdout (between two interval lines), as at the
//! end of the run; on another engine, a line saying it has none (rather
//! than SIGUSR1's default, which ends the process). Workers wait only inside the engine (see
//! [`engine`](super::engine)) and, with `--rate`, in a sleep that looks at
//! the stop flag every 50 ms.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::device_change::Pending;
use super::engine::{Database, DbError};
use super::hold_view::Holder;
use super::sample::{Counts, Interval, Snapshot, DEVICE_WRITE_BYTES, PROCESS_WRITE_BYTES};
use super::workload::{open_tables, queries_per_txn, Client, ResultSet, SbTable};
use super::{DeviceChange, HoldView, KeyGen, OltpError, OltpParams, OptionChange, Summary};

/// Longest latency the histograms hold (µs); longer ones count as this.
const MAX_LATENCY_US: u64 = 3_600_000_000;
/// Longest sleep between looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// What the workers share with the sampler.
struct Shared {
    stop: AtomicBool,
    transactions: AtomicU64,
    queries: AtomicU64,
    errors: AtomicU64,
    /// One latency histogram (µs) per worker, drained every interval.
    hists: Vec<Mutex<Histogram<u64>>>,
    /// The first error that is not a deadlock, lock timeout or busy.
    fatal: Mutex<Option<DbError>>,
    /// The block device holding the data directory, whose bytes written
    /// are sampled with the engine's metrics; why there is none.
    device: Result<crate::sys::BlockDevice, String>,
}

fn histogram() -> Result<Histogram<u64>, OltpError> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3)
        .map_err(|e| OltpError::Data(format!("cannot create a latency histogram: {e}")))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// SIGUSR1 during a run: a flag the signal handler raises and the sampler
/// looks at every [`POLL`]; when raised, the status report (with rates since
/// the run began) is printed to stdout. The handler is removed when the run
/// ends (a later SIGUSR1 is then ignored rather than fatal).
struct StatusRequest {
    flag: Arc<AtomicBool>,
    #[cfg(unix)]
    id: Option<signal_hook::SigId>,
    since: (Snapshot, Instant),
}

impl StatusRequest {
    fn register(db: &dyn Database) -> StatusRequest {
        let flag = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        let id = match signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&flag))
        {
            Ok(id) => Some(id),
            Err(e) => {
                log::warn!("cannot handle SIGUSR1 (no status report on request): {e}");
                None
            }
        };
        StatusRequest {
            flag,
            #[cfg(unix)]
            id,
            since: (db.metrics(), Instant::now()),
        }
    }

    /// Print the status report if it was asked for since the last look.
    fn poll(&self, db: &dyn Database) {
        if !self.flag.swap(false, Ordering::AcqRel) {
            return;
        }
        let (before, t0) = &self.since;
        let report = match db.keel() {
            Some(k) => k
                .status()
                .with_rates(before, t0.elapsed().as_secs_f64())
                .to_string(),
            None => format!(
                "engine {} has no status report (Keel's only): its interval lines are all there is",
                db.engine()
            ),
        };
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\n{report}\n");
        let _ = out.flush();
    }
}

impl Drop for StatusRequest {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(id) = self.id.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// What the sampler reports as a run goes.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Tick<'a> {
    /// An interval ended.
    Interval {
        /// The interval.
        interval: &'a Interval,
        /// True during the warm-up (the interval is not kept).
        warmup: bool,
    },
    /// A device change was applied (`applied_at_s` says when).
    DeviceChanged(&'a DeviceChange),
    /// An option change was applied (`applied_at_s` says when).
    OptionChanged(&'a OptionChange),
    /// The held read view was opened (`opened_at_s` says when).
    ViewOpened(&'a HoldView),
    /// The held read view was released (`released_at_s` says when).
    ViewReleased(&'a HoldView),
}

/// What a run measured.
#[derive(Debug)]
pub struct Measured {
    /// The run's figures.
    pub summary: Summary,
    /// Every interval of the measurement.
    pub intervals: Vec<Interval>,
    /// The device changes applied, with when.
    pub device_changes: Vec<DeviceChange>,
    /// The option changes applied, with when.
    pub option_changes: Vec<OptionChange>,
    /// The read view held open, with when it was opened and released.
    pub hold_view: Option<HoldView>,
}

/// Run the workload of `params` on the prepared tables of `db`: the
/// warm-up, then `time_s` measured, with Keel's device changed as
/// `devices` and its options as `options` say (each in time order, checked
/// by the plan), and with `view` a read view held open by a thread of its
/// own (see the `hold_view` module). `on_tick` is called from this thread
/// at the end of every interval, after every change and when the view
/// opens and is released; on Keel SIGUSR1 prints the status report in
/// between (see `StatusRequest`).
pub fn run(
    db: &dyn Database,
    params: &OltpParams,
    devices: &[DeviceChange],
    options: &[OptionChange],
    view: Option<&HoldView>,
    on_tick: &mut dyn FnMut(Tick<'_>),
) -> Result<Measured, OltpError> {
    params.validate()?;
    for (given, key) in [
        (!devices.is_empty(), "device_change"),
        (!options.is_empty(), "set_at"),
        (view.is_some(), "hold_view"),
    ] {
        if given && db.keel().is_none() {
            return Err(OltpError::param(
                key,
                format!("applies to Keel only, not to engine {}", db.engine()),
            ));
        }
    }
    let tables = open_tables(db, params)?;
    let keys = KeyGen::new(params.rand_type, params.table_size);
    let shared = Shared {
        stop: AtomicBool::new(false),
        transactions: AtomicU64::new(0),
        queries: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        hists: (0..params.threads)
            .map(|_| histogram().map(Mutex::new))
            .collect::<Result<_, _>>()?,
        fatal: Mutex::new(None),
        device: crate::sys::BlockDevice::of(db.dir()),
    };
    let status = StatusRequest::register(db);
    let holder = view.map(Holder::new);
    crate::sys::release_free_memory();
    crate::sys::reset_peak_rss();
    let cpu_before = crate::sys::process_cpu_us();
    let result = std::thread::scope(|s| {
        let mut hs: Vec<_> = (0..params.threads)
            .map(|w| {
                let (shared, tables, keys) = (&shared, &tables, &keys);
                s.spawn(move || worker(db, params, tables, keys, shared, w))
            })
            .collect();
        if let (Some(h), Some(k)) = (&holder, db.keel()) {
            let shared = &shared;
            hs.push(s.spawn(move || {
                if let Err(e) = h.hold(k, &shared.stop) {
                    lock(&shared.fatal).get_or_insert(e.into());
                    shared.stop.store(true, Ordering::Relaxed);
                }
            }));
        }
        let sampling = Sampling {
            devices,
            options,
            holder: holder.as_ref(),
        };
        let r = sample_run(db, params, &sampling, &shared, &status, on_tick);
        shared.stop.store(true, Ordering::Relaxed);
        let panicked = hs.into_iter().any(|h| h.join().is_err());
        if panicked {
            return Err(OltpError::WorkerPanicked);
        }
        r
    });
    // The view outlived the measurement: the end of the run released it.
    if let Some(h) = &holder {
        report_view(h, on_tick);
    }
    if let Some(e) = lock(&shared.fatal).take() {
        return Err(e.into());
    }
    let mut measured = result?;
    measured.hold_view = holder.map(|h| h.state());
    let summary = &mut measured.summary;
    summary.peak_rss_bytes = crate::sys::peak_rss_bytes().unwrap_or(0);
    summary.cpu_us_per_txn = match (cpu_before, crate::sys::process_cpu_us()) {
        (Some(a), Some(b)) if summary.transactions > 0 => {
            Some(b.saturating_sub(a) as f64 / summary.transactions as f64)
        }
        _ => None,
    };
    summary.not_measured = db.not_measured().iter().map(|f| f.to_string()).collect();
    summary.device = device_label(&shared.device, summary.device_bytes_per_txn.is_some());
    Ok(measured)
}

fn worker(
    db: &dyn Database,
    params: &OltpParams,
    tables: &[SbTable],
    keys: &KeyGen,
    shared: &Shared,
    w: usize,
) {
    let fail = |e: DbError| {
        lock(&shared.fatal).get_or_insert(e);
        shared.stop.store(true, Ordering::Relaxed);
    };
    let mut session = match db.session() {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let mut client = Client {
        tables,
        params,
        keys,
        rng: SmallRng::seed_from_u64(params.seed ^ ((w as u64 + 1) << 32)),
        rows: ResultSet::default(),
    };
    let queries = queries_per_txn(params.workload);
    let per_thread_rate = params.rate / params.threads as f64;
    let mut pace = SmallRng::seed_from_u64(params.seed ^ w as u64 ^ 0x5eed);
    let mut due = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        // With --rate, transactions are due at exponential intervals and
        // latency counts from the due time, so a backlog shows as latency.
        let start = if per_thread_rate > 0.0 {
            let u: f64 = pace.gen();
            due += Duration::from_secs_f64(-(1.0 - u).ln() / per_thread_rate);
            if !sleep_until(due, &shared.stop) {
                return;
            }
            due
        } else {
            Instant::now()
        };
        loop {
            match client.transaction(&mut *session) {
                Ok(()) => break,
                Err(e) if e.is_retryable() => {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    if shared.stop.load(Ordering::Relaxed) {
                        return;
                    }
                }
                Err(e) => return fail(e),
            }
        }
        let us = start.elapsed().as_micros().min(u128::from(MAX_LATENCY_US)) as u64;
        lock(&shared.hists[w]).saturating_record(us.max(1));
        shared.queries.fetch_add(queries, Ordering::Relaxed);
        shared.transactions.fetch_add(1, Ordering::Relaxed);
    }
}

/// Sleep until `t`; false if `stop` was raised first.
pub(super) fn sleep_until(t: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= t {
            return true;
        }
        std::thread::sleep((t - now).min(POLL));
    }
}

/// Report what the holder of the view did since it was last asked.
fn report_view(h: &Holder<'_>, on_tick: &mut dyn FnMut(Tick<'_>)) {
    let (opened, released) = h.news();
    if let Some(v) = &opened {
        on_tick(Tick::ViewOpened(v));
    }
    if let Some(v) = &released {
        on_tick(Tick::ViewReleased(v));
    }
}

/// What happens during the measurement besides the workload (all on Keel
/// only): device and option changes, and the held view.
struct Sampling<'a> {
    devices: &'a [DeviceChange],
    options: &'a [OptionChange],
    holder: Option<&'a Holder<'a>>,
}

/// What the sampler looks after while it sleeps: status requests and (on
/// Keel) device and option changes and the held view's news.
struct Sampler<'a, 'b> {
    db: &'a dyn Database,
    stop: &'a AtomicBool,
    status: &'a StatusRequest,
    devices: Pending<'b, DeviceChange>,
    options: Pending<'b, OptionChange>,
    holder: Option<&'b Holder<'b>>,
}

impl Sampler<'_, '_> {
    /// Sleep like [`sleep_until`], printing the status report whenever
    /// SIGUSR1 asked for it and applying each device or option change as
    /// it falls due (a device change first when both are due). A change due at `t` itself is applied on the next call, right
    /// after the interval ending at `t` was sampled, so that the interval
    /// is wholly under the old device.
    fn sleep_until(
        &mut self,
        t: Instant,
        on_tick: &mut dyn FnMut(Tick<'_>),
    ) -> Result<(), OltpError> {
        loop {
            self.status.poll(self.db);
            if let Some(h) = self.holder {
                report_view(h, on_tick);
            }
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= t {
                return Ok(());
            }
            if let Some(db) = self.db.keel() {
                self.devices.apply_due(db, now, &mut |c| {
                    on_tick(Tick::DeviceChanged(c));
                })?;
                self.options.apply_due(db, now, &mut |c| {
                    on_tick(Tick::OptionChanged(c));
                })?;
            }
            let wake = [self.devices.next_due(), self.options.next_due()]
                .into_iter()
                .flatten()
                .fold(t, Instant::min);
            std::thread::sleep(wake.saturating_duration_since(now).min(POLL));
        }
    }
}

/// Running totals at the previous sample.
struct Prev {
    at: Instant,
    transactions: u64,
    queries: u64,
    errors: u64,
    metrics: Snapshot,
}

impl Prev {
    fn now(db: &dyn Database, shared: &Shared) -> Prev {
        Prev {
            at: Instant::now(),
            transactions: shared.transactions.load(Ordering::Relaxed),
            queries: shared.queries.load(Ordering::Relaxed),
            errors: shared.errors.load(Ordering::Relaxed),
            metrics: engine_snapshot(db, shared.device.as_ref().ok()),
        }
    }
}

/// The engine's metrics now, with the bytes written to the data
/// directory's block device beside them (and, raw, this process's
/// `write_bytes`, see [`crate::sys::process_write_bytes`]).
fn engine_snapshot(db: &dyn Database, device: Option<&crate::sys::BlockDevice>) -> Snapshot {
    let mut s = db.metrics();
    if let Some(b) = crate::sys::process_write_bytes(None) {
        s.insert(PROCESS_WRITE_BYTES, b);
    }
    if let Some(b) = device.and_then(crate::sys::BlockDevice::written_bytes) {
        s.insert(DEVICE_WRITE_BYTES, b);
    }
    s
}

/// `Summary::device`: the device counted, or why none was.
pub(crate) fn device_label(device: &Result<crate::sys::BlockDevice, String>, read: bool) -> String {
    match device {
        Ok(d) if read => d.to_string(),
        Ok(d) => format!("not measured: cannot read the counters of {d}"),
        Err(why) => format!("not measured: {why}"),
    }
}

/// Take one sample: the interval since `prev` and the latencies recorded
/// in it (merged into `total`).
fn sample(
    db: &dyn Database,
    shared: &Shared,
    prev: &mut Prev,
    t_s: f64,
    total: &mut Histogram<u64>,
) -> Result<Interval, OltpError> {
    let now = Prev::now(db, shared);
    let mut h = histogram()?;
    for m in &shared.hists {
        let mut g = lock(m);
        h.add(&*g)
            .map_err(|e| OltpError::Data(format!("latency histogram: {e}")))?;
        g.reset();
    }
    total
        .add(&h)
        .map_err(|e| OltpError::Data(format!("latency histogram: {e}")))?;
    let ms = |us: u64| us as f64 / 1000.0;
    let counts = Counts {
        transactions: now.transactions - prev.transactions,
        queries: now.queries - prev.queries,
        errors: now.errors - prev.errors,
        lat_p95_ms: if h.is_empty() {
            0.0
        } else {
            ms(h.value_at_quantile(0.95))
        },
        lat_max_ms: if h.is_empty() { 0.0 } else { ms(h.max()) },
    };
    let secs = (now.at - prev.at).as_secs_f64();
    let mut iv = Interval::new(t_s, secs, counts, &prev.metrics, &now.metrics);
    if db.keel().is_none() {
        // No flushing mode to read: not "idle".
        iv.flush_mode.clear();
    }
    *prev = now;
    Ok(iv)
}

/// The sampler: warm-up intervals (reported, not kept), then the measured
/// ones, with the device changes, then the summary.
fn sample_run(
    db: &dyn Database,
    params: &OltpParams,
    sampling: &Sampling<'_>,
    shared: &Shared,
    status: &StatusRequest,
    on_tick: &mut dyn FnMut(Tick<'_>),
) -> Result<Measured, OltpError> {
    let step = Duration::from_secs_f64(params.report_interval_s);
    let mut scratch = histogram()?;
    let mut sampler = Sampler {
        db,
        stop: &shared.stop,
        status,
        devices: Pending::none(),
        options: Pending::none(),
        holder: None,
    };
    if params.warmup_s > 0.0 {
        let warm = Duration::from_secs_f64(params.warmup_s);
        let mut prev = Prev::now(db, shared);
        let t0 = prev.at;
        let mut end = t0;
        while end < t0 + warm && !shared.stop.load(Ordering::Relaxed) {
            end = (end + step).min(t0 + warm);
            sampler.sleep_until(end, on_tick)?;
            let t_s = (Instant::now() - t0).as_secs_f64();
            let iv = sample(db, shared, &mut prev, t_s, &mut scratch)?;
            on_tick(Tick::Interval {
                interval: &iv,
                warmup: true,
            });
        }
    }
    let mut prev = Prev::now(db, shared);
    for m in &shared.hists {
        lock(m).reset();
    }
    let (t0, first) = (prev.at, prev.metrics.clone());
    if let Some(h) = sampling.holder {
        h.start(t0);
    }
    let mut sampler = Sampler {
        devices: Pending::new(sampling.devices, t0),
        options: Pending::new(sampling.options, t0),
        holder: sampling.holder,
        ..sampler
    };
    let measure = Duration::from_secs_f64(params.time_s);
    let mut total = histogram()?;
    let mut intervals = Vec::new();
    let mut end = t0;
    while end < t0 + measure && !shared.stop.load(Ordering::Relaxed) {
        end = (end + step).min(t0 + measure);
        sampler.sleep_until(end, on_tick)?;
        let t_s = (Instant::now() - t0).as_secs_f64();
        let iv = sample(db, shared, &mut prev, t_s, &mut total)?;
        on_tick(Tick::Interval {
            interval: &iv,
            warmup: false,
        });
        intervals.push(iv);
    }
    let time_s = (prev.at - t0).as_secs_f64();
    let summary = Summary::new(&intervals, &total, time_s, &first, &prev.metrics);
    Ok(Measured {
        summary,
        intervals,
        device_changes: sampler.devices.into_applied(),
        option_changes: sampler.options.into_applied(),
        hold_view: None,
    })
}
