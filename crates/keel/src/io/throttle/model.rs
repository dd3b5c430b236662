//! The model of one throttled disk: a pure scheduler over virtual instants
//! (queue slots and token buckets, see the parent module), and the sleeping
//! that makes callers wait for it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ThrottleSpec;

/// Most unused credit a token bucket keeps (its burst size, in time).
pub const CATCH_UP: Duration = Duration::from_millis(2);

/// Longest a single request may hold a token bucket: keeps absurd rates (a
/// request per century) from overflowing `Instant` arithmetic.
const MAX_COST: Duration = Duration::from_secs(3600);

/// Most scheduling lateness credited back to a thread's next request.
/// Generous: on a loaded CPU a woken thread may wait several milliseconds.
pub const LATE_CREDIT_MAX: Duration = Duration::from_millis(20);

/// What the model has done since its file system was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrottleStats {
    /// Reads and writes admitted.
    pub requests: u64,
    /// Bytes they carried.
    pub bytes: u64,
    /// Syncs admitted.
    pub syncs: u64,
    /// Requests that paid a seek.
    pub seeks: u64,
    /// Modelled time during which at least one request was in service.
    pub busy: Duration,
    /// Real time callers spent sleeping in the throttle.
    pub delay: Duration,
}

/// The pure scheduling core: virtual instants only, no clock and no sleep, so
/// it can be driven by a test with made-up arrival times.
#[derive(Debug)]
struct Scheduler {
    /// The spec the fields below were derived from (for reports).
    spec: ThrottleSpec,
    iops_cost: Option<Duration>,
    bw_secs_per_byte: Option<f64>,
    lat: Duration,
    seek: Duration,
    iops_free: Instant,
    bw_free: Instant,
    /// The instant each of the `qd` slots is next free; `None`: unbounded.
    slots: Option<BinaryHeap<Reverse<Instant>>>,
    busy_until: Instant,
    stats: ThrottleStats,
}

impl Scheduler {
    /// Rates that are not positive and finite count as no limit, and a queue
    /// depth of 0 as 1 (see [`ThrottleSpec::validate`]).
    fn new(spec: &ThrottleSpec, origin: Instant) -> Self {
        let mut s = Self {
            spec: ThrottleSpec::unlimited(),
            iops_cost: None,
            bw_secs_per_byte: None,
            lat: Duration::ZERO,
            seek: Duration::ZERO,
            iops_free: origin,
            bw_free: origin,
            slots: None,
            busy_until: origin,
            stats: ThrottleStats::default(),
        };
        s.respec(spec, origin);
        s
    }

    /// Model `spec` for every request admitted from now on; `at` is the
    /// instant of the change. Requests already admitted keep the completion
    /// they were given. Read the same way as [`Scheduler::new`].
    ///
    /// - Buckets restart empty at `at`: credit that built up while the old
    ///   spec was idle is not spent at the new rate (a change to a slower
    ///   disk would otherwise begin with a burst the new disk cannot give),
    ///   while a bucket's debt (requests already granted beyond `at`) is
    ///   kept, so those requests keep the disk busy after the change.
    /// - A smaller queue keeps the `qd` latest-free slots: a new request
    ///   then waits until fewer than `qd` requests, old or new, are in
    ///   service, exactly as if the queue had always been that deep. A
    ///   deeper one adds slots free at `at`. An unbounded queue keeps no
    ///   record of what is in service, so a change from it to a bounded one
    ///   counts only the requests admitted after the change.
    fn respec(&mut self, spec: &ThrottleSpec, at: Instant) {
        let rate = |r: Option<f64>| r.filter(|r| r.is_finite() && *r > 0.0);
        self.iops_cost = rate(spec.iops).map(|iops| cost(1.0 / iops));
        self.bw_secs_per_byte = rate(spec.bw_bytes_per_s).map(|bw| 1.0 / bw);
        self.lat = spec.lat;
        self.seek = spec.seek;
        self.iops_free = self.iops_free.max(at);
        self.bw_free = self.bw_free.max(at);
        let old_slots = self.slots.take();
        self.slots = spec.qd.map(|qd| {
            let mut free: Vec<Instant> = old_slots
                .into_iter()
                .flatten()
                .map(|Reverse(t)| t)
                .collect();
            free.sort_unstable_by(|a, b| b.cmp(a));
            free.truncate(qd.max(1));
            free.resize(qd.max(1), at);
            free.into_iter().map(Reverse).collect()
        });
        self.spec = spec.clone();
    }

    /// Admit a request arriving at `arrival`: `Some((bytes, seek))` for a read
    /// or write, `None` for a sync. Returns its modelled completion.
    fn admit(&mut self, arrival: Instant, io: Option<(u64, bool)>) -> Instant {
        let slot = self.slots.as_mut().and_then(BinaryHeap::pop);
        let queued = slot.map_or(arrival, |Reverse(free)| free.max(arrival));
        let floor = queued.checked_sub(CATCH_UP).unwrap_or(queued);
        let mut start = queued;
        let mut service = self.lat;
        if let Some((bytes, seek)) = io {
            if let Some(cost) = self.iops_cost {
                self.iops_free = self.iops_free.max(floor);
                start = start.max(self.iops_free);
                self.iops_free += cost;
            }
            if let Some(secs_per_byte) = self.bw_secs_per_byte {
                self.bw_free = self.bw_free.max(floor);
                start = start.max(self.bw_free);
                self.bw_free += cost(bytes as f64 * secs_per_byte);
            }
            if seek {
                service += self.seek;
                self.stats.seeks += 1;
            }
            self.stats.requests += 1;
            self.stats.bytes += bytes;
        } else {
            self.stats.syncs += 1;
        }
        let done = start + service;
        if let Some(slots) = self.slots.as_mut() {
            slots.push(Reverse(done));
        }
        let busy_from = start.max(self.busy_until);
        self.stats.busy += done.saturating_duration_since(busy_from);
        self.busy_until = self.busy_until.max(done);
        done
    }
}

/// A bucket's time for `secs` seconds of work, at most [`MAX_COST`].
fn cost(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).map_or(MAX_COST, |d| d.min(MAX_COST))
}

thread_local! {
    /// How far this thread is behind its modelled timeline because it was
    /// scheduled late (not because its real I/O was slow).
    static LATE: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// A request admitted to the model.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ticket {
    /// Modelled completion.
    done: Instant,
    /// The lateness credited to its arrival.
    credit: Duration,
}

/// The arrival instant of a request issued now: as if the thread had not
/// been scheduled late after its previous request.
fn arrival_now() -> (Instant, Duration) {
    let now = Instant::now();
    let late = LATE.with(|l| l.replace(Duration::ZERO));
    (now.checked_sub(late).unwrap_or(now), late)
}

/// Sleep until the ticket's completion; returns the time slept. Records how
/// late the thread is afterwards: the whole wake-up delay if it slept, else
/// at most the credit it arrived with (a request whose real I/O outlasted the
/// model earns no credit: the model is a floor, not an average).
fn sleep_until(ticket: Ticket) -> Duration {
    let begin = Instant::now();
    let mut now = begin;
    while now < ticket.done {
        std::thread::sleep(ticket.done - now);
        now = Instant::now();
    }
    let late = now.saturating_duration_since(ticket.done);
    let late = if now > begin {
        late
    } else {
        late.min(ticket.credit)
    };
    LATE.with(|l| l.set(late.min(LATE_CREDIT_MAX)));
    now - begin
}

/// How late this thread is now: the test harness subtracts it from a run's
/// end, since no request follows the last wake-up to take it back.
#[cfg(test)]
pub(super) fn lateness() -> Duration {
    LATE.with(std::cell::Cell::get)
}

/// The shared model of one throttled disk.
#[derive(Debug)]
pub(super) struct Model {
    scheduler: Mutex<Scheduler>,
    delay_ns: AtomicU64,
}

impl Model {
    /// See [`super::ThrottledFileSystem::new`] for how odd values are read.
    pub(super) fn new(spec: &ThrottleSpec) -> Self {
        Self {
            scheduler: Mutex::new(Scheduler::new(spec, Instant::now())),
            delay_ns: AtomicU64::new(0),
        }
    }

    /// The spec requests are admitted under now.
    pub(super) fn spec(&self) -> ThrottleSpec {
        self.scheduler.lock().spec.clone()
    }

    /// Admit every later request under `spec` (see [`Scheduler::respec`]).
    /// Requests already admitted complete when they were told to: their
    /// threads are asleep until then and are not woken to be re-timed.
    pub(super) fn set_spec(&self, spec: &ThrottleSpec) {
        self.scheduler.lock().respec(spec, Instant::now());
    }

    pub(super) fn stats(&self) -> ThrottleStats {
        let mut stats = self.scheduler.lock().stats;
        stats.delay = Duration::from_nanos(self.delay_ns.load(Ordering::Relaxed));
        stats
    }

    /// Admit a read or write of `bytes` at `offset` on the file whose
    /// previous request ended at `last_end`.
    pub(super) fn admit_io(&self, last_end: &AtomicU64, offset: u64, bytes: u64) -> Ticket {
        let (arrival, credit) = arrival_now();
        let mut scheduler = self.scheduler.lock();
        // Under the model's lock so that the order of requests on a file is
        // the order in which the model sees them.
        let previous_end = last_end.swap(offset.saturating_add(bytes), Ordering::Relaxed);
        let done = scheduler.admit(arrival, Some((bytes, previous_end != offset)));
        Ticket { done, credit }
    }

    pub(super) fn admit_sync(&self) -> Ticket {
        let (arrival, credit) = arrival_now();
        let done = self.scheduler.lock().admit(arrival, None);
        Ticket { done, credit }
    }

    /// Sleep until the ticket's completion.
    pub(super) fn wait(&self, ticket: Ticket) {
        let slept = sleep_until(ticket);
        let slept_ns = u64::try_from(slept.as_nanos()).unwrap_or(u64::MAX);
        self.delay_ns.fetch_add(slept_ns, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PAGE: u64 = 16384;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn scheduler_queue_depth_and_seek() {
        let t0 = Instant::now();
        let spec: ThrottleSpec = "qd=2,lat=1ms,seek=4ms".parse().unwrap();
        let mut s = Scheduler::new(&spec, t0);
        // Two slots: the first two requests run side by side, the third waits.
        assert_eq!(s.admit(t0, Some((PAGE, true))), t0 + ms(5));
        assert_eq!(s.admit(t0, Some((PAGE, false))), t0 + ms(1));
        assert_eq!(s.admit(t0, Some((PAGE, false))), t0 + ms(2));
        assert_eq!(s.admit(t0, None), t0 + ms(3));
        assert_eq!(s.admit(t0 + ms(20), Some((PAGE, true))), t0 + ms(25));
        assert_eq!(s.stats.busy, ms(5 + 5));
        assert_eq!((s.stats.requests, s.stats.syncs, s.stats.seeks), (4, 1, 2));
    }

    #[test]
    fn scheduler_buckets_keep_at_most_catch_up_credit() {
        let t0 = Instant::now();
        let spec: ThrottleSpec = "iops=1000".parse().unwrap();
        let mut s = Scheduler::new(&spec, t0);
        // After 10 idle ms only 2 ms of credit remain: three requests start at
        // once, then one per ms.
        let at = t0 + ms(10);
        let starts: Vec<_> = (0..5).map(|_| s.admit(at, Some((1, true)))).collect();
        assert_eq!(starts, [at, at, at, at + ms(1), at + ms(2)]);

        let spec: ThrottleSpec = "bw=1MiB,lat=1ms".parse().unwrap();
        let mut s = Scheduler::new(&spec, t0);
        assert_eq!(s.admit(t0, Some((1 << 20, false))), t0 + ms(1));
        assert_eq!(s.admit(t0, Some((1 << 19, false))), t0 + ms(1001));
        assert_eq!(s.admit(t0, Some((1, false))), t0 + ms(1501));
    }

    #[test]
    fn respec_drops_saved_credit_but_keeps_granted_work() {
        let t0 = Instant::now();
        let fast: ThrottleSpec = "iops=1000".parse().unwrap();
        let slow: ThrottleSpec = "iops=250".parse().unwrap();
        // Idle for 10 ms under iops=1000 (2 ms of credit saved), then slowed:
        // the saved credit is gone, requests start 4 ms apart at once.
        let mut s = Scheduler::new(&fast, t0);
        let at = t0 + ms(10);
        s.respec(&slow, at);
        let starts: Vec<_> = (0..3).map(|_| s.admit(at, Some((1, true)))).collect();
        assert_eq!(starts, [at, at + ms(4), at + ms(8)]);
        assert_eq!(s.spec, slow);
        // Three requests granted under iops=250 hold the bucket to t0+12ms;
        // sped up at t0, later requests queue behind them at the new rate.
        let mut s = Scheduler::new(&slow, t0);
        let granted: Vec<_> = (0..3).map(|_| s.admit(t0, Some((1, true)))).collect();
        assert_eq!(granted, [t0, t0 + ms(4), t0 + ms(8)]);
        s.respec(&fast, t0);
        assert_eq!(s.admit(t0, Some((1, true))), t0 + ms(12));
        assert_eq!(s.admit(t0, Some((1, true))), t0 + ms(13));
        // A bandwidth limit added by a change starts empty at the change.
        let mut s = Scheduler::new(&fast, t0);
        s.respec(&"bw=1MiB".parse().unwrap(), at);
        assert_eq!(s.admit(at, Some((1 << 19, true))), at);
        assert_eq!(s.admit(at, Some((1, true))), at + ms(500));
    }

    #[test]
    fn respec_resizes_the_queue_around_the_requests_in_service() {
        let t0 = Instant::now();
        let spec = |qd: usize| -> ThrottleSpec { format!("qd={qd},lat=10ms").parse().unwrap() };
        // Four in service, completing at t0+10..13 ms; shrunk to two at t0+3.
        let mut s = Scheduler::new(&spec(4), t0);
        for i in 0..4 {
            assert_eq!(s.admit(t0 + ms(i), Some((1, false))), t0 + ms(10 + i));
        }
        s.respec(&spec(2), t0 + ms(3));
        // The next one starts once only one request is left in service (the
        // one ending at t0+13), the one after when that one ends.
        assert_eq!(s.admit(t0 + ms(3), Some((1, false))), t0 + ms(22));
        assert_eq!(s.admit(t0 + ms(3), Some((1, false))), t0 + ms(23));
        assert_eq!(s.admit(t0 + ms(3), Some((1, false))), t0 + ms(32));
        assert_eq!(s.slots.as_ref().map(BinaryHeap::len), Some(2));
        // Grown from one slot to three: two start at once beside the one in
        // service, the third waits for the first to end.
        let mut s = Scheduler::new(&spec(1), t0);
        assert_eq!(s.admit(t0, Some((1, false))), t0 + ms(10));
        s.respec(&spec(3), t0 + ms(1));
        let done: Vec<_> = (0..3)
            .map(|_| s.admit(t0 + ms(1), Some((1, false))))
            .collect();
        assert_eq!(done, [t0 + ms(11), t0 + ms(11), t0 + ms(20)]);
        // Unbounded and back: nothing is stuck, the depth holds again.
        s.respec(&"lat=10ms".parse().unwrap(), t0 + ms(2));
        assert!(s.slots.is_none());
        assert_eq!(s.admit(t0 + ms(2), Some((1, false))), t0 + ms(12));
        s.respec(&spec(1), t0 + ms(2));
        assert_eq!(s.admit(t0 + ms(2), Some((1, false))), t0 + ms(12));
        assert_eq!(s.admit(t0 + ms(2), Some((1, false))), t0 + ms(22));
    }

    #[test]
    fn scheduler_survives_absurd_rates() {
        let t0 = Instant::now();
        let spec = ThrottleSpec {
            iops: Some(1e-30),
            bw_bytes_per_s: Some(1e-30),
            ..ThrottleSpec::default()
        };
        let mut s = Scheduler::new(&spec, t0);
        assert_eq!(s.admit(t0, Some((PAGE, false))), t0);
        assert_eq!(s.admit(t0, Some((PAGE, false))), t0 + MAX_COST);
        let nonsense = ThrottleSpec {
            iops: Some(f64::NAN),
            bw_bytes_per_s: Some(-1.0),
            qd: Some(0),
            ..ThrottleSpec::default()
        };
        let mut s = Scheduler::new(&nonsense, t0);
        assert_eq!(s.admit(t0, Some((PAGE, false))), t0);
    }
}
