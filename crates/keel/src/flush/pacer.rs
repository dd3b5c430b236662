//! Writer pacing: the policy's "writer pauses" carried out.
//!
//! A policy may limit the rate at which writers together generate redo
//! ([`FlushTargets::writer_limit`](super::FlushTargets)): a curve over the
//! checkpoint age ([`WriterLimit`]), set once a round. A transaction about
//! to take its first row lock (`Engine::pace_writer`), holding no latch and
//! no row lock, evaluates the curve at the age it sees, so the
//! limit follows the age between rounds. The pacer turns the rate into
//! pauses without estimating what each commit will log: it keeps a shared
//! timeline anchored at (LSN, instant), re-anchored where it stood whenever
//! the rate changes (so a change neither forgives recent debt nor banks
//! credit; debt beyond [`MAX_DEBT`] is forgiven, since time owed at the
//! near-zero rate of the hard level would otherwise hold writers long
//! after the age came down),
//! and a writer sleeps until the instant at which the current LSN is due.
//! Every writer waits for the same due time, so the limit holds for all of
//! them together. Unused time is banked for at most [`MAX_BURST`], so an
//! idle spell does not turn into a burst; below the curve's free-running
//! age the timeline is dropped (no limit, no debt). A pause lasts at most
//! [`MAX_PAUSE`]: the writer then looks again (the caller loops), so a
//! writer that still owes time pauses again at the rate then in force.
//! `classic` never sets a limit.
//!
//! Locking: one short mutex around the anchor; nothing else is held and
//! nobody waits on it (pauses are sleeps taken after it is released). A
//! writer at or under the free-running age while no timeline is anchored
//! reads two atomics and skips the mutex, so a commit pays for it only
//! above `F`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::policy::WriterLimit;
use crate::page::Lsn;

/// Most credit an idle spell leaves for a burst: a tick of the controller,
/// so a burst cannot carry the age far past where the curve stops writers.
pub const MAX_BURST: Duration = Duration::from_millis(100);
/// Most time owed carried over when the rate changes.
pub const MAX_DEBT: Duration = Duration::from_millis(100);
/// Longest single pause asked of the clock: a writer re-checks at least
/// this often. 10 ms under the 100 ms promised, for the scheduler's lateness.
pub const MAX_PAUSE: Duration = Duration::from_millis(90);
/// Pauses shorter than this are not taken (the debt stays on the timeline).
pub const MIN_PAUSE: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Anchor {
    lsn: Lsn,
    at: Instant,
    rate: f64,
}

#[derive(Debug, Default)]
struct State {
    limit: Option<WriterLimit>,
    anchor: Option<Anchor>,
}

/// The shared timeline (see the module doc).
#[derive(Debug, Default)]
pub struct Pacer {
    /// Whether a limit is set: writers check this without the mutex.
    active: AtomicBool,
    /// An age at or under which a writer needs no mutex: the limit's
    /// free-running age while no timeline is anchored, else 0. (Under
    /// `steady` the limit is always set, so without this every commit
    /// would take the mutex.)
    free_below: AtomicU64,
    state: Mutex<State>,
}

impl Pacer {
    /// Set (or clear, with `None`) the writers' limit. The timeline stays:
    /// the next [`delay`](Pacer::delay) re-anchors it at the new rate.
    pub fn set_limit(&self, limit: Option<WriterLimit>) {
        let limit = limit.filter(|l| l.base_rate.is_finite() && l.base_rate >= 0.0);
        if limit.is_none() && !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock();
        self.active.store(limit.is_some(), Ordering::Release);
        if limit.is_none() {
            st.anchor = None;
        }
        st.limit = limit;
        self.publish_free_below(&st);
    }

    /// Set `free_below` from the state (called holding its mutex).
    fn publish_free_below(&self, st: &State) {
        let free = match (&st.anchor, st.limit) {
            (None, Some(l)) => l.freerun,
            _ => 0,
        };
        self.free_below.store(free, Ordering::Release);
    }

    /// Whether a limit is set (one atomic load: callers skip reading the
    /// LSN, the age and the clock when it is not).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// How long a writer must pause at `now` when the log has reached
    /// `lsn` with checkpoint age `age`: zero without a limit, below its
    /// free-running age, or when the pause would be under [`MIN_PAUSE`];
    /// at most [`MAX_PAUSE`].
    pub fn delay(&self, lsn: Lsn, age: u64, now: Instant) -> Duration {
        if !self.active.load(Ordering::Acquire) || age <= self.free_below.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let mut st = self.state.lock();
        let Some(rate) = st.limit.and_then(|l| l.rate_at(age)) else {
            st.anchor = None;
            self.publish_free_below(&st);
            return Duration::ZERO;
        };
        let floor = now.checked_sub(MAX_BURST).unwrap_or(now);
        let a = match st.anchor.take() {
            None => Anchor { lsn, at: now, rate },
            Some(a) if a.rate == rate => a,
            // Re-anchor where the old timeline stood, with at most
            // MAX_BURST of credit and MAX_DEBT of debt: debt is kept in
            // time, and time owed at a tiny rate (near H) would otherwise
            // hold writers for minutes once the rate is high again.
            Some(a) => Anchor {
                lsn,
                at: due(&a, lsn).clamp(floor, now + MAX_DEBT),
                rate,
            },
        };
        self.free_below.store(0, Ordering::Release);
        let a = st.anchor.insert(a);
        let due_at = due(a, lsn);
        if due_at < floor {
            // Idle for a while: keep at most MAX_BURST of credit.
            a.lsn = lsn;
            a.at = floor;
            return Duration::ZERO;
        }
        let d = due_at.saturating_duration_since(now);
        if d < MIN_PAUSE {
            Duration::ZERO
        } else {
            d.min(MAX_PAUSE)
        }
    }
}

/// The instant at which `lsn` is due on `a`'s timeline.
fn due(a: &Anchor, lsn: Lsn) -> Instant {
    let bytes = lsn.saturating_sub(a.lsn) as f64;
    a.at + Duration::from_secs_f64(bytes / a.rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The age at which `flat(rate)` allows exactly `rate`.
    const AT_S: u64 = 1000;

    fn flat(rate: f64) -> Option<WriterLimit> {
        Some(WriterLimit {
            base_rate: rate,
            freerun: 500,
            setpoint: AT_S,
            hard: 2000,
        })
    }

    #[test]
    fn no_limit_no_pause() {
        let p = Pacer::default();
        let t = Instant::now();
        assert_eq!(p.delay(1 << 30, AT_S, t), Duration::ZERO);
    }

    #[test]
    fn writers_ahead_of_the_rate_pause_until_their_lsn_is_due() {
        let p = Pacer::default();
        let t = Instant::now();
        // 1 MB/s; the timeline starts at the first writer (LSN 0, t).
        p.set_limit(flat(1_000_000.0));
        assert_eq!(p.delay(0, AT_S, t), Duration::ZERO);
        // 50 KB after 10 ms: due at 50 ms, 40 ms to go.
        let d = p.delay(50_000, AT_S, t + Duration::from_millis(10));
        assert_eq!(d.as_millis(), 40);
        // Under MIN_PAUSE: no pause, the debt stays.
        assert_eq!(
            p.delay(50_000, AT_S, t + Duration::from_micros(49_500)),
            Duration::ZERO
        );
        // Far ahead: capped.
        assert_eq!(p.delay(10_000_000, AT_S, t), MAX_PAUSE);
        // Behind the rate: no pause.
        assert_eq!(
            p.delay(50_000, AT_S, t + Duration::from_millis(60)),
            Duration::ZERO
        );
    }

    #[test]
    fn the_rate_follows_the_age_each_writer_sees() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(flat(1_000_000.0));
        // Below the free-running age: no limit at all.
        assert_eq!(p.delay(1 << 30, 400, t), Duration::ZERO);
        // At the setpoint, 1 MB/s: 20 KB is due after 20 ms.
        assert_eq!(p.delay(0, AT_S, t), Duration::ZERO);
        assert_eq!(p.delay(20_000, AT_S, t).as_millis(), 20);
        // At the hard level the rate is 1 byte/s: the debt so far stays
        // (20 ms), and any more redo is due far out: the full pause.
        assert_eq!(p.delay(20_000, 2000, t).as_millis(), 20);
        assert_eq!(p.delay(20_001, 2000, t), MAX_PAUSE);
        // Back below the free-running age: the debt is dropped.
        assert_eq!(p.delay(20_002, 100, t), Duration::ZERO);
        assert_eq!(p.delay(20_003, AT_S, t), Duration::ZERO);
    }

    #[test]
    fn debt_run_up_at_the_hard_level_is_forgiven_beyond_max_debt() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(flat(1_000_000.0));
        assert_eq!(p.delay(0, AT_S, t), Duration::ZERO);
        // At H (1 byte/s) 1 MB of redo is owed for 11 days.
        assert_eq!(p.delay(1, 2000, t), Duration::ZERO);
        assert_eq!(p.delay(1_000_000, 2000, t), MAX_PAUSE);
        // The age comes down: at most MAX_DEBT of it is still owed.
        let later = t + Duration::from_millis(50);
        assert_eq!(p.delay(1_000_000, AT_S, later), MAX_PAUSE);
        let d = p.delay(1_000_000, AT_S, later + MAX_PAUSE);
        assert!(d <= MAX_DEBT.saturating_sub(MAX_PAUSE), "{d:?}");
    }

    #[test]
    fn idle_time_banks_at_most_max_burst() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(flat(1_000_000.0));
        assert_eq!(p.delay(0, AT_S, t), Duration::ZERO);
        // 10 s idle, then 3 MB at once: only 100 ms of credit, so due
        // 2.9 s out.
        let later = t + Duration::from_secs(10);
        assert_eq!(p.delay(0, AT_S, later), Duration::ZERO);
        let d = p.delay(3_000_000, AT_S, later);
        assert_eq!(d, MAX_PAUSE);
        let p2 = Pacer::default();
        p2.set_limit(flat(1_000_000.0));
        assert_eq!(p2.delay(0, AT_S, t), Duration::ZERO);
        assert_eq!(p2.delay(0, AT_S, later), Duration::ZERO);
        // 90 KB within the banked 100 ms: free.
        assert_eq!(p2.delay(90_000, AT_S, later), Duration::ZERO);
    }

    #[test]
    fn clearing_the_limit_ends_pauses() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_limit(flat(1000.0));
        assert_eq!(p.delay(0, AT_S, t), Duration::ZERO);
        assert!(p.delay(1_000_000, AT_S, t) > Duration::ZERO);
        p.set_limit(None);
        assert_eq!(p.delay(2_000_000, AT_S, t), Duration::ZERO);
    }
}
