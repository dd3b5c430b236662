#![allow(clippy::unwrap_used)]
//! `Table::bulk_load`: a tree built bottom-up under a hidden root and
//! published by one mini-transaction (see `btree::bulk`).
//!
//! - A model test: a random sorted set bulk-loaded at a random fill factor,
//!   then random puts, deletes, gets, scans and reloads against a
//!   `BTreeMap`, with a close and reopen in the middle, on a pool of 40
//!   pages.
//! - Crashes (the faulty in-memory file system, unsynced writes dropped):
//!   in the middle of a load (the hidden tree only in the log, checkpointed
//!   into the data files, or whatever happened to be durable), while the
//!   next open drops the hidden tree (twice), and right after a load
//!   returned `Ok` at `flush_log_at_trx_commit` 0 and 2.
//! - A row written into the table while a load is held makes it fail and
//!   stays; so do rows that split the root meanwhile, with or without a
//!   crash.
//! - The errors: unsorted keys, a non-empty table, a second load at once,
//!   entries too large.
//!
//! No page may leak: after every scenario the database is closed and the
//! pages in use according to the space header of `data-0.keel`, read
//! through `keel::format` (high-water mark − 1 − free pages; page 0 is the
//! header itself), must equal the pages of the trees as `Db::check` counts
//! them, the catalog included. Where a hidden tree was dropped, the free
//! list must also hold at least its leaves, which shows it was there.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use common::bulk::{close_without_leak, Bed, HeldLoad};
use keel::format::data;
use keel::{Db, Error, Options, Table};
use proptest::prelude::*;

const PAGE: usize = 4096;
/// The largest value a table keeps in its leaf: a quarter page less the
/// 15-byte version header every row carries (longer ones go to overflow
/// pages: `large_values.rs`).
const MAX_VALUE: usize = PAGE / 4 - 15;
const WAIT: Duration = Duration::from_secs(20);

/// Options of the crash tests: 4 KiB pages, a pool of 64 pages (the hidden
/// trees are hundreds of pages, so the cleaners and evictions write them),
/// a log of two 1 MiB files.
fn crash_opts() -> Options {
    common::small_opts(64)
}

// ---------------------------------------------------------------------------
// Rows of the crash and concurrency tests

/// Rows per leaf at fill factor 100: three rows of 4 + 208 + 1000 bytes and
/// their slots fill 3642 of the 3799 bytes a leaf takes; a fourth does not
/// fit.
const ROWS_PER_LEAF: u32 = 3;

/// Row `i`: a 208-byte key with a long common prefix, so separators are
/// long too (17 to an internal node: a 300-leaf tree is 4 levels high),
/// and a 1000-byte value.
fn row(i: u32) -> (Vec<u8>, Vec<u8>) {
    let mut k = vec![b'p'; 200];
    k.extend_from_slice(format!("{i:08}").as_bytes());
    let v = (0..1000u32)
        .map(|j| (i.wrapping_mul(31) ^ j) as u8)
        .collect();
    (k, v)
}

fn all_rows(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    t.range(..).unwrap().map(|r| r.unwrap()).collect()
}

fn assert_rows(t: &Table, n: u32) {
    let got = all_rows(t);
    assert_eq!(got.len(), n as usize, "rows in `{}`", t.name());
    for (i, r) in got.into_iter().enumerate() {
        assert!(r == row(i as u32), "row {i} of `{}` differs", t.name());
    }
}

fn bulk_error(r: keel::Result<u64>) -> (String, String) {
    match r {
        Err(Error::BulkLoad { table, reason }) => (table, reason),
        other => panic!("expected Error::BulkLoad, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// 1. Model test

/// Variable-length keys that sort like their numbers (the first 8 bytes
/// differ), 8 to 207 bytes.
fn mkey(k: u16) -> Vec<u8> {
    let mut v = format!("key{k:05}").into_bytes();
    v.extend(std::iter::repeat_n(b'x', (usize::from(k) * 7) % 200));
    v
}

fn mvalue(k: u16, len: usize, gen: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (usize::from(k) * 31 + i * 7 + gen) as u8)
        .collect()
}

/// Bytes of cells and slots a bulk-loaded node may hold at `fill_factor`
/// on 4 KiB pages, as `Options::fill_factor` documents it (InnoDB's
/// `innodb_fill_factor`; 100 still leaves 1/16 free), or more only where a
/// node must hold more: a leaf its one entry, a node above its two
/// separators. `rows` are the rows loaded: a stored entry is its key, its
/// value with the 15-byte version header, 4 bytes of cell header and a
/// 2-byte slot; a separator is no longer than a key, with a 6-byte cell
/// header and a slot.
fn fill_bytes<K: AsRef<[u8]>, V: AsRef<[u8]>>(fill_factor: u8, rows: &[(K, V)]) -> usize {
    let usable = PAGE - 44;
    let want = usable * usize::from(fill_factor) / 100;
    let entry = rows
        .iter()
        .map(|(k, v)| 4 + k.as_ref().len() + v.as_ref().len() + 15 + 2)
        .max()
        .unwrap_or(0);
    let key = rows
        .iter()
        .map(|(k, _)| k.as_ref().len())
        .max()
        .unwrap_or(0);
    want.min(usable - usable / 16)
        .max(entry)
        .max(2 * (6 + key + 2))
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Delete(u16),
    Get(u16),
    Scan(u16, u16, bool),
    /// Delete every row, then bulk-load `n` rows: keys `start + i * step`.
    Reload {
        start: u16,
        step: u16,
        n: u16,
    },
    /// A bulk load into the (usually non-empty) table.
    LoadIntoFull,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        100 => (0u16..6000, 0usize..=MAX_VALUE).prop_map(|(k, l)| Op::Put(k, l)),
        50 => (0u16..6000).prop_map(Op::Delete),
        30 => (0u16..6000).prop_map(Op::Get),
        20 => (0u16..6000, 0u16..6000, any::<bool>())
            .prop_map(|(a, b, r)| Op::Scan(a.min(b), a.max(b), r)),
        // Rare: it deletes every row one by one.
        2 => (0u16..3000, 1u16..4, 0u16..1000)
            .prop_map(|(start, step, n)| Op::Reload { start, step, n }),
        3 => Just(Op::LoadIntoFull),
    ]
}

fn scan(t: &Table, lo: &[u8], hi: &[u8], rev: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let r = if rev {
        t.range_rev(lo..=hi).unwrap()
    } else {
        t.range(lo..=hi).unwrap()
    };
    r.map(|r| r.unwrap()).collect()
}

fn run_model(bulk: BTreeMap<u16, usize>, fill_factor: u8, ops: Vec<Op>) {
    let mut opts = common::small_opts(40);
    opts.fill_factor = fill_factor;
    let bed = Bed::new(opts);
    let mut db = bed.open();
    let mut t = db.create_table("t").unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = bulk
        .iter()
        .map(|(&k, &len)| (mkey(k), mvalue(k, len, 0)))
        .collect();
    let n = t.bulk_load(model.iter()).unwrap();
    assert_eq!(n, model.len() as u64);
    let s = t.check().unwrap();
    assert_eq!(s.entries, model.len());
    let loaded: Vec<_> = model.iter().collect();
    let bound = fill_bytes(fill_factor, &loaded) as f64 / (PAGE - 44) as f64;
    assert!(
        s.fill <= bound + 1e-9,
        "fill factor {fill_factor}: nodes {:.3} full, at most {bound:.3} allowed ({s:?})",
        s.fill
    );
    let reopen_at = ops.len() / 2;
    for (gen, op) in ops.into_iter().enumerate() {
        if gen == reopen_at {
            drop(t);
            db.close().unwrap();
            db = bed.open();
            t = db.table("t").unwrap();
        }
        match op {
            Op::Put(k, len) => {
                let v = mvalue(k, len, gen + 1);
                let replaced = t.put(&mkey(k), &v).unwrap();
                assert_eq!(replaced, model.insert(mkey(k), v).is_some());
            }
            Op::Delete(k) => {
                assert_eq!(
                    t.delete(&mkey(k)).unwrap(),
                    model.remove(&mkey(k)).is_some()
                )
            }
            Op::Get(k) => assert_eq!(t.get(&mkey(k)).unwrap(), model.get(&mkey(k)).cloned()),
            Op::Scan(a, b, rev) => {
                let (lo, hi) = (mkey(a), mkey(b));
                let mut want: Vec<_> = model
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Included(&hi)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if rev {
                    want.reverse();
                }
                assert_eq!(scan(&t, &lo, &hi, rev), want);
            }
            Op::Reload { start, step, n } => {
                for k in std::mem::take(&mut model).into_keys() {
                    assert!(t.delete(&k).unwrap());
                }
                let rows: BTreeMap<Vec<u8>, Vec<u8>> = (0..n)
                    .map(|i| start + i * step)
                    .take_while(|&k| k < 6000)
                    .map(|k| {
                        (
                            mkey(k),
                            mvalue(k, usize::from(k) * 13 % (MAX_VALUE + 1), gen + 1),
                        )
                    })
                    .collect();
                // An emptied table takes a bulk load again.
                assert_eq!(t.bulk_load(rows.iter()).unwrap(), rows.len() as u64);
                model = rows;
            }
            Op::LoadIntoFull => {
                let r = t.bulk_load([(b"a".to_vec(), b"b".to_vec())]);
                if model.is_empty() {
                    assert_eq!(r.unwrap(), 1);
                    model.insert(b"a".to_vec(), b"b".to_vec());
                } else {
                    let (table, reason) = bulk_error(r);
                    assert_eq!(table, "t");
                    assert!(reason.contains("not empty"), "{reason}");
                }
            }
        }
    }
    assert_eq!(all_rows(&t), model.into_iter().collect::<Vec<_>>());
    db.check().unwrap();
    drop(t);
    bed.close_without_leak(db);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn bulk_loaded_table_matches_model_under_eviction(
        bulk in proptest::collection::btree_map(0u16..6000, 0usize..=MAX_VALUE, 0..3000),
        fill_factor in 10u8..=100,
        ops in proptest::collection::vec(op(), 300..1500),
    ) {
        run_model(bulk, fill_factor, ops);
    }
}

/// Rows of 64 bytes fill the nodes to the fill factor (within a row), and
/// a fill factor set at run time applies to the next load.
#[test]
fn leaves_are_filled_to_the_fill_factor() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_opts(256)).unwrap();
    let rows = |n: u32| (0..n).map(|i| (i.to_be_bytes(), [0x5au8; 54]));
    for (i, ff) in [100u8, 70, 50, 30].into_iter().enumerate() {
        db.set_option("fill_factor", &ff.to_string()).unwrap();
        let t = db.create_table(&format!("t{i}")).unwrap();
        assert_eq!(t.bulk_load(rows(20_000)).unwrap(), 20_000);
        let s = t.check().unwrap();
        let loaded: Vec<_> = rows(1).collect();
        let bound = fill_bytes(ff, &loaded) as f64 / (PAGE - 44) as f64;
        assert!(
            s.fill <= bound + 1e-9 && s.fill >= bound - 0.03,
            "fill factor {ff}: nodes {:.3} full, want {bound:.3} ({s:?})",
            s.fill
        );
        let got: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap().0).collect();
        let want: Vec<_> = rows(20_000).map(|(k, _)| k.to_vec()).collect();
        assert_eq!(got, want);
    }
    close_without_leak(db, || {
        std::fs::read(dir.path().join(data::file_name(0))).unwrap()
    });
}

// ---------------------------------------------------------------------------
// 2. A crash in the middle of a load

/// What is made durable of the hidden tree before the power fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BeforeCrash {
    /// Nothing on purpose: the log as far as the evictions synced it.
    Nothing,
    /// The log synced to its end: recovery rebuilds the whole hidden tree.
    FlushLog,
    /// Every page written and a checkpoint taken: the hidden tree is in the
    /// data files, nothing to redo.
    Checkpoint,
}

/// Rows of the crash tests' load, and the row that arms the hold: 299
/// leaves written when it holds.
const N: u32 = 1200;
const HOLD_AT: u32 = 900;
const LEAVES_AT_HOLD: u32 = HOLD_AT / ROWS_PER_LEAF - 1;

fn crash_in_the_middle_of_a_load(before: BeforeCrash) {
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    db.create_table("other").unwrap().put(b"k", b"v").unwrap();
    let load = HeldLoad::start(&db, &t, N, HOLD_AT, row, WAIT);
    // Readers see an empty table meanwhile.
    assert_eq!(all_rows(&t), vec![]);
    match before {
        BeforeCrash::Nothing => {}
        BeforeCrash::FlushLog => db.flush_log().unwrap(),
        BeforeCrash::Checkpoint => db.flush().unwrap(),
    }
    drop(t);
    bed.crash(db);
    assert!(
        load.finish().is_err(),
        "a load on a crashed engine succeeded"
    );

    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(
        all_rows(&t),
        vec![],
        "{before:?}: rows of an unpublished load"
    );
    assert_eq!(t.get(&row(0).0).unwrap(), None);
    assert_eq!(
        db.table("other").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
    drop(t);
    let free = bed.close_without_leak(db);
    if before != BeforeCrash::Nothing {
        assert!(
            free >= LEAVES_AT_HOLD,
            "{before:?}: only {free} pages free: the hidden tree of {LEAVES_AT_HOLD} leaves \
             was not there to drop"
        );
    }

    // The table takes the same load again, in the pages freed.
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(t.bulk_load((0..N).map(row)).unwrap(), u64::from(N));
    assert_rows(&t, N);
    // What the hidden tree was at the crash, but 400 leaves: as deep.
    assert_eq!(t.check().unwrap().height, 4);
    drop(t);
    bed.close_without_leak(db);
}

#[test]
fn crash_mid_load_with_nothing_flushed_leaves_the_table_empty() {
    crash_in_the_middle_of_a_load(BeforeCrash::Nothing);
}

#[test]
fn crash_mid_load_with_the_log_synced_leaves_the_table_empty() {
    crash_in_the_middle_of_a_load(BeforeCrash::FlushLog);
}

#[test]
fn crash_mid_load_with_the_hidden_tree_checkpointed_leaves_the_table_empty() {
    crash_in_the_middle_of_a_load(BeforeCrash::Checkpoint);
}

// ---------------------------------------------------------------------------
// 3. A crash right after the load returned

fn crash_right_after_the_load(flush_log_at_trx_commit: u8) {
    let mut opts = crash_opts();
    opts.flush_log_at_trx_commit = flush_log_at_trx_commit;
    let bed = Bed::new(opts);
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    // Durable before the load: a crash must not lose the table itself.
    db.flush().unwrap();
    assert_eq!(t.bulk_load((0..N).map(row)).unwrap(), u64::from(N));
    drop(t);
    bed.crash(db);

    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_rows(&t, N);
    db.check().unwrap();
    drop(t);
    bed.close_without_leak(db);
}

#[test]
fn a_returned_load_survives_a_crash_at_flush_log_at_trx_commit_0() {
    crash_right_after_the_load(0);
}

#[test]
fn a_returned_load_survives_a_crash_at_flush_log_at_trx_commit_2() {
    crash_right_after_the_load(2);
}

// ---------------------------------------------------------------------------
// 4. A crash while the next open drops the hidden tree

/// A load of 4500 rows is held before its last leaf (1499 leaves written),
/// checkpointed and crashed. The next open, dropping the hidden tree, loses
/// power after 200 page writes (a pool of 64 pages writes the freed pages
/// back as it goes, syncing the log of the drop that far first), twice; the
/// third open finishes the drop from where the second stopped.
#[test]
fn crashes_while_the_open_drops_a_hidden_tree_leave_the_table_empty() {
    const ROWS: u32 = 4500;
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let load = HeldLoad::start(&db, &t, ROWS, ROWS - 1, row, WAIT);
    db.flush().unwrap();
    drop(t);
    bed.crash(db);
    assert!(load.finish().is_err());

    for round in 0..2 {
        let trigger = bed.fs.arm("/data-.write:crash", 200).unwrap();
        let opened = bed.try_open();
        assert!(
            trigger.fired() == 1,
            "round {round}: the open wrote only {} pages",
            trigger.matched()
        );
        bed.fs.disarm();
        // An open that succeeded although the power failed under it would
        // have had its drop end first: not the case this test is about.
        assert!(
            opened.is_err(),
            "round {round}: the open succeeded although the power failed under it"
        );
    }

    let db = bed.open();
    // The crashed drops had synced part of their work: this open redid it
    // and went on from there.
    assert!(db.metrics().get("recovery_page_records_applied").unwrap() > 0);
    let t = db.table("t").unwrap();
    assert_eq!(all_rows(&t), vec![]);
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(free >= ROWS / ROWS_PER_LEAF - 1, "only {free} pages free");
}

// ---------------------------------------------------------------------------
// 5. Writes into the table while it loads

/// One row put while the load is held: the load fails, the row stays.
#[test]
fn a_row_written_during_the_load_makes_it_fail_and_stays() {
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let load = HeldLoad::start(&db, &t, N, HOLD_AT, row, WAIT);
    assert_eq!(all_rows(&t), vec![]);
    assert!(!t.put(b"concurrent", b"row").unwrap());
    db.check().unwrap();
    let (table, reason) = bulk_error(load.finish());
    assert_eq!(table, "t");
    assert!(
        reason.contains("rows were written into the table while it loaded"),
        "{reason}"
    );
    assert_eq!(
        all_rows(&t),
        vec![(b"concurrent".to_vec(), b"row".to_vec())]
    );
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(free > LEAVES_AT_HOLD, "only {free} pages free");

    // The table is an ordinary one, and reopens as it was.
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(all_rows(&t).len(), 1);
    let (_, reason) = bulk_error(t.bulk_load((0..3).map(row)));
    assert!(reason.contains("not empty"), "{reason}");
    drop(t);
    bed.close_without_leak(db);
}

/// Put 40 rows of 500 bytes into `t`, enough to split its root; returns them.
fn split_the_root(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    let rows: Vec<(Vec<u8>, Vec<u8>)> = (0..40u32)
        .map(|i| (format!("c{i:03}").into_bytes(), vec![i as u8; 500]))
        .collect();
    for (k, v) in &rows {
        t.put(k, v).unwrap();
    }
    assert!(t.check().unwrap().height > 1, "the root did not split");
    rows
}

/// Rows written while the load is held that split the table's root (the
/// root page that carries the pending mark becomes an internal node): the
/// load fails, the rows stay, and the hidden tree, root included, is freed.
#[test]
fn rows_that_split_the_root_during_the_load_make_it_fail_and_stay() {
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let load = HeldLoad::start(&db, &t, N, HOLD_AT, row, WAIT);
    let concurrent = split_the_root(&t);
    let (_, reason) = bulk_error(load.finish());
    assert!(reason.contains("rows were written"), "{reason}");
    assert_eq!(all_rows(&t), concurrent);
    drop(t);
    bed.close_without_leak(db);
}

/// As above, but the power fails while the load is held: the next open
/// must still find the hidden tree and free it.
#[test]
fn a_crash_after_rows_split_the_root_during_a_load_leaks_nothing() {
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let load = HeldLoad::start(&db, &t, N, HOLD_AT, row, WAIT);
    // flush_log_at_trx_commit 1: each put is durable when it returns.
    let concurrent = split_the_root(&t);
    db.flush_log().unwrap();
    drop(t);
    bed.crash(db);
    assert!(load.finish().is_err());

    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(all_rows(&t), concurrent);
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(free >= LEAVES_AT_HOLD, "only {free} pages free");
}

// ---------------------------------------------------------------------------
// 6. Errors

/// Every refused load leaves the table as it was (empty, or with its rows)
/// and usable, and frees whatever it had built.
#[test]
fn refused_loads_leave_the_table_as_it_was() {
    let bed = Bed::new(crash_opts());
    let db = bed.open();
    let t = db.create_table("t").unwrap();

    // Keys out of order after 299 leaves were written, then a duplicate key.
    let unsorted = (0..900).map(row).chain([row(5)]);
    let (table, reason) = bulk_error(t.bulk_load(unsorted));
    assert_eq!(table, "t");
    assert!(reason.contains("ascending"), "{reason}");
    let msg = t.bulk_load([row(1), row(1)]).unwrap_err().to_string();
    assert!(
        msg.contains("`t`") && msg.contains("strictly ascending"),
        "{msg}"
    );
    assert_eq!(all_rows(&t), vec![]);

    // Entries too large after 99 leaves: the entry's own error.
    let (mut long_key, v) = row(300);
    long_key.resize(common::max_key_len(PAGE) + 1, b'z');
    match t.bulk_load((0..300).map(row).chain([(long_key, v)])) {
        Err(Error::KeyTooLarge { len, max }) => assert_eq!((len, max), (769, 768)),
        other => panic!("expected KeyTooLarge, got {other:?}"),
    }
    let (k, _) = row(300);
    // One byte past 1 GiB (never touched: the size is checked first).
    let long_value = vec![0u8; (1 << 30) + 1];
    match t.bulk_load((0..300).map(row).chain([(k, long_value)])) {
        Err(Error::ValueTooLarge { len, max }) => assert_eq!((len, max), ((1 << 30) + 1, 1 << 30)),
        other => panic!("expected ValueTooLarge, got {other:?}"),
    }
    assert_eq!(all_rows(&t), vec![]);

    // Nothing to load: nothing loaded, nothing kept.
    assert_eq!(t.bulk_load(Vec::<(Vec<u8>, Vec<u8>)>::new()).unwrap(), 0);
    assert_eq!(all_rows(&t), vec![]);
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(
        free >= 299,
        "only {free} pages free: the refused loads' trees were not built, or not freed"
    );

    let db = bed.open();
    let t = db.table("t").unwrap();
    // A second load into the table while one is under way.
    let load = HeldLoad::start(&db, &t, N, HOLD_AT, row, WAIT);
    let (_, reason) = bulk_error(t.bulk_load([row(0)]));
    assert!(reason.contains("another bulk load"), "{reason}");
    assert_eq!(load.finish().unwrap(), u64::from(N));
    assert_rows(&t, N);

    // A non-empty table: after a load, and with a single row put.
    let (table, reason) = bulk_error(t.bulk_load([row(N)]));
    assert_eq!(table, "t");
    assert!(reason.contains("not empty"), "{reason}");
    assert_rows(&t, N);
    let u = db.create_table("u").unwrap();
    u.put(b"only", b"row").unwrap();
    let (table, reason) = bulk_error(u.bulk_load([row(0)]));
    assert_eq!(table, "u");
    assert!(reason.contains("not empty"), "{reason}");
    assert_eq!(all_rows(&u), vec![(b"only".to_vec(), b"row".to_vec())]);
    db.check().unwrap();
    drop((t, u));
    bed.close_without_leak(db);
}
