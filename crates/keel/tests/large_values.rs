#![allow(clippy::unwrap_used)]
//! Large values in overflow chains (`lob`'s module doc):
//!
//! - a 10 MiB value through `put`, `get`, a scan, a transaction (its own
//!   read before commit), a clean reopen and a power loss;
//! - the history: a read view begun before an overwrite or a delete still
//!   reads the old large value; once it ends, purge frees the old chain;
//! - bulk load, truncate and drop free the chains with the leaves;
//! - a crash while a commit writes its chains (failpoint `lob.written`),
//!   before the commit record: the next opens, crashed themselves after 1,
//!   2 and 3 page writes, free the chains; a crash after the record but
//!   before the commit's ops are all applied (`commit.between_ops`): the
//!   value survives whole;
//! - every case ends with `Db::check` (which walks every chain) and a
//!   leak check: each page is in a tree, a chain, the undo or the free
//!   list;
//! - a commit's op retried by recovery after its undo record was written
//!   (`commit.undo_appended`): two undo records hold one old chain, freed
//!   once;
//! - a read racing a truncate that frees the chain it is about to read
//!   (`read.lob`) reports the truncate;
//! - the longest key (3,072 bytes) with a large value, in the history and
//!   through a power loss; a 64 MiB value on real files; a hot backup
//!   and a read-only open of a database holding large values;
//! - the limit: one byte past 1 GiB is refused with an error naming it.

mod common;

use std::time::{Duration, Instant};

use common::bulk::Bed;
use keel::{Db, Error, Isolation, Options, Table};

const MIB: usize = 1 << 20;
const WAIT: Duration = Duration::from_secs(30);

fn opts() -> Options {
    Options {
        page_size: 16384,
        buffer_pool_size: 8 * MIB as u64,
        log_file_size: 4 * MIB as u64,
        purge_threads: 1,
        lock_wait_timeout: 20.0,
        ..common::small_opts(512)
    }
}

/// `len` bytes that differ from page to page and from value to value.
fn value(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

fn metric(db: &Db, name: &str) -> u64 {
    db.metrics().get(name).unwrap()
}

/// `Db::check`, then close and check that no page leaked; returns the
/// free pages.
fn checked_close(bed: &Bed, db: Db, t: Table) -> u32 {
    db.check().unwrap();
    drop(t);
    bed.close_without_leak(db)
}

fn assert_value(t: &Table, key: &[u8], want: &[u8]) {
    let got = t.get(key).unwrap().expect("the large value is gone");
    assert!(
        got == want,
        "{} bytes read, {} written",
        got.len(),
        want.len()
    );
}

#[test]
fn a_ten_mib_value_goes_through_put_get_scan_a_transaction_and_a_power_loss() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("docs").unwrap();
    let big = value(1, 10 * MIB);
    assert!(!t.put(b"big", &big).unwrap());
    t.put(b"a-small", b"x").unwrap();
    assert_value(&t, b"big", &big);
    assert!(metric(&db, "lob_chains_written") >= 1);
    assert!(metric(&db, "lob_pages_written") >= (10 * MIB / 16384) as u64);

    // A scan lends the large value like any other.
    let rows: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].0, b"big");
    assert!(rows[1].1 == big);

    // A transaction reads its own large write, then commits it.
    let other = value(2, 10 * MIB + 12_345);
    let mut tx = db.begin();
    tx.put(&t, b"other", &other).unwrap();
    assert!(tx.get(&t, b"other").unwrap().unwrap() == other);
    tx.commit().unwrap();
    db.check().unwrap();

    // A clean reopen, then a power loss right after a commit.
    db.close().unwrap();
    let db = bed.open();
    let t = db.table("docs").unwrap();
    assert_value(&t, b"big", &big);
    let third = value(3, 3 * MIB + 1);
    t.put(b"third", &third).unwrap();
    drop(t);
    bed.crash(db);
    let db = bed.open();
    let t = db.table("docs").unwrap();
    assert_value(&t, b"big", &big);
    assert_value(&t, b"other", &other);
    assert_value(&t, b"third", &third);
    let stats = db.check().unwrap();
    let docs = &stats.iter().find(|(n, _)| n == "docs").unwrap().1;
    assert!(docs.overflow_pages >= 3 * 10 * MIB / 16384 / 2, "{docs:?}");
    drop(t);
    bed.close_without_leak(db);
}

#[test]
fn a_view_reads_the_old_large_value_until_it_ends_then_purge_frees_it() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let v1 = value(1, 300_000);
    let v2 = value(2, 200_000);
    t.put(b"k", &v1).unwrap();
    t.put(b"gone", &v1).unwrap();
    common::drained(&db, WAIT);

    let view = db.begin_with(Isolation::RepeatableRead);
    assert!(view.get(&t, b"k").unwrap().unwrap() == v1);
    // Overwritten by a large value, a small one, and deleted: the view
    // still reads what it read.
    t.put(b"k", &v2).unwrap();
    t.put(b"k", b"small now").unwrap();
    t.put(b"k", &v2).unwrap();
    assert!(t.delete(b"gone").unwrap());
    assert!(view.get(&t, b"k").unwrap().unwrap() == v1);
    assert!(view.get(&t, b"gone").unwrap().unwrap() == v1);
    let seen: Vec<_> = view.scan(&t, ..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|(_, v)| *v == v1));
    db.check().unwrap();
    let freed = metric(&db, "lob_chains_freed");
    view.commit().unwrap();

    common::drained(&db, WAIT);
    // v1 of `k`, the first v2, v1 of `gone`.
    assert_eq!(metric(&db, "lob_chains_freed") - freed, 3);
    assert_value(&t, b"k", &v2);
    assert_eq!(t.get(b"gone").unwrap(), None);
    checked_close(&bed, db, t);
}

#[test]
fn bulk_load_truncate_and_drop_free_the_chains_with_the_leaves() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let rows = |seed: u8| {
        (0..60u32).map(move |i| {
            let len = if i % 3 == 0 {
                40
            } else {
                20_000 + i as usize * 1000
            };
            (
                format!("row{i:04}").into_bytes(),
                value(seed ^ i as u8, len),
            )
        })
    };
    assert_eq!(t.bulk_load(rows(1)).unwrap(), 60);
    for (k, v) in rows(1) {
        assert_value(&t, &k, &v);
    }
    assert!(t.check().unwrap().overflow_pages >= 40);
    db.check().unwrap();
    t.truncate().unwrap();
    assert_eq!(t.check().unwrap().overflow_pages, 0);
    assert_eq!(t.range(..).unwrap().count(), 0);
    assert_eq!(t.bulk_load(rows(2)).unwrap(), 60);
    assert_value(&t, b"row0001", &value(2 ^ 1, 21_000));
    drop(t);
    db.drop_table("t").unwrap();
    db.close().unwrap();
    let db = bed.open();
    let free = bed.close_without_leak(db);
    assert!(
        free >= 80,
        "only {free} pages free after dropping the table"
    );
}

/// Hold a commit of a 5 MiB value at `point` on its own thread, make
/// what it logged so far durable, lose power, then open with power failing under the open after `n` page
/// writes for n in 1..4, then open for good; returns the database.
fn crash_at(point: &'static str, two_ops: bool) -> (Bed, Db, Vec<u8>) {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    t.put(b"before", b"1").unwrap();
    db.flush().unwrap();
    let big = value(7, 5 * MIB);
    let hold = db.failpoint(point);
    let worker = {
        let (db, t, big) = (db.clone(), t.clone(), big.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin();
            tx.put(&t, b"big", &big)?;
            if two_ops {
                tx.put(&t, b"small", b"2")?;
            }
            tx.commit()
        })
    };
    assert!(hold.wait_held(WAIT), "the commit never reached {point}");
    let db = lose_power_while_held(&bed, db, t, &hold, worker);
    (bed, db, big)
}

/// With a commit held at a failpoint (`hold`, on `worker`): another commit
/// syncs the log, so what the held one logged so far is durable; the power
/// fails; the held thread is let go; opens lose power after 1, 2 and 3
/// page writes. Returns the open after those.
fn lose_power_while_held<T>(
    bed: &Bed,
    db: Db,
    t: Table,
    hold: &keel::failpoint::Hold,
    worker: std::thread::JoinHandle<T>,
) -> Db {
    t.put(b"sync", b"3").unwrap();
    drop(t);
    bed.crash(db);
    hold.release();
    let _ = worker.join().unwrap();
    bed.crash_opens(1..4);
    bed.open()
}

#[test]
fn a_crash_while_a_commit_writes_its_chains_frees_them_at_the_next_open() {
    let (bed, db, _) = crash_at("lob.written", false);
    let t = db.table("t").unwrap();
    assert_eq!(t.get(b"big").unwrap(), None);
    assert_eq!(t.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    let free = checked_close(&bed, db, t);
    // The chain's first mtr (16 pages) was durable.
    assert!(
        free >= 16,
        "the orphan chain's pages were not freed ({free} free)"
    );
}

#[test]
fn a_crash_after_the_commit_record_keeps_the_large_value_whole() {
    let (bed, db, big) = crash_at("commit.between_ops", true);
    let t = db.table("t").unwrap();
    assert_value(&t, b"big", &big);
    assert_eq!(t.get(b"small").unwrap().as_deref(), Some(&b"2"[..]));
    checked_close(&bed, db, t);
}

#[test]
fn a_value_past_the_limit_is_refused_with_the_limit_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    // Allocated lazily by the OS: never touched, since the size is checked
    // first.
    let huge = vec![0u8; (1 << 30) + 1];
    let err = t.put(b"k", &huge).unwrap_err();
    assert!(
        matches!(err, Error::ValueTooLarge { len, max } if len == huge.len() && max == 1 << 30),
        "{err:?}"
    );
    assert!(err.to_string().contains("1073741824"), "{err}");
    let mut tx = db.begin();
    assert!(matches!(
        tx.put(&t, b"k", &huge),
        Err(Error::ValueTooLarge { .. })
    ));
    drop(tx);
    assert!(matches!(
        t.bulk_load([(b"k".to_vec(), huge)]),
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(t.get(b"k").unwrap(), None);
}

/// A scan that copied a row pointing to a large value, then finds the
/// chain freed by a truncate before it reads it (failpoint `read.lob`),
/// reports the truncate, not corruption; so does a point read.
#[test]
fn a_read_racing_a_truncate_for_a_large_value_reports_the_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    t.put(b"a", &value(1, 100_000)).unwrap();
    t.put(b"b", &value(2, 100_000)).unwrap();
    for point_read in [false, true] {
        let hold = db.failpoint("read.lob");
        let reader = {
            let t = t.clone();
            std::thread::spawn(move || {
                if point_read {
                    t.get(b"b").map(|_| ())
                } else {
                    t.range(..).unwrap().try_for_each(|r| r.map(drop))
                }
            })
        };
        assert!(hold.wait_held(WAIT), "the read never reached its chain");
        t.truncate().unwrap();
        hold.release();
        let err = reader.join().unwrap().unwrap_err();
        assert!(matches!(err, Error::TableChanged(_)), "{err:?}");
        t.put(b"b", &value(3, 100_000)).unwrap();
    }
    db.check().unwrap();
}

fn large_row(i: u32) -> (Vec<u8>, Vec<u8>) {
    (format!("row{i:05}").into_bytes(), value(i as u8, 20_000))
}

/// A crash while a bulk load of large values runs (held at `bulk.leaf`
/// with leaves written and chains beyond them): the next opens, crashed
/// themselves, free the bundle's chains and the hidden tree; the table is
/// empty and no page leaks.
#[test]
fn a_crash_during_a_bulk_load_of_large_values_frees_its_chains() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let held = common::bulk::HeldLoad::start(&db, &t, 700, 500, large_row, WAIT);
    // Another commit syncs the log: the load's pages so far are durable.
    db.create_table("other").unwrap().put(b"s", b"1").unwrap();
    drop(t);
    bed.crash(db);
    let _ = held.finish();
    bed.crash_opens(1..4);
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(t.range(..).unwrap().count(), 0);
    let free = checked_close(&bed, db, t);
    assert!(
        free >= 500,
        "only {free} pages free after the load was dropped"
    );
}

/// The size the limit is meant for: a 64 MiB value on the default 16 KiB
/// pages, on real files, through a put, a get, a close and a reopen, with
/// a small pool and log (the value is 8 times the pool and 4 times the
/// log). Prints the rates (no assertion on them: timings belong in
/// benchmarks).
#[test]
fn a_64_mib_value_on_real_files_round_trips_through_a_small_pool_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        buffer_pool_size: 8 * MIB as u64,
        log_file_size: 8 * MIB as u64,
        log_files_in_group: 2,
        flush_method: "nosync".parse().unwrap(),
        ..Options::default()
    };
    let big = value(64, 64 * MIB);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let t0 = Instant::now();
    t.put(b"k", &big).unwrap();
    let put = t0.elapsed();
    let t0 = Instant::now();
    assert_value(&t, b"k", &big);
    let get = t0.elapsed();
    drop(t);
    db.close().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.table("t").unwrap();
    let t0 = Instant::now();
    assert_value(&t, b"k", &big);
    let cold = t0.elapsed();
    db.check().unwrap();
    let rate = |d: Duration| 64.0 / d.as_secs_f64();
    eprintln!(
        "64 MiB value: put {put:?} ({:.0} MiB/s), get {get:?} ({:.0} MiB/s), get after \
         reopen {cold:?} ({:.0} MiB/s)",
        rate(put),
        rate(get),
        rate(cold)
    );
}

/// A crash between an overwrite's undo record (holding the old large
/// value's pointer) and the row (failpoint `commit.undo_appended`): the
/// commit is durable, so recovery applies it again and appends a second
/// undo record holding the same old version. Purge frees the old chain
/// once (the second free finds it gone), the checks count it once, and
/// no page leaks.
#[test]
fn a_crash_between_an_undo_record_and_its_row_frees_the_old_chain_once() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let (v1, v2) = (value(1, 100_000), value(2, 100_000));
    t.put(b"k", &v1).unwrap();
    let hold = db.failpoint("commit.undo_appended");
    let worker = {
        let (t, v2) = (t.clone(), v2.clone());
        std::thread::spawn(move || t.put(b"k", &v2))
    };
    assert!(hold.wait_held(WAIT), "the overwrite never reached its row");
    let db = lose_power_while_held(&bed, db, t, &hold, worker);
    let t = db.table("t").unwrap();
    assert_value(&t, b"k", &v2);
    db.check().unwrap();
    common::drained(&db, WAIT);
    assert_value(&t, b"k", &v2);
    checked_close(&bed, db, t);
}

/// The same crash when the new value is small: the commit's record is then
/// keys only, and recovery rolls it back instead (`txn::commit`, "Rolling
/// back a commit a crash cut short"). The row was never written and keeps
/// the large value, but the undo record appended before the crash holds
/// that very version, and purge frees the chain the record names: the
/// rollback gives the row a copy in a chain of its own. After purge has
/// drained, the large value is still whole and no page leaks.
#[test]
fn a_crash_between_an_undo_record_and_its_row_keeps_the_old_large_value_whole() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let v1 = value(1, 100_000);
    t.put(b"k", &v1).unwrap();
    let hold = db.failpoint("commit.undo_appended");
    let worker = {
        let t = t.clone();
        std::thread::spawn(move || t.put(b"k", b"small"))
    };
    assert!(hold.wait_held(WAIT), "the overwrite never reached its row");
    let db = lose_power_while_held(&bed, db, t, &hold, worker);
    let t = db.table("t").unwrap();
    assert_value(&t, b"k", &v1);
    db.check().unwrap();
    common::drained(&db, WAIT);
    assert_value(&t, b"k", &v1);
    checked_close(&bed, db, t);
}

/// The longest key (3,072 bytes on 16 KiB pages) with a large value: in
/// the history a view reads, in the undo records, through a power loss and
/// recovery, and in the checks.
#[test]
fn the_longest_key_with_a_large_value_through_history_and_a_power_loss() {
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let key = |c: u8| vec![c; 3072];
    let (v1, v2) = (value(1, 50_000), value(2, 70));
    t.put(&key(b'a'), &v1).unwrap();
    let view = db.begin_with(Isolation::RepeatableRead);
    assert!(view.get(&t, &key(b'a')).unwrap().unwrap() == v1);
    t.put(&key(b'a'), &v2).unwrap();
    assert!(view.get(&t, &key(b'a')).unwrap().unwrap() == v1);
    assert_eq!(t.get(&key(b'a')).unwrap().unwrap(), v2);
    db.check().unwrap();
    view.commit().unwrap();
    t.put(&key(b'b'), &v1).unwrap();
    drop(t);
    bed.crash(db);
    bed.crash_opens(1..3);
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(t.get(&key(b'a')).unwrap().unwrap(), v2);
    assert_value(&t, &key(b'b'), &v1);
    common::drained(&db, WAIT);
    checked_close(&bed, db, t);
}

/// A value that says what it is: 8 bytes of seed, then bytes derived from
/// it, `len` in all; `intact` checks one.
fn tagged(seed: u64, len: usize) -> Vec<u8> {
    let mut v = seed.to_le_bytes().to_vec();
    v.extend((8..len.max(8)).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64) % 251) as u8));
    v
}

fn intact(v: &[u8]) -> bool {
    v.len() >= 8 && {
        let seed = u64::from_le_bytes(v[..8].try_into().unwrap());
        tagged(seed, v.len()) == v
    }
}

/// Random stress, 3 s: two writers commit pairs of rows that always hold
/// the same value (small or up to 200 KiB, so chains come and go), a
/// reader checks in snapshots that every value is whole and each pair
/// equal, a scanner does the same over the whole table, purge frees the
/// old chains meanwhile; then the checks and the leak check.
#[test]
fn random_stress_of_large_values_with_snapshots_and_purge() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let seed = common::seed("random_stress_of_large_values_with_snapshots_and_purge");
    let bed = Bed::new(opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let pairs = 6u64;
    for p in 0..pairs {
        let v = tagged(p, 100);
        let mut tx = db.begin();
        tx.put(&t, format!("a{p}").as_bytes(), &v).unwrap();
        tx.put(&t, format!("b{p}").as_bytes(), &v).unwrap();
        tx.commit().unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2u64 {
        let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut x = seed ^ (w + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let p = x % pairs;
                let len = if x.is_multiple_of(3) {
                    50
                } else {
                    (x % (200 << 10)) as usize + 5000
                };
                let v = tagged(x, len);
                let mut tx = db.begin();
                let r = tx
                    .put(&t, format!("a{p}").as_bytes(), &v)
                    .and_then(|()| tx.put(&t, format!("b{p}").as_bytes(), &v));
                match r.and_then(|()| tx.commit()) {
                    Ok(()) => n += 1,
                    Err(keel::Error::Deadlock { .. } | keel::Error::LockWaitTimeout { .. }) => {}
                    Err(e) => panic!("writer {w}: {e}"),
                }
            }
            n
        }));
    }
    let reader = {
        let (db, t, stop) = (db.clone(), t.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut checked = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let view = db.begin_with(Isolation::RepeatableRead);
                for p in 0..pairs {
                    let a = view.get(&t, format!("a{p}").as_bytes()).unwrap().unwrap();
                    let b = view.get(&t, format!("b{p}").as_bytes()).unwrap().unwrap();
                    assert!(intact(&a) && a == b, "pair {p} split or torn");
                    checked += 1;
                }
                let rows: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap()).collect();
                assert_eq!(rows.len() as u64, 2 * pairs);
                for (pa, pb) in rows[..pairs as usize].iter().zip(&rows[pairs as usize..]) {
                    assert!(intact(&pa.1) && pa.1 == pb.1, "a scan saw a pair split");
                }
                view.commit().unwrap();
            }
            checked
        })
    };
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let commits: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
    let checked = reader.join().unwrap();
    assert!(
        commits > 20 && checked > 20,
        "{commits} commits, {checked} pairs read"
    );
    assert!(metric(&db, "lob_chains_written") > 20);
    common::drained(&db, WAIT);
    assert!(metric(&db, "lob_chains_freed") > 10);
    checked_close(&bed, db, t);
}

/// A hot backup copies the chains like any page (its copy recovers and
/// checks whole), and a read-only open reads large values, writing
/// nothing.
#[test]
fn a_backup_and_a_read_only_open_carry_large_values() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        flush_method: "nosync".parse().unwrap(),
        ..opts()
    };
    let db = Db::open(dir.path().join("db"), o.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let (v1, v2) = (value(1, 2 * MIB), value(2, 300_000));
    t.put(b"a", &v1).unwrap();
    t.put(b"b", &v2).unwrap();
    let copy = dir.path().join("copy");
    db.backup(&copy).unwrap();
    drop(t);
    db.close().unwrap();
    for d in [dir.path().join("db"), copy] {
        let db = Db::open(&d, o.clone()).unwrap();
        db.check().unwrap();
        db.close().unwrap();
        let db = Db::open_read_only(&d, o.clone()).unwrap();
        let t = db.table("t").unwrap();
        assert_value(&t, b"a", &v1);
        assert_value(&t, b"b", &v2);
        assert!(matches!(t.put(b"c", &v2), Err(Error::ReadOnly(_))));
        db.check().unwrap();
    }
}
