//! Writer pacing: the policy's "writer pauses" carried out.
//!
//! A policy may limit the rate at which writers together generate redo
//! ([`FlushTargets::writer_limit`](super::FlushTargets)): a curve over the
//! checkpoint age ([`WriterLimit`]), set once a round. A transaction about
//! to take its first row lock (`Engine::pace_writer`), holding no latch and
//! no row lock, evaluates the curve at the age it sees, so the limit
//! follows the age between rounds.
//!
//! # Writers in line
//! The pacer is a line of writers on a byte axis. A writer arriving takes
//! a [`Ticket`]: the next place in line, which it keeps until it goes; the
//! line then moves on by the redo one transaction logs on average. A
//! *release clock* moves along the same axis at the allowed rate (evaluated
//! at each writer's age as it looks), and a writer goes once the clock has
//! reached its place. So writers go one after another, in the order they
//! came, spaced by the time the allowed rate takes to log one average
//! transaction, and while writers are held every one of them pauses about
//! as long as the others: the wait is spread evenly over the transactions
//! instead of falling on a few.
//!
//! (Before, every writer waited for the instant at which the *current* LSN
//! was due: writers that came while the log was not ahead went at once,
//! the ones that came just after a burst all waited for the same instant,
//! and then went together. The pause fell on a few transactions: on
//! `neighbors` on `sata-ssd` the median transaction took 1.2 ms and the
//! p99.9 214 ms, with writers paused 79 % of the time.)
//!
//! The average is measured, never guessed: each [`TRUE_UP`] the bytes
//! logged are compared with what the tickets issued meanwhile were charged,
//! and the clock is moved back by the difference, so over any longer span the
//! writers log exactly what the clock allowed (a bias in the average would
//! otherwise add up, one ticket at a time, into seconds of phantom debt or
//! of unearned credit); moving the clock, not the line, means nobody in
//! line is passed by a later writer. Debt a true-up adds is at most [`MAX_DEBT`] of the
//! allowed rate, so one huge transaction does not hold every writer after
//! it for long. Unused time is banked for at most [`MAX_BURST`]: the clock
//! never runs more than that ahead of the line, so an idle spell does not
//! turn into a burst. Below the curve's free-running age there is no
//! limit: the clock stops, the line is dropped (every ticket held then is
//! already due) and writers skip the pacer; unless the limit has a lump
//! ceiling (`steady`, while pages lie denser in the log than the flusher
//! can write them by their deadlines), which holds writers at every age
//! under the setpoint, free run included.
//!
//! A pause lasts at most [`MAX_PAUSE`]: the writer then looks again (the
//! caller loops, keeping its ticket, so it keeps its place), and pauses
//! again at the rate then in force. It looks again sooner when the
//! checkpoint moves or a new limit is set ([`Pacer::generation`]): the
//! caller checks every few milliseconds (`Admission::pace`), since a pause
//! taken at the rate of one age must not outlast it. Near the hard level the rate is a byte
//! a second, the clock stands, and writers pause and look again until the
//! age comes down. `classic` never sets a limit.
//!
//! Locking: one short mutex around the line and the clock; nothing else is
//! held and nobody waits on it (pauses are sleeps taken after it is
//! released). A writer at or under the free-running age while the clock
//! stands reads two atomics and skips the mutex, so a commit pays for it
//! only above `F`. A writer that gives up (an error) drops its ticket: its
//! place is simply passed over when the clock reaches it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::policy::WriterLimit;
use crate::page::Lsn;

/// Most credit an idle spell leaves for a burst: a tick of the controller,
/// so a burst cannot carry the age far past where the curve stops writers.
pub const MAX_BURST: Duration = Duration::from_millis(100);
/// Most debt one true-up adds, in time at the allowed rate.
pub const MAX_DEBT: Duration = Duration::from_millis(100);
/// Longest single pause asked of the clock: a writer re-checks at least
/// this often. 10 ms under the 100 ms promised, for the scheduler's lateness.
pub const MAX_PAUSE: Duration = Duration::from_millis(90);
/// Pauses shorter than this are not taken: the writer goes (the line's
/// later places still wait for the clock).
pub const MIN_PAUSE: Duration = Duration::from_millis(1);
/// How often the line is trued up against the bytes actually logged, and
/// the average redo per transaction measured.
pub const TRUE_UP: Duration = Duration::from_millis(100);
/// Weight of a true-up's measurement in the average redo per transaction.
const AVG_WEIGHT: f64 = 0.2;

/// A writer's place in line (see the module doc): kept across the pauses
/// of one transaction, so that looking again does not send it to the back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ticket(f64);

/// The release clock: where it stood at `at`, moving at `rate` bytes/s.
#[derive(Debug)]
struct Clock {
    pos: f64,
    at: Instant,
    rate: f64,
}

/// The current true-up window: since when, the LSN then, tickets issued
/// and the bytes they were charged.
#[derive(Debug)]
struct Window {
    at: Instant,
    lsn: Lsn,
    tickets: u64,
    charged: f64,
}

#[derive(Debug, Default)]
struct State {
    limit: Option<WriterLimit>,
    /// `None` while no limit is in force (the clock stands).
    clock: Option<Clock>,
    /// The next free place in line.
    next: f64,
    /// Average redo per transaction (bytes), once measured.
    avg: Option<f64>,
    window: Option<Window>,
}

impl State {
    /// Charge of one ticket issued with the log at `lsn`: the average, or
    /// before the first true-up, what the tickets of this window logged so
    /// far each (nothing for the first), so that even the first window
    /// holds writers at the hard level.
    fn charge(&self, lsn: Lsn) -> f64 {
        self.avg
            .or_else(|| {
                let w = self.window.as_ref().filter(|w| w.tickets > 0)?;
                Some(lsn.saturating_sub(w.lsn) as f64 / w.tickets as f64)
            })
            .unwrap_or(0.0)
    }

    /// Close the true-up window if it is due, and update the average: the
    /// bytes by which what was logged exceeds what was charged (negative:
    /// fell short of it), which the clock must go back by, at most
    /// [`MAX_DEBT`] of `rate` (and forward by at most what was charged).
    fn true_up(&mut self, lsn: Lsn, now: Instant, rate: f64) -> f64 {
        let fresh = Window {
            at: now,
            lsn,
            tickets: 0,
            charged: 0.0,
        };
        let w = self.window.get_or_insert(fresh);
        if now.saturating_duration_since(w.at) < TRUE_UP {
            return 0.0;
        }
        let logged = lsn.saturating_sub(w.lsn) as f64;
        let Window {
            tickets, charged, ..
        } = std::mem::replace(
            w,
            Window {
                at: now,
                lsn,
                tickets: 0,
                charged: 0.0,
            },
        );
        if tickets > 0 {
            let per = logged / tickets as f64;
            self.avg = Some(match self.avg {
                None => per,
                Some(a) => a + AVG_WEIGHT * (per - a),
            });
        }
        (logged - charged).clamp(-charged, rate * MAX_DEBT.as_secs_f64())
    }

    /// What this window's writers logged beyond what they were charged,
    /// with the log at `lsn`, owed at once (at most [`MAX_DEBT`] of
    /// `rate`) rather than at the true-up: a transaction far larger than
    /// the average, or the first ones before it is measured, must not let
    /// the writers after it go for a whole window.
    fn debt(&self, lsn: Lsn, rate: f64) -> f64 {
        self.window.as_ref().map_or(0.0, |w| {
            (lsn.saturating_sub(w.lsn) as f64 - w.charged).clamp(0.0, rate * MAX_DEBT.as_secs_f64())
        })
    }

    /// Issue the next place in line, with the log at `lsn`.
    fn issue(&mut self, lsn: Lsn) -> f64 {
        let place = self.next;
        let charge = self.charge(lsn);
        self.next += charge;
        if let Some(w) = self.window.as_mut() {
            w.tickets += 1;
            w.charged += charge;
        }
        place
    }
}

/// The line of writers and its release clock (see the module doc).
#[derive(Debug, Default)]
pub struct Pacer {
    /// Whether a limit is set: writers check this without the mutex.
    active: AtomicBool,
    /// An age at or under which a writer needs no mutex: the limit's
    /// free-running age while the clock stands and the limit has no lump
    /// ceiling, else 0. (Under `steady`
    /// the limit is always set, so without this every commit would take
    /// the mutex.)
    free_below: AtomicU64,
    /// Bumped by every [`set_limit`](Pacer::set_limit): a paused writer
    /// looks again when it changes (see [`Pacer::generation`]).
    generation: AtomicU64,
    state: Mutex<State>,
}

impl Pacer {
    /// Set (or clear, with `None`) the writers' limit. The line stays: the
    /// next [`delay`](Pacer::delay) moves the clock on at the new rate.
    pub fn set_limit(&self, limit: Option<WriterLimit>) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let limit = limit.filter(|l| l.base_rate.is_finite() && l.base_rate >= 0.0);
        if limit.is_none() && !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock();
        self.active.store(limit.is_some(), Ordering::Release);
        if limit.is_none() {
            stop(&mut st);
        }
        st.limit = limit;
        self.publish_free_below(&st);
    }

    /// Set `free_below` from the state (called holding its mutex). The
    /// curve itself says whether writers at its free-running age go
    /// unlimited ([`WriterLimit::rate_at`]): a limit with a lump ceiling
    /// holds them there too, and then leaves no age free. (Publishing
    /// the free-running age whatever the curve said let writers at a cold
    /// start skip the pacer until the age first passed it, so the ceiling,
    /// there to hold them while a lump is late, held nobody before it: on
    /// the test machine's disk throttled to 300 write IOPS, 11,000 tps in
    /// the free run under a ceiling of about 1,000.)
    fn publish_free_below(&self, st: &State) {
        let free = match (&st.clock, st.limit) {
            (None, Some(l)) if l.rate_at(l.freerun).is_none() => l.freerun,
            _ => 0,
        };
        self.free_below.store(free, Ordering::Release);
    }

    /// How many times a limit was set (or cleared): a writer pausing at
    /// the rate of one limit looks again once the next one is set, as
    /// the policy does every round.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a limit is set (one atomic load: callers skip reading the
    /// LSN, the age and the clock when it is not).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// How long a writer must pause at `now` when the log has reached
    /// `lsn` with checkpoint age `age`. `ticket` is the writer's place in
    /// line: `None` for a transaction that has not looked yet (it gets
    /// one if it must wait), kept by the caller across its pauses, and
    /// cleared when the writer may go. Zero without a limit, below its
    /// free-running age, or when the pause would be under [`MIN_PAUSE`];
    /// at most [`MAX_PAUSE`].
    pub fn delay(&self, lsn: Lsn, age: u64, now: Instant, ticket: &mut Option<Ticket>) -> Duration {
        if !self.active.load(Ordering::Acquire) || age <= self.free_below.load(Ordering::Acquire) {
            *ticket = None;
            return Duration::ZERO;
        }
        let mut st = self.state.lock();
        let Some(rate) = st.limit.and_then(|l| l.rate_at(age)) else {
            stop(&mut st);
            self.publish_free_below(&st);
            *ticket = None;
            return Duration::ZERO;
        };
        if st.clock.is_none() {
            self.free_below.store(0, Ordering::Release);
        }
        // Move the clock to now at the rate it was moving at, then on at
        // this writer's rate. A clock that stood (no limit) starts where
        // the line is: no debt, no credit.
        let next = st.next;
        let clock = st.clock.get_or_insert(Clock {
            pos: next,
            at: now,
            rate,
        });
        let elapsed = now.saturating_duration_since(clock.at).as_secs_f64();
        clock.pos += clock.rate * elapsed;
        clock.at = clock.at.max(now);
        clock.rate = rate;
        // Trued up by moving the clock, not the line, so that nobody in
        // line is passed by a later writer.
        let owed = st.true_up(lsn, now, rate);
        // Credit is banked for MAX_BURST at most.
        let credit = rate * MAX_BURST.as_secs_f64();
        let next = st.next;
        let Some(clock) = st.clock.as_mut() else {
            return Duration::ZERO;
        };
        clock.pos = (clock.pos - owed).min(next + credit);
        let clock_pos = clock.pos - st.debt(lsn, rate);
        let place = match *ticket {
            Some(Ticket(p)) => p,
            None => st.issue(lsn),
        };
        let d = Duration::from_secs_f64(((place - clock_pos) / rate).clamp(0.0, 3600.0));
        if d < MIN_PAUSE {
            *ticket = None;
            Duration::ZERO
        } else {
            *ticket = Some(Ticket(place));
            d.min(MAX_PAUSE)
        }
    }
}

/// Stop the clock: no limit in force. Every place issued so far is due.
fn stop(st: &mut State) {
    if let Some(c) = st.clock.take() {
        st.next = st.next.max(c.pos);
    }
    st.window = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The age at which `flat(rate)` allows exactly `rate`.
    const AT_S: u64 = 1000;
    /// The average transaction in these tests: 10 ms at 1 MB/s.
    const AVG: Lsn = 10_000;

    fn flat(rate: f64) -> Option<WriterLimit> {
        Some(WriterLimit {
            base_rate: rate,
            freerun: 500,
            setpoint: AT_S,
            hard: 2000,
            lump_ceiling: f64::INFINITY,
        })
    }

    fn ms(d: Duration) -> u64 {
        (d.as_secs_f64() * 1000.0).round() as u64
    }

    /// A pacer at 1 MB/s that has measured one transaction of [`AVG`]
    /// bytes, at `t + TRUE_UP` (returned): the clock then stands at
    /// 90 kB, the line at 10 kB.
    fn primed() -> (Pacer, Instant) {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(flat(1_000_000.0));
        assert_eq!(p.delay(0, AT_S, t, &mut None), Duration::ZERO);
        let t1 = t + TRUE_UP;
        assert_eq!(p.delay(AVG, AT_S, t1, &mut None), Duration::ZERO);
        (p, t1)
    }

    #[test]
    fn no_limit_no_pause() {
        let p = Pacer::default();
        let mut ticket = None;
        assert_eq!(
            p.delay(1 << 30, AT_S, Instant::now(), &mut ticket),
            Duration::ZERO
        );
        assert_eq!(ticket, None);
    }

    #[test]
    fn writers_go_in_turn_spaced_by_the_average_transaction() {
        let (p, t) = primed();
        // Places 10 kB .. 90 kB are behind the clock: those writers go.
        for _ in 0..9 {
            let mut ticket = None;
            assert_eq!(p.delay(AVG, AT_S, t, &mut ticket), Duration::ZERO);
            assert_eq!(ticket, None);
        }
        // Then one every 10 ms, in the order they came.
        let waits: Vec<u64> = (0..4)
            .map(|_| ms(p.delay(AVG, AT_S, t, &mut None)))
            .collect();
        assert_eq!(waits, [10, 20, 30, 40]);
        // Far back in line: capped, to look again.
        let mut far = None;
        for _ in 0..20 {
            far = None;
            p.delay(AVG, AT_S, t, &mut far);
        }
        assert_eq!(p.delay(AVG, AT_S, t, &mut far), MAX_PAUSE);
    }

    #[test]
    fn a_writer_that_looks_again_keeps_its_place() {
        let (p, t) = primed();
        for _ in 0..9 {
            p.delay(AVG, AT_S, t, &mut None);
        }
        let mut first = None;
        let mut second = None;
        assert_eq!(ms(p.delay(AVG, AT_S, t, &mut first)), 10);
        assert_eq!(ms(p.delay(AVG, AT_S, t, &mut second)), 20);
        // 10 ms on: the first goes, the second has 10 ms left, and a
        // writer arriving now queues behind it.
        let later = t + Duration::from_millis(10);
        assert_eq!(p.delay(AVG, AT_S, later, &mut first), Duration::ZERO);
        assert_eq!(first, None);
        assert_eq!(ms(p.delay(AVG, AT_S, later, &mut second)), 10);
        assert!(second.is_some());
        assert_eq!(ms(p.delay(AVG, AT_S, later, &mut None)), 20);
    }

    #[test]
    fn the_line_is_trued_up_to_the_bytes_logged() {
        // Charged 10 kB each, the writers logged nothing: at the true-up
        // the clock moves on by what was charged, and the waiters go.
        let (p, t) = primed();
        let mut tickets = vec![None; 15];
        for tk in tickets.iter_mut() {
            p.delay(AVG, AT_S, t, tk);
        }
        let last = &mut tickets[14];
        let before = p.delay(AVG, AT_S, t + Duration::from_millis(50), last);
        assert_eq!(ms(before), 10);
        assert_eq!(
            p.delay(AVG, AT_S, t + TRUE_UP, last),
            Duration::ZERO,
            "the unlogged charge is given back"
        );
        // The other way: 16 tickets charged 160 kB, and 250 kB were
        // logged: the clock, at 190 kB by then, goes back by 90 kB, and
        // the next place, 160 kB, is 60 ms away.
        let (p, t) = primed();
        for _ in 0..15 {
            p.delay(AVG, AT_S, t, &mut None);
        }
        let d = p.delay(AVG + 250_000, AT_S, t + TRUE_UP, &mut None);
        assert_eq!(ms(d), 60);
    }

    #[test]
    fn one_true_up_adds_at_most_max_debt() {
        let (p, t) = primed();
        for _ in 0..10 {
            p.delay(AVG, AT_S, t, &mut None);
        }
        // One transaction logged 10 MB: 10 s at this rate. The clock goes
        // back by 100 ms of it only: at t + 100 ms it stands at 90 kB again,
        // and the next place, 110 kB, is 20 ms away.
        let d = p.delay(AVG + 10_000_000, AT_S, t + TRUE_UP, &mut None);
        assert_eq!(ms(d), 20);
    }

    #[test]
    fn the_rate_follows_the_age_each_writer_sees() {
        let (p, t) = primed();
        // Below the free-running age: no limit at all.
        let mut ticket = None;
        assert_eq!(p.delay(1 << 30, 400, t, &mut ticket), Duration::ZERO);
        assert_eq!(ticket, None);
        // The limit resumes with no debt and no credit: the line starts at
        // the clock, and the second writer waits a transaction's time.
        assert_eq!(p.delay(AVG, AT_S, t, &mut None), Duration::ZERO);
        assert_eq!(ms(p.delay(AVG, AT_S, t, &mut None)), 10);
        // At the hard level the clock stands (a byte a second): a writer
        // pauses the full pause and looks again, keeping its place.
        let mut held = None;
        assert_eq!(p.delay(AVG, 2000, t, &mut held), MAX_PAUSE);
        // (The three let go meanwhile logged their 10 kB each.)
        let later = t + Duration::from_secs(1);
        assert_eq!(p.delay(4 * AVG, 2000, later, &mut held), MAX_PAUSE);
        // Back at the setpoint's rate, it goes in its turn.
        assert_eq!(ms(p.delay(4 * AVG, AT_S, later, &mut held)), 20);
    }

    #[test]
    fn a_lump_ceiling_paces_writers_below_the_free_running_age_from_the_start() {
        // A cold start: no writer has passed the free-running age (500)
        // yet, so the clock has never run, and the limit has a ceiling of
        // 1 MB/s (a lump is late).
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(Some(WriterLimit {
            base_rate: 100_000.0,
            freerun: 500,
            setpoint: AT_S,
            hard: 2000,
            lump_ceiling: 1_000_000.0,
        }));
        let age = 100;
        assert_eq!(p.delay(0, age, t, &mut None), Duration::ZERO);
        let t1 = t + TRUE_UP;
        assert_eq!(p.delay(AVG, age, t1, &mut None), Duration::ZERO);
        // As at the setpoint's rate (see the test above): the places behind
        // the clock go, then one every 10 ms.
        for _ in 0..9 {
            assert_eq!(p.delay(AVG, age, t1, &mut None), Duration::ZERO);
        }
        let waits: Vec<u64> = (0..3)
            .map(|_| ms(p.delay(AVG, age, t1, &mut None)))
            .collect();
        assert_eq!(waits, [10, 20, 30]);
        // The ceiling lifted (nothing late): below the free-running age
        // writers skip the pacer again.
        p.set_limit(flat(1_000_000.0));
        let mut ticket = None;
        assert_eq!(p.delay(AVG, age, t1, &mut ticket), Duration::ZERO);
        assert_eq!(ticket, None);
    }

    #[test]
    fn idle_time_banks_at_most_max_burst() {
        let (p, t) = primed();
        // 10 s idle (the transaction let go at `t` logged its 10 kB): the
        // clock is at most 100 ms (100 kB) ahead of the line at 10 kB, so
        // eleven go (10 kB .. 110 kB), and the rest wait their turn.
        let later = t + Duration::from_secs(10);
        let gone = (0..30)
            .take_while(|_| p.delay(2 * AVG, AT_S, later, &mut None).is_zero())
            .count();
        assert_eq!(gone, 11);
    }

    #[test]
    fn clearing_the_limit_ends_pauses() {
        let (p, t) = primed();
        let mut ticket = None;
        for _ in 0..12 {
            ticket = None;
            p.delay(AVG, AT_S, t, &mut ticket);
        }
        assert!(ticket.is_some());
        p.set_limit(None);
        assert_eq!(p.delay(AVG, AT_S, t, &mut ticket), Duration::ZERO);
        assert_eq!(ticket, None);
    }
}
