#![allow(clippy::unwrap_used)]
//! `Db::drop_table` and `Table::truncate`:
//!
//! - the rows go, the pages return to the free list (no page leaks once
//!   the next open has freed dropped roots), other tables stay;
//! - DDL as transactions see it: handles of a dropped table fail with
//!   `TableDropped`; a transaction begun before a truncate, or a scan
//!   started before it, fails with `TableChanged`, never reads an emptied
//!   table as its snapshot;
//! - a commit held between its two ops (failpoint `commit.between_ops`)
//!   is never split by a truncate: the truncate waits for it (or gives up
//!   after `lock_wait_timeout`, changing nothing);
//! - a crash at each step of a drop or a truncate (failpoints
//!   `ddl.drop_listed`, `ddl.drop_unnamed`, `ddl.detached`) leaves the
//!   table whole or gone (whole or empty for a truncate), never half, and
//!   the open after it, crashed itself several times, finishes the work
//!   without a leak.

mod common;

use std::time::Duration;

use common::bulk::Bed;
use keel::{Db, Error, Options, Table};

const WAIT: Duration = Duration::from_secs(20);
/// Rows of 300 bytes: about 12 to a 4 KiB leaf, a three-level tree.
const ROWS: u32 = 3_000;

fn opts() -> Options {
    Options {
        lock_wait_timeout: 10.0,
        ..common::small_opts(64)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn fill(t: &Table, n: u32) {
    t.bulk_load((0..n).map(|i| (key(i), vec![i as u8; 300])))
        .unwrap();
}

fn count(t: &Table) -> usize {
    t.range(..)
        .unwrap()
        .filter(|r| r.is_ok() || panic!("{r:?}"))
        .count()
}

/// Reopen (which frees dropped roots), then check every page is in a
/// tree or on the free list; returns the free pages.
fn reopen_without_leak(bed: &Bed, db: Db) -> u32 {
    db.close().unwrap();
    let db = bed.open();
    bed.close_without_leak(db)
}

#[test]
fn drop_frees_the_pages_and_the_name() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let other = db.create_table("other").unwrap();
    other.put(b"k", b"v").unwrap();
    fill(&t, ROWS);
    assert!(t.check().unwrap().height >= 3);
    let in_t = {
        let s = t.check().unwrap();
        s.leaf_pages + s.internal_pages
    };
    let t2 = db.table("t").unwrap();

    db.drop_table("t").unwrap();
    assert!(matches!(db.table("t"), Err(Error::TableNotFound(_))));
    assert_eq!(db.table_names().unwrap(), vec!["other".to_string()]);
    for h in [&t, &t2] {
        let e = h.get(&key(1)).unwrap_err();
        assert!(matches!(e, Error::TableDropped(ref n) if n == "t"), "{e}");
        assert_eq!(e.to_string(), "table `t` was dropped");
        assert!(matches!(h.put(b"a", b"b"), Err(Error::TableDropped(_))));
        assert!(matches!(h.range(..), Err(Error::TableDropped(_))));
        assert!(matches!(h.truncate(), Err(Error::TableDropped(_))));
    }
    assert!(matches!(db.drop_table("t"), Err(Error::TableNotFound(_))));
    assert_eq!(other.get(b"k").unwrap().unwrap(), b"v");
    db.check().unwrap();

    // The name is free again, for an empty table.
    let t = db.create_table("t").unwrap();
    assert_eq!(count(&t), 0);
    drop((t, t2));
    let free = reopen_without_leak(&bed, db);
    assert!(
        free as usize + 2 >= in_t,
        "only {free} pages free after dropping a table of {in_t}"
    );
    let db = bed.open();
    assert_eq!(count(&db.table("t").unwrap()), 0);
    assert_eq!(db.table("other").unwrap().get(b"k").unwrap().unwrap(), b"v");
}

#[test]
fn truncate_empties_the_table_and_it_takes_rows_again() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    fill(&t, ROWS);
    t.truncate().unwrap();
    assert_eq!(count(&t), 0);
    assert_eq!(t.get(&key(5)).unwrap(), None);
    let s = t.check().unwrap();
    assert_eq!((s.height, s.leaf_pages, s.internal_pages), (1, 1, 0));
    // Truncating an empty table is a no-op.
    t.truncate().unwrap();
    t.put(b"again", b"1").unwrap();
    fill(&db.create_table("u").unwrap(), 100);
    drop(t);
    reopen_without_leak(&bed, db);
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(count(&t), 1);
    // A bulk load needs an empty table: the truncated one takes one.
    t.truncate().unwrap();
    fill(&t, ROWS);
    assert_eq!(count(&t), ROWS as usize);
}

#[test]
fn transactions_and_scans_begun_before_the_ddl_fail_rather_than_see_it() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    fill(&t, ROWS);

    let mut reader = db.begin();
    assert!(reader.get(&t, &key(1)).unwrap().is_some());
    let mut writer = db.begin();
    writer.put(&t, b"new", b"row").unwrap();
    let mut scan = t.range(..).unwrap();
    for _ in 0..20 {
        scan.next().unwrap().unwrap();
    }

    t.truncate().unwrap();

    let changed = |r: keel::Result<()>| match r {
        Err(Error::TableChanged(n)) => assert_eq!(n, "t"),
        other => panic!("expected TableChanged, got {other:?}"),
    };
    // The scan fails at its next row instead of ending early.
    changed(scan.next().unwrap().map(drop));
    assert!(scan.next().is_none());
    changed(reader.get(&t, &key(1)).map(drop));
    changed(reader.scan(&t, ..).map(drop));
    changed(reader.put(&t, b"x", b"y"));
    changed(writer.commit());
    // Begun after: sees the empty table and writes to it.
    let mut after = db.begin();
    assert_eq!(after.get(&t, &key(1)).unwrap(), None);
    after.put(&t, b"after", b"1").unwrap();
    after.commit().unwrap();
    assert_eq!(count(&t), 1);

    // A transaction that wrote to a dropped table cannot commit.
    let mut w = db.begin();
    w.put(&t, b"doomed", b"1").unwrap();
    db.drop_table("t").unwrap();
    assert!(matches!(w.commit(), Err(Error::TableDropped(_))));
    drop((scan, reader));
    drop(t);
    reopen_without_leak(&bed, db);
}

#[test]
fn a_commit_in_flight_is_not_split_by_a_truncate() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    t.put(b"a", b"0").unwrap();
    t.put(b"b", b"0").unwrap();
    let hold = db.failpoint("commit.between_ops");
    let committer = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t, b"a", b"1").unwrap();
            tx.put(&t, b"b", b"1").unwrap();
            tx.commit()
        })
    };
    assert!(
        hold.wait_held(WAIT),
        "the commit never reached its second op"
    );
    let truncater = {
        let t = t.clone();
        std::thread::spawn(move || t.truncate())
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!truncater.is_finished(), "the truncate did not wait");
    hold.release();
    committer.join().unwrap().unwrap();
    truncater.join().unwrap().unwrap();
    // The whole commit went with the truncate, not half of it.
    assert_eq!(count(&t), 0);
    drop(t);
    reopen_without_leak(&bed, db);
}

#[test]
fn a_truncate_gives_up_after_lock_wait_timeout_changing_nothing() {
    let bed = Bed::new(Options {
        lock_wait_timeout: 0.3,
        ..opts()
    });
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    t.put(b"a", b"0").unwrap();
    let hold = db.failpoint("commit.between_ops");
    let committer = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t, b"a", b"1").unwrap();
            tx.put(&t, b"b", b"1").unwrap();
            tx.commit()
        })
    };
    assert!(hold.wait_held(WAIT));
    match t.truncate() {
        Err(Error::LockWaitTimeout { table, .. }) => assert_eq!(table, "t"),
        other => panic!("expected LockWaitTimeout, got {other:?}"),
    }
    match db.drop_table("t") {
        Err(Error::LockWaitTimeout { table, .. }) => assert_eq!(table, "t"),
        other => panic!("expected LockWaitTimeout, got {other:?}"),
    }
    hold.release();
    committer.join().unwrap().unwrap();
    assert_eq!(t.get(b"a").unwrap().unwrap(), b"1");
    assert_eq!(t.get(b"b").unwrap().unwrap(), b"1");
    t.put(b"c", b"1").unwrap();
    drop(t);
    reopen_without_leak(&bed, db);
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ddl {
    Drop,
    Truncate,
}

/// Hold `ddl` at `point` on its own thread, crash, then open with power
/// failing under the open after `n` page writes for n in 1..4, then open
/// for good: the table is whole or gone (empty for a truncate), and not
/// a page leaks.
fn crash_at(ddl: Ddl, point: &'static str, must_be_done: bool) {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    db.create_table("other").unwrap().put(b"k", b"v").unwrap();
    fill(&t, ROWS);
    db.flush().unwrap();
    let hold = db.failpoint(point);
    let worker = {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || match ddl {
            Ddl::Drop => db.drop_table("t"),
            Ddl::Truncate => t.truncate(),
        })
    };
    assert!(hold.wait_held(WAIT), "{ddl:?} never reached {point}");
    drop(t);
    bed.crash(db);
    hold.release();
    let _ = worker.join().unwrap();

    let crashed_opens = bed.crash_opens(1..4);
    // Where the DDL's first step was durable, the opens have work to
    // redo and finish, and the power fails under them.
    assert!(
        !must_be_done || crashed_opens > 0,
        "{point}: no open lost power while it ran"
    );
    let db = bed.open();
    let rows = match db.table("t") {
        Ok(t) => Some(count(&t)),
        Err(Error::TableNotFound(_)) => None,
        Err(e) => panic!("{e}"),
    };
    let whole = Some(ROWS as usize);
    match ddl {
        Ddl::Drop if must_be_done => assert_eq!(rows, None, "{point}"),
        Ddl::Drop => assert!(rows.is_none() || rows == whole, "{point}: {rows:?}"),
        Ddl::Truncate if must_be_done => assert_eq!(rows, Some(0), "{point}"),
        Ddl::Truncate => assert!(rows == Some(0) || rows == whole, "{point}: {rows:?}"),
    }
    assert_eq!(db.table("other").unwrap().get(b"k").unwrap().unwrap(), b"v");
    db.check().unwrap();
    reopen_without_leak(&bed, db);
}

#[test]
fn a_crash_after_a_drop_is_listed_leaves_the_table_whole_or_gone() {
    crash_at(Ddl::Drop, "ddl.drop_listed", false);
}

#[test]
fn a_crash_after_a_drop_unnamed_the_table_finishes_the_drop() {
    crash_at(Ddl::Drop, "ddl.drop_unnamed", true);
}

#[test]
fn a_crash_while_a_drop_empties_the_tree_finishes_the_drop() {
    crash_at(Ddl::Drop, "ddl.detached", true);
}

#[test]
fn a_crash_while_a_truncate_empties_the_tree_leaves_it_whole_or_empty() {
    crash_at(Ddl::Truncate, "ddl.detached", false);
}

#[test]
fn ddl_is_refused_while_a_bulk_load_fills_the_table_and_on_a_read_only_open() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let load = common::bulk::HeldLoad::start(&db, &t, 600, 300, |i| (key(i), vec![1; 300]), WAIT);
    assert!(matches!(t.truncate(), Err(Error::BulkLoad { .. })));
    assert!(matches!(db.drop_table("t"), Err(Error::BulkLoad { .. })));
    load.finish().unwrap();
    assert_eq!(count(&t), 600);
    drop(t);
    db.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(64)).unwrap();
    db.create_table("t").unwrap().put(b"k", b"v").unwrap();
    db.close().unwrap();
    let db = Db::open_read_only(dir.path(), common::small_opts(64)).unwrap();
    assert!(matches!(db.drop_table("t"), Err(Error::ReadOnly(_))));
    assert!(matches!(
        db.table("t").unwrap().truncate(),
        Err(Error::ReadOnly(_))
    ));
}

/// Undo records of a dropped table's rows outlive it (a read view held
/// them back); once the next open has freed the table's root, purge must
/// skip them rather than descend from a page that is no tree's root now.
#[test]
fn purge_skips_the_history_of_a_dropped_table() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    for i in 0..200 {
        t.put(&key(i), b"v").unwrap();
    }
    let view = db.begin();
    view.get(&t, &key(0)).unwrap();
    for i in 0..200 {
        t.delete(&key(i)).unwrap();
    }
    assert!(db.history().history_len >= 200);
    db.drop_table("t").unwrap();
    drop((view, t));
    db.close().unwrap();

    let db = bed.open();
    // Purge must not be stuck on the history of the dropped table.
    common::drained(&db, WAIT);
    db.check().unwrap();
    reopen_without_leak(&bed, db);
}

/// Random stress: writers (one-row puts and deletes, and two-row
/// transactions that keep a pair of rows equal) and scanners work on a
/// table while another thread truncates it again and again, and drops and
/// recreates a second one. Every call either works or fails with the DDL
/// errors; a scan never shows a pair half-written; the trees check and no
/// page leaks afterwards.
#[test]
fn writers_and_scanners_beside_repeated_truncates_and_drops() {
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let seed = common::seed("ddl_stress");
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    db.create_table("u").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ddl_error = |e: &Error| {
        matches!(
            e,
            Error::TableChanged(_)
                | Error::TableDropped(_)
                | Error::TableNotFound(_)
                | Error::Deadlock { .. }
                | Error::LockWaitTimeout { .. }
                | Error::TxnAborted
        )
    };
    let mut threads = Vec::new();
    for w in 0..3u64 {
        let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed + w);
            while !stop.load(Ordering::Relaxed) {
                let k = rng.gen_range(0..400u32);
                let r = match rng.gen_range(0..3) {
                    0 => t.put(&key(k), &[w as u8; 200]).map(drop),
                    1 => t.delete(&key(k)).map(drop),
                    _ => {
                        // A pair only transactions write: keys k + 500
                        // and k + 1500 always equal.
                        let mut tx = db.begin();
                        let v = vec![rng.gen::<u8>(); 100];
                        tx.put(&t, &key(k + 500), &v)
                            .and_then(|()| tx.put(&t, &key(k + 1500), &v))
                            .and_then(|()| tx.commit())
                    }
                };
                if let Err(e) = r {
                    assert!(ddl_error(&e), "writer: {e}");
                }
            }
        }));
    }
    {
        let (t, stop) = (t.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut rows = std::collections::BTreeMap::new();
                let mut failed = false;
                for r in t.range(..).unwrap() {
                    match r {
                        Ok((k, v)) => {
                            rows.insert(k, v);
                        }
                        Err(e) => {
                            assert!(ddl_error(&e), "scan: {e}");
                            failed = true;
                            break;
                        }
                    }
                }
                if failed {
                    continue;
                }
                for k in 0..400u32 {
                    assert_eq!(
                        rows.get(&key(k + 500)),
                        rows.get(&key(k + 1500)),
                        "half a pair at {k}"
                    );
                }
            }
        }));
    }
    let mut truncates = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(30));
        t.truncate().unwrap();
        truncates += 1;
        db.drop_table("u").unwrap();
        let u = db.create_table("u").unwrap();
        for i in 0..50 {
            u.put(&key(i), b"u").unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().unwrap();
    }
    assert!(truncates > 10, "only {truncates} truncates");
    db.check().unwrap();
    drop(t);
    reopen_without_leak(&bed, db);
}
