#![allow(clippy::unwrap_used)]
//! Transactions: read-your-own-writes through the write-set overlay,
//! visibility only at commit, durability across reopen, and rollback
//! (explicit or by drop) leaving nothing behind.

mod common;

use keel::{Db, Error, Options, Table, Txn};

fn opts() -> Options {
    Options {
        lock_wait_timeout: 0.2,
        ..common::small_opts(256)
    }
}

fn rows(it: impl Iterator<Item = keel::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(String, String)> {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
    })
    .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn txn_scan(tx: &Txn, t: &Table) -> Vec<(String, String)> {
    rows(tx.scan(t, ..).unwrap())
}

fn seeded(db: &Db) -> Table {
    let t = db.create_table("t").unwrap();
    for k in ["a", "b", "c", "d"] {
        t.put(k.as_bytes(), k.to_uppercase().as_bytes()).unwrap();
    }
    t
}

#[test]
fn reads_see_own_writes_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = seeded(&db);
    let mut tx = db.begin();
    tx.put(&t, b"b", b"B2").unwrap();
    assert!(tx.delete(&t, b"c").unwrap());
    assert!(!tx.delete(&t, b"c").unwrap(), "already deleted by this txn");
    assert!(!tx.delete(&t, b"zz").unwrap());
    tx.put(&t, b"e", b"E").unwrap();
    tx.put(&t, b"aa", b"AA").unwrap();
    tx.put(&t, b"x", b"X").unwrap();
    assert!(
        tx.delete(&t, b"x").unwrap(),
        "own insert counts as existing"
    );

    assert_eq!(tx.get(&t, b"b").unwrap().as_deref(), Some(&b"B2"[..]));
    assert_eq!(tx.get(&t, b"c").unwrap(), None);
    assert_eq!(tx.get(&t, b"e").unwrap().as_deref(), Some(&b"E"[..]));
    assert_eq!(tx.get(&t, b"x").unwrap(), None);
    assert_eq!(tx.get(&t, b"a").unwrap().as_deref(), Some(&b"A"[..]));

    let want = pairs(&[
        ("a", "A"),
        ("aa", "AA"),
        ("b", "B2"),
        ("d", "D"),
        ("e", "E"),
    ]);
    assert_eq!(txn_scan(&tx, &t), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(rows(tx.scan_rev(&t, ..).unwrap()), rev);
    let mid = pairs(&[("aa", "AA"), ("b", "B2"), ("d", "D")]);
    assert_eq!(
        rows(tx.scan(&t, &b"a"[..]..&b"e"[..]).unwrap()),
        pairs(&[("a", "A")])
            .into_iter()
            .chain(mid.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        rows(
            tx.scan(
                &t,
                (
                    std::ops::Bound::Excluded(&b"a"[..]),
                    std::ops::Bound::Excluded(&b"e"[..])
                )
            )
            .unwrap()
        ),
        mid
    );
    assert_eq!(
        rows(tx.scan_rev(&t, &b"b"[..]..=&b"e"[..]).unwrap()),
        pairs(&[("e", "E"), ("d", "D"), ("b", "B2")])
    );
    assert!(
        rows(tx.scan(&t, &b"z"[..]..&b"a"[..]).unwrap()).is_empty(),
        "inverted range"
    );

    // Others still see the committed state.
    assert_eq!(t.get(b"c").unwrap().as_deref(), Some(&b"C"[..]));
    assert_eq!(t.get(b"e").unwrap(), None);
    tx.commit().unwrap();
    assert_eq!(rows(t.range(..).unwrap()), want);
    t.check().unwrap();
}

#[test]
fn overlay_merges_with_many_tree_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut model = std::collections::BTreeMap::new();
    for i in (0..2000u32).step_by(2) {
        let (k, v) = (format!("{i:05}"), format!("v{i}"));
        t.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k, v);
    }
    let mut tx = db.begin();
    for i in (0..2000u32).step_by(7) {
        let k = format!("{i:05}");
        if i % 3 == 0 {
            tx.delete(&t, k.as_bytes()).unwrap();
            model.remove(&k);
        } else {
            tx.put(&t, k.as_bytes(), b"new").unwrap();
            model.insert(k, "new".into());
        }
    }
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(txn_scan(&tx, &t), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(rows(tx.scan_rev(&t, ..).unwrap()), rev);
    tx.commit().unwrap();
    assert_eq!(rows(t.range(..).unwrap()), want);
}

#[test]
fn uncommitted_writes_are_invisible_to_others() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = seeded(&db);
    let mut a = db.begin();
    a.put(&t, b"a", b"dirty").unwrap();
    a.put(&t, b"new", b"dirty").unwrap();
    a.delete(&t, b"d").unwrap();
    let b = db.begin_with(keel::Isolation::ReadCommitted);
    let rr = db.begin();
    assert_eq!(rr.get(&t, b"a").unwrap().as_deref(), Some(&b"A"[..]));
    assert_eq!(b.get(&t, b"a").unwrap().as_deref(), Some(&b"A"[..]));
    assert_eq!(b.get(&t, b"new").unwrap(), None);
    let seen = txn_scan(&b, &t);
    assert_eq!(
        seen,
        pairs(&[("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")])
    );
    assert_eq!(rows(t.range(..).unwrap()), seen);
    a.commit().unwrap();
    // Read committed: the same txn now sees the new committed state;
    // repeatable read (the default) keeps its snapshot.
    assert_eq!(b.get(&t, b"a").unwrap().as_deref(), Some(&b"dirty"[..]));
    assert_eq!(rr.get(&t, b"a").unwrap().as_deref(), Some(&b"A"[..]));
    assert_eq!(
        txn_scan(&rr, &t),
        pairs(&[("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")])
    );
    rr.commit().unwrap();
    assert_eq!(
        txn_scan(&b, &t),
        pairs(&[("a", "dirty"), ("b", "B"), ("c", "C"), ("new", "dirty")])
    );
    b.commit().unwrap();
}

#[test]
fn commit_is_durable_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        let t = seeded(&db);
        let u = db.create_table("u").unwrap();
        let mut tx = db.begin();
        tx.put(&t, b"a", b"A2").unwrap();
        tx.delete(&t, b"b").unwrap();
        tx.put(&u, b"k", b"in u").unwrap();
        tx.commit().unwrap();
        let mut lost = db.begin();
        lost.put(&t, b"c", b"never").unwrap();
        lost.put(&u, b"never", b"x").unwrap();
        lost.rollback();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.table("t").unwrap();
    let u = db.table("u").unwrap();
    assert_eq!(
        rows(t.range(..).unwrap()),
        pairs(&[("a", "A2"), ("c", "C"), ("d", "D")])
    );
    assert_eq!(rows(u.range(..).unwrap()), pairs(&[("k", "in u")]));
    db.check().unwrap();
}

#[test]
fn rollback_and_drop_leave_nothing_and_free_the_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = seeded(&db);
    let before = rows(t.range(..).unwrap());
    let mut tx = db.begin();
    tx.put(&t, b"a", b"x").unwrap();
    tx.delete(&t, b"b").unwrap();
    tx.put(&t, b"z", b"x").unwrap();
    tx.rollback();
    assert_eq!(rows(t.range(..).unwrap()), before);
    {
        let mut tx = db.begin();
        tx.put(&t, b"c", b"x").unwrap();
        tx.delete(&t, b"d").unwrap();
    }
    assert_eq!(rows(t.range(..).unwrap()), before);
    // The locks are gone: another writer gets them without waiting.
    let start = std::time::Instant::now();
    let mut tx = db.begin();
    for k in ["a", "b", "c", "d", "z"] {
        tx.put(&t, k.as_bytes(), b"y").unwrap();
    }
    t.put(b"other", b"y").unwrap();
    assert!(start.elapsed() < std::time::Duration::from_millis(150));
    tx.commit().unwrap();
    assert_eq!(db.metrics().get("trx_rollbacks"), Some(2));
    assert_eq!(db.metrics().get("lock_row_lock_waits"), Some(0));
}

#[test]
fn sizes_are_checked_at_put() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    // 4 KiB pages take keys of 768 bytes (3/16 of the page).
    let max = common::max_key_len(4096);
    assert_eq!(max, 768);
    let mut tx = db.begin();
    let e = tx.put(&t, &vec![0u8; max + 1], b"v").unwrap_err();
    assert!(
        matches!(e, Error::KeyTooLarge { len, max: m } if len == max + 1 && m == max),
        "{e}"
    );
    assert!(e.to_string().contains("maximum of 768 bytes"), "{e}");
    // Past a quarter page a value is stored off-page; past 1 GiB it is
    // refused (the vector is never touched: the size is checked first).
    let huge = vec![0u8; (1 << 30) + 1];
    let e = tx.put(&t, b"k", &huge).unwrap_err();
    assert!(
        matches!(e, Error::ValueTooLarge { len, max: m } if len == huge.len() && m == 1 << 30),
        "{e}"
    );
    assert!(!tx.delete(&t, &vec![0u8; max + 1]).unwrap());
    // The longest key is taken.
    tx.put(&t, &vec![1u8; max], b"longest").unwrap();
    // The txn is still usable.
    tx.put(&t, b"k", b"v").unwrap();
    tx.commit().unwrap();
    assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        t.get(&vec![1u8; max]).unwrap().as_deref(),
        Some(&b"longest"[..])
    );
}

#[test]
fn empty_and_read_only_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = seeded(&db);
    db.begin().commit().unwrap();
    let mut tx = db.begin();
    assert_eq!(
        tx.get_for_update(&t, b"a").unwrap().as_deref(),
        Some(&b"A"[..])
    );
    assert_eq!(tx.get_for_update(&t, b"nope").unwrap(), None);
    tx.commit().unwrap();
    t.put(b"a", b"free again").unwrap();
}
