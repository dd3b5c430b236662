#![allow(clippy::unwrap_used)]
//! The `classic` policy misbehaves as InnoDB does (seed 1, "disaster"), in
//! seconds and at toy sizes: a redo log much smaller than the dirty data,
//! `io_capacity` tuned low and a slow device. (The pool holds the data, so
//! that only the policy's flushing, not eviction, cleans pages; the
//! `disaster-55` preset adds data four times the pool.)
//! Writers reach the free-check limit and stop while the page cleaners
//! sync-flush; the waits, the sync pages and the sync mode are visible in
//! the metrics, and nothing committed is lost across a crash.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel::{Db, FlushMode, FlushPolicyName};

const ROWS: u32 = 60_000;

fn key(i: u32) -> [u8; 4] {
    i.wrapping_mul(2_654_435_761).to_be_bytes()
}

#[test]
fn disaster_like_run_makes_writers_wait_for_sync_flushing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(8192); // 32 MiB of pool, above the ~19 MB of data
    o.buffer_pool_instances = 2;
    o.page_cleaners = 4; // reduced to one per instance
    o.lru_scan_depth = 64;
    o.log_file_size = 1 << 20; // 2 MiB of log: a tenth of the dirty data
    o.flush_log_at_trx_commit = 2;
    o.flush_policy = FlushPolicyName::Classic;
    o.io_capacity = 100;
    o.io_capacity_max = 200;
    // Load fast, then reopen on a slow device.
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        let t = db.create_table("t").unwrap();
        let v = vec![1u8; 300];
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(200) {
            let mut tx = db.begin();
            for &i in chunk {
                tx.put(&t, &key(i), &v).unwrap();
            }
            tx.commit().unwrap();
        }
        drop(t);
        db.close().unwrap();
    }
    o.device = "iops=600,lat=100us,seek=1ms,qd=4".into();
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.table("t").unwrap();
    let stop = AtomicBool::new(false);
    let committed = AtomicU64::new(0);
    let saw_sync = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..8u32 {
            let (db, t, stop, committed) = (&db, &t, &stop, &committed);
            s.spawn(move || {
                let mut x = w.wrapping_mul(7919) + 1;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let mut tx = db.begin();
                    for k in 0..4 {
                        let i = x.wrapping_add(k * 7_777) % ROWS;
                        tx.put(t, &key(i), &[(w + 2) as u8; 300]).unwrap();
                    }
                    match tx.commit() {
                        Ok(()) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(keel::Error::Deadlock { .. })
                        | Err(keel::Error::LockWaitTimeout { .. }) => {}
                        Err(e) => panic!("commit failed: {e}"),
                    }
                }
            });
        }
        // Watch the mode until writers have waited for sync flushing.
        while started.elapsed() < Duration::from_secs(40) {
            if db.flush_decision().mode == FlushMode::Sync {
                saw_sync.store(true, Ordering::Relaxed);
            }
            let m = db.metrics();
            if saw_sync.load(Ordering::Relaxed)
                && m.get("log_free_check_waits").unwrap() >= 8
                && started.elapsed() > Duration::from_secs(3)
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let m = db.metrics();
    eprintln!(
        "{} commits in {:?}; free-check waits {} ({} us), sync waits {}, sync pages {}, \
         adaptive pages {}, LRU pages {}, single-page flushes {}, age {} of capacity {}",
        committed.load(Ordering::Relaxed),
        started.elapsed(),
        m.get("log_free_check_waits").unwrap(),
        m.get("log_free_check_wait_us_total").unwrap(),
        m.get("buffer_flush_sync_waits").unwrap(),
        m.get("buffer_flush_sync_total_pages").unwrap(),
        m.get("buffer_flush_adaptive_total_pages").unwrap(),
        m.get("buffer_LRU_batch_flush_total_pages").unwrap(),
        m.get("buffer_LRU_single_flush_num_scan").unwrap(),
        m.get("log_lsn_checkpoint_age").unwrap(),
        m.get("log_capacity").unwrap(),
    );
    assert!(
        saw_sync.load(Ordering::Relaxed),
        "the cleaners never sync-flushed"
    );
    assert!(m.get("log_free_check_waits").unwrap() > 0);
    assert!(m.get("buffer_flush_sync_waits").unwrap() > 0);
    assert!(m.get("log_free_check_wait_us_total").unwrap() > 0);
    // Whether a sync round still finds pages below its limit depends on
    // how far the adaptive batches got since the last checkpoint (classic
    // checkpoints once a round): writers wait for the sync round's
    // checkpoint either way, which is the seed's stall.
    assert!(m.get("log_lsn_checkpoint_age").unwrap() <= m.get("log_capacity").unwrap());
    // Nothing committed is lost: every row is there after a crash.
    drop(t);
    db.simulate_crash();
    o.device = "unlimited".into();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.range(..).unwrap().count(), ROWS as usize);
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}
