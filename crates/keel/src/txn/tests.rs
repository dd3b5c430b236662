//! Unit tests that need the crate's insides: finishing commits recovery
//! found unapplied, commit bookkeeping.

use super::record::{encode, Op};
use super::*;
use crate::config::Options;
use crate::Db;

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
            external: false,
        },
        Op {
            root: rt,
            key: b"gone",
            value: None,
            external: false,
        },
        Op {
            root: ru,
            key: b"b",
            value: Some(b"2"),
            external: false,
        },
    ];
    let rec: std::sync::Arc<[u8]> = encode(99, &ops).into();
    let e = &*db.inner.engine;
    for _ in 0..3 {
        let lsn = e.log.lsn();
        assert_eq!(
            finish_unapplied(&db.inner.trx, lsn, rec.clone()).unwrap(),
            3
        );
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
            external: false,
        },
        Op {
            root: rt,
            key: b"b",
            value: Some(b"2"),
            external: false,
        },
    ];
    let rec = encode(1, &ops);
    let e = &*db.inner.engine;
    let torn: std::sync::Arc<[u8]> = rec[..rec.len() - 1].into();
    assert!(finish_unapplied(&db.inner.trx, e.log.lsn(), torn).is_err());
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
    assert_eq!(db.inner.trx.locks.held(), 2);
    tx.commit().unwrap();
    assert_eq!(db.inner.trx.locks.held(), 0);
    let after = db.inner.engine.metrics.trx_commits.load(Ordering::Relaxed);
    assert_eq!(after - before, 1);
    assert_eq!(t.get(b"k2").unwrap().as_deref(), Some(&b"v2"[..]));
}

#[test]
fn txn_is_send() {
    fn is_send<T: Send>() {}
    is_send::<Txn>();
}

mod redo_bound {
    //! The redo a commit reserves covers what logging and applying its
    //! write set appends: random write sets with random key and value
    //! sizes, over a table and a "secondary index" on its values, on 4 KiB
    //! pages so that leaves and internal nodes split and merge. A
    //! mini-transaction that needed more than its thread reserved fails the
    //! commit (see `mtr`), so any broken bound fails this test.
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Put(Vec<u8>, Vec<u8>),
        Delete(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let key = prop::collection::vec(any::<u8>(), 1..=200);
        prop_oneof![
            4 => (key.clone(), prop::collection::vec(any::<u8>(), 0..=1000)).prop_map(|(k, v)| Op::Put(k, v)),
            1 => key.prop_map(Op::Delete),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn random_write_sets_never_log_more_than_they_reserved(
            txns in prop::collection::vec(prop::collection::vec(op(), 1..60), 1..30),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let o = Options {
                page_size: 4096,
                buffer_pool_size: 2048 * 4096,
                flush_method: "nosync".parse().unwrap(),
                data_files: 2,
                log_file_size: 1 << 20,
                ..Options::default()
            };
            let db = Db::open(dir.path(), o).unwrap();
            let t = db.create_table("rows").unwrap();
            let idx = db.create_table("rows_by_value").unwrap();
            let mut keys = Vec::new();
            for ops in txns {
                let mut tx = db.begin();
                for op in &ops {
                    match op {
                        Op::Put(k, v) => {
                            tx.put(&t, k, v).unwrap();
                            keys.push(k.clone());
                            let mut ik = v.iter().take(100).copied().collect::<Vec<u8>>();
                            ik.extend_from_slice(k);
                            tx.put(&idx, &ik[..ik.len().min(200)], k).unwrap();
                        }
                        Op::Delete(k) => {
                            tx.delete(&t, k).unwrap();
                        }
                    }
                }
                tx.commit().unwrap();
            }
            // Then empty the table again: merges and root collapses.
            for chunk in keys.chunks(40) {
                let mut tx = db.begin();
                for k in chunk {
                    tx.delete(&t, k).unwrap();
                }
                tx.commit().unwrap();
            }
            prop_assert_eq!(t.range(..).unwrap().count(), 0);
            // Purge holds a budget while it removes a delete mark: stopped,
            // it holds none.
            db.inner.trx.stop_purge();
            let e = &*db.inner.engine;
            prop_assert_eq!(e.adm.reserved_and_wanted(), 0, "every reservation was given back");
            prop_assert_eq!(e.adm.applying.load(Ordering::Relaxed), 0);
            t.check().unwrap();
            idx.check().unwrap();
        }
    }
}

/// A chain freed twice (two undo records holding one version, or a drop
/// after a bundle's cleanup) is freed once: the second free finds the head
/// reused by another chain, with another id, and leaves it alone.
#[test]
fn a_chain_is_freed_once_even_after_its_head_is_reused() {
    use crate::engine::admission::Purpose;
    use crate::lob::{self, Bundle};
    let (_dir, db) = db();
    let e = &*db.inner.engine;
    let lobs = &db.inner.trx.lobs;
    let write = |byte: u8| {
        let mut b = Bundle::new(lobs, e);
        let p = b.write(&vec![byte; 20_000]).unwrap();
        let first = b.keep().unwrap();
        lobs.retire(e, Purpose::New, first).unwrap();
        p
    };
    let p = write(7);
    assert_eq!(lob::read(e, e.space_id(), p).unwrap(), vec![7u8; 20_000]);
    assert!(lob::free_chain(e, Purpose::New, p).unwrap());
    // The free list is last in, first out: the head is the next page out.
    let q = write(9);
    assert_eq!(q.head, p.head);
    assert_ne!(q.id, p.id);
    assert!(!lob::free_chain(e, Purpose::New, p).unwrap());
    assert_eq!(lob::read(e, e.space_id(), q).unwrap(), vec![9u8; 20_000]);
    let err = lob::read(e, e.space_id(), p).unwrap_err();
    assert!(matches!(err, Error::Corruption(_)), "{err}");
    assert!(
        err.to_string().contains(&format!("chain {}", p.id)),
        "{err}"
    );
}

/// A commit that fails before its record is logged frees the chains it
/// wrote and its directory slot (the bundle's drop).
#[test]
fn a_bundle_dropped_before_its_commit_frees_its_chains_and_slot() {
    use crate::lob::{Bundle, Lobs};
    let (_dir, db) = db();
    let e = &*db.inner.engine;
    let lobs = &db.inner.trx.lobs;
    let freed = e.metrics.get("lob_chains_freed").unwrap();
    let mut b = Bundle::new(lobs, e);
    let p = b.write(&vec![1u8; 50_000]).unwrap();
    b.write(&vec![2u8; 9_000]).unwrap();
    // The first large value created the directory.
    let dir = crate::lob::dir_in_header(e, e.space_id()).unwrap().unwrap();
    assert_eq!(Lobs::in_flight(e, dir).unwrap(), vec![(p.head, p.id)]);
    assert_eq!(
        Lobs::bundle(e, e.space_id(), (p.head, p.id)).unwrap().len(),
        2
    );
    drop(b);
    assert_eq!(Lobs::in_flight(e, dir).unwrap(), vec![]);
    assert_eq!(e.metrics.get("lob_chains_freed").unwrap() - freed, 2);
    assert!(crate::lob::read(e, e.space_id(), p).is_err());
}

/// With every directory slot held by a bundle in flight, the next commit
/// with a large value waits (holding no latch) until a slot is released,
/// then writes its chain.
#[test]
fn a_bundle_waits_for_a_directory_slot_until_one_is_released() {
    use crate::lob::Bundle;
    let (_dir, db) = db();
    let e = &*db.inner.engine;
    let lobs = &db.inner.trx.lobs;
    let value = vec![5u8; 2000];
    let mut held = Vec::new();
    loop {
        let mut b = Bundle::new(lobs, e);
        b.write(&value).unwrap();
        held.push(b);
        let dir = crate::lob::dir_in_header(e, e.space_id()).unwrap().unwrap();
        let page = e.pool.read(dir).unwrap();
        // Slots of 12 bytes from offset 32 (`lob`'s module doc).
        let full = (32..page.len() - 11)
            .step_by(12)
            .all(|o| crate::page::get_u32(&page, o) != 0);
        if full {
            break;
        }
    }
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = s.spawn(move || {
            let mut b = Bundle::new(lobs, e);
            let r = b.write(&value).map(drop);
            tx.send(()).unwrap();
            r
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(300))
                .is_err(),
            "a bundle got a slot while all {} were held",
            held.len()
        );
        // Dropping a bundle frees its chains and its slot: the waiter goes on.
        held.pop();
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the waiting bundle never got the released slot");
        waiter.join().unwrap().unwrap();
    });
}

/// A delete of a long row logs its header change, not its bytes: the mark
/// keeps the row in place, and the undo record keeps the old header alone
/// (`version::encode_mark`, `undo_delta`): 221 bytes a delete here. Before,
/// a delete of a 300-byte row logged the row in its undo record and the
/// leaf's shrinking cell: 543 bytes.
#[test]
fn a_delete_logs_the_rows_header_not_its_bytes() {
    let (_dir, db) = db();
    let t = db.create_table("t").unwrap();
    let row = vec![7u8; 300];
    for i in 0..20u32 {
        t.put(&i.to_be_bytes(), &row).unwrap();
    }
    db.stop_purge();
    let lsn = |db: &Db| db.metrics().snapshot()["log_lsn_current"];
    let before = lsn(&db);
    for i in 0..20u32 {
        assert!(t.delete(&i.to_be_bytes()).unwrap());
    }
    let per_delete = (lsn(&db) - before) / 20;
    assert!(
        per_delete < 300,
        "a delete of a 300-byte row logged {per_delete} bytes"
    );
    let deltas = db.metrics().snapshot()["trx_undo_delta_records"];
    assert!(deltas >= 20, "{deltas} undo deltas for 20 deletes");
    for i in 0..20u32 {
        assert_eq!(t.get(&i.to_be_bytes()).unwrap(), None);
    }
    db.check().unwrap();
}
