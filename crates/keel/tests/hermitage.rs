#![allow(clippy::unwrap_used)]
//! Martin Kleppmann's Hermitage (https://github.com/ept/hermitage) test
//! cases, translated from its MySQL/InnoDB scripts (mysql.md) to Keel and
//! run at REPEATABLE READ and at READ COMMITTED (`<case>::repeatable_read`,
//! `<case>::read_committed`).
//!
//! Setup before every case: `test` with rows 1 => 10, 2 => 20.
//!
//! Mapping from SQL:
//! - `select` is a plain read: `Txn::get` / `Txn::scan`; a predicate
//!   (`where value % 3 = 0`) is a scan filtered in Rust.
//! - `select ... for update` is `Txn::get_for_update`.
//! - `update ... where id = N`, `insert`, `delete ... where id = N` are
//!   `Txn::put` / `Txn::delete`: they lock the row at once, as InnoDB's do,
//!   but Keel buffers the write itself until commit.
//! - `update/delete ... where <predicate>` is InnoDB's locking scan: every
//!   row present is read with `get_for_update` (the latest committed
//!   version, locked), the predicate is checked on that, the row written.
//! - A statement the script marks BLOCKS runs on a second thread; the test
//!   checks that it is still waiting for the row lock, lets the other
//!   transaction commit, and joins it.
//! - Keel locks rows only: no gap or next-key locks. InnoDB's plain reads
//!   take none either, so at these two levels that changes no result here.
//!
//! Each case states InnoDB's result (Hermitage's table: MySQL 5.6, InnoDB)
//! and whether Keel's matches.

mod common;

use std::thread::JoinHandle;
use std::time::Duration;

use keel::{Db, Isolation, Options, Table, Txn};

const RR: Isolation = Isolation::RepeatableRead;
const RC: Isolation = Isolation::ReadCommitted;

struct Bed {
    _dir: tempfile::TempDir,
    db: Db,
    t: Table,
}

fn setup() -> Bed {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        lock_wait_timeout: 10.0,
        ..common::small_opts(128)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.create_table("test").unwrap();
    t.put(b"1", b"10").unwrap();
    t.put(b"2", b"20").unwrap();
    Bed { _dir: dir, db, t }
}

type Rows = Vec<(u32, i64)>;

fn parse(k: &[u8], v: &[u8]) -> (u32, i64) {
    let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    (s(k).parse().unwrap(), s(v).parse().unwrap())
}

/// `select * from test where pred(value)`: a plain read.
fn select_where(tx: &Txn, t: &Table, pred: impl Fn(i64) -> bool) -> Rows {
    tx.scan(t, ..)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            parse(&k, &v)
        })
        .filter(|&(_, v)| pred(v))
        .collect()
}

fn select(tx: &Txn, t: &Table) -> Rows {
    select_where(tx, t, |_| true)
}

/// `select * from test where id = N`: a plain read.
fn get(tx: &Txn, t: &Table, id: u32) -> Option<i64> {
    let v = tx.get(t, id.to_string().as_bytes()).unwrap()?;
    Some(parse(id.to_string().as_bytes(), &v).1)
}

/// `update test set value = V where id = N` (or an insert).
fn put(tx: &mut Txn, t: &Table, id: u32, value: i64) {
    tx.put(t, id.to_string().as_bytes(), value.to_string().as_bytes())
        .unwrap();
}

/// `update test set value = f(value) where pred(value)` (`f` gives None to
/// delete): InnoDB's locking scan, each row read at its latest committed
/// version with a lock. Returns the rows changed.
fn write_where(
    tx: &mut Txn,
    t: &Table,
    pred: impl Fn(i64) -> bool,
    f: impl Fn(i64) -> Option<i64>,
) -> usize {
    let keys: Vec<Vec<u8>> = t.range(..).unwrap().map(|r| r.unwrap().0).collect();
    let mut n = 0;
    for k in keys {
        let Some(v) = tx.get_for_update(t, &k).unwrap() else {
            continue;
        };
        let (_, v) = parse(&k, &v);
        if pred(v) {
            match f(v) {
                Some(v) => tx.put(t, &k, v.to_string().as_bytes()).unwrap(),
                None => assert!(tx.delete(t, &k).unwrap()),
            }
            n += 1;
        }
    }
    n
}

/// The committed rows now (a read outside any transaction).
fn committed(t: &Table) -> Rows {
    t.range(..)
        .unwrap()
        .map(|r| {
            let (k, v) = r.unwrap();
            parse(&k, &v)
        })
        .collect()
}

/// Run `stmt` on `tx` on a second thread; it must block (on a row lock).
fn blocks<R: Send + 'static>(
    mut tx: Txn,
    stmt: impl FnOnce(&mut Txn) -> R + Send + 'static,
) -> JoinHandle<(Txn, R)> {
    let h = std::thread::spawn(move || {
        let r = stmt(&mut tx);
        (tx, r)
    });
    std::thread::sleep(Duration::from_millis(150));
    assert!(!h.is_finished(), "the statement should block on a row lock");
    h
}

macro_rules! at_both_levels {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn repeatable_read() {
                super::$case(super::RR)
            }
            #[test]
            fn read_committed() {
                super::$case(super::RC)
            }
        }
    )*};
}

at_both_levels!(
    g0,
    g1a,
    g1b,
    g1c,
    otv,
    pmp,
    pmp_write,
    p4,
    p4_for_update,
    g_single,
    g_single_predicate,
    g_single_write_predicate,
    g2_item,
    g2,
);

/// G0, write cycles (dirty writes). InnoDB: prevented at RC and RR (row
/// locks). Keel: prevented, the same way: matches.
fn g0(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    put(&mut t1, &t, 1, 11);
    let h = {
        let t = t.clone();
        blocks(t2, move |t2| put(t2, &t, 1, 12)) // T2 BLOCKS
    };
    put(&mut t1, &t, 2, 21);
    t1.commit().unwrap(); // unblocks T2
    let (mut t2, ()) = h.join().unwrap();
    assert_eq!(committed(&t), [(1, 11), (2, 21)]);
    put(&mut t2, &t, 2, 22);
    t2.commit().unwrap();
    assert_eq!(committed(&t), [(1, 12), (2, 22)], "both rows from T2");
}

/// G1a, aborted reads. InnoDB: prevented at RC and RR. Keel: prevented
/// (writes stay in the write set until commit): matches.
fn g1a(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    put(&mut t1, &t, 1, 101);
    assert_eq!(select(&t2, &t), [(1, 10), (2, 20)]);
    t1.rollback();
    assert_eq!(select(&t2, &t), [(1, 10), (2, 20)]);
    t2.commit().unwrap();
}

/// G1b, intermediate reads. InnoDB: prevented at RC and RR (the final read
/// shows 11 at RC, 10 from the snapshot at RR). Keel: the same: matches.
fn g1b(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    put(&mut t1, &t, 1, 101);
    assert_eq!(select(&t2, &t), [(1, 10), (2, 20)]);
    put(&mut t1, &t, 1, 11);
    t1.commit().unwrap();
    let want = if level == RR { 10 } else { 11 };
    assert_eq!(select(&t2, &t), [(1, want), (2, 20)], "{level}");
    t2.commit().unwrap();
}

/// G1c, circular information flow. InnoDB: prevented at RC and RR. Keel:
/// prevented: matches.
fn g1c(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    put(&mut t1, &t, 1, 11);
    put(&mut t2, &t, 2, 22);
    assert_eq!(get(&t1, &t, 2), Some(20));
    assert_eq!(get(&t2, &t, 1), Some(10));
    t1.commit().unwrap();
    t2.commit().unwrap();
    assert_eq!(committed(&t), [(1, 11), (2, 22)]);
}

/// OTV, observed transaction vanishes. InnoDB: prevented at RC and RR (T3
/// never sees a mix of T1's and T2's rows; at RR its last read still shows
/// T1's, at RC T2's). Keel: the same: matches.
fn otv(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    let t3 = db.begin_with(level);
    put(&mut t1, &t, 1, 11);
    put(&mut t1, &t, 2, 19);
    let h = {
        let t = t.clone();
        blocks(t2, move |t2| put(t2, &t, 1, 12)) // T2 BLOCKS
    };
    t1.commit().unwrap(); // unblocks T2
    let (mut t2, ()) = h.join().unwrap();
    assert_eq!(select(&t3, &t), [(1, 11), (2, 19)]);
    put(&mut t2, &t, 2, 18);
    assert_eq!(select(&t3, &t), [(1, 11), (2, 19)]);
    t2.commit().unwrap();
    let want = if level == RR {
        [(1, 11), (2, 19)]
    } else {
        [(1, 12), (2, 18)]
    };
    assert_eq!(select(&t3, &t), want, "{level}");
    t3.commit().unwrap();
}

/// PMP, predicate-many-preceders, read predicates. InnoDB: prevented at RR
/// (the snapshot), not at RC (the second predicate read returns the new
/// row). Keel: the same: matches.
fn pmp(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    assert_eq!(select_where(&t1, &t, |v| v == 30), []);
    put(&mut t2, &t, 3, 30); // insert
    t2.commit().unwrap();
    let seen = select_where(&t1, &t, |v| v % 3 == 0);
    if level == RR {
        assert_eq!(seen, [], "RR: prevented");
    } else {
        assert_eq!(seen, [(3, 30)], "RC: the anomaly occurs");
    }
    t1.commit().unwrap();
}

/// PMP with write predicates (the example from the PostgreSQL docs).
/// InnoDB: not prevented at RC or RR: T2's `delete where value = 20`
/// re-reads the latest rows once T1 commits and deletes row 1 (now 20);
/// afterwards T2 sees 2 => 20 at RR (its snapshot, "despite rows with value
/// 20 ostensibly being deleted") and 2 => 30 at RC. Keel: the same, since
/// its predicate writes read with `get_for_update` (the latest version):
/// matches.
fn pmp_write(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    assert_eq!(write_where(&mut t1, &t, |_| true, |v| Some(v + 10)), 2);
    assert_eq!(select_where(&t2, &t, |v| v == 20), [(2, 20)]);
    let h = {
        let t = t.clone();
        // T2 BLOCKS (on row 1, locked by T1's update).
        blocks(t2, move |t2| write_where(t2, &t, |v| v == 20, |_| None))
    };
    t1.commit().unwrap(); // unblocks T2
    let (t2, deleted) = h.join().unwrap();
    assert_eq!(deleted, 1, "row 1, now 20, is deleted");
    let want = if level == RR { [(2, 20)] } else { [(2, 30)] };
    assert_eq!(select(&t2, &t), want, "{level}");
    t2.commit().unwrap();
    assert_eq!(committed(&t), [(2, 30)]);
}

/// P4, lost update (read, then write what was read plus one). InnoDB: not
/// prevented at RC or RR (T2's update blocks, then overwrites T1's). Keel:
/// the same: matches. (`p4_for_update`: reading with a lock prevents it.)
fn p4(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    let v1 = get(&t1, &t, 1).unwrap();
    let v2 = get(&t2, &t, 1).unwrap();
    assert_eq!((v1, v2), (10, 10));
    put(&mut t1, &t, 1, v1 + 1);
    let h = {
        let t = t.clone();
        blocks(t2, move |t2| put(t2, &t, 1, v2 + 1)) // T2 BLOCKS
    };
    t1.commit().unwrap();
    let (t2, ()) = h.join().unwrap();
    t2.commit().unwrap();
    assert_eq!(
        committed(&t)[0],
        (1, 11),
        "one of the two increments is lost"
    );
}

/// P4 with `select ... for update` (not a Hermitage case; what InnoDB's
/// documentation recommends): T2's locking read blocks until T1 commits
/// and returns T1's value, so no update is lost, at RC and at RR. Keel:
/// the same: matches.
fn p4_for_update(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let t2 = db.begin_with(level);
    let v1 = t1.get_for_update(&t, b"1").unwrap().unwrap();
    let v1: i64 = String::from_utf8(v1).unwrap().parse().unwrap();
    put(&mut t1, &t, 1, v1 + 1);
    let h = {
        let t = t.clone();
        blocks(t2, move |t2| {
            let v = t2.get_for_update(&t, b"1").unwrap().unwrap();
            let v: i64 = String::from_utf8(v).unwrap().parse().unwrap();
            put(t2, &t, 1, v + 1);
            v
        })
    };
    t1.commit().unwrap();
    let (t2, read) = h.join().unwrap();
    assert_eq!(read, 11, "the locking read sees T1's commit");
    t2.commit().unwrap();
    assert_eq!(committed(&t)[0], (1, 12), "no update lost");
}

/// G-single, read skew. InnoDB: prevented at RR for a read-only T1 (its
/// snapshot shows 2 => 20), not at RC (shows 2 => 18 after 1 => 10).
/// Keel: the same: matches.
fn g_single(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    assert_eq!(get(&t1, &t, 1), Some(10));
    assert_eq!(get(&t2, &t, 1), Some(10));
    assert_eq!(get(&t2, &t, 2), Some(20));
    put(&mut t2, &t, 1, 12);
    put(&mut t2, &t, 2, 18);
    t2.commit().unwrap();
    let want = if level == RR { 20 } else { 18 };
    assert_eq!(get(&t1, &t, 2), Some(want), "{level}");
    t1.commit().unwrap();
}

/// G-single with predicate dependencies. InnoDB: prevented at RR (the
/// second predicate read returns nothing), not at RC (it returns 1 => 12,
/// which the first read saw as 10). Keel: the same: matches.
fn g_single_predicate(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    assert_eq!(select_where(&t1, &t, |v| v % 5 == 0), [(1, 10), (2, 20)]);
    assert_eq!(write_where(&mut t2, &t, |v| v == 10, |_| Some(12)), 1);
    t2.commit().unwrap();
    let seen = select_where(&t1, &t, |v| v % 3 == 0);
    if level == RR {
        assert_eq!(seen, [], "RR: prevented");
    } else {
        assert_eq!(seen, [(1, 12)], "RC: the anomaly occurs");
    }
    t1.commit().unwrap();
}

/// G-single on a write predicate. InnoDB: not prevented at RR (T1's
/// `delete where value = 20` reads the latest rows and deletes nothing,
/// yet T1 then reads 2 => 20 from its snapshot), nor at RC (T1 reads
/// 1 => 10, then 2 => 18). Keel: the same: matches.
fn g_single_write_predicate(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    assert_eq!(get(&t1, &t, 1), Some(10));
    assert_eq!(select(&t2, &t), [(1, 10), (2, 20)]);
    put(&mut t2, &t, 1, 12);
    put(&mut t2, &t, 2, 18);
    t2.commit().unwrap();
    assert_eq!(write_where(&mut t1, &t, |v| v == 20, |_| None), 0);
    let want = if level == RR { 20 } else { 18 };
    assert_eq!(get(&t1, &t, 2), Some(want), "{level}");
    t1.commit().unwrap();
    assert_eq!(committed(&t), [(1, 12), (2, 18)]);
}

/// G2-item, write skew on disjoint writes. InnoDB: not prevented at RC or
/// RR (both commit). Keel: the same (plain reads take no lock): matches.
fn g2_item(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    let both = |tx: &Txn| (get(tx, &t, 1), get(tx, &t, 2));
    assert_eq!(both(&t1), (Some(10), Some(20)));
    assert_eq!(both(&t2), (Some(10), Some(20)));
    put(&mut t1, &t, 1, 11);
    put(&mut t2, &t, 2, 21);
    t1.commit().unwrap();
    t2.commit().unwrap();
    assert_eq!(committed(&t), [(1, 11), (2, 21)], "both committed");
}

/// G2, anti-dependency cycles (write skew on a predicate read). InnoDB:
/// not prevented at RC or RR (plain reads take no next-key locks; only
/// SERIALIZABLE's do). Keel: the same (and it has no gap or next-key locks
/// at all): matches.
fn g2(level: Isolation) {
    let Bed { db, t, .. } = setup();
    let mut t1 = db.begin_with(level);
    let mut t2 = db.begin_with(level);
    assert_eq!(select_where(&t1, &t, |v| v % 3 == 0), []);
    assert_eq!(select_where(&t2, &t, |v| v % 3 == 0), []);
    put(&mut t1, &t, 3, 30);
    put(&mut t2, &t, 4, 42);
    t1.commit().unwrap();
    t2.commit().unwrap();
    let either = db.begin_with(level);
    assert_eq!(
        select_where(&either, &t, |v| v % 3 == 0),
        [(3, 30), (4, 42)]
    );
}
