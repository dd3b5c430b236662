#![allow(clippy::unwrap_used)]
//! Model test: random put/delete/get/scan against a BTreeMap, on a buffer
//! pool of a few dozen pages so eviction and write-back happen constantly,
//! with close and reopen in the middle.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;

use keel::Db;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Put(u16, usize),
    Delete(u16),
    Get(u16),
    Scan(u16, u16, bool),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Up to the largest value a table takes on 4 KiB pages (a quarter
        // page less the 15-byte version header).
        10 => (0u16..3000, 0usize..=1009).prop_map(|(k, l)| Op::Put(k, l)),
        5 => (0u16..3000).prop_map(Op::Delete),
        3 => (0u16..3000).prop_map(Op::Get),
        2 => (0u16..3000, 0u16..3000, any::<bool>()).prop_map(|(a, b, r)| Op::Scan(a.min(b), a.max(b), r)),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u16) -> Vec<u8> {
    // Variable-length keys that sort like the numbers.
    let mut v = format!("key{k:05}").into_bytes();
    v.extend(std::iter::repeat_n(b'x', (k % 37) as usize));
    v
}

fn value(k: u16, len: usize, gen: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (k as usize * 31 + i * 7 + gen) as u8)
        .collect()
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = common::small_opts(40);
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut t = db.create_table("t").unwrap();
    let mut model = BTreeMap::new();
    for (gen, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put(k, len) => {
                let v = value(k, len, gen);
                let replaced = t.put(&key(k), &v).unwrap();
                assert_eq!(replaced, model.insert(key(k), v).is_some());
            }
            Op::Delete(k) => {
                assert_eq!(t.delete(&key(k)).unwrap(), model.remove(&key(k)).is_some())
            }
            Op::Get(k) => assert_eq!(t.get(&key(k)).unwrap(), model.get(&key(k)).cloned()),
            Op::Scan(a, b, rev) => {
                let (lo, hi) = (key(a), key(b));
                let got: Vec<_> = if rev {
                    t.range_rev(&lo[..]..=&hi[..])
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect()
                } else {
                    t.range(&lo[..]..=&hi[..])
                        .unwrap()
                        .map(|r| r.unwrap())
                        .collect()
                };
                let mut want: Vec<_> = model
                    .range::<Vec<u8>, _>((Bound::Included(&lo), Bound::Included(&hi)))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if rev {
                    want.reverse();
                }
                assert_eq!(got, want);
            }
            Op::Reopen => {
                drop(t);
                db.close().unwrap();
                db = Db::open(dir.path(), opts.clone()).unwrap();
                t = db.table("t").unwrap();
            }
        }
    }
    let all: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(all, want);
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn btree_matches_model_under_eviction(ops in proptest::collection::vec(op(), 1000..3000)) {
        run(ops);
    }
}
