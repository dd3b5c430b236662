//! Writer pacing: the policy's "writer pauses" carried out.
//!
//! A policy may cap the rate at which writers together generate redo
//! ([`FlushTargets::writer_log_rate`](super::FlushTargets)). The pacer turns
//! that cap into pauses without estimating what each commit will log: it
//! anchors a timeline at (LSN, instant) when the rate is set, and a writer
//! about to commit, holding no latch, sleeps until the instant at which the
//! current LSN is due at that rate. Every writer waits for the same due
//! time, so the cap holds for all of them together, and unused time is
//! banked for at most [`MAX_BURST`] so an idle spell does not turn into a
//! burst. `classic` never sets a rate; Keel's own policy will.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::page::Lsn;

/// Most credit an idle spell leaves for a burst.
pub const MAX_BURST: Duration = Duration::from_secs(1);
/// Longest single pause: a writer re-checks at least this often.
pub const MAX_PAUSE: Duration = Duration::from_millis(100);
/// Pauses shorter than this are not taken (the debt stays on the timeline).
pub const MIN_PAUSE: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Anchor {
    lsn: Lsn,
    at: Instant,
    rate: f64,
}

/// The shared timeline (see the module doc).
#[derive(Debug, Default)]
pub struct Pacer {
    /// Whether a rate is set: writers check this without the mutex.
    active: AtomicBool,
    anchor: Mutex<Option<Anchor>>,
}

impl Pacer {
    /// Set (or clear, with `None` or a non-positive rate) the redo rate
    /// writers may produce, in bytes per second, from `lsn` at `now`.
    pub fn set_rate(&self, rate: Option<f64>, lsn: Lsn, now: Instant) {
        let rate = rate.filter(|r| r.is_finite() && *r > 0.0);
        if rate.is_none() && !self.active.load(Ordering::Acquire) {
            return;
        }
        let mut a = self.anchor.lock();
        self.active.store(rate.is_some(), Ordering::Release);
        match rate {
            None => *a = None,
            Some(r) if a.as_ref().is_some_and(|x| x.rate == r) => {}
            Some(r) => {
                // Re-anchor where the old timeline stood, so a rate change
                // neither forgives debt nor banks more than MAX_BURST.
                let at = match a.as_ref() {
                    Some(x) => due(x, lsn).max(now.checked_sub(MAX_BURST).unwrap_or(now)),
                    None => now,
                };
                *a = Some(Anchor { lsn, at, rate: r });
            }
        }
    }

    /// Whether a rate is set (one atomic load: callers skip reading the
    /// LSN and the clock when it is not).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// How long a writer must pause at `now` when the log has reached
    /// `lsn`: zero without a rate, or when the pause would be under
    /// [`MIN_PAUSE`]; at most [`MAX_PAUSE`].
    pub fn delay(&self, lsn: Lsn, now: Instant) -> Duration {
        if !self.active.load(Ordering::Acquire) {
            return Duration::ZERO;
        }
        let mut guard = self.anchor.lock();
        let Some(a) = guard.as_mut() else {
            return Duration::ZERO;
        };
        let due_at = due(a, lsn);
        if due_at + MAX_BURST < now {
            // Idle for a while: keep at most MAX_BURST of credit.
            a.lsn = lsn;
            a.at = now.checked_sub(MAX_BURST).unwrap_or(now);
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

    #[test]
    fn no_rate_no_pause() {
        let p = Pacer::default();
        let t = Instant::now();
        assert_eq!(p.delay(1 << 30, t), Duration::ZERO);
    }

    #[test]
    fn writers_ahead_of_the_rate_pause_until_their_lsn_is_due() {
        let p = Pacer::default();
        let t = Instant::now();
        // 1 MB/s; 50 KB after 10 ms: due at 50 ms, 40 ms to go.
        p.set_rate(Some(1_000_000.0), 0, t);
        let d = p.delay(50_000, t + Duration::from_millis(10));
        assert_eq!(d.as_millis(), 40);
        // Under MIN_PAUSE: no pause, the debt stays.
        assert_eq!(
            p.delay(50_000, t + Duration::from_micros(49_500)),
            Duration::ZERO
        );
        // Far ahead: capped.
        assert_eq!(p.delay(10_000_000, t), MAX_PAUSE);
        // Behind the rate: no pause.
        assert_eq!(
            p.delay(50_000, t + Duration::from_millis(60)),
            Duration::ZERO
        );
    }

    #[test]
    fn idle_time_banks_at_most_max_burst() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_rate(Some(1_000_000.0), 0, t);
        // 10 s idle, then 3 MB at once: only 1 s of credit, so due 2 s out.
        let later = t + Duration::from_secs(10);
        assert_eq!(p.delay(0, later), Duration::ZERO);
        let d = p.delay(3_000_000, later);
        assert_eq!(d, MAX_PAUSE);
        let p2 = Pacer::default();
        p2.set_rate(Some(1_000_000.0), 0, t);
        assert_eq!(p2.delay(0, later), Duration::ZERO);
        // 900 KB within the banked second: free.
        assert_eq!(p2.delay(900_000, later), Duration::ZERO);
    }

    #[test]
    fn clearing_the_rate_ends_pauses() {
        let p = Pacer::default();
        let t = Instant::now();
        p.set_rate(Some(1000.0), 0, t);
        assert!(p.delay(1_000_000, t) > Duration::ZERO);
        p.set_rate(None, 1_000_000, t);
        assert_eq!(p.delay(2_000_000, t), Duration::ZERO);
    }
}
