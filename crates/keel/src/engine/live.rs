//! Options that change while the database runs (`Db::set_option`, InnoDB's
//! `SET GLOBAL`): the ones in [`RUNTIME_OPTIONS`].
//!
//! # Who reads what
//! [`Live::current`] holds the options in effect: the ones given at open,
//! with every change since. Only callers that want the whole set read it
//! (`Db::options`, the status report, a bulk load reading `fill_factor`
//! once at its start); the paths that run per commit, per
//! lock wait or per cleaner round read their option from an atomic copy
//! (`flush_log_at_trx_commit`, `lock_wait_timeout`, `transaction_isolation`, the flush-list sample
//! size here; `flush_neighbors` in `WriteBack`), so a change costs them
//! nothing and they never wait for a setter. The policy's knobs and the
//! policy itself go to the page-cleaner coordinator as a
//! [`PolicyUpdate`], which it applies at the start of its next round.
//!
//! # A change, step by step (`Engine::set_option`)
//! 1. The caller (`Db::set_option`) holds the database's cleaners mutex, so
//!    changes are made one at a time and none races `Db::close`.
//! 2. The key is checked (unknown: `Error::Config`; restart-only:
//!    `Error::RestartRequired`), the new value parsed and the whole set
//!    validated, holding `current` for writing. A failure here changes
//!    nothing.
//! 3. `device` is handed to the device model, which may still refuse it
//!    (`device = unlimited` at open); nothing has changed before that.
//! 4. The atomic copies are stored, the policy update is pushed, and
//!    `current` is replaced. Readers of an atomic see the new value at
//!    their next read; a commit, lock wait or batch under way finishes
//!    under the value it read.
//!
//! # Waiting
//! Nothing waits. The setter holds, in this order, the cleaners mutex,
//! `current` (write), for a moment the device model's lock, the
//! coordinator's update queue and its wake-up mutex. The coordinator takes
//! the queue and the wake-up mutex each alone, and reads only atomics, so
//! it never waits for a setter; `Db::close` takes the cleaners mutex and
//! joins the cleaners, which need none of the setter's locks. A setter
//! does not wait for its change to take effect: the coordinator applies a
//! policy update within one round (it is woken for it), and a round under
//! way finishes under the policy it began with. Switching away from
//! `steady` clears the writers' pacing in that first round
//! (`FlushTargets::writer_limit` is `None` under `classic`), which wakes
//! any paused writer within a few milliseconds (`flush::pacer`).

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

use super::Engine;
use crate::config::{Isolation, Options, CLASSIC_ONLY, RUNTIME_OPTIONS};
use crate::error::{Error, Result};
use crate::flush::{policy, PolicyUpdate};

/// The options in effect, and hot copies of the ones read per operation.
pub(crate) struct Live {
    current: RwLock<Options>,
    flush_log_at_trx_commit: AtomicU8,
    lock_wait_timeout_us: AtomicU64,
    /// `transaction_isolation`: 0 = REPEATABLE-READ, 1 = READ-COMMITTED.
    isolation: AtomicU8,
    flush_list_sample: AtomicUsize,
}

impl Live {
    /// The options given at open, in effect.
    pub(crate) fn new(opts: &Options) -> Live {
        let live = Live {
            current: RwLock::new(opts.clone()),
            flush_log_at_trx_commit: AtomicU8::new(0),
            lock_wait_timeout_us: AtomicU64::new(0),
            isolation: AtomicU8::new(0),
            flush_list_sample: AtomicUsize::new(0),
        };
        live.publish(opts);
        live
    }

    /// Store the atomic copies of `o`.
    fn publish(&self, o: &Options) {
        self.flush_log_at_trx_commit
            .store(o.flush_log_at_trx_commit, Ordering::Relaxed);
        let us = Duration::from_secs_f64(o.lock_wait_timeout).as_micros();
        self.lock_wait_timeout_us
            .store(u64::try_from(us).unwrap_or(u64::MAX), Ordering::Relaxed);
        let iso = match o.transaction_isolation {
            Isolation::RepeatableRead => 0,
            Isolation::ReadCommitted => 1,
        };
        self.isolation.store(iso, Ordering::Relaxed);
        // The classic policy caps pages_for_lsn at 2 × io_capacity_max after
        // dividing the count by 3: it never needs more entries than this.
        let sample = (6 * o.effective_io_capacity_max() as usize).clamp(1024, 1 << 16);
        self.flush_list_sample.store(sample, Ordering::Relaxed);
    }

    /// The options in effect now.
    pub(crate) fn current(&self) -> Options {
        self.current.read().clone()
    }

    /// `flush_log_at_trx_commit` now.
    pub(crate) fn flush_log_at_trx_commit(&self) -> u8 {
        self.flush_log_at_trx_commit.load(Ordering::Relaxed)
    }

    /// `lock_wait_timeout` now.
    pub(crate) fn lock_wait_timeout(&self) -> Duration {
        Duration::from_micros(self.lock_wait_timeout_us.load(Ordering::Relaxed))
    }

    /// `transaction_isolation` now (for transactions begun from now on).
    pub(crate) fn isolation(&self) -> Isolation {
        match self.isolation.load(Ordering::Relaxed) {
            0 => Isolation::RepeatableRead,
            _ => Isolation::ReadCommitted,
        }
    }

    /// How many flush-list entries per instance a cleaner's snapshot
    /// samples (from `io_capacity_max` now).
    pub(crate) fn flush_list_sample(&self) -> usize {
        self.flush_list_sample.load(Ordering::Relaxed)
    }
}

impl Engine {
    /// Change `key` to `value` while the database runs (module doc, "A
    /// change, step by step"); `update_policy` carries a policy update to
    /// the page cleaners. The caller holds the cleaners mutex.
    pub(crate) fn set_option(
        &self,
        key: &str,
        value: &str,
        update_policy: &dyn Fn(PolicyUpdate),
    ) -> Result<()> {
        if !RUNTIME_OPTIONS.contains(&key) && Options::restart_only().iter().any(|k| k == key) {
            return Err(Error::RestartRequired {
                key: key.to_string(),
            });
        }
        let mut current = self.live.current.write();
        let mut new = current.clone();
        new.set(key, value)?;
        new.validate().map_err(|e| match e {
            // Another option's bound, e.g. io_capacity above io_capacity_max.
            Error::Config { key: other, reason } if other != key => Error::config(
                key,
                format!("`{key} = {value}` conflicts with `{other}`: {reason}"),
            ),
            e => e,
        })?;
        if new == *current {
            return Ok(());
        }
        if key == "device" {
            self.set_device(&new.device)?;
        }
        self.live.publish(&new);
        self.wb.set_flush_neighbors(new.flush_neighbors);
        if new.flush_policy != current.flush_policy {
            update_policy(PolicyUpdate::Replace(policy::from_options(&new)));
        } else if CLASSIC_ONLY.contains(&key) {
            update_policy(PolicyUpdate::Retune(new.clone()));
        }
        let old = current
            .entries()
            .into_iter()
            .find(|(k, _)| k == key)
            .map_or_else(String::new, |(_, v)| v);
        log::info!("option {key} changed at run time: {old} -> {value}");
        *current = new;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use crate::config::{FlushPolicyName, Options};
    use crate::flush::pacer::MAX_PAUSE;
    use crate::flush::policy::{FlushPolicy, FlushTargets, Snapshot, WriterLimit};
    use crate::flush::PolicyUpdate;
    use crate::Db;

    fn opts(policy: FlushPolicyName) -> Options {
        Options {
            page_size: 4096,
            buffer_pool_size: 4 << 20,
            flush_method: "nosync".parse().unwrap(),
            data_files: 2,
            flush_policy: policy,
            ..Options::default()
        }
    }

    /// Poll `cond` every few milliseconds for up to ten seconds.
    fn eventually(mut cond: impl FnMut() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if cond() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        cond()
    }

    /// A `steady` that paces at the hard level from the first byte of age
    /// (allowed rate 1 byte/s): every writer after the first two is held.
    struct HoldingWriters;

    impl FlushPolicy for HoldingWriters {
        fn decide(&mut self, _: &Snapshot) -> FlushTargets {
            FlushTargets {
                writer_limit: Some(WriterLimit {
                    base_rate: 1.0,
                    freerun: 0,
                    setpoint: 1,
                    hard: 2,
                    lump_ceiling: f64::INFINITY,
                }),
                sleep: Duration::from_millis(10),
                full_round: true,
                ..FlushTargets::default()
            }
        }
        fn name(&self) -> FlushPolicyName {
            FlushPolicyName::Steady
        }
    }

    /// The coordinator held in the middle of a round: `set_option` returns
    /// without waiting for it, the round finishes under the old policy,
    /// and the next one follows the new policy.
    #[test]
    fn a_switch_during_a_round_waits_for_nothing_and_applies_at_the_next_round() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts(FlushPolicyName::Classic)).unwrap();
        assert!(eventually(|| db.flush_decision().steady.is_none()
            && db.metrics().get("buffer_flush_cleaner_rounds").unwrap() > 0));
        let hold = db.failpoint("cleaner.tick");
        assert!(
            hold.wait_held(Duration::from_secs(10)),
            "no round reached the tick"
        );
        // The coordinator is held, so the call cannot have waited for it.
        db.set_option("flush_policy", "steady").unwrap();
        assert_eq!(db.options().flush_policy, FlushPolicyName::Steady);
        let rounds = db.metrics().get("buffer_flush_cleaner_rounds").unwrap();
        assert!(db.flush_decision().steady.is_none(), "applied mid-round");
        hold.release();
        assert!(
            eventually(|| db.flush_decision().steady.is_some()),
            "the next round did not follow steady"
        );
        assert!(db.metrics().get("buffer_flush_cleaner_rounds").unwrap() > rounds);
        db.close().unwrap();
    }

    /// Writers held by `steady`'s pacing go on once the policy is switched
    /// to `classic`, which sets no limit: the switch's first round clears
    /// it, and the pacer wakes them.
    #[test]
    fn leaving_steady_frees_the_writers_it_paced() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), opts(FlushPolicyName::Steady)).unwrap();
        let t = db.create_table("t").unwrap();
        // A writer held past this gets `LogOverloaded` (and the test fails)
        // rather than wait for the default ten minutes.
        db.inner.engine.adm.set_wait_timeout(Duration::from_secs(5));
        db.inner.cleaners.lock().as_ref().unwrap().update_policy(
            PolicyUpdate::Replace(Box::new(HoldingWriters)),
            &db.inner.engine.wb,
        );
        let committed = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let mut tx = db.begin();
                    if let Err(e) = tx
                        .put(&t, &i.to_be_bytes(), b"v")
                        .and_then(|()| tx.commit())
                    {
                        stop.store(true, Ordering::Relaxed);
                        panic!("transaction {i} failed: {e}");
                    }
                    committed.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
            // Held: no commit for three of the pacer's longest pauses.
            let mut last = (u64::MAX, Instant::now());
            let held = eventually(|| {
                let now = committed.load(Ordering::Relaxed);
                if now != last.0 {
                    last = (now, Instant::now());
                }
                last.1.elapsed() > 3 * MAX_PAUSE
            });
            if !held {
                stop.store(true, Ordering::Relaxed);
                panic!("the pacing policy never held the writer");
            }
            let before = committed.load(Ordering::Relaxed);
            db.set_option("flush_policy", "classic").unwrap();
            let freed = eventually(|| committed.load(Ordering::Relaxed) >= before + 20);
            stop.store(true, Ordering::Relaxed);
            assert!(
                freed,
                "the writer stayed paused after the switch to classic"
            );
        });
        drop(t);
        db.close().unwrap();
    }
}
