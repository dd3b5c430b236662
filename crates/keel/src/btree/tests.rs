//! Tree tests: model checks against `BTreeMap`, concurrency, shrinking.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::test_engine::{engine, pages_in_use, set_alloc_failpoint};
use super::{node, BTree};
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::Error;
use crate::mtr::{mtr_bound, Mtr};

// ---- helpers ----

pub(super) fn new_tree(e: &Engine) -> BTree {
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(2, e.page_size())).unwrap();
    let mut mtr = Mtr::new(e, &budget);
    let t = BTree::create(&mut mtr).unwrap();
    mtr.commit().unwrap();
    t
}

pub(super) type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn scan(t: &BTree, e: &Engine, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>, rev: bool) -> Model {
    let mut out = Model::new();
    let mut last: Option<Vec<u8>> = None;
    for kv in t.range(e, lo, hi, rev) {
        let (k, v) = kv.unwrap();
        if let Some(l) = &last {
            assert!(if rev { &k < l } else { &k > l }, "scan out of order");
        }
        last = Some(k.clone());
        out.insert(k, v);
    }
    out
}

fn model_range(m: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Model {
    m.iter()
        .filter(|(k, _)| std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

pub(super) fn assert_matches(t: &BTree, e: &Engine, m: &Model) -> super::TreeStats {
    let stats = t.check(e).unwrap();
    assert_eq!(stats.entries, m.len());
    assert_eq!(&scan(t, e, Bound::Unbounded, Bound::Unbounded, false), m);
    assert_eq!(&scan(t, e, Bound::Unbounded, Bound::Unbounded, true), m);
    stats
}

/// A value whose bytes name the write that produced it.
pub(super) fn value(seq: u64, len: usize) -> Vec<u8> {
    seq.to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

pub(super) fn key_of(n: u32) -> Vec<u8> {
    format!("{n:06}").into_bytes()
}

// ---- model test ----

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, usize),
    Delete(Vec<u8>),
    Get(Vec<u8>),
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>, bool),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        12 => (0u32..400).prop_map(|n| format!("{n:04}").into_bytes()),
        2 => (0u32..400, 0usize..=node::max_key_len(4096) - 4).prop_map(|(n, pad)| {
            let mut k = format!("{n:04}").into_bytes();
            k.resize(4 + pad, b'~');
            k
        }),
        1 => Just(Vec::new()),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        1 => Just(Bound::Unbounded),
        2 => key().prop_map(Bound::Included),
        2 => key().prop_map(Bound::Excluded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (key(), 0usize..=1024).prop_map(|(k, n)| Op::Put(k, n)),
        7 => key().prop_map(Op::Delete),
        2 => key().prop_map(Op::Get),
        1 => (bound(), bound(), any::<bool>()).prop_map(|(l, h, r)| Op::Range(l, h, r)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Puts, deletes, gets and scans (both directions) on 4 KiB pages with
    /// values up to the maximum size, so splits and merges happen all the
    /// time; the tree must behave like a `BTreeMap` and pass its check.
    #[test]
    fn tree_matches_btreemap_model(ops in proptest::collection::vec(op(), 500..2500)) {
        let e = engine(4096);
        let t = new_tree(&e);
        let mut m = Model::new();
        for (seq, op) in ops.into_iter().enumerate() {
            match op {
                Op::Put(k, n) => {
                    let v = value(seq as u64, n);
                    let replaced = t.put(&e, &k, &v).unwrap();
                    prop_assert_eq!(replaced, m.insert(k, v).is_some());
                }
                Op::Delete(k) => prop_assert_eq!(t.delete(&e, &k).unwrap(), m.remove(&k).is_some()),
                Op::Get(k) => prop_assert_eq!(t.get(&e, &k).unwrap(), m.get(&k).cloned()),
                Op::Range(lo, hi, rev) => {
                    let got = scan(&t, &e, lo.clone(), hi.clone(), rev);
                    prop_assert_eq!(got, model_range(&m, &lo, &hi));
                }
            }
            if seq % 250 == 0 {
                t.check(&e).unwrap();
            }
        }
        assert_matches(&t, &e, &m);
        prop_assert_eq!(t.root(), BTree::open(t.root()).root());
    }
}

// ---- concurrency ----

const THREADS: u32 = 8;
const KEYS: u32 = 2400;

/// One writer-reader: owns the keys `≡ tid (mod THREADS)`, so its own
/// model is exact for them even while others write the neighbouring keys.
fn worker(e: &Engine, t: BTree, tid: u32, seed: u64) -> Model {
    let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(tid));
    let mut m = Model::new();
    for seq in 0..1200u64 {
        let k = key_of(rng.gen_range(0..KEYS / THREADS) * THREADS + tid);
        match rng.gen_range(0..10) {
            0..=4 => {
                let v = value(seq << 8 | u64::from(tid), rng.gen_range(0..=1024));
                assert_eq!(t.put(e, &k, &v).unwrap(), m.insert(k, v).is_some());
            }
            5..=6 => assert_eq!(t.delete(e, &k).unwrap(), m.remove(&k).is_some()),
            7..=8 => assert_eq!(t.get(e, &k).unwrap(), m.get(&k).cloned()),
            _ => {
                let a = rng.gen_range(0..KEYS);
                let (lo, hi) = (key_of(a), key_of(a + rng.gen_range(0..400)));
                let (lo, hi) = (Bound::Included(lo), Bound::Excluded(hi));
                let got = scan(&t, e, lo.clone(), hi.clone(), rng.gen());
                let mine: Model = got.into_iter().filter(|(k, _)| own(k, tid)).collect();
                assert_eq!(mine, model_range(&m, &lo, &hi), "thread {tid} scan");
            }
        }
    }
    m
}

fn own(k: &[u8], tid: u32) -> bool {
    std::str::from_utf8(k)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .is_some_and(|n| n % THREADS == tid)
}

#[test]
fn eight_threads_on_overlapping_ranges_match_model() {
    let seed: u64 = rand::random();
    eprintln!("eight_threads_on_overlapping_ranges_match_model seed = {seed}");
    let e = engine(4096);
    let t = new_tree(&e);
    let models: Vec<Model> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|tid| {
                let e = &e;
                s.spawn(move || worker(e, t, tid, seed))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Model = models.into_iter().flatten().collect();
    let stats = assert_matches(&t, &e, &all);
    assert!(
        stats.height >= 2,
        "the test must exercise splits: {stats:?}"
    );
}

// ---- shape ----

#[test]
fn deleting_everything_frees_pages_and_shrinks_height() {
    let e = engine(4096);
    let t = new_tree(&e);
    let mut keys: Vec<u32> = (0..4000).collect();
    for &k in &keys {
        t.put(&e, &key_of(k), &value(u64::from(k), 100 + k as usize % 200))
            .unwrap();
    }
    let full = t.check(&e).unwrap();
    assert!(full.height >= 3, "{full:?}");
    assert_eq!(
        pages_in_use(&e),
        Some(full.leaf_pages + full.internal_pages)
    );
    keys.shuffle(&mut SmallRng::seed_from_u64(7));
    for (i, k) in keys.iter().enumerate() {
        assert!(t.delete(&e, &key_of(*k)).unwrap());
        if i % 500 == 0 {
            let s = t.check(&e).unwrap();
            assert!(
                s.fill > 0.25 || s.leaf_pages < 4,
                "merges keep pages filled: {s:?}"
            );
        }
    }
    let empty = t.check(&e).unwrap();
    assert_eq!(
        (
            empty.height,
            empty.leaf_pages,
            empty.internal_pages,
            empty.entries
        ),
        (1, 1, 0, 0)
    );
    assert_eq!(
        pages_in_use(&e),
        Some(1),
        "every page but the root is freed"
    );
}

#[test]
fn root_page_never_moves_while_the_tree_grows() {
    let e = engine(4096);
    let t = new_tree(&e);
    let root = t.root();
    let mut heights = Vec::new();
    for k in 0..3000 {
        t.put(&e, &key_of(k), &value(1, 300)).unwrap();
        if k % 500 == 0 {
            heights.push(t.check(&e).unwrap().height);
        }
    }
    assert_eq!(t.root(), root);
    assert!(heights.windows(2).all(|w| w[0] <= w[1]) && heights[heights.len() - 1] >= 3);
    assert_eq!(t.get(&e, &key_of(1234)).unwrap(), Some(value(1, 300)));
}

#[test]
fn limits_empty_keys_and_maximal_entries() {
    let ps = 4096;
    let e = engine(ps);
    let t = new_tree(&e);
    let (mk, mv) = (node::max_key_len(ps), node::max_value_len(ps));
    assert!(matches!(
        t.put(&e, &vec![1; mk + 1], b""),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(
        t.put(&e, b"k", &vec![1; mv + 1]),
        Err(Error::ValueTooLarge { .. })
    ));
    assert_eq!(t.get(&e, &vec![1; mk + 1]).unwrap(), None);
    assert!(!t.delete(&e, &vec![1; mk + 1]).unwrap());
    let mut m = Model::new();
    m.insert(Vec::new(), b"empty key".to_vec());
    for i in 0..40u8 {
        let mut k = vec![i; mk];
        k[0] = i;
        m.insert(k, vec![i; mv]);
    }
    for (k, v) in &m {
        assert!(!t.put(&e, k, v).unwrap());
    }
    assert_matches(&t, &e, &m);
    assert_eq!(t.get(&e, b"").unwrap(), Some(b"empty key".to_vec()));
    for k in m.keys() {
        assert!(t.delete(&e, k).unwrap());
    }
    assert_matches(&t, &e, &Model::new());
}

#[test]
fn failed_allocation_leaves_the_tree_unchanged() {
    let e = engine(4096);
    let t = new_tree(&e);
    let mut m = Model::new();
    let mut seq = 0u64;
    let mut failures = 0;
    for round in 0..6 {
        for _ in 0..200 {
            seq += 1;
            let k = key_of((seq * 7919 % 5000) as u32);
            let v = value(seq, 600);
            assert!(set_alloc_failpoint(&e, (round % 2 == 1).then_some(0)));
            match t.put(&e, &k, &v) {
                Ok(_) => {
                    m.insert(k, v);
                }
                Err(Error::SpaceFull(_)) => failures += 1,
                Err(other) => panic!("unexpected {other}"),
            }
        }
        assert!(set_alloc_failpoint(&e, None));
        assert_matches(&t, &e, &m);
    }
    assert!(failures > 10);
    assert_eq!(pages_in_use(&e), {
        let s = t.check(&e).unwrap();
        Some(s.leaf_pages + s.internal_pages)
    });
}

#[test]
fn scans_respect_bounds_in_both_directions() {
    let e = engine(4096);
    let t = new_tree(&e);
    let mut m = Model::new();
    for k in (0..2000).step_by(2) {
        m.insert(key_of(k), value(u64::from(k), 150));
        t.put(&e, &key_of(k), &value(u64::from(k), 150)).unwrap();
    }
    let b = |k: u32, incl: bool| {
        if incl {
            Bound::Included(key_of(k))
        } else {
            Bound::Excluded(key_of(k))
        }
    };
    for (lo, hi) in [
        (b(100, true), b(900, false)),
        (b(100, false), b(900, true)),
        (b(101, true), b(101, true)),
        (b(900, true), b(100, true)),
        (Bound::Unbounded, b(0, false)),
        (b(1998, true), Bound::Unbounded),
    ] {
        for rev in [false, true] {
            let got = scan(&t, &e, lo.clone(), hi.clone(), rev);
            assert_eq!(got, model_range(&m, &lo, &hi), "{lo:?}..{hi:?} rev={rev}");
        }
    }
}

#[test]
fn deleting_in_key_order_merges_with_both_neighbours() {
    for descending in [false, true] {
        let e = engine(4096);
        let t = new_tree(&e);
        let mut keys: Vec<u32> = (0..2500).collect();
        for &k in &keys {
            t.put(&e, &key_of(k), &value(u64::from(k), 120)).unwrap();
        }
        if descending {
            keys.reverse();
        }
        let mut m: Model = keys
            .iter()
            .map(|&k| (key_of(k), value(u64::from(k), 120)))
            .collect();
        for (i, k) in keys.iter().enumerate() {
            assert!(t.delete(&e, &key_of(*k)).unwrap());
            m.remove(&key_of(*k));
            if i % 400 == 0 {
                let s = assert_matches(&t, &e, &m);
                assert!(
                    s.leaf_pages <= m.len() / 8 + 2,
                    "underfull leaves merge: {s:?}"
                );
            }
        }
        assert_eq!(pages_in_use(&e), Some(1));
    }
}

#[test]
fn allocation_failing_half_way_through_a_root_split_changes_nothing() {
    let e = engine(4096);
    let t = new_tree(&e);
    let mut m = Model::new();
    let mut k = 0;
    // Fill the root leaf until the next put must grow the tree (two pages).
    loop {
        let before = t.check(&e).unwrap();
        if !set_alloc_failpoint(&e, Some(1)) {
            eprintln!("skipped: this engine cannot fail the second allocation only");
            return;
        }
        let r = t.put(&e, &key_of(k), &value(u64::from(k), 700));
        assert!(set_alloc_failpoint(&e, None));
        match r {
            Ok(_) => {
                m.insert(key_of(k), value(u64::from(k), 700));
                k += 1;
            }
            Err(Error::SpaceFull(_)) => {
                assert_eq!(t.check(&e).unwrap(), before);
                break;
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_matches(&t, &e, &m);
    assert_eq!(
        pages_in_use(&e),
        Some(1),
        "the page allocated first was given back"
    );
    t.put(&e, &key_of(k), &value(1, 700)).unwrap();
    assert_eq!(t.check(&e).unwrap().height, 2);
}

// ---- bulk load ----

/// Bulk-load `m` into a new tree at `fill` percent; the tree must then
/// hold exactly `m`, pass the full check, and take random writes.
fn bulk(e: &Engine, m: &Model, fill: u8) -> (BTree, super::TreeStats) {
    let t = new_tree(e);
    let mut load =
        super::bulk::BulkLoad::begin(e, t, "t", fill, super::bulk::owns_nothing).unwrap();
    for (k, v) in m {
        load.push(k, v).unwrap();
    }
    let (n, _) = load.finish().unwrap();
    assert_eq!(n as usize, m.len());
    let stats = assert_matches(&t, e, m);
    (t, stats)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn bulk_load_then_random_ops_match_the_model(
        entries in proptest::collection::btree_map(key(), 0usize..400, 0..3000),
        fill in 10u8..=100,
        ops in proptest::collection::vec(op(), 0..400),
    ) {
        let e = engine(4096);
        let m: Model = entries.into_iter().enumerate()
            .map(|(i, (k, len))| (k, value(i as u64, len)))
            .collect();
        let (t, _) = bulk(&e, &m, fill);
        let mut m = m;
        for (seq, op) in ops.into_iter().enumerate() {
            match op {
                Op::Put(k, len) => {
                    let v = value(seq as u64 + 1_000_000, len);
                    let replaced = t.put(&e, &k, &v).unwrap();
                    prop_assert_eq!(replaced, m.insert(k, v).is_some());
                }
                Op::Delete(k) => {
                    prop_assert_eq!(t.delete(&e, &k).unwrap(), m.remove(&k).is_some());
                }
                Op::Get(k) => prop_assert_eq!(t.get(&e, &k).unwrap(), m.get(&k).cloned()),
                Op::Range(lo, hi, rev) => {
                    prop_assert_eq!(scan(&t, &e, lo.clone(), hi.clone(), rev), model_range(&m, &lo, &hi));
                }
            }
        }
        assert_matches(&t, &e, &m);
    }
}

#[test]
fn bulk_load_fills_leaves_to_the_fill_factor_and_builds_a_deep_tree() {
    let e = engine(4096);
    let m: Model = (0..60_000u32)
        .map(|i| (key_of(i), value(u64::from(i), 40)))
        .collect();
    let (_, full) = bulk(&e, &m, 100);
    assert!(full.height >= 3, "{full:?}");
    assert!(
        full.fill > 0.90 && full.fill <= 15.0 / 16.0 + 0.01,
        "{full:?}"
    );
    let e = engine(4096);
    let (_, half) = bulk(&e, &m, 50);
    assert!(half.fill > 0.45 && half.fill < 0.55, "{half:?}");
    assert!(
        half.leaf_pages > full.leaf_pages * 17 / 10,
        "{half:?} vs {full:?}"
    );
}

/// Every node of the tree under `root`: (is leaf, cells, used bytes).
fn nodes(e: &Engine, root: crate::page::PageId) -> Vec<(bool, usize, usize)> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        let page = e.pool.read(id).unwrap();
        let n = node::NodeRef::new(&page);
        out.push((n.is_leaf(), n.n_cells(), n.used_bytes()));
        if !n.is_leaf() {
            for pos in 0..=n.n_cells() {
                todo.push(crate::page::PageId::new(id.space, n.child(pos)));
            }
        }
    }
    out
}

/// Keys of the largest size the page takes, all sharing every byte but the
/// last eight, so that separators are as long as keys: at the lowest fill
/// factor a node holds less than one of them. A bulk load still builds a
/// valid tree that takes writes, nodes stay within the fill factor except
/// for what they must hold (a leaf its one entry, a node above its two
/// separators).
#[test]
fn bulk_load_with_the_longest_keys_at_any_fill_factor() {
    for ps in [4096, 16384] {
        let mk = node::max_key_len(ps);
        let key = |i: u32| {
            let mut k = vec![b'k'; mk - 8];
            k.extend_from_slice(format!("{i:08}").as_bytes());
            k
        };
        let m: Model = (0..300u32)
            .map(|i| (key(i), value(u64::from(i), (i as usize * 37) % 200)))
            .collect();
        for fill in [10u8, 40, 100] {
            let e = engine(ps);
            let (t, stats) = bulk(&e, &m, fill);
            let target = super::bulk::fill_bytes(ps, fill);
            for (leaf, cells, used) in nodes(&e, t.root()) {
                let must = if leaf { 1 } else { 2 };
                assert!(
                    used <= target || cells <= must,
                    "{ps}-byte pages, fill factor {fill}: a {} node of {cells} cells \
                     uses {used} bytes, more than {target} ({stats:?})",
                    if leaf { "leaf" } else { "internal" }
                );
                assert!(leaf || cells >= 1, "an internal node without a separator");
            }
            // The tree takes writes: every other row replaced by a longer
            // one, every third deleted (splits and merges of nodes whose
            // separators are as long as keys).
            let mut m = m.clone();
            for i in (0..300u32).step_by(2) {
                let v = value(u64::from(i) + 1000, 300);
                assert!(t.put(&e, &key(i), &v).unwrap());
                m.insert(key(i), v);
            }
            for i in (0..300u32).step_by(3) {
                assert!(t.delete(&e, &key(i)).unwrap());
                m.remove(&key(i));
            }
            assert_matches(&t, &e, &m);
        }
    }
}

#[test]
fn a_failed_bulk_load_frees_every_page_and_leaves_the_table_empty() {
    let e = engine(4096);
    let t = new_tree(&e);
    let before = pages_in_use(&e);
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for i in 0..20_000u32 {
        load.push(&key_of(i), &value(u64::from(i), 30)).unwrap();
    }
    let err = load.push(&key_of(5), b"late").unwrap_err();
    assert!(
        matches!(&err, Error::BulkLoad { table, reason } if table == "t" && reason.contains("ascending")),
        "{err}"
    );
    drop(load);
    assert_eq!(pages_in_use(&e), before);
    assert_eq!(assert_matches(&t, &e, &Model::new()).entries, 0);
    // The table takes a new bulk load afterwards, and refuses one once it
    // holds rows.
    let m: Model = (0..500u32).map(|i| (key_of(i), value(1, 9))).collect();
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for (k, v) in &m {
        load.push(k, v).unwrap();
    }
    load.finish().unwrap();
    assert_matches(&t, &e, &m);
    let err = super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing)
        .err()
        .unwrap();
    assert!(err.to_string().contains("not empty"), "{err}");
}

#[test]
fn writes_during_a_bulk_load_win_and_the_load_is_discarded() {
    let e = engine(4096);
    let t = new_tree(&e);
    let before = pages_in_use(&e);
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for i in 0..5_000u32 {
        load.push(&key_of(i), &value(2, 30)).unwrap();
    }
    // The table still looks empty, and takes a write.
    assert_eq!(t.get(&e, &key_of(1)).unwrap(), None);
    t.put(&e, b"other", b"row").unwrap();
    let err = load.finish().unwrap_err();
    assert!(err.to_string().contains("written into the table"), "{err}");
    let m: Model = [(b"other".to_vec(), b"row".to_vec())].into_iter().collect();
    assert_matches(&t, &e, &m);
    assert_eq!(pages_in_use(&e), before);
}

#[test]
fn an_empty_bulk_load_and_a_single_leaf_load() {
    let e = engine(4096);
    let t = new_tree(&e);
    let before = pages_in_use(&e);
    let load = super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    assert_eq!(load.finish().unwrap().0, 0);
    assert_eq!(pages_in_use(&e), before);
    let m: Model = (0..3u32).map(|i| (key_of(i), value(3, 5))).collect();
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for (k, v) in &m {
        load.push(k, v).unwrap();
    }
    load.finish().unwrap();
    assert_eq!(assert_matches(&t, &e, &m).height, 1);
    assert_eq!(pages_in_use(&e), before);
}

#[test]
fn writes_that_split_the_root_during_a_bulk_load_leave_no_page_behind() {
    let e = engine(4096);
    let t = new_tree(&e);
    let before = pages_in_use(&e).unwrap();
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for i in 0..5_000u32 {
        load.push(&key_of(i), &value(2, 30)).unwrap();
    }
    // Enough rows to split the table's root: the pending mark goes with
    // the old root image.
    let mut m = Model::new();
    for i in 0..300u32 {
        let k = format!("w{i:05}").into_bytes();
        t.put(&e, &k, &value(3, 40)).unwrap();
        m.insert(k, value(3, 40));
    }
    let err = load.finish().unwrap_err();
    assert!(err.to_string().contains("written into the table"), "{err}");
    let stats = assert_matches(&t, &e, &m);
    assert!(stats.height > 1, "{stats:?}");
    let tree_pages = stats.leaf_pages + stats.internal_pages;
    assert_eq!(pages_in_use(&e).unwrap(), before - 1 + tree_pages);
}

/// Set the space header's high-water mark; returns the old one.
pub(super) fn set_hwm(e: &Engine, hwm: u32) -> u32 {
    use crate::engine::space_header as sh;
    use crate::page::{get_u32, put_u32, PageId};
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(1, e.page_size())).unwrap();
    let mut mtr = Mtr::new(e, &budget);
    let mut hdr = e.pool.write(PageId::new(e.space_id(), 0)).unwrap();
    let old = get_u32(&hdr, sh::HWM);
    put_u32(&mut hdr, sh::HWM, hwm);
    mtr.keep(hdr);
    mtr.commit().unwrap();
    old
}

/// The leaf write that grows the hidden root gets its first page (from the
/// free list) and fails to allocate the second: everything it changed is
/// put back, the page it took is freed again, and the same row then goes
/// on as if nothing happened.
#[test]
fn an_allocation_failing_half_way_through_a_bulk_leaf_changes_nothing() {
    let e = engine(4096);
    let t = new_tree(&e);
    let before = pages_in_use(&e).unwrap();
    let m: Model = (0..2_000u32)
        .map(|i| (key_of(i), value(u64::from(i), 60)))
        .collect();
    let rows: Vec<_> = m.iter().collect();
    let mut load =
        super::bulk::BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    let mut i = 0;
    while load.progress().0 < 1 {
        load.push(rows[i].0, rows[i].1).unwrap();
        i += 1;
    }
    // One page on the free list.
    let spare = new_tree(&e);
    {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, 4096)).unwrap();
        let mut mtr = Mtr::new(&e, &budget);
        let p = e.pool.write(spare.root()).unwrap();
        mtr.free_page(p).unwrap();
        mtr.commit().unwrap();
    }
    // From here on only that page can be allocated.
    let hwm = set_hwm(&e, u32::MAX);
    let in_use = pages_in_use(&e);
    let hidden = load.progress().1;
    let image = e.pool.read(hidden).unwrap().to_vec();
    let failed = loop {
        match load.push(rows[i].0, rows[i].1) {
            Ok(()) => i += 1,
            Err(err) => break err,
        }
    };
    assert!(matches!(failed, Error::SpaceFull(_)), "{failed}");
    assert_eq!(load.progress().0, 1);
    // The hidden root (the first leaf, which the failed write had moved
    // down a level) is as it was, and the page it took is free again.
    let now = e.pool.read(hidden).unwrap().to_vec();
    assert_eq!(node::NodeRef::new(&now).level(), 0);
    assert_eq!(now[32..], image[32..]);
    assert_eq!(pages_in_use(&e), in_use);
    set_hwm(&e, hwm);
    // The same row again, and the rest.
    for (k, v) in &rows[i..] {
        load.push(k, v).unwrap();
    }
    load.finish().unwrap();
    let stats = assert_matches(&t, &e, &m);
    assert_eq!(
        pages_in_use(&e).unwrap(),
        before - 1 + stats.leaf_pages + stats.internal_pages
    );
}

/// A cursor dropped leaves its buffers to its thread's next cursor; a
/// thread that ends with buffers kept frees them (their drop at the
/// thread's end once stored new buffers into the slot being destroyed, and
/// recursed until the stack overflowed), and the next cursor on a thread
/// starts clean: every scan sees exactly its own range.
#[test]
fn cursors_reuse_their_threads_buffers_and_a_thread_ending_frees_them() {
    let e = engine(4096);
    let t = new_tree(&e);
    for i in 0..2_000 {
        t.put(&e, &key_of(i), &value(u64::from(i), 40)).unwrap();
    }
    let (e, t) = (&*e, &t);
    let scan = move |lo: u32, hi: u32| -> Vec<Vec<u8>> {
        t.range(
            e,
            Bound::Included(key_of(lo)),
            Bound::Excluded(key_of(hi)),
            false,
        )
        .map(|r| r.unwrap().0)
        .collect()
    };
    std::thread::scope(|s| {
        for n in 0..4u32 {
            s.spawn(move || {
                for round in 0..20u32 {
                    let lo = (n * 397 + round * 61) % 1_900;
                    let got = scan(lo, lo + 100);
                    let want: Vec<Vec<u8>> = (lo..lo + 100).map(key_of).collect();
                    assert_eq!(got, want);
                }
                // A scan left unfinished: its buffers hold rows.
                let mut c = t.range(e, Bound::Unbounded, Bound::Unbounded, true);
                assert!(c.next().is_some());
            })
            .join()
            .unwrap();
        }
    });
    assert_eq!(scan(0, 3).len(), 3);
}
