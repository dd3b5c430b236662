#![allow(clippy::unwrap_used)]
//! A redo log much smaller than the dirty data. Under `classic`, writers
//! reach the free-check limit and wait while the oldest pages are flushed
//! (InnoDB's "sync flush"), counted in the metrics. Under `steady`, on a
//! slow device, writers are paused a little instead and never reach it. In
//! both, the checkpoint age never exceeds the log's capacity and nothing is
//! lost.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel::{Db, FlushPolicyName};

#[test]
fn small_log_forces_sync_flush_waits_that_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(4096); // 16 MiB of pool
    o.log_file_size = 1 << 20; // 2 MiB of log, far less than the dirty data
    o.max_dirty_pages_pct = 99.0;
    o.flush_policy = FlushPolicyName::Classic;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let v = vec![7u8; 300];
    for i in 0..40_000u32 {
        t.put(&(i.wrapping_mul(2_654_435_761)).to_be_bytes(), &v)
            .unwrap();
    }
    let m = db.metrics();
    let waits = m.get("buffer_flush_sync_waits").unwrap();
    let pages = m.get("buffer_flush_sync_total_pages").unwrap();
    let cap = m.get("log_capacity").unwrap();
    eprintln!(
        "sync flush waits {waits}, pages {pages}, wait total {} us, max {} us, checkpoints {}",
        m.get("buffer_flush_sync_wait_us_total").unwrap(),
        m.get("buffer_flush_sync_wait_us_max").unwrap(),
        m.get("log_checkpoints").unwrap()
    );
    assert!(waits > 0, "writers must have hit the free-check limit");
    assert!(pages > 0, "sync flushing must have written pages");
    assert!(m.get("log_lsn_checkpoint_age").unwrap() <= cap);
    assert!(
        m.get("log_max_modified_age_async").unwrap() < m.get("log_max_modified_age_sync").unwrap()
    );
    drop(t);
    db.simulate_crash();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.range(..).unwrap().count(), 40_000);
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}

#[test]
fn steady_holds_a_tiny_log_under_a_slow_device_without_free_check_waits() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(4096); // 16 MiB of pool
    o.log_file_size = 1 << 20; // 2 MiB of log, far less than the dirty data
    o.buffer_pool_instances = 2;
    o.page_cleaners = 2;
    o.device = "iops=3000,lat=200us,qd=8".into();
    assert_eq!(o.flush_policy, FlushPolicyName::Steady, "the default");
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let limit = db.metrics().get("log_free_check_limit").unwrap();
    let (stop, rows, max_age) = (AtomicBool::new(false), AtomicU64::new(0), AtomicU64::new(0));
    let run = Duration::from_secs(3);
    std::thread::scope(|s| {
        for w in 0..4u32 {
            let (db, t, stop, rows) = (&db, &t, &stop, &rows);
            s.spawn(move || {
                let v = vec![7u8; 300];
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let mut tx = db.begin();
                    for _ in 0..10 {
                        let k = (w << 28 | i).wrapping_mul(2_654_435_761);
                        tx.put(t, &k.to_be_bytes(), &v).unwrap();
                        i += 1;
                    }
                    tx.commit().unwrap();
                    rows.fetch_add(10, Ordering::Relaxed);
                }
            });
        }
        let started = Instant::now();
        while started.elapsed() < run {
            let m = db.metrics();
            let age = m.get("log_lsn_checkpoint_age").unwrap();
            max_age.fetch_max(age, Ordering::Relaxed);
            if std::env::var("KEEL_TEST_TRACE").is_ok() {
                let g = |k: &str| m.get(k).unwrap();
                eprintln!(
                    "{:>5} ms age {:>3}% S {:>3}% H {:>3}% pos {} base {} bw {} cap {} depth {} rho {} \
                     pauses {} waits {} written {}",
                    started.elapsed().as_millis(),
                    100 * age / limit,
                    100 * g("steady_setpoint") / limit,
                    100 * g("steady_hard_limit") / limit,
                    g("steady_pos_ratio"),
                    g("steady_base_rate"),
                    g("device_write_bw_estimate"),
                    g("steady_flusher_capacity"),
                    g("device_write_queue_depth"),
                    g("log_bytes_per_page_flushed"),
                    g("writer_pauses"),
                    g("log_free_check_waits"),
                    g("buffer_pages_written"),
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let m = db.metrics();
    let g = |k: &str| m.get(k).unwrap();
    eprintln!(
        "{} rows; max age {:.0}% of the limit (setpoint {:.0}%, hard {:.0}%); {} pauses, {} ms, \
         longest {} us; free-check waits {}; pages written {}, single-page {}",
        rows.load(Ordering::Relaxed),
        100.0 * max_age.load(Ordering::Relaxed) as f64 / limit as f64,
        100.0 * g("steady_setpoint") as f64 / limit as f64,
        100.0 * g("steady_hard_limit") as f64 / limit as f64,
        g("writer_pauses"),
        g("buffer_flush_throttle_delay_us_total") / 1000,
        g("writer_pause_us_max"),
        g("log_free_check_waits"),
        g("buffer_pages_written"),
        g("buffer_LRU_single_flush_total_pages"),
    );
    assert!(
        g("writer_pauses") > 0,
        "the device is too slow for free running"
    );
    // The pacer asks the clock for at most 90 ms (its unit tests and the
    // simulation prove that); the margin here is the scheduler's lateness
    // on a loaded 2-core machine.
    assert!(
        g("writer_pause_us_max") <= 150_000,
        "a pause lasts at most 100 ms"
    );
    assert_eq!(
        g("log_free_check_waits"),
        0,
        "writers reached the free-check limit"
    );
    assert_eq!(g("buffer_flush_sync_waits"), 0);
    assert!(max_age.load(Ordering::Relaxed) < limit);
    drop(t);
    db.simulate_crash();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(
        t.range(..).unwrap().count() as u64,
        rows.load(Ordering::Relaxed)
    );
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}

#[test]
fn large_transactions_on_a_tiny_log_make_progress() {
    // 500-row transactions on 4 threads against a 2 MiB log: each commit
    // needs a good share of the log, so the free check must flush far
    // enough for it, not just to the async mark.
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(2048);
    o.log_file_size = 1 << 20;
    let db = Db::open(dir.path(), o).unwrap();
    let tables: Vec<_> = (0..4)
        .map(|i| db.create_table(&format!("t{i}")).unwrap())
        .collect();
    std::thread::scope(|s| {
        for (w, t) in tables.iter().enumerate() {
            let db = db.clone();
            s.spawn(move || {
                for batch in 0..20u32 {
                    let mut tx = db.begin();
                    for i in 0..500u32 {
                        tx.put(t, &(batch * 500 + i).to_be_bytes(), &[w as u8; 200])
                            .unwrap();
                    }
                    tx.commit().unwrap();
                }
            });
        }
    });
    for t in &tables {
        assert_eq!(t.range(..).unwrap().count(), 10_000);
    }
    // A transaction whose record is too large for the log is refused with
    // a clear error. The record holds the keys, not these inline values:
    // 6,000 keys of 40 bytes, about 260 KB.
    let mut tx = db.begin();
    for i in 0..6000u32 {
        let mut k = [0u8; 40];
        k[..4].copy_from_slice(&i.to_be_bytes());
        tx.put(&tables[0], &k, &[9u8; 250]).unwrap();
    }
    let e = tx.commit().unwrap_err();
    assert!(e.to_string().contains("log_file_size"), "{e}");
    drop(tables);
    db.close().unwrap();
}
