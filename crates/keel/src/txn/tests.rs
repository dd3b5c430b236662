//! Unit tests that need the crate's insides: commit-record re-application.

use super::record::{encode, Op};
use super::*;
use crate::config::Options;

fn db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        page_size: 4096,
        buffer_pool_size: 64 * 4096,
        flush_method: "nosync".parse().unwrap(),
        data_files: 2,
        ..Options::default()
    };
    let db = Db::open(dir.path(), o).unwrap();
    (dir, db)
}

#[test]
fn apply_record_is_idempotent() {
    let (_dir, db) = db();
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    t.put(b"gone", b"x").unwrap();
    let (rt, ru) = (t.tree.root().page_no, u.tree.root().page_no);
    let ops = [
        Op {
            root: rt,
            key: b"a",
            value: Some(b"1"),
        },
        Op {
            root: rt,
            key: b"gone",
            value: None,
        },
        Op {
            root: ru,
            key: b"b",
            value: Some(b"2"),
        },
    ];
    let rec = encode(99, &ops);
    let e = &*db.inner.engine;
    for _ in 0..3 {
        assert_eq!(apply_record(e, &rec).unwrap(), 3);
        assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(t.get(b"gone").unwrap(), None);
        assert_eq!(u.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    }
    t.check().unwrap();
}

#[test]
fn apply_record_rejects_corruption_before_applying() {
    let (_dir, db) = db();
    let t = db.create_table("t").unwrap();
    let rt = t.tree.root().page_no;
    let ops = [
        Op {
            root: rt,
            key: b"a",
            value: Some(b"1"),
        },
        Op {
            root: rt,
            key: b"b",
            value: Some(b"2"),
        },
    ];
    let rec = encode(1, &ops);
    let e = &*db.inner.engine;
    assert!(apply_record(e, &rec[..rec.len() - 1]).is_err());
    assert_eq!(t.get(b"a").unwrap(), None);
}

#[test]
fn commit_logs_one_record_and_releases_locks() {
    let (_dir, db) = db();
    let t = db.create_table("t").unwrap();
    let before = db.inner.engine.metrics.trx_commits.load(Ordering::Relaxed);
    let mut tx = db.begin();
    tx.put(&t, b"k1", b"v1").unwrap();
    tx.put(&t, b"k2", b"v2").unwrap();
    assert_eq!(db.inner.trx_sys.locks.held(), 2);
    tx.commit().unwrap();
    assert_eq!(db.inner.trx_sys.locks.held(), 0);
    let after = db.inner.engine.metrics.trx_commits.load(Ordering::Relaxed);
    assert_eq!(after - before, 1);
    assert_eq!(t.get(b"k2").unwrap().as_deref(), Some(&b"v2"[..]));
}

#[test]
fn txn_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Txn>();
}
