#![allow(clippy::unwrap_used)]
//! `Db::set_option`: the options InnoDB's `SET GLOBAL` changes change while
//! the database runs, each taking effect where its doc says; everything
//! else is refused with an error that names what needs a restart, and a
//! refused change changes nothing. Switching the flushing policy back and
//! forth under load loses no acknowledged commit.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use keel::{Db, Error, FlushPolicyName, Options, RUNTIME_OPTIONS};
use rand::rngs::SmallRng;
use rand::SeedableRng;

fn value_of(db: &Db, key: &str) -> String {
    db.options()
        .entries()
        .into_iter()
        .find(|(k, _)| k == key)
        .unwrap()
        .1
}

/// Poll `cond` every few milliseconds for up to `limit`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

#[test]
fn every_runtime_option_changes_and_options_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(256);
    o.device = "nvme".into();
    let db = Db::open(dir.path(), o).unwrap();
    let changes = [
        ("flush_policy", "classic"),
        ("io_capacity", "1500"),
        ("io_capacity_max", "4000"),
        ("max_dirty_pages_pct", "75.0"),
        ("max_dirty_pages_pct_lwm", "20.0"),
        ("adaptive_flushing", "false"),
        ("adaptive_flushing_lwm", "15.0"),
        ("flushing_avg_loops", "5"),
        ("lru_scan_depth", "256"),
        ("flush_neighbors", "2"),
        ("flush_sync", "false"),
        ("flush_log_at_trx_commit", "2"),
        ("lock_wait_timeout", "7.5"),
        ("transaction_isolation", "READ-COMMITTED"),
        ("fill_factor", "70"),
        ("device", "sata-ssd"),
    ];
    let keys: Vec<&str> = changes.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, RUNTIME_OPTIONS, "every run-time option is exercised");
    for (k, v) in changes {
        db.set_option(k, v).unwrap();
        assert_eq!(value_of(&db, k), v, "{k}");
    }
    assert_eq!(db.options().flush_policy, FlushPolicyName::Classic);
    assert_eq!(db.device().unwrap().to_string(), "sata-ssd");
    assert_eq!(db.begin().isolation(), keel::Isolation::ReadCommitted);
    // Setting a value already in effect is no change, and no error.
    db.set_option("io_capacity", "1500").unwrap();
    // `flush_neighbors` goes back from a fixed mode to the policy's choice.
    db.set_option("flush_neighbors", "auto").unwrap();
    assert_eq!(value_of(&db, "flush_neighbors"), "auto");
    assert_eq!(db.options().flush_neighbors, keel::FlushNeighbors::Auto);
    // Every option is one kind or the other.
    let mut all: Vec<String> = Options::restart_only();
    all.extend(RUNTIME_OPTIONS.iter().map(|k| k.to_string()));
    all.sort();
    let mut known: Vec<String> = Options::default()
        .entries()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    known.sort();
    assert_eq!(all, known);
    db.close().unwrap();
}

#[test]
fn refused_changes_name_the_problem_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::small_opts(256);
    o.io_capacity_max = 2000;
    let db = Db::open(dir.path(), o).unwrap();
    let before = db.options();
    let refuse = |key: &str, value: &str| -> String {
        let e = db.set_option(key, value).unwrap_err();
        assert_eq!(db.options(), before, "{key}={value} changed something");
        e.to_string()
    };
    for key in [
        "page_size",
        "buffer_pool_size",
        "log_file_size",
        "doublewrite",
    ] {
        let e = refuse(key, "1");
        assert!(
            e.contains(&format!(
                "option `{key}` cannot change while the database is open"
            )),
            "{e}"
        );
        assert!(
            e.contains("Options that need a restart: buffer_pool_instances, buffer_pool_size"),
            "{e}"
        );
        assert!(
            e.contains("Options that change at run time: flush_policy, io_capacity"),
            "{e}"
        );
    }
    assert!(matches!(
        db.set_option("page_cleaners", "2"),
        Err(Error::RestartRequired { key }) if key == "page_cleaners"
    ));
    let e = refuse("io_capactiy", "300");
    assert!(e.contains("option `io_capactiy`: unknown option"), "{e}");
    let e = refuse("io_capacity", "lots");
    assert!(
        e.contains("option `io_capacity`: `lots` is not accepted"),
        "{e}"
    );
    let e = refuse("io_capacity", "50");
    assert!(e.contains("below InnoDB's minimum of 100"), "{e}");
    let e = refuse("io_capacity", "3000");
    assert!(
        e.contains("option `io_capacity`: `io_capacity = 3000` conflicts with `io_capacity_max`"),
        "{e}"
    );
    let e = refuse("flush_policy", "fast");
    assert!(e.contains("option `flush_policy`"), "{e}");
    let e = refuse("flush_log_at_trx_commit", "3");
    assert!(e.contains("must be 0, 1 or 2"), "{e}");
    let e = refuse("lock_wait_timeout", "0");
    assert!(e.contains("option `lock_wait_timeout`"), "{e}");
    let e = refuse("fill_factor", "5");
    assert!(
        e.contains("option `fill_factor`") && e.contains("between 10 and 100"),
        "{e}"
    );
    // device = unlimited at open: there is no model to change.
    assert!(matches!(
        db.set_option("device", "nvme"),
        Err(Error::DeviceNotModelled { .. })
    ));
    assert_eq!(db.options(), before);
    // Once the database is closing, nothing changes.
    let other = db.clone();
    db.close().unwrap();
    assert!(matches!(
        other.set_option("io_capacity", "300"),
        Err(Error::Closed)
    ));
}

#[test]
fn flush_log_at_trx_commit_takes_effect_at_the_next_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    let t = db.create_table("t").unwrap();
    let fsyncs = || db.metrics().get("os_log_fsyncs").unwrap();
    let commits = |from: u32| {
        for i in from..from + 50 {
            let mut tx = db.begin();
            tx.put(&t, &i.to_be_bytes(), b"v").unwrap();
            tx.commit().unwrap();
        }
    };
    let before = fsyncs();
    commits(0);
    let durable = fsyncs() - before;
    assert!(durable >= 50, "one thread, one sync per commit: {durable}");
    db.set_option("flush_log_at_trx_commit", "0").unwrap();
    let before = fsyncs();
    commits(100);
    // The once-a-second background flush may sync once or twice meanwhile.
    let lazy = fsyncs() - before;
    assert!(lazy < 10, "with 0, commits do not sync: {lazy}");
    db.set_option("flush_log_at_trx_commit", "1").unwrap();
    let before = fsyncs();
    commits(200);
    assert!(fsyncs() - before >= 50);
    drop(t);
    db.close().unwrap();
}

#[test]
fn lock_wait_timeout_takes_effect_at_the_next_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut holder = db.begin();
    holder.put(&t, b"k", b"held").unwrap();
    db.set_option("lock_wait_timeout", "0.2").unwrap();
    let waiter = std::thread::scope(|s| {
        s.spawn(|| {
            let mut tx = db.begin();
            let started = Instant::now();
            let r = tx.put(&t, b"k", b"mine");
            (r, started.elapsed())
        })
        .join()
        .unwrap()
    });
    let (r, waited) = waiter;
    assert!(
        matches!(r, Err(Error::LockWaitTimeout { .. })),
        "expected a lock wait timeout, got {r:?}"
    );
    // The default is 50 s; the new 0.2 s applied.
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    holder.commit().unwrap();
    drop(t);
    db.close().unwrap();
}

#[test]
fn fill_factor_takes_effect_at_the_next_bulk_load() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    let rows: Vec<([u8; 8], [u8; 40])> = (0..2000u64).map(|i| (i.to_be_bytes(), [7; 40])).collect();
    let full = db.create_table("full").unwrap();
    assert_eq!(full.bulk_load(rows.iter().copied()).unwrap(), 2000);
    db.set_option("fill_factor", "50").unwrap();
    let half = db.create_table("half").unwrap();
    assert_eq!(half.bulk_load(rows.iter().copied()).unwrap(), 2000);
    let (full, half) = (full.check().unwrap(), half.check().unwrap());
    assert_eq!((full.entries, half.entries), (2000, 2000));
    // 100 fills 15/16 of each leaf, 50 half of it: about 1.9 times the leaves.
    assert!(
        half.leaf_pages * 10 >= full.leaf_pages * 17,
        "fill_factor 50 built {} leaves, 100 built {}",
        half.leaf_pages,
        full.leaf_pages
    );
    db.close().unwrap();
}

/// Bank transfers on four threads, on a slow device with a small log (so
/// that both policies work hard: classic reaches its marks, steady paces
/// the writers), while the policy is switched classic -> steady -> classic
/// -> steady. Each switch must show in the cleaners' decisions, writers
/// must keep committing after each, no transfer may fail, and after a crash
/// every acknowledged transfer is there.
#[test]
fn switching_policies_under_load_loses_no_commit() {
    let seed = common::seed("switching_policies_under_load_loses_no_commit");
    let dir = tempfile::tempdir().unwrap();
    let mut o = common::bank::opts();
    o.flush_method = "nosync".parse().unwrap();
    o.flush_policy = FlushPolicyName::Classic;
    o.io_capacity = 100;
    o.io_capacity_max = 200;
    o.device = "iops=800,lat=100us,seek=1ms,qd=4".into();
    let db = Db::open(dir.path(), o.clone()).unwrap();
    common::bank::setup(&db);
    let stop = AtomicBool::new(false);
    let next_id = AtomicU64::new(1);
    let acked = Mutex::new(Vec::new());
    let committed = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (db, stop, next_id, acked, committed) = (&db, &stop, &next_id, &acked, &committed);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ w);
                while !stop.load(Ordering::Relaxed) {
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    match common::bank::transfer(db, &mut rng, id) {
                        Ok(true) => {
                            acked.lock().unwrap().push(id);
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(false) => {}
                        Err(e) => panic!("transfer {id} failed: {e}"),
                    }
                }
            });
        }
        let progress = |what: &str| {
            let from = committed.load(Ordering::Relaxed);
            assert!(
                eventually(Duration::from_secs(20), || committed
                    .load(Ordering::Relaxed)
                    >= from + 50),
                "writers stalled {what}"
            );
        };
        progress("under classic");
        for (policy, steady) in [("steady", true), ("classic", false), ("steady", true)] {
            db.set_option("flush_policy", policy).unwrap();
            assert_eq!(db.options().flush_policy.as_str(), policy);
            assert!(
                eventually(Duration::from_secs(20), || {
                    let d = db.flush_decision();
                    d.steady.is_some() == steady
                        && (steady || db.metrics().get("steady_setpoint") == Some(0))
                }),
                "the cleaners did not switch to {policy}"
            );
            // A while under the new policy, at full pressure.
            std::thread::sleep(Duration::from_millis(1500));
            progress(&format!("after the switch to {policy}"));
        }
        // Classic's knobs change under steady too (stored for later).
        db.set_option("io_capacity", "150").unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    let m = db.metrics();
    eprintln!(
        "{} transfers acknowledged; free-check waits {}, sync-flush waits {}, writer pauses {}, \
         pages written {}",
        acked.len(),
        m.get("log_free_check_waits").unwrap(),
        m.get("buffer_flush_sync_waits").unwrap(),
        m.get("writer_pauses").unwrap(),
        m.get("buffer_pages_written").unwrap(),
    );
    db.simulate_crash();
    o.device = "unlimited".into();
    let db = Db::open(dir.path(), o).unwrap();
    common::bank::verify(&db, &acked);
    db.close().unwrap();
}
