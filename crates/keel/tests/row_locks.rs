#![allow(clippy::unwrap_used)]
//! Row locks: a second writer waits and times out, proceeds once the owner
//! commits; a thread that would wait for its own open transaction is told
//! so at once; deadlocks of two and three transactions are detected at once
//! with exactly one victim; and 8 threads of random bank transfers with
//! retries conserve the total balance.

mod common;

use std::sync::Barrier;
use std::time::{Duration, Instant};

use keel::{Db, Error, Options, Table};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn opts(lock_wait_timeout: f64) -> Options {
    Options {
        lock_wait_timeout,
        ..common::small_opts(256)
    }
}

fn val(t: &Table, k: &[u8]) -> Option<String> {
    t.get(k).unwrap().map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn a_thread_writing_a_row_its_own_open_transaction_locked_gets_an_error_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(50.0)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.begin();
    a.put(&t, b"k", b"a").unwrap();
    let started = Instant::now();
    let e = t.put(b"k", b"auto").unwrap_err();
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    match &e {
        Error::SelfDeadlock { table, owner } => {
            assert_eq!(table, "t");
            assert_eq!(*owner, a.id());
        }
        e => panic!("expected SelfDeadlock, got {e}"),
    }
    assert!(e.to_string().contains("commit or roll back"), "{e}");
    // A second transaction on the same thread is refused the same way.
    let mut b = db.begin();
    assert!(matches!(
        b.put(&t, b"k", b"b"),
        Err(Error::SelfDeadlock { .. })
    ));
    drop(b);
    // Once the transaction lives on another thread, this thread simply waits.
    let t2 = t.clone();
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            assert_eq!(a.get(&t2, b"k").unwrap().as_deref(), Some(&b"a"[..]));
            std::thread::sleep(Duration::from_millis(300));
            a.commit().unwrap();
        });
        std::thread::sleep(Duration::from_millis(100));
        t.put(b"k", b"after").unwrap();
        h.join().unwrap();
    });
    assert_eq!(val(&t, b"k").as_deref(), Some("after"));
}

#[test]
fn second_writer_times_out_then_proceeds_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(0.2)).unwrap();
    let t = db.create_table("t").unwrap();
    // Transaction a holds `k` on a thread of its own until told to commit.
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let (commit_tx, commit) = std::sync::mpsc::channel::<()>();
    let holder = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut a = db.begin();
            a.put(&t, b"k", b"a").unwrap();
            locked_tx.send(()).unwrap();
            commit.recv().unwrap();
            a.commit().unwrap();
        })
    };
    locked.recv().unwrap();
    let mut b = db.begin();
    b.put(&t, b"other", b"b").unwrap();

    let start = Instant::now();
    let e = b.put(&t, b"k", b"b").unwrap_err();
    let elapsed = start.elapsed();
    match e {
        Error::LockWaitTimeout { ref table, waited } => {
            assert_eq!(table, "t");
            assert!(waited >= Duration::from_millis(200), "{waited:?}");
        }
        e => panic!("expected LockWaitTimeout, got {e}"),
    }
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    // Autocommit writers wait for the row lock too.
    assert!(matches!(
        t.put(b"k", b"auto"),
        Err(Error::LockWaitTimeout { .. })
    ));
    assert!(matches!(t.delete(b"k"), Err(Error::LockWaitTimeout { .. })));

    // Only the statement failed: b keeps its earlier write and retries while
    // a commits.
    std::thread::scope(|s| {
        let t2 = t.clone();
        let h = s.spawn(move || {
            b.put(&t2, b"k", b"b").unwrap();
            b.commit().unwrap();
        });
        std::thread::sleep(Duration::from_millis(50));
        commit_tx.send(()).unwrap();
        h.join().unwrap();
    });
    holder.join().unwrap();
    assert_eq!(val(&t, b"k").as_deref(), Some("b"));
    assert_eq!(val(&t, b"other").as_deref(), Some("b"));
    let m = db.metrics();
    assert_eq!(m.get("lock_timeouts"), Some(3));
    assert_eq!(m.get("lock_row_lock_waits"), Some(4));
    assert!(m.get("lock_row_lock_time_ms").unwrap() >= 600);
}

#[test]
fn autocommit_put_waits_for_the_owner_to_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(2.0)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.begin();
    a.put(&t, b"k", b"txn").unwrap();
    std::thread::scope(|s| {
        let t2 = t.clone();
        let h = s.spawn(move || t2.put(b"k", b"auto").unwrap());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(val(&t, b"k"), None, "uncommitted write is invisible");
        a.commit().unwrap();
        assert!(
            h.join().unwrap(),
            "the autocommit put replaced the txn's value"
        );
    });
    assert_eq!(val(&t, b"k").as_deref(), Some("auto"));
}

/// Run `n` transactions in a cycle: txn i locks key i, all meet at a
/// barrier, then txn i wants key (i+1) % n. Returns each one's outcome and
/// the longest time any of them took after the barrier.
fn cycle(
    n: usize,
) -> (
    Vec<Result<(), Error>>,
    Duration,
    Db,
    Table,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(3.0)).unwrap();
    let t = db.create_table("t").unwrap();
    let barrier = Barrier::new(n);
    let results: Vec<(Result<(), Error>, Duration)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let (db, t, barrier) = (&db, &t, &barrier);
                s.spawn(move || {
                    let mut tx = db.begin();
                    let me = format!("txn{i}");
                    tx.put(t, format!("k{i}").as_bytes(), me.as_bytes())
                        .unwrap();
                    barrier.wait();
                    let start = Instant::now();
                    let next = format!("k{}", (i + 1) % n);
                    let r = tx.put(t, next.as_bytes(), me.as_bytes());
                    let r = match r {
                        Ok(()) => tx.commit(),
                        Err(e) => {
                            let again = tx.put(t, b"x", b"x").unwrap_err();
                            assert!(matches!(again, Error::TxnAborted), "{again}");
                            Err(e)
                        }
                    };
                    (r, start.elapsed())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let longest = results.iter().map(|r| r.1).max().unwrap();
    (
        results.into_iter().map(|r| r.0).collect(),
        longest,
        db,
        t,
        dir,
    )
}

fn check_one_victim(n: usize) {
    let (results, longest, db, t, _dir) = cycle(n);
    let victims: Vec<usize> = (0..n).filter(|&i| results[i].is_err()).collect();
    assert_eq!(victims.len(), 1, "{results:?}");
    let v = victims[0];
    assert!(
        matches!(&results[v], Err(Error::Deadlock { table }) if table == "t"),
        "{results:?}"
    );
    assert!(longest < Duration::from_secs(1), "took {longest:?}");
    // Every survivor wrote its own key and the next one; the victim's own
    // key was taken over by its predecessor, the victim wrote nothing.
    for i in (0..n).filter(|&i| i != v) {
        let want = format!("txn{i}");
        assert_eq!(val(&t, format!("k{}", (i + 1) % n).as_bytes()), Some(want));
    }
    let pred = (v + n - 1) % n;
    assert_eq!(
        val(&t, format!("k{v}").as_bytes()),
        Some(format!("txn{pred}"))
    );
    assert_eq!(db.metrics().get("lock_deadlocks"), Some(1));
    assert_eq!(db.metrics().get("lock_timeouts"), Some(0));
    t.check().unwrap();
}

#[test]
fn two_txn_deadlock_has_one_victim_at_once() {
    check_one_victim(2);
}

#[test]
fn three_txn_cycle_has_one_victim_at_once() {
    check_one_victim(3);
}

#[test]
fn bank_transfers_conserve_the_total() {
    const ACCOUNTS: u32 = 100;
    const START: i64 = 1000;
    const THREADS: u64 = 8;
    const TRANSFERS: u32 = 150;
    let seed = common::seed("bank_transfers_conserve_the_total");
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(1.0)).unwrap();
    let t = db.create_table("accounts").unwrap();
    let key = |a: u32| format!("acct{a:03}").into_bytes();
    let balance = |v: Option<Vec<u8>>| i64::from_le_bytes(v.unwrap().try_into().unwrap());
    for a in 0..ACCOUNTS {
        t.put(&key(a), &START.to_le_bytes()).unwrap();
    }
    let retries: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|id| {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed ^ id);
                    let mut retries = 0u64;
                    for _ in 0..TRANSFERS {
                        // Half the transfers stay among 8 hot accounts.
                        let n = if rng.gen_bool(0.5) { 8 } else { ACCOUNTS };
                        let from = rng.gen_range(0..n);
                        let to = (from + rng.gen_range(1..n)) % n;
                        let amount = rng.gen_range(1..100i64);
                        // Holding the first lock a little while makes
                        // deadlocks (and their retries) common.
                        let pause = Duration::from_micros(rng.gen_range(0..500));
                        loop {
                            let mut tx = db.begin();
                            let r = (|| {
                                let f = balance(tx.get_for_update(t, &key(from))?);
                                std::thread::sleep(pause);
                                let g = balance(tx.get_for_update(t, &key(to))?);
                                tx.put(t, &key(from), &(f - amount).to_le_bytes())?;
                                tx.put(t, &key(to), &(g + amount).to_le_bytes())?;
                                Ok::<_, Error>(())
                            })();
                            match r {
                                Ok(()) => {
                                    tx.commit().unwrap();
                                    break;
                                }
                                Err(Error::Deadlock { .. } | Error::LockWaitTimeout { .. }) => {
                                    retries += 1;
                                    tx.rollback();
                                }
                                Err(e) => panic!("thread {id}: {e}"),
                            }
                        }
                    }
                    retries
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let total: i64 = t
        .range(..)
        .unwrap()
        .map(|r| i64::from_le_bytes(r.unwrap().1.try_into().unwrap()))
        .sum();
    assert_eq!(total, START * ACCOUNTS as i64, "seed {seed}");
    t.check().unwrap();
    let m = db.metrics();
    eprintln!(
        "retries {retries}, deadlocks {:?}, timeouts {:?}, waits {:?}",
        m.get("lock_deadlocks"),
        m.get("lock_timeouts"),
        m.get("lock_row_lock_waits")
    );
    assert!(m.get("trx_commits").unwrap() >= THREADS * TRANSFERS as u64);
    drop(t);
    db.close().unwrap();
    let db = Db::open(dir.path(), opts(1.0)).unwrap();
    let total: i64 = db
        .table("accounts")
        .unwrap()
        .range(..)
        .unwrap()
        .map(|r| i64::from_le_bytes(r.unwrap().1.try_into().unwrap()))
        .sum();
    assert_eq!(total, START * ACCOUNTS as i64, "after reopen, seed {seed}");
}
