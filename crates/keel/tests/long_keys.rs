#![allow(clippy::unwrap_used)]
//! Keys up to 3,072 bytes, InnoDB's limit: on 16 KiB pages a table takes
//! keys of 3072 bytes (3/16 of the page, at most 3072 on any page size),
//! and one byte more is refused with `Error::KeyTooLarge` naming the limit,
//! by a transaction, a one-row write and a bulk load alike, leaving the
//! table as it was.
//!
//! Keys of the full length go through transactions (put, get, scan both
//! ways, replace, delete), a bulk load at fill factor 100 and at 10 (where
//! a node holds less than one separator's worth: it still takes two), and a
//! clean close and reopen. The keys share all but their last eight bytes,
//! so every separator is as long as the keys, and the trees are several
//! levels high: internal nodes split and merge with separators of the
//! largest size.

mod common;

use keel::{Db, Error, Options, Table};

const PAGE: usize = 16384;
/// The longest key 16 KiB pages take.
const MAX_KEY: usize = 3072;
/// Rows of each table.
const ROWS: u32 = 600;

fn opts() -> Options {
    Options {
        page_size: PAGE,
        buffer_pool_size: 512 * PAGE as u64,
        flush_method: "nosync".parse().unwrap(),
        data_files: 2,
        log_file_size: 8 << 20,
        log_files_in_group: 2,
        ..Default::default()
    }
}

/// Key `i`: 3072 bytes, all but the last eight shared by every key, which
/// spell `i`, so keys sort like their numbers.
fn key(i: u32) -> Vec<u8> {
    let mut k = vec![b'k'; MAX_KEY - 8];
    k.extend_from_slice(format!("{i:08}").as_bytes());
    k
}

fn value(i: u32, gen: u32) -> Vec<u8> {
    let mut v = format!("row {i} gen {gen} ").into_bytes();
    v.resize(20 + (i as usize * 53) % 900, b'v');
    v
}

/// A key one byte past the limit.
fn too_long() -> Vec<u8> {
    vec![b'k'; MAX_KEY + 1]
}

fn assert_key_too_large(e: Error) {
    assert!(
        matches!(e, Error::KeyTooLarge { len, max } if len == MAX_KEY + 1 && max == MAX_KEY),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("key of 3073 bytes") && msg.contains("maximum of 3072 bytes"),
        "{msg}"
    );
}

fn all_rows(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    t.range(..).unwrap().map(|r| r.unwrap()).collect()
}

/// `t` holds exactly `want` (sorted), seen by gets, scans both ways, a
/// bounded scan and the tree check; returns the tree's height.
fn assert_table(t: &Table, want: &[(Vec<u8>, Vec<u8>)]) -> usize {
    assert_eq!(all_rows(t), want, "rows of `{}`", t.name());
    let mut rev: Vec<_> = t.range_rev(..).unwrap().map(|r| r.unwrap()).collect();
    rev.reverse();
    assert_eq!(rev, want, "rows of `{}`, descending", t.name());
    for (k, v) in want {
        assert_eq!(t.get(k).unwrap().as_ref(), Some(v));
    }
    if want.len() > 20 {
        let (lo, hi) = (&want[5].0, &want[15].0);
        let got: Vec<_> = t
            .range(lo.as_slice()..=hi.as_slice())
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(got, &want[5..=15]);
    }
    let s = t.check().unwrap();
    // Deleted rows purge has not removed yet are still entries.
    assert_eq!(s.entries - s.delete_marked, want.len());
    s.height
}

#[test]
fn keys_of_3072_bytes_work_on_16k_pages_and_one_byte_more_is_refused() {
    assert_eq!(common::max_key_len(PAGE), MAX_KEY);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();

    // Transactions: rows put in a scattered order, 50 to a transaction,
    // each seen by its own transaction before it commits.
    let t = db.create_table("t").unwrap();
    let order: Vec<u32> = (0..ROWS).map(|i| (i * 7919) % ROWS).collect();
    for batch in order.chunks(50) {
        let mut tx = db.begin();
        for &i in batch {
            tx.put(&t, &key(i), &value(i, 0)).unwrap();
            assert_eq!(tx.get(&t, &key(i)).unwrap(), Some(value(i, 0)));
        }
        tx.commit().unwrap();
    }
    let mut want: Vec<_> = (0..ROWS).map(|i| (key(i), value(i, 0))).collect();
    let height = assert_table(&t, &want);
    assert!(
        height >= 3,
        "{height} levels: the internal nodes never split"
    );
    {
        // A transaction's scan sees the rows too.
        let tx = db.begin();
        let seen: Vec<_> = tx
            .scan(&t, key(100).as_slice()..key(110).as_slice())
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        assert_eq!(seen, (100..110).map(key).collect::<Vec<_>>());
    }

    // Replace every other row, delete every third (50 rows to a
    // transaction: 300 of these rows are more than one commit may log here).
    for chunk in (0..ROWS).step_by(2).collect::<Vec<_>>().chunks(50) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.put(&t, &key(i), &value(i, 1)).unwrap();
        }
        tx.commit().unwrap();
    }
    for chunk in (0..ROWS).step_by(3).collect::<Vec<_>>().chunks(50) {
        let mut tx = db.begin();
        for &i in chunk {
            assert!(tx.delete(&t, &key(i)).unwrap());
        }
        tx.commit().unwrap();
    }
    want = (0..ROWS)
        .filter(|i| i % 3 != 0)
        .map(|i| (key(i), value(i, if i % 2 == 0 { 1 } else { 0 })))
        .collect();
    assert_table(&t, &want);

    // One byte more: refused, and the transaction goes on.
    let mut tx = db.begin();
    assert_key_too_large(tx.put(&t, &too_long(), b"v").unwrap_err());
    assert_eq!(tx.get(&t, &too_long()).unwrap(), None);
    assert!(!tx.delete(&t, &too_long()).unwrap());
    tx.put(&t, &key(ROWS), &value(ROWS, 0)).unwrap();
    tx.commit().unwrap();
    assert_key_too_large(t.put(&too_long(), b"v").unwrap_err());
    assert_eq!(t.get(&too_long()).unwrap(), None);
    assert!(t.delete(&key(ROWS)).unwrap());
    assert_table(&t, &want);

    // Bulk loads, at fill factor 100 and 10.
    let loaded: Vec<_> = (0..ROWS).map(|i| (key(i), value(i, 2))).collect();
    let b = db.create_table("b").unwrap();
    assert_eq!(
        b.bulk_load(loaded.iter().cloned()).unwrap(),
        u64::from(ROWS)
    );
    assert!(assert_table(&b, &loaded) >= 3);
    db.set_option("fill_factor", "10").unwrap();
    let sparse = db.create_table("sparse").unwrap();
    assert_eq!(
        sparse.bulk_load(loaded.iter().cloned()).unwrap(),
        u64::from(ROWS)
    );
    let s = sparse.check().unwrap();
    assert_eq!(s.leaf_pages, ROWS as usize, "one row to a leaf: {s:?}");
    assert_table(&sparse, &loaded);
    // A bulk load with a key one byte too long fails with that key's
    // error, and leaves the table empty.
    let c = db.create_table("c").unwrap();
    let rows = loaded.iter().cloned().chain([(too_long(), b"v".to_vec())]);
    assert_key_too_large(c.bulk_load(rows).unwrap_err());
    assert_eq!(all_rows(&c), vec![]);
    db.check().unwrap();
    drop((t, b, sparse, c));
    db.close().unwrap();

    // Reopened: everything is there, and the limit is the same.
    let db = Db::open(dir.path(), opts()).unwrap();
    db.check().unwrap();
    let t = db.table("t").unwrap();
    assert_table(&t, &want);
    assert_table(&db.table("b").unwrap(), &loaded);
    assert_table(&db.table("sparse").unwrap(), &loaded);
    assert_eq!(all_rows(&db.table("c").unwrap()), vec![]);
    assert!(!t.put(&key(ROWS + 1), b"after reopen").unwrap());
    assert_eq!(
        t.get(&key(ROWS + 1)).unwrap().as_deref(),
        Some(&b"after reopen"[..])
    );
    assert_key_too_large(t.put(&too_long(), b"v").unwrap_err());
    drop(t);
    db.close().unwrap();
}
