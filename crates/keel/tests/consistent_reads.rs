#![allow(clippy::unwrap_used)]
//! Consistent reads (InnoDB's multi-versioning), through the public API:
//!
//! - no read sees part of a commit: a commit held between its two ops
//!   (failpoint `commit.between_ops`) is invisible to `Table::get`,
//!   `Table::range`/`range_rev` and transactions' `get`/`scan`/`scan_rev`
//!   at both levels, in one table and across two;
//! - REPEATABLE READ reads one snapshot, taken at the first plain read (not
//!   at begin); READ COMMITTED a fresh one per call; own writes overlay it;
//!   `get_for_update` reads the latest committed version at both levels;
//! - a `Table::range` (or a transaction's scan) iterator keeps the snapshot
//!   of its start while other threads commit, delete and insert;
//! - rows deleted after the snapshot stay visible to it, rows inserted after
//!   it do not;
//! - the `transaction_isolation` option.

mod common;

use std::time::Duration;

use std::thread::JoinHandle;

use keel::failpoint::Hold;
use keel::{Db, Error, Isolation, Options, Table, Txn};

const LEVELS: [Isolation; 2] = [Isolation::RepeatableRead, Isolation::ReadCommitted];

fn opts() -> Options {
    Options {
        lock_wait_timeout: 10.0,
        ..common::small_opts(256)
    }
}

type Rows = Vec<(String, String)>;

fn rows(it: impl Iterator<Item = keel::Result<(Vec<u8>, Vec<u8>)>>) -> Rows {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
    })
    .collect()
}

fn pairs(v: &[(&str, &str)]) -> Rows {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn val(v: Option<Vec<u8>>) -> Option<String> {
    v.map(|v| String::from_utf8(v).unwrap())
}

fn get(t: &Table, k: &str) -> Option<String> {
    val(t.get(k.as_bytes()).unwrap())
}

fn tget(tx: &Txn, t: &Table, k: &str) -> Option<String> {
    val(tx.get(t, k.as_bytes()).unwrap())
}

fn scan(tx: &Txn, t: &Table) -> Rows {
    rows(tx.scan(t, ..).unwrap())
}

/// A reverse scan, its rows put back in ascending order.
fn scan_rev(tx: &Txn, t: &Table) -> Rows {
    rev(rows(tx.scan_rev(t, ..).unwrap()))
}

fn rev(mut r: Rows) -> Rows {
    r.reverse();
    r
}

/// Run `check` while `writer` is held at `commit.between_ops`, then let
/// it go and join it, whatever `check` did.
fn while_held(hold: &Hold, writer: JoinHandle<()>, check: impl FnOnce()) {
    let held = hold.wait_held(Duration::from_secs(5));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(held, "the commit never stopped at `commit.between_ops`");
        check();
    }));
    hold.release();
    writer.join().unwrap();
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}

/// Every kind of plain read of `t` agrees on `want` (ascending rows).
fn all_reads_see(db: &Db, t: &Table, want: &Rows, when: &str) {
    assert_eq!(&rows(t.range(..).unwrap()), want, "Table::range {when}");
    let back = rev(rows(t.range_rev(..).unwrap()));
    assert_eq!(&back, want, "Table::range_rev {when}");
    for (k, v) in want {
        assert_eq!(get(t, k).as_ref(), Some(v), "Table::get({k}) {when}");
    }
    for level in LEVELS {
        let tx = db.begin_with(level);
        assert_eq!(&scan(&tx, t), want, "{level} scan {when}");
        let tx = db.begin_with(level);
        assert_eq!(&scan_rev(&tx, t), want, "{level} scan_rev {when}");
        let tx = db.begin_with(level);
        for (k, v) in want {
            assert_eq!(tget(&tx, t, k).as_ref(), Some(v), "{level} get({k}) {when}");
        }
    }
}

#[test]
fn no_read_sees_part_of_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"a", b"1").unwrap();
    t.put(b"b", b"1").unwrap();
    // An RR transaction whose snapshot predates the commit.
    let early = db.begin_with(Isolation::RepeatableRead);
    assert_eq!(tget(&early, &t, "a").as_deref(), Some("1"));

    let hold = db.failpoint("commit.between_ops");
    let writer = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t, b"a", b"2").unwrap();
            tx.put(&t, b"b", b"2").unwrap();
            tx.commit().unwrap();
        })
    };
    // `a` is applied to the tree now, `b` is not: no read may show either.
    let old = pairs(&[("a", "1"), ("b", "1")]);
    while_held(&hold, writer, || {
        all_reads_see(&db, &t, &old, "while the commit is half applied");
    });
    let new = pairs(&[("a", "2"), ("b", "2")]);
    all_reads_see(&db, &t, &new, "after the commit");
    // The old snapshot is still the old one.
    assert_eq!(scan(&early, &t), old, "RR snapshot from before the commit");
}

#[test]
fn no_read_sees_part_of_a_commit_across_two_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t1 = db.create_table("t1").unwrap();
    let t2 = db.create_table("t2").unwrap();
    t1.put(b"x", b"1").unwrap();
    t2.put(b"y", b"1").unwrap();

    let hold = db.failpoint("commit.between_ops");
    let writer = {
        let (db, t1, t2) = (db.clone(), t1.clone(), t2.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t1, b"x", b"2").unwrap();
            tx.put(&t2, b"y", b"2").unwrap();
            tx.commit().unwrap();
        })
    };
    while_held(&hold, writer, || {
        let one = Some("1".to_string());
        let seen = (get(&t1, "x"), get(&t2, "y"));
        assert_eq!(seen, (one.clone(), one.clone()), "Table::get x, y");
        for level in LEVELS {
            let tx = db.begin_with(level);
            let x = scan(&tx, &t1);
            let y = scan(&tx, &t2);
            assert_eq!((x, y), (pairs(&[("x", "1")]), pairs(&[("y", "1")])));
            assert_eq!(
                (tget(&tx, &t1, "x"), tget(&tx, &t2, "y")),
                (one.clone(), one.clone())
            );
        }
        all_reads_see(&db, &t1, &pairs(&[("x", "1")]), "held (t1)");
        all_reads_see(&db, &t2, &pairs(&[("y", "1")]), "held (t2)");
    });
    all_reads_see(&db, &t1, &pairs(&[("x", "2")]), "after (t1)");
    all_reads_see(&db, &t2, &pairs(&[("y", "2")]), "after (t2)");
}

/// T1 reads k; k changes; T1 reads again: RR keeps 1, RC sees 2. Own
/// writes overlay the snapshot; `get_for_update` reads the latest.
fn repeatable_read(level: Isolation) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"k", b"1").unwrap();
    t.put(b"m", b"1").unwrap();
    let rr = level == Isolation::RepeatableRead;
    let mut t1 = db.begin_with(level);
    assert_eq!(t1.isolation(), level);
    assert_eq!(tget(&t1, &t, "k").as_deref(), Some("1"));

    let mut t2 = db.begin_with(level);
    t2.put(&t, b"k", b"2").unwrap();
    t2.commit().unwrap();
    t.put(b"m", b"2").unwrap(); // an autocommit write too

    let (k, m) = if rr { ("1", "1") } else { ("2", "2") };
    assert_eq!(
        tget(&t1, &t, "k").as_deref(),
        Some(k),
        "{level}: re-read of k"
    );
    assert_eq!(
        tget(&t1, &t, "m").as_deref(),
        Some(m),
        "{level}: first read of m"
    );
    assert_eq!(scan(&t1, &t), pairs(&[("k", k), ("m", m)]), "{level}: scan");
    assert_eq!(scan_rev(&t1, &t), pairs(&[("k", k), ("m", m)]), "{level}");

    // A locking read acts on the latest committed version at both levels
    // (InnoDB's behaviour); it does not move an RR snapshot.
    let latest = val(t1.get_for_update(&t, b"k").unwrap());
    assert_eq!(latest.as_deref(), Some("2"), "{level}: get_for_update");
    assert_eq!(
        tget(&t1, &t, "k").as_deref(),
        Some(k),
        "{level}: after FOR UPDATE"
    );

    // Own writes are seen over the snapshot, by gets and scans.
    t1.put(&t, b"m", b"3").unwrap();
    t1.put(&t, b"n", b"3").unwrap();
    assert_eq!(tget(&t1, &t, "m").as_deref(), Some("3"));
    assert_eq!(
        scan(&t1, &t),
        pairs(&[("k", k), ("m", "3"), ("n", "3")]),
        "{level}: own writes over the snapshot"
    );
    assert!(
        t1.delete(&t, b"k").unwrap(),
        "{level}: k exists (latest: 2)"
    );
    assert_eq!(tget(&t1, &t, "k"), None);
    assert_eq!(scan(&t1, &t), pairs(&[("m", "3"), ("n", "3")]));
    t1.commit().unwrap();
    assert_eq!(rows(t.range(..).unwrap()), pairs(&[("m", "3"), ("n", "3")]));
}

#[test]
fn repeatable_read_keeps_its_snapshot() {
    repeatable_read(Isolation::RepeatableRead);
}

#[test]
fn read_committed_reads_the_latest_commit_each_call() {
    repeatable_read(Isolation::ReadCommitted);
}

#[test]
fn the_snapshot_is_taken_at_the_first_read_not_at_begin() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"k", b"1").unwrap();
    let t1 = db.begin_with(Isolation::RepeatableRead);
    t.put(b"k", b"2").unwrap();
    assert_eq!(tget(&t1, &t, "k").as_deref(), Some("2"));
    t.put(b"k", b"3").unwrap();
    assert_eq!(
        tget(&t1, &t, "k").as_deref(),
        Some("2"),
        "snapshot now fixed"
    );
    // Writes and locking reads are not plain reads: they take no snapshot.
    let mut t3 = db.begin_with(Isolation::RepeatableRead);
    t3.put(&t, b"other", b"x").unwrap();
    assert_eq!(
        val(t3.get_for_update(&t, b"k").unwrap()).as_deref(),
        Some("3")
    );
    t.put(b"k2", b"new").unwrap();
    assert_eq!(tget(&t3, &t, "k2").as_deref(), Some("new"));
    assert_eq!(
        scan(&t3, &t),
        pairs(&[("k", "3"), ("k2", "new"), ("other", "x")])
    );
}

fn value(i: usize, gen: u32) -> String {
    format!("{gen}-{i:04}-{}", "v".repeat(100))
}

/// A range iterator held open while other threads update, delete and
/// insert keeps returning the snapshot of its start.
#[test]
fn an_open_iterator_keeps_the_snapshot_of_its_start() {
    const N: usize = 600; // ~20 leaves of 4 KiB
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let key = |i: usize| format!("k{i:04}");
    for i in 0..N {
        t.put(key(i).as_bytes(), value(i, 0).as_bytes()).unwrap();
    }
    let want: Rows = (0..N).map(|i| (key(i), value(i, 0))).collect();
    let change_all = |gen: u32| {
        // Other threads: update every row in transactions of 10 rows,
        // delete every 7th row, insert a key between each 5th pair.
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            for chunk in (0..N).collect::<Vec<_>>().chunks(10) {
                let mut tx = db.begin();
                for &i in chunk {
                    if i % 7 == 3 {
                        tx.delete(&t, key(i).as_bytes()).unwrap();
                    } else {
                        tx.put(&t, key(i).as_bytes(), value(i, gen).as_bytes())
                            .unwrap();
                    }
                    if i % 5 == 0 {
                        let k = format!("{}x{gen}", key(i));
                        tx.put(&t, k.as_bytes(), b"inserted").unwrap();
                    }
                }
                tx.commit().unwrap();
            }
        })
        .join()
        .unwrap();
    };

    // Table::range, forward and reverse.
    let mut it = t.range(..).unwrap();
    let mut seen = rows(it.by_ref().take(N / 2));
    change_all(1);
    seen.extend(rows(it));
    same(&seen, &want, "Table::range");

    let now = rows(t.range(..).unwrap());
    let mut it = t.range_rev(..).unwrap();
    let mut seen = rows(it.by_ref().take(N / 3));
    change_all(2);
    seen.extend(rows(it));
    same(&rev(seen), &now, "Table::range_rev");

    // A transaction's scan at either level keeps the snapshot of its start.
    let mut now = rows(t.range(..).unwrap());
    for (gen, level) in [
        (3, Isolation::ReadCommitted),
        (4, Isolation::RepeatableRead),
    ] {
        let tx = db.begin_with(level);
        let mut it = tx.scan(&t, ..).unwrap();
        let mut seen = rows(it.by_ref().take(N / 2));
        change_all(gen);
        seen.extend(rows(it));
        same(&seen, &now, &format!("{level} scan"));
        // The next call: RC sees the commits, RR keeps its snapshot.
        let after = rows(t.range(..).unwrap());
        let next = if level == Isolation::ReadCommitted {
            &after
        } else {
            &now
        };
        assert_eq!(&scan(&tx, &t), next, "{level}: the next call");
        now = after;
    }
}

/// `seen` (read through an iterator held open) is `want`.
fn same(seen: &Rows, want: &Rows, what: &str) {
    let diff = match seen.iter().zip(want).position(|(x, y)| x != y) {
        Some(i) => format!("row {i}: got {:?}, want {:?}", seen[i], want[i]),
        None => format!("{} rows, want {}", seen.len(), want.len()),
    };
    assert!(seen == want, "{what} changed under it: {diff}");
}

#[test]
fn deleted_rows_stay_and_inserted_rows_stay_out_of_an_older_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    for k in ["a", "b", "c"] {
        t.put(k.as_bytes(), k.as_bytes()).unwrap();
    }
    let before = pairs(&[("a", "a"), ("b", "b"), ("c", "c")]);
    let rr = db.begin_with(Isolation::RepeatableRead);
    assert_eq!(scan(&rr, &t), before);
    let mut it = t.range(..).unwrap();
    assert_eq!(it.next().unwrap().unwrap().0, b"a");

    let mut w = db.begin();
    assert!(w.delete(&t, b"b").unwrap());
    w.put(&t, b"bb", b"bb").unwrap();
    w.put(&t, b"d", b"d").unwrap();
    w.commit().unwrap();
    assert!(t.delete(b"c").unwrap());
    t.put(b"0", b"0").unwrap();

    assert_eq!(
        tget(&rr, &t, "b").as_deref(),
        Some("b"),
        "deleted after the snapshot"
    );
    assert_eq!(
        tget(&rr, &t, "c").as_deref(),
        Some("c"),
        "deleted after the snapshot"
    );
    assert_eq!(tget(&rr, &t, "bb"), None, "inserted after the snapshot");
    assert_eq!(tget(&rr, &t, "d"), None, "inserted after the snapshot");
    assert_eq!(tget(&rr, &t, "0"), None, "inserted after the snapshot");
    assert_eq!(scan(&rr, &t), before);
    assert_eq!(scan_rev(&rr, &t), before);
    assert_eq!(
        rows(rr.scan(&t, &b"b"[..]..).unwrap()),
        pairs(&[("b", "b"), ("c", "c")])
    );
    assert_eq!(
        rows(it).into_iter().map(|r| r.0).collect::<Vec<_>>(),
        ["b", "c"],
        "an open Table::range"
    );
    // A fresh read sees the changes; so does READ COMMITTED.
    let after = pairs(&[("0", "0"), ("a", "a"), ("bb", "bb"), ("d", "d")]);
    assert_eq!(rows(t.range(..).unwrap()), after);
    let rc = db.begin_with(Isolation::ReadCommitted);
    assert_eq!(scan(&rc, &t), after);
    assert_eq!(tget(&rc, &t, "b"), None);
    // Writes act on the latest version: deleting `b` finds nothing to
    // delete even in the snapshot that still shows it.
    let mut rr = rr;
    assert!(
        !rr.delete(&t, b"b").unwrap(),
        "b is gone in the latest version"
    );
    assert!(
        rr.delete(&t, b"d").unwrap(),
        "d exists in the latest version"
    );
    assert_eq!(tget(&rr, &t, "d"), None, "own delete");
    assert_eq!(tget(&rr, &t, "a").as_deref(), Some("a"));
}

#[test]
fn the_transaction_isolation_option() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(
        db.options().transaction_isolation,
        Isolation::RepeatableRead
    );
    let before = db.begin();
    assert_eq!(before.isolation(), Isolation::RepeatableRead);

    db.set_option("transaction_isolation", "READ-COMMITTED")
        .unwrap();
    assert_eq!(db.options().transaction_isolation, Isolation::ReadCommitted);
    assert_eq!(db.begin().isolation(), Isolation::ReadCommitted);
    assert_eq!(
        before.isolation(),
        Isolation::RepeatableRead,
        "begun before"
    );
    assert_eq!(
        db.begin_with(Isolation::RepeatableRead).isolation(),
        Isolation::RepeatableRead
    );

    for bad in [
        "SERIALIZABLE",
        "serializable",
        "READ-UNCOMMITTED",
        "snapshot",
        "",
    ] {
        match db.set_option("transaction_isolation", bad) {
            Err(Error::Config { key, reason }) => {
                assert_eq!(key, "transaction_isolation", "{bad:?}: {reason}");
            }
            r => panic!("{bad:?}: expected Error::Config, got {r:?}"),
        }
        assert_eq!(db.options().transaction_isolation, Isolation::ReadCommitted);
        assert_eq!(db.begin().isolation(), Isolation::ReadCommitted);
    }
    db.set_option("transaction_isolation", "repeatable_read")
        .unwrap();
    assert_eq!(db.begin().isolation(), Isolation::RepeatableRead);

    // At open too.
    drop(before);
    db.close().unwrap();
    let mut o = opts();
    o.set("transaction_isolation", "READ-COMMITTED").unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.begin().isolation(), Isolation::ReadCommitted);
    let mut o = opts();
    match o.set("transaction_isolation", "SERIALIZABLE") {
        Err(Error::Config { key, .. }) => assert_eq!(key, "transaction_isolation"),
        r => panic!("expected Error::Config, got {r:?}"),
    }
}

/// An update that changes a few bytes of a long row keeps only those in
/// its undo record (a delta of the version that replaced it), and a delete
/// only the old header (the mark keeps the row's bytes). Every older
/// snapshot reads its own version back through a chain of such deltas,
/// mixed with whole versions (an insert over the mark, a new value of
/// other bytes), by `get` and by scans, before and after the database is
/// checked, and after a crash the chains still check.
#[test]
fn snapshots_read_versions_kept_as_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut v: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
    t.put(b"r", &v).unwrap();
    t.put(b"s", b"neighbour").unwrap();
    let mut versions: Vec<Option<Vec<u8>>> = Vec::new();
    let mut views = Vec::new();
    type Change<'a> = &'a dyn Fn(&mut Option<Vec<u8>>);
    let changes: [Change<'_>; 8] = [
        &|v| v.as_mut().unwrap()[0] = b'#',
        &|v| v.as_mut().unwrap()[150] = b'#',
        &|v| v.as_mut().unwrap()[299] = b'#',
        &|v| {
            let v = v.as_mut().unwrap();
            v.splice(100..100, *b"+++");
        },
        &|v| {
            v.as_mut().unwrap().truncate(250);
        },
        &|v| *v = None,
        &|v| *v = Some(b"short".to_vec()),
        &|v| *v = Some(vec![b'z'; 280]),
    ];
    let mut cur = Some(std::mem::take(&mut v));
    let before = db.metrics().snapshot()["trx_undo_delta_records"];
    for change in changes {
        let rr = db.begin_with(Isolation::RepeatableRead);
        assert_eq!(rr.get(&t, b"r").unwrap(), cur);
        versions.push(cur.clone());
        views.push(rr);
        change(&mut cur);
        match &cur {
            Some(v) => {
                t.put(b"r", v).unwrap();
            }
            None => assert!(t.delete(b"r").unwrap()),
        }
    }
    let deltas = db.metrics().snapshot()["trx_undo_delta_records"] - before;
    assert_eq!(
        deltas, 6,
        "the five small changes of a long row and its delete keep deltas"
    );
    for round in 0..2 {
        for (rr, want) in views.iter().zip(&versions) {
            assert_eq!(&rr.get(&t, b"r").unwrap(), want, "round {round}");
            let scanned: Vec<_> = rr.scan(&t, ..).unwrap().map(|r| r.unwrap()).collect();
            let mut expect = Vec::new();
            if let Some(w) = want {
                expect.push((b"r".to_vec(), w.clone()));
            }
            expect.push((b"s".to_vec(), b"neighbour".to_vec()));
            assert_eq!(scanned, expect, "round {round}");
        }
        db.check().unwrap();
    }
    assert_eq!(t.get(b"r").unwrap(), cur);
    drop(views);
    db.simulate_crash();
    let db = Db::open(dir.path(), opts()).unwrap();
    db.check().unwrap();
    assert_eq!(db.table("t").unwrap().get(b"r").unwrap(), cur);
}
