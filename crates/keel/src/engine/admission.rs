//! Admission: who may append how much redo, and where writers wait.
//!
//! # The protocol
//!
//! Every redo append is covered by a *reservation* taken beforehand by a
//! thread that holds **no latch and no log mutex**; that is the only place
//! any thread waits for log space. A reservation of `n` bytes is granted
//! when `age + reserved + n ≤ limit`, with `age` the checkpoint age and
//! `reserved` the bytes granted and not yet appended or given back:
//!
//! - commits, mini-transactions and DDL use the free-check limit `L`
//!   (InnoDB's: 95 % of the writers' capacity);
//! - the checkpointer's relocation of in-flight commit records (see
//!   `redo::inflight`) may use the gap up to `H`, the log's capacity less
//!   one page.
//!
//! An appender first appends (the age grows), then gives its reservation
//! back (`reserved` shrinks by the same amount), and a grant reads
//! `reserved` before the age; so `age + reserved` is never under-counted,
//! and `age + reserved ≤ L` (`≤ H` during a relocation) holds at all times.
//! `H` is below the log's capacity, so the log never has to wait for space:
//! the write-out in `redo` only writes.
//!
//! With InnoDB's margins the gap `H − L` is about 8 % of the log, so `R`
//! is about 1/20 of it (5 MB of write set for the default 96 MiB log).
//!
//! What a thread reserves, and when:
//! - **A commit** reserves its record group, its "applied" marker and its
//!   first operation's estimate (below) before anything is logged, holding
//!   nothing (so a one-row commit seldom waits once its record is logged).
//!   Its record also counts against the *record limit* `R`: the in-flight
//!   records together never exceed `R`,
//!   so one relocation group (at most about `1.5 R`) always fits in the gap
//!   `H − L`. A write set larger than `R` is refused at once with
//!   [`Error::TransactionTooLarge`], before anything is logged.
//! - **Each operation** of a commit reserves, before it latches anything,
//!   an estimate of what it will log, with the bound of what it may log
//!   (see "Estimates"); a B-tree split or merge, which holds no latch at
//!   the moment it discovers it must change more pages, reserves the bound
//!   for its whole path first (see [`crate::mtr::mtr_bound`]). Unused bytes
//!   are given back after the op. A mini-transaction checks its exact size
//!   against what its thread holds before it appends; a shortfall beyond
//!   the bound is a broken bound and fails the op without logging
//!   anything. A budget of more than `L` could never be granted:
//!   [`Budget::ensure`] refuses it at once, and `Engine::open` refuses a
//!   log that cannot take [`MIN_MTR_PAGES`] pages in one mtr.
//!
//! # Estimates
//!
//! The bound of a mini-transaction changing one page is a page's worth
//! (16 KiB with the default pages; an undo append that may start a page,
//! four), but a row's change logs a few hundred bytes. Reserved whole, the
//! bounds of the operations under way on `disaster-55` (32 threads, a
//! 4 MiB log) came to 150-230 KB at once, 4-6 % of `L`: `steady` kept
//! that much below `L` unused, and still a burst of them met the free
//! check (nine waits in one run of 150 s, each a 48 or 64 KiB bound).
//! So the common operations (a leaf's put or delete, an undo append,
//! purge's mark on an undo page) reserve an estimate
//! ([`crate::mtr::estimate`]: the bytes they change, a few header fields
//! and a sixteenth of a page), through [`Budget::with_estimate`]:
//! - the mini-transaction's commit, holding its latches, finds its exact
//!   size; if that is over the estimate it takes the rest with
//!   `try_reserve`, which never waits, under the same rule
//!   `age + reserved + n ≤ L`;
//! - if the log has no room for it, the commit fails before appending,
//!   and every page goes back as it was (`mtr`, "All or nothing"); the
//!   operation returns the error with its latches released, and
//!   `with_estimate` waits for the whole bound, holding nothing, and runs
//!   the operation again, which then cannot fall short;
//! - an operation so retried changed nothing the first time: its pages
//!   were put back, an undo append moves its rseg's tail only once logged,
//!   and purge's callbacks run before its estimate is taken.
//!
//! The invariant `age + reserved ≤ L` is kept either way; what changes is
//! that a thread may hold less than its bound while it changes pages, and
//! may then have to undo and wait. Counted: `log_estimate_top_ups`,
//! `log_estimate_retries`.
//!
//! # Why a waiting writer is eventually admitted
//!
//! A waiter holds no latch, and no reservation but its commit's 28-byte
//! marker and what its operation's budget held before it asked for more
//! (an estimate, or a bound: bounded per thread). The page
//! cleaners never wait for log space (the write-out never waits), so they
//! can always flush, and while writers wait their policy flushes the age
//! down to `L` less what is reserved and wanted (`reserved_and_wanted`),
//! even below the level where it would otherwise let pages age; the
//! checkpoint then advances to the oldest unwritten
//! page change or the oldest in-flight pin, and pins can always be moved by
//! a relocation (its space is set aside in `H − L`); the pin of a commit
//! that finished and whose marker is not durable yet (`redo::inflight`)
//! is released by a log sync, which a checkpoint it holds back makes
//! itself (`Engine::checkpoint`). Reservations held by
//! threads running an operation are given back when the op's
//! mini-transactions are logged, which needs no log space wait. So the age
//! falls until the waiter fits. A writer polls every 100 µs (as InnoDB's
//! `log_free_check`) and wakes the cleaners every millisecond.
//!
//! # Writers paused by the pacer
//! Above the policy's free-running age a transaction pauses before its
//! first row lock (`Admission::pace`), holding no latch, no row lock and no
//! reservation. Nothing wakes it but its own timer: it sleeps in slices of
//! [`PACE_RECHECK`] and looks again (keeping its place in the writers'
//! line) once its pause is over, the checkpoint has moved, or the policy
//! has set a new limit (`Pacer::generation`); it never waits for another
//! thread, so it cannot hold up the cleaners that lower the age. A paused
//! writer ends as a free-check waiter does (below), with nothing logged.
//!
//! # Closing
//!
//! `Db::close` sets `closing`, waits until no commit is counted in
//! `applying` (`Engine::drain_commits`), then stops the page cleaners,
//! which a commit may need (an operation may wait for log space). A commit
//! is counted *before* it checks `closing` ([`Admission::admit_commit`]),
//! both `SeqCst`, so they cannot miss each other: the commit sees
//! `closing` and is refused with nothing logged, or closing sees the
//! commit and waits for its ticket to end, the cleaners running (one still
//! waiting for its record's log space sees `closing` at its next poll and
//! leaves). Counted
//! once logged, as it was, a commit past the check could log after closing
//! found nobody applying, then wait for log space with the cleaners gone,
//! a minute per try for ten minutes, then poison the engine (failpoint
//! `commit.admitted`, `tests/close_with_live_clones.rs`).
//!
//! # What a wait leaves behind
//!
//! A wait ends with an error, and the caller's reservations untouched, when
//! the cleaners fail (their message), the engine is poisoned, the database
//! closes (new commits only), or after [`LOG_WAIT_TIMEOUT`]. A commit
//! waiting for its record's space has logged nothing; an operation of a
//! commit already logged is retried by the commit (see `txn::commit`).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Poison, Result};
use crate::flush::pacer::Pacer;
use crate::flush::WriteBack;
use crate::metrics::Metrics;
use crate::redo::format::{GROUP_HDR, MAX_RANGE, PAGE_RECORD_HDR_MAX, RANGE_HDR_MAX};
use crate::redo::Log;
use crate::space::Tablespace;

/// Most bytes the record of one page's changes can take in an mtr group.
///
/// A record is a header of at most 14 bytes and, per byte range, an
/// entry header of at most 6 bytes and the range's bytes. Ranges are
/// disjoint, never cover the 4 checksum bytes, and are at least 9
/// unchanged bytes apart (closer ones are merged), so with `n ≥ 1` ranges
/// covering `t` bytes, `t + 9(n − 1) ≤ ps − 4` and the entries take
/// `6n + t ≤ t + 9(n − 1) + 9 − 3n ≤ ps + 2`; ranges longer than
/// `MAX_RANGE` are cut, 6 more bytes per cut. A range is logged as a move
/// and bytes only where that is shorter with every entry header at its
/// largest (`redo::format::diff_changes`), so moves never lengthen it.
/// Checked by property tests in `mtr`.
pub(crate) const fn page_record_max(page_size: usize) -> u64 {
    (PAGE_RECORD_HDR_MAX + page_size + RANGE_HDR_MAX * (page_size / MAX_RANGE + 1)) as u64
}

/// Most bytes one mini-transaction changing at most `pages` pages can
/// append.
pub(crate) const fn mtr_bound(pages: usize, page_size: usize) -> u64 {
    GROUP_HDR as u64 + pages as u64 * page_record_max(page_size)
}

/// What a mini-transaction changing `bytes` bytes of one page usually logs:
/// those bytes, a few header fields and a sixteenth of the page for slots
/// moved. Not a bound: reserved by [`Budget::with_estimate`], which tops up
/// at commit what a larger change needs (see "Estimates" in the module
/// doc).
pub(crate) const fn estimate(page_size: usize, bytes: usize) -> u64 {
    (GROUP_HDR + 64 + bytes + page_size / 16) as u64
}

/// Most pages one mini-transaction may change under the free-check limit
/// `free_limit`: the most whose [`mtr_bound`] a writer can ever reserve.
pub(crate) const fn max_mtr_pages(free_limit: u64, page_size: usize) -> usize {
    (free_limit.saturating_sub(GROUP_HDR as u64) / page_record_max(page_size)) as usize
}

/// Fewest pages one mini-transaction must be able to change for every
/// database, whatever it holds, to open and work: the root split of a
/// two-level tree (`btree::pessimistic_pages(1)`, 6 pages), the first leaf
/// write of a bulk load, which grows its hidden tree
/// (`btree::bulk::leaf_write_pages(0)`, 4), and a load's begin, publish
/// and last drop step (3). A load builds its hidden tree only as deep as
/// its leaf writes fit the log, and every tree it can build can be dropped
/// in steps that fit the same log (`btree::bulk::drop_step_pages`). Both
/// are checked by tests in `btree`; `Engine::open` checks the log.
pub(crate) const MIN_MTR_PAGES: usize = 6;

/// How long a writer may wait for log space before it gets `LogOverloaded`.
pub(crate) const LOG_WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a waiting writer looks at the checkpoint age.
const FREE_CHECK_POLL: Duration = Duration::from_micros(100);
/// How often a paused writer looks whether the checkpoint has moved (see
/// `Admission::sleep_until_due_or_moved`).
const PACE_RECHECK: Duration = Duration::from_millis(5);

/// Whether a wait is for new work (refused once the database closes) or
/// for an operation of a commit already logged (which must finish).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Purpose {
    /// A new commit or DDL statement.
    New,
    /// An operation of a commit whose record is logged.
    InFlight,
}

/// Log-space admission for one engine (see the module doc).
pub(crate) struct Admission {
    log: Arc<Log>,
    wb: Arc<WriteBack>,
    space: Arc<Tablespace>,
    metrics: Arc<Metrics>,
    /// `L`: the free-check limit on `age + reserved`.
    pub free_limit: u64,
    /// `H`: the limit relocations may use.
    pub hard_limit: u64,
    /// `R`: most bytes of commit records in flight at once.
    pub record_limit: u64,
    reserved: AtomicU64,
    /// The most `reserved` has been since [`Admission::take_reserved_peak`]
    /// last read it: a writer's reservation can come and go between two
    /// ticks of the policy, which a sample of `reserved` misses.
    reserved_peak: AtomicU64,
    /// The largest single reservation under the free-check limit asked
    /// for (granted or not) since [`Admission::take_reserved_peak`] last
    /// read it.
    largest_need: AtomicU64,
    /// Bytes of commit records admitted and not yet finished.
    records: AtomicU64,
    /// Bytes waiting writers need, and how many wait.
    waiting_need: AtomicU64,
    waiters: AtomicUsize,
    /// New commits are refused (the database is closing).
    closing: AtomicBool,
    /// Commits already logged stop retrying (closing gave up on them).
    abandon: AtomicBool,
    /// Commits from their admission (before their record is logged) to
    /// the end of their ticket: what closing drains (see "Closing").
    pub(crate) applying: AtomicUsize,
    /// Set when a logged commit could not be applied: memory no longer
    /// matches an atomic history, so writes are refused until a restart
    /// lets recovery finish the commit from the log.
    pub(crate) poison: Poison,
    /// The policy's limit on the writers' redo rate, as pauses.
    pub(crate) pacer: Pacer,
    /// [`LOG_WAIT_TIMEOUT`], in µs (unit tests shorten it).
    wait_timeout_us: AtomicU64,
    /// Set for a read-only open (the database's directory, for the
    /// error): every reservation is refused, so no mini-transaction starts.
    read_only: std::sync::OnceLock<std::path::PathBuf>,
}

impl Admission {
    pub fn new(
        log: Arc<Log>,
        wb: Arc<WriteBack>,
        space: Arc<Tablespace>,
        metrics: Arc<Metrics>,
        free_limit: u64,
        hard_limit: u64,
    ) -> Admission {
        // A relocation group holds at most 24 + 1.52 R bytes: each record
        // is at least 23 bytes and costs 12 more in the group
        // (redo::inflight); two thirds of the gap leave room to spare.
        let record_limit = hard_limit.saturating_sub(free_limit).saturating_sub(64) / 3 * 2;
        Admission {
            log,
            wb,
            space,
            metrics,
            free_limit,
            hard_limit,
            record_limit,
            reserved: AtomicU64::new(0),
            reserved_peak: AtomicU64::new(0),
            largest_need: AtomicU64::new(0),
            records: AtomicU64::new(0),
            waiting_need: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            abandon: AtomicBool::new(false),
            applying: AtomicUsize::new(0),
            poison: Poison::default(),
            pacer: Pacer::default(),
            wait_timeout_us: AtomicU64::new(LOG_WAIT_TIMEOUT.as_micros() as u64),
            read_only: std::sync::OnceLock::new(),
        }
    }

    /// Refuse every write from now on: the database in `dir` is open
    /// read-only. Every mini-transaction reserves its redo before it
    /// changes a page, so a refusal here leaves nothing changed.
    pub fn refuse_writes(&self, dir: &std::path::Path) {
        let _ = self.read_only.set(dir.to_path_buf());
    }

    /// The error of a write to a read-only database, if it is one.
    pub fn check_read_only(&self) -> Result<()> {
        match self.read_only.get() {
            Some(dir) => Err(Error::ReadOnly(format!(
                "the database in {} is open read-only (option `read_only`): nothing may be \
                 written",
                dir.display()
            ))),
            None => Ok(()),
        }
    }

    /// How long a writer waits for log space, or is paced, before it gets
    /// `LogOverloaded`.
    fn wait_timeout(&self) -> Duration {
        Duration::from_micros(self.wait_timeout_us.load(Ordering::Relaxed))
    }

    /// Shorten [`LOG_WAIT_TIMEOUT`] (tests of what happens at the end of a
    /// wait).
    #[cfg(test)]
    pub(crate) fn set_wait_timeout(&self, d: Duration) {
        self.wait_timeout_us
            .store(d.as_micros() as u64, Ordering::Relaxed);
    }

    /// Most pages one mini-transaction may change: the most whose
    /// [`mtr_bound`] a thread can ever reserve (one that needs more would
    /// wait forever, so [`Budget::ensure`] refuses it at once).
    pub fn max_mtr_pages(&self, page_size: usize) -> usize {
        max_mtr_pages(self.free_limit, page_size)
    }

    /// Bytes reserved by admitted writers plus what waiting writers need.
    pub fn reserved_and_wanted(&self) -> u64 {
        self.reserved.load(Ordering::Acquire) + self.waiting_need.load(Ordering::Acquire)
    }

    /// The most bytes admitted writers held reserved at once since the
    /// last call (at least what they hold now), plus what waiting writers
    /// need now. For the page cleaners' coordinator, which alone calls it,
    /// once a tick: `steady` sizes the reserve under the free-check limit
    /// by it (`flush::policy::steady::levels`). Sampling `reserved` once a
    /// tick under-counted the peak by about a third on `disaster-55` at 32
    /// to 48 threads (each operation then reserved a page's worth, about
    /// 16 KB, and logged well under 1 KB), and writers met the free-check
    /// limit.
    ///
    /// Plus the largest single reservation asked for in that span: while
    /// the peak is held, one more request that large may come. Without
    /// it, the age held at `steady`'s hard level on `disaster-55` met the
    /// free check twice in a run of 150 s: about 100 KB reserved (the
    /// peak the reserve covered) and one more B-tree merge asking for its
    /// 48 KiB bound.
    pub fn take_reserved_peak(&self) -> u64 {
        let now = self.reserved.load(Ordering::Acquire);
        let peak = self.reserved_peak.swap(now, Ordering::AcqRel).max(now);
        let largest = self.largest_need.swap(0, Ordering::AcqRel);
        peak + largest + self.waiting_need.load(Ordering::Acquire)
    }

    /// Writers waiting for log space now.
    pub fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Acquire)
    }

    /// Refuse new commits from now on (the database is closing). Every
    /// commit admitted before is counted in `applying` (see "Closing").
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
    }

    /// Count a new commit in `applying` (until the guard is dropped), then
    /// refuse it if the database is closing (see "Closing").
    pub fn admit_commit(&self) -> Result<Applying<'_>> {
        let applying = self.applying();
        if self.closing.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        Ok(applying)
    }

    /// Count a commit in `applying` with no check (one recovery resumes,
    /// before the database can close).
    pub fn applying(&self) -> Applying<'_> {
        self.applying.fetch_add(1, Ordering::SeqCst);
        Applying(self)
    }

    /// Commits already logged stop retrying their operations.
    pub fn abandon_in_flight(&self) {
        self.abandon.store(true, Ordering::Release);
    }

    /// Whether logged commits should stop retrying.
    pub fn abandoned(&self) -> bool {
        self.abandon.load(Ordering::Acquire)
    }

    /// An error if writes are refused: closing (for new work), or poisoned.
    pub fn check_writable(&self, purpose: Purpose) -> Result<()> {
        self.check_read_only()?;
        if purpose == Purpose::New && self.closing.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.poison.check()?;
        self.space.check_poisoned()?;
        self.log.check_poisoned()
    }

    /// Grant `need` bytes if `age + reserved + need ≤ limit`.
    fn try_reserve(&self, need: u64, limit: u64) -> bool {
        if self.read_only.get().is_some() {
            return false;
        }
        // A plain read first: most requests are under the largest. Only
        // requests under `L` count: a relocation's use the gap above it.
        if limit == self.free_limit && need > self.largest_need.load(Ordering::Relaxed) {
            self.largest_need.fetch_max(need, Ordering::AcqRel);
        }
        let r = self
            .reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                // The age is read after `reserved` (module doc).
                let age = self.log.age();
                (age + r + need <= limit).then_some(r + need)
            });
        match r {
            Ok(before) => {
                let now = before + need;
                // A plain read first: most grants are under the peak.
                if now > self.reserved_peak.load(Ordering::Relaxed) {
                    self.reserved_peak.fetch_max(now, Ordering::AcqRel);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Give back `n` reserved bytes (after appending them, or unused).
    pub fn release(&self, n: u64) {
        if n > 0 {
            self.reserved.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Reserve `need` bytes under the free-check limit, waiting (holding no
    /// latch: the caller's promise) while the log is too full. The wait is
    /// counted as InnoDB counts its free-check waits.
    pub fn reserve(&self, need: u64, purpose: Purpose) -> Result<()> {
        self.check_writable(purpose)?;
        if self.try_reserve(need, self.free_limit) {
            return Ok(());
        }
        self.wait_until(need, purpose, || self.try_reserve(need, self.free_limit))
    }

    /// Admit a commit record of `record` bytes: reserve `need` bytes of log
    /// and count the record against the record limit, waiting for both.
    /// `on_wait` runs once, holding nothing, if the commit has to wait.
    pub fn reserve_commit(&self, record: u64, need: u64, on_wait: impl FnOnce()) -> Result<()> {
        if record > self.record_limit {
            return Err(Error::TransactionTooLarge {
                bytes: record,
                limit: self.record_limit,
                log_capacity: self.log.capacity(),
            });
        }
        let take_record = || {
            self.records
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                    (r + record <= self.record_limit).then_some(r + record)
                })
                .is_ok()
        };
        let both = || {
            if !take_record() {
                return false;
            }
            if self.try_reserve(need, self.free_limit) {
                return true;
            }
            self.records.fetch_sub(record, Ordering::AcqRel);
            false
        };
        self.check_writable(Purpose::New)?;
        if both() {
            return Ok(());
        }
        on_wait();
        self.wait_until(need, Purpose::New, both)
    }

    /// Count a commit record against the record limit without waiting
    /// (a commit recovery found unfinished: it was admitted before).
    pub fn resume_record(&self, record: u64) {
        self.records.fetch_add(record, Ordering::AcqRel);
    }

    /// The cleaners' error if they failed since they had failed `before`
    /// times: waiting for them is then pointless.
    fn cleaners_failed(&self, before: u64) -> Result<()> {
        if self.wb.failures() <= before {
            return Ok(());
        }
        let (why, may_pass) = self.wb.last_failure();
        let msg = format!("the checkpoint cannot advance because the page cleaners failed: {why}");
        // A full disk or page writes held for retry may pass (the caller
        // may retry); any other device error does not.
        Err(if may_pass {
            Error::LogOverloaded(msg)
        } else {
            Error::FlushFailed(msg)
        })
    }

    /// A finished commit's record leaves the record limit.
    pub fn release_record(&self, record: u64) {
        self.records.fetch_sub(record, Ordering::AcqRel);
    }

    /// Reserve `need` bytes for a relocation group up to the hard limit,
    /// without waiting (the checkpointer tries again next round).
    pub fn try_reserve_relocation(&self, need: u64) -> bool {
        self.try_reserve(need, self.hard_limit)
    }

    fn wait_until(
        &self,
        need: u64,
        purpose: Purpose,
        mut granted: impl FnMut() -> bool,
    ) -> Result<()> {
        let started = Instant::now();
        Metrics::add(&self.metrics.buffer_flush_sync_waits, 1);
        Metrics::add(&self.metrics.log_free_check_waits, 1);
        let _waiting = Waiting::new(self, need);
        let failures = self.wb.failures();
        let mut polls = 0u64;
        while !granted() {
            // Waiting is pointless once the cleaners fail or writes are
            // refused: say why instead of waiting for the timeout.
            self.check_writable(purpose)?;
            if purpose == Purpose::InFlight && self.abandoned() {
                return Err(Error::Closed);
            }
            self.cleaners_failed(failures)?;
            if started.elapsed() > self.wait_timeout() {
                return Err(Error::LogOverloaded(format!(
                    "checkpoint age {} bytes (+{} reserved) stayed above the limit of {} for {:?}; \
                     the page cleaners cannot write pages back fast enough",
                    self.log.age(),
                    self.reserved.load(Ordering::Acquire),
                    self.free_limit,
                    self.wait_timeout()
                )));
            }
            // Ask the cleaners for a sync flush (again every ~1 ms, in case
            // a round started just before this writer began to wait).
            if polls.is_multiple_of(10) {
                self.wb.wake_cleaners();
            }
            polls += 1;
            std::thread::sleep(FREE_CHECK_POLL);
        }
        let us = started.elapsed().as_micros() as u64;
        Metrics::add(&self.metrics.buffer_flush_sync_wait_us_total, us);
        Metrics::add(&self.metrics.log_free_check_wait_us_total, us);
        self.metrics
            .buffer_flush_sync_wait_us_max
            .fetch_max(us, Ordering::Relaxed);
        Ok(())
    }

    /// Pause as the policy's writer rate limit asks (holding no latch), until
    /// this writer's turn comes in the writers' line: a pause lasts at most
    /// `pacer::MAX_PAUSE`, after which the writer looks again, keeping its
    /// place, and pauses again if its turn has not come, so the limit holds
    /// for all writers together. Each pause is
    /// counted in the pause histogram. A pause ends early (within
    /// [`PACE_RECHECK`]) when the checkpoint moves or the policy sets a
    /// new limit: the writer looks again, keeping its place, at the rate
    /// then allowed; once the limit is lifted it goes with nothing owed.
    /// Nothing wakes a paused writer but its own timer: it holds nothing
    /// anyone waits for, and looks at two atomics each time.
    ///
    /// At the hard level the allowed rate is zero, and if the flusher cannot
    /// bring the age down (a device that stopped, failing writes) pausing
    /// would never end; so pacing ends as the free-check wait does: with
    /// `Closed` once the database closes, at once with the cleaners' error
    /// when they fail, and with `LogOverloaded` after [`LOG_WAIT_TIMEOUT`]
    /// of pauses: never an endless stall. The caller holds no latch and no
    /// reservation.
    pub fn pace(&self) -> Result<()> {
        let started = Instant::now();
        let failures = self.wb.failures();
        // This writer's place in line, kept across its pauses.
        let mut ticket = None;
        // Commits must not read the log for a limit nobody set.
        while self.pacer.is_active() {
            let lsn = self.log.lsn();
            let age = lsn.saturating_sub(self.log.checkpoint_lsn());
            let pause = self.pacer.delay(lsn, age, Instant::now(), &mut ticket);
            if pause.is_zero() {
                return Ok(());
            }
            let slept = Instant::now();
            self.sleep_until_due_or_moved(
                slept + pause,
                self.log.checkpoint_lsn(),
                self.pacer.generation(),
            );
            self.metrics
                .record_pause(slept.elapsed().as_micros() as u64);
            self.check_writable(Purpose::New)?;
            self.cleaners_failed(failures)?;
            if started.elapsed() > self.wait_timeout() {
                return Err(Error::LogOverloaded(format!(
                    "writers were held for {:?} at checkpoint age {age} bytes \
                     (free-check limit {}): the page cleaners retire no redo",
                    self.wait_timeout(),
                    self.free_limit
                )));
            }
        }
        Ok(())
    }

    /// Sleep until `due`, or until the checkpoint has moved on from
    /// `checkpoint` or a limit was set since `generation` (or the limit is
    /// lifted), looking every [`PACE_RECHECK`]. A pause is computed at the
    /// rate the curve allows at the age the writer saw, under the limit
    /// then in force; the checkpoint moves after every flush-list batch,
    /// and with it the age and the rate, and the policy sets a new limit
    /// every round. Sleeping the whole pause, writers
    /// held at the hard level (the rate zero) overslept a batch that
    /// brought the age back down by up to 90 ms, all of them together,
    /// and nobody moved the release clock meanwhile (it moves when a
    /// writer looks): on `neighbors` on `sata-ssd`, a p99.9 of 90 ms for
    /// a p50 of 5 ms. Woken by its own timer, the writer looks again
    /// (keeping its place in line) when the age may have changed.
    fn sleep_until_due_or_moved(
        &self,
        due: Instant,
        checkpoint: crate::page::Lsn,
        generation: u64,
    ) {
        loop {
            let now = Instant::now();
            if now >= due {
                return;
            }
            std::thread::sleep((due - now).min(PACE_RECHECK));
            if self.log.checkpoint_lsn() != checkpoint
                || self.pacer.generation() != generation
                || !self.pacer.is_active()
            {
                return;
            }
        }
    }

    /// A budget for the mini-transactions of one operation.
    pub fn budget(&self, purpose: Purpose) -> Budget<'_> {
        self.prepaid(purpose, 0)
    }

    /// A budget holding `held` bytes the caller already reserved.
    pub fn prepaid(&self, purpose: Purpose, held: u64) -> Budget<'_> {
        Budget {
            adm: self,
            purpose,
            held: Cell::new(held),
            top_up: Cell::new(0),
            short: Cell::new(false),
        }
    }
}

/// One commit counted in `Admission::applying`, from its admission to the
/// end of its ticket.
pub(crate) struct Applying<'a>(&'a Admission);

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        self.0.applying.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A writer waiting for log space, counted while it waits so the cleaners'
/// sync flush makes room for it.
struct Waiting<'a> {
    adm: &'a Admission,
    need: u64,
}

impl<'a> Waiting<'a> {
    fn new(adm: &'a Admission, need: u64) -> Waiting<'a> {
        adm.waiting_need.fetch_add(need, Ordering::AcqRel);
        adm.waiters.fetch_add(1, Ordering::AcqRel);
        Waiting { adm, need }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.adm.waiting_need.fetch_sub(self.need, Ordering::AcqRel);
        self.adm.waiters.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Log space held by one thread for the mini-transactions of one operation
/// (see the module doc). Not shared between threads; what is left is given
/// back on drop.
pub(crate) struct Budget<'a> {
    adm: &'a Admission,
    purpose: Purpose,
    held: Cell<u64>,
    /// Set by [`Budget::with_estimate`] for its operation's next
    /// mini-transaction: the bound up to which [`Budget::check`] may top
    /// the budget up without waiting (0: it may not).
    top_up: Cell<u64>,
    /// A top-up failed (the log had no room without a wait): the
    /// operation's error is that, and [`Budget::with_estimate`] retries.
    short: Cell<bool>,
}

impl Budget<'_> {
    /// Hold at least `n` bytes, waiting for log space if needed. The caller
    /// must hold no latch. More than the free-check limit can never be
    /// granted: that fails at once, naming the option that sizes the log.
    pub fn ensure(&self, n: u64) -> Result<()> {
        if n > self.adm.free_limit {
            return Err(Error::config(
                "log_file_size",
                format!(
                    "an operation needs {n} bytes of redo in one mini-transaction, more than \
                     the {} bytes the redo log of {} bytes (log_file_size × \
                     log_files_in_group) lets a writer reserve; a larger log (a new database) \
                     or a smaller page_size takes it",
                    self.adm.free_limit,
                    self.adm.log.capacity()
                ),
            ));
        }
        // A whole bound from here on: a shortfall is a broken bound.
        self.top_up.set(0);
        let held = self.held.get();
        if held < n {
            self.adm.reserve(n - held, self.purpose)?;
            self.held.set(n);
        }
        Ok(())
    }

    /// Run `attempt`, an operation whose one mini-transaction logs at
    /// most `bound` bytes and usually no more than `estimate`, holding
    /// only the estimate (see "Estimates" in the module doc): the
    /// mini-transaction's commit tops the budget up to its exact size
    /// without waiting. If the log has no room for that, the commit fails
    /// with nothing logged and every page put back, and `attempt` runs
    /// again once the whole bound is held (waiting for it holding nothing:
    /// the caller's promise, as for [`Budget::ensure`]). `attempt` must
    /// leave nothing changed when its mini-transaction fails.
    pub fn with_estimate<T>(
        &self,
        estimate: u64,
        bound: u64,
        mut attempt: impl FnMut() -> Result<T>,
    ) -> Result<T> {
        self.ensure(estimate.min(bound))?;
        self.top_up.set(bound);
        self.short.set(false);
        let r = attempt();
        self.top_up.set(0);
        match r {
            Err(_) if self.short.replace(false) => {
                Metrics::add(&self.adm.metrics.log_estimate_retries, 1);
                self.ensure(bound)?;
                attempt()
            }
            r => r,
        }
    }

    /// Hold at least `n` bytes if that needs no wait; may be called holding
    /// latches.
    pub fn try_ensure(&self, n: u64) -> bool {
        let held = self.held.get();
        if held >= n {
            return true;
        }
        if self.adm.try_reserve(n - held, self.adm.free_limit) {
            self.held.set(n);
            return true;
        }
        false
    }

    /// Before appending `n` bytes: an error if the budget does not cover
    /// them (a bound was broken; nothing has been appended).
    pub fn check(&self, n: u64) -> Result<()> {
        let top_up = self.top_up.replace(0);
        if n > self.held.get() && n <= top_up {
            // An estimate was held (`with_estimate`): top up, never wait.
            if self.try_ensure(n) {
                Metrics::add(&self.adm.metrics.log_estimate_top_ups, 1);
                return Ok(());
            }
            self.short.set(true);
            return Err(Error::LogOverloaded(format!(
                "a mini-transaction of {n} redo bytes found no room in the log beyond the {} \
                 its thread reserved; it is retried once the whole bound is reserved",
                self.held.get()
            )));
        }
        if n > self.held.get() {
            return Err(Error::Corruption(format!(
                "a mini-transaction of {n} redo bytes exceeds the {} its thread reserved: \
                 the engine's redo bound is wrong (nothing was logged)",
                self.held.get()
            )));
        }
        Ok(())
    }

    /// After appending `n` bytes: they are in the log now.
    pub fn spent(&self, n: u64) {
        let n = n.min(self.held.get());
        self.held.set(self.held.get() - n);
        self.adm.release(n);
    }
}

impl Drop for Budget<'_> {
    fn drop(&mut self) {
        self.adm.release(self.held.get());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
