//! Pacing at its edges, deterministically: a writer held at the hard level
//! (where the allowed rate is zero) gets `LogOverloaded` after the wait
//! timeout, never an endless stall; no single pause is longer than
//! `MAX_PAUSE`; a close ends the pauses with `Closed`. An operation
//! holding an estimate of its redo tops up, or undoes and retries. No page
//! cleaner runs
//! in these engines, so nothing but the test moves the age or the limit.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::btree::test_engine::engine;
use crate::engine::admission::{estimate, Budget, Purpose};
use crate::engine::Engine;
use crate::error::Error;
use crate::flush::pacer::MAX_PAUSE;
use crate::flush::policy::WriterLimit;
use crate::mtr::tests::allocated;
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{PageBytes, PageId};

/// Log a page allocation, moving the LSN on by a few hundred bytes.
fn log_something(e: &Engine) {
    allocated(e);
}

/// The curve at the hard level from the first byte of age: every writer
/// is allowed 1 byte/s, i.e. nothing.
fn hard_from_the_start() -> WriterLimit {
    WriterLimit {
        base_rate: 1.0,
        freerun: 0,
        setpoint: 1,
        hard: 2,
        lump_ceiling: f64::INFINITY,
    }
}

/// Writers held at the hard level: two transactions went (the first one
/// free, since nothing was measured; the second after the at most
/// `MAX_DEBT` the first logged beyond its charge), and each logged: a
/// third one's place in line is due at 1 byte/s, far out.
fn owing(e: &Engine) {
    e.adm.pacer.set_limit(Some(hard_from_the_start()));
    log_something(e);
    for _ in 0..2 {
        e.pace_writer().unwrap();
        log_something(e);
    }
}

#[test]
fn a_writer_held_at_the_hard_level_gets_log_overloaded_after_the_timeout() {
    let e = engine(4096);
    owing(&e);
    e.adm.set_wait_timeout(Duration::from_millis(400));
    let pauses_before = e
        .metrics
        .writer_pauses
        .load(std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    let err = e.pace_writer().unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, Error::LogOverloaded(_)), "{err}");
    assert!(err.to_string().contains("400ms"), "{err}");
    // It waited the timeout, in several pauses of at most MAX_PAUSE each,
    // and no longer than the timeout and one pause more.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(
        took < Duration::from_millis(400) + 4 * MAX_PAUSE,
        "{took:?}"
    );
    let pauses = e
        .metrics
        .writer_pauses
        .load(std::sync::atomic::Ordering::Relaxed)
        - pauses_before;
    assert!(pauses >= 5, "{pauses} pauses");
    let longest = e
        .metrics
        .writer_pause_us_max
        .load(std::sync::atomic::Ordering::Relaxed);
    // The pause asked for is at most MAX_PAUSE (90 ms); the clock may
    // overshoot it, which the 10 ms margin under 100 ms is for.
    assert!(longest <= 100_000, "longest pause {longest} µs");
    // Once the limit is lifted, the same writer goes at once.
    e.adm.pacer.set_limit(None);
    let started = Instant::now();
    e.pace_writer().unwrap();
    assert!(started.elapsed() < MAX_PAUSE);
}

#[test]
fn a_close_ends_a_writers_pauses_with_closed() {
    let e = engine(4096);
    owing(&e);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| e.pace_writer());
        std::thread::sleep(2 * MAX_PAUSE);
        assert!(!waiter.is_finished(), "the writer was not held");
        e.adm.close();
        let started = Instant::now();
        let r = waiter.join().unwrap();
        assert!(matches!(r, Err(Error::Closed)), "{r:?}");
        // It noticed at the end of the pause it was in.
        assert!(started.elapsed() <= MAX_PAUSE + Duration::from_millis(50));
    });
}

#[test]
fn a_paused_writer_looks_again_when_a_new_limit_is_set() {
    let e = engine(4096);
    owing(&e);
    std::thread::scope(|s| {
        let started = Instant::now();
        let waiter = s.spawn(|| e.pace_writer());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "the writer was not held");
        // The policy's next round allows a rate at which the writer's turn
        // has come: it goes well before the end of the MAX_PAUSE pause it
        // was asked for at the hard level, keeping its place in line.
        e.adm.pacer.set_limit(Some(WriterLimit {
            base_rate: 1e12,
            freerun: 0,
            setpoint: u64::MAX / 4,
            hard: u64::MAX / 2,
            lump_ceiling: f64::INFINITY,
        }));
        waiter.join().unwrap().unwrap();
        let took = started.elapsed();
        assert!(took < MAX_PAUSE, "{took:?}");
    });
}

/// A reservation granted and given back between two reads of the peak is
/// seen by the next read, which then starts again from what is held.
#[test]
fn the_reserved_peak_sees_a_reservation_that_came_and_went_between_reads() {
    let e = engine(4096);
    // Whatever the engine holds reserved on its own, unchanged meanwhile.
    // (The first read ends the span of the engine's own setup.)
    let base = e.adm.reserved_and_wanted();
    e.adm.take_reserved_peak();
    assert_eq!(e.adm.take_reserved_peak(), base);
    e.adm.reserve(10_000, Purpose::New).unwrap();
    e.adm.reserve(5_000, Purpose::New).unwrap();
    e.adm.release(15_000);
    e.adm.reserve(300, Purpose::New).unwrap();
    assert_eq!(
        e.adm.reserved_and_wanted(),
        base + 300,
        "a sample sees what is held now"
    );
    assert_eq!(
        e.adm.take_reserved_peak(),
        base + 15_000 + 10_000,
        "the peak since the last read, and one more of the largest request"
    );
    assert_eq!(
        e.adm.take_reserved_peak(),
        base + 300,
        "the next span starts from what is held"
    );
    e.adm.release(300);
    assert_eq!(e.adm.take_reserved_peak(), base + 300);
    assert_eq!(e.adm.take_reserved_peak(), base);
    // A request refused counts too: it is what may come next.
    let big = e.adm.free_limit + 1;
    assert!(!e.adm.try_reserve(big, e.adm.free_limit));
    assert_eq!(e.adm.take_reserved_peak(), base + big);
    // A relocation's request, above the free-check limit, does not.
    assert!(e.adm.try_reserve_relocation(500));
    e.adm.release(500);
    assert_eq!(e.adm.take_reserved_peak(), base + 500);
}

/// Change 2,000 bytes of page `id` to `fill` in one mtr paid by `budget`:
/// far more than the estimate of a one-page change.
fn fill_page(e: &Engine, budget: &Budget<'_>, id: PageId, fill: u8) -> crate::error::Result<()> {
    let mut mtr = Mtr::new(e, budget);
    let mut p = e.pool.write(id)?;
    p.range_mut(64..2064).fill(fill);
    mtr.keep(p);
    mtr.commit().map(|_| ())
}

fn counter(e: &Engine, name: &str) -> u64 {
    e.metrics.snapshot()[name]
}

/// An mtr logging more than its operation's estimate (see "Estimates" in
/// the module doc) takes the rest at commit without waiting while the log
/// has room. When it has not, the commit fails with nothing logged and the
/// page put back as it was; the operation runs again once its whole bound
/// is reserved, a wait that the test ends by giving back the space it held.
#[test]
fn an_mtr_over_its_estimate_tops_up_or_is_undone_and_retried() {
    let e = engine(4096);
    let ps = e.page_size();
    let id = allocated(&e);
    let (est, bound) = (estimate(ps, 0), mtr_bound(1, ps));

    // Room in the log: the commit tops up.
    let budget = e.adm.budget(Purpose::InFlight);
    budget
        .with_estimate(est, bound, || fill_page(&e, &budget, id, 1))
        .unwrap();
    drop(budget);
    assert_eq!(counter(&e, "log_estimate_top_ups"), 1);
    assert_eq!(counter(&e, "log_estimate_retries"), 0);

    // Room for the estimate only: hold the rest of the free-check limit.
    let hog = e.adm.free_limit - e.log.age() - e.adm.reserved_and_wanted() - est;
    e.adm.reserve(hog, Purpose::New).unwrap();
    let lsn = e.log.lsn();
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            let budget = e.adm.budget(Purpose::InFlight);
            budget.with_estimate(est, bound, || {
                if attempts.fetch_add(1, Ordering::SeqCst) == 1 {
                    // The failed try left the page as it was, unlogged.
                    assert_eq!(e.log.lsn(), lsn);
                    let p = e.pool.read(id).unwrap();
                    assert!(p[64..2064].iter().all(|&b| b == 1));
                }
                fill_page(&e, &budget, id, 2)
            })
        });
        // The retry waits for its bound, holding nothing.
        while e.adm.waiters() == 0 {
            assert!(!t.is_finished(), "the operation ended without waiting");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        e.adm.release(hog);
        t.join().unwrap().unwrap();
    });
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(counter(&e, "log_estimate_retries"), 1);
    assert_eq!(counter(&e, "log_estimate_top_ups"), 1);
    assert_eq!(counter(&e, "log_free_check_waits"), 1);
    let p = e.pool.read(id).unwrap();
    assert!(p[64..2064].iter().all(|&b| b == 2));
}

/// A shortfall beyond the bound given with the estimate is still a broken
/// bound: refused as corruption, never topped up.
#[test]
fn an_mtr_over_the_bound_of_its_estimate_is_refused() {
    let e = engine(4096);
    let ps = e.page_size();
    let id = allocated(&e);
    let budget = e.adm.budget(Purpose::InFlight);
    let err = budget
        .with_estimate(estimate(ps, 0), estimate(ps, 0) + 1, || {
            fill_page(&e, &budget, id, 3)
        })
        .unwrap_err();
    assert!(matches!(err, Error::Corruption(_)), "{err}");
    assert_eq!(counter(&e, "log_estimate_top_ups"), 0);
    let p = e.pool.read(id).unwrap();
    assert!(p[64..2064].iter().all(|&b| b == 0));
}
