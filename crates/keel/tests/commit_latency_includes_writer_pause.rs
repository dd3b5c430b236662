#![allow(clippy::unwrap_used)]
//! `trx_commit_latency` counts every wait the caller of a commit sees,
//! whichever flushing policy imposes it: `steady`'s writer pause, which a
//! transaction takes at its first write (before its first row lock), and
//! the wait for log space inside the commit, where `classic` stops
//! writers. Each wait is made deterministic by holding the writer at the
//! failpoint where it happens for a span the test measures itself; the
//! commit's recorded latency must be at least that span.

mod common;

use std::time::{Duration, Instant};

use keel::{Db, Histogram};

const WAIT: Duration = Duration::from_secs(10);
/// How long the test holds a writer (any length shows it; a few
/// milliseconds is above what the commit itself takes on `nosync`).
const HOLD: Duration = Duration::from_millis(30);

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    (dir, db)
}

/// (sum in µs, count) of a histogram.
fn sum_count(h: &Histogram) -> (u64, u64) {
    let (_, sum, count) = h.cumulative();
    (sum, count)
}

/// Run `work` on another thread while failpoint `point` holds it; return
/// how long the test held it (at least [`HOLD`]), and the one commit's
/// recorded latency in µs.
fn held_and_recorded(db: &Db, point: &'static str, work: impl FnOnce() + Send) -> (u64, u64) {
    let (sum0, count0) = sum_count(&db.metrics().trx_commit_latency);
    let hold = db.failpoint(point);
    let held = std::thread::scope(|s| {
        let t = s.spawn(work);
        assert!(hold.wait_held(WAIT), "no writer reached `{point}`");
        let from = Instant::now();
        std::thread::sleep(HOLD);
        let held = from.elapsed();
        hold.release();
        t.join().unwrap();
        held
    });
    let (sum, count) = sum_count(&db.metrics().trx_commit_latency);
    assert_eq!(count - count0, 1, "one commit recorded");
    (held.as_micros() as u64, sum - sum0)
}

#[test]
fn a_writer_pause_at_a_transactions_first_write_is_in_its_commit_latency() {
    let (_dir, db) = open();
    let t = db.create_table("t").unwrap();
    let (held, recorded) = held_and_recorded(&db, "writer.pace", || {
        let mut tx = db.begin();
        tx.put(&t, b"a", b"1").unwrap();
        tx.put(&t, b"b", b"2").unwrap();
        tx.commit().unwrap();
    });
    assert!(
        recorded >= held,
        "commit latency {recorded} µs < the writer pause of {held} µs it took"
    );
    assert_eq!(t.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    // The exposition shows the same: the one commit's seconds in `_sum`.
    let text = db.metrics().render_prometheus();
    let sum: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("keel_trx_commit_latency_seconds_sum "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(sum >= held as f64 / 1e6, "{sum} s < {held} µs");
}

#[test]
fn a_writer_pause_in_table_put_is_in_its_commit_latency() {
    let (_dir, db) = open();
    let t = db.create_table("t").unwrap();
    let (held, recorded) = held_and_recorded(&db, "writer.pace", || {
        t.put(b"a", b"1").unwrap();
    });
    assert!(recorded >= held, "{recorded} µs < {held} µs");
}

/// The wait for log space at commit (where `classic`'s free check stops
/// writers) was counted before; it still is.
#[test]
fn a_wait_for_log_space_at_commit_is_in_its_commit_latency() {
    let (_dir, db) = open();
    let t = db.create_table("t").unwrap();
    let (held, recorded) = held_and_recorded(&db, "commit.admitted", || {
        let mut tx = db.begin();
        tx.put(&t, b"a", b"1").unwrap();
        tx.commit().unwrap();
    });
    assert!(recorded >= held, "{recorded} µs < {held} µs");
}

/// A transaction that wrote nothing, or rolled back, records no commit
/// latency.
#[test]
fn a_commit_without_writes_records_no_latency() {
    let (_dir, db) = open();
    let t = db.create_table("t").unwrap();
    let before = sum_count(&db.metrics().trx_commit_latency).1;
    let mut tx = db.begin();
    tx.get_for_update(&t, b"a").unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin();
    tx.put(&t, b"a", b"1").unwrap();
    tx.rollback();
    assert_eq!(sum_count(&db.metrics().trx_commit_latency).1, before);
}
