//! Unit tests that need the crate's insides: finishing commits recovery
//! found unapplied, commit bookkeeping.

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
fn finishing_an_unapplied_commit_is_idempotent() {
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
    let rec: std::sync::Arc<[u8]> = encode(99, &ops).into();
    let e = &*db.inner.engine;
    for _ in 0..3 {
        let lsn = e.log.lsn();
        assert_eq!(finish_unapplied(e, lsn, rec.clone()).unwrap(), 3);
        assert_eq!(e.adm.applying.load(Ordering::Relaxed), 0);
        assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(t.get(b"gone").unwrap(), None);
        assert_eq!(u.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    }
    t.check().unwrap();
}

#[test]
fn a_malformed_record_is_rejected_before_anything_is_applied() {
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
    let torn: std::sync::Arc<[u8]> = rec[..rec.len() - 1].into();
    assert!(finish_unapplied(e, e.log.lsn(), torn).is_err());
    assert_eq!(t.get(b"a").unwrap(), None);
    assert_eq!(e.adm.applying.load(Ordering::Relaxed), 0);
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
